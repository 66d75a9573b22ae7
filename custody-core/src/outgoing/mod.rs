//! Outgoing transactions: one engine that signs, sends and follows every payment the service
//! makes (withdrawals now; swaps, sweeps, gas top-ups and migrations next) without ever paying
//! twice.
//!
//! States: `built` (the payment and, on EVM, its nonce are fixed) → `signed` (an attempt's exact
//! bytes and hash are stored before anything is sent) → `sent` (a node took it, or its answer
//! was lost) → `included` (in a block, with its receipt and the fee actually paid) → `final` (at
//! the network's confirmation depth); or `failed` (never included and never can be, or
//! included with a failed receipt once final). One transaction may have several attempts: an
//! EVM replacement under the same nonce with a higher gas price, or a TRON rebuild once the
//! earlier attempt has expired on chain and is known not to be included. Any attempt may be the
//! one that is included; a new one is signed only when no earlier one can still be included
//! without it replacing that one (same nonce) or after it provably cannot (TRON expiry).
//! Every move is appended to `history`; nothing is erased.

pub mod act;
pub mod blocks;
mod engine;
pub mod funds;
#[cfg(test)]
mod proptests;
pub mod sending;

pub use blocks::BlockScan;
pub use engine::{
    decide, final_status, refusal_waits_for_funds, repriced, void_priced, Decision, EnginePolicy,
    Observation, DOUBLE_PAYMENT_NOTE,
};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::amount::Amount;
use crate::error::PortError;
use crate::network::Network;
use crate::ports::sender::{BroadcastOutcome, FeeBid, Inclusion, Payment, TokenMove};
use crate::ports::signer::HdPath;
use crate::time::Timestamp;
use crate::tron::resources::{ActualResources, ResourcePlan};

/// Why the service pays: the record an outgoing transaction belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Withdrawal,
    Swap,
    /// An `approve` of the router, sent ahead of the swap it serves (its reference).
    Approval,
    /// A deposit address's funds moved to the hot wallet (`crate::sweep`); sent from the
    /// deposit address.
    Sweep,
    /// Native coin the hot wallet sends a deposit address for a token sweep's fee.
    Funding,
    /// The treasury moving its own funds between its hot wallets: the drain of a retired hot
    /// wallet into the active one (`crate::wallet::hot`; decisions §21's purpose).
    Rebalance,
}

impl Purpose {
    pub const ALL: [Purpose; 6] = [
        Purpose::Withdrawal,
        Purpose::Swap,
        Purpose::Approval,
        Purpose::Sweep,
        Purpose::Funding,
        Purpose::Rebalance,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Purpose::Withdrawal => "withdrawal",
            Purpose::Swap => "swap",
            Purpose::Approval => "approval",
            Purpose::Sweep => "sweep",
            Purpose::Funding => "treasury_funding",
            Purpose::Rebalance => "rebalance",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Purpose::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

stored_enum! {
    /// States of an outgoing transaction.
    OutStatus {
        Built => "built",
        Signed => "signed",
        Sent => "sent",
        Included => "included",
        Final => "final",
        Failed => "failed",
    }
    // `signed → signed` and `sent → signed` add an attempt; `included → sent` is a
    // reorganization.
    moves {
        Built => Signed,
        Built => Failed,
        Signed => Signed,
        Signed => Sent,
        Signed => Included,
        Signed => Failed,
        Sent => Signed,
        Sent => Sent,
        Sent => Included,
        Sent => Failed,
        Included => Sent,
        Included => Included,
        Included => Final,
        Included => Failed,
    }
}

impl OutStatus {
    /// Nothing more happens to it.
    pub const fn is_terminal(self) -> bool {
        matches!(self, OutStatus::Final | OutStatus::Failed)
    }
}

/// One signed version of the payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Lowercase hex without `0x`.
    pub hash: String,
    /// The exact bytes; every broadcast of this attempt sends them.
    #[serde(with = "hex_bytes")]
    pub raw: Vec<u8>,
    pub bid: Bid,
    /// TRON: void once a block after this time exists.
    pub expires_at_ms: Option<i64>,
    #[serde(with = "ms")]
    pub signed_at: Timestamp,
    /// When a node last took these bytes (or its answer was lost).
    #[serde(with = "ms_opt")]
    pub sent_at: Option<Timestamp>,
    /// What the last broadcast of these bytes was answered (stored as its text, see
    /// [`BroadcastOutcome`]'s `Display`).
    #[serde(default, with = "answer_text")]
    pub last_answer: Option<BroadcastOutcome>,
    /// TRON: the resource plan this attempt was priced with (what it was expected to use and
    /// burn), kept to be compared with [`Included::resources`]. Absent from attempts stored
    /// before plans were kept, and on BSC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<ResourcePlan>,
    /// TRON: the block the attempt references (TaPoS): only a later block can include it, so
    /// the blocks after it are the ones read to prove it absent. Absent from attempts stored
    /// before it was kept, and on BSC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_block: Option<u64>,
    /// EVM: a cancel's void: 0 paid to the sender itself at the payment's nonce, so that none
    /// of the payment's attempts can be included any more. Absent (false) on every other.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub void: bool,
}

/// [`FeeBid`] in a stored form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Bid {
    Gas {
        gas_limit: u64,
        #[serde(with = "u128_text")]
        gas_price_wei: u128,
    },
    FeeLimit {
        sun: u64,
    },
}

