//! The whole action of one broadcaster step, decided here so that the runtime only gathers
//! facts and acts on them.
//!
//! [`decide`](super::decide) says what the chain's answers call for. For a decision that may
//! sign ([`plan`]), the facts are asked for one at a time ([`Need`]), in the order that lets a
//! refusal cost no chain call: the controls, the predecessor and the signing lock come from
//! the store before the wallet's balances and the node's price are asked for. Once enough is
//! known, the [`Plan`] says the whole action: sign with this bid and fee hold, send the stored
//! bytes again, look again later, or fail unsent, with the typed wait and the alert to raise.
//! A decision that signs nothing is applied to the record by [`settle`]; a node's answer to a
//! send by [`record_answer`]. The runtime loops: gather what is asked, plan again, act.

use uuid::Uuid;

use crate::admin::Alert;
use crate::amount::Amount;
use crate::ports::sender::{BroadcastOutcome, FeeBid, FeeEstimate, Inclusion, Payment};
use crate::time::Timestamp;
use crate::tron::resources::ResourcePlan;

use super::funds::FundsSeen;
use super::{
    repriced, void_priced, Decision, EnginePolicy, Included, OutStatus, OutgoingTx, Purpose, Wait,
    DOUBLE_PAYMENT_NOTE,
};

/// A payment whose attempt the node has refused for this many `replace_after` periods raises
/// an `outgoing_stuck` alert: re-pricing did not cure it, an operator should look.
pub const REFUSED_ALERT_AFTER_REPLACES: i64 = 10;

/// A fact a signing decision needs that has not been gathered yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Whether new money may leave for it now ([`super::may_sign_new`]).
    Controls,
    /// Whether the transaction it follows (`after`) has its nonce, or has ended.
    Predecessor,
    /// Whether this instance holds its sender's signing lock.
    SigningLock,
    /// Whether a transaction of the same sender with a lower nonce is out of a block.
    LowerNoncePending,
    /// Whether the sender covers the payment beside what is on its way, before any fee.
    FundsBeforeFee,
    /// The same with this fee held for the payment itself.
    FundsWithFee(Amount),
    /// The node's price of the payment; a permanent refusal is a fact ([`Priced::Refused`]).
    Price,
    /// The node's price now, for a re-priced attempt; a failure ends the step.
    FreshPrice,
    /// The node's price of the void of its nonce; a failure is no price.
    VoidPrice,
    /// Whether this process holds the seed that derives its sender.
    Seed,
}

/// What the sender's balances say about a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Funds {
    /// It is covered; the transactions the check counted (fenced at record time).
    Covered(FundsSeen),
    /// It is not: why.
    Short(String),
}

/// What the node says the payment costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Priced {
    Estimate(FeeEstimate),
    /// A permanent refusal (a frozen recipient, a paused token, an estimate that reverts).
    Refused(String),
}

/// What the runtime has gathered so far for one step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    pub controls: Option<bool>,
    pub predecessor: Option<bool>,
    pub signing_lock: Option<bool>,
    pub lower_nonce_pending: Option<bool>,
    pub funds_before_fee: Option<Funds>,
    /// With the fee it was checked with: a check with another fee is no answer.
    pub funds_with_fee: Option<(Amount, Funds)>,
    pub price: Option<Priced>,
    pub fresh_price: Option<FeeEstimate>,
    pub void_price: Option<Option<FeeBid>>,
    /// `Err`: why the seed is not loaded.
    pub seed: Option<Result<(), String>>,
}

/// One step of planning: a fact to gather first, or the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Need(Need),
    Act(Box<Plan>),
}

/// The action, and the wait to note (with its alert) before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub action: Action,
    pub notice: Option<Notice>,
}

impl Plan {
    fn act(action: Action) -> Self {
        Plan {
            action,
            notice: None,
        }
    }

