//! The engine's decision: given an outgoing transaction and what the chain says about each of
//! its attempts now, what the broadcaster does next. Pure; the broadcaster does the I/O and
//! records the result through [`super::OutgoingTx`]'s transitions.
//!
//! The rule that keeps money from going out twice: a new attempt is signed only when every
//! earlier one either shares its EVM nonce (so at most one of them can ever be included) or has
//! provably expired on a TRON chain whose head is past its expiration while the node knows
//! none of them, and the blocks that could include them, read by number, list none of them
//! ([`super::blocks`]). An answer that was lost, a node that does not know a hash, a pool that
//! dropped it: none of these is a reason to sign a transaction that could be included beside
//! the first.

use crate::network::Network;
use crate::ports::sender::{BroadcastOutcome, FeeBid, Inclusion, MoveKind, Payment, TxLookup};
use crate::time::Timestamp;

use super::blocks::{self, BlockScan};
use super::{Bid, OutStatus, OutgoingTx};

/// How the history step that records a double payment begins (its alert is raised once).
pub const DOUBLE_PAYMENT_NOTE: &str = "double payment:";

/// Tuning of one network's broadcaster, units last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnginePolicy {
    /// Depth at which an included transaction is final (the deposit depth of the network).
    pub confirmations: u32,
    /// EVM: an attempt still not included after this long is replaced under the same nonce.
    pub replace_after_ms: i64,
    /// EVM: each replacement bids at least this many percent more (nodes require 10).
    pub bump_percent: u32,
    /// EVM: never bid above this gas price.
    pub gas_price_cap_wei: u128,
    /// The same bytes are sent again this long after the last send while nothing is included.
    pub rebroadcast_after_ms: i64,
    /// How long the broadcaster waits between two looks at a transaction in flight.
    pub check_every_ms: i64,
}

impl EnginePolicy {
    /// Defaults for `network`: BSC blocks every 3 s, TRON every 3 s with a 60 s lifetime.
    pub fn defaults(network: Network, confirmations: u32) -> Self {
        let _ = network;
        EnginePolicy {
            confirmations,
            replace_after_ms: 60_000,
            bump_percent: 12,
            gas_price_cap_wei: 50_000_000_000,
            rebroadcast_after_ms: 15_000,
            check_every_ms: 3_000,
        }
    }
}

/// What the chain says now, gathered by the broadcaster for one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub head_number: u64,
    pub head_time_ms: i64,
    /// TRON: the time of the block at confirmation depth (`head − confirmations + 1`), which
    /// no reorganization shallower than the depth can replace; `None` when not read.
    pub final_time_ms: Option<i64>,
    /// One per attempt, in the attempts' order.
    pub lookups: Vec<TxLookup>,
    /// TRON: what the blocks read by number say ([`blocks::scan_window`],
    /// [`blocks::recorded_to_check`]); `NotRead` elsewhere.
    pub blocks: BlockScan,
    /// BSC, a cancel requested of a payment whose nonce a node called used: the hash of the
    /// sender's transaction at that nonce, read from a block at confirmation depth
    /// ([`crate::ports::ChainSender::final_transaction_at_nonce`]); `None` when not read or
    /// not found.
    pub nonce_holder: Option<String>,
}

/// The next step for one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing signed yet: build, sign and store the first attempt.
    FirstAttempt,
    /// The newest attempt's stored bytes go out (first send, or again).
    Broadcast,
    /// EVM: sign a replacement under the same nonce with this bid.
    Replace { bid: FeeBid },
    /// EVM: the newest attempt was refused by the node (never taken) for long enough: ask the
    /// node for a price again and, if it is higher than the refused bid, sign under the same
    /// nonce at that price ([`repriced`]); else send the same bytes again.
    Reprice,
    /// TRON: every attempt expired on chain and none is known: build a new one.
    Rebuild,
    /// BSC, cancel requested: sign a void of the nonce (0 to the sender itself,
    /// [`super::OutgoingTx::void_payment`]) at no less than this bid, which outbids every
    /// attempt by the replacement minimum ([`void_priced`] raises it to the node's price).
    /// Signed even while a switch is on: it moves no money, it frees the nonce.
    Void { bid: FeeBid },
    /// TRON: the node refused the newest attempt for a reason waiting cannot cure (not a
    /// shortage of funds or resources), and every attempt has expired on chain unseen, so none
    /// can ever be included: the payment ends failed with that reason.
    Fail { reason: String },
    /// Attempt `hash` is in a block (new, or in another block than recorded).
    Included { hash: String, inclusion: Inclusion },
    /// TRON: attempt `hash` is listed in a block read by number though every lookup by id
    /// says the node does not know it (a lagging or lying endpoint): recorded as included,
    /// with a `node_inconsistent` warning.
    IncludedUnknownToLookups { hash: String, inclusion: Inclusion },
    /// More than one attempt (`hashes`) is in a block: the payment went out twice. `hash` is
    /// recorded as included (the one recorded before, if it is among them), with a critical
    /// `double_payment` alert and `kill_switch.global` latched in the same write.
    DoublePayment {
        hash: String,
        inclusion: Inclusion,
        hashes: Vec<String>,
    },
    /// The recorded inclusion is gone (a reorganization): follow the attempts again.
    Reorged,
    /// At confirmation depth in the recorded block.
    Final,
    /// Something only an operator can resolve (the nonce was consumed by a transaction that is
    /// none of ours): raise an alert, sign nothing, look again later.
    Stuck { reason: String },
    /// Nothing to do before `until`.
    Wait { until: Timestamp },
}

/// Decides the next step. `observation` is `None` until the broadcaster has asked the chain
/// (it asks only once something was signed).
pub fn decide(
    tx: &OutgoingTx,
    observation: Option<&Observation>,
    policy: &EnginePolicy,
    now: Timestamp,
) -> Decision {
    if tx.status.is_terminal() {
        return Decision::Wait {
            until: Timestamp::from_unix_millis(i64::MAX),
        };
    }
    let next = follow(tx, observation, policy, now);
    match tx.cancel_request() {
        Some(request) => cancelled(tx, observation, policy, now, next, request),
        None => next,
    }
}

/// What a cancel request makes of the step [`follow`] chose. What is in a block is followed
/// as always: an attempt of the payment that is included makes it paid (only one transaction
/// of a nonce can ever be included, so then the void is not); the void included and final
/// makes it failed. Nothing new of the payment is signed or sent: BSC voids the nonce instead,
/// TRON waits until every attempt is proven void.
fn cancelled(
    tx: &OutgoingTx,
    observation: Option<&Observation>,
    policy: &EnginePolicy,
    now: Timestamp,
    next: Decision,
    request: &str,
) -> Decision {
    let reason = format!("cancelled {request}");
    let wait = Decision::Wait {
        until: now.plus_millis(policy.check_every_ms),
    };
    if let Some(obs) = observation {
        if let Some(taken) = nonce_taken_by_another(tx, obs) {
            return Decision::Fail {
                reason: format!("{reason}: {taken}"),
            };
        }
        if let Some(step) = unproven_token_payment(tx, obs, policy, &reason) {
            return step.unwrap_or(wait);
        }
    }
    match next {
        // Nothing signed (so no nonce held): nothing can be included.
        Decision::FirstAttempt => Decision::Fail { reason },
        // TRON: every attempt proven void (what a rebuild or a refusal's failure waits for).
        Decision::Rebuild | Decision::Fail { .. } => Decision::Fail { reason },
        Decision::Final => match &tx.included {
            Some(i) if tx.is_void(&i.hash) => Decision::Fail { reason },
            _ => Decision::Final,
        },
        // Not asked about yet: nothing of the payment is sent meanwhile.
        Decision::Broadcast if observation.is_none() => wait,
        Decision::Broadcast
        | Decision::Reprice
        | Decision::Replace { .. }
        | Decision::Wait { .. }
            if tx.network == Network::Bsc && tx.included.is_none() && observation.is_some() =>
        {
            let latest_void = tx.latest().is_some_and(|a| a.void);
            let replace = matches!(next, Decision::Reprice | Decision::Replace { .. });
            if latest_void && !replace {
                // The void is out there (or about to be sent again): follow it.
                return next;
            }
            match void_bid(tx, policy) {
                Some(bid) => Decision::Void { bid },
                None => Decision::Stuck {
                    reason: format!(
                        "cannot void nonce {} of {}: outbidding its attempts needs more than \
                         the gas price cap",
                        tx.nonce.map_or_else(|| "?".to_owned(), |n| n.to_string()),
                        tx.from
                    ),
                },
            }
        }
        // TRON: its bytes are not offered again; they expire and are proven void. (An attempt
        // never recorded as sent, or refused, is judged here too: the rules that rebuild or
        // fail a payment do not look at bytes that are still to be sent.)
        Decision::Broadcast if tx.network == Network::Tron => match observation {
            Some(obs) if tron_void(tx, obs, policy) => Decision::Fail { reason },
            _ => wait,
        },
        other => other,
    }
}

