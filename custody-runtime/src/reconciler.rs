//! The reconciler: schedules LEDGER and TREASURY runs per `[reconciliation]` and carries out
//! every scheduled run, whoever asked for it (`POST /v1/admin/reconcile` or the schedule).
//!
//! Each tick: schedule what is due (`reconcile::schedule_due`, one write job per scope, so
//! instances sharing the store schedule a period once), then claim runs one at a time under a
//! lease (`reconcile::claim`), so of several instances exactly one carries out each, and a run
//! whose runner died is claimed again once its lease ran out. The decisions are the core's:
//! LEDGER is `ledger::reconcile` (what `custody ledger reconcile` runs), TREASURY is
//! `reconcile::treasury::decide` over `treasury::rows`; the result, with its alerts and the
//! automatic `treasury_shortfall.*` controls, is written in one transaction fenced by the lease.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod config;
pub use config::ReconciliationConfig;

use custody_core::error::CoreResult;
use custody_core::ports::clock::{new_uuid, Entropy};
use custody_core::ports::store::{read, write};
use custody_core::ports::{ChainSource, Clock, Store};
use custody_core::reconcile::{self, Reconciliation, Scope};
use custody_core::wallet::hot::HotWalletSet;
use custody_core::{AssetCatalog, Network};
use tokio::sync::watch;

/// Runs carried out per tick at most, so a backlog cannot keep the loop from its stop signal.
const RUNS_PER_TICK: usize = 8;

pub struct Reconciler {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    /// The networks with endpoints; TREASURY compares only those (nothing else can be read).
    pub chains: BTreeMap<Network, Arc<dyn ChainSource>>,
    /// Every hot wallet of each network: a retired one's holdings are still the treasury's.
    pub hot_wallets: BTreeMap<Network, HotWalletSet>,
    pub catalog: Arc<AssetCatalog>,
    /// Per scope, the period of its own runs in ms; 0 schedules none (requests still run).
    pub every_ms: Vec<(Scope, u64)>,
    pub poll_interval: Duration,
    /// How long a claimed run is this runner's before another may take it over.
    pub lease: Duration,
}

impl Reconciler {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let started = self.clock.now();
        loop {
            if let Err(e) = self.tick(started, &shutdown).await {
                tracing::warn!(error = %e, "reconciler tick failed");
            }
            tokio::select! {
                () = tokio::time::sleep(self.poll_interval) => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                break;
            }
        }
    }

    /// Schedules what is due (a scope's first run one period after `started`), then carries
    /// out due runs.
    pub async fn tick(
        &self,
        started: custody_core::Timestamp,
        shutdown: &watch::Receiver<bool>,
    ) -> CoreResult<()> {
        for &(scope, every) in &self.every_ms {
            if every == 0 {
                continue;
            }
            let id = new_uuid(self.entropy.as_ref());
            let now = self.clock.now();
            let every = i64::try_from(every).unwrap_or(i64::MAX);
            if let Some(run) = write(self.store.as_ref(), move |tx| {
                reconcile::schedule_due(tx, id, scope, every, started, now)
            })
            .await?
            {
                tracing::info!(id = %run.id, scope = scope.as_str(), "reconciliation scheduled");
            }
        }
        for _ in 0..RUNS_PER_TICK {
            if *shutdown.borrow() {
                break;
            }
            let now = self.clock.now();
            let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
            let Some(run) = write(self.store.as_ref(), move |tx| {
                reconcile::claim(tx, now, lease_ms)
            })
            .await?
            else {
                break;
            };
            self.carry_out(run).await?;
        }
        Ok(())
    }

    /// Carries out one claimed run and records its result (or why it failed).
    async fn carry_out(&self, run: Reconciliation) -> CoreResult<()> {
        let result = match run.scope {
            Scope::Ledger => self.ledger(&run).await,
            Scope::Treasury => self.treasury(&run).await,
        };
        let done = match result {
            Ok(done) => done,
            Err(reason) => {
                tracing::warn!(id = %run.id, scope = run.scope.as_str(), %reason, "reconciliation failed");
                let now = self.clock.now();
                write(self.store.as_ref(), move |tx| {
                    reconcile::finish_failed(tx, &run, &reason, now)
                })
                .await?
            }
        };
        if done.balanced == Some(false) {
            tracing::warn!(id = %done.id, scope = done.scope.as_str(), discrepancies = done.discrepancies.len(), "reconciliation found discrepancies");
        } else {
            tracing::info!(id = %done.id, scope = done.scope.as_str(), status = done.status.as_str(), "reconciliation finished");
        }
        Ok(())
    }

    async fn ledger(&self, run: &Reconciliation) -> Result<Reconciliation, String> {
        let report = read(self.store.as_ref(), |tx| {
            Ok(custody_core::ledger::reconcile(tx)?)
        })
        .await
        .map_err(|e| format!("the ledger could not be read: {e}"))?;
        let (run, entropy, now) = (run.clone(), Arc::clone(&self.entropy), self.clock.now());
        write(self.store.as_ref(), move |tx| {
            reconcile::finish_ledger(tx, entropy.as_ref(), &run, &report, now)
        })
        .await
        .map_err(|e| format!("the result could not be recorded: {e}"))
    }

    /// One read of the treasury figures and the decision over them.
    async fn read_and_decide(
        &self,
        hot: &BTreeMap<custody_core::Network, HotWalletSet>,
    ) -> Result<reconcile::treasury::Outcome, String> {
        let rows =
            custody_core::treasury::rows_of(hot, &self.chains, &self.catalog, self.store.as_ref())
                .await
                .map_err(|e| format!("the treasury could not be read: {e}"))?;
        let figures: Vec<_> = rows.into_iter().flat_map(|r| r.assets).collect();
        Ok(reconcile::treasury::decide(&figures))
    }

    async fn treasury(&self, run: &Reconciliation) -> Result<Reconciliation, String> {
        let hot: BTreeMap<_, _> = self
            .hot_wallets
            .iter()
            .filter(|(n, _)| self.chains.contains_key(n))
            .map(|(n, h)| (*n, h.clone()))
            .collect();
        if hot.is_empty() {
            return Err("no network has an endpoint: there is nothing on chain to compare".into());
        }
        let mut outcome = self.read_and_decide(&hot).await?;
        if !outcome.shortfalls.is_empty() {
            // Read again before stopping anything: a race between reads is not a shortfall.
            let again = self.read_and_decide(&hot).await?;
            outcome = reconcile::treasury::confirm(outcome, again);
        }
        let (run, entropy, now) = (run.clone(), Arc::clone(&self.entropy), self.clock.now());
        write(self.store.as_ref(), move |tx| {
            reconcile::finish_treasury(tx, entropy.as_ref(), &run, &outcome, now)
        })
        .await
        .map_err(|e| format!("the result could not be recorded: {e}"))
    }
}
