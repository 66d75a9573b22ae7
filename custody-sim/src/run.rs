//! One run of one seed: the world acts, the real scanner reads it, and the invariants are
//! checked after every step; then the world stops injecting, and the books must explain every
//! unit the canonical chain moved to a deposit address.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use custody_core::chain::{ChainAddress, TxHash};
use custody_core::deposit::{PipelineSettings, WatchSet};
use custody_core::ledger::{self, UserAccount};
use custody_core::ports::chain::ObservedTransfer;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::exclusive::Alone;
use custody_core::ports::store::{read, write};
use custody_core::ports::{ChainSource, Clock, Entropy, Signer, Store};
use custody_core::wallet::create_wallet;
use custody_core::{Amount, AssetCatalog, AssetId, Network, TenantId, Timestamp};
use custody_runtime::scanner::{Scanner, Tick};
use custody_testkit::{test_signer, CountingEntropy, ManualClock, MemoryStore, Rng};

use crate::chain::{SimChain, FIRST_BLOCK};

/// Deposits are credited at this depth.
pub const CONFIRMATIONS: u32 = 3;
/// The deepest reorganization the world makes: deeper than the confirmations, so that credited
/// deposits are reversed too, and well within the blocks the scanner keeps.
pub const DEEPEST_REORG: u64 = 6;
const USERS: usize = 4;
/// The hot wallet: the BNB it sends to a deposit address is a gas top-up for a token sweep,
/// the treasury's own move, never a deposit.
const HOT_WALLET: &str = "0x00000000000000000000000000000000000000aa";
/// Where outside senders pay from.
const OUTSIDE: &str = "0x00000000000000000000000000000000000000f0";
const ASSETS: [&str; 2] = ["BNB", "USDT"];
/// How many steps of a failing run the failure shows.
const TRACE_SHOWN: usize = 40;

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub steps: usize,
    pub deposits: usize,
    pub foreign: usize,
    /// BNB the hot wallet sent to deposit addresses (never credited).
    pub top_ups: usize,
    pub blocks: usize,
    pub reorgs: usize,
    pub deepest_reorg: usize,
    pub ticks: usize,
    /// Canonical deposits the books hold at the end, and the units they add up to.
    pub credited: usize,
    pub credited_units: u128,
    /// FNV-1a over every line of the trace: two runs of a seed must agree on it.
    pub trace_digest: u64,
}

/// An invariant that broke: where, and the steps that led there.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    /// The steps the run was asked for (the replay needs them).
    pub steps: usize,
    pub step: usize,
    pub invariant: String,
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "seed {} broke at step {}: {}",
            self.seed, self.step, self.invariant
        )?;
        writeln!(
            f,
            "replay: CUSTODY_SIM_SEED={} CUSTODY_SIM_STEPS={} cargo test -p custody-sim \
             --test seeds every_seed -- --nocapture",
            self.seed, self.steps
        )?;
        let from = self.trace.len().saturating_sub(TRACE_SHOWN);
        for (i, line) in self.trace.iter().enumerate().skip(from) {
            writeln!(f, "  {i:>5} {line}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Deposit,
    Foreign,
    TopUp,
    Mine,
    Reorg,
    Tick,
    Advance,
}

const ACTIONS: [(Action, u64); 7] = [
    (Action::Deposit, 25),
    (Action::Foreign, 5),
    (Action::TopUp, 5),
    (Action::Mine, 25),
    (Action::Reorg, 4),
    (Action::Tick, 30),
    (Action::Advance, 11),
];

/// Runs `seed` for `steps` steps, then to quiescence.
pub fn run(seed: u64, steps: usize) -> Result<Report, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(Sim::new(seed, steps).run())
}

struct User {
    id: String,
    address: String,
}

struct Sim {
    seed: u64,
    steps: usize,
    rng: Rng,
    chain: Arc<SimChain>,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    scanner: Scanner,
    tenant: TenantId,
    users: Vec<User>,
    next_tx: u64,
    trace: Vec<String>,
    report: Report,
}

