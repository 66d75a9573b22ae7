//! The chain scanner of one network: a thin background loop over the core's deposit pipeline.
//! It reads the core's decision, does the I/O, and writes the result back:
//!
//! - the cursor block is checked against the node; on a different hash the fork is searched
//!   with `chain::find_fork` (pure: recorded hashes against fetched headers; a block the node
//!   lacks means "wait", never "fork");
//! - the following blocks are fetched a window at a time and applied one by one with
//!   `deposit::apply_block`, which refuses a block that does not connect to the cursor; each
//!   applies in its own store transaction together with the cursor move, so a crash resumes
//!   exactly after the last applied block;
//! - a height the node does not serve yet waits one poll interval (no busy loop), and a
//!   scanner that fails without progress for `stuck_alert_after` raises one critical alert.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use custody_core::admin::Alert;
use custody_core::chain::{find_fork, ForkSearch, ScanStatus};
use custody_core::deposit::{self, Applied, PipelineSettings, WatchSet};
use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::chain::ScannedBlock;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::{read, write};
use custody_core::ports::{ChainSource, Clock, Entropy, Store};
use custody_core::{AssetCatalog, Timestamp};
use tokio::sync::watch;

pub struct Scanner {
    pub chain: Arc<dyn ChainSource>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    pub catalog: Arc<AssetCatalog>,
    pub watch: Arc<WatchSet>,
    pub settings: PipelineSettings,
    pub poll_interval: Duration,
    /// Most blocks applied in one tick, so a long catch-up still lets shutdown in.
    pub blocks_per_tick_max: u64,
    /// Where to start when there is no cursor yet; `None` = the node's head then.
    pub start_block: Option<u64>,
    /// How long the scanner may fail without progress before it raises a `scan_stuck` alert.
    pub stuck_alert_after: Duration,
    pub status: Arc<Mutex<ScanStatus>>,
    /// The store position of the newest wallet already in the watch set: wallets created by
    /// another instance (or another path) are read from the store after it, every tick.
    pub watch_after: std::sync::atomic::AtomicU64,
    /// Set once a reorganization deeper than `blocks_kept` was found: scanning stops until an
    /// operator restarts the service, and the alert is raised once.
    pub halted: AtomicBool,
    /// Who scans this network among the instances sharing the store: asked before every tick,
    /// so a standby instance takes over as soon as the scanning one dies.
    pub exclusive: Arc<dyn custody_core::ports::Exclusive>,
}

/// Heights fetched concurrently while catching up: overlaps round trips to a distant node
/// (two per block) without holding more than a few blocks in memory.
const FETCH_WINDOW: u64 = 8;

/// How a tick ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// More blocks are waiting: tick again at once.
    Behind,
    /// Up to date, or waiting for the node: tick again after a poll interval.
    UpToDate,
}