impl From<FeeBid> for Bid {
    fn from(b: FeeBid) -> Self {
        match b {
            FeeBid::Gas {
                gas_limit,
                gas_price_wei,
            } => Bid::Gas {
                gas_limit,
                gas_price_wei,
            },
            FeeBid::FeeLimit { sun } => Bid::FeeLimit { sun },
        }
    }
}

impl From<Bid> for FeeBid {
    fn from(b: Bid) -> Self {
        match b {
            Bid::Gas {
                gas_limit,
                gas_price_wei,
            } => FeeBid::Gas {
                gas_limit,
                gas_price_wei,
            },
            Bid::FeeLimit { sun } => FeeBid::FeeLimit { sun },
        }
    }
}

/// Where the included attempt is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Included {
    pub hash: String,
    pub block_number: u64,
    pub block_hash: String,
    pub succeeded: bool,
    pub fee_native: Amount,
    /// The token movements its receipt logged (what a swap took and gave).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<TokenMove>,
    /// TRON: the bandwidth and energy it actually used and burned (its info's receipt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ActualResources>,
    /// The block's timestamp (Unix ms), when the adapter read it (see [`Inclusion`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_time_ms: Option<i64>,
}

impl Included {
    pub fn new(hash: &str, i: &Inclusion) -> Self {
        Included {
            hash: hash.to_owned(),
            block_number: i.block_number,
            block_hash: i.block_hash.clone(),
            succeeded: i.succeeded,
            fee_native: i.fee_native,
            moves: i.moves.clone(),
            resources: i.resources,
            block_time_ms: i.block_time_ms,
        }
    }
}

/// One step of the transaction's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StepRecord")]
pub struct OutStep {
    pub status: OutStatus,
    #[serde(with = "ms")]
    pub at: Timestamp,
    /// What operators read.
    pub detail: String,
    /// The wait this step records, if it records one: what the broadcaster reads back (one
    /// alert per wait), where `detail` is only text. Always written, `null` for none, so that
    /// only a step stored before waits were typed lacks it.
    pub wait: Option<Wait>,
}

/// Why a payment waits, as a step of its history records it. Each wait raises one alert; the
/// rounds after it that find the same wait as the newest step raise none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// The hot wallet cannot fund it (`hot_wallet_insufficient`).
    HotWalletShort,
    /// Signed, unsent, and held back by a control while it holds its nonce.
    HoldsNonce,
    /// The node refuses to price it.
    CannotPrice,
    /// The seed that derives its sender is not loaded in this process.
    SeedNotLoaded,
    /// The node has refused its attempt for long (once per payment).
    RefusedLong,
    /// The engine judged it stuck.
    Stuck,
}

impl Wait {
    const ALL: [Wait; 6] = [
        Wait::HotWalletShort,
        Wait::HoldsNonce,
        Wait::CannotPrice,
        Wait::SeedNotLoaded,
        Wait::RefusedLong,
        Wait::Stuck,
    ];

    /// How the step's `detail` begins.
    pub fn note_prefix(self) -> &'static str {
        match self {
            Wait::HotWalletShort => "waiting: the hot wallet cannot fund it",
            Wait::HoldsNonce => "waiting: holds its nonce unsent",
            Wait::CannotPrice => "waiting: cannot be priced",
            Wait::SeedNotLoaded => "waiting: its seed is not loaded",
            Wait::RefusedLong => "waiting: refused by the node",
            Wait::Stuck => "stuck:",
        }
    }

    /// The wait a step stored before waits were typed (with no `wait` field at all) stands
    /// for, read from its text (see `docs/upgrading.md`).
    fn of_untyped_note(detail: &str) -> Option<Wait> {
        Wait::ALL
            .into_iter()
            .find(|w| detail.starts_with(w.note_prefix()))
    }
}

/// A step as stored: one written before waits were typed has no `wait` field; a newer one has
/// it, `null` when the step records no wait.
#[derive(Deserialize)]
struct StepRecord {
    status: OutStatus,
    #[serde(with = "ms")]
    at: Timestamp,
    detail: String,
    /// `None`: the field is absent; `Some(None)`: written as `null`.
    #[serde(default, deserialize_with = "present")]
    wait: Option<Option<Wait>>,
}

/// A field that is present, `null` or not (serde's `Option` alone reads both absent and `null`
/// as `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<Wait>>, D::Error> {
    Option::<Wait>::deserialize(d).map(Some)
}

impl From<StepRecord> for OutStep {
    fn from(r: StepRecord) -> Self {
        let wait = match r.wait {
            Some(written) => written,
            None => Wait::of_untyped_note(&r.detail),
        };
        OutStep {
            status: r.status,
            at: r.at,
            detail: r.detail,
            wait,
        }
    }
}

