//! The sweep flow, each step one store transaction:
//!
//! - [`create_sweep`]: a plan becomes a sweep with its first outgoing transaction (the
//!   address's own transfer to the hot wallet, or the hot wallet's funding of the address);
//! - [`start_delegation`]: once the native funding that activates a TRON address is final, the
//!   energy delegation that waited for it;
//! - [`start_funded_sweep`]: once every funding of a sweep is final, the token transfer they
//!   paid for;
//! - [`on_outgoing`]: run in the broadcaster's transaction each time a sweep's or a funding's
//!   outgoing transaction moves, booking what moved and every fee burned; when a sweep's
//!   transfer ends (final or failed), the reclaim of the energy it borrowed is created in that
//!   same transaction.

use uuid::Uuid;

use crate::amount::Amount;
use crate::asset::{Asset, AssetId};
use crate::error::{CoreError, CoreResult};
use crate::ledger::{self, AccountKey, Leg, ReferenceType, SystemAccount, TxKind, TxMeta};

use crate::outgoing::{OutStatus, OutgoingTx, Purpose};
use crate::ports::clock::{new_uuid, Entropy};
use crate::ports::sender::Payment;
use crate::ports::signer::HdPath;
use crate::ports::store::WriteTx;
use crate::time::Timestamp;
use crate::wallet::hot::hot_wallet_path_of;
use crate::withdrawal::HotWallet;

use super::record::{Funding, Sweep, SweepReads, SweepStep};
use super::{Delegation, FundingKind, FundingStatus, Plan, SweepStatus};

/// The deposit address a sweep empties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSource {
    pub address: String,
    pub path: HdPath,
}

/// Ids [`create_sweep`] needs, drawn by the caller.
#[derive(Debug, Clone, Copy)]
pub struct SweepIds {
    pub sweep: Uuid,
    pub outgoing: Uuid,
    pub funding: Uuid,
    /// An energy delegation's record and its outgoing transaction.
    pub delegation: Uuid,
    pub delegation_outgoing: Uuid,
}

/// A plan to carry out, with what the caller read from the chain.
#[derive(Debug, Clone)]
pub struct SweepOrder {
    pub asset: Asset,
    pub source: SweepSource,
    pub hot: HotWallet,
    pub plan: Plan,
    /// The network's native coin (what a funding sends and fees are booked in).
    pub native: AssetId,
    /// What the sweep's transfer is expected to burn (native units).
    pub planned_fee_native: Amount,
}