impl Scanner {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let network = self.settings.network;
        tracing::info!(%network, "scanner started");
        let mut failures: u32 = 0;
        let mut failing_since: Option<Timestamp> = None;
        let mut stuck_alerted = false;
        let work = format!("scanner:{network}");
        let mut standing_by = false;
        loop {
            let holds = self.exclusive.hold(&work).await;
            if holds == standing_by {
                standing_by = !holds;
                tracing::info!(%network, scanning = holds, "scanner role changed");
            }
            let outcome = if holds {
                self.tick().await
            } else {
                // Another instance scans; its writes reach this one's readers through the store.
                Ok(Tick::UpToDate)
            };
            let wait = match outcome {
                Ok(tick) => {
                    failures = 0;
                    failing_since = None;
                    stuck_alerted = false;
                    match tick {
                        Tick::Behind => Duration::ZERO,
                        Tick::UpToDate => self.poll_interval,
                    }
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(%network, error = %e, failures, "scan tick failed");
                    let now = self.clock.now();
                    let since = *failing_since.get_or_insert(now);
                    self.note_error(&e, since);
                    if !stuck_alerted && self.stuck_for_too_long(since, now) {
                        stuck_alerted = self.raise_stuck_alert(&e, since).await;
                    }
                    // Back off up to 32 poll intervals while the node is unreachable.
                    self.poll_interval * 2u32.saturating_pow(failures.min(5))
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
        }
        tracing::info!(%network, "scanner stopped");
    }

    fn stuck_for_too_long(&self, since: Timestamp, now: Timestamp) -> bool {
        let limit = i64::try_from(self.stuck_alert_after.as_millis()).unwrap_or(i64::MAX);
        now.unix_millis().saturating_sub(since.unix_millis()) >= limit
    }

    /// Raises the `scan_stuck` alert; true once it is recorded.
    async fn raise_stuck_alert(&self, e: &CoreError, since: Timestamp) -> bool {
        let network = self.settings.network;
        let scanned = self
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .scanned_block;
        let message = format!(
            "{network}: the scanner has made no progress since {} (last block applied: {}); last \
             error: {}. Deposits are not detected meanwhile. See docs/operations.md, \"A stuck \
             scanner\"",
            since.to_rfc3339(),
            scanned.map_or_else(|| "none".to_owned(), |n| n.to_string()),
            describe(e)
        );
        let (id, now) = (new_uuid(self.entropy.as_ref()), self.clock.now());
        let raised = write(self.store.as_ref(), move |tx| {
            Ok(tx.raise_alert(&Alert::open(
                id,
                "scan_stuck",
                "critical",
                message.clone(),
                None,
                now,
            ))?)
        })
        .await;
        raised.is_ok()
    }

    fn note_error(&self, e: &CoreError, since: Timestamp) {
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        s.last_error = Some(describe(e));
        s.failing_since = Some(since);
        s.updated_at = Some(self.clock.now());
    }

    fn note_progress(&self, head: u64, scanned: u64) {
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        s.head_block = Some(head);
        s.scanned_block = Some(scanned);
        s.last_error = None;
        s.failing_since = None;
        s.updated_at = Some(self.clock.now());
    }

    /// One tick: what `run` repeats; public for the simulator, which drives the loops one
    /// step at a time.
    pub async fn tick(&self) -> CoreResult<Tick> {
        let network = self.settings.network;
        if self.halted.load(Ordering::Relaxed) {
            return Err(PortError::permanent(
                "scanner",
                "stopped after a reorganization deeper than the blocks kept; see the alerts",
            )
            .into());
        }
        let head = self.chain.head_number().await?;
        self.refresh_watch_set().await?;
        let cursor = read(self.store.as_ref(), move |tx| Ok(tx.chain_cursor(network)?)).await?;
        let Some(cursor) = cursor else {
            let start = self.start_block.unwrap_or(head);
            let Some(block) = self.chain.scan_block(start).await? else {
                return Ok(Tick::UpToDate);
            };
            self.apply(block).await?;
            tracing::info!(%network, block = start, "scanning from its first block");
            return Ok(Tick::Behind);
        };
        let (mut number, hash) = (cursor.number, cursor.hash);
        self.note_progress(head, number);

        if head < number {
            // A node behind us (a lagging failover endpoint) is not a reorganization: wait.
            return Ok(Tick::UpToDate);
        }
        // Is our newest block still the node's? Only a different hash says the chain changed;
        // a node that does not have the block (yet) decides nothing.
        match self.chain.header(number).await? {
            None => return Ok(Tick::UpToDate),
            Some(h) if h.hash == hash => {}
            Some(h) => return self.resolve_fork(number, h).await,
        }

        let last = head.min(number.saturating_add(self.blocks_per_tick_max));
        let mut applied = 0u64;
        let mut waiting = false;
        'fetching: while number < last {
            // Fetch a window of heights at once (the round trips overlap), apply in order.
            let window_end = last.min(number + FETCH_WINDOW);
            let mut fetches = tokio::task::JoinSet::new();
            for n in number + 1..=window_end {
                let chain = Arc::clone(&self.chain);
                fetches.spawn(async move { (n, chain.scan_block(n).await) });
            }
            let mut fetched = BTreeMap::new();
            while let Some(done) = fetches.join_next().await {
                let (n, block) =
                    done.map_err(|e| PortError::transient("scanner", e.to_string()))?;
                fetched.insert(n, block?);
            }
            for (_, block) in fetched {
                let Some(block) = block else {
                    // The node names a head it does not serve yet: wait a poll interval
                    // rather than ask again at once.
                    waiting = true;
                    break 'fetching;
                };
                let header = block.header.clone();
                if !self.apply(block).await? {
                    // The chain moved under us; the next tick checks the cursor block and
                    // finds the fork point. Wait rather than spin on an inconsistent node.
                    tracing::info!(%network, block = header.number, "block does not connect to the cursor");
                    waiting = true;
                    break 'fetching;
                }
                number = header.number;
                applied += 1;
            }
        }
        if applied == 0 {
            // Nothing new: still let held deposits move (e.g. crediting switched back on).
            let (entropy, settings, now) = (
                Arc::clone(&self.entropy),
                self.settings.clone(),
                self.clock.now(),
            );
            write(self.store.as_ref(), move |tx| {
                deposit::advance(tx, entropy.as_ref(), &settings, number, now)
            })
            .await?;
        }
        self.note_progress(head, number);
        Ok(if number < head && !waiting {
            Tick::Behind
        } else {
            Tick::UpToDate
        })
    }

