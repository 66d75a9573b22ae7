//! [`LedgerRepo`]: accounts, append-only transactions, holds, history. The same cases run on a
//! store (each step one job) and on a bare [`MemoryLedger`], the reference; the operations of
//! [`custody_core::ledger`] must give the same ledger on both.

use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use custody_core::error::{CoreError, PortError};
use custody_core::ledger::{
    self, entry_id, AccountBalances, AccountKey, Direction, Entry, HistoryEntry, Hold, HoldPurpose,
    HoldState, LedgerError, LedgerReads, LedgerRepo, LedgerTx, NewHold, Phase, ReferenceType,
    Settle, SystemAccount, TxKind, TxMeta, UserAccount,
};

use crate::MemoryLedger;
use custody_core::ports::store::{ReadJob, Store, WriteJob};
use custody_core::{Amount, AssetId, Network};

use super::{at, run_case, tid, uid};
use custody_core::page::Page;

/// A step of a ledger case that writes; it answers a boxed value of its own type.
pub type LedgerWrite =
    Box<dyn FnMut(&mut dyn LedgerRepo) -> Result<Box<dyn Any + Send>, PortError> + Send>;
/// A step of a ledger case that only reads.
pub type LedgerRead =
    Box<dyn FnMut(&mut dyn LedgerReads) -> Result<Box<dyn Any + Send>, PortError> + Send>;
/// What a step answers.
pub type LedgerAnswer<'a> =
    Pin<Box<dyn Future<Output = Result<Box<dyn Any + Send>, PortError>> + 'a>>;

/// What the ledger cases run on.
pub trait LedgerTarget {
    /// Runs `step` as one unit: on a store, one write job, rolled back if the step fails.
    fn write(&self, step: LedgerWrite) -> LedgerAnswer<'_>;
    /// Runs `step` on what the earlier steps wrote: on a store, one read job.
    fn read(&self, step: LedgerRead) -> LedgerAnswer<'_>;
}

/// A store: each step is one write or read job.
pub struct StoreLedger(pub Arc<dyn Store>);

/// The ledger repositories of a store transaction, as `dyn LedgerRepo`.
struct LedgerOf<'a, T: ?Sized>(&'a mut T);

fn to_port(e: CoreError) -> PortError {
    match e {
        CoreError::Port(p) => p,
        other => PortError::permanent("store", other.to_string()),
    }
}

impl LedgerTarget for StoreLedger {
    fn write(&self, mut step: LedgerWrite) -> LedgerAnswer<'_> {
        let job: WriteJob = Box::new(move |tx| Ok(step(&mut LedgerOf(tx))?));
        Box::pin(async move { self.0.write(job).await.map_err(to_port) })
    }

    fn read(&self, mut step: LedgerRead) -> LedgerAnswer<'_> {
        let job: ReadJob = Box::new(move |tx| Ok(step(&mut LedgerOf(tx))?));
        Box::pin(async move { self.0.read(job).await.map_err(to_port) })
    }
}

/// A bare [`MemoryLedger`]: each step runs on it directly. It has no rollback; its methods
/// and the ledger operations change nothing when they fail.
#[derive(Debug, Default)]
pub struct BareLedger(pub Mutex<MemoryLedger>);

impl BareLedger {
    fn ledger(&self) -> std::sync::MutexGuard<'_, MemoryLedger> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LedgerTarget for BareLedger {
    fn write(&self, mut step: LedgerWrite) -> LedgerAnswer<'_> {
        let answer = step(&mut *self.ledger());
        Box::pin(std::future::ready(answer))
    }

    fn read(&self, mut step: LedgerRead) -> LedgerAnswer<'_> {
        let answer = step(&mut *self.ledger());
        Box::pin(std::future::ready(answer))
    }
}

