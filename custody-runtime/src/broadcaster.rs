//! The broadcaster of one network: a gather/decide/act loop over the outgoing-transaction
//! engine (`custody_core::outgoing`). Each round it leases the transactions due and, for each:
//! observes the chain's answers about its attempts; lets `outgoing::decide` choose the step;
//! gathers the facts `outgoing::act::plan` asks for, one at a time (controls, predecessor,
//! lock, funds, price, seed), until the plan says the whole action (sign with this bid and fee
//! hold, send the stored bytes again, wait with a typed reason and its alert); does the I/O;
//! and records the result (`outgoing::act::settle` and `record_answer` change the record,
//! `moves::on_move` books what the move means). No rule is decided here. The order that keeps
//! money from going out twice:
//!
//! 1. build and sign a new attempt, and store its exact bytes and hash (a write job);
//! 2. only then broadcast those bytes, and record the answer;
//! 3. a lost answer is "unknown": the same bytes go out again and the chain is asked, never a
//!    second transaction that could be included beside the first;
//! 4. TRON: a new transaction for the same payment only once the blocks that could include the
//!    earlier ones, read by number, list none of them (`outgoing::blocks`): an endpoint whose
//!    lookups say "unknown" may lag or lie.
//!
//! A crash between 1 and 2 leaves a stored, unsent attempt: the next round sends exactly it.
//! Leases run out, so another instance (or the next start) picks up what a dead one held.
//! Nothing new is signed while `kill_switch.global`, the purpose's kill switch or
//! `maintenance.<NETWORK>` is on; what was sent is still followed to the end.

use std::sync::Arc;
use std::time::Duration;

use custody_core::admin::Alert;
use custody_core::amount::Amount;
use custody_core::error::{CoreError, CoreResult};
use custody_core::outgoing::act::{
    self, Action, Facts, Fallback, Funds, Need, Notice, Plan, Priced, Signing, Step,
};
use custody_core::outgoing::funds::{shortfall, FundsSeen, Holdings};
use custody_core::outgoing::{
    blocks, decide, Attempt, BlockScan, Decision, DoublePaymentIds, EnginePolicy, Observation,
    OutStatus, OutgoingTx, Purpose, Recorded,
};
use custody_core::ports::clock::new_uuid;
use custody_core::ports::sender::{
    BroadcastOutcome, BuildRequest, ChainSender, FeeBid, Inclusion, TxLookup,
};
use custody_core::ports::store::{read, write};
use custody_core::ports::{Clock, Entropy, Signer, Store};
use custody_core::tron::resources::ResourcePlan;
use custody_core::{Network, Timestamp};
use tokio::sync::watch;

pub struct Broadcaster {
    pub network: Network,
    pub sender: Arc<dyn ChainSender>,
    pub signer: Arc<dyn Signer>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    pub policy: EnginePolicy,
    pub poll_interval: Duration,
    /// How long a claimed transaction is ours before another broadcaster may take it.
    pub lease: Duration,
    /// Transactions handled per round.
    pub batch: usize,
    /// The network's native coin (what gas is paid in), for the records the engine pays.
    pub native: custody_core::AssetId,
    /// Who signs new money out of a sender among the instances sharing the store: checked
    /// from the funds check through the write that stores the attempt, so two instances never
    /// both sign payments the wallet covers only once.
    pub exclusive: Arc<dyn custody_core::ports::Exclusive>,
}

