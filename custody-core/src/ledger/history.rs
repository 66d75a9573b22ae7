//! Wallet history (decisions §3): the entries that moved a user's available balance, newest
//! first, each with the balance it left.

use serde::Serialize;
use uuid::Uuid;

use crate::amount::Amount;
use crate::error::Refusal;
use crate::network::Network;
use crate::time::Timestamp;

use super::entry::{Direction, Entry, LedgerTx, ReferenceType, TxKind};
use super::error::LedgerError;
use super::repo::LedgerReads;

/// Page size when the partner gives no `limit`.
pub const HISTORY_LIMIT_DEFAULT: usize = 50;
/// Largest `limit` a partner may ask for.
pub const HISTORY_LIMIT_MAX: usize = 100;

/// One row of `GET /wallets/{id}/transactions`, exactly the contract's fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// The entry's id.
    pub id: Uuid,
    pub kind: TxKind,
    /// Asset code; the network is the wallet's.
    pub asset: String,
    /// How the entry moved the available balance (a released hold is a credit).
    pub direction: Direction,
    pub amount_units: Amount,
    pub balance_after_units: Amount,
    pub reference_type: ReferenceType,
    pub reference_id: Uuid,
    pub created_at: Timestamp,
}

impl HistoryEntry {
    /// The history row of `entry`, or `None` when the entry is not part of any user's history
    /// (system accounts, and entries that leave the available balance unchanged).
    pub fn from_entry(tx: &LedgerTx, entry: &Entry) -> Option<HistoryEntry> {
        let user = entry.account.as_user()?;
        Some(HistoryEntry {
            id: entry.id,
            kind: tx.kind,
            asset: user.asset.code.clone(),
            direction: entry.history_direction()?,
            amount_units: entry.amount,
            balance_after_units: entry.balance_after?,
            reference_type: tx.reference_type,
            reference_id: tx.reference_id,
            created_at: tx.created_at,
        })
    }
}

/// A page in the contract's list shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryPage {
    pub data: Vec<HistoryEntry>,
    pub has_more: bool,
}

/// The newest `limit` history rows of a user on a network (all assets), newest first.
/// `limit` must be 1 to [`HISTORY_LIMIT_MAX`]; anything else is `VALIDATION_FAILED`.
pub fn history<R: LedgerReads + ?Sized>(
    repo: &mut R,
    tenant: &crate::tenant::TenantId,
    user: &str,
    network: Network,
    limit: usize,
) -> Result<HistoryPage, LedgerError> {
    if !(1..=HISTORY_LIMIT_MAX).contains(&limit) {
        return Err(
            Refusal::validation("limit", format!("must be 1 to {HISTORY_LIMIT_MAX}")).into(),
        );
    }
    let mut data = repo.ledger_history(tenant, user, network, limit + 1)?;
    let has_more = data.len() > limit;
    data.truncate(limit);
    Ok(HistoryPage { data, has_more })
}