    fn noting(action: Action, notice: Option<Notice>) -> Self {
        Plan { action, notice }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Sign a new attempt of the payment, store it, and only then send it.
    Sign(Signing),
    /// BSC, a cancel: sign a void of the payment's nonce at `bid`, store it, send it.
    SignVoid { bid: FeeBid },
    /// Send the newest attempt's stored bytes again.
    Resend,
    /// Nothing goes out now; look again after `rebroadcast_after`.
    CheckLater,
    /// Fail it unsent: it holds no nonce, and no attempt of it can be included (none was
    /// signed, or a TRON sweep's earlier attempts are proved absent and expired).
    FailUnsent { reason: String },
}

/// A new attempt to sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signing {
    pub bid: FeeBid,
    /// TRON: the resource plan it was priced with.
    pub plan: Option<ResourcePlan>,
    /// What the funds check counted (the write that stores the attempt fences on it).
    pub seen: FundsSeen,
    /// A first attempt: signed at the nonce the sender's allocator hands out next.
    pub first: bool,
    /// What follows when the write that would store it refuses it (a control turned on).
    pub if_refused: Fallback,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    CheckLater,
    /// [`held_by_control`].
    HeldByControl,
}

/// A wait to note in the history, with the alert raised once per wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub wait: Wait,
    /// Appended to the wait's note.
    pub more: String,
    pub alert: AlertDraft,
}

/// An alert about to be raised (the runtime gives it an id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertDraft {
    pub kind: &'static str,
    pub severity: &'static str,
    pub message: String,
    pub reference: (&'static str, Uuid),
}

impl AlertDraft {
    pub fn open(&self, id: Uuid, now: Timestamp) -> Alert {
        Alert::open(
            id,
            self.kind,
            self.severity,
            self.message.clone(),
            Some(self.reference),
            now,
        )
    }

    fn stuck(out: &OutgoingTx, message: String) -> Self {
        AlertDraft {
            kind: "outgoing_stuck",
            severity: "critical",
            message,
            reference: ("outgoing_transaction", out.id),
        }
    }
}

/// Why a plan cannot be made yet.
enum Ask {
    Need(Need),
    /// The engine's own consistency broke.
    Invariant(String),
}

impl From<Need> for Ask {
    fn from(need: Need) -> Self {
        Ask::Need(need)
    }
}

fn known<T: Clone>(fact: &Option<T>, need: Need) -> Result<T, Need> {
    fact.clone().ok_or(need)
}

/// Whether the sender covers the payment with `fee` held, checked with that very fee.
fn funds_with(facts: &Facts, fee: Amount) -> Result<Funds, Need> {
    match &facts.funds_with_fee {
        Some((checked, funds)) if *checked == fee => Ok(funds.clone()),
        _ => Err(Need::FundsWithFee(fee)),
    }
}

/// The next step of a decision that may sign, given what is known; `None` for a decision that
/// signs nothing (see [`settle`]). `Err`: the engine's consistency broke.
pub fn plan(
    decision: &Decision,
    out: &OutgoingTx,
    facts: &Facts,
    policy: &EnginePolicy,
) -> Option<Result<Step, String>> {
    let planned = match decision {
        Decision::FirstAttempt => new_payment(out, facts, true),
        Decision::Rebuild => new_payment(out, facts, false),
        Decision::Reprice => reprice(out, facts, policy),
        Decision::Replace { bid } => replace(out, facts, *bid),
        Decision::Void { bid } => void(out, facts, *bid, policy),
        Decision::Broadcast => broadcast(out, facts),
        _ => return None,
    };
    Some(match planned {
        Ok(plan) => Ok(Step::Act(Box::new(plan))),
        Err(Ask::Need(need)) => Ok(Step::Need(need)),
        Err(Ask::Invariant(why)) => Err(why),
    })
}

/// A first attempt, or (TRON) a new transaction after the earlier ones expired: controls, then
/// what the payment moves (a token payment the wallet cannot cover cannot even be priced: the
/// node's estimate reverts, and the alert must still be raised), the price, the seed, and the
/// funds with the fee to hold.
fn new_payment(out: &OutgoingTx, facts: &Facts, first: bool) -> Result<Plan, Ask> {
    let may = known(&facts.controls, Need::Controls)?
        && (!first || known(&facts.predecessor, Need::Predecessor)?)
        && known(&facts.signing_lock, Need::SigningLock)?;
    if !may {
        return Ok(Plan::act(Action::CheckLater));
    }
    if let Funds::Short(why) = known(&facts.funds_before_fee, Need::FundsBeforeFee)? {
        return Ok(unfunded(out, &why));
    }
    let estimate = match known(&facts.price, Need::Price)? {
        Priced::Estimate(estimate) => estimate,
        Priced::Refused(why) => return Ok(cannot_price(out, &why)),
    };
    if let Err(why) = known(&facts.seed, Need::Seed)? {
        return Ok(seed_not_loaded(out, &why));
    }
    let fee = fee_to_hold(out, &estimate);
    match funds_with(facts, fee)? {
        Funds::Short(why) => Ok(unfunded(out, &why)),
        Funds::Covered(seen) => Ok(Plan::act(Action::Sign(Signing {
            bid: estimate.bid,
            plan: estimate.plan,
            seen,
            first,
            if_refused: Fallback::CheckLater,
        }))),
    }
}