impl<T: LedgerReads + ?Sized> LedgerReads for LedgerOf<'_, T> {
    fn ledger_account(&mut self, key: &AccountKey) -> Result<Option<AccountBalances>, PortError> {
        self.0.ledger_account(key)
    }
    fn ledger_accounts(
        &mut self,
        keys: &[AccountKey],
    ) -> Result<Vec<Option<AccountBalances>>, PortError> {
        self.0.ledger_accounts(keys)
    }
    fn ledger_transaction(&mut self, id: Uuid) -> Result<Option<LedgerTx>, PortError> {
        self.0.ledger_transaction(id)
    }
    fn ledger_hold(&mut self, id: Uuid) -> Result<Option<Hold>, PortError> {
        self.0.ledger_hold(id)
    }
    fn ledger_history(
        &mut self,
        tenant: &custody_core::tenant::TenantId,
        user: &str,
        network: Network,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, PortError> {
        self.0.ledger_history(tenant, user, network, limit)
    }
    fn scan_ledger_accounts(
        &mut self,
        visit: &mut dyn FnMut(&AccountKey, &AccountBalances),
    ) -> Result<(), PortError> {
        self.0.scan_ledger_accounts(visit)
    }
    fn list_ledger_transactions(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<LedgerTx>, PortError> {
        self.0.list_ledger_transactions(page)
    }
    fn scan_ledger_transactions(
        &mut self,
        visit: &mut dyn FnMut(&LedgerTx),
    ) -> Result<(), PortError> {
        self.0.scan_ledger_transactions(visit)
    }
    fn scan_ledger_holds(&mut self, visit: &mut dyn FnMut(&Hold)) -> Result<(), PortError> {
        self.0.scan_ledger_holds(visit)
    }
}

impl<T: LedgerRepo + ?Sized> LedgerRepo for LedgerOf<'_, T> {
    fn put_ledger_account(
        &mut self,
        key: &AccountKey,
        balances: &AccountBalances,
    ) -> Result<(), PortError> {
        self.0.put_ledger_account(key, balances)
    }
    fn insert_ledger_transaction(&mut self, tx: &LedgerTx) -> Result<(), PortError> {
        self.0.insert_ledger_transaction(tx)
    }
    fn insert_ledger_hold(&mut self, hold: &Hold) -> Result<(), PortError> {
        self.0.insert_ledger_hold(hold)
    }
    fn finish_ledger_hold(&mut self, id: Uuid, state: &HoldState) -> Result<(), PortError> {
        self.0.finish_ledger_hold(id, state)
    }
}

/// The ledger cases on stores from `make`, and the cases only a store has (commit-time
/// constraints).
pub async fn ledger_suite(make: impl Fn() -> Arc<dyn Store>) {
    target_cases("ledger_suite", || StoreLedger(make())).await;
    run_case(
        "ledger_suite::an_entry_on_an_account_without_totals_fails_its_job",
        an_entry_on_an_account_without_totals_fails_its_job(&StoreLedger(make())),
    )
    .await;
}

/// The ledger cases on a bare [`MemoryLedger`], the reference every store is compared with.
pub async fn memory_ledger_suite() {
    target_cases("memory_ledger_suite", BareLedger::default).await;
}

async fn target_cases<T: LedgerTarget>(suite: &str, make: impl Fn() -> T) {
    let name = |case: &str| format!("{suite}::{case}");
    run_case(
        &name("accounts_are_put_and_replaced"),
        accounts_are_put_and_replaced(&make()),
    )
    .await;
    run_case(
        &name("transactions_are_kept_whole_in_commit_order"),
        transactions_are_kept_whole_in_commit_order(&make()),
    )
    .await;
    run_case(
        &name("a_transaction_and_an_entry_are_written_once"),
        a_transaction_and_an_entry_are_written_once(&make()),
    )
    .await;
    run_case(&name("a_hold_ends_once"), a_hold_ends_once(&make())).await;
    run_case(
        &name("history_is_newest_first_and_the_users_own"),
        history_is_newest_first_and_the_users_own(&make()),
    )
    .await;
    run_case(
        &name("operations_give_the_reference_ledger"),
        operations_give_the_reference_ledger(&make()),
    )
    .await;
}