/// BSC, cancelled: why none of `tx`'s attempts can ever be included because a transaction
/// that is none of them took its nonce: the transaction at its nonce, read from a block at
/// confirmation depth, is none of its attempts ([`Observation::nonce_holder`]), and no lookup
/// finds one of them in a block. Positive proof: only one transaction of a nonce is ever in
/// the chain. The payment then fails and releases its hold: nothing of it left.
fn nonce_taken_by_another(tx: &OutgoingTx, obs: &Observation) -> Option<String> {
    let nonce = tx.nonce?;
    let holder = obs.nonce_holder.as_deref()?;
    let ours = tx.attempts.iter().any(|a| {
        a.hash
            .trim_start_matches("0x")
            .eq_ignore_ascii_case(holder.trim_start_matches("0x"))
    });
    let in_a_block = obs
        .lookups
        .iter()
        .any(|l| matches!(l, TxLookup::Included(_)));
    (tx.network == Network::Bsc && tx.included.is_none() && !ours && !in_a_block).then(|| {
        format!(
            "nonce {nonce} of {} was taken by transaction {holder}, none of this payment's {} \
             attempts (final at depth); nothing of it was paid",
            tx.from,
            tx.attempts.len()
        )
    })
}

/// BSC, cancelled: a token payment whose attempt succeeded in a block without the
/// `Transfer` its receipt must show ([`token_transfer_missing`]) — what otherwise stays stuck
/// for an operator. The operator's cancel says the chain was checked and nothing reached the
/// destination: the inclusion is recorded (so its fee is booked), and once it is final the
/// payment fails and releases its hold. `Some(None)`: wait for the depth. `None`: not such a
/// payment (or more than one attempt in a block, which the double payment path handles).
fn unproven_token_payment(
    tx: &OutgoingTx,
    obs: &Observation,
    policy: &EnginePolicy,
    reason: &str,
) -> Option<Option<Decision>> {
    let found = in_blocks(tx, obs);
    let [f] = found.as_slice() else {
        return None;
    };
    if tx.is_void(&f.hash) {
        return None;
    }
    let missing = token_transfer_missing(tx, &f.hash, &f.inclusion)?;
    // Some of the token left the sender (a fee-taking token, another recipient): money moved,
    // and failing the payment would release a hold that paid it. It stays for an operator.
    if moved_any_of_its_token(tx, &f.inclusion.moves) {
        return None;
    }
    // Recorded before with its Transfer shown (an earlier, sound answer): this one is the
    // lying or stripped answer, not proof that nothing moved.
    if tx
        .included
        .as_ref()
        .is_some_and(|r| r.hash == f.hash && moved_any_of_its_token(tx, &r.moves))
    {
        return None;
    }
    if !recorded_as(tx, &f.hash, &f.inclusion) {
        return Some(Some(Decision::Included {
            hash: f.hash.clone(),
            inclusion: f.inclusion.clone(),
        }));
    }
    let fail = Decision::Fail {
        reason: format!("{reason}: {missing}"),
    };
    Some((depth_of(&f.inclusion, obs) >= u64::from(policy.confirmations)).then_some(fail))
}

/// Whether `tx`'s recorded inclusion is attempt `hash` in the same block as `inclusion`.
fn recorded_as(tx: &OutgoingTx, hash: &str, inclusion: &Inclusion) -> bool {
    tx.included.as_ref().is_some_and(|r| {
        r.hash == hash
            && r.block_number == inclusion.block_number
            && r.block_hash == inclusion.block_hash
    })
}

/// Whether `moves` show any of `tx`'s token leaving its sender, whatever the amount or the
/// recipient.
fn moved_any_of_its_token(tx: &OutgoingTx, moves: &[crate::ports::sender::TokenMove]) -> bool {
    let Payment::Token { contract, .. } = &tx.payment else {
        return false;
    };
    moves.iter().any(|m| {
        m.kind == MoveKind::Transfer
            && m.contract.eq_ignore_ascii_case(contract)
            && m.from.eq_ignore_ascii_case(&tx.from)
    })
}

/// How many blocks deep `inclusion` is: counted from the lower of the observation's head and
/// the head the endpoint that answered the receipt saw with it ([`Inclusion::head_number`]),
/// so that a head read from another endpoint (ahead, or on another fork) cannot make final
/// what the receipt's endpoint does not hold that deep.
fn depth_of(inclusion: &Inclusion, obs: &Observation) -> u64 {
    let head = inclusion
        .head_number
        .map_or(obs.head_number, |h| h.min(obs.head_number));
    head.saturating_sub(inclusion.block_number)
        .saturating_add(1)
}

/// Whether attempt `a` is a void a node refused (never taken): it is in no pool, so it sets no
/// price a new void must outbid.
fn refused_void(a: &super::Attempt) -> bool {
    a.void
        && a.sent_at.is_none()
        && a.last_answer
            .as_ref()
            .is_some_and(|x| x.refusal().is_some())
}

/// BSC: the least bid a void of `tx`'s nonce needs: the replacement minimum over the highest
/// gas price any of its attempts bid (a void a node refused excepted: outbidding it would raise
/// every new void over the last until the cap), and no less than a refused void's; at a plain
/// transfer's gas; `None` past the cap.
fn void_bid(tx: &OutgoingTx, policy: &EnginePolicy) -> Option<FeeBid> {
    let highest = tx
        .attempts
        .iter()
        .filter(|a| !refused_void(a))
        .filter_map(|a| match a.bid {
            Bid::Gas { gas_price_wei, .. } => Some(gas_price_wei),
            Bid::FeeLimit { .. } => None,
        })
        .max()?;
    match bumped(
        Bid::Gas {
            gas_limit: VOID_GAS,
            gas_price_wei: highest,
        },
        policy,
    )? {
        FeeBid::Gas { gas_price_wei, .. } => Some(FeeBid::Gas {
            gas_limit: VOID_GAS,
            // Never under a refused void: voids only rise, so the newest void is the highest
            // and a bid equal to it resends its bytes (the same bid signs the same hash).
            gas_price_wei: gas_price_wei.max(highest_refused_void(tx)),
        }),
        FeeBid::FeeLimit { .. } => None,
    }
}

/// The highest gas price of a void a node refused (0 when none).
fn highest_refused_void(tx: &OutgoingTx) -> u128 {
    tx.attempts
        .iter()
        .filter(|a| refused_void(a))
        .filter_map(|a| match a.bid {
            Bid::Gas { gas_price_wei, .. } => Some(gas_price_wei),
            Bid::FeeLimit { .. } => None,
        })
        .max()
        .unwrap_or(0)
}

/// The gas of a plain transfer: what a void (0 to the sender itself) uses.
const VOID_GAS: u64 = 21_000;

/// The bid a void is signed with: the node's fresh price where it is above the `minimum`
/// ([`Decision::Void`]) and within the cap; never below the minimum (a node refuses a
/// replacement that does not outbid what it holds).
pub fn void_priced(minimum: FeeBid, fresh: Option<FeeBid>, policy: &EnginePolicy) -> FeeBid {
    let (
        FeeBid::Gas {
            gas_limit,
            gas_price_wei,
        },
        Some(FeeBid::Gas {
            gas_price_wei: fresh_price,
            ..
        }),
    ) = (minimum, fresh)
    else {
        return minimum;
    };
    FeeBid::Gas {
        gas_limit,
        gas_price_wei: fresh_price.min(policy.gas_price_cap_wei).max(gas_price_wei),
    }
}