/// The node refused the newest attempt: priced again, unless nothing of the sender's below it
/// is in a block yet (no price makes it minable before those are, so no new signature is
/// worth its fee) or the node's price is no higher than what was refused.
fn reprice(out: &OutgoingTx, facts: &Facts, policy: &EnginePolicy) -> Result<Plan, Ask> {
    if !known(&facts.controls, Need::Controls)? {
        return Ok(held_by_control(out));
    }
    if !known(&facts.signing_lock, Need::SigningLock)? {
        return Ok(Plan::act(Action::CheckLater));
    }
    if known(&facts.lower_nonce_pending, Need::LowerNoncePending)? {
        return Ok(Plan::act(Action::Resend));
    }
    let refused = out
        .latest()
        .map(|a| a.bid)
        .ok_or_else(|| Ask::Invariant("reprice without an attempt".into()))?;
    let fresh = known(&facts.fresh_price, Need::FreshPrice)?;
    let Some(bid) = repriced(refused, fresh.bid, policy) else {
        return Ok(Plan::act(Action::Resend));
    };
    match funds_with(facts, max_fee(bid))? {
        Funds::Short(why) => Ok(Plan::noting(
            Action::CheckLater,
            hot_wallet_short(out, &why),
        )),
        Funds::Covered(seen) => Ok(Plan::act(Action::Sign(Signing {
            bid,
            plan: fresh.plan,
            seen,
            first: false,
            if_refused: Fallback::HeldByControl,
        }))),
    }
}

/// A replacement under the same nonce at `bid` (from the engine; no plan priced it). It is a
/// new signature: not while a control is on, nor while a lower nonce of the sender is out of a
/// block (that is what holds it back, not the price). The bytes already out there are sent
/// again instead, also when the wallet cannot fund the higher bid.
fn replace(out: &OutgoingTx, facts: &Facts, bid: FeeBid) -> Result<Plan, Ask> {
    let may = known(&facts.controls, Need::Controls)?
        && !known(&facts.lower_nonce_pending, Need::LowerNoncePending)?
        && known(&facts.signing_lock, Need::SigningLock)?;
    if !may {
        return Ok(Plan::act(Action::Resend));
    }
    match funds_with(facts, max_fee(bid))? {
        Funds::Short(why) => Ok(Plan::noting(Action::Resend, hot_wallet_short(out, &why))),
        Funds::Covered(seen) => Ok(Plan::act(Action::Sign(Signing {
            bid,
            plan: None,
            seen,
            first: false,
            if_refused: Fallback::HeldByControl,
        }))),
    }
}

/// BSC, a cancel requested: a void of the payment's nonce at no less than `minimum`, raised to
/// the node's price where that is higher. No switch stops it (it moves no money; it frees the
/// nonce the sender's later payments wait behind), nor a funds check beyond the node's. The
/// same void again (refused, and nothing prices a new one higher; voids only rise, so it is the
/// newest) is sent again: a new signature would give the same transaction.
fn void(
    out: &OutgoingTx,
    facts: &Facts,
    minimum: FeeBid,
    policy: &EnginePolicy,
) -> Result<Plan, Ask> {
    if let Err(why) = known(&facts.seed, Need::Seed)? {
        return Ok(seed_not_loaded(out, &why));
    }
    let fresh = known(&facts.void_price, Need::VoidPrice)?;
    let bid = void_priced(minimum, fresh, policy);
    if out.attempts.iter().any(|a| a.void && a.bid == bid.into()) {
        return Ok(Plan::act(Action::Resend));
    }
    Ok(Plan::act(Action::SignVoid { bid }))
}

