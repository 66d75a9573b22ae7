//! The engine against a model chain. A pure simulation drives one payment through `decide`
//! exactly the way `custody-cli`'s broadcaster carries decisions out (sign and store before
//! sending, `send_latest` only ever sends the newest attempt, a refusal keeps `sent_at` empty
//! with a `rejected: ...` answer, `NonceUsed`/`Expired`/`Underpriced` answers keep it alive),
//! while random chain events happen: time passing, blocks (with or without the pooled
//! transactions), the queried node dropping its pool (the network's producers may keep it),
//! answers lost while the bytes still reach the pools, refusals (also after the bytes reached
//! the pools), reorganizations of the last blocks (shallower than the confirmation depth) and,
//! on BSC, the market price moving, and an endpoint whose lookups by id hide transactions
//! that are in blocks (a lagging backend, or a liar) while its blocks list them.
//!
//! Model chain rules. BSC: one nonce; at most one transaction of it is ever on chain; a block
//! takes the highest pooled bid that is at least the market price; a node refuses a bid below
//! the market (`rejected: transaction underpriced`), answers `NonceUsed` once the nonce is on
//! chain and `Underpriced` to a replacement bidding less than 10 % more than what it pools.
//! TRON: a pooled transaction can be included while the head block's time is at or before its
//! expiration; two different TRON transactions are both includable (a double payment).

use std::collections::BTreeSet;

use proptest::prelude::*;
use uuid::Uuid;

use crate::amount::Amount;
use crate::network::Network;
use crate::ports::chain::BlockHeader;
use crate::ports::sender::{BlockListing, BroadcastOutcome, FeeBid, Inclusion, Payment, TxLookup};
use crate::ports::signer::HdPath;
use crate::time::Timestamp;

use super::*;

const NONCE: u64 = 7;
const GAS_LIMIT: u64 = 21_000;
const CAP: u128 = 50_000;
const LIFETIME_MS: i64 = 60_000;
const BLOCK_MS: i64 = 3_000;
const FEE_LIMIT: u64 = 1_000;

#[derive(Debug, Clone)]
struct ModelTx {
    hash: String,
    nonce: Option<u64>,
    price: u128,
    expires: Option<i64>,
    /// TRON: the block it references (TaPoS): number and hash. Only a chain that still has
    /// that block there can include it.
    reference: Option<(u64, String)>,
}

#[derive(Debug, Clone)]
struct Block {
    number: u64,
    time: i64,
    hash: String,
    txs: Vec<String>,
}

/// Fault applied to the next broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The answer is lost (`Unknown`); the bytes reach the pools when `reached`.
    Lost { reached: bool },
    /// The node refuses (`Rejected`); after a delivery elsewhere when `reached`.
    Refused { reached: bool },
}

#[derive(Debug, Clone)]
enum Event {
    /// The broadcaster handles the payment (when due); `race`: a block is produced between
    /// its look at the chain and its broadcast.
    Step {
        race: bool,
    },
    /// A block at `now + 3 s`, with the pooled transactions or empty.
    Block {
        include: bool,
    },
    /// Time passes, no block.
    Tick {
        ms: i64,
    },
    /// The queried node forgets its pool; the producers too when `everywhere`.
    Drop {
        everywhere: bool,
    },
    Fault(Fault),
    /// The last `depth` blocks leave the chain; their transactions return to the pools unless
    /// `lose`.
    Reorg {
        depth: u64,
        lose: bool,
    },
    /// BSC: the market price (what nodes and producers take, what the quote says).
    Market {
        price: u128,
    },
    /// Lookups by id answer "unknown" for transactions in blocks (`hide`), or tell the truth.
    Hide {
        hide: bool,
    },
    /// An operator asks to cancel the payment.
    Cancel,
}

struct Chain {
    network: Network,
    blocks: Vec<Block>,
    known: Vec<ModelTx>,
    /// What lookups see.
    node_pool: BTreeSet<String>,
    /// What producers may include.
    net_pool: BTreeSet<String>,
    market: u128,
    block_ids: u64,
    /// Whether producers keep bytes a head has made void (TRON): after a short reorganization
    /// they may include them again. See [`a_short_reorg_after_a_tron_rebuild_does_not_pay_twice`].
    producers_keep_void: bool,
    /// The highest head seen: a reorganization never reaches `confirmations` below it.
    max_head: u64,
    succeeds: bool,
    fault: Option<Fault>,
    /// Lookups by id do not see transactions in blocks (the blocks still list them).
    hide_included: bool,
}

impl Chain {
    fn new(network: Network, market: u128, succeeds: bool) -> Self {
        Chain {
            network,
            blocks: vec![Block {
                number: 100,
                time: 0,
                hash: "genesis".into(),
                txs: Vec::new(),
            }],
            known: Vec::new(),
            node_pool: BTreeSet::new(),
            net_pool: BTreeSet::new(),
            market,
            block_ids: 0,
            max_head: 100,
            producers_keep_void: true,
            succeeds,
            fault: None,
            hide_included: false,
        }
    }

    fn head(&self) -> &Block {
        self.blocks.last().expect("genesis")
    }

    fn tx(&self, hash: &str) -> &ModelTx {
        self.known.iter().find(|t| t.hash == hash).expect("known")
    }

    fn block_of(&self, hash: &str) -> Option<&Block> {
        self.blocks.iter().find(|b| b.txs.iter().any(|h| h == hash))
    }

    fn included(&self) -> Vec<String> {
        self.blocks.iter().flat_map(|b| b.txs.clone()).collect()
    }

    fn nonce_used(&self) -> bool {
        self.included()
            .iter()
            .any(|h| self.tx(h).nonce == Some(NONCE))
    }