/// Carries out `order`: `Ok(None)` when there is nothing to do (a skip, or an open sweep of
/// the address already: one at a time).
pub fn create_sweep(
    tx: &mut dyn WriteTx,
    ids: SweepIds,
    order: &SweepOrder,
    now: Timestamp,
) -> CoreResult<Option<Sweep>> {
    let network = order.asset.network;
    let (amount, funding, delegation) = match order.plan {
        Plan::Skip(_) => return Ok(None),
        Plan::Sweep { amount } => (amount, None, None),
        Plan::Fund { amount, funding } => (amount, Some(funding), None),
        Plan::Delegate {
            amount,
            funding,
            delegation,
        } => (amount, funding, Some(delegation)),
    };
    if tx.open_sweep_at(network, &order.source.address)?.is_some() {
        return Ok(None);
    }
    crate::wallet::hot::require_active(tx, network, &order.hot.address)?;
    let mut sweep = Sweep {
        id: ids.sweep,
        network,
        asset: order.asset.code.clone(),
        address: order.source.address.clone(),
        path: order.source.path,
        to: order.hot.address.clone(),
        amount,
        status: SweepStatus::Planned,
        funding_id: None,
        delegation_id: None,
        outgoing_id: None,
        planned_fee_native: order.planned_fee_native,
        fee_native: None,
        tx_hash: None,
        block_number: None,
        failure_reason: None,
        history: Vec::new(),
        created_at: now,
        updated_at: now,
    };
    let mut fundings = Vec::new();
    if funding.is_none() && delegation.is_none() {
        tx.insert_outgoing(&OutgoingTx::new(
            ids.outgoing,
            network,
            Purpose::Sweep,
            ids.sweep,
            order.source.address.clone(),
            order.source.path,
            Payment::transfer(&order.asset, &order.hot.address, amount),
            None,
            now,
        ))?;
        sweep.outgoing_id = Some(ids.outgoing);
        sweep
            .history
            .push(step(SweepStatus::Planned.as_str(), String::new(), now));
    }
    if let Some(units) = funding {
        tx.insert_outgoing(&OutgoingTx::new(
            ids.outgoing,
            network,
            Purpose::Funding,
            ids.funding,
            order.hot.address.clone(),
            order.hot.path,
            Payment::Native {
                to: order.source.address.clone(),
                amount: units,
            },
            None,
            now,
        ))?;
        fundings.push(funding_record(
            (ids.funding, ids.outgoing, ids.sweep),
            FundingKind::Native,
            order,
            units,
            format!("gas for sweep {}", ids.sweep),
            now,
        ));
        sweep.funding_id = Some(ids.funding);
        sweep.history.push(step(
            SweepStatus::Funding.as_str(),
            format!("waiting for treasury funding {}", ids.funding),
            now,
        ));
    }
    if let Some(Delegation { stake_sun, energy }) = delegation {
        let mut d = funding_record(
            (ids.delegation, ids.delegation_outgoing, ids.sweep),
            FundingKind::EnergyDelegation,
            order,
            stake_sun,
            format!("{energy} energy for sweep {}", ids.sweep),
            now,
        );
        d.energy = Some(energy);
        if funding.is_some() {
            // java-tron refuses a delegation to an account that does not exist yet: the native
            // funding creates it, so the delegation is sent once that one is final.
            d.waits_for = Some(ids.funding);
        } else {
            tx.insert_outgoing(&delegation_outgoing(&d, order.hot.path, now))?;
        }
        fundings.push(d);
        sweep.delegation_id = Some(ids.delegation);
        sweep.history.push(step(
            SweepStatus::Funding.as_str(),
            format!("waiting for energy delegation {}", ids.delegation),
            now,
        ));
    }
    if sweep.outgoing_id.is_none() {
        sweep.status = SweepStatus::Funding;
    }
    tx.insert_sweep(&sweep)?;
    for f in &fundings {
        tx.insert_funding(f)?;
    }
    Ok(Some(sweep))
}

fn step(status: &str, detail: String, now: Timestamp) -> SweepStep {
    SweepStep {
        status: status.to_owned(),
        tx_hash: None,
        at: now.to_rfc3339(),
        detail,
    }
}

/// A new funding in `planned`, from the hot wallet to the order's address.
fn funding_record(
    (id, outgoing_id, sweep_id): (Uuid, Uuid, Uuid),
    kind: FundingKind,
    order: &SweepOrder,
    amount: Amount,
    detail: String,
    now: Timestamp,
) -> Funding {
    Funding {
        id,
        network: order.asset.network,
        kind,
        asset: order.native.code.clone(),
        address: order.source.address.clone(),
        from: order.hot.address.clone(),
        amount,
        energy: None,
        waits_for: None,
        reclaim_id: None,
        reclaims: None,
        sweep_id: Some(sweep_id),
        outgoing_id,
        status: FundingStatus::Planned,
        fee_native: None,
        tx_hash: None,
        block_number: None,
        failure_reason: None,
        history: vec![step(FundingStatus::Planned.as_str(), detail, now)],
        created_at: now,
        updated_at: now,
    }
}

/// The hot wallet's transaction lending delegation `d`'s energy (the stake stays its own),
/// signed with `path`, the delegating hot wallet's.
fn delegation_outgoing(d: &Funding, path: HdPath, now: Timestamp) -> OutgoingTx {
    OutgoingTx::new(
        d.outgoing_id,
        d.network,
        Purpose::Funding,
        d.id,
        d.from.clone(),
        path,
        Payment::DelegateEnergy {
            receiver: d.address.clone(),
            balance_sun: d.amount,
        },
        None,
        now,
    )
}

