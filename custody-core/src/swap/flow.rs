//! The swap flow (decisions §4, §11, §12), each step one store transaction:
//!
//! - [`create_quote`]: a route priced by the router becomes a single-use quote of 30 s;
//! - [`execute`]: the quote's total is held in `asset_in`, the quote used, and, from the BSC
//!   hot wallet, the router approved when the service's count of its allowance is short (an
//!   `approve` of everything, after an `approve(0)` when some allowance is left, for tokens
//!   that refuse to change a non-zero allowance), then the swap itself, each with its nonce
//!   in order — all with the swap record and its events, or none of it;
//! - [`on_outgoing`]: run in the broadcaster's transaction each time a swap's (or an
//!   approval's) outgoing transaction moves: `broadcasted`, then `confirmed` with the actual
//!   input and output read from the receipt (the hold settles; the user is credited what the
//!   router actually gave) or `failed` (the hold released in full).

use uuid::Uuid;

use crate::admin::restricted;
use crate::amount::Amount;
use crate::asset::{Asset, AssetId};
use crate::balance_event;
use crate::error::{CoreError, CoreResult, ErrorCode, Refusal};
use crate::ledger::{
    self, AccountKey, HoldPurpose, Leg, NewHold, ReferenceType, Settle, SystemAccount, TxKind,
    TxMeta, UserAccount,
};
use crate::network::Network;
use crate::outbox::{EventType, NewEvent};
use crate::outgoing::{OutStatus, OutgoingTx, Purpose};
use crate::ports::clock::{new_uuid, Entropy};
use crate::ports::sender::{MoveKind, Payment, TokenMove};
use crate::ports::store::WriteTx;
use crate::tenant::TenantId;
use crate::time::Timestamp;
use crate::withdrawal::{settlement, FeePolicy, HotWallet, Rate, WithdrawalStep};

use super::costs::{min_amount_out, swap_costs};
use super::record::{Allowance, Swap, SwapQuote, SWAP_QUOTE_LIFETIME_MS};
use super::SwapStatus;

/// What the router is and how long a swap may wait to be mined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterSettings {
    pub router: String,
    /// The wrapped native coin (WBNB): BNB's stand-in in a router path.
    pub wrapped_native: String,
    /// A swap not mined this long after it was executed reverts on chain (`deadline`).
    pub deadline_s: u64,
}

/// What a quote is priced from, gathered by the caller (the router and the chain).
#[derive(Debug, Clone)]
pub struct SwapQuoteRequest {
    pub tenant: TenantId,
    pub external_user_id: String,
    pub asset_in: Asset,
    pub asset_out: Asset,
    pub amount_in: Amount,
    pub slippage_bps: u32,
    /// Asset codes along the route, and the router's path (token contracts, the wrapped coin
    /// for BNB).
    pub route: Vec<String>,
    pub path: Vec<String>,
    /// What the router's `getAmountsOut` gives now for `amount_in` along `path`.
    pub expected_amount_out: Amount,
    /// `asset_in`'s fee policy with the pair's limits.
    pub policy: FeePolicy,
    /// The swap's expected gas cost in BNB, and BNB's price in `asset_in`.
    pub network_native: Amount,
    pub rate: Rate,
}

/// Refuses a swap while a control stops it: `kill_switch.swaps` (or the global one),
/// `maintenance.BSC`, or a TREASURY shortfall control of either asset. Checked before the
/// router is asked for a price, and again in the quote's and the execution's transactions.
pub fn controls_refusal(
    tx: &mut dyn crate::admin::ControlReads,
    asset_in: &Asset,
    asset_out: &Asset,
) -> CoreResult<()> {
    if restricted(tx, "kill_switch.swaps")? {
        return Err(Refusal::new(
            ErrorCode::KillSwitchActive,
            "swaps are suspended by an operator",
        )
        .into());
    }
    if restricted(tx, &format!("maintenance.{}", Network::Bsc))? {
        return Err(Refusal::new(ErrorCode::Maintenance, "BSC is under maintenance").into());
    }
    // Either side: a swap into an asset the chain does not back would credit more of it.
    crate::reconcile::refuse_if_halted(tx, &[asset_in.id(), asset_out.id()])
}