impl Sim {
    fn new(seed: u64, steps: usize) -> Self {
        let chain = Arc::new(SimChain::new());
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(Timestamp::from_unix_millis(
            1_800_000_000_000,
        )));
        // The scanner counts up from the seed with the top bit clear, the wallets (below) with
        // it set: the two streams of ids never meet.
        let entropy: Arc<dyn Entropy> = Arc::new(CountingEntropy::new(seed & !(1 << 63)));
        let scanner = Scanner {
            chain: Arc::clone(&chain) as Arc<dyn ChainSource>,
            store: Arc::clone(&store),
            clock: Arc::clone(&clock) as Arc<dyn Clock>,
            entropy,
            catalog: Arc::new(AssetCatalog::mainnet()),
            watch: Arc::new(WatchSet::new()),
            settings: PipelineSettings {
                network: Network::Bsc,
                required_confirmations: CONFIRMATIONS,
                blocks_kept: 100,
                hot_wallets: vec![
                    ChainAddress::parse(Network::Bsc, HOT_WALLET).expect("an address")
                ],
            },
            poll_interval: Duration::from_secs(1),
            blocks_per_tick_max: 8,
            start_block: Some(FIRST_BLOCK),
            stuck_alert_after: Duration::from_secs(600),
            status: Arc::new(Mutex::new(Default::default())),
            watch_after: AtomicU64::new(0),
            halted: AtomicBool::new(false),
            exclusive: Arc::new(Alone),
        };
        Sim {
            seed,
            steps,
            rng: Rng::new(seed),
            chain,
            store,
            clock,
            scanner,
            tenant: TenantId::parse("sim").expect("a tenant id"),
            users: Vec::new(),
            next_tx: 0,
            trace: Vec::new(),
            report: Report::default(),
        }
    }

    async fn run(mut self) -> Result<Report, Failure> {
        let steps = self.steps;
        self.open_wallets().await?;
        for step in 0..steps {
            self.report.steps = step + 1;
            let action = self.rng.weighted(&ACTIONS);
            self.act(action, step).await?;
            self.check_books(step).await?;
        }
        self.quiesce(steps).await?;
        self.check_every_deposit_credited_once(steps).await?;
        self.report.trace_digest = digest(&self.trace);
        Ok(self.report)
    }

    fn fail(&self, step: usize, invariant: impl Into<String>) -> Failure {
        Failure {
            seed: self.seed,
            steps: self.steps,
            step,
            invariant: invariant.into(),
            trace: self.trace.clone(),
        }
    }

    async fn open_wallets(&mut self) -> Result<(), Failure> {
        let signer: Arc<dyn Signer> = Arc::new(test_signer());
        let entropy = CountingEntropy::new(self.seed | (1 << 63));
        for i in 0..USERS {
            let (id, tenant, signer) = (format!("u{i}"), self.tenant.clone(), Arc::clone(&signer));
            let ids = [new_uuid(&entropy), new_uuid(&entropy)];
            let (user, now) = (id.clone(), self.clock.now());
            let created = write(self.store.as_ref(), move |tx| {
                create_wallet(tx, signer.as_ref(), ids, &tenant, &user, Network::Bsc, now)
            })
            .await
            .map_err(|e| self.fail(0, format!("a wallet cannot be opened: {e}")))?;
            self.users.push(User {
                id,
                address: created.wallet.address,
            });
        }
        Ok(())
    }

    async fn act(&mut self, action: Action, step: usize) -> Result<(), Failure> {
        match action {
            Action::Deposit => {
                let user = usize::try_from(self.rng.below(USERS as u64)).unwrap_or(0);
                let to = self.users[user].address.clone();
                let line = self.send_to(OUTSIDE, &to);
                self.report.deposits += 1;
                self.trace
                    .push(format!("deposit to {}: {line}", self.users[user].id));
            }
            Action::Foreign => {
                let to = format!("0x{:040x}", 0xf0_0000 + self.rng.below(1_000));
                let line = self.send_to(OUTSIDE, &to);
                self.report.foreign += 1;
                self.trace
                    .push(format!("transfer to nobody's address {to}: {line}"));
            }
            Action::TopUp => {
                let user = usize::try_from(self.rng.below(USERS as u64)).unwrap_or(0);
                let to = self.users[user].address.clone();
                let line = self.send_native(HOT_WALLET, &to);
                self.report.top_ups += 1;
                self.trace.push(format!(
                    "gas top-up from the hot wallet to {}: {line}",
                    self.users[user].id
                ));
            }
            Action::Mine => {
                let take = self.take();
                self.chain.mine(take);
                self.report.blocks += 1;
                self.trace
                    .push(format!("block {} with {take} transfers", self.chain.head()));
            }
            Action::Reorg => {
                let depth = usize::try_from(1 + self.rng.below(DEEPEST_REORG)).unwrap_or(1);
                let rng = &mut self.rng;
                let dropped = self.chain.drop_newest(depth, || rng.chance(50));
                // The new branch may be shorter than what it replaced (the node's head goes
                // back below the scanner's cursor), as long, or longer.
                let length = self.rng.below(dropped as u64 + 3);
                for _ in 0..length {
                    let take = self.take();
                    self.chain.mine(take);
                }
                self.report.reorgs += 1;
                self.report.deepest_reorg = self.report.deepest_reorg.max(dropped);
                self.trace.push(format!(
                    "reorganization of {dropped} blocks, {length} new; head now {}",
                    self.chain.head()
                ));
            }
            Action::Tick => {
                let tick = self.tick(step).await?;
                self.trace.push(format!("scanner tick: {tick:?}"));
            }
            Action::Advance => {
                let ms = 1_000 * i64::try_from(1 + self.rng.below(10)).unwrap_or(1);
                self.clock.advance_millis(ms);
                self.trace.push(format!("clock +{ms} ms"));
            }
        }
        Ok(())
    }

    /// How many pooled transfers the next block takes: usually all, sometimes a few.
    fn take(&mut self) -> usize {
        let pooled = self.chain.pool_len();
        if self.rng.chance(70) {
            pooled
        } else {
            usize::try_from(self.rng.below(pooled as u64 + 1)).unwrap_or(0)
        }
    }

    /// `from` pays `to` some BNB or USDT (one in ten such transactions fails).
    fn send_to(&mut self, from: &str, to: &str) -> String {
        let asset = ASSETS[usize::try_from(self.rng.below(2)).unwrap_or(0)];
        self.transfer(from, to, asset)
    }

    /// `from` pays `to` some BNB.
    fn send_native(&mut self, from: &str, to: &str) -> String {
        self.transfer(from, to, "BNB")
    }

    fn transfer(&mut self, from: &str, to: &str, asset: &str) -> String {
        let exponent = u32::try_from(12 + self.rng.below(6)).unwrap_or(12);
        let units = (1 + u128::from(self.rng.below(1_000))) * 10u128.pow(exponent);
        let succeeded = !self.rng.chance(10);
        self.next_tx += 1;
        let hash = format!("{:064x}", self.next_tx);
        self.chain.submit(ObservedTransfer {
            tx_hash: TxHash::parse(&hash).expect("64 hex digits"),
            log_index: (asset != "BNB").then_some(0),
            asset_code: asset.into(),
            from: ChainAddress::parse(Network::Bsc, from).expect("an address"),
            to: ChainAddress::parse(Network::Bsc, to).expect("an address"),
            amount: Amount::from_units(units),
            succeeded,
        });
        let outcome = if succeeded { "" } else { " (fails on chain)" };
        format!("{units} {asset} in tx {}{outcome}", self.next_tx)
    }

    async fn tick(&mut self, step: usize) -> Result<Tick, Failure> {
        self.report.ticks += 1;
        match self.scanner.tick().await {
            Ok(tick) => Ok(tick),
            Err(e) => Err(self.fail(step, format!("an honest chain made the scanner fail: {e}"))),
        }
    }

    /// After every step: the books balance (every ledger transaction sums to zero, every hold
    /// is covered).
    async fn check_books(&self, step: usize) -> Result<(), Failure> {
        let books = read(self.store.as_ref(), |tx| Ok(ledger::reconcile(tx)?))
            .await
            .map_err(|e| self.fail(step, format!("the books cannot be read: {e}")))?;
        if !books.balanced {
            return Err(self.fail(step, format!("the books do not balance: {books:?}")));
        }
        Ok(())
    }

    /// The world stops: every pooled transfer is mined, blocks are added past the confirmation
    /// depth, and the scanner catches up.
    async fn quiesce(&mut self, step: usize) -> Result<(), Failure> {
        self.trace.push("the world stops injecting".into());
        self.chain.mine(usize::MAX);
        for _ in 0..=CONFIRMATIONS {
            self.chain.mine(0);
        }
        let head = self.chain.head_hash();
        for _ in 0..1_000 {
            let tick = self.tick(step).await?;
            self.trace.push(format!("scanner tick: {tick:?}"));
            let scanned = self.scanner_cursor(step).await?;
            if tick == Tick::UpToDate && scanned.as_deref() == Some(head.as_str()) {
                return self.ticks_change_nothing(step).await;
            }
            self.clock.advance_millis(1_000);
        }
        Err(self.fail(step, "the scanner never caught up with a quiet chain"))
    }

    /// Once caught up, more ticks move no balance.
    async fn ticks_change_nothing(&mut self, step: usize) -> Result<(), Failure> {
        let before = self.balances(step).await?;
        for _ in 0..3 {
            self.tick(step).await?;
        }
        if self.balances(step).await? != before {
            return Err(self.fail(step, "a tick on a quiet, scanned chain moved a balance"));
        }
        Ok(())
    }

    /// The hash of the block the scanner's cursor is at.
    async fn scanner_cursor(&self, step: usize) -> Result<Option<String>, Failure> {
        read(self.store.as_ref(), |tx| Ok(tx.chain_cursor(Network::Bsc)?))
            .await
            .map(|c| c.map(|c| c.hash))
            .map_err(|e| self.fail(step, format!("the cursor cannot be read: {e}")))
    }

    /// Every user's balance of every asset, available and reserved.
    async fn balances(&self, step: usize) -> Result<Vec<(u128, u128)>, Failure> {
        let accounts: Vec<UserAccount> = self
            .users
            .iter()
            .flat_map(|u| {
                ASSETS.iter().map(|asset| {
                    UserAccount::new(
                        self.tenant.clone(),
                        u.id.clone(),
                        AssetId::new(Network::Bsc, *asset),
                    )
                })
            })
            .collect();
        read(self.store.as_ref(), move |tx| {
            ledger::user_balances(tx, &accounts)
                .map_err(|e| custody_core::CoreError::Invariant(e.to_string()))
        })
        .await
        .map(|b| {
            b.iter()
                .map(|b| (b.available.units(), b.reserved.units()))
                .collect()
        })
        .map_err(|e| self.fail(step, format!("balances cannot be read: {e}")))
    }

    /// Once quiet: every user's balance of every asset is exactly what outside senders paid to
    /// their deposit address in successful transfers on the canonical chain: each credited
    /// once, none from a reorganized-out block, a failed transaction, another address, or the
    /// hot wallet (a gas top-up).
    async fn check_every_deposit_credited_once(&mut self, step: usize) -> Result<(), Failure> {
        let canonical = self.chain.canonical_transfers();
        for user in &self.users {
            for asset in ASSETS {
                let paid: Vec<_> = canonical
                    .iter()
                    .filter(|t| {
                        t.succeeded
                            && !t.from.as_str().eq_ignore_ascii_case(HOT_WALLET)
                            && t.asset_code == asset
                            && t.to.as_str().eq_ignore_ascii_case(&user.address)
                    })
                    .collect();
                let expected: u128 = paid.iter().map(|t| t.amount.units()).sum();
                let account = UserAccount::new(
                    self.tenant.clone(),
                    user.id.clone(),
                    AssetId::new(Network::Bsc, asset),
                );
                let balance = read(self.store.as_ref(), move |tx| {
                    ledger::user_balance(tx, &account)
                        .map_err(|e| custody_core::CoreError::Invariant(e.to_string()))
                })
                .await
                .map_err(|e| self.fail(step, format!("a balance cannot be read: {e}")))?;
                let held = balance.available.units() + balance.reserved.units();
                if held != expected {
                    return Err(self.fail(
                        step,
                        format!(
                            "{} holds {held} {asset} on the books; the canonical chain paid \
                             {expected} to {} in {} transfers",
                            user.id,
                            user.address,
                            paid.len()
                        ),
                    ));
                }
                self.report.credited += paid.len();
                self.report.credited_units += expected;
            }
        }
        Ok(())
    }
}

/// Runs every seed of `seeds`; the first failure, if any.
pub fn run_seeds(
    seeds: impl IntoIterator<Item = u64>,
    steps: usize,
) -> Result<Vec<Report>, Failure> {
    seeds.into_iter().map(|seed| run(seed, steps)).collect()
}

fn digest(lines: &[String]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in lines
        .iter()
        .flat_map(|l| l.bytes().chain(std::iter::once(b'\n')))
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