/// Sends the energy delegation of sweep `sweep_id` that waited for its native funding, once
/// that funding is confirmed (the address exists then). `Ok(None)` when there is none, it is
/// not ready, or it was sent already: the outgoing transaction and the cleared `waits_for`
/// are one write, so a retry after a crash never sends it twice.
pub fn start_delegation(
    tx: &mut dyn WriteTx,
    sweep_id: Uuid,
    now: Timestamp,
) -> CoreResult<Option<Funding>> {
    let Some(sweep) = tx.sweep_by_id(sweep_id)? else {
        return Ok(None);
    };
    let Some(delegation_id) = sweep.delegation_id else {
        return Ok(None);
    };
    if sweep.status != SweepStatus::Funding {
        return Ok(None);
    }
    let Some(mut d) = tx.funding_by_id(delegation_id)? else {
        return Err(CoreError::Invariant(format!(
            "sweep {} names energy delegation {delegation_id}, which does not exist",
            sweep.id
        )));
    };
    let Some(waits_for) = d.waits_for else {
        return Ok(None);
    };
    if d.status != FundingStatus::Planned {
        return Ok(None);
    }
    let paid = tx
        .funding_by_id(waits_for)?
        .is_some_and(|f| f.status == FundingStatus::Confirmed);
    if !paid {
        return Ok(None);
    }
    // The delegating hot wallet's key, even if a rotation retired it since.
    let path = hot_wallet_path_of(tx, d.network, &d.from)?;
    tx.insert_outgoing(&delegation_outgoing(&d, path, now))?;
    d.waits_for = None;
    d.note(
        format!("funding {waits_for} final: delegation created"),
        now,
    );
    tx.update_funding(&d)?;
    Ok(Some(d))
}