/// Prices and stores a quote (`POST /swaps/quote`).
pub fn create_quote(
    tx: &mut dyn WriteTx,
    id: Uuid,
    request: &SwapQuoteRequest,
    now: Timestamp,
) -> CoreResult<SwapQuote> {
    for asset in [&request.asset_in, &request.asset_out] {
        if asset.network != Network::Bsc {
            return Err(Refusal::new(
                ErrorCode::CrossChainNotSupported,
                format!(
                    "{} is a {} asset: swaps are on BSC only",
                    asset.code, asset.network
                ),
            )
            .into());
        }
    }
    controls_refusal(tx, &request.asset_in, &request.asset_out)?;
    let costs = swap_costs(
        &request.policy,
        request.amount_in,
        request.network_native,
        request.rate,
    )?;
    let min_out = min_amount_out(request.expected_amount_out, request.slippage_bps)?;
    if min_out.is_zero() {
        return Err(Refusal::new(
            ErrorCode::AmountTooSmall,
            "amount_in_units buys nothing after slippage: the router would give 0",
        )
        .into());
    }
    let quote = SwapQuote {
        id,
        tenant: request.tenant.clone(),
        external_user_id: request.external_user_id.clone(),
        asset_in: request.asset_in.code.clone(),
        asset_out: request.asset_out.code.clone(),
        amount_in: request.amount_in,
        route: request.route.clone(),
        path: request.path.clone(),
        expected_amount_out: request.expected_amount_out,
        min_amount_out: min_out,
        slippage_bps: request.slippage_bps,
        costs,
        network_native: request.network_native,
        rate: request.rate,
        created_at: now,
        expires_at: now.plus_millis(SWAP_QUOTE_LIFETIME_MS),
        used_at: None,
    };
    tx.insert_swap_quote(&quote)?;
    Ok(quote)
}

/// Ids [`execute`] needs, drawn by the caller.
#[derive(Debug, Clone, Copy)]
pub struct SwapExecuteIds {
    pub swap: Uuid,
    pub outgoing: Uuid,
    /// For an `approve(0)` and an `approve(everything)` when the router must be approved.
    pub approvals: [Uuid; 2],
    pub hold_tx: Uuid,
    pub created_event: Uuid,
    pub balance_event: Uuid,
}

fn user_of(tenant: &TenantId, user: &str, asset: &str) -> UserAccount {
    UserAccount::new(
        tenant.as_str().to_owned(),
        user.to_owned(),
        AssetId::new(Network::Bsc, asset.to_owned()),
    )
}

fn emit(
    tx: &mut dyn WriteTx,
    id: Uuid,
    s: &Swap,
    event: EventType,
    now: Timestamp,
) -> CoreResult<()> {
    let data = serde_json::to_value(s.view()).expect("a swap serializes");
    tx.enqueue_event(&NewEvent::new(id, s.tenant.as_str(), event, &data, now))?;
    Ok(())
}

/// The most an approval grants: the router never needs approving again in practice.
const APPROVE_ALL: Amount = Amount::from_units(u128::MAX);

