//! The upgrade path for data that older versions wrote: the treasury's own moves into deposit
//! addresses (gas top-ups before token sweeps) recorded as deposits and credited to users.
//!
//! [`repair_treasury_deposits`] finds every deposit whose sender is a hot wallet of the network
//! and that [`super::classify`] now calls the treasury's, and takes each out of the user's
//! books in the same way a reorganization takes back a deposit:
//! - credited: reversed with a compensating ledger entry (`deposit_reversal`) that never
//!   overdraws: what the user still has available is taken back, and what they already spent
//!   is booked to `reorg_receivable`, owed by the user (their outgoing operations of that asset
//!   are refused until an operator settles it, as after a reorganization);
//! - still pending (detected, confirming, confirmed): orphaned, so it is never credited;
//! - anything else (orphaned, reversed): left as it is.
//!
//! Each change gets an audit record; a reversal that leaves the user owing raises a critical
//! alert; the user gets `balance.updated`. A treasury move that a reorganization reversed
//! before the repair, with something still owed, is reported as `owes` for an operator to
//! settle ([`settle_owed`]). It is idempotent: a second run changes nothing.
//!
//! The deposit pipeline applies the same rule to what is still pending when a new version
//! starts: `advance` orphans such a deposit instead of crediting it, so the repair need not
//! run before `custody serve` does.

use serde::Serialize;
use uuid::Uuid;

use super::{Arrival, Deposit, DepositStatus, TreasuryMove};
use crate::admin::{Alert, AuditRecord};
use crate::amount::Amount;
use crate::balance_event;
use crate::chain::{ChainAddress, TxHash};
use crate::error::{CoreError, CoreResult};
use crate::ledger::{self, ReferenceType, TxMeta, UserAccount};
use crate::network::Network;
use crate::ports::chain::ObservedTransfer;
use crate::ports::clock::{new_uuid, Entropy};
use crate::ports::store::WriteTx;
use crate::time::Timestamp;
use crate::AssetId;

/// How many deposits one call examines at most; the caller calls again from `next`.
pub const REPAIR_BATCH_MAX: usize = 500;

/// What was done to one deposit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repaired {
    pub deposit_id: Uuid,
    pub tenant: String,
    pub external_user_id: String,
    pub network: Network,
    pub asset: String,
    pub amount_units: Amount,
    pub tx_hash: String,
    pub status_before: DepositStatus,
    /// `reversed` or `orphaned`; `would_reverse` / `would_orphan` on a dry run.
    pub action: &'static str,
    /// Of a reversal: what the user had already spent, now owed (`reorg_receivable`).
    pub owed_units: Amount,
    /// Why it is the treasury's: the outgoing transaction's purpose, or `hot_wallet`.
    pub treasury_move: String,
}

/// One batch's outcome: what was repaired, and where the next batch starts (`None`: done):
/// the index of a hot wallet in the request and the last deposit examined of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairBatch {
    pub repaired: Vec<Repaired>,
    pub next: Option<(usize, Uuid)>,
}

/// What to repair and who asks.
#[derive(Debug, Clone)]
pub struct RepairRequest {
    pub network: Network,
    pub hot_wallets: Vec<ChainAddress>,
    /// Report what would be done, change nothing.
    pub dry_run: bool,
    /// `cli:<user>` of the operator, for the audit trail.
    pub actor: String,
}

/// Examines up to [`REPAIR_BATCH_MAX`] deposits sent from the hot wallets, from where the
/// previous batch stopped (`after`, its `next`).
pub fn repair_treasury_deposits(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    request: &RepairRequest,
    after: Option<(usize, Uuid)>,
    now: Timestamp,
) -> CoreResult<RepairBatch> {
    let mut repaired = Vec::new();
    let (start, mut cursor) = match after {
        Some((wallet, id)) => (wallet, Some(id)),
        None => (0, None),
    };
    for (index, hot) in request.hot_wallets.iter().enumerate().skip(start) {
        let batch = tx.deposits_from(request.network, hot.as_str(), cursor, REPAIR_BATCH_MAX)?;
        let full = batch.len() == REPAIR_BATCH_MAX;
        let last = batch.last().map(|d| d.id);
        for mut d in batch {
            if let Some(done) = repair_one(tx, entropy, request, &mut d, now)? {
                repaired.push(done);
            }
        }
        if full {
            return Ok(RepairBatch {
                repaired,
                next: last.map(|id| (index, id)),
            });
        }
        cursor = None;
    }
    Ok(RepairBatch {
        repaired,
        next: None,
    })
}

fn transfer_of(d: &Deposit) -> CoreResult<ObservedTransfer> {
    let parse = |what: &str, a: &str| {
        ChainAddress::parse(d.network, a)
            .map_err(|e| CoreError::Invariant(format!("deposit {} {what} {a}: {e}", d.id)))
    };
    Ok(ObservedTransfer {
        tx_hash: TxHash::parse(&d.tx_hash).map_err(CoreError::Invariant)?,
        log_index: d.log_index,
        asset_code: d.asset.clone(),
        from: parse("sender", &d.from_address)?,
        to: parse("address", &d.address)?,
        amount: d.amount,
        succeeded: true,
    })
}