async fn lw<T: Send + 'static>(
    t: &dyn LedgerTarget,
    mut f: impl FnMut(&mut dyn LedgerRepo) -> Result<T, PortError> + Send + 'static,
) -> Result<T, PortError> {
    let any = t
        .write(Box::new(move |repo| {
            f(repo).map(|v| Box::new(v) as Box<dyn Any + Send>)
        }))
        .await?;
    Ok(*any.downcast::<T>().expect("a step answers its own type"))
}

async fn lr<T: Send + 'static>(
    t: &dyn LedgerTarget,
    mut f: impl FnMut(&mut dyn LedgerReads) -> Result<T, PortError> + Send + 'static,
) -> T {
    let any = t
        .read(Box::new(move |repo| {
            f(repo).map(|v| Box::new(v) as Box<dyn Any + Send>)
        }))
        .await
        .unwrap_or_else(|e| panic!("a ledger read failed: {e}"));
    *any.downcast::<T>().expect("a step answers its own type")
}

/// Everything the ledger holds, in a comparable form.
#[derive(Debug, PartialEq, Eq)]
struct Contents {
    accounts: BTreeMap<AccountKey, AccountBalances>,
    transactions: Vec<LedgerTx>,
    holds: BTreeMap<Uuid, Hold>,
}

fn contents(repo: &mut dyn LedgerReads) -> Result<Contents, PortError> {
    let mut c = Contents {
        accounts: BTreeMap::new(),
        transactions: Vec::new(),
        holds: BTreeMap::new(),
    };
    repo.scan_ledger_accounts(&mut |k, b| {
        c.accounts.insert(k.clone(), *b);
    })?;
    repo.scan_ledger_transactions(&mut |tx| c.transactions.push(tx.clone()))?;
    repo.scan_ledger_holds(&mut |h| {
        c.holds.insert(h.id, h.clone());
    })?;
    Ok(c)
}

fn usdt() -> AssetId {
    AssetId::new(Network::Bsc, "USDT")
}

fn user(tenant: &str, name: &str, asset: AssetId) -> UserAccount {
    UserAccount::new(tenant, name, asset)
}

fn alice() -> UserAccount {
    user("t1", "alice", usdt())
}

fn system(account: SystemAccount, asset: AssetId) -> AccountKey {
    AccountKey::system(account, asset)
}

fn units(n: u128) -> Amount {
    Amount::from_units(n)
}

/// A raw entry: (account, direction, phase, amount, balance_after).
type Raw = (AccountKey, Direction, Phase, u128, Option<u128>);

fn raw_tx(n: u128, kind: TxKind, entries: Vec<Raw>) -> LedgerTx {
    let id = uid(n);
    LedgerTx {
        id,
        kind,
        reference_type: ReferenceType::Deposit,
        reference_id: uid(n + 1_000),
        hold_id: None,
        created_at: at(i64::try_from(n).unwrap_or(0)),
        entries: entries
            .into_iter()
            .enumerate()
            .map(|(i, (account, direction, phase, amount, after))| Entry {
                id: entry_id(id, i),
                account,
                direction,
                phase,
                amount: units(amount),
                balance_after: after.map(units),
            })
            .collect(),
    }
}

/// Inserts `tx` with totals for every account it names (a store requires them at commit).
fn insert_with_accounts(repo: &mut dyn LedgerRepo, tx: &LedgerTx) -> Result<(), PortError> {
    for e in &tx.entries {
        if repo.ledger_account(&e.account)?.is_none() {
            repo.put_ledger_account(&e.account, &AccountBalances::ZERO)?;
        }
    }
    repo.insert_ledger_transaction(tx)
}

fn deposit_tx(n: u128, to: &UserAccount, amount: u128) -> LedgerTx {
    let clearing = system(SystemAccount::DepositClearing, to.asset.clone());
    raw_tx(
        n,
        TxKind::DepositCredit,
        vec![
            (clearing, Direction::Debit, Phase::Posted, amount, None),
            (
                to.key(),
                Direction::Credit,
                Phase::Posted,
                amount,
                Some(amount),
            ),
        ],
    )
}