/// Queues the approvals that let the router take `amount_in` of `token` from the hot wallet,
/// if the service's count of the allowance is short, each after the one before. Returns the
/// approval the swap must follow: the one that set the allowance it counts on.
#[allow(clippy::too_many_arguments)]
fn approve_if_short(
    tx: &mut dyn WriteTx,
    ids: &SwapExecuteIds,
    hot: &HotWallet,
    router: &str,
    token: &str,
    amount_in: Amount,
    now: Timestamp,
) -> CoreResult<Option<Uuid>> {
    let known = tx.allowance(Network::Bsc, &hot.address, token, router)?;
    let remaining = known.as_ref().map_or(Amount::ZERO, |a| a.remaining);
    let after = match remaining.checked_sub(amount_in) {
        Some(after) => after,
        None => {
            // Some tokens (USDT-style) refuse to change a non-zero allowance: to zero first,
            // unless the count says the allowance is zero. No count means the chain's
            // allowance is not known — never approved by this store, voided by a failed
            // approval, or left on chain by a data dir rebuilt from the same seed — and an
            // `approve` of everything over a non-zero allowance would revert at every swap.
            let zero_first = known.as_ref().is_none_or(|a| !a.remaining.is_zero());
            let [zero_id, all_id] = ids.approvals;
            // The approval of everything names the swap it is for, so its fee is booked to
            // it; the `approve(0)` names that approval (one approval per reference).
            let mut approvals = vec![(all_id, APPROVE_ALL, ids.swap)];
            if zero_first {
                approvals.insert(0, (zero_id, Amount::ZERO, all_id));
            }
            let mut last: Option<Uuid> = None;
            for (id, amount, reference) in approvals {
                let approval = OutgoingTx::new(
                    id,
                    Network::Bsc,
                    Purpose::Approval,
                    reference,
                    hot.address.clone(),
                    hot.path,
                    Payment::Approve {
                        token: token.to_owned(),
                        spender: router.to_owned(),
                        amount,
                    },
                    None,
                    now,
                );
                // Each approval goes out after the one before it (a zero first, for tokens
                // that refuse to change a non-zero allowance), the swap after the last.
                let approval = match last {
                    Some(before) => approval.after(before),
                    None => approval,
                };
                tx.insert_outgoing(&approval)?;
                last = Some(id);
            }
            tx.put_allowance(&Allowance {
                network: Network::Bsc,
                owner: hot.address.clone(),
                token: token.to_owned(),
                spender: router.to_owned(),
                remaining: APPROVE_ALL,
                approval_outgoing_id: all_id,
            })?;
            let after = APPROVE_ALL
                .checked_sub(amount_in)
                .expect("nothing is above everything");
            let mut counted = tx
                .allowance(Network::Bsc, &hot.address, token, router)?
                .ok_or_else(|| CoreError::Invariant("an allowance just counted is gone".into()))?;
            counted.remaining = after;
            tx.put_allowance(&counted)?;
            return Ok(Some(all_id));
        }
    };
    let mut counted = tx
        .allowance(Network::Bsc, &hot.address, token, router)?
        .ok_or_else(|| CoreError::Invariant("an allowance just counted is gone".into()))?;
    counted.remaining = after;
    tx.put_allowance(&counted)?;
    // The swap relies on the approval that set this allowance: it goes out after it, even
    // when that approval was queued by an earlier swap and has not been signed yet.
    Ok(Some(counted.approval_outgoing_id))
}

