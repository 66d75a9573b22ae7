//! Deposits: a transfer into one of our addresses, from first sight to ledger credit.
//!
//! States (decisions §4): `detected` → `confirming` → `confirmed` → `credited`; `orphaned` when
//! its block leaves the canonical chain before credit (back to `detected` if the transfer
//! reappears); `reversed` when that happens after credit (a compensating ledger entry and an
//! alert). Every move appends to `history`: nothing is erased.

use std::str::FromStr;

use serde::Serialize;
use uuid::Uuid;

use crate::amount::Amount;
use crate::chain::display_hash;
use crate::error::PortError;
use crate::network::Network;
use crate::time::Timestamp;

stored_enum! {
    DepositStatus {
        Detected => "detected",
        Confirming => "confirming",
        Confirmed => "confirmed",
        Credited => "credited",
        Orphaned => "orphaned",
        Reversed => "reversed",
    }
    moves {
        Detected => Confirming,
        Detected => Confirmed,
        Confirming => Confirmed,
        Confirmed => Credited,
        Detected => Orphaned,
        Confirming => Orphaned,
        Confirmed => Orphaned,
        Orphaned => Detected,
        Credited => Reversed,
        Reversed => Detected,
    }
}

impl DepositStatus {
    /// Seen on the canonical chain, not yet credited: counted as `pending` in balances.
    pub const fn is_pending(self) -> bool {
        matches!(
            self,
            DepositStatus::Detected | DepositStatus::Confirming | DepositStatus::Confirmed
        )
    }
}

impl FromStr for DepositStatus {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        DepositStatus::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or(())
    }
}

/// One step of a deposit's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HistoryStep {
    pub status: String,
    pub block_number: Option<u64>,
    pub block_hash: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deposit {
    pub id: Uuid,
    pub tenant: crate::tenant::TenantId,
    pub network: Network,
    pub asset: String,
    pub external_user_id: String,
    pub wallet_id: Uuid,
    pub address: String,
    pub tx_hash: String,
    /// `None` for native coin transfers.
    pub log_index: Option<u32>,
    pub from_address: String,
    pub amount: Amount,
    /// `None` while orphaned.
    pub block_number: Option<u64>,
    pub block_hash: Option<String>,
    pub confirmations: u32,
    pub required_confirmations: u32,
    pub status: DepositStatus,
    pub history: Vec<HistoryStep>,
    /// The ledger transaction that credited it; cleared when a reorganization's reversal is
    /// posted, kept when the reversal could not be (the user had spent the funds).
    pub credit_tx_id: Option<Uuid>,
    /// What the user still owes after a reorganization reversed this deposit when they had
    /// already spent it (booked to `reorg_receivable`); zero otherwise. While any deposit of a
    /// user owes something, the user's outgoing operations of that asset are refused.
    pub shortfall: Amount,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Serialize)]
pub struct DepositView<'a> {
    pub id: Uuid,
    pub network: Network,
    pub asset: &'a str,
    pub external_user_id: &'a str,
    pub wallet_id: Uuid,
    pub address: &'a str,
    /// Hashes per decisions §10: `0x`-prefixed on BSC, bare on TRON.
    pub tx_hash: String,
    pub log_index: Option<u32>,
    pub from_address: &'a str,
    pub amount_units: Amount,
    pub block_number: Option<u64>,
    pub block_hash: Option<String>,
    pub confirmations: u32,
    pub required_confirmations: u32,
    pub status: DepositStatus,
    pub history: Vec<HistoryStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Deposit {
    /// The resource as `GET /deposits/{id}` shows it (decisions §3).
    pub fn view(&self) -> DepositView<'_> {
        DepositView {
            id: self.id,
            network: self.network,
            asset: &self.asset,
            external_user_id: &self.external_user_id,
            wallet_id: self.wallet_id,
            address: &self.address,
            tx_hash: display_hash(self.network, &self.tx_hash),
            log_index: self.log_index,
            from_address: &self.from_address,
            amount_units: self.amount,
            block_number: self.block_number,
            block_hash: self
                .block_hash
                .as_deref()
                .map(|h| display_hash(self.network, h)),
            confirmations: self.confirmations,
            required_confirmations: self.required_confirmations,
            status: self.status,
            history: self
                .history
                .iter()
                .map(|step| HistoryStep {
                    block_hash: step
                        .block_hash
                        .as_deref()
                        .map(|h| display_hash(self.network, h)),
                    ..step.clone()
                })
                .collect(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Moves to `next`, appending to the history. Refuses an illegal move.
    pub fn transition(&mut self, next: DepositStatus, now: Timestamp) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "deposit {} cannot move from {} to {}",
                self.id, self.status, next
            ));
        }
        self.status = next;
        self.updated_at = now;
        self.history.push(HistoryStep {
            status: next.as_str().to_owned(),
            block_number: self.block_number,
            block_hash: self.block_hash.clone(),
            at: now.to_rfc3339(),
        });
        Ok(())
    }
}