    fn expired(&self, t: &ModelTx) -> bool {
        t.expires.is_some_and(|e| self.head().time > e)
    }

    /// Whether a producer could put `hash` in the next block.
    fn includable(&self, hash: &str) -> bool {
        let t = self.tx(hash);
        if self.block_of(hash).is_some() {
            return false;
        }
        match self.network {
            Network::Bsc => !self.nonce_used() && t.price >= self.market,
            Network::Tron => {
                !self.expired(t)
                    && t.reference
                        .as_ref()
                        .is_some_and(|(n, h)| self.by_number(*n).is_some_and(|b| &b.hash == h))
            }
        }
    }

    fn inclusion(&self, b: &Block) -> Inclusion {
        Inclusion {
            block_number: b.number,
            block_hash: b.hash.clone(),
            succeeded: self.succeeds,
            fee_native: Amount::from_units(1),
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
            head_number: None,
        }
    }

    fn lookup(&self, hash: &str) -> TxLookup {
        if let Some(b) = self.block_of(hash) {
            if self.hide_included {
                return TxLookup::Unknown;
            }
            return TxLookup::Included(self.inclusion(b));
        }
        if self.node_pool.contains(hash) {
            TxLookup::Pending
        } else {
            TxLookup::Unknown
        }
    }

    fn observe(&self, tx: &OutgoingTx, confirmations: u32) -> Observation {
        // The block at confirmation depth, as the broadcaster reads it on TRON.
        let depth = usize::try_from(confirmations.max(1) - 1).expect("small");
        let final_time_ms = self
            .blocks
            .len()
            .checked_sub(depth + 1)
            .map(|i| self.blocks[i].time);
        let lookups: Vec<TxLookup> = tx.attempts.iter().map(|a| self.lookup(&a.hash)).collect();
        let blocks = self.read_blocks(tx, final_time_ms, &lookups, confirmations);
        Observation {
            head_number: self.head().number,
            head_time_ms: self.head().time,
            final_time_ms,
            lookups,
            blocks,
            nonce_holder: None,
        }
    }

    fn by_number(&self, number: u64) -> Option<&Block> {
        let i = usize::try_from(number.checked_sub(self.blocks[0].number)?).ok()?;
        self.blocks.get(i)
    }

    /// Block `number` as a node lists it.
    fn listing(&self, number: u64) -> Option<BlockListing> {
        let b = self.by_number(number)?;
        let parent = number
            .checked_sub(1)
            .and_then(|n| self.by_number(n))
            .map_or_else(|| "none".to_owned(), |p| p.hash.clone());
        Some(BlockListing {
            header: BlockHeader {
                number,
                hash: b.hash.clone(),
                parent_hash: parent,
                timestamp_ms: b.time,
            },
            txids: b.txs.clone(),
        })
    }

    /// The blocks the broadcaster reads by number (TRON), as it reads them; the scanner has
    /// recorded every block of the model chain.
    fn read_blocks(
        &self,
        tx: &OutgoingTx,
        final_time_ms: Option<i64>,
        lookups: &[TxLookup],
        confirmations: u32,
    ) -> BlockScan {
        if let Some(rec) = blocks::recorded_to_check(tx, lookups) {
            return match self.listing(rec.block_number) {
                Some(l) if blocks::still_listed(rec, &l) => BlockScan::Listed {
                    hash: rec.hash.clone(),
                    block_number: rec.block_number,
                    inclusion: self.by_number(rec.block_number).map(|b| self.inclusion(b)),
                },
                _ => BlockScan::NotRead,
            };
        }
        let Some(window) = blocks::scan_window(
            tx,
            self.head().number,
            final_time_ms,
            lookups,
            confirmations,
        ) else {
            return BlockScan::NotRead;
        };
        let mut listings = Vec::new();
        for n in window.from..=window.final_block {
            let Some(l) = self.listing(n) else { break };
            let end = window.ends_with(&l);
            listings.push(l);
            if end {
                break;
            }
        }
        let recorded = self
            .blocks
            .iter()
            .map(|b| (b.number, b.hash.clone()))
            .collect();
        match blocks::assess(&window, &listings, &recorded) {
            BlockScan::Listed {
                hash, block_number, ..
            } => BlockScan::Listed {
                inclusion: self.by_number(block_number).map(|b| self.inclusion(b)),
                hash,
                block_number,
            },
            other => other,
        }
    }

    fn produce(&mut self, time: i64, include: bool) {
        let time = time.max(self.head().time + 1);
        let mut txs = Vec::new();
        if include {
            let candidates: Vec<String> = self
                .net_pool
                .iter()
                .filter(|h| self.includable(h))
                .cloned()
                .collect();
            match self.network {
                Network::Bsc => {
                    // The highest bid of the nonce wins.
                    if let Some(best) = candidates.iter().max_by_key(|h| self.tx(h).price) {
                        txs.push(best.clone());
                    }
                }
                Network::Tron => txs = candidates,
            }
        }
        for h in &txs {
            self.net_pool.remove(h);
            self.node_pool.remove(h);
        }
        if self.network == Network::Bsc && !txs.is_empty() {
            // The nonce is spent: every other transaction of it is dead.
            self.net_pool.clear();
            self.node_pool.clear();
        }
        self.block_ids += 1;
        let number = self.head().number + 1;
        self.blocks.push(Block {
            number,
            time,
            hash: format!("{:064x}", self.block_ids),
            txs,
        });
        self.max_head = self.max_head.max(number);
        // A node drops from its pool what the new head has made void (java-tron re-validates
        // its pending transactions); producers elsewhere may still hold the bytes.
        let void: Vec<String> = self
            .node_pool
            .iter()
            .filter(|h| self.expired(self.tx(h)))
            .cloned()
            .collect();
        for h in void {
            self.node_pool.remove(&h);
        }
        if !self.producers_keep_void {
            let void: Vec<String> = self
                .net_pool
                .iter()
                .filter(|h| self.expired(self.tx(h)))
                .cloned()
                .collect();
            for h in void {
                self.net_pool.remove(&h);
            }
        }
    }