impl Broadcaster {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        tracing::info!(network = %self.network, "broadcaster started");
        loop {
            if let Err(e) = self.round().await {
                tracing::warn!(network = %self.network, error = %e, "broadcaster round failed");
            }
            tokio::select! {
                () = tokio::time::sleep(self.poll_interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
        }
        tracing::info!(network = %self.network, "broadcaster stopped");
    }

    /// One round: every transaction due, one step each. Returns how many were handled.
    pub async fn round(&self) -> CoreResult<usize> {
        let (network, now, batch) = (self.network, self.clock.now(), self.batch);
        let until = now.plus_millis(i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX));
        let due = write(self.store.as_ref(), move |tx| {
            Ok(tx.claim_outgoing(network, now, until, batch)?)
        })
        .await?;
        let handled = due.len();
        for out in due {
            if self.clock.now() >= until {
                // The lease of what is left ran out while earlier steps ran: another instance
                // may hold them now. They are claimed again in a later round.
                tracing::warn!(network = %network, "broadcaster lease ran out within a round");
                break;
            }
            let id = out.id;
            match self.step(out).await {
                Ok(()) => {}
                Err(CoreError::Invariant(reason)) => {
                    // The engine's own consistency broke outside a store job: latch like the
                    // store guard does, so nothing moves until an operator has looked.
                    tracing::error!(network = %network, outgoing = %id, %reason, "outgoing invariant violated");
                    let ids = custody_core::invariants::LatchIds {
                        audit: new_uuid(self.entropy.as_ref()),
                        alert: new_uuid(self.entropy.as_ref()),
                    };
                    let (why, at) = (
                        format!("outgoing transaction {id}: {reason}"),
                        self.clock.now(),
                    );
                    if let Err(e) = write(self.store.as_ref(), move |tx| {
                        custody_core::invariants::latch(tx, ids, &why, at)
                    })
                    .await
                    {
                        tracing::error!(error = %e, "cannot latch kill_switch.global");
                    }
                }
                // The lease runs out and the transaction is looked at again.
                Err(e) => {
                    tracing::warn!(network = %network, outgoing = %id, error = %e, "outgoing step failed")
                }
            }
        }
        Ok(handled)
    }

    /// One engine step for one transaction: observe, let the engine decide, then either plan
    /// (gathering the facts the plan asks for, one at a time) and act, or settle the record.
    pub async fn step(&self, mut out: OutgoingTx) -> CoreResult<()> {
        // Every stored attempt is looked up, even one a node refused (after a failover a
        // refusal may follow a delivery to another endpoint) or one whose send a crash
        // interrupted before its answer was recorded: what is mined is recorded, whatever the
        // switches say about sending.
        let observation = if !out.attempts.is_empty() {
            Some(self.observe(&out).await?)
        } else {
            None
        };
        out.seen_head = observation.as_ref().map(|o| o.head_number);
        let now = self.clock.now();
        let decision = decide(&out, observation.as_ref(), &self.policy, now);
        let (mut facts, mut asked) = (Facts::default(), Vec::new());
        loop {
            let step = match act::plan(&decision, &out, &facts, &self.policy) {
                None => return self.settle(out, &decision, now).await,
                Some(step) => step.map_err(CoreError::Invariant)?,
            };
            match step {
                Step::Act(plan) => return self.act(out, *plan, now).await,
                // Each fact is gathered once: a plan that asks again would never end.
                Step::Need(need) if asked.contains(&need) => {
                    return Err(CoreError::Invariant(format!(
                        "outgoing transaction {}: the plan asks for {need:?} again",
                        out.id
                    )));
                }
                Step::Need(need) => {
                    self.gather(&out, need, &mut facts).await?;
                    asked.push(need);
                }
            }
        }
    }

    /// Learns what the plan needs next.
    async fn gather(&self, out: &OutgoingTx, need: Need, facts: &mut Facts) -> CoreResult<()> {
        match need {
            Need::Controls => facts.controls = Some(self.may_sign_new(out).await?),
            Need::Predecessor => facts.predecessor = Some(self.predecessor_signed(out).await?),
            Need::SigningLock => facts.signing_lock = Some(self.signs_for(out).await),
            Need::LowerNoncePending => {
                facts.lower_nonce_pending = Some(self.lower_nonce_pending(out).await?);
            }
            Need::FundsBeforeFee => {
                facts.funds_before_fee = Some(self.funds(out, Amount::ZERO).await?);
            }
            Need::FundsWithFee(fee) => {
                facts.funds_with_fee = Some((fee, self.funds(out, fee).await?));
            }
            Need::Price => facts.price = Some(self.price(out).await?),
            Need::FreshPrice => {
                facts.fresh_price = Some(self.sender.price(&out.from, &out.payment).await?);
            }
            Need::VoidPrice => {
                let priced = self.sender.price(&out.from, &out.void_payment()).await;
                facts.void_price = Some(priced.ok().map(|f| f.bid));
            }
            Need::Seed => facts.seed = Some(self.seed_check(out).await?),
        }
        Ok(())
    }

