//! The double-entry ledger, TigerBeetle style.
//!
//! - Accounts are per asset: one per (tenant, user, asset) and five system accounts per asset
//!   ([`SystemAccount`]). Each caches four totals: debits and credits, posted and pending.
//! - Money moves only as append-only [`LedgerTx`]s whose debits equal credits per asset and
//!   phase. Only account totals and the state of a pending hold change in place.
//! - User accounts are never overdrawn: posted plus pending debits never exceed posted
//!   credits. `available = credits_posted - debits_posted - debits_pending`,
//!   `reserved = debits_pending`.
//! - Withdrawals and swaps are two-phase: [`reserve`] a [`Hold`], then [`settle`] it (possibly
//!   for less, releasing the rest) or [`release`] it, exactly once.
//! - Every operation checks everything before it writes, so a refusal writes nothing; it runs
//!   inside the caller's store transaction through [`LedgerRepo`].
//! - [`reconcile`] re-derives everything from the entries and reports any difference.

mod account;
mod entry;
mod error;
mod history;
mod hold;
mod ops;
mod posting;
mod reconcile;
mod repo;

#[cfg(test)]
mod tests;

pub use account::{AccountBalances, AccountKey, SystemAccount, UserAccount};
pub use entry::{
    check_entry_ids, entry_id, Direction, Entry, LedgerTx, Leg, Phase, ReferenceType, TxKind,
    TxMeta, ENTRIES_PER_TX_MAX,
};
pub use error::LedgerError;
pub use history::{history, HistoryEntry, HistoryPage, HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX};
pub use hold::{Hold, HoldPurpose, HoldState, NewHold};
pub use ops::{
    adjust, credit_deposit, post, recredit_deposit, release, reserve, reverse_deposit, settle,
    transfer, transfer_with_balances, user_balance, user_balances, HoldOutcome, Settle,
    TransferPosted, UserBalance,
};
pub use reconcile::{reconcile, LedgerReport, DISCREPANCIES_MAX};
pub use repo::{LedgerReads, LedgerRepo};