    fn reorg(&mut self, depth: u64, lose: bool, confirmations: u32) {
        let floor = self
            .max_head
            .saturating_sub(u64::from(confirmations.saturating_sub(1)));
        for _ in 0..depth {
            if self.blocks.len() <= 1 || self.head().number <= floor {
                return;
            }
            let b = self.blocks.pop().expect("a block");
            if !lose {
                for h in b.txs {
                    self.net_pool.insert(h.clone());
                    self.node_pool.insert(h);
                }
            }
        }
    }

    /// What a node answers to `hash`'s bytes, and what they do to the pools.
    fn deliver(&mut self, hash: &str) -> BroadcastOutcome {
        let t = self.tx(hash).clone();
        match self.network {
            Network::Bsc => {
                if self.nonce_used() {
                    return BroadcastOutcome::NonceUsed;
                }
                if self.node_pool.contains(hash) {
                    self.net_pool.insert(hash.to_owned());
                    return BroadcastOutcome::Accepted;
                }
                if t.price < self.market {
                    return BroadcastOutcome::Rejected("transaction underpriced".into());
                }
                let outbid = self
                    .node_pool
                    .iter()
                    .any(|h| t.price * 100 < self.tx(h).price * 110);
                if outbid {
                    return BroadcastOutcome::Underpriced;
                }
                let known = self.known.clone();
                let beaten = |h: &String| {
                    let p = known.iter().find(|k| &k.hash == h).expect("known").price;
                    t.price * 100 >= p * 110
                };
                self.node_pool.retain(|h| !beaten(h));
                self.net_pool.retain(|h| !beaten(h));
                self.node_pool.insert(hash.to_owned());
                self.net_pool.insert(hash.to_owned());
                BroadcastOutcome::Accepted
            }
            Network::Tron => {
                if self.block_of(hash).is_some() {
                    return BroadcastOutcome::Accepted; // DUP_TRANSACTION_ERROR
                }
                if self.expired(&t) {
                    return BroadcastOutcome::Expired;
                }
                self.node_pool.insert(hash.to_owned());
                self.net_pool.insert(hash.to_owned());
                BroadcastOutcome::Accepted
            }
        }
    }

    fn broadcast(&mut self, hash: &str) -> BroadcastOutcome {
        match self.fault.take() {
            None => self.deliver(hash),
            Some(Fault::Lost { reached }) => {
                if reached {
                    let _ = self.deliver(hash);
                }
                BroadcastOutcome::Unknown("answer lost".into())
            }
            Some(Fault::Refused { reached }) => {
                if reached {
                    let _ = self.deliver(hash);
                }
                BroadcastOutcome::Rejected("refused".into())
            }
        }
    }

    fn quote(&self) -> FeeBid {
        match self.network {
            Network::Bsc => FeeBid::Gas {
                gas_limit: GAS_LIMIT,
                gas_price_wei: self.market,
            },
            Network::Tron => FeeBid::FeeLimit { sun: FEE_LIMIT },
        }
    }
}

/// Which properties a run asserts.
#[derive(Debug, Clone, Copy, Default)]
struct Checks {
    paid_once: bool,
    legal: bool,
    final_depth: bool,
    bids: bool,
    cancel: bool,
}

impl Checks {
    const ALL: Checks = Checks {
        paid_once: true,
        legal: true,
        final_depth: true,
        bids: true,
        cancel: true,
    };
}

struct Sim {
    chain: Chain,
    tx: OutgoingTx,
    policy: EnginePolicy,
    now: i64,
    signed: u64,
    checks: Checks,
    /// `DoublePayment` decisions (each raises the alert and latches the switch).
    double_payments: u32,
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn gas(bid: Bid) -> (u64, u128) {
    match bid {
        Bid::Gas {
            gas_limit,
            gas_price_wei,
        } => (gas_limit, gas_price_wei),
        Bid::FeeLimit { sun } => (0, u128::from(sun)),
    }
}

fn encode(nonce: Option<u64>, bid: FeeBid, serial: u64, expires: Option<i64>) -> Vec<u8> {
    let (limit, price) = gas(bid.into());
    let mut raw = Vec::new();
    raw.extend_from_slice(&nonce.unwrap_or(u64::MAX).to_be_bytes());
    raw.extend_from_slice(&limit.to_be_bytes());
    raw.extend_from_slice(&price.to_be_bytes());
    raw.extend_from_slice(&serial.to_be_bytes());
    raw.extend_from_slice(&expires.unwrap_or(-1).to_be_bytes());
    raw
}

fn raw_nonce(raw: &[u8]) -> u64 {
    u64::from_be_bytes(raw[..8].try_into().expect("8 bytes"))
}

impl Sim {
    fn new(network: Network, policy: EnginePolicy, market: u128, succeeds: bool) -> Self {
        let tx = OutgoingTx::new(
            Uuid::from_u128(1),
            network,
            Purpose::Withdrawal,
            Uuid::from_u128(2),
            "hot".into(),
            HdPath {
                network,
                account: 0,
                index: 0,
            },
            Payment::Native {
                to: "to".into(),
                amount: Amount::from_units(5),
            },
            (network == Network::Bsc).then_some(NONCE),
            at(0),
        );
        Sim {
            chain: Chain::new(network, market, succeeds),
            tx,
            policy,
            now: 0,
            signed: 0,
            checks: Checks::ALL,
            double_payments: 0,
        }
    }

