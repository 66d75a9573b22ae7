//! The records of sweeps and treasury fundings, their views for `/admin/sweeps` and
//! `/admin/treasury-fundings`, and their repository.

use serde::Serialize;
use uuid::Uuid;

use crate::amount::Amount;
use crate::chain::display_hash;
use crate::error::PortError;
use crate::network::Network;
use crate::ports::signer::HdPath;
use crate::time::Timestamp;

use super::{FundingKind, FundingStatus, SweepStatus};

/// One step of a sweep's or a funding's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SweepStep {
    pub status: String,
    /// Stored bare; shown per decisions §10.
    pub tx_hash: Option<String>,
    pub at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// One asset of one deposit address on its way to the hot wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    pub id: Uuid,
    pub network: Network,
    /// Catalog code of the asset swept.
    pub asset: String,
    /// The deposit address swept, and its key's path.
    pub address: String,
    pub path: HdPath,
    /// Where it goes: the network's hot wallet.
    pub to: String,
    pub amount: Amount,
    pub status: SweepStatus,
    /// The treasury funding that pays its gas (tokens that needed one): the native coin.
    pub funding_id: Option<Uuid>,
    /// TRON: the energy delegation its transfer spends (`[sweeps] tron_energy_mode =
    /// "delegate"`), reclaimed once the transfer ends.
    pub delegation_id: Option<Uuid>,
    /// The outgoing transaction that moves the asset (none yet while waiting for a funding).
    pub outgoing_id: Option<Uuid>,
    /// What the transfer was expected to burn (native units).
    pub planned_fee_native: Amount,
    /// What it burned (native units), once included.
    pub fee_native: Option<Amount>,
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub failure_reason: Option<String>,
    pub history: Vec<SweepStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What the hot wallet does for a deposit address so that a token sweep can pay its fee:
/// native coin sent to it, or (TRON) energy lent to it and taken back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funding {
    pub id: Uuid,
    pub network: Network,
    pub kind: FundingKind,
    /// The native coin's code (a drain: the asset it moves).
    pub asset: String,
    /// The deposit address funded (a drain: the active hot wallet it fills).
    pub address: String,
    /// The paying hot wallet (the stake's owner for a delegation).
    pub from: String,
    /// Native: units sent. Delegation and reclaim: sun of stake whose energy moves.
    pub amount: Amount,
    /// Delegation: the energy it lends (the resource planner's figure plus the margin).
    pub energy: Option<u64>,
    /// A delegation sent only once this funding (the native coin that activates the address
    /// and pays its bandwidth) is confirmed: its outgoing transaction does not exist before.
    /// `None` once it does.
    pub waits_for: Option<Uuid>,
    /// Delegation: the reclaim taking it back, once its sweep's transfer ended.
    pub reclaim_id: Option<Uuid>,
    /// Reclaim: the delegation it takes back.
    pub reclaims: Option<Uuid>,
    /// The sweep it pays for; `None` for a hot wallet drain.
    pub sweep_id: Option<Uuid>,
    pub outgoing_id: Uuid,
    pub status: FundingStatus,
    pub fee_native: Option<Amount>,
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub failure_reason: Option<String>,
    pub history: Vec<SweepStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

fn shown(network: Network, history: &[SweepStep]) -> Vec<SweepStep> {
    history
        .iter()
        .map(|s| SweepStep {
            tx_hash: s.tx_hash.as_deref().map(|h| display_hash(network, h)),
            ..s.clone()
        })
        .collect()
}

/// The history step of a move a sweep or a funding just made, and its update time.
fn record_move(
    (history, updated_at): (&mut Vec<SweepStep>, &mut Timestamp),
    status: &str,
    tx_hash: &Option<String>,
    detail: String,
    now: Timestamp,
) {
    *updated_at = now;
    history.push(step(status, tx_hash.clone(), detail, now));
}

fn step(status: &str, tx_hash: Option<String>, detail: String, now: Timestamp) -> SweepStep {
    SweepStep {
        status: status.to_owned(),
        tx_hash,
        at: now.to_rfc3339(),
        detail,
    }
}