/// The step for a transaction nobody asked to cancel.
fn follow(
    tx: &OutgoingTx,
    observation: Option<&Observation>,
    policy: &EnginePolicy,
    now: Timestamp,
) -> Decision {
    let wait = Decision::Wait {
        until: now.plus_millis(policy.check_every_ms),
    };
    let Some(latest) = tx.latest() else {
        if let Some(reason) = swap_too_late_to_sign(tx, now) {
            return Decision::Fail { reason };
        }
        return Decision::FirstAttempt;
    };
    let Some(obs) = observation else {
        // Stored, never offered to a node (or a crash right after storing): send exactly these
        // bytes. Once offered, the chain is asked first, whatever the node answered.
        return if latest.sent_at.is_none() {
            Decision::Broadcast
        } else {
            wait
        };
    };

    let found = in_blocks(tx, obs);
    let recorded_hash = tx.included.as_ref().map(|r| r.hash.as_str());
    // The recorded attempt while it is still in a block, else the first by attempt order; a
    // succeeded one before a failed one (two in blocks, a double payment: money left through
    // the one that succeeded, so the payment must not end failed and release its hold).
    let recorded = |f: &&Found| Some(f.hash.as_str()) == recorded_hash;
    let included = found
        .iter()
        .find(|f| recorded(f) && f.inclusion.succeeded)
        .or_else(|| found.iter().find(|f| f.inclusion.succeeded))
        .or_else(|| found.iter().find(recorded))
        .or_else(|| found.first())
        .cloned();
    if found.len() > 1 && !double_payment_recorded(tx) {
        let included = included.expect("found is not empty");
        return Decision::DoublePayment {
            hash: included.hash,
            inclusion: included.inclusion,
            hashes: found.into_iter().map(|f| f.hash).collect(),
        };
    }
    if let Some(Found {
        hash,
        inclusion,
        by_lookup,
    }) = included
    {
        // A cancel's void moves no token: only the payment's own attempts need the proof.
        if let Some(reason) =
            token_transfer_missing(tx, &hash, &inclusion).filter(|_| !tx.is_void(&hash))
        {
            return Decision::Stuck { reason };
        }
        if !recorded_as(tx, &hash, &inclusion) {
            return if by_lookup {
                Decision::Included { hash, inclusion }
            } else {
                Decision::IncludedUnknownToLookups { hash, inclusion }
            };
        }
        if depth_of(&inclusion, obs) >= u64::from(policy.confirmations) {
            return Decision::Final;
        }
        return wait;
    }
    if tx.included.is_some() {
        // Still listed in its block, its receipt not read this time: nothing moved.
        if matches!(obs.blocks, BlockScan::Listed { .. }) {
            return wait;
        }
        return Decision::Reorged;
    }
    if let Some(reason) = tron_unprovable(tx, obs) {
        return Decision::Stuck { reason };
    }

    let pending = obs.lookups.iter().any(|l| matches!(l, TxLookup::Pending));
    let age = now
        .unix_millis()
        .saturating_sub(latest.signed_at.unix_millis());
    if latest.sent_at.is_none() {
        // Refused by the node (or never offered): nothing of it is known to be out there, but
        // a refusal after a failover may follow a delivery elsewhere, so it was looked up above
        // like any attempt. On EVM the nonce keeps a re-priced attempt exclusive with it.
        let refusal = latest.last_answer.as_ref().and_then(|a| a.refusal());
        let refused = refusal.is_some();
        if refused && tx.network == Network::Bsc && age >= policy.replace_after_ms {
            return Decision::Reprice;
        }
        if refused && tx.network == Network::Tron && tron_void(tx, obs, policy) {
            let reason = refusal.unwrap_or_default();
            return if refusal_waits_for_funds(&tx.payment, reason) {
                Decision::Rebuild
            } else {
                Decision::Fail {
                    reason: format!("the node refused the transaction: {reason}"),
                }
            };
        }
        // TRON bytes a node refused, now past their expiration at the head: a node would only
        // answer "expired", which would hide its refusal (the verdict above waits for it).
        let expired_at_head = latest
            .expires_at_ms
            .is_some_and(|at| obs.head_time_ms >= at);
        if refused && tx.network == Network::Tron && expired_at_head && !pending {
            return wait;
        }
        return Decision::Broadcast;
    }
    let since_sent = latest.sent_at.map_or(i64::MAX, |s| {
        now.unix_millis().saturating_sub(s.unix_millis())
    });
    let rebroadcast = since_sent >= policy.rebroadcast_after_ms;

    match tx.network {
        Network::Bsc => {
            if latest.last_answer == Some(BroadcastOutcome::NonceUsed) && !pending {
                if rebroadcast {
                    // The answer may be stale (a reorganization can free the nonce again):
                    // offer the same bytes once more, which refreshes it. Nothing new is signed.
                    return Decision::Broadcast;
                }
                return Decision::Stuck {
                    reason: format!(
                        "nonce {} of {} was used by a transaction that is none of this payment's {} attempts",
                        tx.nonce.map_or_else(|| "?".to_owned(), |n| n.to_string()),
                        tx.from,
                        tx.attempts.len()
                    ),
                };
            }
            if age >= policy.replace_after_ms {
                if let Some(bid) = bumped(latest.bid, policy) {
                    return Decision::Replace { bid };
                }
            }
            if rebroadcast {
                return Decision::Broadcast;
            }
            wait
        }
        Network::Tron => {
            let expired = latest.expires_at_ms.is_some_and(|at| obs.head_time_ms > at);
            if tron_void(tx, obs, policy) {
                return Decision::Rebuild;
            }
            if rebroadcast && !expired {
                return Decision::Broadcast;
            }
            wait
        }
    }
}

/// BSC: why a token payment (a withdrawal or a sweep of a BEP20) whose receipt succeeded cannot
/// be counted paid: its receipt does not show the token contract's `Transfer(from → to,
/// amount)` the payment asked for. A status of 1 alone is not proof: a token whose `transfer`
/// returns false without reverting, takes a fee, or a node that lies about the logs would
/// confirm a payment the destination never got. Nor is it proof that nothing moved, so it is
/// not failed either (that would release the user's hold): it stays unsettled for an operator
/// (a lying node is corrected by the next look). A reverted receipt moved nothing and needs no
/// such proof.
fn token_transfer_missing(tx: &OutgoingTx, hash: &str, inclusion: &Inclusion) -> Option<String> {
    let Payment::Token {
        contract,
        to,
        amount,
    } = &tx.payment
    else {
        return None;
    };
    if tx.network != Network::Bsc || !inclusion.succeeded {
        return None;
    }
    let shown = inclusion.moves.iter().any(|m| {
        m.kind == MoveKind::Transfer
            && m.contract.eq_ignore_ascii_case(contract)
            && m.from.eq_ignore_ascii_case(&tx.from)
            && m.to.eq_ignore_ascii_case(to)
            && m.amount == *amount
    });
    (!shown).then(|| {
        format!(
            "{hash} succeeded in block {} but its receipt shows no Transfer of {amount} of {contract} \
             from {} to {to}: neither counted paid nor failed until an operator has checked the chain",
            inclusion.block_number, tx.from
        )
    })
}

/// How long before a swap's deadline its first attempt is still signed: one signed later would
/// most likely be mined after the deadline, where the router reverts it and the gas is lost.
pub const SWAP_SIGN_MARGIN_MS: i64 = 30_000;

/// Why a swap that has waited (for funds, a switch, a price) until its deadline is near or
/// past must fail unsent: signed now, it would revert on chain. Only a swap that holds no
/// nonce yet (nothing signed), so failing it leaves no gap in its sender's nonces.
fn swap_too_late_to_sign(tx: &OutgoingTx, now: Timestamp) -> Option<String> {
    let Payment::Swap { deadline_s, .. } = &tx.payment else {
        return None;
    };
    if tx.nonce.is_some() || !tx.attempts.is_empty() {
        return None;
    }
    let deadline_ms = i64::try_from(deadline_s.saturating_mul(1_000)).unwrap_or(i64::MAX);
    (now.unix_millis() > deadline_ms.saturating_sub(SWAP_SIGN_MARGIN_MS)).then(|| {
        format!(
            "the swap was not sent before its deadline ({deadline_s} s): nothing was signed or spent"
        )
    })
}

/// An attempt found in a block: by a lookup by id, or listed in a block read by number.
#[derive(Debug, Clone)]
struct Found {
    hash: String,
    inclusion: Inclusion,
    by_lookup: bool,
}

/// Every attempt in a block, in the attempts' order; one listed in a block read by number that
/// no lookup found comes last.
fn in_blocks(tx: &OutgoingTx, obs: &Observation) -> Vec<Found> {
    let mut found: Vec<Found> = tx
        .attempts
        .iter()
        .zip(&obs.lookups)
        .filter_map(|(a, l)| match l {
            TxLookup::Included(i) => Some(Found {
                hash: a.hash.clone(),
                inclusion: i.clone(),
                by_lookup: true,
            }),
            _ => None,
        })
        .collect();
    if let BlockScan::Listed {
        hash,
        inclusion: Some(inclusion),
        ..
    } = &obs.blocks
    {
        if !found.iter().any(|f| f.hash.eq_ignore_ascii_case(hash)) {
            found.push(Found {
                hash: hash.clone(),
                inclusion: inclusion.clone(),
                by_lookup: false,
            });
        }
    }
    found
}

/// Whether a double payment of `tx` was recorded already (its alert raised).
fn double_payment_recorded(tx: &OutgoingTx) -> bool {
    tx.history
        .iter()
        .any(|s| s.detail.starts_with(DOUBLE_PAYMENT_NOTE))
}

/// TRON: the newest attempt expired on chain — the block at confirmation depth is past its
/// expiration, so every block a reorganization shallower than the depth could add is too (the
/// head alone is not final: a competing fork could still hold a block from before the
/// expiration that includes it) — the node knows none of the attempts, and the blocks that
/// could include the newest one, read by number through a final block past its expiration,
/// list none of them ([`blocks::assess`]); every earlier one was proven absent the same way
/// before the next was signed, so none of them can ever be included.
fn tron_void(tx: &OutgoingTx, obs: &Observation, policy: &EnginePolicy) -> bool {
    let Some(latest) = tx.latest() else {
        return false;
    };
    let Some(expires) = latest.expires_at_ms else {
        return false;
    };
    let expired = obs.final_time_ms.is_some_and(|t| t > expires);
    let unknown = obs.lookups.iter().all(|l| matches!(l, TxLookup::Unknown));
    let final_block = blocks::final_block(obs.head_number, policy.confirmations);
    let absent = match (&obs.blocks, latest.reference_block, final_block) {
        (
            BlockScan::Absent {
                from,
                through,
                through_time_ms,
            },
            Some(reference),
            Some(final_block),
        ) => *from <= reference + 1 && *through_time_ms > expires && *through <= final_block,
        _ => false,
    };
    expired && unknown && absent
}

/// How long after its expiration (at the final block) an expired TRON attempt may wait for
/// the proof that no block includes it before an operator is told. The proof needs the
/// scanner's recorded hash of the first block past the expiration, which the scanner keeps for
/// `blocks_kept` blocks (about 50 minutes at the default 1,000): after a longer outage of the
/// scanner or the endpoints it may never come.
pub const TRON_PROOF_PATIENCE_MS: i64 = 30 * 60_000;