    /// Does what the plan says, after noting its wait (and raising that wait's alert).
    async fn act(&self, mut out: OutgoingTx, plan: Plan, now: Timestamp) -> CoreResult<()> {
        let Plan { action, notice } = plan;
        match action {
            Action::Sign(signing) => {
                self.note(&mut out, notice.as_ref(), now).await?;
                self.sign(out, signing).await
            }
            Action::SignVoid { bid } => {
                self.note(&mut out, notice.as_ref(), now).await?;
                self.void_nonce(out, bid).await
            }
            Action::FailUnsent { reason } => {
                self.note(&mut out, notice.as_ref(), now).await?;
                out.failure_reason = Some(reason.clone());
                out.transition(OutStatus::Failed, reason, now)
                    .map_err(CoreError::Invariant)?;
                self.save(out).await
            }
            wait @ (Action::Resend | Action::CheckLater) => {
                self.hold(
                    out,
                    Plan {
                        action: wait,
                        notice,
                    },
                    now,
                )
                .await
            }
        }
    }

    /// Acts on a plan that signs nothing new: the stored bytes again, or a later look.
    async fn hold(&self, mut out: OutgoingTx, plan: Plan, now: Timestamp) -> CoreResult<()> {
        self.note(&mut out, plan.notice.as_ref(), now).await?;
        match plan.action {
            Action::Resend => self.send_latest(out).await,
            Action::CheckLater => self.check_later(out, now).await,
            other => Err(CoreError::Invariant(format!(
                "outgoing transaction {}: {other:?} is not a wait",
                out.id
            ))),
        }
    }

    /// Applies a decision that signs nothing to the record and saves it.
    async fn settle(
        &self,
        mut out: OutgoingTx,
        decision: &Decision,
        now: Timestamp,
    ) -> CoreResult<()> {
        match decision {
            Decision::Fail { reason } => {
                tracing::warn!(network = %self.network, outgoing = %out.id, %reason, "outgoing transaction failed before inclusion");
            }
            Decision::DoublePayment { hashes, .. } => {
                tracing::error!(network = %self.network, outgoing = %out.id, attempts = ?hashes, "a payment went out more than once");
            }
            _ => {}
        }
        let settled = act::settle(&mut out, decision, &self.policy, now)
            .ok_or_else(|| CoreError::Invariant(format!("{decision:?} cannot be settled")))?
            .map_err(CoreError::Invariant)?;
        self.note(&mut out, settled.notice.as_ref(), now).await?;
        let alert = settled
            .alert
            .map(|draft| draft.open(new_uuid(self.entropy.as_ref()), now));
        let double = settled.double_payment.map(|hashes| {
            let ids = DoublePaymentIds {
                alert: new_uuid(self.entropy.as_ref()),
                latch: custody_core::invariants::LatchIds {
                    audit: new_uuid(self.entropy.as_ref()),
                    alert: new_uuid(self.entropy.as_ref()),
                },
            };
            (ids, hashes)
        });
        self.save_with(out, alert, double).await
    }

    /// Signs a new attempt of the payment (a first one at the nonce its sender's allocator
    /// hands out next), stores it and sends it; a write that refuses it falls back as planned.
    /// Every signature passes here, so this is where a key of a seed this process has not
    /// loaded is refused: a re-priced or replacing attempt signed with the old seed's key would
    /// come from another address. It is checked before a nonce is predicted, so that a payment
    /// that waits never carries a nonce it was not allocated.
    async fn sign(&self, mut out: OutgoingTx, signing: Signing) -> CoreResult<()> {
        if let Err(why) = self.seed_check(&out).await? {
            let plan = act::seed_not_loaded(&out, &why);
            return self.hold(out, plan, self.clock.now()).await;
        }
        let seed = if signing.first {
            self.predict_nonce(&mut out).await?
        } else {
            None
        };
        let dropped = self
            .sign_store_send(out, signing.bid, signing.plan, seed, signing.seen)
            .await?;
        let now = self.clock.now();
        match dropped {
            Dropped::No => Ok(()),
            Dropped::LockLost(out) => {
                let plan = act::lock_lost(&out);
                self.hold(out, plan, now).await
            }
            Dropped::RefusedByControl(out) => match signing.if_refused {
                Fallback::CheckLater => self.check_later(out, now).await,
                Fallback::HeldByControl => {
                    let plan = act::held_by_control(&out);
                    self.hold(out, plan, now).await
                }
            },
        }
    }