#[derive(Debug, Serialize)]
pub struct SweepView {
    pub id: Uuid,
    pub network: Network,
    pub asset: String,
    pub address: String,
    pub derivation_path: String,
    pub to_address: String,
    pub amount_units: Amount,
    pub status: SweepStatus,
    pub funding_id: Option<Uuid>,
    pub delegation_id: Option<Uuid>,
    pub planned_network_cost_units: Amount,
    pub network_cost_units: Option<Amount>,
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub failure_reason: Option<String>,
    pub history: Vec<SweepStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Sweep {
    /// The row `/admin/sweeps` lists. Costs are in the native coin's units.
    pub fn view(&self) -> SweepView {
        SweepView {
            id: self.id,
            network: self.network,
            asset: self.asset.clone(),
            address: self.address.clone(),
            derivation_path: self.path.render(),
            to_address: self.to.clone(),
            amount_units: self.amount,
            status: self.status,
            funding_id: self.funding_id,
            delegation_id: self.delegation_id,
            planned_network_cost_units: self.planned_fee_native,
            network_cost_units: self.fee_native,
            tx_hash: self
                .tx_hash
                .as_deref()
                .map(|h| display_hash(self.network, h)),
            block_number: self.block_number,
            failure_reason: self.failure_reason.clone(),
            history: shown(self.network, &self.history),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Moves to `next` with a history step. Refuses an illegal move.
    pub fn transition(
        &mut self,
        next: SweepStatus,
        detail: impl Into<String>,
        now: Timestamp,
    ) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "sweep {} cannot move from {} to {}",
                self.id,
                self.status.as_str(),
                next.as_str()
            ));
        }
        self.status = next;
        record_move(
            (&mut self.history, &mut self.updated_at),
            next.as_str(),
            &self.tx_hash,
            detail.into(),
            now,
        );
        Ok(())
    }

    /// A history step without a move (the funded transfer created, for instance).
    pub fn note(&mut self, detail: impl Into<String>, now: Timestamp) {
        self.updated_at = now;
        self.history.push(step(
            self.status.as_str(),
            self.tx_hash.clone(),
            detail.into(),
            now,
        ));
    }
}

#[derive(Debug, Serialize)]
pub struct FundingView {
    pub id: Uuid,
    pub network: Network,
    pub kind: FundingKind,
    pub asset: String,
    pub address: String,
    pub from_address: String,
    pub amount_units: Amount,
    /// Delegations: the energy lent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_units: Option<u64>,
    /// Delegations: the reclaim taking it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaim_id: Option<Uuid>,
    /// Reclaims: the delegation taken back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaims_id: Option<Uuid>,
    pub sweep_id: Option<Uuid>,
    pub status: FundingStatus,
    pub network_cost_units: Option<Amount>,
    pub tx_hash: Option<String>,
    pub block_number: Option<u64>,
    pub failure_reason: Option<String>,
    pub history: Vec<SweepStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Funding {
    /// The row `/admin/treasury-fundings` lists.
    pub fn view(&self) -> FundingView {
        FundingView {
            id: self.id,
            network: self.network,
            kind: self.kind,
            asset: self.asset.clone(),
            address: self.address.clone(),
            from_address: self.from.clone(),
            amount_units: self.amount,
            energy_units: self.energy,
            reclaim_id: self.reclaim_id,
            reclaims_id: self.reclaims,
            sweep_id: self.sweep_id,
            status: self.status,
            network_cost_units: self.fee_native,
            tx_hash: self
                .tx_hash
                .as_deref()
                .map(|h| display_hash(self.network, h)),
            block_number: self.block_number,
            failure_reason: self.failure_reason.clone(),
            history: shown(self.network, &self.history),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// A history step without a move (a waiting delegation sent, a reclaim created).
    pub fn note(&mut self, detail: impl Into<String>, now: Timestamp) {
        self.updated_at = now;
        self.history.push(step(
            self.status.as_str(),
            self.tx_hash.clone(),
            detail.into(),
            now,
        ));
    }

    pub fn transition(
        &mut self,
        next: FundingStatus,
        detail: impl Into<String>,
        now: Timestamp,
    ) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "treasury funding {} cannot move from {} to {}",
                self.id,
                self.status.as_str(),
                next.as_str()
            ));
        }
        self.status = next;
        record_move(
            (&mut self.history, &mut self.updated_at),
            next.as_str(),
            &self.tx_hash,
            detail.into(),
            now,
        );
        Ok(())
    }
}