/// TRON: the reason a payment whose newest attempt expired on chain unseen cannot be proven
/// void, so that nothing new is signed and an operator must check the chain: the attempt was
/// stored without its reference block (before it was kept), so the blocks that could include
/// it are not known; or the proof has not come [`TRON_PROOF_PATIENCE_MS`] after the expiration.
fn tron_unprovable(tx: &OutgoingTx, obs: &Observation) -> Option<String> {
    let latest = tx.latest()?;
    let expires = latest.expires_at_ms?;
    let final_time = obs.final_time_ms?;
    let expired = final_time > expires;
    let unknown = obs.lookups.iter().all(|l| matches!(l, TxLookup::Unknown));
    if tx.network != Network::Tron || !expired || !unknown {
        return None;
    }
    if latest.reference_block.is_none() {
        return Some(format!(
            "attempt {} expired unseen by the lookups, but it was stored without its reference \
             block: that no block includes it cannot be proven from block contents, so nothing \
             new is signed; check the chain",
            latest.hash
        ));
    }
    let waited = final_time.saturating_sub(expires);
    (matches!(obs.blocks, BlockScan::NotRead) && waited > TRON_PROOF_PATIENCE_MS).then(|| {
        format!(
            "attempt {} expired {} minutes ago unseen by the lookups, and the blocks that could \
             include it are still not proven free of it (the scanner may no longer keep the \
             block that anchors the proof): nothing new is signed; check the chain",
            latest.hash,
            waited / 60_000
        )
    })
}

/// Whether a node's refusal is a shortage the hot wallet's funding cures (the payment waits and
/// is rebuilt once funded) rather than a transaction that can never be valid.
///
/// A delegation or an undelegation of energy spends only the bandwidth fee: only a shortage of
/// the hot wallet's TRX for it waits. java-tron's other refusals of them ("insufficient
/// delegatedFrozenBalance(Energy)", "delegated Resource does not exist", a stake less than
/// the delegation) say the stake is not there: waiting would rebuild the transaction forever,
/// and a stale undelegation sent later could take back a newer sweep's energy. They fail, and
/// the funding's failure tells an operator.
pub fn refusal_waits_for_funds(payment: &Payment, reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    if matches!(
        payment,
        Payment::DelegateEnergy { .. } | Payment::UndelegateEnergy { .. }
    ) {
        return [
            "bandwith_error",
            "insufficient bandwidth",
            "accountresourceinsufficient",
            "other_error",
        ]
        .iter()
        .any(|k| r.contains(k));
    }
    [
        "insufficient",
        "not sufficient",
        "not enough",
        "bandwith_error",
        "bandwidth",
        "does not exist",
        // java-tron's catch-all, also for its own transient failures: rebuild, do not fail.
        "other_error",
    ]
    .iter()
    .any(|k| r.contains(k))
}

/// The bid of a re-priced EVM attempt: the node's fresh price and gas limit where higher than
/// the refused bid's, within the cap; `None` when nothing is higher (the same bytes go out
/// again: a new signature would change nothing the node refused).
pub fn repriced(refused: Bid, fresh: FeeBid, policy: &EnginePolicy) -> Option<FeeBid> {
    let (
        Bid::Gas {
            gas_limit,
            gas_price_wei,
        },
        FeeBid::Gas {
            gas_limit: fresh_limit,
            gas_price_wei: fresh_price,
        },
    ) = (refused, fresh)
    else {
        return None;
    };
    let price = fresh_price.min(policy.gas_price_cap_wei).max(gas_price_wei);
    let limit = fresh_limit.max(gas_limit);
    (price > gas_price_wei || limit > gas_limit).then_some(FeeBid::Gas {
        gas_limit: limit,
        gas_price_wei: price,
    })
}

/// The next EVM bid: at least `bump_percent` more (rounded up), within the cap; `None` when the
/// cap leaves no room for a replacement a node would accept.
fn bumped(bid: Bid, policy: &EnginePolicy) -> Option<FeeBid> {
    let Bid::Gas {
        gas_limit,
        gas_price_wei,
    } = bid
    else {
        return None;
    };
    let raise = |percent: u128| {
        gas_price_wei
            .checked_mul(100 + percent)
            .map(|p| p.div_ceil(100).max(gas_price_wei + 1))
    };
    let wanted = raise(u128::from(policy.bump_percent).max(NODE_BUMP_PERCENT))?;
    // Where the policy's bump passes the cap, the cap itself still replaces the attempt if it
    // is the node's minimum bump above it: an attempt priced under a risen market would
    // otherwise never be replaced, and never mined.
    let price = wanted.min(policy.gas_price_cap_wei);
    (price >= raise(NODE_BUMP_PERCENT)?).then_some(FeeBid::Gas {
        gas_limit,
        gas_price_wei: price,
    })
}

/// The least raise of the gas price with which EVM nodes accept a replacement (geth's
/// `txpool.pricebump`), in percent.
const NODE_BUMP_PERCENT: u128 = 10;

