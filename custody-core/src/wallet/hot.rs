//! Hot wallet rotation (issue 31, F4): moving a network's hot wallet off a seed that may be
//! compromised. Generation 0's hot wallet (account [`HOT_WALLET_ACCOUNT`], index 0) is the
//! network's hot wallet as long as the store records none; a rotation records a new one under
//! an account of the global allocator (so [`super::seeds::generation_of`] maps it to the
//! newest seed) as `active`, the one it replaces as `retired`, and drains the retired one into
//! it: one treasury transfer per asset it holds ([`plan_drain`], [`create_drain`]), tokens
//! first and the native coin last, leaving behind what its unfinished payments still need.
//!
//! A retired hot wallet stays the treasury's: its in-flight payments are signed and followed
//! with their own path, its native transfers are never deposits, and its holdings count in the
//! TREASURY reconciliation. Only the active one pays new withdrawals, swaps and fundings and
//! receives sweeps.

use serde::Serialize;
use uuid::Uuid;

use crate::admin::AuditRecord;
use crate::amount::Amount;
use crate::asset::Asset;
use crate::error::{CoreResult, ErrorCode, PortError, Refusal};
use crate::keys::derive_address;
use crate::network::Network;
use crate::outgoing::{OutgoingTx, Purpose};
use crate::ports::sender::Payment;
use crate::ports::signer::{HdPath, Signer};
use crate::ports::store::WriteTx;
use crate::sweep::{Funding, FundingKind, FundingStatus, SweepStep};
use crate::time::Timestamp;
use crate::withdrawal::HotWallet;

use super::seeds::{check_seed_loaded, generation_of};
use super::{hot_wallet_path, HOT_WALLET_ACCOUNT};

/// Whether a recorded hot wallet pays (`active`) or only finishes what it started (`retired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HotWalletStatus {
    Active,
    Retired,
}

impl HotWalletStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            HotWalletStatus::Active => "active",
            HotWalletStatus::Retired => "retired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [HotWalletStatus::Active, HotWalletStatus::Retired]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// One hot wallet of a network, as a rotation recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotWalletRecord {
    pub network: Network,
    pub address: String,
    pub account: u32,
    pub index: u32,
    pub status: HotWalletStatus,
    /// Who rotated (`cli:<user>`), and why: of the rotation that made it active.
    pub rotated_by: String,
    pub reason: String,
    pub created_at: Timestamp,
    pub retired_at: Option<Timestamp>,
}

impl HotWalletRecord {
    pub fn path(&self) -> HdPath {
        HdPath {
            network: self.network,
            account: self.account,
            index: self.index,
        }
    }

    pub fn hot_wallet(&self) -> HotWallet {
        HotWallet {
            address: self.address.clone(),
            path: self.path(),
        }
    }
}

pub trait HotWalletReads {
    /// Every recorded hot wallet of `network`, oldest first (`created_at`, then address).
    fn hot_wallet_records(&mut self, network: Network) -> Result<Vec<HotWalletRecord>, PortError>;
}

pub trait HotWalletRepo: HotWalletReads {
    /// Takes the next account of the global allocator (`allocate_tenant_account`'s: accounts
    /// only grow, never reused) for a hot wallet, under `label`, which no tenant id can be.
    /// MUST fail if the label was used.
    fn allocate_hot_wallet_account(&mut self, label: &str, at: Timestamp)
        -> Result<u32, PortError>;
    /// MUST fail if the address is already recorded on its network, or if the record is
    /// `active` while the network has an active one (a constraint: one active per network).
    fn insert_hot_wallet(&mut self, record: &HotWalletRecord) -> Result<(), PortError>;
    /// Makes the active hot wallet `address` of `network` retired at `at`. MUST fail if it is
    /// not the network's active one.
    fn retire_hot_wallet(
        &mut self,
        network: Network,
        address: &str,
        at: Timestamp,
    ) -> Result<(), PortError>;
}