    /// What the chain says about every attempt now.
    async fn observe(&self, out: &OutgoingTx) -> CoreResult<Observation> {
        let (head_number, head_time_ms) = self.sender.head().await?;
        // TRON expirations are judged on the block at confirmation depth.
        let final_time_ms = if out.network == Network::Tron {
            let depth = u64::from(self.policy.confirmations.max(1)) - 1;
            match head_number.checked_sub(depth) {
                Some(n) => self.sender.block_time(n).await?,
                None => None,
            }
        } else {
            None
        };
        let mut lookups = Vec::with_capacity(out.attempts.len());
        for a in &out.attempts {
            lookups.push(self.sender.lookup(&a.hash).await?);
        }
        let blocks = self
            .read_blocks(out, head_number, final_time_ms, &lookups)
            .await?;
        let nonce_holder = self.nonce_holder(out).await;
        Ok(Observation {
            head_number,
            head_time_ms,
            final_time_ms,
            lookups,
            blocks,
            nonce_holder,
        })
    }

    /// BSC, a cancel requested of a payment in no block whose nonce a node called used: the
    /// hash of the sender's transaction at that nonce at confirmation depth
    /// (`ChainSender::final_transaction_at_nonce`). Not read otherwise (it costs several
    /// calls); a read that fails is no evidence (the rest of the observation still counts).
    async fn nonce_holder(&self, out: &OutgoingTx) -> Option<String> {
        let nonce = out.nonce?;
        let told_used = out
            .attempts
            .iter()
            .any(|a| a.last_answer == Some(BroadcastOutcome::NonceUsed));
        if out.network != Network::Bsc
            || out.cancel_request().is_none()
            || out.included.is_some()
            || !told_used
        {
            return None;
        }
        match self
            .sender
            .final_transaction_at_nonce(&out.from, nonce, self.policy.confirmations)
            .await
        {
            Ok(holder) => holder,
            Err(e) => {
                tracing::warn!(network = %self.network, outgoing = %out.id, error = %e, "cannot read what took the payment's nonce");
                None
            }
        }
    }