/// Executes quote `quote_id` of `tenant` (`POST /swaps`): everything in one transaction.
#[allow(clippy::too_many_arguments)]
pub fn execute(
    tx: &mut dyn WriteTx,
    ids: SwapExecuteIds,
    tenant: &TenantId,
    quote_id: Uuid,
    assets: (&Asset, &Asset),
    hot: &HotWallet,
    router: &RouterSettings,
    now: Timestamp,
) -> CoreResult<Swap> {
    let quote = tx
        .swap_quote(tenant, quote_id)?
        .ok_or_else(|| Refusal::not_found("quote"))?;
    crate::withdrawal::check_quote_usable(quote.used_at, quote.expires_at, now)?;
    let (asset_in, asset_out) = assets;
    if asset_in.code != quote.asset_in || asset_out.code != quote.asset_out {
        return Err(CoreError::Invariant(format!(
            "quote {} swaps {} for {}, not {} for {}",
            quote.id, quote.asset_in, quote.asset_out, asset_in.code, asset_out.code
        )));
    }
    controls_refusal(tx, asset_in, asset_out)?;
    crate::wallet::hot::require_active(tx, Network::Bsc, &hot.address)?;
    crate::deposit::refuse_if_owing(
        tx,
        tenant,
        &quote.external_user_id,
        Network::Bsc,
        &quote.asset_in,
    )?;
    let user = user_of(tenant, &quote.external_user_id, &quote.asset_in);
    ledger::reserve(
        tx,
        &TxMeta {
            id: ids.hold_tx,
            reference_type: ReferenceType::Swap,
            reference_id: ids.swap,
            created_at: now,
        },
        &NewHold {
            id: ids.swap,
            purpose: HoldPurpose::Swap,
            user: user.clone(),
            counter: AccountKey::system(SystemAccount::Treasury, user.asset.clone()),
            amount: quote.costs.total_debited_units,
        },
    )?;
    if !tx.use_swap_quote(quote.id, now)? {
        return Err(
            Refusal::new(ErrorCode::QuoteAlreadyUsed, "this quote was used already").into(),
        );
    }
    let native_in = asset_in.contract.is_none();
    let native_out = asset_out.contract.is_none();
    let mut approved_by = None;
    if !native_in {
        let token = quote
            .path
            .first()
            .ok_or_else(|| CoreError::Invariant(format!("quote {} has no path", quote.id)))?;
        approved_by = approve_if_short(tx, &ids, hot, &router.router, token, quote.amount_in, now)?;
    }
    let deadline_s = u64::try_from(now.unix_millis() / 1_000)
        .unwrap_or(0)
        .saturating_add(router.deadline_s);
    let swap_tx = OutgoingTx::new(
        ids.outgoing,
        Network::Bsc,
        Purpose::Swap,
        ids.swap,
        hot.address.clone(),
        hot.path,
        Payment::Swap {
            router: router.router.clone(),
            path: quote.path.clone(),
            amount_in: quote.amount_in,
            min_out: quote.min_amount_out,
            native_in,
            native_out,
            to: hot.address.clone(),
            deadline_s,
        },
        None,
        now,
    );
    let swap_tx = match approved_by {
        Some(approval) => swap_tx.after(approval),
        None => swap_tx,
    };
    tx.insert_outgoing(&swap_tx)?;
    let s = Swap {
        id: ids.swap,
        tenant: tenant.clone(),
        quote_id: quote.id,
        external_user_id: quote.external_user_id.clone(),
        asset_in: quote.asset_in.clone(),
        asset_out: quote.asset_out.clone(),
        amount_in: quote.amount_in,
        route: quote.route.clone(),
        path: quote.path.clone(),
        expected_amount_out: quote.expected_amount_out,
        min_amount_out: quote.min_amount_out,
        costs: quote.costs,
        rate: quote.rate,
        status: SwapStatus::Reserved,
        hold_id: ids.swap,
        outgoing_id: ids.outgoing,
        tx_hash: None,
        block_number: None,
        actual_amount_in: None,
        actual_amount_out: None,
        actual_network_cost_units: None,
        failure_reason: None,
        history: vec![WithdrawalStep {
            status: SwapStatus::Reserved.as_str().to_owned(),
            tx_hash: None,
            at: now.to_rfc3339(),
        }],
        created_at: now,
        updated_at: now,
    };
    tx.insert_swap(&s)?;
    emit(tx, ids.created_event, &s, EventType::SwapCreated, now)?;
    balance_event::emit(
        tx,
        ids.balance_event,
        &user,
        (ReferenceType::Swap, s.id),
        now,
    )?;
    Ok(s)
}

/// What the router actually took and gave, read from the receipt's token moves: (in, out).
/// In: the wrapped coin the router wrapped (`native_in`), else the first token sent by the hot
/// wallet. Out: the wrapped coin the router unwrapped (`native_out`), else the last token
/// received by the hot wallet.
pub fn actual_amounts(
    moves: &[TokenMove],
    path: &[String],
    router: &str,
    hot: &str,
    native_in: bool,
    native_out: bool,
) -> Option<(Amount, Amount)> {
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    let (first, last) = (path.first()?, path.last()?);
    let sum = |pick: &dyn Fn(&TokenMove) -> bool| -> Option<Amount> {
        let mut total = Amount::ZERO;
        let mut any = false;
        for m in moves.iter().filter(|m| pick(m)) {
            total = total.checked_add(m.amount)?;
            any = true;
        }
        any.then_some(total)
    };
    let taken = if native_in {
        sum(&|m| m.kind == MoveKind::Wrap && same(&m.contract, first) && same(&m.from, router))
    } else {
        sum(&|m| m.kind == MoveKind::Transfer && same(&m.contract, first) && same(&m.from, hot))
    }?;
    let given = if native_out {
        sum(&|m| m.kind == MoveKind::Unwrap && same(&m.contract, last) && same(&m.from, router))
    } else {
        sum(&|m| m.kind == MoveKind::Transfer && same(&m.contract, last) && same(&m.to, hot))
    }?;
    Some((taken, given))
}

