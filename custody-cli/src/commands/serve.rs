//! `custody serve`: the API and every background loop, until a stop signal.

use std::sync::Arc;

use custody_core::idempotency;
use custody_core::ports::store::read;
use custody_core::ports::{Clock, Store};
use custody_http::{AppState, NetworkSettings};
use custody_runtime::system::{OsEntropy, SystemClock};
use custody_runtime::{pruner::Pruner, Background};
use serde_json::json;

use crate::config::Config;
use crate::datadir::DataDir;
use crate::support::{open_store, print_json, vault_of, warn_insecure};
use crate::ServeArgs;

/// The nonce set of this process, from the store's fence, used nonces and nonce log. After an
/// unclean stop whose fence reaches into the current second, waits (a second or two) until it
/// has passed, so requests signed from now on are not in the band the fence refuses.
async fn start_nonce_set(
    store: &dyn Store,
    clock: &dyn Clock,
) -> Result<custody_core::auth::nonce_set::NonceSet, String> {
    let fence = read(store, |tx| Ok(tx.nonce_fence()?))
        .await
        .map_err(|e| format!("cannot read the nonce fence: {e}"))?;
    if let Some(f) = fence.filter(|f| !f.clean) {
        let now_s = clock.now().unix_seconds();
        if f.high_s >= now_s {
            // Bounded: a fence far ahead (a clock set back) is refused as a band instead.
            let wait = u64::try_from(f.high_s - now_s + 1).unwrap_or(0).min(3);
            tracing::warn!(
                band_low_s = f.low_s,
                band_high_s = f.high_s,
                wait_s = wait,
                "the last run stopped uncleanly: requests signed in the fence's band are refused"
            );
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
        }
    }
    let set = custody_http::nonces::restore_set(store, clock.now().unix_seconds())
        .await
        .map_err(|e| format!("cannot read the nonce log: {e}"))?;
    tracing::info!(remembered = set.len(), "nonce set restored from the store");
    Ok(set)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutdown requested: draining in-flight requests");
}