async fn accounts_are_put_and_replaced(t: &dyn LedgerTarget) {
    let a = alice().key();
    let b = system(SystemAccount::Treasury, usdt());
    let huge = AccountBalances {
        debits_posted: units(1),
        credits_posted: units(u128::MAX),
        debits_pending: units(u128::MAX - 1),
        credits_pending: units(0),
    };
    let small = AccountBalances {
        debits_posted: units(2),
        ..AccountBalances::ZERO
    };
    let (ka, kb) = (a.clone(), b.clone());
    assert_eq!(lr(t, move |r| r.ledger_account(&ka)).await, None);
    let (ka, kb2) = (a.clone(), kb.clone());
    lw(t, move |r| {
        r.put_ledger_account(&ka, &huge)?;
        r.put_ledger_account(&kb2, &small)
    })
    .await
    .unwrap();
    let (ka, kb2) = (a.clone(), kb.clone());
    let got = lr(t, move |r| {
        Ok((r.ledger_account(&ka)?, r.ledger_account(&kb2)?))
    })
    .await;
    assert_eq!(
        got,
        (Some(huge), Some(small)),
        "amounts are kept losslessly"
    );
    let keys = vec![
        a.clone(),
        system(SystemAccount::Treasury, AssetId::new(Network::Bsc, "BNB")),
        kb.clone(),
        a.clone(),
    ];
    assert_eq!(
        lr(t, move |r| r.ledger_accounts(&keys)).await,
        vec![Some(huge), None, Some(small), Some(huge)],
        "several at once, in the order asked, a missing one as None"
    );
    assert_eq!(lr(t, |r| r.ledger_accounts(&[])).await, vec![]);
    let ka = a.clone();
    lw(t, move |r| r.put_ledger_account(&ka, &small))
        .await
        .unwrap();
    let c = lr(t, |r| contents(r)).await;
    assert_eq!(c.accounts, BTreeMap::from([(a, small), (b, small)]));
    assert!(c.transactions.is_empty() && c.holds.is_empty());
}

async fn transactions_are_kept_whole_in_commit_order(t: &dyn LedgerTarget) {
    // Commit order, not id order.
    let bob = user("t1", "bob", usdt());
    let txs = vec![
        deposit_tx(50, &alice(), 10),
        deposit_tx(20, &bob, u128::MAX),
        raw_tx(
            30,
            TxKind::InternalTransfer,
            vec![
                (alice().key(), Direction::Debit, Phase::Posted, 4, Some(6)),
                (
                    bob.key(),
                    Direction::Credit,
                    Phase::Pending,
                    4,
                    Some(u128::MAX),
                ),
                (
                    alice().key(),
                    Direction::Credit,
                    Phase::PendingVoided,
                    1,
                    None,
                ),
                (
                    bob.key(),
                    Direction::Debit,
                    Phase::PendingPosted,
                    1,
                    Some(0),
                ),
            ],
        ),
    ];
    let mut with_hold = raw_tx(40, TxKind::WithdrawalHold, vec![]);
    with_hold.hold_id = Some(uid(7));
    with_hold.reference_type = ReferenceType::Withdrawal;
    let mut all = txs.clone();
    all.push(with_hold.clone());
    for tx in txs {
        lw(t, move |r| insert_with_accounts(r, &tx)).await.unwrap();
    }
    lw(t, move |r| r.insert_ledger_transaction(&with_hold))
        .await
        .unwrap();
    let got = lr(t, |r| {
        Ok((
            r.ledger_transaction(uid(30))?,
            r.ledger_transaction(uid(40))?,
            r.ledger_transaction(uid(99))?,
            contents(r)?.transactions,
        ))
    })
    .await;
    assert_eq!(got.0.as_ref(), Some(&all[2]), "entries in order");
    assert_eq!(got.1.as_ref(), Some(&all[3]));
    assert_eq!(got.2, None);
    assert_eq!(got.3, all, "scanned in commit order");

    // The admin listing: newest first, in pages that start after the previous page's last.
    let mut newest_first = all.clone();
    newest_first.sort_by_key(|t| std::cmp::Reverse((t.created_at, t.id)));
    let whole = lr(t, |r| r.list_ledger_transactions(Page::first(100))).await;
    assert_eq!(whole.as_ref(), Some(&newest_first));
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = Page {
            limit: 1,
            starting_after: after,
        };
        let rows = lr(t, move |r| r.list_ledger_transactions(page))
            .await
            .expect("a listed cursor");
        let Some(last) = rows.last() else { break };
        after = Some(last.id);
        paged.extend(rows);
    }
    assert_eq!(paged, newest_first, "each transaction once, in order");
    let unknown = lr(t, |r| r.list_ledger_transactions(Page::after(1, uid(999)))).await;
    assert_eq!(unknown, None);
}

