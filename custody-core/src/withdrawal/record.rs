//! The records of withdrawals: quotes (single use, bound to tenant and user, 60 s) and the
//! withdrawals executed from them, with their repository.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::amount::Amount;
use crate::chain::display_hash;
use crate::error::PortError;
use crate::network::Network;
use crate::tenant::TenantId;
use crate::time::Timestamp;

use super::costs::{Costs, Rate};
use super::WithdrawalStatus;

/// How long a withdrawal quote may be executed (decisions §3).
pub const QUOTE_LIFETIME_MS: i64 = 60_000;

/// An authoritative price for one withdrawal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    pub id: Uuid,
    pub tenant: TenantId,
    pub external_user_id: String,
    pub network: Network,
    pub asset: String,
    /// Canonical form (EIP-55, base58check).
    pub destination_address: String,
    pub amount: Amount,
    pub costs: Costs,
    /// What the transaction is expected to burn, in the native coin.
    pub network_native: Amount,
    /// The native coin's price in the asset when quoted (1:1 for the native coin).
    pub rate: Rate,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
}

#[derive(Debug, Serialize)]
pub struct QuoteView<'a> {
    pub id: Uuid,
    pub kind: &'static str,
    pub external_user_id: &'a str,
    pub network: Network,
    pub asset: &'a str,
    pub destination_address: &'a str,
    pub amount_units: Amount,
    pub costs: Costs,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
}

impl Quote {
    /// The response of `POST /withdrawals/quote` (decisions §3).
    pub fn view(&self) -> QuoteView<'_> {
        QuoteView {
            id: self.id,
            kind: "withdrawal",
            external_user_id: &self.external_user_id,
            network: self.network,
            asset: &self.asset,
            destination_address: &self.destination_address,
            amount_units: self.amount,
            costs: self.costs,
            expires_at: self.expires_at,
            created_at: self.created_at,
        }
    }
}

/// One step of a withdrawal's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WithdrawalStep {
    pub status: String,
    pub tx_hash: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withdrawal {
    pub id: Uuid,
    pub tenant: TenantId,
    pub quote_id: Uuid,
    pub external_user_id: String,
    pub network: Network,
    pub asset: String,
    pub destination_address: String,
    pub amount: Amount,
    pub costs: Costs,
    pub rate: Rate,
    pub status: WithdrawalStatus,
    /// The hold of the total, and the outgoing transaction that pays.
    pub hold_id: Uuid,
    pub outgoing_id: Uuid,
    /// Stored bare (64 lowercase hex).
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub confirmations: u32,
    pub actual_network_cost_units: Option<Amount>,
    pub failure_reason: Option<String>,
    pub history: Vec<WithdrawalStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Serialize)]
pub struct WithdrawalView<'a> {
    pub id: Uuid,
    pub quote_id: Uuid,
    pub external_user_id: &'a str,
    pub network: Network,
    pub asset: &'a str,
    pub destination_address: &'a str,
    pub amount_units: Amount,
    pub costs: Costs,
    pub status: WithdrawalStatus,
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub confirmations: u32,
    pub actual_network_cost_units: Option<Amount>,
    pub failure_reason: Option<&'a str>,
    pub history: Vec<WithdrawalStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Withdrawal {
    /// The resource as `GET /withdrawals/{id}` and its events show it (decisions §3, §10).
    pub fn view(&self) -> WithdrawalView<'_> {
        let show = |h: &Option<String>| h.as_deref().map(|h| display_hash(self.network, h));
        WithdrawalView {
            id: self.id,
            quote_id: self.quote_id,
            external_user_id: &self.external_user_id,
            network: self.network,
            asset: &self.asset,
            destination_address: &self.destination_address,
            amount_units: self.amount,
            costs: self.costs,
            status: self.status,
            tx_hash: show(&self.tx_hash),
            block_number: self.block_number,
            confirmations: self.confirmations,
            actual_network_cost_units: self.actual_network_cost_units,
            failure_reason: self.failure_reason.as_deref(),
            history: self
                .history
                .iter()
                .map(|s| WithdrawalStep {
                    tx_hash: show(&s.tx_hash),
                    ..s.clone()
                })
                .collect(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Moves to `next`, appending to the history. Refuses an illegal move.
    pub fn transition(&mut self, next: WithdrawalStatus, now: Timestamp) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "withdrawal {} cannot move from {} to {}",
                self.id,
                self.status.as_str(),
                next.as_str()
            ));
        }
        self.status = next;
        self.updated_at = now;
        self.history.push(WithdrawalStep {
            status: next.as_str().to_owned(),
            tx_hash: self.tx_hash.clone(),
            at: now.to_rfc3339(),
        });
        Ok(())
    }
}

/// Persistence of quotes and withdrawals.
pub trait WithdrawalRepo: WithdrawalReads {
    /// MUST fail if the id exists.
    fn insert_quote(&mut self, quote: &Quote) -> Result<(), PortError>;
    /// Marks the quote used at `at`; `Ok(false)` when it was used already (a conditional
    /// update: two executions of one quote cannot both win).
    fn use_quote(&mut self, id: Uuid, at: Timestamp) -> Result<bool, PortError>;
    /// MUST fail if the id, or a withdrawal of the same quote, exists.
    fn insert_withdrawal(&mut self, w: &Withdrawal) -> Result<(), PortError>;
    /// Replaces the state, hash, block, confirmations, actual cost, failure reason and history.
    fn update_withdrawal(&mut self, w: &Withdrawal) -> Result<(), PortError>;
}

pub trait WithdrawalReads {
    /// A quote of `tenant`; another tenant's is `None`, like a missing one.
    fn quote(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Quote>, PortError>;
    /// A withdrawal of `tenant`; another tenant's is `None`.
    fn withdrawal(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Withdrawal>, PortError>;
    /// A withdrawal by id, of any tenant (the engine's side).
    fn withdrawal_by_id(&mut self, id: Uuid) -> Result<Option<Withdrawal>, PortError>;
    /// Every tenant's withdrawals, newest first (`created_at`, then id, descending).
    fn list_withdrawals(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<Withdrawal>, PortError>;
    /// Withdrawals of every tenant still on their way: `reserved` or `broadcasted`.
    fn pending_withdrawal_count(&mut self) -> Result<u64, PortError>;
}