    fn apply(&mut self, e: &Event) -> Result<(), TestCaseError> {
        match *e {
            Event::Step { race } => self.step(race)?,
            Event::Block { include } => {
                self.now += BLOCK_MS;
                self.chain.produce(self.now, include);
            }
            Event::Tick { ms } => self.now += ms,
            Event::Drop { everywhere } => {
                self.chain.node_pool.clear();
                if everywhere {
                    self.chain.net_pool.clear();
                }
            }
            Event::Fault(f) => self.chain.fault = Some(f),
            Event::Reorg { depth, lose } => {
                self.chain.reorg(depth, lose, self.policy.confirmations);
            }
            Event::Market { price } => {
                if self.chain.network == Network::Bsc {
                    self.chain.market = price;
                }
            }
            // The finding is TRON's: on BSC the nonce keeps attempts exclusive.
            Event::Hide { hide } => {
                self.chain.hide_included = hide && self.chain.network == Network::Tron
            }
            Event::Cancel => {
                if !self.tx.status.is_terminal() && self.tx.cancel_request().is_none() {
                    let now = at(self.now);
                    self.tx.note(format!("{CANCEL_NOTE} by ops: test"), now);
                    self.tx.next_check_at = now;
                }
            }
        }
        self.check_paid_once()
    }

    /// Property 1: at no point are two distinct attempts on the model chain.
    fn check_paid_once(&self) -> Result<(), TestCaseError> {
        if self.checks.paid_once {
            let on_chain = self.chain.included();
            prop_assert!(
                on_chain.len() <= 1,
                "paid twice: attempts {:?} are all on chain",
                on_chain
            );
        }
        Ok(())
    }

    /// Whether attempt `hash` could still be included without the engine sending anything.
    fn could_be_included(&self, hash: &str) -> bool {
        self.chain.block_of(hash).is_some()
            || ((self.chain.net_pool.contains(hash) || self.chain.node_pool.contains(hash))
                && self.chain.includable(hash))
    }

    fn step(&mut self, race: bool) -> Result<(), TestCaseError> {
        let now = at(self.now);
        if self.tx.status.is_terminal() || self.tx.next_check_at > now {
            return Ok(());
        }
        let before = self.tx.clone();
        let offered = self
            .tx
            .attempts
            .iter()
            .any(|a| a.sent_at.is_some() || a.last_answer.is_some());
        let obs = offered.then(|| self.chain.observe(&self.tx, self.policy.confirmations));
        let decision = decide(&self.tx, obs.as_ref(), &self.policy, now);
        if race {
            self.chain.produce(self.now, true);
            self.check_paid_once()?;
        }
        match decision {
            Decision::FirstAttempt => {
                let bid = self.chain.quote();
                self.sign_store_send(bid)?;
            }
            Decision::Reprice => {
                let refused = self.tx.latest().expect("an attempt").bid;
                let fresh = self.chain.quote();
                match repriced(refused, fresh, &self.policy) {
                    None => self.send_latest()?,
                    Some(bid) => {
                        if self.checks.bids {
                            let (l0, p0) = gas(refused);
                            let (l1, p1) = gas(bid.into());
                            prop_assert!(p1 > p0 || l1 > l0, "repriced not higher: {bid:?}");
                        }
                        self.sign_store_send(bid)?;
                    }
                }
            }
            Decision::Replace { bid } => {
                if self.checks.bids {
                    prop_assert_eq!(self.tx.network, Network::Bsc);
                    let (l0, p0) = gas(self.tx.latest().expect("an attempt").bid);
                    let (l1, p1) = gas(bid.into());
                    // The policy's bump, or the cap where that passes it, which must still be
                    // the nodes' minimum bump (10 %) above the last bid.
                    let percent = u128::from(self.policy.bump_percent.max(10));
                    let at_cap = p1 == self.policy.gas_price_cap_wei;
                    prop_assert!(
                        (p1 * 100 >= p0 * (100 + percent) || (at_cap && p1 * 100 >= p0 * 110))
                            && p1 > p0,
                        "replacement {p1} is not {percent} % above {p0} (nor the cap, 10 % above)"
                    );
                    prop_assert!(p1 <= self.policy.gas_price_cap_wei, "{p1} above the cap");
                    prop_assert_eq!(l1, l0);
                }
                self.sign_store_send(bid)?;
            }
            Decision::Rebuild => {
                let bid = FeeBid::from(self.tx.latest().expect("an attempt").bid);
                self.sign_store_send(bid)?;
            }
            Decision::Void { bid } => {
                prop_assert_eq!(self.tx.network, Network::Bsc);
                prop_assert!(
                    self.tx.cancel_request().is_some(),
                    "a void nobody asked for"
                );
                self.sign_store_send(bid)?;
                if let Some(a) = self.tx.attempts.last_mut() {
                    a.void = true;
                }
            }
            Decision::Broadcast => self.send_latest()?,
            Decision::Included { hash, inclusion }
            | Decision::IncludedUnknownToLookups { hash, inclusion } => {
                self.tx.included = Some(Included::new(&hash, &inclusion));
                let detail = format!("{hash} in block {}", inclusion.block_number);
                self.transition(OutStatus::Included, detail)?;
                self.tx.next_check_at = now.plus_millis(self.policy.check_every_ms);
            }
            Decision::DoublePayment {
                hash,
                inclusion,
                hashes,
            } => {
                self.tx.included = Some(Included::new(&hash, &inclusion));
                let detail = format!("{DOUBLE_PAYMENT_NOTE} {}", hashes.join(", "));
                self.transition(OutStatus::Included, detail)?;
                self.tx.next_check_at = now.plus_millis(self.policy.check_every_ms);
                self.double_payments += 1;
            }
            Decision::Reorged => {
                self.tx.included = None;
                self.transition(OutStatus::Sent, "its block left the chain")?;
                self.tx.next_check_at = now;
            }
            Decision::Final => {
                if self.checks.cancel {
                    let included = self.tx.included.as_ref().map(|i| i.hash.clone());
                    prop_assert!(
                        included.is_some_and(|h| !self.tx.is_void(&h)),
                        "a void counted as the payment"
                    );
                }
                let succeeded = self.tx.included.as_ref().is_some_and(|i| i.succeeded);
                let status = if succeeded {
                    OutStatus::Final
                } else {
                    self.tx.failure_reason = Some("the transaction failed on chain".into());
                    OutStatus::Failed
                };
                self.transition(status, "final")?;
                if self.checks.final_depth {
                    self.check_final()?;
                }
            }
            Decision::Stuck { reason } => {
                if self.tx.last_wait() != Some(Wait::Stuck) {
                    self.tx.note_wait(Wait::Stuck, &format!(" {reason}"), now);
                }
                self.tx.next_check_at = now.plus_millis(self.policy.replace_after_ms);
            }
            Decision::Fail { reason } => {
                if self.checks.cancel {
                    self.check_cancel_releases_only_unpaid()?;
                }
                // TRON only, once every attempt is void: nothing of it can be included.
                self.tx.failure_reason = Some(reason.clone());
                self.transition(OutStatus::Failed, reason)?;
            }
            Decision::Wait { until } => self.tx.next_check_at = until,
        }
        if self.checks.legal {
            check_moves(&before, &self.tx)?;
        }
        Ok(())
    }