async fn a_transaction_and_an_entry_are_written_once(t: &dyn LedgerTarget) {
    let first = deposit_tx(1, &alice(), 10);
    let f = first.clone();
    lw(t, move |r| insert_with_accounts(r, &f)).await.unwrap();
    // The same id again, even with other entries.
    let mut again = deposit_tx(1, &alice(), 99);
    again
        .entries
        .iter_mut()
        .enumerate()
        .for_each(|(i, e)| e.id = entry_id(uid(1_001), i));
    assert!(lw(t, move |r| insert_with_accounts(r, &again))
        .await
        .is_err());
    // Another id whose entry reuses an id already written.
    let mut reused = deposit_tx(2, &alice(), 5);
    reused.entries[1].id = first.entries[0].id;
    assert!(lw(t, move |r| insert_with_accounts(r, &reused))
        .await
        .is_err());
    // One transaction with the same entry id twice.
    let mut twice = deposit_tx(3, &alice(), 5);
    twice.entries[1].id = twice.entries[0].id;
    assert!(lw(t, move |r| insert_with_accounts(r, &twice))
        .await
        .is_err());
    // Ids unused so far, but not the ones derived from the entries' positions: a store
    // keeps entry ids unique by refusing them (it need not index the ids).
    let mut underived = deposit_tx(4, &alice(), 5);
    underived.entries[0].id = uid(77);
    assert!(lw(t, move |r| insert_with_accounts(r, &underived))
        .await
        .is_err());
    let mut swapped = deposit_tx(5, &alice(), 5);
    let (a, b) = (swapped.entries[0].id, swapped.entries[1].id);
    swapped.entries[0].id = b;
    swapped.entries[1].id = a;
    assert!(lw(t, move |r| insert_with_accounts(r, &swapped))
        .await
        .is_err());
    let c = lr(t, |r| contents(r)).await;
    assert_eq!(c.transactions, vec![first], "nothing of the refused writes");
}

fn hold(n: u128, state: HoldState) -> Hold {
    Hold {
        id: uid(n),
        purpose: if n % 2 == 0 {
            HoldPurpose::Swap
        } else {
            HoldPurpose::Withdrawal
        },
        user: alice(),
        counter: system(SystemAccount::Treasury, usdt()),
        amount: units(u128::MAX - n),
        reference_type: ReferenceType::Withdrawal,
        reference_id: uid(n + 100),
        reserve_tx_id: uid(n + 200),
        created_at: at(i64::try_from(n).unwrap_or(0)),
        state,
    }
}