/// A payment the service makes on one network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingTx {
    pub id: Uuid,
    pub network: Network,
    pub purpose: Purpose,
    pub reference_id: Uuid,
    /// The paying address (a hot wallet) and its key's path.
    pub from: String,
    pub from_path: HdPath,
    pub payment: Payment,
    /// EVM: allocated in the store when the first attempt is about to be signed (never at
    /// creation: a payment that waits for funds or a switch holds no nonce, so it cannot stall
    /// the sender's later payments, and a payment that fails before signing leaves no gap),
    /// then kept by every attempt.
    pub nonce: Option<u64>,
    /// Signed only once this transaction of the same sender has its nonce (or has ended): the
    /// router approvals a swap needs go out before it.
    pub after: Option<Uuid>,
    pub status: OutStatus,
    pub attempts: Vec<Attempt>,
    pub included: Option<Included>,
    pub failure_reason: Option<String>,
    pub history: Vec<OutStep>,
    /// When the broadcaster looks at it next.
    pub next_check_at: Timestamp,
    /// The lease this copy was claimed under (`claim_outgoing`); `None` for a copy read or made
    /// otherwise. Writes of a leased copy are fenced by it: once another broadcaster has taken
    /// the transaction over, they fail instead of overwriting what it did.
    pub lease: Option<Timestamp>,
    /// The head the broadcaster saw when it last looked at the chain for it (not stored): what
    /// the record it pays shows as confirmations.
    pub seen_head: Option<u64>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl OutgoingTx {
    /// A new transaction in `built`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: Uuid,
        network: Network,
        purpose: Purpose,
        reference_id: Uuid,
        from: String,
        from_path: HdPath,
        payment: Payment,
        nonce: Option<u64>,
        now: Timestamp,
    ) -> Self {
        OutgoingTx {
            id,
            network,
            purpose,
            reference_id,
            from,
            from_path,
            payment,
            nonce,
            after: None,
            status: OutStatus::Built,
            attempts: Vec::new(),
            included: None,
            failure_reason: None,
            history: vec![OutStep {
                status: OutStatus::Built,
                at: now,
                detail: String::new(),
                wait: None,
            }],
            next_check_at: now,
            lease: None,
            seen_head: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// Signed only after `id` (see [`OutgoingTx::after`]).
    pub fn after(mut self, id: Uuid) -> Self {
        self.after = Some(id);
        self
    }

    /// Moves to `next` with a history step. Refuses an illegal move.
    pub fn transition(
        &mut self,
        next: OutStatus,
        detail: impl Into<String>,
        now: Timestamp,
    ) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "outgoing transaction {} cannot move from {} to {}",
                self.id,
                self.status.as_str(),
                next.as_str()
            ));
        }
        self.status = next;
        self.updated_at = now;
        self.history.push(OutStep {
            status: next,
            at: now,
            detail: detail.into(),
            wait: None,
        });
        Ok(())
    }

    /// Appends a history step without a move (an alert, a note an operator should see).
    pub fn note(&mut self, detail: impl Into<String>, now: Timestamp) {
        self.updated_at = now;
        self.history.push(OutStep {
            status: self.status,
            at: now,
            detail: detail.into(),
            wait: None,
        });
    }

    /// Appends the step that records `wait`: its note is the wait's prefix and `more`.
    pub fn note_wait(&mut self, wait: Wait, more: &str, now: Timestamp) {
        self.updated_at = now;
        self.history.push(OutStep {
            status: self.status,
            at: now,
            detail: format!("{}{more}", wait.note_prefix()),
            wait: Some(wait),
        });
    }

    /// The wait the newest history step records, if it records one.
    pub fn last_wait(&self) -> Option<Wait> {
        self.history.last().and_then(|s| s.wait)
    }

    /// Whether any step of the history recorded `wait`.
    pub fn ever_waited(&self, wait: Wait) -> bool {
        self.history.iter().any(|s| s.wait == Some(wait))
    }

    /// Records a new signed attempt (before it is ever sent).
    pub fn add_attempt(&mut self, attempt: Attempt, now: Timestamp) -> Result<(), String> {
        if self.attempts.iter().any(|a| a.hash == attempt.hash) {
            return Err(format!(
                "outgoing transaction {} already has attempt {}",
                self.id, attempt.hash
            ));
        }
        let detail = format!("attempt {} signed", attempt.hash);
        self.attempts.push(attempt);
        self.transition(OutStatus::Signed, detail, now)
    }

    /// Blocks on top of its inclusion, counting its own, as the broadcaster last saw them
    /// (at most `depth`); 0 when it is in no block.
    pub fn confirmations(&self, depth: u32) -> u32 {
        let Some(i) = self.included_payment() else {
            return 0;
        };
        let seen = self
            .seen_head
            .map_or(1, |h| h.saturating_sub(i.block_number).saturating_add(1));
        u32::try_from(seen.max(1)).unwrap_or(u32::MAX).min(depth)
    }

    pub fn latest(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    /// The transaction as operators see it (the admin API, the CLI): what it pays, its state
    /// and its history, never its signed bytes.
    pub fn operator_view(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "network": self.network,
            "purpose": self.purpose.as_str(),
            "reference_id": self.reference_id,
            "from_address": self.from,
            "nonce": self.nonce,
            "status": self.status.as_str(),
            "cancel_requested": self.cancel_request().is_some(),
            "history": self.history.iter().map(|h| serde_json::json!({
                "status": h.status.as_str(),
                "at": h.at,
                "detail": h.detail,
            })).collect::<Vec<_>>(),
        })
    }

    /// The hash partners see: the included attempt's, else the newest one sent; never a
    /// cancel's void (it pays nothing to them).
    pub fn visible_hash(&self) -> Option<&str> {
        if let Some(i) = self.included_payment() {
            return Some(&i.hash);
        }
        self.attempts
            .iter()
            .rev()
            .find(|a| a.sent_at.is_some() && !a.void)
            .map(|a| a.hash.as_str())
    }

    /// The inclusion when the included attempt is the payment (not a cancel's void).
    pub fn included_payment(&self) -> Option<&Included> {
        self.included.as_ref().filter(|i| !self.is_void(&i.hash))
    }

    /// Whether attempt `hash` is a cancel's void.
    pub fn is_void(&self, hash: &str) -> bool {
        self.attempts.iter().any(|a| a.void && a.hash == hash)
    }

    /// The operator's cancel request (`by ACTOR: REASON`), once one was recorded
    /// ([`request_cancel`]).
    pub fn cancel_request(&self) -> Option<&str> {
        self.history
            .iter()
            .find_map(|s| s.detail.strip_prefix(CANCEL_NOTE))
            .map(str::trim_start)
    }

    /// What a cancel's void pays: nothing, to the sender itself.
    pub fn void_payment(&self) -> Payment {
        Payment::Native {
            to: self.from.clone(),
            amount: Amount::ZERO,
        }
    }
}