/// Why deposit `d` is the treasury's own move (the outgoing purpose, or `hot_wallet`), or
/// `None` when it is a real deposit. Only a deposit sent by a hot wallet can be one.
pub(super) fn treasury_move_of(
    tx: &mut dyn WriteTx,
    hot_wallets: &[ChainAddress],
    d: &Deposit,
) -> CoreResult<Option<String>> {
    if !hot_wallets.iter().any(|h| h.as_str() == d.from_address) {
        return Ok(None);
    }
    let transfer = transfer_of(d)?;
    Ok(
        match super::classify(tx, d.network, hot_wallets, &transfer)? {
            Arrival::Deposit => None,
            Arrival::Treasury(TreasuryMove::Own { purpose, .. }) => {
                Some(purpose.as_str().to_owned())
            }
            Arrival::Treasury(TreasuryMove::FromHotWallet { .. }) => Some("hot_wallet".to_owned()),
        },
    )
}

/// Takes a pending treasury move out of the pipeline for good: orphaned, so it is never
/// credited (the transfer itself stays on chain; the scanner skips it from now on).
pub(super) fn void_pending(
    tx: &mut dyn WriteTx,
    d: &mut Deposit,
    now: Timestamp,
) -> CoreResult<()> {
    d.transition(DepositStatus::Orphaned, now)
        .map_err(CoreError::Invariant)?;
    d.block_number = None;
    d.block_hash = None;
    d.confirmations = 0;
    tx.update_deposit(d)?;
    Ok(())
}

fn repair_one(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    request: &RepairRequest,
    d: &mut Deposit,
    now: Timestamp,
) -> CoreResult<Option<Repaired>> {
    let Some(why) = treasury_move_of(tx, &request.hot_wallets, d)? else {
        return Ok(None);
    };
    let reversing = d.status == DepositStatus::Credited;
    // Reversed by a reorganization before the repair, with something still owed: the transfer
    // is never credited again (the scanner skips it), so only an operator can settle it.
    let owes = d.status == DepositStatus::Reversed && !d.shortfall.is_zero();
    if !reversing && !owes && !d.status.is_pending() {
        return Ok(None);
    }
    let mut done = Repaired {
        deposit_id: d.id,
        tenant: d.tenant.as_str().to_owned(),
        external_user_id: d.external_user_id.clone(),
        network: d.network,
        asset: d.asset.clone(),
        amount_units: d.amount,
        tx_hash: d.tx_hash.clone(),
        status_before: d.status,
        action: match (reversing, owes, request.dry_run) {
            (true, _, false) => "reversed",
            (true, _, true) => "would_reverse",
            (false, true, _) => "owes",
            (false, false, false) => "orphaned",
            (false, false, true) => "would_orphan",
        },
        owed_units: if owes { d.shortfall } else { Amount::ZERO },
        treasury_move: why,
    };
    if request.dry_run || owes {
        return Ok(Some(done));
    }
    if reversing {
        done.owed_units = reverse(tx, entropy, d, now)?;
    } else {
        void_pending(tx, d, now)?;
    }
    record(tx, entropy, request, &done, now)?;
    Ok(Some(done))
}

/// Takes the credit back without overdrawing; returns what the user owes.
fn reverse(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    d: &mut Deposit,
    now: Timestamp,
) -> CoreResult<Amount> {
    let meta = TxMeta {
        id: new_uuid(entropy),
        reference_type: ReferenceType::Deposit,
        reference_id: d.id,
        created_at: now,
    };
    let account = UserAccount::new(
        d.tenant.clone(),
        d.external_user_id.clone(),
        AssetId::new(d.network, d.asset.clone()),
    );
    let (_, owed) = ledger::reverse_deposit(tx, &meta, &account, d.amount)?;
    d.credit_tx_id = None;
    d.shortfall = owed;
    d.transition(DepositStatus::Reversed, now)
        .map_err(CoreError::Invariant)?;
    tx.update_deposit(d)?;
    balance_event::emit(
        tx,
        new_uuid(entropy),
        &account,
        (ReferenceType::Deposit, d.id),
        now,
    )?;
    Ok(owed)
}

/// The audit record and the alert of one repair.
fn record(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    request: &RepairRequest,
    done: &Repaired,
    now: Timestamp,
) -> CoreResult<()> {
    let value = serde_json::to_value(done).expect("a repair serializes");
    let reason = format!(
        "the treasury's own move ({}) was recorded as a deposit by an older version",
        done.treasury_move
    );
    tx.append_audit(&AuditRecord {
        id: new_uuid(entropy),
        actor: request.actor.clone(),
        action: "deposit.treasury_move_repaired".into(),
        target: format!("deposit:{}", done.deposit_id),
        old_value: Some(serde_json::json!({ "status": done.status_before })),
        new_value: Some(value),
        reason: reason.clone(),
        created_at: now,
    })?;
    if done.owed_units.is_zero() {
        // Nothing for an operator to do: the audit record and the printed report say it.
        return Ok(());
    }
    tx.raise_alert(&Alert::open(
        new_uuid(entropy),
        "treasury_deposit_repaired",
        "critical",
        format!(
            "deposit {} ({} {} units to user {} of tenant {}) was {}: {reason}; the user had \
             spent {} units of it, now owed (reorg_receivable): their outgoing {} operations \
             are refused until an operator settles it (custody ledger settle-owed)",
            done.deposit_id,
            done.asset,
            done.amount_units,
            done.external_user_id,
            done.tenant,
            done.action,
            done.owed_units,
            done.asset
        ),
        Some(("deposit", done.deposit_id)),
        now,
    ))?;
    Ok(())
}