/// Money that never left (signed, then refused or interrupted) leaves only if it still may: a
/// control turned on since, or a debt of the user, stops it here. A cancel's void moves no
/// money: no control holds it.
fn broadcast(out: &OutgoingTx, facts: &Facts) -> Result<Plan, Ask> {
    let never_sent = out.attempts.iter().all(|a| a.sent_at.is_none());
    let void = out.latest().is_some_and(|a| a.void);
    if never_sent && !void && !known(&facts.controls, Need::Controls)? {
        return Ok(held_by_control(out));
    }
    Ok(Plan::act(Action::Resend))
}

/// A payment a control holds back (decisions §11): bytes that already went out are sent again,
/// never new ones; what never left stays, and one that holds its nonce meanwhile raises one
/// `outgoing_stuck` alert, since the sender's later payments wait behind it.
pub fn held_by_control(out: &OutgoingTx) -> Plan {
    if !out.attempts.iter().all(|a| a.sent_at.is_none()) {
        return Plan::act(Action::Resend);
    }
    let notice = match out.nonce {
        Some(nonce) if out.last_wait() != Some(Wait::HoldsNonce) => Some(Notice {
            wait: Wait::HoldsNonce,
            more: format!(" (nonce {nonce})"),
            alert: AlertDraft::stuck(
                out,
                format!(
                    "{} outgoing transaction {} ({} {}) is signed under nonce {nonce} of {} but \
                     may not be sent now: later payments of that wallet wait behind it until \
                     the control or debt that holds it is lifted",
                    out.network,
                    out.id,
                    out.purpose.as_str(),
                    out.reference_id,
                    out.from
                ),
            ),
        }),
        _ => None,
    };
    Plan::noting(Action::CheckLater, notice)
}

/// Another instance took the sender's signing lock while this one signed: the attempt was
/// dropped unsent. Bytes that already went out are sent again; otherwise it is looked at again
/// later (the other instance is no control: no alert).
pub fn lock_lost(out: &OutgoingTx) -> Plan {
    if out.attempts.iter().any(|a| a.sent_at.is_some()) {
        return Plan::act(Action::Resend);
    }
    Plan::act(Action::CheckLater)
}

/// A new payment its sender cannot fund. A hot wallet waits to be funded (one
/// `hot_wallet_insufficient` alert per wait); a sweep's deposit address no longer holds what
/// its plan assumed (the fee rose since): nothing was signed, so it fails now and the sweeper
/// plans afresh. Only what holds no nonce may fail unsent (a failure must leave no gap).
fn unfunded(out: &OutgoingTx, why: &str) -> Plan {
    if out.purpose == Purpose::Sweep && out.nonce.is_none() {
        return Plan::act(Action::FailUnsent {
            reason: "the address no longer covers the planned sweep and its fee".into(),
        });
    }
    Plan::noting(Action::CheckLater, hot_wallet_short(out, why))
}

/// The `hot_wallet_insufficient` alert, once per wait. A sweep's sender is a deposit address,
/// not a hot wallet: nobody needs to fund it.
fn hot_wallet_short(out: &OutgoingTx, why: &str) -> Option<Notice> {
    if out.purpose == Purpose::Sweep || out.last_wait() == Some(Wait::HotWalletShort) {
        return None;
    }
    Some(Notice {
        wait: Wait::HotWalletShort,
        more: format!(": {why}"),
        alert: AlertDraft {
            kind: "hot_wallet_insufficient",
            severity: "warning",
            message: format!(
                "{} hot wallet {} cannot fund {} {}: {why}; it is sent once the wallet is funded",
                out.network,
                out.from,
                out.purpose.as_str(),
                out.reference_id
            ),
            reference: (out.purpose.as_str(), out.reference_id),
        },
    })
}

/// A payment the node permanently refuses to price is not retried in silence: one
/// `outgoing_stuck` alert, and it waits for an operator (nothing was signed, no nonce held).
fn cannot_price(out: &OutgoingTx, why: &str) -> Plan {
    let notice = (out.last_wait() != Some(Wait::CannotPrice)).then(|| Notice {
        wait: Wait::CannotPrice,
        more: format!(": {why}"),
        alert: AlertDraft::stuck(
            out,
            format!(
                "{} outgoing transaction {} ({} {}) cannot be priced: {why}; it waits for an \
                 operator",
                out.network,
                out.id,
                out.purpose.as_str(),
                out.reference_id
            ),
        ),
    });
    Plan::noting(Action::CheckLater, notice)
}