/// Persistence of outgoing transactions and of EVM nonces.
pub trait OutgoingRepo: OutgoingReads {
    /// MUST fail if the id exists, if (purpose, reference id) already has a transaction (one
    /// payment per withdrawal, by constraint), if (network, from, nonce) is taken, or if an
    /// attempt's hash is another transaction's.
    fn insert_outgoing(&mut self, tx: &OutgoingTx) -> Result<(), PortError>;
    /// Replaces the stored record's state, attempts, inclusion, history and next check (what a
    /// transaction is — purpose, sender, payment, order — is fixed at insert; its nonce is set
    /// once, from none, and never changes after). MUST fail if it does not exist, if the nonce
    /// is taken by another transaction of the sender, or if an attempt's hash is already an
    /// attempt of another transaction on the network (two payments that came out as one
    /// transaction would both be counted paid by it). A copy without a lease ends any lease; a
    /// leased copy (`tx.lease`) MUST fail (transient) unless the stored lease is still exactly
    /// that one, and keeps it.
    fn update_outgoing(&mut self, tx: &OutgoingTx) -> Result<(), PortError>;
    /// Ends lease `lease` of transaction `id`, so that it is claimed again when due. MUST fail
    /// (transient) if the stored lease is not that one any more.
    fn release_outgoing(&mut self, id: Uuid, lease: Timestamp) -> Result<(), PortError>;
    /// The next nonce of (network, address), counted from `seed` the first time (the chain's
    /// confirmed nonce), and moves the counter on. Unique per (network, address): a
    /// constraint, so two writers never get the same nonce.
    fn allocate_nonce(
        &mut self,
        network: Network,
        address: &str,
        seed: u64,
    ) -> Result<u64, PortError>;
    /// Moves the allocator of (network, address) forward so that the next nonce it hands out
    /// is `next`; never backwards (a lower `next` changes nothing), and nothing when it was
    /// never seeded. Returns whether it moved.
    fn advance_nonce(
        &mut self,
        network: Network,
        address: &str,
        next: u64,
    ) -> Result<bool, PortError>;
    /// Leases up to `limit` unfinished transactions of `network` due at `now` until
    /// `lease_until` (a crashed broadcaster's lease runs out), oldest due first; each returned
    /// copy carries `lease: Some(lease_until)`.
    fn claim_outgoing(
        &mut self,
        network: Network,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<OutgoingTx>, PortError>;
}

/// The control that stops new payments of `purpose` (decisions §11), beside
/// `kill_switch.global` and `maintenance.<NETWORK>`.
pub fn purpose_switch(purpose: Purpose) -> &'static str {
    match purpose {
        Purpose::Withdrawal => "kill_switch.withdrawals",
        // An approval only serves a swap: it stops with swaps.
        Purpose::Swap | Purpose::Approval => "kill_switch.swaps",
        // The treasury's own moves: sweeps and the fundings they wait for.
        Purpose::Sweep | Purpose::Funding => "kill_switch.sweeps",
        // A drain takes funds away from a hot wallet that may be compromised: stopping sweeps
        // (which refill it) must not stop it; only the global switch does.
        Purpose::Rebalance => "kill_switch.global",
    }
}