    /// Adds the addresses of wallets stored since the last look to the watch set. The watch
    /// set is a cache of the store: what matters across instances is read from the store.
    async fn refresh_watch_set(&self) -> CoreResult<()> {
        const BATCH: usize = 1_000;
        let network = self.settings.network;
        loop {
            let after = self.watch_after.load(Ordering::Relaxed);
            let batch = read(self.store.as_ref(), move |tx| {
                Ok(tx.wallet_addresses_after(network, after, BATCH)?)
            })
            .await?;
            let Some(&(last, _)) = batch.last() else {
                return Ok(());
            };
            let full = batch.len() == BATCH;
            self.watch
                .extend(network, batch.into_iter().map(|(_, address)| address));
            self.watch_after.store(last, Ordering::Relaxed);
            if !full {
                return Ok(());
            }
        }
    }

    /// Applies one block; false when it does not connect to the cursor (nothing written).
    async fn apply(&self, block: ScannedBlock) -> CoreResult<bool> {
        let (entropy, settings, now) = (
            Arc::clone(&self.entropy),
            self.settings.clone(),
            self.clock.now(),
        );
        let (catalog, watch) = (Arc::clone(&self.catalog), Arc::clone(&self.watch));
        let number = block.header.number;
        let applied = write(self.store.as_ref(), move |tx| {
            deposit::apply_block(
                tx,
                entropy.as_ref(),
                &settings,
                &catalog,
                &watch,
                &block,
                now,
            )
        })
        .await?;
        match applied {
            Applied::Block(outcome) => {
                if outcome != deposit::BlockOutcome::default() {
                    tracing::info!(network = %self.settings.network, block = number, ?outcome, "deposits moved");
                }
                Ok(true)
            }
            Applied::CannotConnect { .. } => Ok(false),
        }
    }