    /// Property 5: a payment fails (its hold is released) only while no attempt of the payment
    /// itself is on chain or can still be included: never both paid and released.
    fn check_cancel_releases_only_unpaid(&self) -> Result<(), TestCaseError> {
        if !self.chain.succeeds {
            // Receipts fail on this chain: an attempt in a block paid nothing either.
            return Ok(());
        }
        for a in self.tx.attempts.iter().filter(|a| !a.void) {
            prop_assert!(
                self.chain.block_of(&a.hash).is_none(),
                "released but {} is on chain",
                a.hash
            );
            // BSC: the void took the nonce; TRON: every attempt expired unseen.
            prop_assert!(
                self.chain.nonce_used() || !self.could_be_included(&a.hash),
                "released but {} can still be included",
                a.hash
            );
        }
        Ok(())
    }

    /// Property 3: `Final` only at depth in the model chain, with the receipt's outcome.
    fn check_final(&self) -> Result<(), TestCaseError> {
        self.check_still_final(true)
    }

    /// After finality a reorganization (shallower than the depth) may shorten the chain above
    /// the block, never remove it: `at_depth` only at the moment of the move.
    fn check_still_final(&self, at_depth: bool) -> Result<(), TestCaseError> {
        let rec = self
            .tx
            .included
            .as_ref()
            .expect("final without an inclusion");
        let block = self.chain.block_of(&rec.hash);
        prop_assert!(block.is_some(), "final but {} is not on chain", rec.hash);
        let block = block.expect("checked");
        prop_assert_eq!(&block.hash, &rec.block_hash);
        let depth = self.chain.head().number - block.number + 1;
        prop_assert!(
            !at_depth || depth >= u64::from(self.policy.confirmations),
            "final at depth {depth} < {}",
            self.policy.confirmations
        );
        prop_assert_eq!(final_status(&self.tx), Some(self.chain.succeeds));
        Ok(())
    }

    fn transition(
        &mut self,
        next: OutStatus,
        detail: impl Into<String>,
    ) -> Result<(), TestCaseError> {
        let now = at(self.now);
        self.tx
            .transition(next, detail, now)
            .map_err(TestCaseError::fail)
    }

    fn sign_store_send(&mut self, bid: FeeBid) -> Result<(), TestCaseError> {
        if self.checks.paid_once && self.tx.network == Network::Tron {
            // TRON: nothing new while an earlier attempt could still be included.
            for a in &self.tx.attempts {
                prop_assert!(
                    !self.could_be_included(&a.hash),
                    "a new attempt is signed while {} could still be included",
                    a.hash
                );
            }
        }
        self.signed += 1;
        let expires =
            (self.tx.network == Network::Tron).then(|| self.chain.head().time + LIFETIME_MS);
        let hash = format!("{:064x}", 0xa000 + self.signed);
        let raw = encode(self.tx.nonce, bid, self.signed, expires);
        if self.checks.bids && self.tx.network == Network::Bsc {
            prop_assert_eq!(raw_nonce(&raw), NONCE);
        }
        // The model's TRON transactions reference the block below the head.
        let reference = (self.tx.network == Network::Tron).then(|| {
            let n = self.chain.head().number.saturating_sub(1).max(100);
            let b = self.chain.by_number(n).expect("a block below the head");
            (b.number, b.hash.clone())
        });
        self.chain.known.push(ModelTx {
            hash: hash.clone(),
            nonce: self.tx.nonce,
            price: gas(bid.into()).1,
            expires,
            reference: reference.clone(),
        });
        let now = at(self.now);
        self.tx
            .add_attempt(
                Attempt {
                    hash,
                    raw,
                    bid: bid.into(),
                    expires_at_ms: expires,
                    signed_at: now,
                    sent_at: None,
                    last_answer: None,
                    plan: None,
                    reference_block: reference.map(|(n, _)| n),
                    void: false,
                },
                now,
            )
            .map_err(TestCaseError::fail)?;
        self.tx.next_check_at = now;
        self.send_latest()
    }