/// Whether new money may leave for the payment of (`purpose`, `reference`) on `network`: no
/// kill switch of its purpose (nor the global one), no maintenance of its network, no TREASURY
/// shortfall control of an asset it moves, and (for a withdrawal or a swap) no reorganization
/// debt of its user in the asset it spends. Read before a payment is priced and again in the
/// write that stores its signed attempt ([`record_signed`]), so a switch turned on meanwhile
/// still stops it.
pub fn may_sign_new(
    tx: &mut dyn crate::ports::store::ReadTx,
    purpose: Purpose,
    reference: Uuid,
    network: Network,
) -> Result<bool, PortError> {
    let maintenance = format!("maintenance.{network}");
    // A revocation of a former router's approval moves no money and is what an operator
    // wants most while swaps are stopped: only the global switch holds it.
    let switch = if purpose == Purpose::Approval && is_revocation(tx, reference)? {
        "kill_switch.global"
    } else {
        purpose_switch(purpose)
    };
    for key in [switch, maintenance.as_str()] {
        if crate::admin::restricted(tx, key)? {
            return Ok(false);
        }
    }
    if crate::reconcile::halted_for_payment(tx, purpose, reference)? {
        return Ok(false);
    }
    // The user's money that leaves: a withdrawal's asset, a swap's asset_in.
    let spender = match purpose {
        Purpose::Withdrawal => tx
            .withdrawal_by_id(reference)?
            .map(|w| (w.tenant, w.external_user_id, w.network, w.asset)),
        Purpose::Swap => tx
            .swap_by_id(reference)?
            .map(|s| (s.tenant, s.external_user_id, Network::Bsc, s.asset_in)),
        _ => None,
    };
    if let Some((tenant, user, network, asset)) = spender {
        if !tx
            .owed_after_reorg_units(&tenant, &user, network, &asset)?
            .is_zero()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the approval that references `reference` is a revocation (`approve(0)` of a former
/// router, `crate::swap::revoke_stale_approvals`): it serves no swap and references itself.
pub fn is_revocation(
    tx: &mut dyn crate::ports::store::ReadTx,
    reference: Uuid,
) -> Result<bool, PortError> {
    Ok(tx
        .outgoing(reference)?
        .is_some_and(|o| is_revocation_tx(&o)))
}

/// Whether `out` is a revocation: an approval of zero that references itself.
pub fn is_revocation_tx(out: &OutgoingTx) -> bool {
    out.purpose == Purpose::Approval
        && out.reference_id == out.id
        && matches!(&out.payment, Payment::Approve { amount, .. } if amount.is_zero())
}

/// What [`record_signed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Recorded {
    /// The attempt (and, for a first one, its nonce) is stored: it may be sent.
    Stored,
    /// A control turned on since the payment was checked ([`may_sign_new`]): nothing was
    /// written, no nonce was taken; the signed bytes are dropped unsent and the payment waits
    /// as one refused before pricing.
    Refused,
    /// Another payment of the sender was signed since the funds check (another instance):
    /// nothing was written; the payment is checked again later.
    FundsChanged,
}

/// Records `out`, whose newest attempt was just signed, unless a control now stops new money
/// for it ([`may_sign_new`], checked in this write: a switch an operator turned on after the
/// broadcaster's read still wins). When `seed` is given, that attempt is the transaction's
/// first and was signed with the nonce `out.nonce` predicted from the sender's allocator
/// (seeded from `seed` the first time): the nonce is allocated in this very write and MUST be
/// that one, else nothing is written (another payment of the sender took it meanwhile; the
/// caller signs again). So a nonce exists exactly when an attempt signed with it is stored: a
/// crash or a failure between the two can leave no gap.
///
/// `funds_seen`: what the sender's funds check counted ([`funds::FundsSeen`]); when another
/// payment of the sender was signed since, nothing is written ([`Recorded::FundsChanged`]):
/// the wallet may not cover both.
pub fn record_signed(
    tx: &mut dyn crate::ports::store::WriteTx,
    out: &OutgoingTx,
    seed: Option<u64>,
    funds_seen: Option<&funds::FundsSeen>,
) -> crate::error::CoreResult<Recorded> {
    if !may_sign_new(tx, out.purpose, out.reference_id, out.network)? {
        return Ok(Recorded::Refused);
    }
    if let Some(seen) = funds_seen {
        let now = tx.outgoing_in_flight(out.network, &out.from)?;
        if seen.signed_since(&now, out.id).is_some() {
            return Ok(Recorded::FundsChanged);
        }
    }
    if let Some(seed) = seed {
        let n = tx.allocate_nonce(out.network, &out.from, seed)?;
        if Some(n) != out.nonce {
            return Err(PortError::transient(
                "store",
                format!(
                    "outgoing transaction {}: nonce {n} is the next of its sender, not {:?}; \
                     it is signed again",
                    out.id, out.nonce
                ),
            )
            .into());
        }
    }
    tx.update_outgoing(out)?;
    Ok(Recorded::Stored)
}

/// How the history step of an operator's cancel request begins (`cancel requested by ACTOR:
/// REASON`); the engine reads it back ([`OutgoingTx::cancel_request`]).
pub const CANCEL_NOTE: &str = "cancel requested";

/// Outgoing transaction `id`, or the one that pays record `id` (an approval is found by its own
/// id only: it serves a swap, whose own payment is the one found by the swap's id).
fn outgoing_or_paying(
    tx: &mut dyn crate::ports::store::WriteTx,
    id: Uuid,
) -> Result<Option<OutgoingTx>, PortError> {
    if let Some(out) = tx.outgoing(id)? {
        return Ok(Some(out));
    }
    for purpose in [
        Purpose::Withdrawal,
        Purpose::Swap,
        Purpose::Sweep,
        Purpose::Funding,
    ] {
        if let Some(out) = tx.outgoing_for(purpose, id)? {
            return Ok(Some(out));
        }
    }
    Ok(None)
}

/// Records an operator's request to cancel outgoing transaction `id`, with its audit record,
/// in the caller's transaction. What the cancel does is the engine's decision
/// ([`decide`]): nothing signed yet → failed at once; BSC → its nonce voided by a 0-value
/// self-transfer that outbids every attempt, and failed once that is final (or paid, if an
/// attempt of the payment is included instead); TRON → failed once every attempt is proven
/// void. Its record's hold is released through the record's own failure path.
///
/// Unknown id → 404; already final or failed → 422; in a block now → 422 too (it is paid
/// once final, unless a reorganization takes it back). Asking again changes nothing and returns the
/// transaction as it stands (a retried request is not a second decision).
///
/// `id` is the outgoing transaction's, or the id of the record it pays (a withdrawal, a swap,
/// a sweep, a treasury funding): what an operator has at hand.
pub fn request_cancel(
    tx: &mut dyn crate::ports::store::WriteTx,
    audit_id: Uuid,
    actor: &str,
    id: Uuid,
    reason: &str,
    now: Timestamp,
) -> crate::error::CoreResult<OutgoingTx> {
    use crate::error::{ErrorCode, Refusal};
    let reason = crate::admin::check_ack_reason(reason)?;
    let mut out =
        outgoing_or_paying(tx, id)?.ok_or_else(|| Refusal::not_found("outgoing transaction"))?;
    let id = out.id;
    if out.status.is_terminal() {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "outgoing transaction {id} is already {}",
                out.status.as_str()
            ),
        )
        .with_detail("status", out.status.as_str())
        .into());
    }
    if out.cancel_request().is_some() {
        return Ok(out);
    }
    if out.status == OutStatus::Included {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "outgoing transaction {id} is in a block: it cannot be cancelled now; it is \
                 paid once final"
            ),
        )
        .with_detail("status", out.status.as_str())
        .into());
    }
    let old = out.status.as_str();
    out.note(format!("{CANCEL_NOTE} by {actor}: {reason}"), now);
    // Looked at in the broadcaster's next round. An unleased copy ends any lease: a
    // broadcaster's step under way fails its write and looks again, with the request.
    out.next_check_at = now;
    out.lease = None;
    tx.update_outgoing(&out)?;
    tx.append_audit(&crate::admin::AuditRecord {
        id: audit_id,
        actor: actor.to_owned(),
        action: "outgoing.cancel".into(),
        target: id.to_string(),
        old_value: Some(serde_json::json!({ "status": old, "cancel_requested": false })),
        new_value: Some(serde_json::json!({ "status": old, "cancel_requested": true })),
        reason: reason.to_owned(),
        created_at: now,
    })?;
    Ok(out)
}