    /// The node's block at our cursor height is `theirs`, not ours: search the fork point with
    /// the core's rule and rewind there, wait, or stop at a fork deeper than we keep.
    async fn resolve_fork(
        &self,
        cursor: u64,
        theirs: custody_core::ports::chain::BlockHeader,
    ) -> CoreResult<Tick> {
        let network = self.settings.network;
        let floor = cursor.saturating_sub(self.settings.blocks_kept);
        let recorded = read(self.store.as_ref(), move |tx| {
            let mut kept = BTreeMap::new();
            for n in floor..=cursor {
                if let Some(h) = tx.recorded_block_hash(network, n)? {
                    kept.insert(n, h);
                }
            }
            Ok(kept)
        })
        .await?;
        let mut fetched = BTreeMap::from([(cursor, Some(theirs))]);
        loop {
            match find_fork(cursor, floor, &recorded, &fetched) {
                ForkSearch::Fetch(n) => {
                    fetched.insert(n, self.chain.header(n).await?);
                }
                ForkSearch::NoFork => return Ok(Tick::Behind),
                ForkSearch::Wait => {
                    tracing::info!(%network, from = cursor, "fork search: the node's answers are incomplete; waiting");
                    return Ok(Tick::UpToDate);
                }
                ForkSearch::Ancestor(ancestor) => {
                    let (entropy, settings, now) = (
                        Arc::clone(&self.entropy),
                        self.settings.clone(),
                        self.clock.now(),
                    );
                    let moved = write(self.store.as_ref(), move |tx| {
                        deposit::rewind(tx, entropy.as_ref(), &settings, ancestor, now)
                    })
                    .await?;
                    tracing::warn!(%network, from = cursor, to = ancestor, deposits = moved, "reorganization: rewound");
                    return Ok(Tick::Behind);
                }
                ForkSearch::TooDeep => return Err(self.halt(cursor).await),
            }
        }
    }

    /// Stops scanning after a fork deeper than what we keep, with one critical alert.
    async fn halt(&self, from: u64) -> CoreError {
        let network = self.settings.network;
        self.halted.store(true, Ordering::Relaxed);
        let (id, now) = (new_uuid(self.entropy.as_ref()), self.clock.now());
        let message = format!(
            "{network}: reorganization deeper than the {} blocks kept below block {from}; scanning is stopped",
            self.settings.blocks_kept
        );
        let alert_message = message.clone();
        let raised = write(self.store.as_ref(), move |tx| {
            Ok(tx.raise_alert(&Alert::open(
                id,
                "deep_reorg",
                "critical",
                alert_message.clone(),
                None,
                now,
            ))?)
        })
        .await;
        if let Err(e) = raised {
            return e;
        }
        PortError::permanent("scanner", message).into()
    }
}