/// A network's hot wallets as the service uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotWalletSet {
    /// Pays new withdrawals, swaps and fundings; sweeps land in it.
    pub active: HotWallet,
    /// Former hot wallets, oldest first: still the treasury's.
    pub retired: Vec<HotWallet>,
}

impl HotWalletSet {
    /// Active first, then the retired ones.
    pub fn all(&self) -> impl Iterator<Item = &HotWallet> {
        std::iter::once(&self.active).chain(&self.retired)
    }
}

/// The hot wallets `records` say `network` has; `first` (generation 0's, derived from
/// `seed.json`) is the active one while no record is.
pub fn resolve(records: &[HotWalletRecord], first: HotWallet) -> HotWalletSet {
    let active = records
        .iter()
        .find(|r| r.status == HotWalletStatus::Active)
        .map(HotWalletRecord::hot_wallet);
    let mut retired: Vec<HotWallet> = records
        .iter()
        .filter(|r| r.status == HotWalletStatus::Retired)
        .map(HotWalletRecord::hot_wallet)
        .collect();
    let active = match active {
        Some(a) => a,
        None => {
            retired.retain(|r| r.address != first.address);
            first
        }
    };
    HotWalletSet { active, retired }
}

/// The key path of a hot wallet of `network` by its address, recorded or not: a payment of a
/// hot wallet must be signed by that wallet's key (a delegation's reclaim by the delegating
/// one), and the unrecorded hot wallet is generation 0's.
pub fn hot_wallet_path_of(
    tx: &mut (impl HotWalletReads + ?Sized),
    network: Network,
    address: &str,
) -> Result<HdPath, PortError> {
    Ok(tx
        .hot_wallet_records(network)?
        .iter()
        .find(|r| r.address == address)
        .map_or_else(|| hot_wallet_path(network), HotWalletRecord::path))
}

/// Refuses new money out of (or swept into) `address` on `network` unless it is the active
/// hot wallet in the store: an instance started before a rotation (another host sharing a
/// PostgreSQL store) still pays from the one it derived at start. Checked in the write that
/// creates a withdrawal, a swap or a sweep, so a stale instance creates nothing against the
/// retired wallet: the request is refused (`MAINTENANCE`, 503) until it restarts.
pub fn require_active(tx: &mut dyn WriteTx, network: Network, address: &str) -> CoreResult<()> {
    let records = tx.hot_wallet_records(network)?;
    let active = records.is_empty()
        || records
            .iter()
            .any(|r| r.status == HotWalletStatus::Active && r.address == address);
    if active {
        return Ok(());
    }
    Err(Refusal::new(
        ErrorCode::Maintenance,
        format!(
            "the {network} hot wallet {address} this instance pays from was retired by a \
             rotation: restart the instance to pay from the active one"
        ),
    )
    .into())
}

/// What a rotation needs, gathered by the caller.
#[derive(Debug, Clone)]
pub struct RotationRequest {
    pub network: Network,
    /// The hot wallet the caller read the chain for: the rotation is refused if it is not the
    /// active one any more (another rotation raced it).
    pub expected_old: HotWallet,
    /// Generation 0's hot wallet (see [`resolve`]).
    pub first: HotWallet,
    pub actor: String,
    pub reason: String,
}