/// EVM: where the allocator of a sender must move before its next payment, when the chain's
/// confirmed count of its transactions (`chain_nonce`) is ahead of the allocator's `next`
/// (a restored backup, the key used elsewhere): every nonce below the chain's count is spent,
/// so a payment signed with one would be refused ("nonce too low") and stuck. `None` when the
/// allocator is not behind, was never seeded (it is seeded from the chain anyway), or an
/// unfinished payment of ours holds a nonce at or above `next` (the allocator never handed
/// that out: something is inconsistent, an operator must look).
pub fn nonce_resync(next: Option<u64>, chain_nonce: u64, in_flight: &[OutgoingTx]) -> Option<u64> {
    let next = next?;
    if chain_nonce <= next {
        return None;
    }
    let held_above = in_flight
        .iter()
        .any(|o| !o.status.is_terminal() && o.nonce.is_some_and(|n| n >= next));
    (!held_above).then_some(chain_nonce)
}

/// Moves the nonce allocator of (`network`, `from`) forward to the chain's confirmed count
/// when [`nonce_resync`] says so, with a `nonce_resynced` warning, in the caller's
/// transaction. Returns where it moved, if it did.
pub fn resync_nonce(
    tx: &mut dyn crate::ports::store::WriteTx,
    network: Network,
    from: &str,
    chain_nonce: u64,
    alert_id: Uuid,
    now: Timestamp,
) -> crate::error::CoreResult<Option<u64>> {
    let next = tx.next_nonce(network, from)?;
    let in_flight = tx.outgoing_in_flight(network, from)?;
    let Some(to) = nonce_resync(next, chain_nonce, &in_flight) else {
        return Ok(None);
    };
    tx.advance_nonce(network, from, to)?;
    tx.raise_alert(&crate::admin::Alert {
        id: alert_id,
        kind: "nonce_resynced".into(),
        severity: "warning".into(),
        message: format!(
            "{network} nonce allocator of {from} moved from {} to {to}: the chain has confirmed \
             {chain_nonce} transactions of it, more than this service signed (a restored \
             backup, or the key used elsewhere); check where the others went",
            next.unwrap_or_default()
        ),
        reference_type: Some("wallet".into()),
        reference_id: None,
        created_at: now,
        acknowledged_at: None,
        acknowledged_by: None,
    })?;
    Ok(Some(to))
}

