//! The records of swaps: quotes (single use, bound to tenant and user, 30 s), the swaps
//! executed from them, and the router allowances the hot wallet has granted, with their
//! repository.

use serde::Serialize;
use uuid::Uuid;

use crate::amount::Amount;
use crate::chain::display_hash;
use crate::error::PortError;
use crate::network::Network;
use crate::tenant::TenantId;
use crate::time::Timestamp;
use crate::withdrawal::{Costs, Rate, WithdrawalStep};

use super::SwapStatus;

/// How long a swap quote may be executed (decisions §3).
pub const SWAP_QUOTE_LIFETIME_MS: i64 = 30_000;

/// An authoritative price for one swap on BSC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapQuote {
    pub id: Uuid,
    pub tenant: TenantId,
    pub external_user_id: String,
    pub asset_in: String,
    pub asset_out: String,
    pub amount_in: Amount,
    /// Asset codes along the route (`["USDT", "BNB", "USDC"]` through wrapped BNB).
    pub route: Vec<String>,
    /// The router's path: token contracts, the wrapped coin for BNB.
    pub path: Vec<String>,
    pub expected_amount_out: Amount,
    pub min_amount_out: Amount,
    pub slippage_bps: u32,
    pub costs: Costs,
    /// What the transaction is expected to burn, in BNB.
    pub network_native: Amount,
    /// BNB's price in `asset_in` when quoted (1:1 for BNB).
    pub rate: Rate,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
}

#[derive(Debug, Serialize)]
pub struct SwapQuoteView<'a> {
    pub id: Uuid,
    pub kind: &'static str,
    pub external_user_id: &'a str,
    pub asset_in: &'a str,
    pub asset_out: &'a str,
    pub amount_in_units: Amount,
    pub slippage_bps: u32,
    pub route: &'a [String],
    pub expected_amount_out_units: Amount,
    pub min_amount_out_units: Amount,
    pub costs: Costs,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
}

impl SwapQuote {
    /// The response of `POST /swaps/quote` (decisions §3).
    pub fn view(&self) -> SwapQuoteView<'_> {
        SwapQuoteView {
            id: self.id,
            kind: "swap",
            external_user_id: &self.external_user_id,
            asset_in: &self.asset_in,
            asset_out: &self.asset_out,
            amount_in_units: self.amount_in,
            slippage_bps: self.slippage_bps,
            route: &self.route,
            expected_amount_out_units: self.expected_amount_out,
            min_amount_out_units: self.min_amount_out,
            costs: self.costs,
            expires_at: self.expires_at,
            created_at: self.created_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swap {
    pub id: Uuid,
    pub tenant: TenantId,
    pub quote_id: Uuid,
    pub external_user_id: String,
    pub asset_in: String,
    pub asset_out: String,
    pub amount_in: Amount,
    pub route: Vec<String>,
    pub path: Vec<String>,
    pub expected_amount_out: Amount,
    pub min_amount_out: Amount,
    pub costs: Costs,
    pub rate: Rate,
    pub status: SwapStatus,
    /// The hold of the total in `asset_in`, and the outgoing transaction that swaps.
    pub hold_id: Uuid,
    pub outgoing_id: Uuid,
    /// Stored bare (64 lowercase hex).
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub actual_amount_in: Option<Amount>,
    pub actual_amount_out: Option<Amount>,
    pub actual_network_cost_units: Option<Amount>,
    pub failure_reason: Option<String>,
    pub history: Vec<WithdrawalStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Serialize)]
pub struct SwapView<'a> {
    pub id: Uuid,
    pub quote_id: Uuid,
    pub external_user_id: &'a str,
    pub asset_in: &'a str,
    pub asset_out: &'a str,
    pub amount_in_units: Amount,
    pub route: &'a [String],
    pub expected_amount_out_units: Amount,
    pub min_amount_out_units: Amount,
    pub costs: Costs,
    pub status: SwapStatus,
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub actual_amount_in_units: Option<Amount>,
    pub actual_amount_out_units: Option<Amount>,
    pub actual_network_cost_units: Option<Amount>,
    pub failure_reason: Option<&'a str>,
    pub history: Vec<WithdrawalStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Swap {
    /// The resource as `GET /swaps/{id}` and its events show it (decisions §3, §10).
    pub fn view(&self) -> SwapView<'_> {
        let show = |h: &Option<String>| h.as_deref().map(|h| display_hash(Network::Bsc, h));
        SwapView {
            id: self.id,
            quote_id: self.quote_id,
            external_user_id: &self.external_user_id,
            asset_in: &self.asset_in,
            asset_out: &self.asset_out,
            amount_in_units: self.amount_in,
            route: &self.route,
            expected_amount_out_units: self.expected_amount_out,
            min_amount_out_units: self.min_amount_out,
            costs: self.costs,
            status: self.status,
            tx_hash: show(&self.tx_hash),
            block_number: self.block_number,
            actual_amount_in_units: self.actual_amount_in,
            actual_amount_out_units: self.actual_amount_out,
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

    /// Moves to `next` with a history step. Refuses an illegal move.
    pub fn transition(&mut self, next: SwapStatus, now: Timestamp) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "swap {} cannot move from {} to {}",
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

/// What the hot wallet has let a router take of one token, as the service counts it: set by
/// its own approvals, lowered by its own swaps (no one else holds the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    pub network: Network,
    pub owner: String,
    pub token: String,
    pub spender: String,
    pub remaining: Amount,
    /// The approval transaction that set it (an approval that fails on chain voids it).
    pub approval_outgoing_id: Uuid,
}

pub trait SwapRepo: SwapReads {
    /// MUST fail if the id exists.
    fn insert_swap_quote(&mut self, quote: &SwapQuote) -> Result<(), PortError>;
    /// Marks the quote used at `at` if it was not; false when it already was (or is missing).
    fn use_swap_quote(&mut self, id: Uuid, at: Timestamp) -> Result<bool, PortError>;
    /// MUST fail if the id exists or the quote already has a swap.
    fn insert_swap(&mut self, swap: &Swap) -> Result<(), PortError>;
    /// Replaces the state, hash, block, actual values, failure and history (what was swapped
    /// is fixed at insert). MUST fail if it does not exist.
    fn update_swap(&mut self, swap: &Swap) -> Result<(), PortError>;
    /// Sets (inserts or replaces) the allowance of (network, owner, token, spender).
    fn put_allowance(&mut self, allowance: &Allowance) -> Result<(), PortError>;
    /// Forgets it (its approval failed): the next swap approves again.
    fn drop_allowance(
        &mut self,
        network: Network,
        owner: &str,
        token: &str,
        spender: &str,
    ) -> Result<(), PortError>;
}

pub trait SwapReads {
    fn swap_quote(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<SwapQuote>, PortError>;
    fn swap(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Swap>, PortError>;
    fn swap_by_id(&mut self, id: Uuid) -> Result<Option<Swap>, PortError>;
    /// Every tenant's swaps, newest first (`created_at`, then id, descending).
    fn list_swaps(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<Swap>, PortError>;
    /// Swaps of every tenant still on their way: `reserved` or `broadcasted`.
    fn pending_swap_count(&mut self) -> Result<u64, PortError>;
    fn allowance(
        &mut self,
        network: Network,
        owner: &str,
        token: &str,
        spender: &str,
    ) -> Result<Option<Allowance>, PortError>;
    /// Every counted allowance `owner` gave on `network`, any token and spender (addresses in
    /// lowercase): what a router change must revoke.
    fn allowances_of(&mut self, network: Network, owner: &str)
        -> Result<Vec<Allowance>, PortError>;
}
