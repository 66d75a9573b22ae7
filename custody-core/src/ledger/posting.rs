//! The one path by which entries reach the ledger: check everything, compute the new totals in
//! memory, and only then write. A refusal therefore never leaves a partial write behind.

use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;

use uuid::Uuid;

use crate::amount::Amount;
use crate::error::ErrorCode;

use super::account::{AccountBalances, AccountKey, TotalsError};
use super::entry::{check_entries, entry_id, Direction, Entry, LedgerTx, Phase, TxKind, TxMeta};
use super::error::LedgerError;
use super::repo::LedgerRepo;

/// An entry before it has an id and a balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub account: AccountKey,
    pub direction: Direction,
    pub phase: Phase,
    pub amount: Amount,
}

impl Line {
    pub fn new(account: AccountKey, direction: Direction, phase: Phase, amount: Amount) -> Self {
        Line {
            account,
            direction,
            phase,
            amount,
        }
    }

    pub fn of(entry: &Entry) -> Self {
        Line::new(
            entry.account.clone(),
            entry.direction,
            entry.phase,
            entry.amount,
        )
    }
}

/// A checked transaction and the totals of every account it touches after it applies.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub tx: LedgerTx,
    pub totals: BTreeMap<AccountKey, AccountBalances>,
}

/// Checks and computes a transaction without writing anything. Entries apply in order and each
/// must leave its user account within its constraint.
pub(crate) fn prepare<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    kind: TxKind,
    meta: &TxMeta,
    hold_id: Option<Uuid>,
    lines: Vec<Line>,
) -> Result<Prepared, LedgerError> {
    if lines.iter().any(|l| l.amount.is_zero()) {
        return Err(LedgerError::refused(
            ErrorCode::AmountTooSmall,
            "the amount must be greater than zero",
        ));
    }
    if repo.ledger_transaction(meta.id)?.is_some() {
        return Err(LedgerError::TransactionExists(meta.id));
    }
    let mut entries: Vec<Entry> = lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| Entry {
            id: entry_id(meta.id, i),
            account: l.account,
            direction: l.direction,
            phase: l.phase,
            amount: l.amount,
            balance_after: None,
        })
        .collect();
    check_entries(&entries)
        .map_err(|m| LedgerError::Invariant(format!("transaction {} {m}", meta.id)))?;

    let mut totals: BTreeMap<AccountKey, AccountBalances> = BTreeMap::new();
    for e in &mut entries {
        let t = match totals.entry(e.account.clone()) {
            MapEntry::Occupied(o) => o.into_mut(),
            MapEntry::Vacant(v) => v.insert(repo.ledger_account(&e.account)?.unwrap_or_default()),
        };
        t.apply(e.direction, e.phase, e.amount)
            .map_err(|err| match err {
                TotalsError::Overflow => LedgerError::refused(
                    ErrorCode::AmountTooLarge,
                    "the amount is too large for the account",
                ),
                TotalsError::PendingUnderflow => LedgerError::Invariant(format!(
                    "transaction {}: {} has less pending than {} {}",
                    meta.id, e.account, e.direction, e.amount
                )),
            })?;
        if e.account.as_user().is_some() {
            let Some(available) = t.available() else {
                return Err(if e.history_direction() == Some(Direction::Debit) {
                    LedgerError::refused(
                        ErrorCode::InsufficientBalance,
                        "the available balance is insufficient",
                    )
                } else {
                    LedgerError::Invariant(format!("{} is already overdrawn", e.account))
                });
            };
            e.balance_after = Some(available);
        }
    }
    let tx = LedgerTx {
        id: meta.id,
        kind,
        reference_type: meta.reference_type,
        reference_id: meta.reference_id,
        hold_id,
        created_at: meta.created_at,
        entries,
    };
    Ok(Prepared { tx, totals })
}

/// Writes a prepared transaction and its accounts' new totals.
pub(crate) fn commit<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    prepared: &Prepared,
) -> Result<(), LedgerError> {
    repo.insert_ledger_transaction(&prepared.tx)?;
    for (key, balances) in &prepared.totals {
        repo.put_ledger_account(key, balances)?;
    }
    Ok(())
}