    fn send_latest(&mut self) -> Result<(), TestCaseError> {
        let hash = self
            .tx
            .latest()
            .expect("nothing signed to send")
            .hash
            .clone();
        let outcome = self.chain.broadcast(&hash);
        self.check_paid_once()?;
        let now = at(self.now);
        let label = outcome.to_string();
        let sent = !matches!(outcome, BroadcastOutcome::Rejected(_));
        let latest = self.tx.attempts.last_mut().expect("an attempt");
        latest.last_answer = Some(outcome);
        if sent {
            latest.sent_at = Some(now);
        }
        // Through the stores' form, as the runtime's next round reads it.
        let stored = serde_json::to_string(&self.tx.attempts)
            .map_err(|e| TestCaseError::fail(format!("attempts do not serialize: {e}")))?;
        self.tx.attempts = serde_json::from_str(&stored)
            .map_err(|e| TestCaseError::fail(format!("attempts do not read back: {e}")))?;
        if !sent {
            self.tx.next_check_at = now.plus_millis(self.policy.rebroadcast_after_ms);
            return Ok(());
        }
        if self.tx.status == OutStatus::Signed {
            self.transition(OutStatus::Sent, label)?;
        }
        self.tx.next_check_at = now.plus_millis(self.policy.check_every_ms);
        Ok(())
    }

    /// Fair chain: no faults, a block and a look every 3 s. Steps until terminal.
    fn settle(&mut self, rounds: usize) -> Result<usize, TestCaseError> {
        self.chain.fault = None;
        for round in 0..rounds {
            if self.tx.status.is_terminal() {
                return Ok(round);
            }
            self.apply(&Event::Block { include: true })?;
            self.apply(&Event::Step { race: false })?;
        }
        if self.tx.status.is_terminal() {
            return Ok(rounds);
        }
        Err(TestCaseError::fail(format!(
            "not final after {rounds} fair rounds: {:?}; last steps {:?}",
            self.tx.status,
            self.tx.history.iter().rev().take(3).collect::<Vec<_>>()
        )))
    }
}

/// Property 2: legal moves only, history and attempts only grow.
fn check_moves(before: &OutgoingTx, after: &OutgoingTx) -> Result<(), TestCaseError> {
    prop_assert!(after.history.len() >= before.history.len());
    prop_assert_eq!(&after.history[..before.history.len()], &before.history[..]);
    let mut prev = before.status;
    for s in &after.history[before.history.len()..] {
        prop_assert!(
            prev.can_move_to(s.status),
            "illegal move {:?} -> {:?}",
            prev,
            s.status
        );
        prev = s.status;
    }
    prop_assert_eq!(prev, after.status);
    prop_assert!(after.attempts.len() >= before.attempts.len());
    prop_assert!(after.attempts.len() <= before.attempts.len() + 1);
    for (a, b) in before.attempts.iter().zip(&after.attempts) {
        prop_assert_eq!(&a.hash, &b.hash);
        prop_assert_eq!(&a.raw, &b.raw);
        prop_assert_eq!(a.bid, b.bid);
        prop_assert_eq!(a.expires_at_ms, b.expires_at_ms);
        prop_assert_eq!(a.signed_at, b.signed_at);
    }
    Ok(())
}

fn policy() -> impl Strategy<Value = EnginePolicy> {
    (
        2u32..6,
        20_000i64..90_000,
        0u32..30,
        5_000i64..30_000,
        1_000i64..5_000,
    )
        .prop_map(
            |(confirmations, replace, bump, rebroadcast, check)| EnginePolicy {
                confirmations,
                replace_after_ms: replace,
                bump_percent: bump,
                gas_price_cap_wei: CAP,
                rebroadcast_after_ms: rebroadcast,
                check_every_ms: check,
            },
        )
}

fn market() -> impl Strategy<Value = u128> {
    1_000u128..=40_000
}

/// `reorgs`: whether the chain reorganizes (see the findings below for why some properties
/// are checked without).
/// `hostile`: producers skip our transactions as often as not and reorganizations are
/// frequent (what it takes to find the TRON double payment by search).
fn event(reorgs: bool, hostile: bool) -> impl Strategy<Value = Event> {
    let reorg_weight = u32::from(reorgs) * if hostile { 4 } else { 1 };
    let skip_weight = if hostile { 4 } else { 1 };
    prop_oneof![
        8 => any::<bool>().prop_map(|race| Event::Step { race }),
        5 => prop_oneof![4 => Just(true), skip_weight => Just(false)].prop_map(|include| Event::Block { include }),
        2 => (0i64..40_000).prop_map(|ms| Event::Tick { ms }),
        1 => any::<bool>().prop_map(|everywhere| Event::Drop { everywhere }),
        1 => any::<bool>().prop_map(|reached| Event::Fault(Fault::Lost { reached })),
        1 => any::<bool>().prop_map(|reached| Event::Fault(Fault::Refused { reached })),
        reorg_weight => (1u64..5, any::<bool>()).prop_map(|(depth, lose)| Event::Reorg { depth, lose }),
        1 => market().prop_map(|price| Event::Market { price }),
        1 => any::<bool>().prop_map(|hide| Event::Hide { hide }),
    ]
}

fn network() -> impl Strategy<Value = Network> {
    prop_oneof![Just(Network::Bsc), Just(Network::Tron)]
}

#[derive(Debug, Clone)]
struct Case {
    network: Network,
    policy: EnginePolicy,
    market: u128,
    succeeds: bool,
    /// TRON: producers keep the bytes of a transaction its expiration made void.
    keep_void: bool,
}

fn run(case: &Case, events: &[Event], checks: Checks) -> Result<Sim, TestCaseError> {
    let mut sim = Sim::new(case.network, case.policy, case.market, case.succeeds);
    sim.chain.producers_keep_void = case.keep_void;
    sim.checks = checks;
    for e in events {
        sim.apply(e)?;
    }
    Ok(sim)
}

const CASES: u32 = 300;

fn case(keep_void: bool) -> impl Strategy<Value = Case> {
    (network(), policy(), market(), any::<bool>()).prop_map(
        move |(network, policy, market, succeeds)| Case {
            network,
            policy,
            market,
            succeeds,
            keep_void,
        },
    )
}

fn events(reorgs: bool) -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(event(reorgs, false), 0..120)
}