/// Why a swap reverted, for its `failure_reason`. The router reverts a swap mined in a block
/// later than its deadline (`deadline >= block.timestamp` fails), or one that would give less
/// than the minimum output: with the deadline ruled out by the block's time, the price moved
/// (the approvals are the service's own transactions, whose outcome it records on their own).
fn revert_reason(block_time_ms: Option<i64>, deadline_s: u64) -> String {
    let deadline_ms = i64::try_from(deadline_s.saturating_mul(1_000)).unwrap_or(i64::MAX);
    match block_time_ms {
        Some(t) if t > deadline_ms => format!(
            "the swap reverted on chain: the deadline passed (mined at {} s, deadline {deadline_s} s)",
            t / 1_000
        ),
        Some(_) => "the swap reverted on chain: the price moved past the minimum output".to_owned(),
        None => "the swap reverted on chain: the price moved past the minimum output, or the \
                 deadline passed"
            .to_owned(),
    }
}

/// Brings the swap (or the allowance an approval set) paid by `out` up to date with it, in the
/// transaction that recorded `out`'s move.
pub fn on_outgoing(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    now: Timestamp,
) -> CoreResult<()> {
    match out.purpose {
        Purpose::Approval => on_approval(tx, out, native, now),
        Purpose::Swap => on_swap(tx, entropy, out, native, now),
        Purpose::Withdrawal | Purpose::Sweep | Purpose::Funding | Purpose::Rebalance => Ok(()),
    }
}

/// An approval in a block burned gas, whether it succeeded or reverted: the house's expense,
/// booked once it is final (network fees debited, the treasury's native coin credited) so that
/// the books follow the hot wallet on chain. An approval that failed on chain also grants
/// nothing: forget the count, so the next swap approves again, from zero (the swaps counted on
/// it fail on chain and release their holds).
fn on_approval(
    tx: &mut dyn WriteTx,
    out: &OutgoingTx,
    native: &AssetId,
    now: Timestamp,
) -> CoreResult<()> {
    if !matches!(out.status, OutStatus::Final | OutStatus::Failed) {
        return Ok(());
    }
    let Payment::Approve { token, spender, .. } = &out.payment else {
        return Err(CoreError::Invariant(format!(
            "approval {} does not pay an approve",
            out.id
        )));
    };
    let fee = out
        .included
        .as_ref()
        .map(|i| i.fee_native)
        .filter(|f| !f.is_zero());
    // The ledger transaction takes the approval's id: booked once however often its final
    // state is saved.
    if let Some(fee) = fee {
        if tx.ledger_transaction(out.id)?.is_none() {
            let swap = swap_of_approval(tx, out)?;
            ledger::post(
                tx,
                &TxMeta {
                    id: out.id,
                    reference_type: ReferenceType::Swap,
                    reference_id: swap,
                    created_at: now,
                },
                TxKind::NetworkFee,
                &[
                    Leg::debit(
                        AccountKey::system(SystemAccount::NetworkFees, native.clone()),
                        fee,
                    ),
                    Leg::credit(
                        AccountKey::system(SystemAccount::Treasury, native.clone()),
                        fee,
                    ),
                ],
            )?;
        }
    }
    if crate::outgoing::is_revocation_tx(out) {
        // A former router's approval: zero once the revocation succeeded on chain; otherwise
        // the count stays, and the next start queues it again.
        let counted = tx.allowance(Network::Bsc, &out.from, token, spender)?;
        let succeeded =
            out.status == OutStatus::Final && out.included.as_ref().is_some_and(|i| i.succeeded);
        if let Some(mut a) = counted.filter(|a| a.approval_outgoing_id == out.id) {
            if succeeded {
                a.remaining = Amount::ZERO;
                tx.put_allowance(&a)?;
            }
        }
        return Ok(());
    }
    if out.status == OutStatus::Failed {
        // The count set by this approval, or by the approval of everything this `approve(0)`
        // went first for (its reference): that one goes out over an allowance the zero did
        // not clear, so it counts for nothing either; the next swap zeroes first again.
        let counted = tx.allowance(Network::Bsc, &out.from, token, spender)?;
        if counted.is_some_and(|a| {
            a.approval_outgoing_id == out.id || a.approval_outgoing_id == out.reference_id
        }) {
            tx.drop_allowance(Network::Bsc, &out.from, token, spender)?;
        }
    }
    Ok(())
}