/// Records a new active hot wallet for the network under the newest seed and retires the
/// current one, with the audit record, in the caller's transaction. Returns (old, new).
///
/// Refused when no seed was imported (generation 0 is the only one: a new hot wallet under it
/// would be derived from the very seed it is meant to leave), when the active hot wallet is
/// already the newest seed's, or when the active one is not `expected_old`.
pub fn rotate(
    tx: &mut dyn WriteTx,
    signer: &dyn Signer,
    [label_id, audit_id]: [Uuid; 2],
    request: &RotationRequest,
    now: Timestamp,
) -> CoreResult<(HotWallet, HotWallet)> {
    let network = request.network;
    if request.reason.trim().is_empty() {
        return Err(Refusal::validation("reason", "must not be empty").into());
    }
    let ranges: Vec<(u32, u32)> = tx
        .seeds()?
        .iter()
        .map(|s| (s.generation, s.first_account))
        .collect();
    let Some(newest) = ranges.iter().map(|(g, _)| *g).max() else {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            "no new seed was imported: a hot wallet rotated under seed.json's seed would be \
             derived from the seed it is meant to leave; import one first with `custody \
             wallets migrate --mnemonic-file FILE`",
        )
        .into());
    };
    let records = tx.hot_wallet_records(network)?;
    let current = resolve(&records, request.first.clone());
    let old = current.active;
    if old != request.expected_old {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "the {network} hot wallet changed while the rotation was prepared (now {}): \
                 run it again",
                old.address
            ),
        )
        .into());
    }
    if generation_of(&ranges, old.path.account) == newest {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "the {network} hot wallet {} is already derived from the newest seed \
                 (generation {newest}): import a new seed first",
                old.address
            ),
        )
        .into());
    }
    let account =
        tx.allocate_hot_wallet_account(&format!("hot-wallet:{network}:{label_id}"), now)?;
    if account >= HOT_WALLET_ACCOUNT || generation_of(&ranges, account) != newest {
        return Err(Refusal::new(
            ErrorCode::InternalError,
            format!("account {account} is not one of seed generation {newest}"),
        )
        .into());
    }
    check_seed_loaded(tx, signer, account)?;
    let (pubkey, chain_code) = signer.external_chain_public_key(network, account)?;
    let (address, _) = derive_address(network, &pubkey, &chain_code, 0)
        .map_err(|e| PortError::permanent("signer", e.to_string()))?;
    if records.iter().any(|r| r.address == old.address) {
        tx.retire_hot_wallet(network, &old.address, now)?;
    } else {
        // Generation 0's hot wallet was never recorded: it is, now, as retired.
        tx.insert_hot_wallet(&HotWalletRecord {
            network,
            address: old.address.clone(),
            account: old.path.account,
            index: old.path.index,
            status: HotWalletStatus::Retired,
            rotated_by: String::new(),
            reason: String::new(),
            created_at: now,
            retired_at: Some(now),
        })?;
    }
    let new = HotWalletRecord {
        network,
        address,
        account,
        index: 0,
        status: HotWalletStatus::Active,
        rotated_by: request.actor.clone(),
        reason: request.reason.clone(),
        created_at: now,
        retired_at: None,
    };
    tx.insert_hot_wallet(&new)?;
    tx.append_audit(&AuditRecord {
        id: audit_id,
        actor: request.actor.clone(),
        action: "treasury.rotate".into(),
        target: format!("hot_wallet:{network}"),
        old_value: Some(serde_json::json!({
            "address": old.address,
            "derivation_path": old.path.render(),
        })),
        new_value: Some(serde_json::json!({
            "address": new.address,
            "derivation_path": new.path().render(),
            "seed_generation": newest,
        })),
        reason: request.reason.clone(),
        created_at: now,
    })?;
    Ok((old, new.hot_wallet()))
}

/// What unfinished payments of a replaced hot wallet may burn beyond their estimate is covered
/// by leaving this many times their worst fee behind (a replacement bids higher).
pub const IN_FLIGHT_FEE_HEADROOM: u128 = 2;
/// The drain's own transfers are priced when it is planned and again when each is signed; the
/// native coin leaves this many times their worst fee behind, so that a price that rose in
/// between does not leave the last transfer waiting for funds the wallet does not have.
pub const DRAIN_FEE_HEADROOM: u128 = 2;

/// One asset of the wallet being drained, as the caller read it.
#[derive(Debug, Clone)]
pub struct DrainAsset {
    pub asset: Asset,
    /// What the wallet may spend of it (TRON: staked TRX excluded).
    pub spendable: Amount,
    /// What its unfinished payments still take out of it.
    pub pending: Amount,
    /// The worst fee (native units) of transferring it to the new hot wallet.
    pub max_fee: Amount,
}