fn paid_once(case: &Case, events: &[Event]) -> Result<(), TestCaseError> {
    let checks = Checks {
        paid_once: true,
        ..Checks::default()
    };
    let mut sim = run(case, events, checks)?;
    let _ = sim.settle(400);
    sim.check_paid_once()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Property 1, with reorganizations, where producers forget what a head made void.
    #[test]
    fn never_paid_twice(case in case(false), events in events(true)) {
        paid_once(&case, &events)?;
    }

    /// Property 1 where producers keep void TRON bytes: fails (see
    /// `a_short_reorg_after_a_tron_rebuild_does_not_pay_twice`).
    #[test]
    fn never_paid_twice_when_producers_keep_void_bytes(
        case in case(true).prop_map(|c| Case { network: Network::Tron, ..c }),
        events in prop::collection::vec(event(true, true), 0..120),
    ) {
        paid_once(&case, &events)?;
    }

    /// Property 5: a cancel request at any point: the payment ends paid (an attempt of its own
    /// final) or failed with none of its own attempts on chain or includable, never both; and
    /// it is paid at most once.
    #[test]
    fn a_cancelled_payment_is_never_both_paid_and_released(
        case in case(false),
        events in prop::collection::vec(
            prop_oneof![20 => event(true, false), 1 => Just(Event::Cancel)],
            0..120,
        ),
    ) {
        let checks = Checks { cancel: true, paid_once: true, ..Checks::default() };
        let mut sim = run(&case, &events, checks)?;
        sim.apply(&Event::Cancel)?;
        let _ = sim.settle(400);
        sim.check_paid_once()?;
        if sim.tx.status == OutStatus::Failed && sim.tx.cancel_request().is_some() {
            sim.check_cancel_releases_only_unpaid()?;
        }
    }

    /// Property 2.
    #[test]
    fn moves_are_legal_and_nothing_stored_is_rewritten(case in case(true), events in events(true)) {
        let checks = Checks { legal: true, ..Checks::default() };
        let mut sim = run(&case, &events, checks)?;
        let _ = sim.settle(400);
    }

    /// Property 3.
    #[test]
    fn final_only_at_depth_with_the_receipt(case in case(true), events in events(true)) {
        let checks = Checks { final_depth: true, ..Checks::default() };
        let mut sim = run(&case, &events, checks)?;
        let _ = sim.settle(400);
        if sim.tx.status.is_terminal() && sim.tx.included.is_some() {
            sim.check_still_final(false)?;
        }
        if sim.tx.status == OutStatus::Failed && sim.tx.included.is_none() {
            // Failed before any inclusion (a TRON refusal, every attempt void): none is on chain.
            for a in &sim.tx.attempts {
                prop_assert!(sim.chain.block_of(&a.hash).is_none(), "failed but {} is on chain", a.hash);
            }
        }
    }

    /// Property 4 on the attempts the driver signs.
    #[test]
    fn bsc_attempts_keep_the_nonce_and_bid_enough_within_the_cap(
        case in case(true).prop_map(|c| Case { network: Network::Bsc, ..c }),
        events in events(true),
    ) {
        let checks = Checks { bids: true, ..Checks::default() };
        let mut sim = run(&case, &events, checks)?;
        let _ = sim.settle(400);
        for a in &sim.tx.attempts {
            prop_assert_eq!(raw_nonce(&a.raw), NONCE);
        }
    }

    /// Property 4 on `repriced` alone.
    #[test]
    fn repriced_is_higher_than_the_refused_bid_or_none(
        policy in policy(),
        limit in 21_000u64..100_000,
        price in 0u128..100_000,
        fresh_limit in 21_000u64..100_000,
        fresh_price in 0u128..100_000,
    ) {
        let refused = Bid::Gas { gas_limit: limit, gas_price_wei: price };
        let fresh = FeeBid::Gas { gas_limit: fresh_limit, gas_price_wei: fresh_price };
        if let Some(bid) = repriced(refused, fresh, &policy) {
            let (l, p) = gas(bid.into());
            prop_assert!(p > price || l > limit);
            prop_assert!(p >= price && l >= limit);
            prop_assert!(p <= policy.gas_price_cap_wei.max(price));
        }
    }

    /// Property 5 (all properties checked on the way), without reorganizations.
    #[test]
    fn final_once_faults_stop(case in case(true), events in events(false)) {
        let mut sim = run(&case, &events, Checks::ALL)?;
        sim.settle(1_500)?;
    }

    /// Property 5 with reorganizations: fails on BSC (see
    /// `a_stale_nonce_used_answer_after_a_reorg_does_not_stop_the_payment`).
    #[test]
    fn final_once_faults_stop_with_reorgs(case in case(false), events in events(true)) {
        let mut sim = run(&case, &events, Checks::ALL)?;
        sim.settle(1_500)?;
    }
}