/// Signing with another seed's key would send from an address that is not the sender (and on
/// BSC spend its nonce for nothing): one `outgoing_stuck` alert, and it waits for a restart.
pub fn seed_not_loaded(out: &OutgoingTx, why: &str) -> Plan {
    let notice = (out.last_wait() != Some(Wait::SeedNotLoaded)).then(|| Notice {
        wait: Wait::SeedNotLoaded,
        more: format!(": {why}"),
        alert: AlertDraft::stuck(
            out,
            format!(
                "{} outgoing transaction {} is not signed: {why}",
                out.network, out.id
            ),
        ),
    });
    Plan::noting(Action::CheckLater, notice)
}

/// What the sender must hold for the fee: the worst the payment may burn; for a native sweep,
/// the fee its plan left behind (it sends everything else, and its fee is exact). A token
/// sweep holds the worst too: short of it, the node refuses it (EVM) or it runs out of energy
/// and burns what it has (TRON). On TRON a sweep counts the address's own bandwidth and energy
/// (energy a treasury delegation lent it included): only its own transactions spend them, one
/// sweep at a time, so they are still there when it executes.
pub fn fee_to_hold(out: &OutgoingTx, estimate: &FeeEstimate) -> Amount {
    if out.purpose == Purpose::Sweep {
        if let Some(plan) = &estimate.plan {
            return Amount::from_units(u128::from(plan.max_burn_keeping_resources_sun()));
        }
        if matches!(out.payment, Payment::Native { .. }) {
            return estimate.expected_native;
        }
    }
    estimate.max_native
}

/// The most a bid may burn.
pub fn max_fee(bid: FeeBid) -> Amount {
    Amount::from_units(match bid {
        FeeBid::Gas {
            gas_limit,
            gas_price_wei,
        } => u128::from(gas_limit).saturating_mul(gas_price_wei),
        FeeBid::FeeLimit { sun } => u128::from(sun),
    })
}

/// What a decision that signs nothing leaves to raise beside the record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// An alert raised in the write that saves the record.
    pub alert: Option<AlertDraft>,
    /// A wait to note (its alert raised before the record is saved).
    pub notice: Option<Notice>,
    /// Attempts all in blocks: a double payment to record (and `kill_switch.global` latched).
    pub double_payment: Option<Vec<String>>,
}

/// Applies a decision that signs nothing to `out`; `None` for one that may sign (see
/// [`plan`]). `Err`: a transition the lifecycle refuses (the engine's consistency broke).
pub fn settle(
    out: &mut OutgoingTx,
    decision: &Decision,
    policy: &EnginePolicy,
    now: Timestamp,
) -> Option<Result<Settled, String>> {
    let settled = match decision {
        Decision::Included { hash, inclusion } => {
            let detail = format!("{hash} in block {}", inclusion.block_number);
            record_inclusion(out, hash, inclusion, detail, policy, now).map(|()| Settled::default())
        }
        Decision::IncludedUnknownToLookups { hash, inclusion } => {
            let detail = format!(
                "{hash} in block {} (listed in the block; the lookups by id do not know it)",
                inclusion.block_number
            );
            let alert = AlertDraft {
                kind: "node_inconsistent",
                severity: "warning",
                message: format!(
                    "{} outgoing transaction {}: attempt {hash} is listed in block {} but the \
                     node's lookups by id do not know it (a lagging or lying endpoint); \
                     recorded as included from the block",
                    out.network, out.id, inclusion.block_number
                ),
                reference: ("outgoing_transaction", out.id),
            };
            record_inclusion(out, hash, inclusion, detail, policy, now).map(|()| Settled {
                alert: Some(alert),
                ..Settled::default()
            })
        }
        Decision::DoublePayment {
            hash,
            inclusion,
            hashes,
        } => {
            let detail = format!(
                "{DOUBLE_PAYMENT_NOTE} attempts {} are all in blocks; {hash} in block {}",
                hashes.join(", "),
                inclusion.block_number
            );
            record_inclusion(out, hash, inclusion, detail, policy, now).map(|()| Settled {
                double_payment: Some(hashes.clone()),
                ..Settled::default()
            })
        }
        Decision::Reorged => {
            out.included = None;
            out.next_check_at = now;
            out.transition(OutStatus::Sent, "its block left the chain", now)
                .map(|()| Settled::default())
        }
        Decision::Final => {
            let succeeded = out.included.as_ref().is_some_and(|i| i.succeeded);
            let (status, detail) = if succeeded {
                (OutStatus::Final, "final")
            } else {
                out.failure_reason = Some("the transaction failed on chain".into());
                (OutStatus::Failed, "final with a failed receipt")
            };
            out.transition(status, detail, now)
                .map(|()| Settled::default())
        }
        Decision::Fail { reason } => {
            out.failure_reason = Some(reason.clone());
            out.transition(OutStatus::Failed, reason.clone(), now)
                .map(|()| Settled::default())
        }
        Decision::Stuck { reason } => {
            out.next_check_at = now.plus_millis(policy.replace_after_ms);
            let notice = (out.last_wait() != Some(Wait::Stuck)).then(|| Notice {
                wait: Wait::Stuck,
                more: format!(" {reason}"),
                alert: AlertDraft::stuck(
                    out,
                    format!("{} outgoing transaction {}: {reason}", out.network, out.id),
                ),
            });
            Ok(Settled {
                notice,
                ..Settled::default()
            })
        }
        Decision::Wait { until } => {
            out.next_check_at = *until;
            Ok(Settled::default())
        }
        _ => return None,
    };
    Some(settled)
}