/// Revokes what the hot wallet approved for any spender other than `router` (the router the
/// service swaps through now): the service approves its router without limit, so an approval
/// left to a router it no longer uses (a changed `[swaps] router`, a router found unsafe)
/// would let that contract take the hot wallet's tokens for ever. For each such allowance
/// still counted above zero, an `approve(0)` is queued from the hot wallet (after the approval
/// that set it, if that one is still on its way) and the count is set to zero; each is audited.
/// Run when the service starts; a second run queues nothing. Returns the revocations queued.
pub fn revoke_stale_approvals(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    hot: &HotWallet,
    router: &str,
    now: Timestamp,
) -> CoreResult<Vec<Uuid>> {
    let mut queued = Vec::new();
    for a in tx.allowances_of(Network::Bsc, &hot.address)? {
        if a.spender.eq_ignore_ascii_case(router) || a.remaining.is_zero() {
            continue;
        }
        // Already being revoked (a start before this one queued it): not twice.
        let revoking = tx
            .outgoing(a.approval_outgoing_id)?
            .is_some_and(|o| crate::outgoing::is_revocation_tx(&o) && !o.status.is_terminal());
        if revoking {
            continue;
        }
        let id = new_uuid(entropy);
        let revoke = OutgoingTx::new(
            id,
            Network::Bsc,
            Purpose::Approval,
            // A revocation serves no swap: it references itself.
            id,
            hot.address.clone(),
            hot.path,
            Payment::Approve {
                token: a.token.clone(),
                spender: a.spender.clone(),
                amount: Amount::ZERO,
            },
            None,
            now,
        );
        let still_going = tx
            .outgoing(a.approval_outgoing_id)?
            .is_some_and(|o| !o.status.is_terminal());
        let revoke = if still_going {
            revoke.after(a.approval_outgoing_id)
        } else {
            revoke
        };
        tx.insert_outgoing(&revoke)?;
        // Counted as it is until the revocation is final (then zero); if it fails, the count
        // stays and the next start revokes again.
        tx.put_allowance(&Allowance {
            approval_outgoing_id: id,
            ..a.clone()
        })?;
        tx.append_audit(&crate::admin::AuditRecord {
            id: new_uuid(entropy),
            actor: "system".into(),
            action: "swap.router_approval_revoked".into(),
            target: format!("{}/{}/{}", a.owner, a.token, a.spender),
            old_value: Some(serde_json::json!({ "remaining_units": a.remaining })),
            new_value: Some(serde_json::json!({ "remaining_units": "0", "outgoing_id": id })),
            reason: format!("{} is not the configured router {router}", a.spender),
            created_at: now,
        })?;
        queued.push(id);
    }
    Ok(queued)
}

/// The swap an approval was queued for: its reference, or (an `approve(0)`) its reference's.
/// Approvals queued before they named their swap referenced themselves: their own id then.
fn swap_of_approval(tx: &mut dyn WriteTx, out: &OutgoingTx) -> CoreResult<Uuid> {
    let mut reference = out.reference_id;
    if reference != out.id && tx.swap_by_id(reference)?.is_none() {
        if let Some(next) = tx.outgoing(reference)? {
            if next.purpose == Purpose::Approval {
                reference = next.reference_id;
            }
        }
    }
    Ok(reference)
}