    /// TRON: what blocks read by number say where the lookups by id found nothing: whether
    /// the recorded inclusion's block still lists it, or, once the newest attempt has expired
    /// at the final block, whether the blocks that could include an attempt list one
    /// (`outgoing::blocks`). A read that fails is no evidence: the engine then waits.
    async fn read_blocks(
        &self,
        out: &OutgoingTx,
        head_number: u64,
        final_time_ms: Option<i64>,
        lookups: &[TxLookup],
    ) -> CoreResult<BlockScan> {
        if let Some(rec) = blocks::recorded_to_check(out, lookups) {
            let listing = self.sender.block_listing(rec.block_number).await?;
            if !listing.is_some_and(|l| blocks::still_listed(rec, &l)) {
                return Ok(BlockScan::NotRead);
            }
            let inclusion = self
                .inclusion_in_block(out, &rec.hash, rec.block_number)
                .await;
            return Ok(BlockScan::Listed {
                hash: rec.hash.clone(),
                block_number: rec.block_number,
                inclusion,
            });
        }
        let confirmations = self.policy.confirmations;
        let Some(window) =
            blocks::scan_window(out, head_number, final_time_ms, lookups, confirmations)
        else {
            return Ok(BlockScan::NotRead);
        };
        let mut listings = Vec::new();
        for number in window.from..=window.final_block {
            match self.sender.block_listing(number).await {
                Ok(Some(listing)) => {
                    let end = window.ends_with(&listing);
                    listings.push(listing);
                    if end {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(network = %self.network, outgoing = %out.id, block = number, error = %e, "cannot read a block to prove the attempts absent");
                    return Ok(BlockScan::NotRead);
                }
            }
        }
        let (network, numbers) = (
            self.network,
            listings.iter().map(|l| l.header.number).collect::<Vec<_>>(),
        );
        let recorded = read(self.store.as_ref(), move |tx| {
            let mut recorded = std::collections::BTreeMap::new();
            for &n in &numbers {
                if let Some(hash) = tx.recorded_block_hash(network, n)? {
                    recorded.insert(n, hash);
                }
            }
            Ok(recorded)
        })
        .await?;
        match blocks::assess(&window, &listings, &recorded) {
            BlockScan::Listed {
                hash, block_number, ..
            } => {
                tracing::warn!(network = %self.network, outgoing = %out.id, %hash, block = block_number, "an attempt the lookups do not know is listed in a block");
                let inclusion = self.inclusion_in_block(out, &hash, block_number).await;
                Ok(BlockScan::Listed {
                    hash,
                    block_number,
                    inclusion,
                })
            }
            BlockScan::NotRead => {
                tracing::info!(network = %self.network, outgoing = %out.id, from = window.from, read = listings.len(), "no proof yet that the expired attempts are in no block");
                Ok(BlockScan::NotRead)
            }
            absent => Ok(absent),
        }
    }

    /// `hash`'s inclusion read from block `number`'s contents; `None` (logged) when it cannot
    /// be read now.
    async fn inclusion_in_block(
        &self,
        out: &OutgoingTx,
        hash: &str,
        number: u64,
    ) -> Option<Inclusion> {
        match self.sender.inclusion_in_block(hash, number).await {
            Ok(inclusion) => inclusion,
            Err(e) => {
                tracing::warn!(network = %self.network, outgoing = %out.id, %hash, block = number, error = %e, "cannot read the receipt of an attempt listed in a block");
                None
            }
        }
    }

    /// Whether new money may leave for `out` now (`outgoing::may_sign_new`: its switches, its
    /// network's maintenance, a shortfall control, its user's reorganization debt). The write
    /// that stores a signed attempt checks the same again.
    async fn may_sign_new(&self, out: &OutgoingTx) -> CoreResult<bool> {
        let (purpose, reference, network) = (out.purpose, out.reference_id, out.network);
        read(self.store.as_ref(), move |tx| {
            Ok(custody_core::outgoing::may_sign_new(
                tx, purpose, reference, network,
            )?)
        })
        .await
    }

    /// Whether the transaction `out` must follow (`after`: the approval a swap relies on) has
    /// its nonce, so that `out`'s comes after it; or has ended.
    async fn predecessor_signed(&self, out: &OutgoingTx) -> CoreResult<bool> {
        let Some(before) = out.after else {
            return Ok(true);
        };
        let ready = read(self.store.as_ref(), move |tx| {
            Ok(tx
                .outgoing(before)?
                .is_none_or(|b| b.nonce.is_some() || b.status.is_terminal()))
        })
        .await?;
        Ok(ready)
    }

    /// The node's price of a payment about to be signed; a permanent refusal (a frozen
    /// recipient, a paused token, an estimate that always reverts) is a fact the plan judges,
    /// any other failure ends the step.
    async fn price(&self, out: &OutgoingTx) -> CoreResult<Priced> {
        match self.sender.price(&out.from, &out.payment).await {
            Ok(estimate) => Ok(Priced::Estimate(estimate)),
            Err(e) if e.retry == custody_core::error::Retry::Permanent => {
                tracing::warn!(network = %self.network, outgoing = %out.id, error = %e, "a payment cannot be priced");
                Ok(Priced::Refused(e.message))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Sets `out.nonce` to the nonce its sender's allocator hands out next (EVM) when it has
    /// none yet, and returns the seed of that allocator: the first attempt is signed with it,
    /// and the nonce is allocated in the write that stores that attempt
    /// (`outgoing::record_signed`), so no nonce is ever taken without a stored attempt. The
    /// allocator is seeded from the chain's count of mined transactions the first time a
    /// sender pays. `None`: it keeps its nonce, or the chain has none (TRON).
    async fn predict_nonce(&self, out: &mut OutgoingTx) -> CoreResult<Option<u64>> {
        if out.nonce.is_some() {
            return Ok(None);
        }
        let (network, from) = (out.network, out.from.clone());
        let seeded = read(self.store.as_ref(), move |tx| {
            Ok(tx.next_nonce(network, &from)?)
        })
        .await?;
        let Some(chain) = self.sender.confirmed_nonce(&out.from).await? else {
            return Ok(None);
        };
        let seed = match seeded {
            None => chain,
            Some(next) if chain > next => self.resync_nonce(out, chain).await?.unwrap_or(next),
            Some(next) => next,
        };
        out.nonce = Some(seed);
        Ok(Some(seed))
    }

    /// Moves the sender's nonce allocator forward to the chain's confirmed count `chain`
    /// (`outgoing::resync_nonce`, with its warning): a payment signed at a nonce the chain has
    /// spent would be refused and stuck. Returns where it moved, if it did.
    async fn resync_nonce(&self, out: &OutgoingTx, chain: u64) -> CoreResult<Option<u64>> {
        let (network, from, alert, now) = (
            out.network,
            out.from.clone(),
            new_uuid(self.entropy.as_ref()),
            self.clock.now(),
        );
        let moved = write(self.store.as_ref(), move |tx| {
            custody_core::outgoing::resync_nonce(tx, network, &from, chain, alert, now)
        })
        .await?;
        if let Some(to) = moved {
            tracing::warn!(network = %self.network, from = %out.from, to, "nonce allocator moved forward to the chain's count");
        }
        Ok(moved)
    }

    /// Whether this instance signs new money out of `out`'s sender now (the `Exclusive` lock
    /// of the sender): another instance that holds it does, and this one looks again later.
    /// Only hot wallets are locked: a sweep's sender is a deposit address with one open sweep
    /// at a time (a constraint), and a lock per deposit address would fill the database's
    /// lock table (a held lock is never released).
    async fn signs_for(&self, out: &OutgoingTx) -> bool {
        if out.purpose == Purpose::Sweep {
            return true;
        }
        self.exclusive
            .hold(&format!(
                "sign:{}:{}",
                out.network,
                out.from.to_ascii_lowercase()
            ))
            .await
    }

    /// Builds `payment` from `out`'s sender at its nonce with `bid`, signs it with the sender's
    /// key and adds it to `out` as a new attempt, not yet sent (a cancel's `void` or one of the
    /// payment's own). Returns the attempt's hash and when it was signed.
    async fn sign_attempt(
        &self,
        out: &mut OutgoingTx,
        payment: custody_core::ports::sender::Payment,
        bid: FeeBid,
        plan: Option<ResourcePlan>,
        void: bool,
    ) -> CoreResult<(String, Timestamp)> {
        let request = BuildRequest {
            from: out.from.clone(),
            payment,
            nonce: out.nonce,
            bid,
        };
        let unsigned = self.sender.build(&request).await?;
        let signature = self.signer.sign_digest(&out.from_path, &unsigned.digest)?;
        let signed = self.sender.assemble(&unsigned, &signature)?;
        let now = self.clock.now();
        out.add_attempt(
            Attempt {
                hash: signed.hash.clone(),
                raw: signed.raw,
                bid: bid.into(),
                expires_at_ms: unsigned.expires_at_ms,
                signed_at: now,
                sent_at: None,
                last_answer: None,
                plan,
                reference_block: unsigned.reference_block,
                void,
            },
            now,
        )
        .map_err(CoreError::Invariant)?;
        Ok((signed.hash, now))
    }

    /// BSC, a cancel requested: signs a void of the payment's nonce at `bid` (0 to the sender
    /// itself), stores it and sends it.
    async fn void_nonce(&self, mut out: OutgoingTx, bid: FeeBid) -> CoreResult<()> {
        let payment = out.void_payment();
        let (hash, now) = self
            .sign_attempt(&mut out, payment, bid, None, true)
            .await?;
        tracing::warn!(network = %self.network, outgoing = %out.id, %hash, "cancel: the payment's nonce is voided");
        out.next_check_at = now;
        let stored = out.clone();
        write(self.store.as_ref(), move |tx| {
            Ok(tx.update_outgoing(&stored)?)
        })
        .await?;
        self.send_latest(out).await
    }

    /// Whether a transaction of the same sender with a lower nonce is not in a block yet.
    async fn lower_nonce_pending(&self, out: &OutgoingTx) -> CoreResult<bool> {
        let Some(nonce) = out.nonce else {
            return Ok(false);
        };
        let (network, from) = (out.network, out.from.clone());
        let in_flight = read(self.store.as_ref(), move |tx| {
            Ok(tx.outgoing_in_flight(network, &from)?)
        })
        .await?;
        Ok(in_flight.iter().any(|o| {
            o.id != out.id
                && o.nonce.is_some_and(|n| n < nonce)
                && !matches!(o.status, OutStatus::Included | OutStatus::Final)
        }))
    }

    /// Whether the sender holds what `out` needs at a worst fee of `max_fee_native`, beside
    /// what is already on its way from it (decisions §11).
    async fn funds(&self, out: &OutgoingTx, max_fee_native: Amount) -> CoreResult<Funds> {
        let contract = out.payment.spends().token.map(|(c, _)| c);
        let (native, token) = self.sender.balances(&out.from, contract).await?;
        let (network, from) = (out.network, out.from.clone());
        let in_flight = read(self.store.as_ref(), move |tx| {
            Ok(tx.outgoing_in_flight(network, &from)?)
        })
        .await?;
        Ok(
            match shortfall(
                &out.payment,
                max_fee_native,
                Holdings { native, token },
                &in_flight,
                out.id,
            ) {
                Some(why) => Funds::Short(why),
                None => Funds::Covered(FundsSeen::of(&in_flight, out.id)),
            },
        )
    }

    /// Builds and signs a new attempt, stores it with the plan it was priced with (TRON), and
    /// only then sends it. A dropped attempt was not stored, sent or allocated, and comes back
    /// as it was before signing (no predicted nonce).
    async fn sign_store_send(
        &self,
        mut out: OutgoingTx,
        bid: FeeBid,
        plan: Option<ResourcePlan>,
        first_nonce_seed: Option<u64>,
        funds_seen: FundsSeen,
    ) -> CoreResult<Dropped> {
        let mut unsigned_copy = out.clone();
        if first_nonce_seed.is_some() {
            // Only predicted: the allocation is part of the write that was refused.
            unsigned_copy.nonce = None;
        }
        let payment = out.payment.clone();
        let (_, now) = self
            .sign_attempt(&mut out, payment, bid, plan, false)
            .await?;
        out.next_check_at = now;
        if !self.signs_for(&out).await {
            // Another instance took the sender's signing over while this one priced and
            // signed: its funds check did not see this payment. Dropped unsent.
            tracing::warn!(network = %self.network, outgoing = %out.id, "lost the sender's signing lock: dropped unsent");
            return Ok(Dropped::LockLost(unsigned_copy));
        }
        let stored = out.clone();
        // A sweep's sender is a deposit address with one open sweep at a time: nothing to fence.
        let seen = (out.purpose != Purpose::Sweep).then_some(funds_seen);
        let recorded = write(self.store.as_ref(), move |tx| {
            custody_core::outgoing::record_signed(tx, &stored, first_nonce_seed, seen.as_ref())
        })
        .await?;
        match recorded {
            Recorded::Stored => {
                self.send_latest(out).await?;
                Ok(Dropped::No)
            }
            Recorded::Refused => {
                tracing::warn!(network = %self.network, outgoing = %out.id, "a control turned on while it was signed: dropped unsent");
                Ok(Dropped::RefusedByControl(unsigned_copy))
            }
            Recorded::FundsChanged => {
                // Not a control: no alert; its funds are checked again at the next look.
                tracing::warn!(network = %self.network, outgoing = %out.id, "another payment of the sender was signed since its funds check: dropped unsent");
                let now = self.clock.now();
                self.check_later(unsigned_copy, now).await?;
                Ok(Dropped::No)
            }
        }
    }

    /// Sends the newest attempt's stored bytes and records the answer.
    async fn send_latest(&self, mut out: OutgoingTx) -> CoreResult<()> {
        let latest = out
            .latest()
            .ok_or_else(|| CoreError::Invariant("nothing signed to send".into()))?;
        let signed = custody_core::ports::sender::SignedTx {
            hash: latest.hash.clone(),
            raw: latest.raw.clone(),
        };
        let outcome = self.sender.broadcast(&signed).await;
        if let BroadcastOutcome::Rejected(reason) = &outcome {
            // Nothing was sent; looked at again later (a hot wallet that gets funded, a node
            // that recovers): the same bytes go out again then, or a re-priced attempt.
            tracing::warn!(network = %self.network, outgoing = %out.id, %reason, "broadcast refused");
        }
        let now = self.clock.now();
        let notice = act::record_answer(&mut out, outcome, &self.policy, now)
            .map_err(CoreError::Invariant)?;
        self.note(&mut out, notice.as_ref(), now).await?;
        self.save(out).await
    }

    /// Whether this process holds the seed that derives `out`'s sender (a seed imported by a
    /// wallet migration after it started does not); `Err` in the answer: why not.
    async fn seed_check(&self, out: &OutgoingTx) -> CoreResult<Result<(), String>> {
        let (signer, account) = (Arc::clone(&self.signer), out.from_path.account);
        let checked = read(self.store.as_ref(), move |tx| {
            custody_core::wallet::seeds::check_seed_loaded(tx, signer.as_ref(), account)
        })
        .await;
        match checked {
            Ok(()) => Ok(Ok(())),
            Err(CoreError::Refused(r)) => {
                tracing::warn!(network = %self.network, outgoing = %out.id, reason = %r.message, "not signed");
                Ok(Err(r.message))
            }
            Err(e) => Err(e),
        }
    }

    /// Notes `notice`'s wait in `out`'s history and raises its alert.
    async fn note(
        &self,
        out: &mut OutgoingTx,
        notice: Option<&Notice>,
        now: Timestamp,
    ) -> CoreResult<()> {
        let Some(notice) = notice else {
            return Ok(());
        };
        tracing::warn!(network = %self.network, outgoing = %out.id, wait = ?notice.wait, message = %notice.alert.message, "outgoing transaction waits");
        let alert = notice.alert.open(new_uuid(self.entropy.as_ref()), now);
        write(self.store.as_ref(), move |tx| Ok(tx.raise_alert(&alert)?)).await?;
        out.note_wait(notice.wait, &notice.more, now);
        Ok(())
    }

    async fn check_later(&self, mut out: OutgoingTx, now: Timestamp) -> CoreResult<()> {
        out.next_check_at = now.plus_millis(self.policy.rebroadcast_after_ms);
        self.save(out).await
    }

    /// Records `out` and, in the same transaction, what its move means for the record it pays
    /// (a withdrawal or a swap broadcasted, confirmed or failed; an approval that failed).
    async fn save(&self, out: OutgoingTx) -> CoreResult<()> {
        self.save_with(out, None, None).await
    }

    /// [`Self::save`], with `alert` raised and a double payment of attempts `double.1`
    /// recorded (its alert, and `kill_switch.global` latched) in the same transaction.
    async fn save_with(
        &self,
        out: OutgoingTx,
        alert: Option<Alert>,
        double: Option<(DoublePaymentIds, Vec<String>)>,
    ) -> CoreResult<()> {
        let (entropy, native, depth, now) = (
            Arc::clone(&self.entropy),
            self.native.clone(),
            self.policy.confirmations,
            self.clock.now(),
        );
        write(self.store.as_ref(), move |tx| {
            // Fenced by the lease it was claimed under, which this step's last write ends.
            tx.update_outgoing(&out)?;
            if let Some(lease) = out.lease {
                tx.release_outgoing(out.id, lease)?;
            }
            if let Some(alert) = &alert {
                tx.raise_alert(alert)?;
            }
            if let Some((ids, hashes)) = &double {
                custody_core::outgoing::record_double_payment(tx, *ids, &out, hashes, now)?;
            }
            custody_core::moves::on_move(tx, entropy.as_ref(), &out, &native, depth, now)
        })
        .await
    }
}

/// Why a signed attempt was not stored.
enum Dropped {
    /// It was stored and sent, or it waits for its funds to be checked again.
    No,
    /// A control turned on since the plan read them (`outgoing::record_signed`).
    RefusedByControl(OutgoingTx),
    /// Another instance took the sender's signing lock.
    LockLost(OutgoingTx),
}

#[cfg(test)]
mod tests;