/// Records attempt `hash` as included (`detail` in the history).
fn record_inclusion(
    out: &mut OutgoingTx,
    hash: &str,
    inclusion: &Inclusion,
    detail: String,
    policy: &EnginePolicy,
    now: Timestamp,
) -> Result<(), String> {
    out.included = Some(Included::new(hash, inclusion));
    out.transition(OutStatus::Included, detail, now)?;
    out.next_check_at = now.plus_millis(policy.check_every_ms);
    Ok(())
}

/// Records the node's answer to a send of the newest attempt, and when to look again. A
/// refusal keeps it unsent (the same bytes go out again, or a re-priced attempt); one the node
/// has kept refusing for long raises one `outgoing_stuck` alert, and sending goes on. `Err`:
/// nothing was signed to send, or a transition the lifecycle refuses.
pub fn record_answer(
    out: &mut OutgoingTx,
    outcome: BroadcastOutcome,
    policy: &EnginePolicy,
    now: Timestamp,
) -> Result<Option<Notice>, String> {
    let latest = out
        .latest()
        .cloned()
        .ok_or_else(|| "nothing signed to send".to_owned())?;
    let refused_before = latest.sent_at.is_none()
        && latest
            .last_answer
            .as_ref()
            .is_some_and(|a| a.refusal().is_some());
    if refused_before && outcome == BroadcastOutcome::Expired {
        // Bytes the node refused never were in a pool: "expired" says nothing new, and the
        // refusal stays the answer the engine judges them by (a shortage waits, a refusal
        // that funds cannot cure fails).
        out.next_check_at = now.plus_millis(policy.rebroadcast_after_ms);
        return Ok(None);
    }
    let label = outcome.to_string();
    let refusal = match &outcome {
        BroadcastOutcome::Rejected(reason) => Some(reason.clone()),
        _ => None,
    };
    if let Some(a) = out.attempts.last_mut() {
        a.last_answer = Some(outcome);
        if refusal.is_none() {
            // Accepted, unknown or any answer that keeps it alive: it may be in a pool.
            a.sent_at = Some(now);
        }
    }
    if let Some(reason) = refusal {
        let refused_for = now
            .unix_millis()
            .saturating_sub(latest.signed_at.unix_millis());
        let long = policy
            .replace_after_ms
            .saturating_mul(REFUSED_ALERT_AFTER_REPLACES);
        let notice = (refused_for >= long && !out.ever_waited(Wait::RefusedLong)).then(|| Notice {
            wait: Wait::RefusedLong,
            more: format!(" ({}): {reason}", latest.hash),
            alert: AlertDraft::stuck(
                out,
                format!(
                    "{} outgoing transaction {}: the node has refused attempt {} since it \
                         was signed: {reason}",
                    out.network, out.id, latest.hash
                ),
            ),
        });
        out.next_check_at = now.plus_millis(policy.rebroadcast_after_ms);
        return Ok(notice);
    }
    if out.status == OutStatus::Signed {
        out.transition(OutStatus::Sent, label, now)?;
    }
    out.next_check_at = now.plus_millis(policy.check_every_ms);
    Ok(None)
}

#[cfg(test)]
mod tests;