async fn a_hold_ends_once(t: &dyn LedgerTarget) {
    let released_at_insert = hold(
        3,
        HoldState::Released {
            tx_id: uid(33),
            at: at(333),
        },
    );
    let rows = [
        hold(1, HoldState::Pending),
        hold(2, HoldState::Pending),
        released_at_insert.clone(),
    ];
    lw(t, move |r| {
        rows.iter().try_for_each(|h| r.insert_ledger_hold(h))
    })
    .await
    .unwrap();
    assert!(
        lw(t, |r| r.insert_ledger_hold(&hold(1, HoldState::Pending)))
            .await
            .is_err()
    );

    let settled = HoldState::Settled {
        amount: units(u128::MAX - 5),
        tx_id: uid(11),
        at: at(1_000),
    };
    let released = HoldState::Released {
        tx_id: uid(22),
        at: at(2_000),
    };
    lw(t, move |r| r.finish_ledger_hold(uid(1), &settled))
        .await
        .unwrap();
    lw(t, move |r| r.finish_ledger_hold(uid(2), &released))
        .await
        .unwrap();
    // Not pending any more, unknown, or finished as pending: refused, changing nothing.
    assert!(lw(t, move |r| r.finish_ledger_hold(uid(1), &released))
        .await
        .is_err());
    assert!(lw(t, move |r| r.finish_ledger_hold(uid(3), &settled))
        .await
        .is_err());
    assert!(lw(t, move |r| r.finish_ledger_hold(uid(9), &released))
        .await
        .is_err());
    lw(t, |r| r.insert_ledger_hold(&hold(4, HoldState::Pending)))
        .await
        .unwrap();
    assert!(lw(t, |r| r.finish_ledger_hold(uid(4), &HoldState::Pending))
        .await
        .is_err());

    let got = lr(t, |r| {
        Ok((
            r.ledger_hold(uid(1))?,
            r.ledger_hold(uid(2))?,
            r.ledger_hold(uid(9))?,
            contents(r)?.holds,
        ))
    })
    .await;
    let settled_hold = Hold {
        state: settled,
        ..hold(1, HoldState::Pending)
    };
    let released_hold = Hold {
        state: released,
        ..hold(2, HoldState::Pending)
    };
    assert_eq!(got.0, Some(settled_hold.clone()));
    assert_eq!(got.1, Some(released_hold.clone()));
    assert_eq!(got.2, None);
    assert_eq!(
        got.3,
        BTreeMap::from([
            (uid(1), settled_hold),
            (uid(2), released_hold),
            (uid(3), released_at_insert),
            (uid(4), hold(4, HoldState::Pending)),
        ])
    );
}

async fn history_is_newest_first_and_the_users_own(t: &dyn LedgerTarget) {
    let bnb = AssetId::new(Network::Bsc, "BNB");
    let tron = AssetId::new(Network::Tron, "USDT");
    let alice_bnb = user("t1", "alice", bnb.clone());
    let alice_tron = user("t1", "alice", tron.clone());
    let alice_t2 = user("t2", "alice", usdt());
    let bob = user("t1", "bob", usdt());
    let treasury = system(SystemAccount::Treasury, usdt());
    use Direction::*;
    use Phase::*;
    let txs = vec![
        deposit_tx(1, &alice(), 100),
        raw_tx(
            2,
            TxKind::WithdrawalHold,
            vec![
                (alice().key(), Debit, Pending, 30, Some(70)),
                (treasury.clone(), Credit, Pending, 30, None),
            ],
        ),
        // A pending debit becoming posted leaves `available` alone: no history row.
        raw_tx(
            3,
            TxKind::WithdrawalSettle,
            vec![
                (alice().key(), Debit, PendingPosted, 30, Some(70)),
                (treasury.clone(), Credit, PendingPosted, 30, None),
            ],
        ),
        raw_tx(
            4,
            TxKind::InternalTransfer,
            vec![
                (alice().key(), Debit, Posted, 5, Some(65)),
                (bob.key(), Credit, Posted, 5, Some(5)),
            ],
        ),
        raw_tx(
            5,
            TxKind::DepositCredit,
            vec![
                (
                    system(SystemAccount::DepositClearing, bnb),
                    Debit,
                    Posted,
                    9,
                    None,
                ),
                (alice_bnb.key(), Credit, Posted, 9, Some(9)),
                (alice_tron.key(), Credit, Posted, 1, Some(1)),
                (alice_t2.key(), Credit, Posted, 1, Some(1)),
                (
                    system(SystemAccount::DepositClearing, tron),
                    Debit,
                    Posted,
                    1,
                    None,
                ),
                (
                    system(SystemAccount::DepositClearing, usdt()),
                    Debit,
                    Posted,
                    1,
                    None,
                ),
            ],
        ),
        // A user entry without the balance it left is no history row.
        raw_tx(
            6,
            TxKind::Adjustment,
            vec![
                (alice().key(), Credit, Posted, 2, None),
                (
                    system(SystemAccount::Adjustments, usdt()),
                    Debit,
                    Posted,
                    2,
                    None,
                ),
            ],
        ),
        raw_tx(
            7,
            TxKind::InternalTransfer,
            vec![
                (alice().key(), Credit, Posted, 1, Some(66)),
                (alice().key(), Debit, PendingVoided, 1, Some(67)),
                (alice().key(), Debit, Posted, 2, Some(65)),
                (treasury, Credit, Posted, 1, None),
            ],
        ),
    ];
    let row = |n: usize, i: usize| {
        HistoryEntry::from_entry(&txs[n - 1], &txs[n - 1].entries[i]).expect("a history row")
    };
    let alice_rows = vec![
        row(7, 2),
        row(7, 1),
        row(7, 0),
        row(5, 1),
        row(4, 0),
        row(2, 0),
        row(1, 1),
    ];
    let (bob_row, t2_row, tron_row) = (row(4, 1), row(5, 3), row(5, 2));
    for tx in txs.clone() {
        lw(t, move |r| insert_with_accounts(r, &tx)).await.unwrap();
    }
    let history = |tenant: &'static str, name: &'static str, network: Network, limit: usize| {
        lr(t, move |r| {
            r.ledger_history(&tid(tenant), name, network, limit)
        })
    };
    assert_eq!(history("t1", "alice", Network::Bsc, 100).await, alice_rows);
    assert_eq!(
        history("t1", "alice", Network::Bsc, 3).await,
        alice_rows[..3]
    );
    assert!(history("t1", "alice", Network::Bsc, 0).await.is_empty());
    assert_eq!(history("t1", "bob", Network::Bsc, 100).await, [bob_row]);
    assert_eq!(history("t2", "alice", Network::Bsc, 100).await, [t2_row]);
    assert_eq!(history("t1", "alice", Network::Tron, 100).await, [tron_row]);
    assert!(history("t1", "carol", Network::Bsc, 100).await.is_empty());
}

