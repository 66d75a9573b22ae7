//! The withdrawal flow (decisions §4, §11), each step one store transaction:
//!
//! - [`create_quote`]: a priced request becomes a single-use quote of 60 s;
//! - [`execute`]: the quote's total is held, the quote used and the outgoing transaction
//!   created (its nonce is allocated when it is signed) — all with the withdrawal record and its events, or
//!   none of it;
//! - [`on_outgoing`]: run in the broadcaster's transaction each time the outgoing transaction
//!   moves: `broadcasted` once something was sent, `confirmed` (the hold settles, revenue and
//!   gas booked) or `failed` (the hold released in full; the gas a failed transaction burned is
//!   the house's network fee).

use uuid::Uuid;

use crate::admin::restricted;
use crate::amount::Amount;
use crate::asset::AssetId;
use crate::balance_event;
use crate::chain::ChainAddress;
use crate::error::{CoreError, CoreResult, ErrorCode, Refusal};
use crate::ledger::{
    self, AccountKey, HoldPurpose, Leg, NewHold, ReferenceType, Settle, SystemAccount, TxKind,
    TxMeta, UserAccount,
};
use crate::network::Network;
use crate::outbox::{EventType, NewEvent};
use crate::outgoing::{OutStatus, OutgoingTx, Purpose};
use crate::ports::clock::{new_uuid, Entropy};
use crate::ports::sender::Payment;
use crate::ports::signer::HdPath;
use crate::ports::store::WriteTx;
use crate::tenant::TenantId;
use crate::time::Timestamp;

use super::costs::{withdrawal_costs, FeePolicy, Rate};
use super::record::{Quote, Withdrawal, WithdrawalStep, QUOTE_LIFETIME_MS};
use super::settle::settlement;
use super::WithdrawalStatus;

/// A network's hot wallet: where withdrawals are paid from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotWallet {
    pub address: String,
    pub path: HdPath,
}

/// What a quote is priced from, gathered by the caller (the chain and the price source).
#[derive(Debug, Clone)]
pub struct QuoteRequest {
    pub tenant: TenantId,
    pub external_user_id: String,
    pub asset: crate::asset::Asset,
    pub destination: ChainAddress,
    pub amount: Amount,
    pub policy: FeePolicy,
    /// The transaction's expected cost in the native coin.
    pub network_native: Amount,
    pub rate: Rate,
}

/// Refuses a withdrawal of `asset` while a control stops it: `kill_switch.withdrawals` (or the
/// global one), `maintenance.<NETWORK>`, or the asset's TREASURY shortfall control. Checked
/// before the chain is asked for a price, and again in the quote's and the execution's
/// transactions.
pub fn controls_refusal(
    tx: &mut dyn crate::admin::ControlReads,
    asset: &AssetId,
) -> CoreResult<()> {
    let network = asset.network;
    if restricted(tx, "kill_switch.withdrawals")? {
        return Err(Refusal::new(
            ErrorCode::KillSwitchActive,
            "withdrawals are suspended by an operator",
        )
        .into());
    }
    if restricted(tx, &format!("maintenance.{network}"))? {
        return Err(Refusal::new(
            ErrorCode::Maintenance,
            format!("{network} is under maintenance"),
        )
        .into());
    }
    crate::reconcile::refuse_if_halted(tx, std::slice::from_ref(asset))
}

/// Prices and stores a quote (`POST /withdrawals/quote`).
pub fn create_quote(
    tx: &mut dyn WriteTx,
    id: Uuid,
    request: &QuoteRequest,
    now: Timestamp,
) -> CoreResult<Quote> {
    let network = request.asset.network;
    if request.destination.network() != network {
        return Err(Refusal::new(
            ErrorCode::CrossChainNotSupported,
            "the destination is an address of another network",
        )
        .into());
    }
    controls_refusal(tx, &request.asset.id())?;
    let costs = withdrawal_costs(
        &request.policy,
        request.amount,
        request.network_native,
        request.rate,
    )?;
    let quote = Quote {
        id,
        tenant: request.tenant.clone(),
        external_user_id: request.external_user_id.clone(),
        network,
        asset: request.asset.code.clone(),
        destination_address: request.destination.as_str().to_owned(),
        amount: request.amount,
        costs,
        network_native: request.network_native,
        rate: request.rate,
        created_at: now,
        expires_at: now.plus_millis(QUOTE_LIFETIME_MS),
        used_at: None,
    };
    tx.insert_quote(&quote)?;
    Ok(quote)
}

