//! The commands. Each prints its machine-readable result as one JSON object on stdout and
//! every diagnostic on stderr, so scripts can read stdout as it is.

use std::collections::BTreeSet;
use std::sync::Arc;

use custody_core::auth::Scope;
use custody_core::idempotency;
use custody_core::keys::Mnemonic;
use custody_core::ports::store::{read, write};
use custody_core::ports::{Clock, Entropy, Store};
use custody_core::secret::Secret;
use custody_http::{AppState, NetworkSettings};
use custody_runtime::system::{OsEntropy, SystemClock};
use custody_runtime::{pruner::Pruner, Background};
use serde_json::json;

use crate::config::Config;
use crate::database::Database;
use crate::datadir::{DataDir, PASSPHRASE_CHARS_MIN, PASSPHRASE_ENV};
use crate::{CreateCredentialArgs, InitArgs, ServeArgs};

/// The passphrase, taken out of the environment once at start-up ([`take_passphrase`]).
static PASSPHRASE: std::sync::OnceLock<Option<zeroize::Zeroizing<String>>> =
    std::sync::OnceLock::new();

/// Moves `CUSTODY_PASSPHRASE` out of the environment; `main` calls it before any thread starts.
pub(crate) fn take_passphrase() {
    PASSPHRASE.get_or_init(|| custody_cli::harden::take_secret_env(PASSPHRASE_ENV));
}

fn passphrase_from_env() -> Option<zeroize::Zeroizing<String>> {
    PASSPHRASE
        .get_or_init(|| custody_cli::harden::take_secret_env(PASSPHRASE_ENV))
        .clone()
}

pub(crate) fn print_json(value: &serde_json::Value) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value).map_err(|e| e.to_string())?;
    writeln!(out)
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// The store `config` selects (see [`Database`]) and the unlocked seed of `dir`.
pub(crate) fn open_store(
    dir: &DataDir,
    config: &Config,
) -> Result<(Arc<Database>, crate::datadir::Unlocked), String> {
    let passphrase = passphrase_from_env();
    let unlocked = dir.unlock(passphrase.as_ref().map(|p| p.as_str()))?;
    let store = Database::open(dir, config)?;
    let bound = crate::seeds::fingerprint(&unlocked.mnemonic).and_then(|f| store.check_seed(&f));
    if let Err(e) = bound {
        store.close();
        return Err(e);
    }
    Ok((Arc::new(store), unlocked))
}

fn warn_insecure() {
    eprintln!(
        "WARNING: this data dir uses --insecure-dev-seed: the master seed and every API secret \
         can be read by anyone who can read the data dir. Never hold real funds with it."
    );
}

pub fn init(dir: &DataDir, args: &InitArgs) -> Result<(), String> {
    let passphrase = passphrase_from_env();
    if !args.insecure_dev_seed {
        match &passphrase {
            None => {
                return Err(format!(
                    "set {PASSPHRASE_ENV} to encrypt the master seed, or pass --insecure-dev-seed for local use"
                ))
            }
            Some(p) if p.chars().count() < PASSPHRASE_CHARS_MIN => {
                return Err(format!("{PASSPHRASE_ENV} must be at least {PASSPHRASE_CHARS_MIN} characters"))
            }
            Some(_) => {}
        }
    }
    let mnemonic = match &args.mnemonic_file {
        Some(path) => {
            let text = Secret::new(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            );
            Mnemonic::parse(text.expose().trim()).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => {
            let mut entropy = Secret::new([0u8; 32]);
            OsEntropy.fill(entropy.expose_mut());
            Mnemonic::from_entropy(entropy.expose())
        }
    };
    // Built in a sibling directory and renamed into place at the end, so an interrupted init
    // leaves no half-made data dir behind.
    dir.check_free()?;
    let staging = dir.staging();
    let protection = if args.insecure_dev_seed {
        None
    } else {
        passphrase.as_ref().map(|p| p.as_str())
    };
    let built = build_data_dir(&staging, &mnemonic, protection)
        .and_then(|opened| staging.move_to(dir).map(|()| opened));
    let (shared, schema_version) = match built {
        Ok(opened) => opened,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging.root);
            return Err(e);
        }
    };
    if args.insecure_dev_seed {
        warn_insecure();
    }
    print_json(&json!({
        "data_dir": dir.root.display().to_string(),
        "config": dir.config_path().display().to_string(),
        "database": shared.unwrap_or_else(|| dir.db_path().display().to_string()),
        "seed": if args.insecure_dev_seed { "insecure-dev" } else { "passphrase" },
        "mnemonic_imported": args.mnemonic_file.is_some(),
        "schema_version": schema_version,
    }))
}

/// Config, sealed seed and migrated database, in `dir`; answers the shared database (if any) and
/// the schema version. With `CUSTODY_DATABASE_URL` set, the database is that PostgreSQL one
/// (its URL recorded as `[store] url`) and the data dir holds no SQLite file.
fn build_data_dir(
    dir: &DataDir,
    mnemonic: &Mnemonic,
    passphrase: Option<&str>,
) -> Result<(Option<String>, usize), String> {
    dir.create()?;
    let mut config = Config::default_for_init();
    // Without its password: the data dir is copied to every instance's machine. At run time the
    // password comes from CUSTODY_DATABASE_URL or CUSTODY_DATABASE_PASSWORD.
    config.store.url = config
        .store
        .database_url()?
        .map(|u| crate::config::without_password(&u));
    dir.write_config(&config)?;
    dir.write_seed(mnemonic, passphrase, &OsEntropy)?;
    let store = Database::open(dir, &config)?;
    if store.is_shared() {
        let in_use = refuse_a_database_in_use(&store)
            .and_then(|()| crate::seeds::fingerprint(mnemonic).and_then(|f| store.check_seed(&f)));
        if in_use.is_err() {
            store.close();
        }
        in_use?;
    }
    let opened = (
        store.is_shared().then(|| store.describe()),
        store.schema_version(),
    );
    store.close();
    Ok(opened)
}