/// One step of the reference script: the same closure runs on the target and on the reference.
type Op = Arc<dyn Fn(&mut dyn LedgerRepo) -> Result<(), LedgerError> + Send + Sync>;

fn meta(n: u128, reference_type: ReferenceType) -> TxMeta {
    TxMeta {
        id: uid(n),
        reference_type,
        reference_id: uid(n + 500),
        created_at: at(i64::try_from(n).unwrap_or(0)),
    }
}

fn new_hold(n: u128, amount: u128) -> NewHold {
    NewHold {
        id: uid(n),
        purpose: HoldPurpose::Withdrawal,
        user: alice(),
        counter: system(SystemAccount::Treasury, usdt()),
        amount: units(amount),
    }
}

fn op(f: impl Fn(&mut dyn LedgerRepo) -> Result<(), LedgerError> + Send + Sync + 'static) -> Op {
    Arc::new(f)
}

fn settle(hold: u128, tx: u128, amount: u128) -> Settle {
    Settle {
        hold_id: uid(hold),
        tx_id: uid(tx),
        amount: units(amount),
        also: vec![],
        at: at(i64::try_from(tx).unwrap_or(0)),
    }
}

/// (name, whether it succeeds, operation)
fn script() -> Vec<(&'static str, bool, Op)> {
    use ReferenceType::{Deposit, InternalTransfer, Withdrawal};
    let bnb = user("t1", "alice", AssetId::new(Network::Bsc, "BNB"));
    vec![
        (
            "deposit",
            true,
            op(|r| ledger::credit_deposit(r, &meta(1, Deposit), &alice(), units(100)).map(drop)),
        ),
        (
            "reserve",
            true,
            op(|r| ledger::reserve(r, &meta(2, Withdrawal), &new_hold(10, 40)).map(drop)),
        ),
        (
            "settle part",
            true,
            op(|r| ledger::settle(r, &settle(10, 3, 35)).map(drop)),
        ),
        (
            "settle again",
            false,
            op(|r| ledger::settle(r, &settle(10, 30, 1)).map(drop)),
        ),
        (
            "transfer",
            true,
            op(|r| {
                ledger::transfer(r, &meta(4, InternalTransfer), &alice(), "bob", units(20))
                    .map(drop)
            }),
        ),
        (
            "transfer answering balances",
            true,
            op(|r| {
                let posted = ledger::transfer_with_balances(
                    r,
                    &meta(42, InternalTransfer),
                    &alice(),
                    "bob",
                    units(5),
                )?;
                let sender = ledger::user_balance(r, &alice())?;
                let recipient = ledger::user_balance(r, &alice().with_user("bob"))?;
                if (posted.sender, posted.recipient) != (sender, recipient) {
                    return Err(LedgerError::Invariant(format!(
                        "answered {:?}/{:?}, stored {sender:?}/{recipient:?}",
                        posted.sender, posted.recipient
                    )));
                }
                Ok(())
            }),
        ),
        (
            "overdraw answering balances",
            false,
            op(|r| {
                ledger::transfer_with_balances(
                    r,
                    &meta(43, InternalTransfer),
                    &alice(),
                    "bob",
                    units(1_000),
                )
                .map(drop)
            }),
        ),
        (
            "overdraw",
            false,
            op(|r| {
                ledger::transfer(
                    r,
                    &meta(40, InternalTransfer),
                    &alice(),
                    "bob",
                    units(1_000),
                )
                .map(drop)
            }),
        ),
        (
            "reserve more",
            true,
            op(|r| ledger::reserve(r, &meta(5, Withdrawal), &new_hold(11, 10)).map(drop)),
        ),
        (
            "release",
            true,
            op(|r| ledger::release(r, uid(11), uid(6), at(6)).map(drop)),
        ),
        (
            "deposit bnb",
            true,
            op(move |r| ledger::credit_deposit(r, &meta(7, Deposit), &bnb, units(7)).map(drop)),
        ),
        (
            "same id again",
            false,
            op(|r| ledger::credit_deposit(r, &meta(7, Deposit), &alice(), units(7)).map(drop)),
        ),
        (
            "reserve left pending",
            true,
            op(|r| ledger::reserve(r, &meta(8, Withdrawal), &new_hold(12, 5)).map(drop)),
        ),
    ]
}

