//! The LEDGER reconciliation of decisions §8, from the ledger's own records: every transaction
//! balances, every account equals the sum of its entries, no available balance is negative, no
//! deposit is credited twice. It also checks what makes those hold over time: every pending
//! amount is explained by a pending hold, every hold ended at most once and as recorded, and
//! every stored `balance_after` is what replaying the entries gives.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use uuid::Uuid;

use crate::amount::Amount;
use crate::asset::AssetId;
use crate::error::PortError;

use super::account::{AccountBalances, AccountKey, TotalsError};
use super::entry::{check_entries, entry_id, LedgerTx, Phase, TxKind};
use super::hold::{Hold, HoldState};
use super::posting::Line;
use super::repo::LedgerReads;

/// At most this many discrepancies are listed; a broken ledger can produce one per entry.
pub const DISCREPANCIES_MAX: usize = 1000;

/// What the admin reconciliation reports for scope LEDGER.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerReport {
    pub balanced: bool,
    pub discrepancies: Vec<String>,
    pub accounts: u64,
    pub transactions: u64,
    pub holds: u64,
}

/// Reads the whole ledger (in the caller's read transaction, so one snapshot) and reports every
/// discrepancy found. A port error aborts the check: no report is better than a partial one.
pub fn reconcile<R: LedgerReads + ?Sized>(repo: &mut R) -> Result<LedgerReport, PortError> {
    let mut state = Check::default();
    repo.scan_ledger_transactions(&mut |tx| state.transaction(tx))?;
    repo.scan_ledger_holds(&mut |hold| state.hold(hold))?;
    let mut stored = BTreeMap::new();
    repo.scan_ledger_accounts(&mut |key, balances| {
        stored.insert(key.clone(), *balances);
    })?;
    Ok(state.finish(&stored))
}

/// The non-posted entries of one hold transaction, for comparison with what its hold implies.
#[derive(Debug)]
struct HoldTx {
    id: Uuid,
    kind: TxKind,
    lines: Vec<Line>,
}

#[derive(Debug, Default)]
struct Check {
    found: Vec<String>,
    dropped: usize,
    transactions: u64,
    holds: u64,
    seen: HashSet<Uuid>,
    replayed: BTreeMap<AccountKey, AccountBalances>,
    hold_txs: HashMap<Uuid, Vec<HoldTx>>,
    /// (debits, credits) pending that the pending holds explain, per account.
    held: BTreeMap<AccountKey, (Amount, Amount)>,
    /// (credits, reversals) per deposit id.
    deposits: BTreeMap<Uuid, (u32, u32)>,
}

impl Check {
    fn report(&mut self, message: String) {
        if self.found.len() < DISCREPANCIES_MAX {
            self.found.push(message);
        } else {
            self.dropped += 1;
        }
    }

    fn transaction(&mut self, tx: &LedgerTx) {
        self.transactions += 1;
        let id = tx.id;
        if !self.seen.insert(id) {
            self.report(format!("transaction {id} appears more than once"));
        }
        if let Err(m) = check_entries(&tx.entries) {
            self.report(format!("transaction {id} {m}"));
        }
        if tx.kind.is_hold_kind() != tx.hold_id.is_some() {
            self.report(format!(
                "transaction {id} ({}) has a wrong hold id",
                tx.kind
            ));
        }
        if !tx.kind.is_hold_kind() && tx.entries.iter().any(|e| e.phase != Phase::Posted) {
            self.report(format!(
                "transaction {id} ({}) has pending entries outside a hold",
                tx.kind
            ));
        }
        if let Some(hold_id) = tx.hold_id {
            let lines = tx
                .entries
                .iter()
                .filter(|e| e.phase != Phase::Posted)
                .map(Line::of)
                .collect();
            self.hold_txs.entry(hold_id).or_default().push(HoldTx {
                id,
                kind: tx.kind,
                lines,
            });
        }
        match tx.kind {
            TxKind::DepositCredit => self.deposits.entry(tx.reference_id).or_default().0 += 1,
            TxKind::DepositReversal => self.deposits.entry(tx.reference_id).or_default().1 += 1,
            _ => {}
        }
        for (i, e) in tx.entries.iter().enumerate() {
            if e.id != entry_id(id, i) {
                self.report(format!("transaction {id} entry {i} has id {}", e.id));
            }
            let totals = self.replayed.entry(e.account.clone()).or_default();
            match totals.apply(e.direction, e.phase, e.amount) {
                Ok(()) => {}
                Err(TotalsError::Overflow) => {
                    self.report(format!(
                        "transaction {id} entry {i} overflows {}",
                        e.account
                    ));
                    continue;
                }
                Err(TotalsError::PendingUnderflow) => {
                    self.report(format!(
                        "transaction {id} entry {i} removes more pending than {} had",
                        e.account
                    ));
                    continue;
                }
            }
            let expected = e.account.as_user().map(|_| totals.available());
            match (expected, e.balance_after) {
                (None, None) => {}
                (None, Some(_)) => self.report(format!(
                    "transaction {id} entry {i} has a balance_after on system account {}",
                    e.account
                )),
                (Some(None), _) => self.report(format!(
                    "transaction {id} entry {i} overdraws {}",
                    e.account
                )),
                (Some(Some(replayed)), stored) if stored != Some(replayed) => {
                    self.report(format!(
                        "transaction {id} entry {i} has balance_after {} but replaying gives {replayed}",
                        stored.map_or_else(|| "none".to_owned(), |a| a.to_string())
                    ));
                }
                (Some(Some(_)), _) => {}
            }
        }
    }