/// A shared database that already holds a service's records belongs to that service's seed:
/// a new seed would derive other addresses and could not sign for its wallets. Its instances
/// are added by copying its data dir, never by another `init`.
fn refuse_a_database_in_use(store: &Database) -> Result<(), String> {
    let in_use = runtime()?
        .block_on(read(store, |tx| {
            let mut used = !tx.list_credentials()?.is_empty();
            for network in custody_core::Network::ALL {
                used |= !tx.wallet_addresses(network)?.is_empty();
            }
            Ok(used)
        }))
        .map_err(|e| format!("cannot read the database: {e}"))?;
    if in_use {
        return Err(format!(
            "the database {} already holds a service's credentials or wallets: copy that \
             service's data dir to add an instance (a new seed could not sign for its wallets)",
            store.describe()
        ));
    }
    Ok(())
}

pub fn create_credential(dir: &DataDir, args: &CreateCredentialArgs) -> Result<(), String> {
    use custody_core::auth::issue::{self, NewCredential};
    let tenant =
        custody_core::TenantId::parse(&args.tenant).map_err(|e| format!("--tenant: {e}"))?;
    let scopes: BTreeSet<Scope> = match &args.scopes {
        None => Scope::ALL.into_iter().collect(),
        Some(list) => {
            let names: Vec<String> = list.iter().map(|s| s.trim().to_owned()).collect();
            issue::check_scopes(&names).map_err(|issues| {
                let why: Vec<_> = issues.into_iter().map(|(_, issue)| issue).collect();
                format!("--scopes: {}", why.join("; "))
            })?
        }
    };
    let rate_limit = issue::check_rate_limit(u64::from(args.rate_limit))
        .map_err(|e| format!("--rate-limit {e}"))?;
    let request = NewCredential {
        tenant,
        scopes,
        admin: args.admin,
        rate_limit,
        pin: args.pin.clone().map(Secret::new),
        totp: args.totp,
    };
    let issued =
        issue::issue(request, &OsEntropy, SystemClock.now()).map_err(|e| format!("--pin {e}"))?;
    let config = dir.load_config()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let to_store = issued.credential.seal(&vault_of(&unlocked));
    // Not audited: the operator holding the data dir is the root of trust that makes the first
    // admin key (the API's creations are audited, `credentials.create` in /admin/audit).
    runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            Ok(tx.insert_credential(&to_store)?)
        }))
        .map_err(|e| format!("cannot store the credential: {e}"))?;
    store.close();
    print_json(&issued.shown_once())
}

/// Who the audit trail names for a command run from a shell.
pub(crate) fn cli_actor() -> String {
    format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".into())
    )
}

/// The core's vault over the data dir's sealing key.
pub(crate) fn vault_of(unlocked: &crate::datadir::Unlocked) -> custody_core::vault::Vault {
    custody_core::vault::Vault::new(unlocked.sealing.clone(), Arc::new(OsEntropy))
}

pub fn list_credentials(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let all = runtime()?
        .block_on(read(store.as_ref(), |tx| Ok(tx.list_credentials()?)))
        .map_err(|e| format!("cannot list credentials: {e}"))?;
    store.close();
    let views: Vec<_> = all
        .iter()
        .map(custody_core::auth::issue::CredentialView::of)
        .collect();
    print_json(&json!({ "data": views }))
}

pub fn revoke_credential(dir: &DataDir, api_key: &str) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let key = api_key.to_owned();
    let now = SystemClock.now();
    let audit_id = custody_core::ports::clock::new_uuid(&OsEntropy);
    let actor = cli_actor();
    let revoked = runtime()?.block_on(write(store.as_ref(), move |tx| {
        custody_core::auth::issue::revoke(
            tx,
            audit_id,
            &actor,
            &custody_core::auth::issue::CredentialRef::ApiKey(key.clone()),
            "revoked with the CLI",
            now,
        )
    }));
    store.close();
    match revoked {
        Ok(view) if view.revoked_at == Some(now) => {
            print_json(&json!({ "api_key": api_key, "revoked": true, "revoked_at": now }))
        }
        Ok(_) => Err(format!("no active credential has api key {api_key}")),
        Err(custody_core::error::CoreError::Refused(r))
            if r.code == custody_core::error::ErrorCode::NotFound =>
        {
            Err(format!("no active credential has api key {api_key}"))
        }
        Err(e) => Err(format!("cannot revoke: {e}")),
    }
}

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
    let swap_pairs = config.swap_pairs(&catalog)?;
    let fee_policies = config.fee_policies(&catalog)?;
    let native_rates = config.native_rates(&catalog)?;
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
            crate::treasury::hot_wallet_sets(store.as_ref(), signer.as_ref()).await?;
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
        let (ports, settings) = crate::webhooks::delivery(
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