fn op_error(e: LedgerError) -> PortError {
    match e {
        LedgerError::Port(p) => p,
        other => PortError::permanent("ledger", other.to_string()),
    }
}

async fn operations_give_the_reference_ledger(t: &dyn LedgerTarget) {
    let mut reference = MemoryLedger::new();
    for (name, ok, op) in script() {
        let want = op(&mut reference);
        assert_eq!(want.is_ok(), ok, "{name} on the reference: {want:?}");
        let step = Arc::clone(&op);
        let got = lw(t, move |r| step(r).map_err(op_error)).await;
        assert_eq!(got.is_ok(), ok, "{name}: {got:?}");
    }
    let got = lr(t, |r| {
        let report = ledger::reconcile(r)?;
        let balance = ledger::user_balance(r, &alice()).map_err(op_error)?;
        let history = r.ledger_history(&tid("t1"), "alice", Network::Bsc, 100)?;
        Ok((contents(r)?, report, balance, history))
    })
    .await;
    assert!(got.1.balanced, "{:?}", got.1.discrepancies);
    assert_eq!(
        (got.2.available, got.2.reserved),
        (units(100 - 35 - 20 - 5 - 5), units(5))
    );
    assert_eq!(
        got.0,
        contents(&mut reference).unwrap(),
        "the reference ledger"
    );
    assert_eq!(
        got.3,
        reference
            .ledger_history(&tid("t1"), "alice", Network::Bsc, 100)
            .unwrap()
    );
}

async fn an_entry_on_an_account_without_totals_fails_its_job(t: &StoreLedger) {
    // Totals are written with the transaction in the same job; the store checks at commit.
    let tx = deposit_tx(1, &alice(), 10);
    let orphan = tx.clone();
    assert!(lw(t, move |r| r.insert_ledger_transaction(&orphan))
        .await
        .is_err());
    assert_eq!(lr(t, |r| r.ledger_transaction(uid(1))).await, None);
    let whole = tx.clone();
    lw(t, move |r| insert_with_accounts(r, &whole))
        .await
        .unwrap();
    assert_eq!(lr(t, |r| r.ledger_transaction(uid(1))).await, Some(tx));
}