/// Filters of the deposit listing.
#[derive(Debug, Clone, Default)]
pub struct DepositFilter {
    pub status: Option<DepositStatus>,
    pub external_user_id: Option<String>,
}

pub trait DepositRepo: DepositReads {
    /// MUST fail if the identity exists (a constraint).
    fn insert_deposit(&mut self, deposit: &Deposit) -> Result<(), PortError>;
    fn update_deposit(&mut self, deposit: &Deposit) -> Result<(), PortError>;
}

pub trait DepositReads {
    /// The deposit with this identity: (network, tx hash, log index or native marker).
    fn deposit_by_identity(
        &mut self,
        network: Network,
        tx_hash: &crate::chain::TxHash,
        log_index: Option<u32>,
    ) -> Result<Option<Deposit>, PortError>;
    fn deposit_by_id(
        &mut self,
        tenant: &crate::tenant::TenantId,
        id: Uuid,
    ) -> Result<Option<Deposit>, PortError>;
    /// The tenant's deposits, newest first, at most `limit`.
    fn list_deposits(
        &mut self,
        tenant: &crate::tenant::TenantId,
        filter: &DepositFilter,
        limit: usize,
    ) -> Result<Vec<Deposit>, PortError>;
    /// Deposits of `network` whose sender is `from_address` (canonical form), by id ascending,
    /// those after `after` only, at most `limit`: how an upgrade finds the treasury's own moves
    /// that older versions recorded as deposits ([`crate::deposit::repair`]).
    fn deposits_from(
        &mut self,
        network: Network,
        from_address: &str,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Deposit>, PortError>;
    /// Deposits of `network` in a pending state, or credited at or above `min_block` (the ones a
    /// reorganization or a new block can still change).
    fn open_deposits(
        &mut self,
        network: Network,
        min_block: u64,
    ) -> Result<Vec<Deposit>, PortError>;
    /// How many deposits of `network` are detected, confirming or confirmed.
    fn pending_deposit_count(&mut self, network: Network) -> Result<u64, PortError>;
    /// Sum of pending deposits of one user account.
    fn pending_deposit_units(
        &mut self,
        tenant: &crate::tenant::TenantId,
        external_user_id: &str,
        network: Network,
        asset: &str,
    ) -> Result<Amount, PortError>;
    /// [`Self::pending_deposit_units`] of each of `assets` of one user in `network`, in their
    /// order: one statement where the store can.
    fn pending_deposit_units_of(
        &mut self,
        tenant: &crate::tenant::TenantId,
        external_user_id: &str,
        network: Network,
        assets: &[String],
    ) -> Result<Vec<Amount>, PortError>;
    /// Per (address, asset) of `network`: the sum of deposits now credited (the funds the
    /// ledger says sit on the address, since nothing is swept yet).
    fn credited_by_address(
        &mut self,
        network: Network,
    ) -> Result<Vec<(String, String, Amount)>, PortError>;
    /// Sum of the shortfalls still owed by one user account (reversed deposits that were
    /// spent; see [`Deposit::shortfall`]).
    fn owed_after_reorg_units(
        &mut self,
        tenant: &crate::tenant::TenantId,
        external_user_id: &str,
        network: Network,
        asset: &str,
    ) -> Result<Amount, PortError>;
}

/// Refuses an outgoing operation (internal transfer today; withdrawals and swaps next) of a
/// user who owes a reorganization shortfall in that asset, until the transfer is mined again.
pub fn refuse_if_owing(
    tx: &mut dyn DepositReads,
    tenant: &crate::tenant::TenantId,
    external_user_id: &str,
    network: Network,
    asset: &str,
) -> crate::error::CoreResult<()> {
    let owed = tx.owed_after_reorg_units(tenant, external_user_id, network, asset)?;
    if owed.is_zero() {
        return Ok(());
    }
    Err(crate::error::Refusal::new(
        crate::error::ErrorCode::InsufficientBalance,
        format!(
            "this user owes {owed} units of {asset} after a deposit they had spent left the chain; \
             outgoing operations of {asset} are blocked until it is settled"
        ),
    )
    .into())
}

mod classify;
pub mod holdings;
mod pipeline;
pub mod repair;
mod watch;

pub use classify::{classify, Arrival, TreasuryMove};
pub use pipeline::{advance, apply_block, rewind, Applied, BlockOutcome, PipelineSettings};
pub use watch::WatchSet;

pub use crate::chain::ChainCursor;