pub fn serve(dir: &DataDir, args: &ServeArgs) -> Result<(), String> {
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    let swap_pairs = config.swaps.pairs(&catalog)?;
    let fee_policies = custody_core::withdrawal::fee_policies(&config.fee_policies, &catalog)?;
    let native_rates = custody_core::pricing::native_rates(&config.native_rates, &catalog)?;
    let native_rates_for_sweeps = native_rates.clone();
    // Held until serve returns: one server per data dir (see `DataDir::lock_for_serve`).
    let _serving = dir.lock_for_serve()?;
    let (store, unlocked) = open_store(dir, &config)?;
    if unlocked.insecure {
        warn_insecure();
    }
    let limiter = store.rate_limiter();
    let exclusive = store.exclusive();
    let shared = store.is_shared();
    // The seeds are stretched and the master keys derived once, here, never per request:
    // seed.json's and every seed a wallet migration imported (old addresses keep their keys).
    let signer: Arc<dyn custody_core::ports::Signer> =
        Arc::new(crate::seeds::load(store.as_ref(), &unlocked)?);
    let vault = Arc::new(vault_of(&unlocked));
    drop(unlocked);
    let limits = config.server.limits()?;
    let listen = args.listen.unwrap_or(config.server.listen);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let result = rt.block_on(async {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // Every job of every path goes through the guard: a broken invariant latches
        // kill_switch.global (custody_core::invariants).
        let guarded: Arc<dyn Store> = Arc::new(custody_core::invariants::InvariantGuard::new(
            store.clone() as Arc<dyn Store>,
            Arc::clone(&clock),
            Arc::new(OsEntropy),
        ));
        let store = guarded;
        // Reads' nonces are kept in memory under a durable fence only when this process alone
        // writes the store; instances sharing a database record every nonce in it before
        // answering, so a nonce used on one is refused by the others (decisions §16).
        let nonces = Arc::new(if shared {
            custody_http::nonces::NonceGate::shared_store()
        } else {
            custody_http::nonces::NonceGate::fenced(
                start_nonce_set(store.as_ref(), clock.as_ref()).await?,
            )
        });
        let chains = crate::chains::build(&config, &catalog)?;
        let watch = crate::chains::load_watch_set(store.as_ref()).await?;
        // Read once: a rotation (`custody treasury rotate`) takes effect at the next start.
        // New payments and sweeps use each network's active hot wallet; the retired ones are
        // watched (their transfers are the treasury's) and counted with the holdings.
        let hot_wallet_sets =
            crate::hot_wallets::hot_wallet_sets(store.as_ref(), signer.as_ref()).await?;
        let hot_wallets: std::collections::BTreeMap<_, _> = hot_wallet_sets
            .iter()
            .map(|(n, set)| (*n, set.active.clone()))
            .collect();
        let retired_hot_wallets = hot_wallet_sets
            .iter()
            .map(|(n, set)| (*n, set.retired.clone()))
            .collect();
        revoke_stale_approvals(store.as_ref(), &hot_wallets, &config).await?;
        // One registry for the server and the webhook loop: one /v1/metrics shows both.
        let metrics = Arc::new(custody_http::metrics::Metrics::new());
        let state = Arc::new(AppState {
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            entropy: Arc::new(OsEntropy),
            signer: Arc::clone(&signer),
            vault: Arc::clone(&vault),
            chains: chains.sources.clone(),
            scan_status: chains.status.clone(),
            holdings: chains.holdings.clone(),
            watch: Arc::clone(&watch),
            catalog: catalog.clone(),
            networks: custody_core::Network::ALL
                .iter()
                .map(|&n| NetworkSettings {
                    network: n,
                    chain_id: config.chain(n).chain_id,
                    confirmations: config.chain(n).confirmations,
                })
                .collect(),
            swap_pairs,
            fee_policies,
            native_rates,
            senders: chains.senders.clone(),
            dex: chains.dex.clone(),
            swap_router: Some(config.swaps.router_settings()?),
            hot_wallets: hot_wallets.clone(),
            retired_hot_wallets,
            limits,
            limiter: limiter.clone(),
            quotes: Arc::default(),
            nonces: Arc::clone(&nonces),
            credentials: custody_http::CredentialCache::default(),
            second_factors: custody_http::SecondFactorChecks::default(),
            inflight: idempotency::InFlight::new(),
            metrics: Arc::clone(&metrics),
        });
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        let mut background = Background::new();
        let (ports, settings) = custody_runtime::webhooks::delivery(
            Arc::clone(&store),
            Arc::clone(&clock),
            Arc::clone(&vault),
            metrics,
            &config.webhooks,
        )?;
        background.spawn("webhooks", move |stop| {
            custody_runtime::webhooks::run(ports, settings, stop)
        });
        crate::chains::start_scanners(
            &mut background,
            &chains,
            &config,
            &catalog,
            Arc::clone(&store),
            Arc::clone(&clock),
            Arc::new(OsEntropy),
            watch,
            &hot_wallet_sets,
            Arc::clone(&exclusive),
        )?;
        crate::chains::start_broadcasters(
            &mut background,
            &chains,
            &config,
            &catalog,
            (
                Arc::clone(&store),
                Arc::clone(&signer),
                Arc::clone(&clock),
                Arc::new(OsEntropy),
            ),
            exclusive,
        );
        crate::chains::start_sweepers(
            &mut background,
            &chains,
            &config,
            &catalog,
            &hot_wallets,
            &native_rates_for_sweeps,
            (
                Arc::clone(&store),
                Arc::clone(&signer),
                Arc::clone(&clock),
                Arc::new(OsEntropy),
            ),
        )?;
        let reconciler = custody_runtime::reconciler::Reconciler {
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            entropy: Arc::new(OsEntropy),
            chains: chains.sources.clone(),
            hot_wallets: hot_wallet_sets.clone(),
            catalog: Arc::new(catalog.clone()),
            every_ms: vec![
                (
                    custody_core::reconcile::Scope::Ledger,
                    config.reconciliation.ledger_every_ms,
                ),
                (
                    custody_core::reconcile::Scope::Treasury,
                    config.reconciliation.treasury_every_ms,
                ),
            ],
            poll_interval: std::time::Duration::from_millis(
                config.reconciliation.claim_interval_ms,
            ),
            lease: std::time::Duration::from_millis(config.reconciliation.lease_ms),
        };
        background.spawn("reconciler", move |stop| reconciler.run(stop));
        let pruner = Pruner {
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            interval: std::time::Duration::from_secs(60),
        };
        background.spawn("pruner", move |stop| pruner.run(stop));
        if !shared {
            let nonce_log = custody_runtime::nonce_log::NonceLog {
                gate: nonces,
                store: Arc::clone(&store),
                clock: Arc::clone(&clock),
            };
            background.spawn("nonce_log", move |stop| nonce_log.run(stop));
        }
        tracing::info!(listen = %local, "serving");
        print_json(&json!({ "listening": format!("http://{local}/v1") }))?;
        let served = custody_http::serve(listener, state, shutdown_signal()).await;
        // Attempts in flight get a few seconds to be recorded; any left are sent again after
        // the next start (same id), once their lease runs out.
        background.stop(std::time::Duration::from_secs(5)).await;
        served.map_err(|e| format!("server error: {e}"))
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    store.close();
    tracing::info!("stopped");
    result
}

/// Queues an `approve(0)` of every router the BSC hot wallet approved other than the one
/// configured now (`swap::revoke_stale_approvals`): an approval without limit must not
/// outlive a router change. The broadcaster sends them.
async fn revoke_stale_approvals(
    store: &dyn custody_core::ports::Store,
    hot_wallets: &std::collections::BTreeMap<
        custody_core::Network,
        custody_core::withdrawal::HotWallet,
    >,
    config: &Config,
) -> Result<(), String> {
    let Some(hot) = hot_wallets.get(&custody_core::Network::Bsc).cloned() else {
        return Ok(());
    };
    let router = config.swaps.router_settings()?.router;
    let now = SystemClock.now();
    let queued = custody_core::ports::store::write(store, move |tx| {
        custody_core::swap::revoke_stale_approvals(tx, &OsEntropy, &hot, &router, now)
    })
    .await
    .map_err(|e| format!("cannot revoke the approvals of a former router: {e}"))?;
    if !queued.is_empty() {
        tracing::warn!(
            count = queued.len(),
            "approvals of a former swap router queued for revocation"
        );
    }
    Ok(())
}