/// Ids of the records [`record_double_payment`] writes.
#[derive(Debug, Clone, Copy)]
pub struct DoublePaymentIds {
    pub alert: Uuid,
    pub latch: crate::invariants::LatchIds,
}

/// The alert and the latch of a double payment of `out` (attempts `hashes` all in a block),
/// inside the caller's transaction, the one that records the inclusion: a critical
/// `double_payment` alert, and `kill_switch.global` latched so that nothing more leaves until an
/// operator has looked (the ledger books one payment; the chain paid more).
pub fn record_double_payment(
    tx: &mut dyn crate::ports::store::WriteTx,
    ids: DoublePaymentIds,
    out: &OutgoingTx,
    hashes: &[String],
    now: Timestamp,
) -> crate::error::CoreResult<()> {
    let message = format!(
        "{} outgoing transaction {} ({} {}) went out more than once: attempts {} are all in          blocks; {} was paid more than the ledger booked. kill_switch.global is on",
        out.network,
        out.id,
        out.purpose.as_str(),
        out.reference_id,
        hashes.join(", "),
        out.payment.recipient()
    );
    tx.raise_alert(&crate::admin::Alert::open(
        ids.alert,
        "double_payment",
        "critical",
        message,
        Some(("outgoing_transaction", out.id)),
        now,
    ))?;
    let reason = format!(
        "outgoing transaction {}: attempts {} are all in blocks (a double payment)",
        out.id,
        hashes.join(", ")
    );
    crate::invariants::latch(tx, ids.latch, &reason, now)?;
    Ok(())
}

pub trait OutgoingReads {
    fn outgoing(&mut self, id: Uuid) -> Result<Option<OutgoingTx>, PortError>;
    /// The transaction paying for (purpose, reference id), if any.
    fn outgoing_for(
        &mut self,
        purpose: Purpose,
        reference_id: Uuid,
    ) -> Result<Option<OutgoingTx>, PortError>;
    /// The transaction one of whose attempts has hash `hash` (lowercase hex without `0x`) on
    /// `network`, if any: how the deposit scanner tells the service's own moves from deposits.
    fn outgoing_by_attempt(
        &mut self,
        network: Network,
        hash: &str,
    ) -> Result<Option<OutgoingTx>, PortError>;
    /// The next nonce the allocator would hand out on (network, address), if it was seeded.
    fn next_nonce(&mut self, network: Network, address: &str) -> Result<Option<u64>, PortError>;
    /// The unfinished transactions sent from `from` on `network`: what the hot wallet must keep
    /// for what is already on its way.
    fn outgoing_in_flight(
        &mut self,
        network: Network,
        from: &str,
    ) -> Result<Vec<OutgoingTx>, PortError>;
    /// How many transactions of `network`, from any sender, are not final yet
    /// ([`OutStatus::is_terminal`]): the broadcaster's queue depth.
    fn unfinished_outgoing_count(&mut self, network: Network) -> Result<u64, PortError>;
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        hex::decode(text).map_err(serde::de::Error::custom)
    }
}

mod u128_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(n: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&n.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A node's answer as stored: its text, so rows written before answers were typed read the
/// same.
mod answer_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::ports::sender::BroadcastOutcome;

    pub fn serialize<S: Serializer>(a: &Option<BroadcastOutcome>, s: S) -> Result<S::Ok, S::Error> {
        match a {
            Some(a) => s.collect_str(a),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<BroadcastOutcome>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(|t| BroadcastOutcome::from_stored(&t)))
    }
}

/// Stored times are milliseconds since the epoch.
mod ms {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::time::Timestamp;

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(t.unix_millis())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        Ok(Timestamp::from_unix_millis(i64::deserialize(d)?))
    }
}

mod ms_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::time::Timestamp;

    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&t.unix_millis()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Ok(Option::<i64>::deserialize(d)?.map(Timestamp::from_unix_millis))
    }
}

#[cfg(test)]
mod stored_form {
    use super::*;

