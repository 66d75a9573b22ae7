//! The broadcaster of one network: a thin loop over the outgoing-transaction engine
//! (`custody_core::outgoing`). Each round it leases the transactions due, asks the chain about
//! their attempts, lets `outgoing::decide` choose the next step, does the I/O, and records the
//! result. The order that keeps money from going out twice:
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
use custody_core::outgoing::funds::{shortfall, FundsSeen, Holdings};
use custody_core::outgoing::{
    blocks, decide, repriced, Attempt, BlockScan, Decision, DoublePaymentIds, EnginePolicy,
    Included, Observation, OutStatus, OutgoingTx, Purpose, Recorded, Wait, DOUBLE_PAYMENT_NOTE,
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

/// A payment whose attempt the node has refused for this many `replace_after` periods raises
/// an `outgoing_stuck` alert: re-pricing did not cure it, an operator should look.
const REFUSED_ALERT_AFTER_REPLACES: i64 = 10;

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

    /// One engine step for one transaction.
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
        match decide(&out, observation.as_ref(), &self.policy, now) {
            Decision::FirstAttempt => {
                if !self.may_sign_new(&out).await?
                    || !self.predecessor_signed(&out).await?
                    || !self.signs_for(&out).await
                {
                    return self.check_later(out, now).await;
                }
                // What the payment moves first: a token payment the wallet cannot cover cannot
                // even be priced (the node's estimate reverts), and must still raise the alert.
                if self.can_fund(&mut out, Amount::ZERO, now).await?.is_none() {
                    return self.unfunded(out, now).await;
                }
                let Some(estimate) = self.price_or_wait(&mut out, now).await? else {
                    return self.check_later(out, now).await;
                };
                if !self.seed_loaded(&mut out, now).await? {
                    return self.check_later(out, now).await;
                }
                let fee = fee_to_hold(&out, &estimate);
                let Some(seen) = self.can_fund(&mut out, fee, now).await? else {
                    return self.unfunded(out, now).await;
                };
                let seed = self.predict_nonce(&mut out).await?;
                match self
                    .sign_store_send(out, estimate.bid, estimate.plan, seed, seen)
                    .await?
                {
                    None => Ok(()),
                    Some(out) => self.check_later(out, self.clock.now()).await,
                }
            }
            Decision::Reprice => {
                if !self.may_sign_new(&out).await? {
                    return self.held_by_control(out, now).await;
                }
                if !self.signs_for(&out).await {
                    return self.check_later(out, now).await;
                }
                if self.lower_nonce_pending(&out).await? {
                    // Nothing of ours below it is in a block yet: no price makes it minable
                    // before those are, so no new signature is worth its fee.
                    return self.send_latest(out).await;
                }
                let refused = out
                    .latest()
                    .map(|a| a.bid)
                    .ok_or_else(|| CoreError::Invariant("reprice without an attempt".into()))?;
                let fresh = self.sender.price(&out.from, &out.payment).await?;
                let Some(bid) = repriced(refused, fresh.bid, &self.policy) else {
                    return self.send_latest(out).await;
                };
                let Some(seen) = self.can_fund(&mut out, max_fee(bid), now).await? else {
                    return self.check_later(out, now).await;
                };
                match self
                    .sign_store_send(out, bid, fresh.plan, None, seen)
                    .await?
                {
                    None => Ok(()),
                    Some(out) => self.held_by_control(out, self.clock.now()).await,
                }
            }
            Decision::Replace { bid } => {
                // A replacement is a new signature: not while the switches are on, nor while a
                // lower nonce of the sender is still out of a block (it is what holds this one
                // back, not the price). The bytes already out there are sent again instead.
                if !self.may_sign_new(&out).await?
                    || self.lower_nonce_pending(&out).await?
                    || !self.signs_for(&out).await
                {
                    return self.send_latest(out).await;
                }
                let Some(seen) = self.can_fund(&mut out, max_fee(bid), now).await? else {
                    // The earlier attempt stays out there; send it again rather than nothing.
                    return self.send_latest(out).await;
                };
                // A replacement's bid comes from the engine; no plan priced it.
                match self.sign_store_send(out, bid, None, None, seen).await? {
                    None => Ok(()),
                    Some(out) => self.held_by_control(out, self.clock.now()).await,
                }
            }
            Decision::Rebuild => {
                if !self.may_sign_new(&out).await? || !self.signs_for(&out).await {
                    return self.check_later(out, now).await;
                }
                // A new TRON transaction: priced afresh (bandwidth, activation, energy), as the
                // first one was.
                if self.can_fund(&mut out, Amount::ZERO, now).await?.is_none() {
                    return self.unfunded(out, now).await;
                }
                let Some(estimate) = self.price_or_wait(&mut out, now).await? else {
                    return self.check_later(out, now).await;
                };
                if !self.seed_loaded(&mut out, now).await? {
                    return self.check_later(out, now).await;
                }
                let fee = fee_to_hold(&out, &estimate);
                let Some(seen) = self.can_fund(&mut out, fee, now).await? else {
                    return self.unfunded(out, now).await;
                };
                match self
                    .sign_store_send(out, estimate.bid, estimate.plan, None, seen)
                    .await?
                {
                    None => Ok(()),
                    Some(out) => self.check_later(out, self.clock.now()).await,
                }
            }
            Decision::Void { bid } => self.void_nonce(out, bid).await,
            Decision::Broadcast => {
                // Money that never left (signed, then refused or interrupted) leaves only if it
                // still may: a switch turned on since, or a debt of the user, stops it here.
                // A cancel's void moves no money: no switch holds it (it frees the nonce).
                let never_sent = out.attempts.iter().all(|a| a.sent_at.is_none());
                let void = out.latest().is_some_and(|a| a.void);
                if never_sent && !void && !self.may_sign_new(&out).await? {
                    return self.held_by_control(out, now).await;
                }
                self.send_latest(out).await
            }
            Decision::Included { hash, inclusion } => {
                let detail = format!("{hash} in block {}", inclusion.block_number);
                self.record_inclusion(&mut out, &hash, &inclusion, detail, now)?;
                self.save(out).await
            }
            Decision::IncludedUnknownToLookups { hash, inclusion } => {
                let detail = format!(
                    "{hash} in block {} (listed in the block; the lookups by id do not know it)",
                    inclusion.block_number
                );
                self.record_inclusion(&mut out, &hash, &inclusion, detail, now)?;
                let alert = Alert::open(
                    new_uuid(self.entropy.as_ref()),
                    "node_inconsistent",
                    "warning",
                    format!(
                        "{} outgoing transaction {}: attempt {hash} is listed in block {} but \
                         the node's lookups by id do not know it (a lagging or lying endpoint); \
                         recorded as included from the block",
                        self.network, out.id, inclusion.block_number
                    ),
                    Some(("outgoing_transaction", out.id)),
                    now,
                );
                self.save_with(out, Some(alert), None).await
            }
            Decision::DoublePayment {
                hash,
                inclusion,
                hashes,
            } => {
                tracing::error!(network = %self.network, outgoing = %out.id, attempts = ?hashes, "a payment went out more than once");
                let detail = format!(
                    "{DOUBLE_PAYMENT_NOTE} attempts {} are all in blocks; {hash} in block {}",
                    hashes.join(", "),
                    inclusion.block_number
                );
                self.record_inclusion(&mut out, &hash, &inclusion, detail, now)?;
                let ids = DoublePaymentIds {
                    alert: new_uuid(self.entropy.as_ref()),
                    latch: custody_core::invariants::LatchIds {
                        audit: new_uuid(self.entropy.as_ref()),
                        alert: new_uuid(self.entropy.as_ref()),
                    },
                };
                self.save_with(out, None, Some((ids, hashes))).await
            }
            Decision::Reorged => {
                out.included = None;
                out.transition(OutStatus::Sent, "its block left the chain", now)
                    .map_err(CoreError::Invariant)?;
                out.next_check_at = now;
                self.save(out).await
            }
            Decision::Final => {
                let succeeded = out.included.as_ref().is_some_and(|i| i.succeeded);
                let (status, detail) = if succeeded {
                    (OutStatus::Final, "final")
                } else {
                    (OutStatus::Failed, "final with a failed receipt")
                };
                if !succeeded {
                    out.failure_reason = Some("the transaction failed on chain".into());
                }
                out.transition(status, detail, now)
                    .map_err(CoreError::Invariant)?;
                self.save(out).await
            }
            Decision::Fail { reason } => {
                tracing::warn!(network = %self.network, outgoing = %out.id, %reason, "outgoing transaction failed before inclusion");
                out.failure_reason = Some(reason.clone());
                out.transition(OutStatus::Failed, reason, now)
                    .map_err(CoreError::Invariant)?;
                self.save(out).await
            }
            Decision::Stuck { reason } => self.stuck(out, reason, now).await,
            Decision::Wait { until } => {
                out.next_check_at = until;
                self.save(out).await
            }
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

    /// Records attempt `hash` as included (`detail` in the history).
    fn record_inclusion(
        &self,
        out: &mut OutgoingTx,
        hash: &str,
        inclusion: &Inclusion,
        detail: String,
        now: Timestamp,
    ) -> CoreResult<()> {
        out.included = Some(Included::new(hash, inclusion));
        out.transition(OutStatus::Included, detail, now)
            .map_err(CoreError::Invariant)?;
        out.next_check_at = now.plus_millis(self.policy.check_every_ms);
        Ok(())
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

    /// Prices a payment about to be signed. A permanent refusal (a frozen recipient, a paused
    /// token, an estimate that always reverts) is not retried in silence: one `outgoing_stuck`
    /// alert and a note in the history, and the payment waits for an operator (nothing was
    /// signed, no nonce is held). `None` when it must wait.
    async fn price_or_wait(
        &self,
        out: &mut OutgoingTx,
        now: Timestamp,
    ) -> CoreResult<Option<custody_core::ports::sender::FeeEstimate>> {
        let e = match self.sender.price(&out.from, &out.payment).await {
            Ok(estimate) => return Ok(Some(estimate)),
            Err(e) if e.retry == custody_core::error::Retry::Permanent => e,
            Err(e) => return Err(e.into()),
        };
        tracing::warn!(network = %self.network, outgoing = %out.id, error = %e, "a payment cannot be priced");
        if out.last_wait() != Some(Wait::CannotPrice) {
            let message = format!(
                "{} outgoing transaction {} ({} {}) cannot be priced: {}; it waits for an operator",
                self.network,
                out.id,
                out.purpose.as_str(),
                out.reference_id,
                e.message
            );
            let more = format!(": {}", e.message);
            self.stuck_alert(out, message, Wait::CannotPrice, &more, now)
                .await?;
        }
        Ok(None)
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

    /// BSC, a cancel requested: signs and sends a void of the payment's nonce (0 to the sender
    /// itself) at no less than `minimum`, raised to the node's price where that is higher. No
    /// switch stops it (it moves no money; it frees the nonce the sender's later payments
    /// wait behind), nor is it checked against the wallet's funds beyond what the node
    /// checks: a refusal is sent again and re-priced like any attempt.
    async fn void_nonce(&self, mut out: OutgoingTx, minimum: FeeBid) -> CoreResult<()> {
        let now = self.clock.now();
        if !self.seed_loaded(&mut out, now).await? {
            return self.check_later(out, now).await;
        }
        let payment = out.void_payment();
        let fresh = self.sender.price(&out.from, &payment).await.ok();
        let bid = custody_core::outgoing::void_priced(minimum, fresh.map(|f| f.bid), &self.policy);
        if out.attempts.iter().any(|a| a.void && a.bid == bid.into()) {
            // The same void again (it was refused, and nothing prices a new one higher; voids
            // only rise, so it is the newest): its bytes go out once more, as a new signature
            // would give the same transaction.
            return self.send_latest(out).await;
        }
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

    /// Whether the hot wallet holds what `out` needs at a worst fee of `max_fee_native`, beside
    /// what is already on its way from it (decisions §11). When it does not: a
    /// `hot_wallet_insufficient` alert (once per wait) and a note in the history; nothing is
    /// signed, and the payment's record stays as it is until the wallet is funded.
    async fn can_fund(
        &self,
        out: &mut OutgoingTx,
        max_fee_native: Amount,
        now: Timestamp,
    ) -> CoreResult<Option<FundsSeen>> {
        let contract = out.payment.spends().token.map(|(c, _)| c);
        let (native, token) = self.sender.balances(&out.from, contract).await?;
        let (network, from) = (out.network, out.from.clone());
        let in_flight = read(self.store.as_ref(), move |tx| {
            Ok(tx.outgoing_in_flight(network, &from)?)
        })
        .await?;
        let Some(why) = shortfall(
            &out.payment,
            max_fee_native,
            Holdings { native, token },
            &in_flight,
            out.id,
        ) else {
            return Ok(Some(FundsSeen::of(&in_flight, out.id)));
        };
        // A sweep's sender is a deposit address, not a hot wallet: it fails and is planned
        // again (`unfunded`), nobody needs to fund it.
        if out.purpose != Purpose::Sweep && out.last_wait() != Some(Wait::HotWalletShort) {
            tracing::warn!(network = %self.network, outgoing = %out.id, %why, "hot wallet cannot fund a payment");
            let (id, reference) = (new_uuid(self.entropy.as_ref()), out.reference_id);
            let (kind, purpose) = (out.purpose.as_str(), out.purpose);
            let message = format!(
                "{} hot wallet {} cannot fund {kind} {reference}: {why}; it is sent once the wallet is funded",
                self.network, out.from
            );
            self.alert(
                "hot_wallet_insufficient",
                "warning",
                message,
                (purpose.as_str(), reference),
                id,
                now,
            )
            .await?;
            out.note_wait(Wait::HotWalletShort, &format!(": {why}"), now);
        }
        Ok(None)
    }

    /// Builds and signs a new attempt, stores it with the plan it was priced with (TRON), and
    /// only then sends it. Every signature passes here, so this is where a key of a seed this
    /// process has not loaded is refused (first attempts check it earlier too, before a nonce
    /// is predicted): a re-priced or replacing attempt signed with the old seed's key would
    /// come from another address. `Some(out)`: a control turned on since the caller's
    /// [`Self::may_sign_new`] refused the attempt in the write that would have stored it
    /// (`outgoing::record_signed`); nothing was stored, sent or allocated, and `out` is as it
    /// was before signing (no predicted nonce), for the caller to hold back as a refusal read
    /// before pricing.
    async fn sign_store_send(
        &self,
        mut out: OutgoingTx,
        bid: FeeBid,
        plan: Option<ResourcePlan>,
        first_nonce_seed: Option<u64>,
        funds_seen: FundsSeen,
    ) -> CoreResult<Option<OutgoingTx>> {
        let checked_at = self.clock.now();
        if !self.seed_loaded(&mut out, checked_at).await? {
            self.check_later(out, checked_at).await?;
            return Ok(None);
        }
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
            return Ok(Some(unsigned_copy));
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
                Ok(None)
            }
            Recorded::Refused => {
                tracing::warn!(network = %self.network, outgoing = %out.id, "a control turned on while it was signed: dropped unsent");
                Ok(Some(unsigned_copy))
            }
            Recorded::FundsChanged => {
                // Not a control: no alert; its funds are checked again at the next look.
                tracing::warn!(network = %self.network, outgoing = %out.id, "another payment of the sender was signed since its funds check: dropped unsent");
                let now = self.clock.now();
                self.check_later(unsigned_copy, now).await?;
                Ok(None)
            }
        }
    }

    /// A payment a control holds back (decisions §11): what never left stays (a payment that
    /// holds its nonce meanwhile raises one `outgoing_stuck` alert, since the sender's later
    /// payments wait behind it); bytes that already went out are sent again, never new ones.
    async fn held_by_control(&self, mut out: OutgoingTx, now: Timestamp) -> CoreResult<()> {
        let never_sent = out.attempts.iter().all(|a| a.sent_at.is_none());
        if !never_sent {
            return self.send_latest(out).await;
        }
        if out.nonce.is_some() && out.last_wait() != Some(Wait::HoldsNonce) {
            self.alert_held_nonce(&mut out, now).await?;
        }
        self.check_later(out, now).await
    }

    /// Sends the newest attempt's stored bytes and records the answer.
    async fn send_latest(&self, mut out: OutgoingTx) -> CoreResult<()> {
        let latest = out
            .latest()
            .cloned()
            .ok_or_else(|| CoreError::Invariant("nothing signed to send".into()))?;
        let outcome = self
            .sender
            .broadcast(&custody_core::ports::sender::SignedTx {
                hash: latest.hash.clone(),
                raw: latest.raw.clone(),
            })
            .await;
        let now = self.clock.now();
        let label = outcome.to_string();
        let sent = !matches!(outcome, BroadcastOutcome::Rejected(_));
        let refused_before = latest.sent_at.is_none()
            && latest
                .last_answer
                .as_ref()
                .is_some_and(|a| a.refusal().is_some());
        if refused_before && outcome == BroadcastOutcome::Expired {
            // Bytes the node refused never were in a pool: "expired" says nothing new, and
            // the refusal stays the answer the engine judges them by (a shortage waits, a
            // refusal that funds cannot cure fails).
            out.next_check_at = now.plus_millis(self.policy.rebroadcast_after_ms);
            return self.save(out).await;
        }
        if let Some(a) = out.attempts.last_mut() {
            a.last_answer = Some(outcome.clone());
            if sent {
                // Accepted, unknown or any answer that keeps it alive: it may be in a pool.
                a.sent_at = Some(now);
            }
        }
        if let BroadcastOutcome::Rejected(reason) = &outcome {
            tracing::warn!(network = %self.network, outgoing = %out.id, %reason, "broadcast refused");
            // Nothing was sent; look again later (a hot wallet that gets funded, a node that
            // recovers). The same bytes go out again then, or a re-priced attempt.
            let refused_for = now
                .unix_millis()
                .saturating_sub(latest.signed_at.unix_millis());
            let long = self
                .policy
                .replace_after_ms
                .saturating_mul(REFUSED_ALERT_AFTER_REPLACES);
            if refused_for >= long && !out.ever_waited(Wait::RefusedLong) {
                self.alert_refused(&mut out, reason, now).await?;
            }
            out.next_check_at = now.plus_millis(self.policy.rebroadcast_after_ms);
            return self.save(out).await;
        }
        if out.status == OutStatus::Signed {
            out.transition(OutStatus::Sent, label, now)
                .map_err(CoreError::Invariant)?;
        }
        out.next_check_at = now.plus_millis(self.policy.check_every_ms);
        self.save(out).await
    }

    /// One `outgoing_stuck` alert for a payment signed under nonce N that may not go out now (a
    /// switch, a shortfall control of its asset, its user's reorganization debt): every later
    /// payment of the same sender waits behind it until it may, so an operator must know which
    /// one holds them.
    async fn alert_held_nonce(&self, out: &mut OutgoingTx, now: Timestamp) -> CoreResult<()> {
        let nonce = out.nonce.unwrap_or_default();
        let message = format!(
            "{} outgoing transaction {} ({} {}) is signed under nonce {nonce} of {} but may not \
             be sent now: later payments of that wallet wait behind it until the control or \
             debt that holds it is lifted",
            self.network,
            out.id,
            out.purpose.as_str(),
            out.reference_id,
            out.from
        );
        let more = format!(" (nonce {nonce})");
        self.stuck_alert(out, message, Wait::HoldsNonce, &more, now)
            .await
    }

    /// One `outgoing_stuck` alert for an attempt the node keeps refusing; sending goes on.
    async fn alert_refused(
        &self,
        out: &mut OutgoingTx,
        reason: &str,
        now: Timestamp,
    ) -> CoreResult<()> {
        let latest = out.latest().map(|a| a.hash.clone()).unwrap_or_default();
        let message = format!(
            "{} outgoing transaction {}: the node has refused attempt {latest} since it was signed: {reason}",
            self.network, out.id
        );
        let more = format!(" ({latest}): {reason}");
        self.stuck_alert(out, message, Wait::RefusedLong, &more, now)
            .await
    }

    /// Whether this process holds the seed that derives `out`'s sender (a seed imported by a
    /// wallet migration after it started does not): signing with another seed's key would
    /// send from an address that is not the sender, and on BSC spend its nonce for nothing.
    /// Otherwise one `outgoing_stuck` alert, and it waits for a restart.
    async fn seed_loaded(&self, out: &mut OutgoingTx, now: Timestamp) -> CoreResult<bool> {
        let (signer, account) = (Arc::clone(&self.signer), out.from_path.account);
        let checked = read(self.store.as_ref(), move |tx| {
            custody_core::wallet::seeds::check_seed_loaded(tx, signer.as_ref(), account)
        })
        .await;
        match checked {
            Ok(()) => Ok(true),
            Err(CoreError::Refused(r)) => {
                tracing::warn!(network = %self.network, outgoing = %out.id, reason = %r.message, "not signed");
                if out.last_wait() != Some(Wait::SeedNotLoaded) {
                    let message = format!(
                        "{} outgoing transaction {} is not signed: {}",
                        self.network, out.id, r.message
                    );
                    let more = format!(": {}", r.message);
                    self.stuck_alert(out, message, Wait::SeedNotLoaded, &more, now)
                        .await?;
                }
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// One critical `outgoing_stuck` alert about `out` and the history step that records the
    /// wait it is raised for (so the next rounds of the same wait raise none).
    async fn stuck_alert(
        &self,
        out: &mut OutgoingTx,
        message: String,
        wait: Wait,
        more: &str,
        now: Timestamp,
    ) -> CoreResult<()> {
        let id = new_uuid(self.entropy.as_ref());
        self.alert(
            "outgoing_stuck",
            "critical",
            message,
            ("outgoing_transaction", out.id),
            id,
            now,
        )
        .await?;
        out.note_wait(wait, more, now);
        Ok(())
    }

    /// Records one alert about `reference` (its type and id).
    async fn alert(
        &self,
        kind: &'static str,
        severity: &'static str,
        message: String,
        reference: (&'static str, uuid::Uuid),
        id: uuid::Uuid,
        now: Timestamp,
    ) -> CoreResult<()> {
        write(self.store.as_ref(), move |tx| {
            Ok(tx.raise_alert(&Alert::open(
                id,
                kind,
                severity,
                message.clone(),
                Some(reference),
                now,
            ))?)
        })
        .await
    }

    async fn stuck(&self, mut out: OutgoingTx, reason: String, now: Timestamp) -> CoreResult<()> {
        let first_time = out.last_wait() != Some(Wait::Stuck);
        if first_time {
            let (id, message, reference) = (
                new_uuid(self.entropy.as_ref()),
                format!("{} outgoing transaction {}: {reason}", self.network, out.id),
                out.id,
            );
            self.alert(
                "outgoing_stuck",
                "critical",
                message,
                ("outgoing_transaction", reference),
                id,
                now,
            )
            .await?;
            out.note_wait(Wait::Stuck, &format!(" {reason}"), now);
        }
        out.next_check_at = now.plus_millis(self.policy.replace_after_ms);
        self.save(out).await
    }

    /// A first attempt the sender cannot fund. A hot wallet waits to be funded; a sweep's
    /// deposit address no longer holds what its plan assumed (the fee rose since): nothing was
    /// signed, so it fails now and the sweeper plans afresh.
    async fn unfunded(&self, mut out: OutgoingTx, now: Timestamp) -> CoreResult<()> {
        // Only what holds no nonce may fail unsent (a failure must leave no gap).
        if out.purpose != Purpose::Sweep || out.nonce.is_some() {
            return self.check_later(out, now).await;
        }
        let reason = "the address no longer covers the planned sweep and its fee".to_owned();
        out.failure_reason = Some(reason.clone());
        out.transition(OutStatus::Failed, reason, now)
            .map_err(CoreError::Invariant)?;
        self.save(out).await
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

/// What the sender must hold for the fee: the worst the payment may burn; for a native sweep,
/// the fee its plan left behind (it sends everything else, and its fee is exact). A token
/// sweep holds the worst too: short of it, the node refuses it (EVM) or it runs out of energy
/// and burns what it has (TRON). On TRON a sweep counts the address's own bandwidth and energy
/// (energy a treasury delegation lent it included): only its own transactions spend them, one
/// sweep at a time, so they are still there when it executes.
fn fee_to_hold(out: &OutgoingTx, estimate: &custody_core::ports::sender::FeeEstimate) -> Amount {
    if out.purpose == Purpose::Sweep {
        if let Some(plan) = &estimate.plan {
            return Amount::from_units(u128::from(plan.max_burn_keeping_resources_sun()));
        }
    }
    let native_sweep = out.purpose == Purpose::Sweep
        && matches!(
            out.payment,
            custody_core::ports::sender::Payment::Native { .. }
        );
    if native_sweep {
        estimate.expected_native
    } else {
        estimate.max_native
    }
}

/// The most a bid may burn.
fn max_fee(bid: FeeBid) -> Amount {
    Amount::from_units(match bid {
        FeeBid::Gas {
            gas_limit,
            gas_price_wei,
        } => u128::from(gas_limit).saturating_mul(gas_price_wei),
        FeeBid::FeeLimit { sun } => u128::from(sun),
    })
}

#[cfg(test)]
mod tests;
