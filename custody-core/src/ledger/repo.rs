//! The persistence the ledger needs, implemented by the store on its write transaction (and, for
//! tests, by `custody-testkit`'s `MemoryLedger`).

use uuid::Uuid;

use crate::error::PortError;
use crate::network::Network;

use super::account::{AccountBalances, AccountKey};
use super::entry::LedgerTx;
use super::history::HistoryEntry;
use super::hold::{Hold, HoldState};

/// Ledger records inside one store transaction.
///
/// Operations call these only after every check has passed, so a refused operation writes
/// nothing; a port error half-way leaves writes the caller's transaction MUST roll back (run
/// operations inside `Store::write`, under `nested` when the command goes on after an error).
///
/// An implementation:
/// - MUST store amounts losslessly (u128: TEXT or a 16-byte BLOB, never a SQLite INTEGER).
/// - MUST NOT update or delete a transaction, an entry or a hold once inserted, except the
///   state of a pending hold through [`LedgerRepo::finish_ledger_hold`].
/// - MUST give transactions a commit order (a sequence or rowid) and scan them in it.
///
/// Method names carry `ledger` because the store implements every repository on one type.
pub trait LedgerRepo: LedgerReads {
    /// Creates or replaces the cached totals of `key`: the only in-place update of the ledger.
    fn put_ledger_account(
        &mut self,
        key: &AccountKey,
        balances: &AccountBalances,
    ) -> Result<(), PortError>;

    /// Appends a transaction and its entries (in order). MUST fail if the id exists (a
    /// constraint), so a transaction is never written twice. MUST fail if an entry's id is not
    /// the one [`entry_id`](super::entry_id) derives from the transaction's id and the entry's
    /// position ([`check_entry_ids`](super::check_entry_ids)): entry ids are then unique
    /// because transaction ids are, so an implementation need not index them.
    fn insert_ledger_transaction(&mut self, tx: &LedgerTx) -> Result<(), PortError>;

    /// MUST fail if a hold with this id exists.
    fn insert_ledger_hold(&mut self, hold: &Hold) -> Result<(), PortError>;

    /// Moves a pending hold to `state` (settled or released). MUST fail, changing nothing, if
    /// the hold does not exist or is not pending (`UPDATE .. WHERE id = ? AND state =
    /// 'pending'` touching one row), so a hold ends once even if a caller forgets to check.
    fn finish_ledger_hold(&mut self, id: Uuid, state: &HoldState) -> Result<(), PortError>;
}

/// The ledger's reads, allowed in read-only jobs. Inside a write job they see a state that no
/// concurrent job changes before the job commits (see `ports::store`): the totals a posting
/// reads are the totals it replaces.
pub trait LedgerReads {
    /// The cached totals of `key`; `Ok(None)` when nothing was ever posted to it.
    fn ledger_account(&mut self, key: &AccountKey) -> Result<Option<AccountBalances>, PortError>;

    /// [`Self::ledger_account`] of each of `keys`, in their order: one statement where the store
    /// can (a balances read asks for every asset of a user at once).
    fn ledger_accounts(
        &mut self,
        keys: &[AccountKey],
    ) -> Result<Vec<Option<AccountBalances>>, PortError>;

    /// A transaction with its entries in order, by id.
    fn ledger_transaction(&mut self, id: Uuid) -> Result<Option<LedgerTx>, PortError>;

    fn ledger_hold(&mut self, id: Uuid) -> Result<Option<Hold>, PortError>;

    /// At most `limit` history rows of `user` of `tenant`, over the user's accounts of every
    /// asset on `network`, newest first: transactions in reverse commit order, entries of one
    /// transaction in reverse order. A row is an entry for which
    /// [`HistoryEntry::from_entry`] is `Some` (equivalently, a user entry whose
    /// [`super::Entry::history_direction`] is `Some`).
    fn ledger_history(
        &mut self,
        tenant: &crate::tenant::TenantId,
        user: &str,
        network: Network,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, PortError>;

    /// Visits every account with its cached totals, in any order.
    fn scan_ledger_accounts(
        &mut self,
        visit: &mut dyn FnMut(&AccountKey, &AccountBalances),
    ) -> Result<(), PortError>;

    /// A page of every transaction with its entries, newest first (`created_at`, then id,
    /// descending): the admin listing.
    fn list_ledger_transactions(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<LedgerTx>, PortError>;

    /// Visits every transaction with its entries, in commit order.
    fn scan_ledger_transactions(
        &mut self,
        visit: &mut dyn FnMut(&LedgerTx),
    ) -> Result<(), PortError>;

    /// Visits every hold, in any order.
    fn scan_ledger_holds(&mut self, visit: &mut dyn FnMut(&Hold)) -> Result<(), PortError>;
}