    /// Rows written before plans and actual resources were kept still read, without them.
    #[test]
    fn attempts_and_inclusions_stored_without_resources_still_read() {
        let attempt: Attempt = serde_json::from_str(
            r#"{"hash":"ab","raw":"0102","bid":{"kind":"fee_limit","sun":0},
                "expires_at_ms":5,"signed_at":1,"sent_at":null,"last_answer":null}"#,
        )
        .unwrap();
        assert_eq!(attempt.plan, None);
        assert!(!serde_json::to_string(&attempt).unwrap().contains("plan"));
        let included: Included = serde_json::from_str(
            r#"{"hash":"ab","block_number":3,"block_hash":"cd","succeeded":true,
                "fee_native":"268000"}"#,
        )
        .unwrap();
        assert_eq!(included.resources, None);
    }

    /// A node's answer is stored as the text an attempt always had, and read back as the
    /// answer it names; text in no known form is an unknown answer, never a refusal.
    #[test]
    fn node_answers_are_stored_as_their_text_and_read_typed() {
        for answer in [
            BroadcastOutcome::Accepted,
            BroadcastOutcome::NonceUsed,
            BroadcastOutcome::Underpriced,
            BroadcastOutcome::Expired,
            BroadcastOutcome::Rejected("insufficient funds for gas".into()),
            BroadcastOutcome::Unknown("timed out".into()),
        ] {
            let text = answer.to_string();
            assert_eq!(BroadcastOutcome::from_stored(&text), answer, "{text}");
        }
        let attempt: Attempt = serde_json::from_str(
            r#"{"hash":"ab","raw":"0102","bid":{"kind":"fee_limit","sun":0},
                "expires_at_ms":5,"signed_at":1,"sent_at":null,
                "last_answer":"rejected: CONTRACT_VALIDATE_ERROR: balance is not sufficient"}"#,
        )
        .unwrap();
        assert_eq!(
            attempt.last_answer.as_ref().and_then(|a| a.refusal()),
            Some("CONTRACT_VALIDATE_ERROR: balance is not sufficient")
        );
        let text = serde_json::to_string(&attempt).unwrap();
        assert!(
            text.contains(r#""last_answer":"rejected: CONTRACT_VALIDATE_ERROR"#),
            "{text}"
        );
        assert_eq!(
            BroadcastOutcome::from_stored("something else"),
            BroadcastOutcome::Unknown("something else".into())
        );
        let without: Attempt = serde_json::from_str(
            r#"{"hash":"ab","raw":"0102","bid":{"kind":"fee_limit","sun":0},
                "expires_at_ms":5,"signed_at":1,"sent_at":null}"#,
        )
        .unwrap();
        assert_eq!(without.last_answer, None);
    }

    /// A wait is stored as a field and read back from it; a step written before waits were
    /// typed (no field) is read with the wait its text begins with; a newer step without a wait
    /// keeps none, even when its text begins like one.
    #[test]
    fn waits_are_stored_typed_and_untyped_steps_still_read() {
        let mut step = OutStep {
            status: OutStatus::Built,
            at: Timestamp::from_unix_millis(1),
            detail: "waiting: the hot wallet cannot fund it: short by 5".into(),
            wait: Some(Wait::HotWalletShort),
        };
        let text = serde_json::to_string(&step).unwrap();
        assert!(text.contains(r#""wait":"hot_wallet_short""#), "{text}");
        assert_eq!(serde_json::from_str::<OutStep>(&text).unwrap(), step);
        for wait in Wait::ALL {
            let old = format!(
                r#"{{"status":"built","at":1,"detail":"{} and more"}}"#,
                wait.note_prefix()
            );
            let read: OutStep = serde_json::from_str(&old).unwrap();
            assert_eq!(read.wait, Some(wait), "{old}");
        }
        // A step of this binary that records no wait stays without one, whatever its text.
        for detail in ["attempt 0xab signed", "stuck: by hand"] {
            step.detail = detail.into();
            step.wait = None;
            let text = serde_json::to_string(&step).unwrap();
            assert!(text.contains(r#""wait":null"#), "{text}");
            assert_eq!(serde_json::from_str::<OutStep>(&text).unwrap().wait, None);
        }
    }
}

#[cfg(test)]
mod confirmation_tests {
    use super::*;

    #[test]
    fn confirmations_count_the_blocks_seen_on_top_up_to_the_depth() {
        let mut t = OutgoingTx::new(
            Uuid::from_u128(1),
            Network::Bsc,
            Purpose::Withdrawal,
            Uuid::from_u128(2),
            "hot".into(),
            HdPath {
                network: Network::Bsc,
                account: 0,
                index: 0,
            },
            Payment::Native {
                to: "x".into(),
                amount: Amount::from_units(1),
            },
            None,
            Timestamp::from_unix_millis(0),
        );
        assert_eq!(t.confirmations(15), 0, "in no block");
        t.included = Some(Included {
            hash: "ab".into(),
            block_number: 100,
            block_hash: "cd".into(),
            succeeded: true,
            fee_native: Amount::ZERO,
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
        });
        assert_eq!(
            t.confirmations(15),
            1,
            "its own block, before a head was seen"
        );
        t.seen_head = Some(104);
        assert_eq!(t.confirmations(15), 5);
        t.seen_head = Some(400);
        assert_eq!(t.confirmations(15), 15, "never above the depth");
        // A lagging node's head below the block still counts the block itself.
        t.seen_head = Some(90);
        assert_eq!(t.confirmations(15), 1);
        t.included = None;
        assert_eq!(t.confirmations(15), 0, "a reorganization took it back");
    }
}