/// Whether every funding `sweep` waits for (its native coin, its energy delegation) is
/// confirmed: its transfer may be created.
pub fn ready_for_transfer<T: SweepReads + ?Sized>(tx: &mut T, sweep: &Sweep) -> CoreResult<bool> {
    if sweep.funding_id.is_none() && sweep.delegation_id.is_none() {
        return Err(CoreError::Invariant(format!(
            "sweep {} waits for a funding it does not name",
            sweep.id
        )));
    }
    for id in [sweep.funding_id, sweep.delegation_id]
        .into_iter()
        .flatten()
    {
        let confirmed = tx
            .funding_by_id(id)?
            .is_some_and(|f| f.status == FundingStatus::Confirmed);
        if !confirmed {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Creates the token transfer of funded sweep `sweep_id` once its funding is confirmed, for
/// `amount` (the address's token balance now: it can only have grown since the plan).
/// `Ok(None)` when it is not ready (the funding not final yet) or was done already.
pub fn start_funded_sweep(
    tx: &mut dyn WriteTx,
    sweep_id: Uuid,
    outgoing_id: Uuid,
    asset: &Asset,
    amount: Amount,
    now: Timestamp,
) -> CoreResult<Option<Sweep>> {
    let Some(mut sweep) = tx.sweep_by_id(sweep_id)? else {
        return Ok(None);
    };
    if sweep.status != SweepStatus::Funding || sweep.outgoing_id.is_some() {
        return Ok(None);
    }
    if !ready_for_transfer(tx, &sweep)? {
        return Ok(None);
    }
    if asset.code != sweep.asset || asset.network != sweep.network || amount < sweep.amount {
        return Err(CoreError::Invariant(format!(
            "sweep {} of {} {} cannot send {} {} {}",
            sweep.id,
            sweep.amount.units(),
            sweep.asset,
            amount.units(),
            asset.network,
            asset.code
        )));
    }
    tx.insert_outgoing(&OutgoingTx::new(
        outgoing_id,
        sweep.network,
        Purpose::Sweep,
        sweep.id,
        sweep.address.clone(),
        sweep.path,
        Payment::transfer(asset, &sweep.to, amount),
        None,
        now,
    ))?;
    sweep.amount = amount;
    sweep.outgoing_id = Some(outgoing_id);
    sweep.note("fundings final: transfer created", now);
    tx.update_sweep(&sweep)?;
    Ok(Some(sweep))
}

fn system(account: SystemAccount, asset: &AssetId) -> AccountKey {
    AccountKey::system(account, asset.clone())
}

fn book(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    (reference_type, reference_id): (ReferenceType, Uuid),
    kind: TxKind,
    legs: &[Leg],
    now: Timestamp,
) -> CoreResult<()> {
    let meta = TxMeta {
        id: new_uuid(entropy),
        reference_type,
        reference_id,
        created_at: now,
    };
    ledger::post(tx, &meta, kind, legs)?;
    Ok(())
}

/// The fee an included transaction burned, booked as the house's expense, paid from `payer`.
fn book_fee(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    reference: (ReferenceType, Uuid),
    payer: SystemAccount,
    native: &AssetId,
    fee: Amount,
    now: Timestamp,
) -> CoreResult<()> {
    if fee.is_zero() {
        return Ok(());
    }
    book(
        tx,
        entropy,
        reference,
        TxKind::NetworkFee,
        &[
            Leg::debit(system(SystemAccount::NetworkFees, native), fee),
            Leg::credit(system(payer, native), fee),
        ],
        now,
    )
}

/// Brings the sweep or funding paid by `out` up to date with it, in the transaction that
/// recorded `out`'s move. `native` is the network's native coin.
pub fn on_outgoing(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    now: Timestamp,
) -> CoreResult<()> {
    match out.purpose {
        Purpose::Sweep => on_sweep(tx, entropy, out, native, now),
        Purpose::Funding | Purpose::Rebalance => on_funding(tx, entropy, out, native, now),
        _ => Ok(()),
    }
}

/// Copies `out`'s visible hash and block onto a record's; returns whether they changed and
/// whether something left for the chain (an inclusion proves it even of an attempt a node
/// refused before a failover).
fn follow(out: &OutgoingTx, tx_hash: &mut Option<String>, block: &mut Option<u64>) -> (bool, bool) {
    let hash = out.visible_hash().map(str::to_owned);
    let included_in = out.included_payment().map(|i| i.block_number);
    let changed = hash != *tx_hash || included_in != *block;
    *tx_hash = hash;
    *block = included_in;
    let sent = matches!(
        out.status,
        OutStatus::Sent | OutStatus::Included | OutStatus::Final
    );
    (changed, sent)
}

/// What a final transaction burned: a final one without an inclusion breaks the engine's own
/// rules.
fn final_fee(out: &OutgoingTx) -> CoreResult<Amount> {
    out.included
        .as_ref()
        .map(|i| i.fee_native)
        .ok_or_else(|| CoreError::Invariant("final without an inclusion".into()))
}

fn on_sweep(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    now: Timestamp,
) -> CoreResult<()> {
    let Some(mut s) = tx.sweep_by_id(out.reference_id)? else {
        return Err(CoreError::Invariant(format!(
            "outgoing transaction {} pays sweep {}, which does not exist",
            out.id, out.reference_id
        )));
    };
    if !s.status.is_open() {
        return Ok(());
    }
    let invariant = CoreError::Invariant;
    let (mut changed, sent) = follow(out, &mut s.tx_hash, &mut s.block_number);
    if sent && matches!(s.status, SweepStatus::Planned | SweepStatus::Funding) {
        s.transition(SweepStatus::Broadcasted, "", now)
            .map_err(invariant)?;
        changed = true;
    }
    let reference = (ReferenceType::Sweep, s.id);
    let asset = AssetId::new(s.network, s.asset.clone());
    match out.status {
        OutStatus::Final => {
            let fee = final_fee(out)?;
            book(
                tx,
                entropy,
                reference,
                TxKind::Sweep,
                &[
                    Leg::debit(system(SystemAccount::Treasury, &asset), s.amount),
                    Leg::credit(system(SystemAccount::DepositClearing, &asset), s.amount),
                ],
                now,
            )?;
            book_fee(
                tx,
                entropy,
                reference,
                SystemAccount::DepositClearing,
                native,
                fee,
                now,
            )?;
            s.fee_native = Some(fee);
            s.transition(SweepStatus::Confirmed, "", now)
                .map_err(invariant)?;
            tx.update_sweep(&s)?;
            reclaim_energy(tx, entropy, &s, now)?;
        }
        OutStatus::Failed => {
            let fee = out.included.as_ref().map(|i| i.fee_native);
            if let Some(fee) = fee {
                book_fee(
                    tx,
                    entropy,
                    reference,
                    SystemAccount::DepositClearing,
                    native,
                    fee,
                    now,
                )?;
            }
            s.fee_native = fee;
            s.failure_reason = Some(
                out.failure_reason
                    .clone()
                    .unwrap_or_else(|| "the transaction failed".into()),
            );
            let why = s.failure_reason.clone().unwrap_or_default();
            s.transition(SweepStatus::Failed, why.clone(), now)
                .map_err(invariant)?;
            tx.update_sweep(&s)?;
            // A failed transfer still spent (part of) the energy: it is taken back all the same.
            reclaim_energy(tx, entropy, &s, now)?;
            // The address is left alone for a while (`[sweeps] failure_backoff_ms`): an operator
            // should know why its funds stay where they are.
            tx.raise_alert(&crate::admin::Alert::open(
                new_uuid(entropy),
                "sweep_failed",
                "warning",
                format!(
                    "{} sweep {} of {} {} from {} failed: {why}",
                    s.network,
                    s.id,
                    s.amount.units(),
                    s.asset,
                    s.address
                ),
                Some(("sweep", s.id)),
                now,
            ))?;
        }
        _ => {
            if changed {
                s.updated_at = now;
                tx.update_sweep(&s)?;
            }
        }
    }
    Ok(())
}

fn on_funding(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    now: Timestamp,
) -> CoreResult<()> {
    let Some(mut f) = tx.funding_by_id(out.reference_id)? else {
        return Err(CoreError::Invariant(format!(
            "outgoing transaction {} pays treasury funding {}, which does not exist",
            out.id, out.reference_id
        )));
    };
    if matches!(f.status, FundingStatus::Confirmed | FundingStatus::Failed) {
        return Ok(());
    }
    let invariant = CoreError::Invariant;
    let (mut changed, sent) = follow(out, &mut f.tx_hash, &mut f.block_number);
    if sent && f.status == FundingStatus::Planned {
        f.transition(FundingStatus::Broadcasted, "", now)
            .map_err(invariant)?;
        changed = true;
    }
    let reference = (ReferenceType::TreasuryFunding, f.id);
    match out.status {
        OutStatus::Final => {
            let fee = final_fee(out)?;
            // A delegation or a reclaim moves energy, not coins: only its fee is booked.
            if f.kind == FundingKind::Native {
                book(
                    tx,
                    entropy,
                    reference,
                    TxKind::TreasuryFunding,
                    &[
                        Leg::debit(system(SystemAccount::DepositClearing, native), f.amount),
                        Leg::credit(system(SystemAccount::Treasury, native), f.amount),
                    ],
                    now,
                )?;
            }
            book_fee(
                tx,
                entropy,
                reference,
                SystemAccount::Treasury,
                native,
                fee,
                now,
            )?;
            f.fee_native = Some(fee);
            f.transition(FundingStatus::Confirmed, "", now)
                .map_err(invariant)?;
            Ok(tx.update_funding(&f)?)
        }
        OutStatus::Failed => {
            let fee = out.included.as_ref().map(|i| i.fee_native);
            if let Some(fee) = fee {
                book_fee(
                    tx,
                    entropy,
                    reference,
                    SystemAccount::Treasury,
                    native,
                    fee,
                    now,
                )?;
            }
            f.fee_native = fee;
            let why = out
                .failure_reason
                .clone()
                .unwrap_or_else(|| "the transaction failed".into());
            f.failure_reason = Some(why.clone());
            f.transition(FundingStatus::Failed, why.clone(), now)
                .map_err(invariant)?;
            tx.update_funding(&f)?;
            if f.kind == FundingKind::EnergyReclaim {
                return reclaim_failed(tx, entropy, &f, &why, now);
            }
            if f.kind == FundingKind::HotWalletDrain {
                return drain_failed(tx, entropy, &f, &why, now);
            }
            // The sweep it paid for cannot go on: the next plan starts afresh.
            let reason = format!("its treasury funding {} failed: {why}", f.id);
            let sweep = match f.sweep_id {
                Some(id) => tx.sweep_by_id(id)?,
                None => None,
            };
            if let Some(mut s) = sweep {
                if s.status.is_open() && s.outgoing_id.is_none() {
                    s.failure_reason = Some(reason.clone());
                    s.transition(SweepStatus::Failed, reason.clone(), now)
                        .map_err(invariant)?;
                    tx.update_sweep(&s)?;
                }
                // A delegation waiting for this funding will never be sent.
                if let Some(did) = s.delegation_id.filter(|d| *d != f.id) {
                    if let Some(mut d) = tx.funding_by_id(did)? {
                        if d.waits_for == Some(f.id) && d.status == FundingStatus::Planned {
                            d.failure_reason = Some(reason.clone());
                            d.transition(FundingStatus::Failed, reason, now)
                                .map_err(invariant)?;
                            tx.update_funding(&d)?;
                        }
                    }
                }
            }
            Ok(())
        }
        _ => {
            if changed {
                f.updated_at = now;
                tx.update_funding(&f)?;
            }
            Ok(())
        }
    }
}

/// A drain transfer of a retired hot wallet failed: its funds stay there (still the
/// treasury's, counted by the reconciliation); an operator must know, and drain it again.
fn drain_failed(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    f: &Funding,
    why: &str,
    now: Timestamp,
) -> CoreResult<()> {
    tx.raise_alert(&crate::admin::Alert::open(
        new_uuid(entropy),
        "hot_wallet_drain_failed",
        "critical",
        format!(
            "{} drain {} of {} {} from retired hot wallet {} to {} failed: {why}",
            f.network,
            f.id,
            f.amount.units(),
            f.asset,
            f.from,
            f.address
        ),
        Some(("treasury_funding", f.id)),
        now,
    ))?;
    Ok(())
}

/// Takes back the energy `sweep` borrowed, once its transfer ended: a reclaim funding and its
/// undelegation, created in the transaction that recorded the end, at most once (the
/// delegation names its reclaim). A delegation that never confirmed lent nothing.
fn reclaim_energy(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    sweep: &Sweep,
    now: Timestamp,
) -> CoreResult<()> {
    let Some(delegation_id) = sweep.delegation_id else {
        return Ok(());
    };
    let Some(mut d) = tx.funding_by_id(delegation_id)? else {
        return Err(CoreError::Invariant(format!(
            "sweep {} names energy delegation {delegation_id}, which does not exist",
            sweep.id
        )));
    };
    if d.status != FundingStatus::Confirmed || d.reclaim_id.is_some() {
        return Ok(());
    }
    let (id, outgoing_id) = (new_uuid(entropy), new_uuid(entropy));
    // The stake is the delegating hot wallet's, even if a rotation retired it since.
    let path = hot_wallet_path_of(tx, d.network, &d.from)?;
    tx.insert_outgoing(&OutgoingTx::new(
        outgoing_id,
        d.network,
        Purpose::Funding,
        id,
        d.from.clone(),
        path,
        Payment::UndelegateEnergy {
            receiver: d.address.clone(),
            balance_sun: d.amount,
        },
        None,
        now,
    ))?;
    tx.insert_funding(&Funding {
        id,
        kind: FundingKind::EnergyReclaim,
        energy: None,
        waits_for: None,
        reclaim_id: None,
        reclaims: Some(d.id),
        outgoing_id,
        status: FundingStatus::Planned,
        fee_native: None,
        tx_hash: None,
        block_number: None,
        failure_reason: None,
        history: vec![step(
            FundingStatus::Planned.as_str(),
            format!(
                "takes back delegation {} (sweep {} {})",
                d.id,
                sweep.id,
                sweep.status.as_str()
            ),
            now,
        )],
        created_at: now,
        updated_at: now,
        ..d.clone()
    })?;
    d.reclaim_id = Some(id);
    d.note(format!("reclaimed by {id}"), now);
    tx.update_funding(&d)?;
    Ok(())
}

/// An undelegation that failed leaves the stake lent to a deposit address: the hot wallet has
/// that much less energy for its own transfers until an operator takes it back. Not retried
/// on its own: a node's refusal may mean it was taken back already.
fn reclaim_failed(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    f: &Funding,
    why: &str,
    now: Timestamp,
) -> CoreResult<()> {
    tx.raise_alert(&crate::admin::Alert::open(
        new_uuid(entropy),
        "energy_reclaim_failed",
        "warning",
        format!(
            "{} reclaim {} of the energy of {} sun of stake lent to {} failed: {why}; \
             undelegate it from {} by hand",
            f.network,
            f.id,
            f.amount.units(),
            f.address,
            f.from
        ),
        Some(("treasury_funding", f.id)),
        now,
    ))?;
    Ok(())
}