fn describe(e: &CoreError) -> String {
    match e {
        CoreError::Port(p) => format!("{} ({:?})", p.message, p.retry),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod model;

#[cfg(test)]
mod tests {
    use crate::system::{OsEntropy, SystemClock};
    use custody_core::deposit::{DepositFilter, DepositStatus};
    use custody_core::keys::{HdSigner, Mnemonic};
    use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
    use custody_core::{Amount, Network, Timestamp};
    use custody_store_sqlite::{SqliteStore, StoreOptions};
    use custody_testkit::ScriptedNode;

    use super::*;

    fn chain(
        len: u64,
        fork: u8,
        from: u64,
        deposit_to: &str,
        deposit_at: u64,
    ) -> Vec<ScannedBlock> {
        let hash = |n: u64, f: u8| format!("{f:02x}{n:062x}");
        (0..len)
            .map(|n| {
                let f = if n >= from { fork } else { 0 };
                let pf = if n > from { fork } else { 0 };
                ScannedBlock {
                    header: BlockHeader {
                        number: n,
                        hash: hash(n, f),
                        parent_hash: hash(n.saturating_sub(1), pf),
                        timestamp_ms: 0,
                    },
                    transfers: if n == deposit_at {
                        vec![ObservedTransfer {
                            tx_hash: custody_core::chain::TxHash::parse(&"aa".repeat(32))
                                .expect("hex"),
                            log_index: None,
                            asset_code: "BNB".into(),
                            from: custody_core::chain::ChainAddress::parse(
                                Network::Bsc,
                                "0x0000000000000000000000000000000000000001",
                            )
                            .expect("an address"),
                            to: custody_core::chain::ChainAddress::parse(Network::Bsc, deposit_to)
                                .expect("an address"),
                            amount: Amount::from_units(9),
                            succeeded: true,
                        }]
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect()
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        node: Arc<ScriptedNode>,
        scanner: Scanner,
        address: String,
    }

    /// A store with one BSC wallet, a node serving 25 blocks with a 9-unit deposit to it at
    /// block 5, and a scanner over both (3 confirmations, 100 blocks kept).
    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("db"), StoreOptions::default()).unwrap());
        let phrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
        let signer = HdSigner::from_seed(&Mnemonic::parse(phrase).unwrap().to_seed()).unwrap();
        let ids = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
        let now = Timestamp::from_unix_millis(1_800_000_000_000);
        let wallet = write(store.as_ref(), move |tx| {
            custody_core::wallet::create_wallet(
                tx,
                &signer,
                ids,
                &custody_core::TenantId::parse("t").unwrap(),
                "u",
                Network::Bsc,
                now,
            )
        })
        .await
        .unwrap()
        .wallet;
        let watch = Arc::new(WatchSet::new());
        watch.extend(Network::Bsc, [wallet.address.clone()]);
        let node = Arc::new(ScriptedNode::new(chain(25, 0, 0, &wallet.address, 5), 24));
        let scanner = Scanner {
            chain: Arc::clone(&node) as Arc<dyn ChainSource>,
            store: Arc::clone(&store),
            clock: Arc::new(SystemClock),
            entropy: Arc::new(OsEntropy),
            catalog: Arc::new(AssetCatalog::mainnet()),
            watch,
            settings: PipelineSettings {
                network: Network::Bsc,
                required_confirmations: 3,
                blocks_kept: 100,
                hot_wallets: Vec::new(),
            },
            poll_interval: Duration::from_millis(1),
            blocks_per_tick_max: 100,
            start_block: Some(0),
            status: Arc::default(),
            stuck_alert_after: Duration::from_secs(600),
            watch_after: std::sync::atomic::AtomicU64::new(0),
            halted: AtomicBool::new(false),
            exclusive: Arc::new(custody_core::ports::Alone),
        };
        Fixture {
            _dir: dir,
            store,
            node,
            scanner,
            address: wallet.address,
        }
    }

    async fn deposit_status(store: &Arc<dyn Store>) -> DepositStatus {
        read(store.as_ref(), |tx| {
            Ok(tx.list_deposits(
                &custody_core::TenantId::parse("t").unwrap(),
                &DepositFilter::default(),
                10,
            )?)
        })
        .await
        .unwrap()[0]
            .status
    }

    async fn alerts(store: &Arc<dyn Store>) -> Vec<Alert> {
        read(store.as_ref(), |tx| {
            Ok(tx
                .list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default())
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_node_that_lacks_blocks_during_the_fork_search_rewinds_nothing() {
        let f = fixture().await;
        for _ in 0..3 {
            f.scanner.tick().await.unwrap();
        }
        assert_eq!(deposit_status(&f.store).await, DepositStatus::Credited);
        // The node now names another block 24 (a fork from 20 on), but it is a load-balanced
        // URL whose replica lacks blocks 3 to 19. Before, the walk took the missing blocks as
        // forked too and rewound to block 2, reversing the good credit of block 5.
        f.node.set_blocks(chain(25, 1, 20, &f.address, 5));
        f.node.lack(3..20);
        for _ in 0..3 {
            assert_eq!(f.scanner.tick().await.unwrap(), Tick::UpToDate);
        }
        assert_eq!(deposit_status(&f.store).await, DepositStatus::Credited);
        assert!(alerts(&f.store).await.is_empty());
        assert!(!f.scanner.halted.load(Ordering::SeqCst));
        // Once the node serves the blocks again, the fork is found at 19 and the deposit at
        // block 5 is untouched.
        f.node.serve_all();
        for _ in 0..3 {
            f.scanner.tick().await.unwrap();
        }
        let cursor = read(f.store.as_ref(), |tx| Ok(tx.chain_cursor(Network::Bsc)?))
            .await
            .unwrap()
            .unwrap();
        assert!(cursor.hash.starts_with("01"), "on the new chain");
        assert_eq!(deposit_status(&f.store).await, DepositStatus::Credited);
        assert!(alerts(&f.store).await.is_empty());
    }

    #[tokio::test]
    async fn a_wallet_created_elsewhere_is_watched_from_the_store() {
        let mut f = fixture().await;
        // This process's watch set knows nothing: the wallet was created by another instance
        // (the fixture's wallet is in the store only).
        f.scanner.watch = Arc::new(WatchSet::new());
        for _ in 0..3 {
            f.scanner.tick().await.unwrap();
        }
        assert_eq!(deposit_status(&f.store).await, DepositStatus::Credited);
        assert!(f.scanner.watch.contains(Network::Bsc, &f.address));
    }

    #[tokio::test]
    async fn a_head_ahead_of_the_blocks_served_waits_instead_of_spinning() {
        let f = fixture().await;
        f.node.lack(10..25);
        // Up to block 9, then the node names head 24 but serves nothing above 9.
        assert_eq!(f.scanner.tick().await.unwrap(), Tick::Behind);
        assert_eq!(f.scanner.tick().await.unwrap(), Tick::UpToDate);
        let before = f.node.scans();
        assert_eq!(f.scanner.tick().await.unwrap(), Tick::UpToDate);
        let per_tick = f.node.scans() - before;
        assert!(
            per_tick <= FETCH_WINDOW,
            "{per_tick} block requests in one tick"
        );
    }

    #[tokio::test]
    async fn a_scanner_failing_without_progress_raises_one_stuck_alert() {
        let mut f = fixture().await;
        f.scanner.stuck_alert_after = Duration::from_millis(40);
        f.node.set_down(true);
        let status = Arc::clone(&f.scanner.status);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(f.scanner.run(stopped));
        tokio::time::sleep(Duration::from_millis(400)).await;
        stop.send(true).unwrap();
        task.await.unwrap();
        let stuck: Vec<_> = alerts(&f.store)
            .await
            .into_iter()
            .filter(|a| a.kind == "scan_stuck")
            .collect();
        assert_eq!(stuck.len(), 1, "{stuck:?}");
        assert_eq!(stuck[0].severity, "critical");
        assert!(
            stuck[0].message.contains("node down"),
            "{}",
            stuck[0].message
        );
        let s = status.lock().unwrap().clone();
        assert!(s.failing_since.is_some() && s.last_error.is_some(), "{s:?}");
    }

    #[tokio::test]
    async fn a_node_behind_is_not_a_reorganization_but_a_fork_is() {
        let Fixture {
            _dir,
            store,
            node,
            scanner,
            address,
        } = fixture().await;
        let wallet_address = address;
        let status = |store: Arc<dyn Store>| async move {
            read(store.as_ref(), |tx| {
                Ok(tx.list_deposits(
                    &custody_core::TenantId::parse("t").unwrap(),
                    &DepositFilter::default(),
                    10,
                )?)
            })
            .await
            .unwrap()[0]
                .status
        };
        for _ in 0..3 {
            scanner.tick().await.unwrap();
        }
        assert_eq!(status(Arc::clone(&store)).await, DepositStatus::Credited);

        // A failover endpoint 14 blocks behind: nothing is undone.
        node.set_visible(10);
        for _ in 0..3 {
            assert!(matches!(scanner.tick().await.unwrap(), Tick::UpToDate));
        }
        assert_eq!(status(Arc::clone(&store)).await, DepositStatus::Credited);
        let alerts = read(store.as_ref(), |tx| {
            Ok(tx
                .list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default())
        })
        .await
        .unwrap();
        assert!(alerts.is_empty(), "{alerts:?}");

        // A real fork from block 3 on, without the deposit: reversed.
        node.set_blocks(chain(26, 1, 3, &wallet_address, 99));
        node.set_visible(25);
        for _ in 0..3 {
            scanner.tick().await.unwrap();
        }
        assert_eq!(status(Arc::clone(&store)).await, DepositStatus::Reversed);
        let cursor = read(store.as_ref(), |tx| Ok(tx.chain_cursor(Network::Bsc)?))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cursor.number, 25);
        assert!(cursor.hash.starts_with("01"), "on the new chain");
    }
}