/// A quote may be executed once, before it expires: 409 `QUOTE_ALREADY_USED` /
/// `QUOTE_EXPIRED` otherwise (decisions §7).
pub fn check_quote_usable(
    used_at: Option<Timestamp>,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<(), Refusal> {
    if used_at.is_some() {
        return Err(Refusal::new(
            ErrorCode::QuoteAlreadyUsed,
            "this quote was used already",
        ));
    }
    if now >= expires_at {
        return Err(Refusal::new(
            ErrorCode::QuoteExpired,
            "this quote has expired",
        ));
    }
    Ok(())
}

/// Ids [`execute`] needs, drawn by the caller.
#[derive(Debug, Clone, Copy)]
pub struct ExecuteIds {
    pub withdrawal: Uuid,
    pub outgoing: Uuid,
    pub hold_tx: Uuid,
    pub created_event: Uuid,
    pub balance_event: Uuid,
}

fn user_of(tenant: &TenantId, user: &str, network: Network, asset: &str) -> UserAccount {
    UserAccount::new(
        tenant.as_str().to_owned(),
        user.to_owned(),
        AssetId::new(network, asset.to_owned()),
    )
}

fn emit(
    tx: &mut dyn WriteTx,
    id: Uuid,
    w: &Withdrawal,
    event: EventType,
    now: Timestamp,
) -> CoreResult<()> {
    let data = serde_json::to_value(w.view()).expect("a withdrawal serializes");
    tx.enqueue_event(&NewEvent::new(id, w.tenant.as_str(), event, &data, now))?;
    Ok(())
}

/// Executes quote `quote_id` of `tenant` (`POST /withdrawals`): everything in one transaction.
#[allow(clippy::too_many_arguments)]
pub fn execute(
    tx: &mut dyn WriteTx,
    ids: ExecuteIds,
    tenant: &TenantId,
    quote_id: Uuid,
    asset: &crate::asset::Asset,
    hot: &HotWallet,
    now: Timestamp,
) -> CoreResult<Withdrawal> {
    let quote = tx
        .quote(tenant, quote_id)?
        .ok_or_else(|| Refusal::not_found("quote"))?;
    check_quote_usable(quote.used_at, quote.expires_at, now)?;
    if asset.network != quote.network || asset.code != quote.asset {
        return Err(CoreError::Invariant(format!(
            "quote {} is for {} {}, not {} {}",
            quote.id, quote.network, quote.asset, asset.network, asset.code
        )));
    }
    controls_refusal(tx, &asset.id())?;
    crate::wallet::hot::require_active(tx, asset.network, &hot.address)?;
    crate::deposit::refuse_if_owing(
        tx,
        tenant,
        &quote.external_user_id,
        quote.network,
        &quote.asset,
    )?;
    let user = user_of(tenant, &quote.external_user_id, quote.network, &quote.asset);
    let meta = TxMeta {
        id: ids.hold_tx,
        reference_type: ReferenceType::Withdrawal,
        reference_id: ids.withdrawal,
        created_at: now,
    };
    ledger::reserve(
        tx,
        &meta,
        &NewHold {
            id: ids.withdrawal,
            purpose: HoldPurpose::Withdrawal,
            user: user.clone(),
            counter: AccountKey::system(SystemAccount::Treasury, user.asset.clone()),
            amount: quote.costs.total_debited_units,
        },
    )?;
    if !tx.use_quote(quote.id, now)? {
        return Err(
            Refusal::new(ErrorCode::QuoteAlreadyUsed, "this quote was used already").into(),
        );
    }
    let payment = Payment::transfer(asset, &quote.destination_address, quote.amount);
    tx.insert_outgoing(&OutgoingTx::new(
        ids.outgoing,
        quote.network,
        Purpose::Withdrawal,
        ids.withdrawal,
        hot.address.clone(),
        hot.path,
        payment,
        // Allocated with its first attempt (`outgoing::record_signed`).
        None,
        now,
    ))?;
    let w = Withdrawal {
        id: ids.withdrawal,
        tenant: tenant.clone(),
        quote_id: quote.id,
        external_user_id: quote.external_user_id.clone(),
        network: quote.network,
        asset: quote.asset.clone(),
        destination_address: quote.destination_address.clone(),
        amount: quote.amount,
        costs: quote.costs,
        rate: quote.rate,
        status: WithdrawalStatus::Reserved,
        hold_id: ids.withdrawal,
        outgoing_id: ids.outgoing,
        tx_hash: None,
        block_number: None,
        confirmations: 0,
        actual_network_cost_units: None,
        failure_reason: None,
        history: vec![WithdrawalStep {
            status: WithdrawalStatus::Reserved.as_str().to_owned(),
            tx_hash: None,
            at: now.to_rfc3339(),
        }],
        created_at: now,
        updated_at: now,
    };
    tx.insert_withdrawal(&w)?;
    emit(tx, ids.created_event, &w, EventType::WithdrawalCreated, now)?;
    balance_event::emit(
        tx,
        ids.balance_event,
        &user,
        (ReferenceType::Withdrawal, w.id),
        now,
    )?;
    Ok(w)
}

/// Brings the withdrawal paid by `out` up to date with it, in the transaction that recorded
/// `out`'s move. `native` is the native coin of the network (for the gas), `confirmations` the
/// network's depth.
pub fn on_outgoing(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    confirmations: u32,
    now: Timestamp,
) -> CoreResult<()> {
    if out.purpose != Purpose::Withdrawal {
        return Ok(());
    }
    let Some(mut w) = tx.withdrawal_by_id(out.reference_id)? else {
        return Err(CoreError::Invariant(format!(
            "outgoing transaction {} pays withdrawal {}, which does not exist",
            out.id, out.reference_id
        )));
    };
    if matches!(
        w.status,
        WithdrawalStatus::Confirmed | WithdrawalStatus::Failed
    ) {
        return Ok(());
    }
    let invariant = CoreError::Invariant;
    let hash = out.visible_hash().map(str::to_owned);
    let mut changed = hash != w.tx_hash;
    w.tx_hash = hash;
    let block = out.included_payment().map(|i| i.block_number);
    changed |= block != w.block_number;
    w.block_number = block;
    let user = user_of(&w.tenant, &w.external_user_id, w.network, &w.asset);
    let sent = matches!(out.status, OutStatus::Sent | OutStatus::Included);
    if sent && w.status == WithdrawalStatus::Reserved {
        w.confirmations = out.confirmations(confirmations);
        w.transition(WithdrawalStatus::Broadcasted, now)
            .map_err(invariant)?;
        tx.update_withdrawal(&w)?;
        return emit(
            tx,
            new_uuid(entropy),
            &w,
            EventType::WithdrawalBroadcasted,
            now,
        );
    }
    match out.status {
        OutStatus::Final => {
            let included = out
                .included
                .as_ref()
                .ok_or_else(|| CoreError::Invariant("final without an inclusion".into()))?;
            let asset = AssetId::new(w.network, w.asset.clone());
            let s = settlement(
                &asset,
                native,
                w.amount,
                &w.costs,
                w.rate,
                included.fee_native,
            )?;
            ledger::settle(
                tx,
                &Settle {
                    hold_id: w.hold_id,
                    tx_id: new_uuid(entropy),
                    amount: s.user_pays,
                    also: s.also,
                    at: now,
                },
            )?;
            w.actual_network_cost_units = Some(s.actual_cost_units);
            w.confirmations = confirmations;
            if w.status == WithdrawalStatus::Reserved {
                w.transition(WithdrawalStatus::Broadcasted, now)
                    .map_err(invariant)?;
            }
            w.transition(WithdrawalStatus::Confirmed, now)
                .map_err(invariant)?;
            tx.update_withdrawal(&w)?;
            emit(
                tx,
                new_uuid(entropy),
                &w,
                EventType::WithdrawalConfirmed,
                now,
            )?;
            balance_event::emit(
                tx,
                new_uuid(entropy),
                &user,
                (ReferenceType::Withdrawal, w.id),
                now,
            )
        }
        OutStatus::Failed => {
            ledger::release(tx, w.hold_id, new_uuid(entropy), now)?;
            if let Some(gas) = out
                .included
                .as_ref()
                .map(|i| i.fee_native)
                .filter(|g| !g.is_zero())
            {
                // A failed transaction still burned gas: the house's expense.
                ledger::post(
                    tx,
                    &TxMeta {
                        id: new_uuid(entropy),
                        reference_type: ReferenceType::Withdrawal,
                        reference_id: w.id,
                        created_at: now,
                    },
                    TxKind::NetworkFee,
                    &[
                        Leg::debit(
                            AccountKey::system(SystemAccount::NetworkFees, native.clone()),
                            gas,
                        ),
                        Leg::credit(
                            AccountKey::system(SystemAccount::Treasury, native.clone()),
                            gas,
                        ),
                    ],
                )?;
            }
            w.failure_reason = Some(
                out.failure_reason
                    .clone()
                    .unwrap_or_else(|| "the transaction failed".into()),
            );
            w.transition(WithdrawalStatus::Failed, now)
                .map_err(invariant)?;
            tx.update_withdrawal(&w)?;
            emit(tx, new_uuid(entropy), &w, EventType::WithdrawalFailed, now)?;
            balance_event::emit(
                tx,
                new_uuid(entropy),
                &user,
                (ReferenceType::Withdrawal, w.id),
                now,
            )
        }
        _ => {
            // Blocks on top as last seen; back to 0 when a reorganization took its block.
            let seen = out.confirmations(confirmations);
            changed |= w.confirmations != seen;
            w.confirmations = seen;
            if changed {
                w.updated_at = now;
                tx.update_withdrawal(&w)?;
            }
            Ok(())
        }
    }
}