/// What the drain sends, and what it leaves and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainPlan {
    /// (asset, amount) in sending order: tokens first, the native coin last.
    pub transfers: Vec<(Asset, Amount)>,
    /// Assets left behind, with why.
    pub left: Vec<(String, String)>,
}

/// The drain of a replaced hot wallet: each token's spendable balance less what its
/// unfinished payments take; then the native coin less what they take, less
/// [`IN_FLIGHT_FEE_HEADROOM`] × `in_flight_fees` (their worst fees) and
/// [`DRAIN_FEE_HEADROOM`] × the drain's own worst fees. Refused when the native coin cannot pay
/// the token transfers' fees on top of what the unfinished payments need.
pub fn plan_drain(
    native: &DrainAsset,
    tokens: &[DrainAsset],
    in_flight_fees: Amount,
) -> Result<DrainPlan, Refusal> {
    let mut plan = DrainPlan {
        transfers: Vec::new(),
        left: Vec::new(),
    };
    let mut fees = Amount::ZERO;
    for t in tokens {
        match t.spendable.checked_sub(t.pending).filter(|a| !a.is_zero()) {
            Some(amount) => {
                plan.transfers.push((t.asset.clone(), amount));
                fees = add(fees, scaled(t.max_fee, DRAIN_FEE_HEADROOM));
            }
            None => plan.left.push((
                t.asset.code.clone(),
                format!(
                    "nothing to move: {} held, {} taken by unfinished payments",
                    t.spendable.units(),
                    t.pending.units()
                ),
            )),
        }
    }
    let kept = add(
        native.pending,
        scaled(in_flight_fees, IN_FLIGHT_FEE_HEADROOM),
    );
    let Some(after_tokens) = native.spendable.checked_sub(add(kept, fees)) else {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "the old hot wallet holds {} {} but its unfinished payments keep {} and the \
                 drain's token transfers need {} for their fees: fund it, then run it again",
                native.spendable.units(),
                native.asset.code,
                kept.units(),
                fees.units()
            ),
        ));
    };
    let own_fee = scaled(native.max_fee, DRAIN_FEE_HEADROOM);
    match after_tokens.checked_sub(own_fee).filter(|a| !a.is_zero()) {
        Some(amount) => plan.transfers.push((native.asset.clone(), amount)),
        None => plan.left.push((
            native.asset.code.clone(),
            format!(
                "{} left for fees and unfinished payments: nothing to move",
                native.spendable.units()
            ),
        )),
    }
    Ok(plan)
}

fn add(a: Amount, b: Amount) -> Amount {
    a.checked_add(b).unwrap_or(Amount::MAX)
}

fn scaled(a: Amount, by: u128) -> Amount {
    a.units()
        .checked_mul(by)
        .map_or(Amount::MAX, Amount::from_units)
}