pub trait SweepRepo: SweepReads {
    /// MUST fail if the id exists, or if `sweep.address` already has an open sweep on its
    /// network (a constraint: two planners racing cannot both sweep one address).
    fn insert_sweep(&mut self, sweep: &Sweep) -> Result<(), PortError>;
    /// Replaces the state, funding, outgoing id, fees, hash, block, failure and history (what
    /// is swept, from where, is fixed at insert). MUST fail if it does not exist.
    fn update_sweep(&mut self, sweep: &Sweep) -> Result<(), PortError>;
    /// MUST fail if the id exists.
    fn insert_funding(&mut self, funding: &Funding) -> Result<(), PortError>;
    /// Replaces the state, `waits_for`, `reclaim_id`, fee, hash, block, failure and history.
    /// MUST fail if it does not exist.
    fn update_funding(&mut self, funding: &Funding) -> Result<(), PortError>;
}

pub trait SweepReads {
    fn sweep_by_id(&mut self, id: Uuid) -> Result<Option<Sweep>, PortError>;
    fn funding_by_id(&mut self, id: Uuid) -> Result<Option<Funding>, PortError>;
    /// The open sweep of `address` on `network`, if any.
    fn open_sweep_at(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<Sweep>, PortError>;
    /// The newest sweep of `address` on `network` (open or ended), if any.
    fn latest_sweep_at(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<Sweep>, PortError>;
    /// Sweeps of `network` in `funding` with no transfer yet, oldest first: those whose
    /// funding is confirmed are ready for their token transfer.
    fn sweeps_awaiting_transfer(&mut self, network: Network) -> Result<Vec<Sweep>, PortError>;
    /// Every sweep, newest first (`created_at`, then id, descending).
    fn list_sweeps(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<Sweep>, PortError>;
    /// Sweeps not final yet ([`super::SweepStatus::is_open`]).
    fn open_sweep_count(&mut self) -> Result<u64, PortError>;
    /// Fundings of `network` not ended yet (`planned` or `broadcasted`), of every kind, oldest
    /// first: the sweeper counts the stake its delegations in flight hold.
    fn open_fundings(&mut self, network: Network) -> Result<Vec<Funding>, PortError>;
    /// Every treasury funding, newest first (`created_at`, then id, descending).
    fn list_fundings(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<Funding>, PortError>;
    /// What sweeps and fundings of `network` moved on chain, per (address, asset): units that
    /// arrived on the address (confirmed native fundings) and units that left it (confirmed sweeps'
    /// amounts and every fee a sweep from it burned, in `native`, the network's native coin).
    /// Computed by [`flows`].
    fn sweep_flows(
        &mut self,
        network: Network,
        native: &str,
    ) -> Result<Vec<AddressFlow>, PortError>;
}

/// What the treasury moved into and out of one deposit address, of one asset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressFlow {
    pub address: String,
    pub asset: String,
    pub arrived: Amount,
    pub left: Amount,
}

/// [`AddressFlow`]s from sweeps and fundings: one function, so both stores and every reader
/// count alike. `native` is the network's native coin code.
pub fn flows(sweeps: &[Sweep], fundings: &[Funding], native: &str) -> Vec<AddressFlow> {
    use std::collections::BTreeMap;
    let mut m: BTreeMap<(String, String), (Amount, Amount)> = BTreeMap::new();
    let add = |m: &mut BTreeMap<(String, String), (Amount, Amount)>,
               address: &str,
               asset: &str,
               arrived: Amount,
               left: Amount| {
        let e = m
            .entry((address.to_owned(), asset.to_owned()))
            .or_insert((Amount::ZERO, Amount::ZERO));
        e.0 = e.0.checked_add(arrived).unwrap_or(e.0);
        e.1 = e.1.checked_add(left).unwrap_or(e.1);
    };
    for s in sweeps {
        if s.status == SweepStatus::Confirmed {
            add(&mut m, &s.address, &s.asset, Amount::ZERO, s.amount);
        }
        if let Some(fee) = s.fee_native {
            add(&mut m, &s.address, native, Amount::ZERO, fee);
        }
    }
    for f in fundings {
        // A delegation lends energy: no unit of the coin moves.
        if f.status == FundingStatus::Confirmed && f.kind == FundingKind::Native {
            add(&mut m, &f.address, &f.asset, f.amount, Amount::ZERO);
        }
    }
    m.into_iter()
        .map(|((address, asset), (arrived, left))| AddressFlow {
            address,
            asset,
            arrived,
            left,
        })
        .collect()
}