/// How an operator settles what a user owes after a repair ([`settle_owed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Take it from the user's available balance of the asset (what they hold now, at most
    /// what is owed; the rest stays owed).
    FromUser,
    /// The house takes the loss: the `adjustments` account pays the receivable.
    WriteOff,
}

/// What [`settle_owed`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settled {
    pub deposit_id: Uuid,
    pub settled_units: Amount,
    pub still_owed_units: Amount,
}

/// An operator's settlement of what one deposit leaves owed.
#[derive(Debug, Clone)]
pub struct SettleRequest {
    pub tenant: crate::tenant::TenantId,
    /// The network's hot wallets: only the debt of a treasury move is settled here.
    pub hot_wallets: Vec<ChainAddress>,
    pub deposit_id: Uuid,
    pub how: Settlement,
    pub reason: String,
    /// `cli:<user>` of the operator, for the audit trail.
    pub actor: String,
}

/// Settles the debt that a treasury move recorded as a deposit left, audited. Such a move is
/// never credited again, so an operator decides here. Refused when the deposit owes nothing,
/// and for a user's real deposit (its reorganization debt is settled when it is mined again).
pub fn settle_owed(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    request: &SettleRequest,
    now: Timestamp,
) -> CoreResult<Settled> {
    use crate::error::Refusal;
    use crate::ledger::{AccountKey, Leg, SystemAccount, TxKind};
    let (how, reason) = (request.how, request.reason.as_str());
    if reason.trim().is_empty() {
        return Err(Refusal::validation("reason", "a settlement needs a reason").into());
    }
    let Some(mut d) = tx.deposit_by_id(&request.tenant, request.deposit_id)? else {
        return Err(Refusal::not_found("deposit").into());
    };
    if d.shortfall.is_zero() {
        return Err(Refusal::validation("deposit_id", "this deposit leaves nothing owed").into());
    }
    if treasury_move_of(tx, &request.hot_wallets, &d)?.is_none() {
        // A reorganization's debt is settled by the transfer being mined again; settling it
        // here too would pay the user twice when it is.
        return Err(Refusal::validation(
            "deposit_id",
            "this deposit is a user's deposit that left the chain: its debt is settled when the transfer is mined again",
        )
        .into());
    }
    let asset = AssetId::new(d.network, d.asset.clone());
    let account = UserAccount::new(d.tenant.clone(), d.external_user_id.clone(), asset.clone());
    let amount = match how {
        Settlement::FromUser => ledger::user_balance(tx, &account)?
            .available
            .min(d.shortfall),
        Settlement::WriteOff => d.shortfall,
    };
    if amount.is_zero() {
        return Err(Refusal::validation(
            "deposit_id",
            "the user holds nothing of the asset to settle with",
        )
        .into());
    }
    let payer = match how {
        Settlement::FromUser => account.key(),
        Settlement::WriteOff => AccountKey::system(SystemAccount::Adjustments, asset.clone()),
    };
    let receivable = AccountKey::system(SystemAccount::ReorgReceivable, asset);
    let audit = new_uuid(entropy);
    let meta = TxMeta {
        id: new_uuid(entropy),
        reference_type: ReferenceType::Adjustment,
        reference_id: audit,
        created_at: now,
    };
    ledger::post(
        tx,
        &meta,
        TxKind::Adjustment,
        &[Leg::debit(payer, amount), Leg::credit(receivable, amount)],
    )?;
    let before = d.shortfall;
    d.shortfall = before
        .checked_sub(amount)
        .ok_or_else(|| CoreError::Invariant("settled more than owed".into()))?;
    d.updated_at = now;
    tx.update_deposit(&d)?;
    tx.append_audit(&AuditRecord {
        id: audit,
        actor: request.actor.clone(),
        action: match how {
            Settlement::FromUser => "deposit.owed_settled_from_user",
            Settlement::WriteOff => "deposit.owed_written_off",
        }
        .into(),
        target: format!("deposit:{}", d.id),
        old_value: Some(serde_json::json!({ "owed_units": before })),
        new_value: Some(serde_json::json!({ "owed_units": d.shortfall })),
        reason: reason.to_owned(),
        created_at: now,
    })?;
    if how == Settlement::FromUser {
        balance_event::emit(
            tx,
            new_uuid(entropy),
            &account,
            (ReferenceType::Adjustment, audit),
            now,
        )?;
    }
    Ok(Settled {
        deposit_id: d.id,
        settled_units: amount,
        still_owed_units: d.shortfall,
    })
}