/// What a terminal transaction ended as, for the record that owns it.
pub fn final_status(tx: &OutgoingTx) -> Option<bool> {
    match tx.status {
        OutStatus::Final => tx.included.as_ref().map(|i| i.succeeded),
        OutStatus::Failed => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amount::Amount;
    use crate::outgoing::{Attempt, Included, OutgoingTx, Purpose};
    use crate::ports::sender::Payment;
    use crate::ports::signer::HdPath;
    use uuid::Uuid;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn policy() -> EnginePolicy {
        EnginePolicy::defaults(Network::Bsc, 3)
    }

    fn tx(network: Network) -> OutgoingTx {
        OutgoingTx::new(
            Uuid::from_u128(1),
            network,
            Purpose::Withdrawal,
            Uuid::from_u128(2),
            "sender".into(),
            HdPath {
                network,
                account: 2_147_483_647,
                index: 0,
            },
            Payment::Native {
                to: "to".into(),
                amount: Amount::from_units(5),
            },
            (network == Network::Bsc).then_some(7),
            at(0),
        )
    }

    fn attempt(hash: &str, signed: i64, sent: Option<i64>, expires: Option<i64>) -> Attempt {
        Attempt {
            hash: hash.into(),
            raw: vec![1, 2],
            bid: Bid::Gas {
                gas_limit: 21_000,
                gas_price_wei: 1_000_000_000,
            },
            expires_at_ms: expires,
            signed_at: at(signed),
            sent_at: sent.map(at),
            last_answer: None,
            plan: None,
            reference_block: None,
            void: false,
        }
    }

    fn inclusion(block: u64, ok: bool) -> Inclusion {
        Inclusion {
            block_number: block,
            block_hash: format!("{block:064x}"),
            succeeded: ok,
            fee_native: Amount::from_units(21),
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
            head_number: None,
        }
    }

    /// An observation whose block at confirmation depth has the head's time (a chain that
    /// stopped a while ago).
    fn obs(head: u64, head_time: i64, lookups: Vec<TxLookup>) -> Observation {
        Observation {
            head_number: head,
            head_time_ms: head_time,
            final_time_ms: Some(head_time),
            lookups,
            blocks: BlockScan::NotRead,
            nonce_holder: None,
        }
    }

    /// `o` with the blocks `from..=through` read by number and listing no attempt.
    fn absent(mut o: Observation, from: u64, through: u64, through_time_ms: i64) -> Observation {
        o.blocks = BlockScan::Absent {
            from,
            through,
            through_time_ms,
        };
        o
    }

    /// A TRON attempt referencing block 5, as the TRON sender builds them.
    fn tron_attempt(hash: &str, signed: i64, sent: Option<i64>, expires: i64) -> Attempt {
        Attempt {
            reference_block: Some(5),
            ..attempt(hash, signed, sent, Some(expires))
        }
    }

    fn swap(deadline_s: u64, nonce: Option<u64>) -> OutgoingTx {
        let mut t = tx(Network::Bsc);
        t.purpose = Purpose::Swap;
        t.nonce = nonce;
        t.payment = Payment::Swap {
            router: "router".into(),
            path: vec!["wbnb".into(), "usdt".into()],
            amount_in: Amount::from_units(1_000),
            min_out: Amount::from_units(990),
            native_in: true,
            native_out: false,
            to: "sender".into(),
            deadline_s,
        };
        t
    }

    fn cancel(t: &mut OutgoingTx) {
        t.note(
            format!("{} by ops: stuck for a day", super::super::CANCEL_NOTE),
            at(0),
        );
    }

    fn gas_price(bid: &FeeBid) -> u128 {
        match bid {
            FeeBid::Gas { gas_price_wei, .. } => *gas_price_wei,
            FeeBid::FeeLimit { .. } => panic!("an EVM bid"),
        }
    }

    #[test]
    fn a_cancelled_payment_that_never_signed_fails_at_once() {
        for network in [Network::Bsc, Network::Tron] {
            let mut t = tx(network);
            t.nonce = None;
            cancel(&mut t);
            assert_eq!(
                decide(&t, None, &policy(), at(1_000)),
                Decision::Fail {
                    reason: "cancelled by ops: stuck for a day".into()
                }
            );
        }
    }

    #[test]
    fn a_cancelled_bsc_payment_voids_its_nonce_outbidding_every_attempt() {
        let mut t = tx(Network::Bsc);
        t.attempts.push(attempt("a", 0, Some(0), None));
        let mut b = attempt("b", 60_000, Some(60_000), None);
        b.bid = Bid::Gas {
            gas_limit: 60_000,
            gas_price_wei: 2_000_000_000,
        };
        t.attempts.push(b);
        t.status = OutStatus::Sent;
        let pending = obs(10, 0, vec![TxLookup::Pending, TxLookup::Pending]);
        // Before the request: it just waits.
        assert!(matches!(
            decide(&t, Some(&pending), &policy(), at(61_000)),
            Decision::Wait { .. }
        ));
        cancel(&mut t);
        let Decision::Void { bid } = decide(&t, Some(&pending), &policy(), at(61_000)) else {
            panic!("a void")
        };
        assert_eq!(
            bid,
            FeeBid::Gas {
                gas_limit: 21_000,
                gas_price_wei: 2_240_000_000
            },
            "+12 % over the highest attempt, at a transfer's gas"
        );
        // Signed and sent: followed like any attempt; replaced (by a void) when it lingers.
        let mut v = attempt("v", 61_000, Some(61_000), None);
        v.void = true;
        v.bid = bid.into();
        t.attempts.push(v);
        let three = obs(10, 0, vec![TxLookup::Pending; 3]);
        assert!(matches!(
            decide(&t, Some(&three), &policy(), at(62_000)),
            Decision::Wait { .. }
        ));
        assert!(matches!(
            decide(&t, Some(&three), &policy(), at(122_000)),
            Decision::Void { bid } if gas_price(&bid) == 2_508_800_000
        ));
        // The void in a block, then final: failed with the operator's reason.
        let mined = obs(
            11,
            0,
            vec![
                TxLookup::Unknown,
                TxLookup::Unknown,
                TxLookup::Included(inclusion(11, true)),
            ],
        );
        assert!(matches!(
            decide(&t, Some(&mined), &policy(), at(63_000)),
            Decision::Included { hash, .. } if hash == "v"
        ));
        t.included = Some(Included::new("v", &inclusion(11, true)));
        t.status = OutStatus::Included;
        assert_eq!(t.visible_hash(), Some("b"), "partners never see the void");
        assert_eq!(
            t.confirmations(3),
            0,
            "nothing of the payment is in a block"
        );
        let deep = obs(
            13,
            0,
            vec![
                TxLookup::Unknown,
                TxLookup::Unknown,
                TxLookup::Included(inclusion(11, true)),
            ],
        );
        assert_eq!(
            decide(&t, Some(&deep), &policy(), at(64_000)),
            Decision::Fail {
                reason: "cancelled by ops: stuck for a day".into()
            }
        );
        // The original included instead: paid, whatever the request said.
        t.included = Some(Included::new("a", &inclusion(11, true)));
        let paid = obs(
            13,
            0,
            vec![
                TxLookup::Included(inclusion(11, true)),
                TxLookup::Unknown,
                TxLookup::Unknown,
            ],
        );
        assert_eq!(
            decide(&t, Some(&paid), &policy(), at(64_000)),
            Decision::Final
        );
    }

    #[test]
    fn a_cancelled_bsc_payment_refused_or_held_unsent_is_voided_never_sent() {
        let mut t = tx(Network::Bsc);
        let mut a = attempt("a", 0, None, None);
        a.last_answer = Some(BroadcastOutcome::Rejected("transaction underpriced".into()));
        t.attempts.push(a);
        t.status = OutStatus::Signed;
        cancel(&mut t);
        let unknown = obs(10, 0, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&unknown), &policy(), at(1_000)),
            Decision::Void { .. }
        ));
        // Past the cap: no void a node would take; an operator must look.
        t.attempts[0].bid = Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: policy().gas_price_cap_wei,
        };
        assert!(matches!(
            decide(&t, Some(&unknown), &policy(), at(1_000)),
            Decision::Stuck { reason } if reason.contains("cap")
        ));
        // The node's price above the minimum wins, within the cap, never below the minimum.
        let min = FeeBid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 100,
        };
        let fresh = |p| {
            Some(FeeBid::Gas {
                gas_limit: 21_000,
                gas_price_wei: p,
            })
        };
        assert_eq!(gas_price(&void_priced(min, fresh(500), &policy())), 500);
        assert_eq!(gas_price(&void_priced(min, fresh(50), &policy())), 100);
        assert_eq!(gas_price(&void_priced(min, None, &policy())), 100);
        assert_eq!(
            gas_price(&void_priced(min, fresh(u128::MAX), &policy())),
            policy().gas_price_cap_wei
        );
    }

    #[test]
    fn a_cancelled_tron_payment_fails_only_once_every_attempt_is_void() {
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.status = OutStatus::Sent;
        cancel(&mut t);
        // Before its expiration: not sent again, not failed.
        let early = obs(10, 20_000, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&early), &policy(), at(20_000)),
            Decision::Wait { .. }
        ));
        // Expired, but not proven absent from the blocks: still waits.
        let unread = obs(30, 61_000, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&unread), &policy(), at(120_000)),
            Decision::Wait { .. }
        ));
        // Proven void: failed, never rebuilt.
        let void = absent(obs(30, 61_000, vec![TxLookup::Unknown]), 6, 28, 61_000);
        assert_eq!(
            decide(&t, Some(&void), &policy(), at(120_000)),
            Decision::Fail {
                reason: "cancelled by ops: stuck for a day".into()
            }
        );
        // Included meanwhile: paid.
        let mined = obs(30, 61_000, vec![TxLookup::Included(inclusion(9, true))]);
        assert!(matches!(
            decide(&t, Some(&mined), &policy(), at(120_000)),
            Decision::Included { .. }
        ));
    }

    #[test]
    fn a_cancelled_tron_payment_never_recorded_sent_fails_once_proven_void() {
        // Stored, then the send's record was lost (a crash, or the cancel ended its lease):
        // it may be out there, so only the blocks can clear it.
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, None, 60_000));
        t.status = OutStatus::Signed;
        cancel(&mut t);
        let unread = obs(30, 61_000, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&unread), &policy(), at(120_000)),
            Decision::Wait { .. }
        ));
        let void = absent(obs(30, 61_000, vec![TxLookup::Unknown]), 6, 28, 61_000);
        assert_eq!(
            decide(&t, Some(&void), &policy(), at(120_000)),
            Decision::Fail {
                reason: "cancelled by ops: stuck for a day".into()
            }
        );
    }

    #[test]
    fn a_swap_not_signed_before_its_deadline_fails_unsent() {
        let p = policy();
        let deadline_s = 1_000;
        // Well before the deadline: signed.
        assert_eq!(
            decide(&swap(deadline_s, None), None, &p, at(900_000)),
            Decision::FirstAttempt
        );
        assert_eq!(
            decide(
                &swap(deadline_s, None),
                None,
                &p,
                at(1_000_000 - SWAP_SIGN_MARGIN_MS)
            ),
            Decision::FirstAttempt,
            "the margin's first instant still signs"
        );
        // Too close to it, or past it: it would revert on chain, so it fails unsent.
        for now in [1_000_000 - SWAP_SIGN_MARGIN_MS + 1, 1_000_000, 5_000_000] {
            let Decision::Fail { reason } = decide(&swap(deadline_s, None), None, &p, at(now))
            else {
                panic!("fails at {now}")
            };
            assert!(reason.contains("deadline"), "{reason}");
        }
        // A swap that already holds a nonce must not leave a gap: it is signed (and reverts).
        assert_eq!(
            decide(&swap(deadline_s, Some(3)), None, &p, at(5_000_000)),
            Decision::FirstAttempt
        );
        // Anything but a swap has no deadline.
        let mut plain = tx(Network::Bsc);
        plain.nonce = None;
        assert_eq!(
            decide(&plain, None, &p, at(i64::MAX / 2)),
            Decision::FirstAttempt
        );
    }

    #[test]
    fn a_bsc_token_payment_is_included_only_with_its_transfer_in_the_receipt() {
        use crate::ports::sender::TokenMove;
        let p = policy();
        let mut t = tx(Network::Bsc);
        t.payment = Payment::Token {
            contract: "0xToken".into(),
            to: "0xDest".into(),
            amount: Amount::from_units(500),
        };
        t.add_attempt(attempt("a1", 0, Some(0), None), at(0))
            .unwrap();
        t.transition(OutStatus::Sent, "sent", at(0)).unwrap();
        let transfer = |contract: &str, from: &str, to: &str, units: u128| TokenMove {
            contract: contract.into(),
            kind: MoveKind::Transfer,
            from: from.into(),
            to: to.into(),
            amount: Amount::from_units(units),
        };
        let with = |moves: Vec<TokenMove>, ok: bool| {
            let mut i = inclusion(10, ok);
            i.moves = moves;
            obs(10, 0, vec![TxLookup::Included(i)])
        };
        // The exact transfer (addresses compared without case): included.
        let exact = with(vec![transfer("0xtoken", "SENDER", "0xdest", 500)], true);
        assert!(matches!(
            decide(&t, Some(&exact), &p, at(1)),
            Decision::Included { .. }
        ));
        // A status of 1 without it (no logs, another amount, recipient, sender, token or an
        // approval-like move): neither included nor failed, stuck for an operator.
        for moves in [
            vec![],
            vec![transfer("0xtoken", "sender", "0xdest", 499)],
            vec![transfer("0xtoken", "sender", "0xother", 500)],
            vec![transfer("0xtoken", "0xother", "0xdest", 500)],
            vec![transfer("0xother", "sender", "0xdest", 500)],
            vec![TokenMove {
                kind: MoveKind::Wrap,
                ..transfer("0xtoken", "sender", "0xdest", 500)
            }],
        ] {
            let Decision::Stuck { reason } =
                decide(&t, Some(&with(moves.clone(), true)), &p, at(1))
            else {
                panic!("stuck with {moves:?}")
            };
            assert!(reason.contains("no Transfer of 500"), "{reason}");
        }
        // A reverted receipt moved nothing: recorded (and failed at depth) as before.
        assert!(matches!(
            decide(&t, Some(&with(vec![], false)), &p, at(1)),
            Decision::Included { .. }
        ));
        // A native payment has no token log to show; TRON reads no moves.
        let mut native = t.clone();
        native.payment = Payment::Native {
            to: "0xdest".into(),
            amount: Amount::from_units(500),
        };
        assert!(matches!(
            decide(&native, Some(&with(vec![], true)), &p, at(1)),
            Decision::Included { .. }
        ));
        let mut tron = t.clone();
        tron.network = Network::Tron;
        assert!(matches!(
            decide(&tron, Some(&with(vec![], true)), &p, at(1)),
            Decision::Included { .. }
        ));
    }

    #[test]
    fn nothing_is_sent_before_it_is_stored_and_stored_bytes_go_out_first() {
        let mut t = tx(Network::Bsc);
        assert_eq!(decide(&t, None, &policy(), at(0)), Decision::FirstAttempt);
        t.add_attempt(attempt("a", 0, None, None), at(0)).unwrap();
        assert_eq!(decide(&t, None, &policy(), at(1)), Decision::Broadcast);
    }

    #[test]
    fn a_lost_answer_or_an_unknown_hash_is_sent_again_never_signed_anew_too_soon() {
        let mut t = tx(Network::Bsc);
        t.attempts.push(attempt("a", 0, Some(0), None));
        t.status = OutStatus::Sent;
        let o = obs(10, 0, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Wait { .. }
        ));
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(15_000)),
            Decision::Broadcast
        );
        // Only after replace_after does a replacement come, under the same nonce, +12 %.
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(60_000)),
            Decision::Replace {
                bid: FeeBid::Gas {
                    gas_limit: 21_000,
                    gas_price_wei: 1_120_000_000
                }
            }
        );
    }

    #[test]
    fn the_gas_cap_stops_replacements() {
        let mut t = tx(Network::Bsc);
        let mut a = attempt("a", 0, Some(0), None);
        a.bid = Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 48_000_000_000,
        };
        t.attempts.push(a);
        t.status = OutStatus::Sent;
        let o = obs(10, 0, vec![TxLookup::Pending]);
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(60_000)),
            Decision::Broadcast
        );
    }

    #[test]
    fn any_attempt_included_is_recorded_then_final_at_depth() {
        let mut t = tx(Network::Bsc);
        t.attempts.push(attempt("a", 0, Some(0), None));
        t.attempts.push(attempt("b", 60_000, Some(60_000), None));
        t.status = OutStatus::Sent;
        let o = obs(
            10,
            0,
            vec![TxLookup::Included(inclusion(9, true)), TxLookup::Unknown],
        );
        let d = decide(&t, Some(&o), &policy(), at(61_000));
        assert_eq!(
            d,
            Decision::Included {
                hash: "a".into(),
                inclusion: inclusion(9, true)
            }
        );
        t.included = Some(Included::new("a", &inclusion(9, true)));
        t.status = OutStatus::Included;
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(62_000)),
            Decision::Wait { .. }
        ));
        let deep = obs(11, 0, o.lookups.clone());
        assert_eq!(
            decide(&t, Some(&deep), &policy(), at(63_000)),
            Decision::Final
        );
        // The block went away: follow again.
        let gone = obs(11, 0, vec![TxLookup::Unknown, TxLookup::Unknown]);
        assert_eq!(
            decide(&t, Some(&gone), &policy(), at(63_000)),
            Decision::Reorged
        );
        // Included in another block after a reorganization: recorded anew.
        let moved = obs(
            12,
            0,
            vec![TxLookup::Included(inclusion(12, true)), TxLookup::Unknown],
        );
        assert!(matches!(
            decide(&t, Some(&moved), &policy(), at(64_000)),
            Decision::Included { .. }
        ));
    }

    #[test]
    fn a_nonce_used_by_someone_else_is_stuck_not_signed_again() {
        let mut t = tx(Network::Bsc);
        let mut a = attempt("a", 0, Some(0), None);
        a.last_answer = Some(BroadcastOutcome::NonceUsed);
        t.attempts.push(a);
        t.status = OutStatus::Sent;
        let o = obs(10, 0, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Stuck { .. }
        ));
        // Later the same bytes are offered again (the answer refreshed), never new ones.
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(600_000)),
            Decision::Broadcast
        );
    }

    #[test]
    fn tron_rebuilds_only_after_expiry_on_chain_with_nothing_known() {
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.status = OutStatus::Sent;
        // Our clock is past the expiration, the chain's head is not: no rebuild.
        let o = obs(10, 59_000, vec![TxLookup::Unknown]);
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(120_000)),
            Decision::Broadcast
        );
        // Head past the expiration but the node still has it pending: no rebuild.
        let o = obs(30, 61_000, vec![TxLookup::Pending]);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(120_000)),
            Decision::Wait { .. }
        ));
        let o = absent(obs(30, 61_000, vec![TxLookup::Unknown]), 6, 28, 61_000);
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(120_000)),
            Decision::Rebuild
        );
    }

    #[test]
    fn a_refused_evm_attempt_is_looked_up_and_repriced_only_after_replace_after() {
        let mut t = tx(Network::Bsc);
        let mut a = attempt("a", 0, None, None);
        a.last_answer = Some(BroadcastOutcome::Rejected("transaction underpriced".into()));
        t.attempts.push(a);
        t.status = OutStatus::Signed;
        let unknown = obs(10, 0, vec![TxLookup::Unknown]);
        assert_eq!(
            decide(&t, Some(&unknown), &policy(), at(15_000)),
            Decision::Broadcast
        );
        assert_eq!(
            decide(&t, Some(&unknown), &policy(), at(60_000)),
            Decision::Reprice
        );
        // A refusal from one endpoint after a delivery to another: it may be mined anyway.
        let mined = obs(10, 0, vec![TxLookup::Included(inclusion(9, true))]);
        assert!(matches!(
            decide(&t, Some(&mined), &policy(), at(60_000)),
            Decision::Included { .. }
        ));
        // TRON never re-signs a refused attempt before it expired on chain.
        let mut t = tx(Network::Tron);
        let mut a = tron_attempt("a", 0, None, 60_000);
        a.last_answer = Some(BroadcastOutcome::Rejected(
            "CONTRACT_VALIDATE_ERROR: balance is not sufficient".into(),
        ));
        t.attempts.push(a);
        t.status = OutStatus::Signed;
        assert_eq!(
            decide(&t, Some(&unknown), &policy(), at(600_000)),
            Decision::Broadcast
        );
        // Expired unseen: a shortage waits for funds (a new attempt, checked against them)...
        let void = absent(obs(30, 61_000, vec![TxLookup::Unknown]), 6, 28, 61_000);
        assert_eq!(
            decide(&t, Some(&void), &policy(), at(600_000)),
            Decision::Rebuild
        );
        // ... but the node still holding it (pending) means no new attempt, whatever it said.
        let held = obs(30, 61_000, vec![TxLookup::Pending]);
        assert_eq!(
            decide(&t, Some(&held), &policy(), at(600_000)),
            Decision::Broadcast
        );
        // A refusal waiting cannot cure ends the payment, once nothing can be included.
        t.attempts[0].last_answer = Some(BroadcastOutcome::Rejected(
            "CONTRACT_VALIDATE_ERROR: Cannot transfer TRX to yourself.".into(),
        ));
        assert_eq!(
            decide(&t, Some(&unknown), &policy(), at(600_000)),
            Decision::Broadcast,
            "not before its expiration"
        );
        assert!(matches!(
            decide(&t, Some(&void), &policy(), at(600_000)),
            Decision::Fail { reason } if reason.contains("to yourself")
        ));
        // Expired at the head, not yet at the final block: not offered again (a node would
        // answer "expired" and hide its refusal), the verdict waits for the final block.
        let mut head_only = obs(30, 60_000, vec![TxLookup::Unknown]);
        head_only.final_time_ms = Some(3_000);
        assert!(matches!(
            decide(&t, Some(&head_only), &policy(), at(600_000)),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn a_repriced_bid_is_higher_than_the_refused_one_or_none() {
        let refused = Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1_000,
        };
        let fresh = |price| FeeBid::Gas {
            gas_limit: 21_000,
            gas_price_wei: price,
        };
        assert_eq!(repriced(refused, fresh(999), &policy()), None);
        assert_eq!(repriced(refused, fresh(1_000), &policy()), None);
        assert_eq!(
            repriced(refused, fresh(5_000), &policy()),
            Some(fresh(5_000))
        );
        // Never above the cap.
        let capped = repriced(refused, fresh(u128::MAX), &policy()).unwrap();
        assert_eq!(capped, fresh(policy().gas_price_cap_wei));
        // A higher gas estimate (a token transfer) also makes a new attempt.
        assert_eq!(
            repriced(
                refused,
                FeeBid::Gas {
                    gas_limit: 60_000,
                    gas_price_wei: 10
                },
                &policy()
            ),
            Some(FeeBid::Gas {
                gas_limit: 60_000,
                gas_price_wei: 1_000
            })
        );
    }

    #[test]
    fn tron_waits_the_confirmation_depth_past_an_expiration_before_rebuilding() {
        let policy = EnginePolicy::defaults(Network::Tron, 19);
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.status = OutStatus::Sent;
        // The head is past the expiration, the block at depth is not: a fork could still
        // replace the head with blocks that include the attempt.
        let mut early = obs(40, 100_000, vec![TxLookup::Unknown]);
        early.final_time_ms = Some(59_000);
        assert!(matches!(
            decide(&t, Some(&early), &policy, at(200_000)),
            Decision::Wait { .. }
        ));
        // Not read (the node lacks it): no proof either.
        early.final_time_ms = None;
        assert!(matches!(
            decide(&t, Some(&early), &policy, at(200_000)),
            Decision::Wait { .. }
        ));
        let mut late = absent(obs(60, 117_000, vec![TxLookup::Unknown]), 6, 42, 60_001);
        late.final_time_ms = Some(60_001);
        assert_eq!(
            decide(&t, Some(&late), &policy, at(200_000)),
            Decision::Rebuild
        );
        // java-tron's catch-all is not a verdict on the transaction: rebuild, do not fail.
        assert!(refusal_waits_for_funds(
            &t.payment,
            "OTHER_ERROR: internal error"
        ));
    }

    #[test]
    fn tron_never_rebuilds_nor_fails_on_lookups_alone() {
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.status = OutStatus::Sent;
        // Expired at the final block, every lookup "unknown", no block read: no evidence.
        let unread = obs(30, 61_000, vec![TxLookup::Unknown]);
        assert!(matches!(
            decide(&t, Some(&unread), &policy(), at(120_000)),
            Decision::Wait { .. }
        ));
        for (evidence, why) in [
            (
                absent(unread.clone(), 7, 28, 61_000),
                "not from the block after the reference",
            ),
            (
                absent(unread.clone(), 6, 28, 60_000),
                "not past the expiration",
            ),
            (
                absent(unread.clone(), 6, 29, 61_000),
                "past the final block (30 - 3 + 1)",
            ),
        ] {
            assert!(
                matches!(
                    decide(&t, Some(&evidence), &policy(), at(120_000)),
                    Decision::Wait { .. }
                ),
                "{why}"
            );
        }
        // A refusal that waiting cannot cure fails only on the same evidence.
        t.attempts[0].sent_at = None;
        t.attempts[0].last_answer = Some(BroadcastOutcome::Rejected(
            "CONTRACT_VALIDATE_ERROR: Cannot transfer TRX to yourself.".into(),
        ));
        t.status = OutStatus::Signed;
        assert!(matches!(
            decide(&t, Some(&unread), &policy(), at(120_000)),
            Decision::Wait { .. }
        ));
        assert!(matches!(
            decide(
                &t,
                Some(&absent(unread, 6, 28, 61_000)),
                &policy(),
                at(120_000)
            ),
            Decision::Fail { .. }
        ));
    }

    #[test]
    fn a_tron_attempt_stored_without_its_reference_block_is_stuck_not_rebuilt() {
        let mut t = tx(Network::Tron);
        t.attempts.push(attempt("a", 0, Some(0), Some(60_000)));
        t.status = OutStatus::Sent;
        let o = absent(obs(30, 61_000, vec![TxLookup::Unknown]), 6, 28, 61_000);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(120_000)),
            Decision::Stuck { reason } if reason.contains("reference block")
        ));
    }

    #[test]
    fn a_tron_attempt_unproven_long_after_its_expiration_is_stuck_for_an_operator() {
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.status = OutStatus::Sent;
        // Expired, no proof yet: waits quietly.
        let soon = obs(30, 60_000 + TRON_PROOF_PATIENCE_MS, vec![TxLookup::Unknown]);
        let d = decide(&t, Some(&soon), &policy(), at(200_000));
        assert!(matches!(d, Decision::Wait { .. }), "{d:?}");
        // Past the patience, still no proof: an operator is told; nothing is signed.
        let late = obs(
            900,
            61_001 + TRON_PROOF_PATIENCE_MS,
            vec![TxLookup::Unknown],
        );
        assert!(matches!(
            decide(&t, Some(&late), &policy(), at(4_000_000)),
            Decision::Stuck { reason } if reason.contains("not proven")
        ));
        // The proof, however late: rebuilt as usual.
        let proven = absent(late, 6, 28, 61_000);
        assert_eq!(
            decide(&t, Some(&proven), &policy(), at(4_000_000)),
            Decision::Rebuild
        );
    }

    #[test]
    fn an_attempt_listed_in_a_block_the_lookups_miss_is_included_never_rebuilt() {
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.status = OutStatus::Sent;
        let mut o = obs(30, 61_000, vec![TxLookup::Unknown]);
        // Listed, its receipt not read: no rebuild, no record either.
        o.blocks = BlockScan::Listed {
            hash: "a".into(),
            block_number: 9,
            inclusion: None,
        };
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(120_000)),
            Decision::Wait { .. }
        ));
        o.blocks = BlockScan::Listed {
            hash: "a".into(),
            block_number: 9,
            inclusion: Some(inclusion(9, true)),
        };
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(120_000)),
            Decision::IncludedUnknownToLookups {
                hash: "a".into(),
                inclusion: inclusion(9, true)
            }
        );
        t.included = Some(Included::new("a", &inclusion(9, true)));
        t.status = OutStatus::Included;
        // Still listed in its block: final at depth, whatever the lookups say.
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(121_000)),
            Decision::Final
        );
        o.blocks = BlockScan::Listed {
            hash: "a".into(),
            block_number: 9,
            inclusion: None,
        };
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(121_000)),
            Decision::Wait { .. }
        ));
        // Its block no longer lists it (the broadcaster read it): followed again.
        o.blocks = BlockScan::NotRead;
        assert_eq!(
            decide(&t, Some(&o), &policy(), at(121_000)),
            Decision::Reorged
        );
    }

    #[test]
    fn a_replacement_past_the_cap_bids_the_cap_when_the_node_takes_it() {
        let policy = EnginePolicy {
            bump_percent: 29,
            gas_price_cap_wei: 50_000,
            ..policy()
        };
        let bid = |price| Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: price,
        };
        // 29 % above 38,760 passes the cap; the cap is still 10 % above: it replaces.
        assert_eq!(
            bumped(bid(38_760), &policy),
            Some(FeeBid::Gas {
                gas_limit: 21_000,
                gas_price_wei: 50_000
            })
        );
        // Within the cap: the full bump.
        assert_eq!(
            bumped(bid(10_000), &policy),
            Some(FeeBid::Gas {
                gas_limit: 21_000,
                gas_price_wei: 12_900
            })
        );
        // The cap less than 10 % above: no replacement a node would take.
        assert_eq!(bumped(bid(46_000), &policy), None);
    }

    #[test]
    fn a_double_payment_follows_the_attempt_that_succeeded() {
        // The first attempt reverted, the second paid: the payment must end paid (its hold
        // settled), never failed with its hold released while money left.
        let mut t = tx(Network::Bsc);
        t.attempts.push(attempt("a", 0, Some(0), None));
        t.attempts.push(attempt("b", 60_000, Some(60_000), None));
        t.status = OutStatus::Sent;
        let both = obs(
            11,
            0,
            vec![
                TxLookup::Included(inclusion(8, false)),
                TxLookup::Included(inclusion(9, true)),
            ],
        );
        assert!(matches!(
            decide(&t, Some(&both), &policy(), at(61_000)),
            Decision::DoublePayment { hash, inclusion: i, .. } if hash == "b" && i.succeeded
        ));
        // Even when the failed one was recorded first.
        t.included = Some(Included::new("a", &inclusion(8, false)));
        t.status = OutStatus::Included;
        assert!(matches!(
            decide(&t, Some(&both), &policy(), at(61_000)),
            Decision::DoublePayment { hash, .. } if hash == "b"
        ));
    }

    #[test]
    fn two_attempts_in_blocks_are_a_double_payment_once() {
        for network in [Network::Tron, Network::Bsc] {
            let mut t = tx(network);
            t.attempts.push(attempt("a", 0, Some(0), None));
            t.attempts.push(attempt("b", 60_000, Some(60_000), None));
            t.status = OutStatus::Sent;
            let both = obs(
                11,
                0,
                vec![
                    TxLookup::Included(inclusion(8, true)),
                    TxLookup::Included(inclusion(9, true)),
                ],
            );
            assert_eq!(
                decide(&t, Some(&both), &policy(), at(61_000)),
                Decision::DoublePayment {
                    hash: "a".into(),
                    inclusion: inclusion(8, true),
                    hashes: vec!["a".into(), "b".into()],
                }
            );
            // "b" recorded before "a" was seen: "b" stays the recorded one.
            t.included = Some(Included::new("b", &inclusion(9, true)));
            t.status = OutStatus::Included;
            assert!(matches!(
                decide(&t, Some(&both), &policy(), at(61_000)),
                Decision::DoublePayment { hash, .. } if hash == "b"
            ));
            // Once recorded, it is followed to the end like any inclusion.
            t.transition(
                OutStatus::Included,
                format!("{DOUBLE_PAYMENT_NOTE} a, b"),
                at(61_000),
            )
            .unwrap();
            assert_eq!(
                decide(&t, Some(&both), &policy(), at(62_000)),
                Decision::Final
            );
        }
        // One found by lookup, the other listed in a block the lookups miss.
        let mut t = tx(Network::Tron);
        t.attempts.push(tron_attempt("a", 0, Some(0), 60_000));
        t.attempts
            .push(tron_attempt("b", 60_000, Some(60_000), 120_000));
        t.status = OutStatus::Sent;
        let mut o = obs(
            30,
            0,
            vec![TxLookup::Unknown, TxLookup::Included(inclusion(25, true))],
        );
        o.blocks = BlockScan::Listed {
            hash: "a".into(),
            block_number: 9,
            inclusion: Some(inclusion(9, true)),
        };
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(130_000)),
            Decision::DoublePayment { hash, hashes, .. } if hash == "b" && hashes == ["b", "a"]
        ));
    }

    #[test]
    fn a_refused_energy_delegation_waits_only_for_the_fee() {
        let sun = Amount::from_units(14_332_000_000);
        let receiver = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK".to_owned();
        let undelegate = Payment::UndelegateEnergy {
            receiver: receiver.clone(),
            balance_sun: sun,
        };
        let delegate = Payment::DelegateEnergy {
            receiver,
            balance_sun: sun,
        };
        for (payment, refusal) in [
            (
                &undelegate,
                "CONTRACT_VALIDATE_ERROR: contract validate error : insufficient \
                 delegatedFrozenBalance(Energy), request=14332000000, unDelegateBalance=0",
            ),
            (
                &undelegate,
                "CONTRACT_VALIDATE_ERROR: contract validate error : delegated Resource does not \
                 exist",
            ),
            (
                &delegate,
                "CONTRACT_VALIDATE_ERROR: contract validate error : delegateBalance must be less \
                 than or equal to available FreezeEnergyV2 balance",
            ),
        ] {
            assert!(!refusal_waits_for_funds(payment, refusal), "{refusal}");
        }
        for payment in [&undelegate, &delegate] {
            for refusal in [
                "BANDWITH_ERROR: AccountResourceInsufficient error",
                "OTHER_ERROR: internal error",
            ] {
                assert!(refusal_waits_for_funds(payment, refusal), "{refusal}");
            }
        }
        // A transfer's "insufficient" is the hot wallet's balance: it waits for a funding.
        let transfer = Payment::Native {
            to: "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK".into(),
            amount: sun,
        };
        assert!(refusal_waits_for_funds(
            &transfer,
            "CONTRACT_VALIDATE_ERROR: Validate TransferContract error, balance is not sufficient."
        ));
    }

    #[test]
    fn a_cancelled_payment_whose_nonce_another_transaction_took_fails_once_that_is_final() {
        let mut t = tx(Network::Bsc);
        let mut a = attempt("a", 0, Some(0), None);
        a.last_answer = Some(BroadcastOutcome::NonceUsed);
        t.attempts.push(a);
        t.status = OutStatus::Sent;
        let mut o = obs(20, 0, vec![TxLookup::Unknown]);
        // Not cancelled: stuck for an operator, whatever holds the nonce.
        o.nonce_holder = Some("f0".into());
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Stuck { .. }
        ));
        cancel(&mut t);
        // Nothing at nonce 7 at depth yet, or what holds it is one of the attempts (a lagging
        // index): no verdict.
        o.nonce_holder = None;
        assert!(!matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Fail { .. }
        ));
        o.nonce_holder = Some("A".into());
        assert!(!matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Fail { .. }
        ));
        // Another transaction holds it at depth: failed.
        o.nonce_holder = Some("f0".into());
        let Decision::Fail { reason } = decide(&t, Some(&o), &policy(), at(1_000)) else {
            panic!("failed")
        };
        assert!(
            reason.starts_with(
                "cancelled by ops: stuck for a day: nonce 7 of sender was taken by transaction f0"
            ),
            "{reason}"
        );
        // A lookup that finds an attempt in a block contradicts it: no verdict.
        let seen = Observation {
            lookups: vec![TxLookup::Included(inclusion(15, true))],
            ..o.clone()
        };
        assert!(!matches!(
            decide(&t, Some(&seen), &policy(), at(1_000)),
            Decision::Fail { .. }
        ));
    }

    #[test]
    fn depth_is_counted_from_the_lower_of_the_two_heads() {
        let mut t = tx(Network::Bsc);
        t.attempts.push(attempt("a", 0, Some(0), None));
        t.status = OutStatus::Included;
        t.included = Some(Included::new("a", &inclusion(10, true)));
        // The head read on its own says 12 (depth 3: final); the receipt's endpoint saw 11.
        let lagging = Inclusion {
            head_number: Some(11),
            ..inclusion(10, true)
        };
        let o = obs(12, 0, vec![TxLookup::Included(lagging)]);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Wait { .. }
        ));
        let caught_up = Inclusion {
            head_number: Some(12),
            ..inclusion(10, true)
        };
        let o = obs(12, 0, vec![TxLookup::Included(caught_up)]);
        assert_eq!(decide(&t, Some(&o), &policy(), at(1_000)), Decision::Final);
    }

    #[test]
    fn a_void_a_node_refused_sets_no_price_for_the_next() {
        let mut t = tx(Network::Bsc);
        t.attempts.push(attempt("a", 0, Some(0), None));
        t.status = OutStatus::Sent;
        cancel(&mut t);
        let mut v = attempt("v", 1_000, None, None);
        v.void = true;
        v.bid = Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1_120_000_000,
        };
        v.last_answer = Some(BroadcastOutcome::Rejected(
            "insufficient funds for gas".into(),
        ));
        t.attempts.push(v);
        let o = obs(10, 0, vec![TxLookup::Pending, TxLookup::Unknown]);
        // Long after: the void is priced over the payment's own attempt again, not over the
        // refused void (the broadcaster then sends the same bytes rather than a new signature).
        let Decision::Void { bid } = decide(&t, Some(&o), &policy(), at(600_000)) else {
            panic!("a void")
        };
        assert_eq!(gas_price(&bid), 1_120_000_000);
    }

    #[test]
    fn a_cancelled_token_payment_without_its_transfer_is_recorded_then_fails_at_depth() {
        let mut t = tx(Network::Bsc);
        t.payment = Payment::Token {
            contract: "usdt".into(),
            to: "to".into(),
            amount: Amount::from_units(5),
        };
        t.attempts.push(attempt("a", 0, Some(0), None));
        t.status = OutStatus::Sent;
        let o = obs(10, 0, vec![TxLookup::Included(inclusion(10, true))]);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Stuck { .. }
        ));
        cancel(&mut t);
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Included { hash, .. } if hash == "a"
        ));
        t.included = Some(Included::new("a", &inclusion(10, true)));
        t.status = OutStatus::Included;
        assert!(matches!(
            decide(&t, Some(&o), &policy(), at(1_000)),
            Decision::Wait { .. }
        ));
        let deep = obs(12, 0, vec![TxLookup::Included(inclusion(10, true))]);
        let Decision::Fail { reason } = decide(&t, Some(&deep), &policy(), at(1_000)) else {
            panic!("failed at depth")
        };
        assert!(reason.contains("no Transfer"), "{reason}");
        // Some of the token left (a fee-taking token: 4 of 5 arrived): money moved, so the
        // cancel does not fail it; it stays for an operator.
        let partial = Inclusion {
            moves: vec![crate::ports::sender::TokenMove {
                contract: "USDT".into(),
                kind: MoveKind::Transfer,
                from: "sender".into(),
                to: "to".into(),
                amount: Amount::from_units(4),
            }],
            ..inclusion(10, true)
        };
        let deep = obs(12, 0, vec![TxLookup::Included(partial.clone())]);
        assert!(matches!(
            decide(&t, Some(&deep), &policy(), at(1_000)),
            Decision::Stuck { .. }
        ));
        // Recorded earlier with the token's moves, a later answer without them is no proof.
        t.included = Some(Included::new("a", &partial));
        assert!(matches!(
            decide(
                &t,
                Some(&obs(12, 0, vec![TxLookup::Included(inclusion(10, true))])),
                &policy(),
                at(1_000)
            ),
            Decision::Stuck { .. }
        ));
    }
}