    fn hold(&mut self, hold: &Hold) {
        self.holds += 1;
        let id = hold.id;
        let txs = self.hold_txs.remove(&id).unwrap_or_default();
        let reserves: Vec<&HoldTx> = txs
            .iter()
            .filter(|t| t.kind == hold.purpose.reserve_kind())
            .collect();
        match reserves.as_slice() {
            [r] if r.id == hold.reserve_tx_id && r.lines == hold.reserve_lines() => {}
            [_] => self.report(format!(
                "hold {id}: its reserve transaction does not match it"
            )),
            other => self.report(format!(
                "hold {id} has {} reserve transactions",
                other.len()
            )),
        }
        let finishes: Vec<&HoldTx> = txs
            .iter()
            .filter(|t| t.kind != hold.purpose.reserve_kind())
            .collect();
        let expected = match hold.state {
            HoldState::Pending => None,
            HoldState::Settled { amount, tx_id, .. } => {
                Some((hold.purpose.settle_kind(), tx_id, hold.settle_lines(amount)))
            }
            HoldState::Released { tx_id, .. } => Some((
                hold.purpose.release_kind(),
                tx_id,
                Some(hold.release_lines()),
            )),
        };
        match (expected, finishes.as_slice()) {
            (None, []) => {
                let user = self.held.entry(hold.user.key()).or_default();
                user.0 = user.0.checked_add(hold.amount).unwrap_or(Amount::MAX);
                let counter = self.held.entry(hold.counter.clone()).or_default();
                counter.1 = counter.1.checked_add(hold.amount).unwrap_or(Amount::MAX);
            }
            (Some((kind, tx_id, Some(lines))), [f])
                if f.kind == kind && f.id == tx_id && f.lines == lines => {}
            (_, finished) => self.report(format!(
                "hold {id} is {} but has {} finishing transactions that do not match it",
                hold.state.as_str(),
                finished.len()
            )),
        }
    }

    fn finish(mut self, stored: &BTreeMap<AccountKey, AccountBalances>) -> LedgerReport {
        let orphans: Vec<Uuid> = self.hold_txs.keys().copied().collect();
        for hold_id in orphans {
            self.report(format!(
                "transactions refer to hold {hold_id}, which does not exist"
            ));
        }
        let keys: HashSet<&AccountKey> = stored.keys().chain(self.replayed.keys()).collect();
        let mut keys: Vec<&AccountKey> = keys.into_iter().collect();
        keys.sort();
        let mut messages = Vec::new();
        for key in keys {
            let s = stored.get(key).copied().unwrap_or_default();
            let r = self.replayed.get(key).copied().unwrap_or_default();
            if s != r {
                messages.push(format!(
                    "account {key}: stored totals {} but its entries sum to {}",
                    totals_text(&s),
                    totals_text(&r)
                ));
            }
            if key.as_user().is_some() && s.available().is_none() {
                messages.push(format!("account {key}: available balance is negative"));
            }
            let (held_debits, held_credits) = self.held.get(key).copied().unwrap_or_default();
            if (s.debits_pending, s.credits_pending) != (held_debits, held_credits) {
                messages.push(format!(
                    "account {key}: pending debits {} and credits {} but pending holds explain {} and {}",
                    s.debits_pending, s.credits_pending, held_debits, held_credits
                ));
            }
        }
        messages.extend(conservation(stored));
        for (deposit, (credits, reversals)) in &self.deposits {
            // A deposit may be credited, reversed by a reorganization and credited again when
            // re-mined: at most one credit may be outstanding.
            if *credits > reversals + 1 {
                messages.push(format!(
                    "deposit {deposit} is credited {credits} times and reversed {reversals}"
                ));
            }
            if reversals > credits {
                messages.push(format!(
                    "deposit {deposit} is reversed {reversals} times but credited {credits}"
                ));
            }
        }
        for m in messages {
            self.report(m);
        }
        if self.dropped > 0 {
            let more = format!("{} more discrepancies not listed", self.dropped);
            self.found.push(more);
        }
        LedgerReport {
            balanced: self.found.is_empty(),
            discrepancies: self.found,
            accounts: u64::try_from(stored.len()).unwrap_or(u64::MAX),
            transactions: self.transactions,
            holds: self.holds,
        }
    }
}

/// Per asset, debits equal credits over all accounts, posted and pending alike.
fn conservation(stored: &BTreeMap<AccountKey, AccountBalances>) -> Vec<String> {
    let mut sums: BTreeMap<&AssetId, [Option<Amount>; 4]> = BTreeMap::new();
    for (key, b) in stored {
        let s = sums.entry(key.asset()).or_insert([Some(Amount::ZERO); 4]);
        let parts = [
            b.debits_posted,
            b.credits_posted,
            b.debits_pending,
            b.credits_pending,
        ];
        for (sum, part) in s.iter_mut().zip(parts) {
            *sum = sum.and_then(|v| v.checked_add(part));
        }
    }
    let mut out = Vec::new();
    for (asset, [dp, cp, dq, cq]) in sums {
        if dp.is_none() || cp.is_none() || dq.is_none() || cq.is_none() {
            out.push(format!(
                "{} {}: a total overflows when summed",
                asset.network, asset.code
            ));
        } else if dp != cp || dq != cq {
            out.push(format!(
                "{} {}: debits and credits differ over all accounts",
                asset.network, asset.code
            ));
        }
    }
    out
}

fn totals_text(b: &AccountBalances) -> String {
    format!(
        "(debits posted {}, credits posted {}, debits pending {}, credits pending {})",
        b.debits_posted, b.credits_posted, b.debits_pending, b.credits_pending
    )
}