/// Records `plan`'s transfers from `old` to `new` in the caller's transaction: per transfer a
/// treasury funding of kind `hot_wallet_drain` and its outgoing transaction of purpose
/// `rebalance`, each signed only after the one before it (the native coin last, once every
/// token transfer holds its nonce). `ids` gives two ids per transfer (funding, outgoing).
/// Returns the fundings, in sending order.
///
/// `in_flight_seen` is the unfinished payments of `old` the plan was computed with: if the
/// store has others now, the plan may leave them short and is refused.
pub fn create_drain(
    tx: &mut dyn WriteTx,
    ids: &mut dyn FnMut() -> Uuid,
    (old, new): (&HotWallet, &HotWallet),
    network: Network,
    plan: &DrainPlan,
    in_flight_seen: &[Uuid],
    now: Timestamp,
) -> CoreResult<Vec<Funding>> {
    let mut now_in_flight: Vec<Uuid> = tx
        .outgoing_in_flight(network, &old.address)?
        .iter()
        .map(|o| o.id)
        .collect();
    let mut seen = in_flight_seen.to_vec();
    now_in_flight.sort();
    seen.sort();
    if now_in_flight != seen {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            "the old hot wallet's unfinished payments changed while the drain was planned: \
             stop every `custody serve` of this store and run it again",
        )
        .into());
    }
    let mut fundings = Vec::new();
    let mut previous: Option<Uuid> = None;
    for (asset, amount) in &plan.transfers {
        let (funding_id, outgoing_id) = (ids(), ids());
        let mut out = OutgoingTx::new(
            outgoing_id,
            network,
            Purpose::Rebalance,
            funding_id,
            old.address.clone(),
            old.path,
            Payment::transfer(asset, &new.address, *amount),
            None,
            now,
        );
        if let Some(p) = previous {
            out = out.after(p);
        }
        tx.insert_outgoing(&out)?;
        let funding = Funding {
            id: funding_id,
            network,
            kind: FundingKind::HotWalletDrain,
            asset: asset.code.clone(),
            address: new.address.clone(),
            from: old.address.clone(),
            amount: *amount,
            energy: None,
            waits_for: None,
            reclaim_id: None,
            reclaims: None,
            sweep_id: None,
            outgoing_id,
            status: FundingStatus::Planned,
            fee_native: None,
            tx_hash: None,
            block_number: None,
            failure_reason: None,
            history: vec![SweepStep {
                status: FundingStatus::Planned.as_str().to_owned(),
                tx_hash: None,
                at: now.to_rfc3339(),
                detail: "drain of a retired hot wallet".into(),
            }],
            created_at: now,
            updated_at: now,
        };
        tx.insert_funding(&funding)?;
        fundings.push(funding);
        previous = Some(outgoing_id);
    }
    Ok(fundings)
}

/// Who drains a retired hot wallet, and why ([`drain_retired`]).
#[derive(Debug, Clone)]
pub struct DrainRequest {
    pub network: Network,
    pub actor: String,
    pub reason: String,
}

/// Drains what is left on retired hot wallet `old` (sweeps planned before its rotation, funds
/// sent to it since) into the active one, `new`, with its audit record, in the caller's
/// transaction ([`create_drain`]). Refused unless `old` is retired and `new` is the active
/// wallet in the store now, or when the plan moves nothing.
#[allow(clippy::too_many_arguments)]
pub fn drain_retired(
    tx: &mut dyn WriteTx,
    ids: &mut dyn FnMut() -> Uuid,
    (old, new): (&HotWallet, &HotWallet),
    request: &DrainRequest,
    plan: &DrainPlan,
    in_flight_seen: &[Uuid],
    now: Timestamp,
) -> CoreResult<Vec<Funding>> {
    let network = request.network;
    if request.reason.trim().is_empty() {
        return Err(Refusal::validation("reason", "must not be empty").into());
    }
    let records = tx.hot_wallet_records(network)?;
    let retired = records
        .iter()
        .any(|r| r.address == old.address && r.status == HotWalletStatus::Retired);
    if !retired {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!("{} is not a retired {network} hot wallet", old.address),
        )
        .into());
    }
    require_active(tx, network, &new.address)?;
    if plan.transfers.is_empty() {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!("nothing to move from {}", old.address),
        )
        .into());
    }
    let audit_id = ids();
    let fundings = create_drain(tx, ids, (old, new), network, plan, in_flight_seen, now)?;
    tx.append_audit(&AuditRecord {
        id: audit_id,
        actor: request.actor.clone(),
        action: "treasury.drain".into(),
        target: format!("hot_wallet:{network}:{}", old.address),
        old_value: None,
        new_value: Some(serde_json::json!({
            "to": new.address,
            "transfers": plan
                .transfers
                .iter()
                .map(|(asset, amount)| serde_json::json!({
                    "asset": asset.code,
                    "amount_units": amount.units().to_string(),
                }))
                .collect::<Vec<_>>(),
        })),
        reason: request.reason.clone(),
        created_at: now,
    })?;
    Ok(fundings)
}

#[cfg(test)]
mod tests;