fn on_swap(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    now: Timestamp,
) -> CoreResult<()> {
    let Some(mut s) = tx.swap_by_id(out.reference_id)? else {
        return Err(CoreError::Invariant(format!(
            "outgoing transaction {} pays swap {}, which does not exist",
            out.id, out.reference_id
        )));
    };
    if matches!(s.status, SwapStatus::Confirmed | SwapStatus::Failed) {
        return Ok(());
    }
    let invariant = CoreError::Invariant;
    let hash = out.visible_hash().map(str::to_owned);
    let mut changed = hash != s.tx_hash;
    s.tx_hash = hash;
    let block = out.included_payment().map(|i| i.block_number);
    changed |= block != s.block_number;
    s.block_number = block;
    let user_in = user_of(&s.tenant, &s.external_user_id, &s.asset_in);
    let sent = matches!(out.status, OutStatus::Sent | OutStatus::Included);
    if sent && s.status == SwapStatus::Reserved {
        s.transition(SwapStatus::Broadcasted, now)
            .map_err(invariant)?;
        tx.update_swap(&s)?;
        // Partners learn of a swap's end; `swap.created` told them of its start.
        return Ok(());
    }
    let Payment::Swap {
        router,
        native_in,
        native_out,
        to,
        deadline_s,
        ..
    } = &out.payment
    else {
        return Err(CoreError::Invariant(format!(
            "swap {} is paid by a transaction that is not a swap",
            s.id
        )));
    };
    match out.status {
        OutStatus::Final => {
            let included = out
                .included
                .as_ref()
                .ok_or_else(|| CoreError::Invariant("final without an inclusion".into()))?;
            let (taken, given) = actual_amounts(
                &included.moves,
                &s.path,
                router,
                to,
                *native_in,
                *native_out,
            )
            .ok_or_else(|| {
                CoreError::Invariant(format!(
                    "swap {} succeeded in {} but its receipt shows no input or output",
                    s.id, included.hash
                ))
            })?;
            if taken != s.amount_in {
                return Err(CoreError::Invariant(format!(
                    "swap {}: the router took {taken}, not the {} the user paid for",
                    s.id, s.amount_in
                )));
            }
            let asset_in = AssetId::new(Network::Bsc, s.asset_in.clone());
            let settled = settlement(
                &asset_in,
                native,
                s.amount_in,
                &s.costs,
                s.rate,
                included.fee_native,
            )?;
            let user_out = user_of(&s.tenant, &s.external_user_id, &s.asset_out);
            let mut also = settled.also;
            if !given.is_zero() {
                also.push(Leg::debit(
                    AccountKey::system(SystemAccount::Treasury, user_out.asset.clone()),
                    given,
                ));
                also.push(Leg::credit(user_out.key(), given));
            }
            ledger::settle(
                tx,
                &Settle {
                    hold_id: s.hold_id,
                    tx_id: new_uuid(entropy),
                    amount: settled.user_pays,
                    also,
                    at: now,
                },
            )?;
            s.actual_amount_in = Some(taken);
            s.actual_amount_out = Some(given);
            s.actual_network_cost_units = Some(settled.actual_cost_units);
            if s.status == SwapStatus::Reserved {
                s.transition(SwapStatus::Broadcasted, now)
                    .map_err(invariant)?;
            }
            s.transition(SwapStatus::Confirmed, now)
                .map_err(invariant)?;
            tx.update_swap(&s)?;
            emit(tx, new_uuid(entropy), &s, EventType::SwapConfirmed, now)?;
            for user in [&user_in, &user_out] {
                balance_event::emit(
                    tx,
                    new_uuid(entropy),
                    user,
                    (ReferenceType::Swap, s.id),
                    now,
                )?;
            }
            Ok(())
        }
        OutStatus::Failed => {
            ledger::release(tx, s.hold_id, new_uuid(entropy), now)?;
            if let Some(gas) = out
                .included
                .as_ref()
                .map(|i| i.fee_native)
                .filter(|g| !g.is_zero())
            {
                // A reverted swap still burned gas: the house's expense.
                ledger::post(
                    tx,
                    &TxMeta {
                        id: new_uuid(entropy),
                        reference_type: ReferenceType::Swap,
                        reference_id: s.id,
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
            // The router took nothing: what the swap counted off the allowance is back.
            if !*native_in {
                if let Some(token) = s.path.first() {
                    if let Some(mut a) = tx.allowance(Network::Bsc, &out.from, token, router)? {
                        a.remaining = a.remaining.checked_add(s.amount_in).unwrap_or(APPROVE_ALL);
                        tx.put_allowance(&a)?;
                    }
                }
            }
            s.failure_reason = Some(match (out.included_payment(), &out.failure_reason) {
                // Not included, or only a cancel's void was: the engine's reason.
                (None, Some(r)) => r.clone(),
                (included, _) => {
                    revert_reason(included.as_ref().and_then(|i| i.block_time_ms), *deadline_s)
                }
            });
            s.transition(SwapStatus::Failed, now).map_err(invariant)?;
            tx.update_swap(&s)?;
            emit(tx, new_uuid(entropy), &s, EventType::SwapFailed, now)?;
            balance_event::emit(
                tx,
                new_uuid(entropy),
                &user_in,
                (ReferenceType::Swap, s.id),
                now,
            )
        }
        _ => {
            if changed {
                s.updated_at = now;
                tx.update_swap(&s)?;
            }
            Ok(())
        }
    }
}