fn fixed_policy(confirmations: u32) -> EnginePolicy {
    EnginePolicy {
        confirmations,
        replace_after_ms: 20_000,
        bump_percent: 12,
        gas_price_cap_wei: CAP,
        rebroadcast_after_ms: 5_000,
        check_every_ms: 1_000,
    }
}

/// Finding (liveness): BSC attempt A is mined between the broadcaster's look and its
/// rebroadcast of A, so the node answers "nonce too low" (`nonce_used`); a reorganization
/// then removes A's block and A is not back in any pool. Every lookup is `Unknown`, the stored
/// answer is still `nonce_used`, and `decide` says `Stuck` ("used by a transaction that is none
/// of this payment's 1 attempts") at every look from then on: nothing is ever sent again,
/// although the nonce is free and A's stored bytes would simply be mined. `last_answer` only
/// changes on a broadcast, and `Stuck` never broadcasts.
#[test]
fn a_stale_nonce_used_answer_after_a_reorg_does_not_stop_the_payment() {
    let mut sim = Sim::new(Network::Bsc, fixed_policy(2), 1_000, true);
    for e in [
        Event::Step { race: false },
        Event::Tick { ms: 5_000 },
        // A is mined between the look and the rebroadcast: answer `nonce_used`.
        Event::Step { race: true },
        Event::Reorg {
            depth: 1,
            lose: true,
        },
    ] {
        sim.apply(&e).unwrap();
    }
    assert_eq!(sim.chain.included(), Vec::<String>::new());
    let result = sim.settle(1_000);
    assert!(result.is_ok(), "{result:?}");
}

/// Finding (double payment, TRON): `Rebuild` trusts the head's time. A is pooled by producers
/// but not mined before the head passes its expiration; the queried node drops it (it is void
/// on that head), so every lookup is `Unknown` and B is built. A one-block reorganization,
/// shallower than the confirmation depth, brings back a head at or before A's expiration: a
/// producer still holding A's bytes includes A and B in the next block.
#[test]
fn a_short_reorg_after_a_tron_rebuild_does_not_pay_twice() {
    let mut sim = Sim::new(Network::Tron, fixed_policy(3), 1_000, true);
    sim.apply(&Event::Step { race: false }).unwrap();
    // Twenty-one blocks without A: the last one is past A's expiration (60 s).
    for _ in 0..21 {
        sim.apply(&Event::Block { include: false }).unwrap();
    }
    sim.apply(&Event::Step { race: false }).unwrap();
    assert_eq!(
        sim.tx.attempts.len(),
        1,
        "no rebuild while a reorganization shallower than the depth could bring A back"
    );
    sim.apply(&Event::Reorg {
        depth: 1,
        lose: false,
    })
    .unwrap();
    let r = sim.apply(&Event::Block { include: true });
    assert!(r.is_ok(), "{r:?}");
}

/// Finding (double payment, TRON; issue 31, F2): attempt A is in a block, but the lookups by
/// id answer "unknown" (a lagging backend behind a load-balanced URL, or a liar). Once the
/// block at confirmation depth is past A's expiration, the engine rebuilt on those answers
/// alone and B went out beside A. The blocks read by number list A: it is recorded as
/// included (and final at depth), nothing new is signed.
#[test]
fn a_tron_attempt_hidden_from_lookups_is_found_in_its_block_not_paid_twice() {
    let mut sim = Sim::new(Network::Tron, fixed_policy(3), 1_000, true);
    sim.apply(&Event::Block { include: false }).unwrap();
    sim.apply(&Event::Step { race: false }).unwrap();
    sim.apply(&Event::Block { include: true }).unwrap();
    assert_eq!(sim.chain.included().len(), 1, "A is in a block");
    sim.apply(&Event::Hide { hide: true }).unwrap();
    for _ in 0..30 {
        sim.apply(&Event::Block { include: true }).unwrap();
        sim.apply(&Event::Step { race: false }).unwrap();
    }
    assert_eq!(sim.tx.attempts.len(), 1, "nothing new is signed");
    assert_eq!(sim.tx.status, OutStatus::Final);
    assert_eq!(
        sim.tx.included.as_ref().map(|i| i.hash.as_str()),
        Some(sim.tx.attempts[0].hash.as_str())
    );
    assert_eq!(sim.double_payments, 0);
}

/// Property (issue 31, F6): a chain on which two attempts are both in blocks (a rebuild that
/// went out beside the first: here forced by hand) is a `DoublePayment` decision, once.
#[test]
fn two_attempts_in_blocks_are_a_double_payment_decided_once() {
    let mut sim = Sim::new(Network::Tron, fixed_policy(3), 1_000, true);
    sim.checks = Checks::default();
    sim.apply(&Event::Step { race: false }).unwrap();
    sim.apply(&Event::Block { include: true }).unwrap();
    // A second attempt signed and mined beside the first (what F2 did).
    sim.sign_store_send(FeeBid::FeeLimit { sun: FEE_LIMIT })
        .unwrap();
    sim.apply(&Event::Block { include: true }).unwrap();
    assert_eq!(sim.chain.included().len(), 2);
    for _ in 0..10 {
        sim.apply(&Event::Tick { ms: 3_000 }).unwrap();
        sim.apply(&Event::Step { race: false }).unwrap();
    }
    assert_eq!(
        sim.double_payments, 1,
        "decided once, then followed to the end"
    );
    assert_eq!(sim.tx.status, OutStatus::Included);
    sim.settle(10).unwrap();
    assert_eq!(sim.tx.status, OutStatus::Final);
    assert_eq!(sim.double_payments, 1);
}
