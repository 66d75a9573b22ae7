//! The commands. Each prints its machine-readable result as one JSON object on stdout and
//! every diagnostic on stderr, so scripts can read stdout as it is.

use std::collections::BTreeSet;
use std::sync::Arc;

use custody_cli::runtime::system::{OsEntropy, SystemClock};
use custody_cli::runtime::{pruner::Pruner, Background};
use custody_core::auth::credential::valid_tenant_id;
use custody_core::auth::{pin, Credential, Scope};
use custody_core::idempotency;
use custody_core::keys::Mnemonic;
use custody_core::ports::store::{read, write};
use custody_core::ports::{Clock, Entropy, Store};
use custody_core::secret::Secret;
use custody_http::{AppState, NetworkSettings};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use serde_json::json;

use crate::config::Config;
use crate::datadir::{DataDir, PASSPHRASE_CHARS_MIN, PASSPHRASE_ENV};
use crate::{CreateCredentialArgs, InitArgs, ServeArgs};

fn passphrase_from_env() -> Option<String> {
    std::env::var(PASSPHRASE_ENV).ok().filter(|p| !p.is_empty())
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

pub(crate) fn open_store(
    dir: &DataDir,
    config: &Config,
) -> Result<(Arc<SqliteStore>, crate::datadir::Unlocked), String> {
    let unlocked = dir.unlock(passphrase_from_env().as_deref())?;
    let options = StoreOptions {
        batch_max: config.store.batch_max,
        readers: config.store.readers,
        ..StoreOptions::default()
    };
    let store = SqliteStore::open(&dir.db_path(), options)
        .map_err(|e| format!("cannot open the database: {}", e.message))?;
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
        passphrase.as_deref()
    };
    let built = build_data_dir(&staging, &mnemonic, protection).and_then(|()| staging.move_to(dir));
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&staging.root);
        return Err(e);
    }
    if args.insecure_dev_seed {
        warn_insecure();
    }
    print_json(&json!({
        "data_dir": dir.root.display().to_string(),
        "config": dir.config_path().display().to_string(),
        "database": dir.db_path().display().to_string(),
        "seed": if args.insecure_dev_seed { "insecure-dev" } else { "passphrase" },
        "mnemonic_imported": args.mnemonic_file.is_some(),
        "schema_version": custody_store_sqlite::schema_version(),
    }))
}

/// Config, sealed seed and migrated database, in `dir`.
fn build_data_dir(
    dir: &DataDir,
    mnemonic: &Mnemonic,
    passphrase: Option<&str>,
) -> Result<(), String> {
    dir.create()?;
    dir.write_config(&Config::default_for_init())?;
    dir.write_seed(mnemonic, passphrase, &OsEntropy)?;
    let store = SqliteStore::open(&dir.db_path(), StoreOptions::default())
        .map_err(|e| format!("cannot create the database: {}", e.message))?;
    store.close();
    Ok(())
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    OsEntropy.fill(&mut buf);
    hex::encode(buf)
}

pub fn create_credential(dir: &DataDir, args: &CreateCredentialArgs) -> Result<(), String> {
    if !valid_tenant_id(&args.tenant) {
        return Err("--tenant must be 1 to 64 characters of A-Z a-z 0-9 - _ .".into());
    }
    let scopes: BTreeSet<Scope> = match &args.scopes {
        None => Scope::ALL.into_iter().collect(),
        Some(list) => list
            .iter()
            .map(|s| s.trim().parse::<Scope>())
            .collect::<Result<_, _>>()
            .map_err(|e| {
                format!(
                    "--scopes: {e}; known: {}",
                    Scope::ALL.map(|s| s.as_str()).join(",")
                )
            })?,
    };
    if args.rate_limit == 0 {
        return Err("--rate-limit must be at least 1".into());
    }
    let pin_hash = match &args.pin {
        Some(p) => {
            let mut salt = [0u8; 16];
            OsEntropy.fill(&mut salt);
            Some(Secret::new(pin::hash_pin(p, &salt)?))
        }
        None => None,
    };
    let totp_secret = args.totp.then(|| {
        let mut key = vec![0u8; 20];
        OsEntropy.fill(&mut key);
        Secret::new(key)
    });
    let hmac_secret = random_hex(32);
    let credential = Credential {
        id: custody_core::ports::clock::new_uuid(&OsEntropy),
        api_key: format!("ck_{}", random_hex(16)),
        tenant: custody_core::TenantId::parse(&args.tenant)
            .map_err(|e| format!("--tenant: {e}"))?,
        scopes,
        admin: args.admin,
        rate_limit: args.rate_limit,
        hmac_secret: Secret::new(hmac_secret.clone().into_bytes()),
        pin_hash,
        totp_secret,
        totp_last_step: None,
        created_at: SystemClock.now(),
        revoked_at: None,
    };
    let config = dir.load_config()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let to_store = credential.seal(&vault_of(&unlocked));
    runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            Ok(tx.insert_credential(&to_store)?)
        }))
        .map_err(|e| format!("cannot store the credential: {e}"))?;
    store.close();
    let mut out = json!({
        "api_key": credential.api_key,
        "hmac_secret": hmac_secret,
        "tenant": credential.tenant,
        "scopes": credential.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "admin": credential.admin,
        "rate_limit": credential.rate_limit,
    });
    if let Some(key) = &credential.totp_secret {
        out["totp_secret"] = json!(data_encoding::BASE32_NOPAD.encode(key.expose()));
    }
    print_json(&out)
}

/// The core's vault over the data dir's sealing key.
pub(crate) fn vault_of(unlocked: &crate::datadir::Unlocked) -> custody_core::vault::Vault {
    custody_core::vault::Vault::new(unlocked.sealing.clone(), Arc::new(OsEntropy))
}

fn credential_json(c: &custody_core::auth::StoredCredential) -> serde_json::Value {
    json!({
        "id": c.id,
        "api_key": c.api_key,
        "tenant": c.tenant,
        "scopes": c.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "admin": c.admin,
        "rate_limit": c.rate_limit,
        "pin": c.pin_hash.is_some(),
        "totp": c.totp_secret.is_some(),
        "created_at": c.created_at,
        "revoked_at": c.revoked_at,
    })
}

pub fn list_credentials(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let all = runtime()?
        .block_on(read(store.as_ref(), |tx| Ok(tx.list_credentials()?)))
        .map_err(|e| format!("cannot list credentials: {e}"))?;
    store.close();
    print_json(&json!({ "data": all.iter().map(credential_json).collect::<Vec<_>>() }))
}

pub fn revoke_credential(dir: &DataDir, api_key: &str) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let key = api_key.to_owned();
    let now = SystemClock.now();
    let revoked = runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            Ok(tx.revoke_credential(&key, now)?)
        }))
        .map_err(|e| format!("cannot revoke: {e}"))?;
    store.close();
    if !revoked {
        return Err(format!("no active credential has api key {api_key}"));
    }
    print_json(&json!({ "api_key": api_key, "revoked": true, "revoked_at": now }))
}

/// The set of reads' nonces of this process, from the store's fence and nonces. After an
/// unclean stop whose fence reaches into the current second, waits (a second or two) until it
/// has passed, so requests signed from now on are not in the band the fence refuses.
async fn start_nonce_set(
    store: &dyn Store,
    clock: &dyn Clock,
) -> Result<custody_core::auth::nonce_set::NonceSet, String> {
    let (fence, latest) = read(store, |tx| {
        Ok((tx.nonce_fence()?, tx.latest_nonce_expiry()?))
    })
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
    Ok(custody_core::auth::nonce_set::NonceSet::new(
        fence,
        latest,
        clock.now().unix_seconds(),
    ))
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
    // The seed is stretched and the master key derived once, here, never per request.
    let signer: Arc<dyn custody_core::ports::Signer> = Arc::new(
        custody_core::keys::HdSigner::from_seed(&unlocked.mnemonic.to_seed())
            .map_err(|e| format!("cannot load the master key: {e}"))?,
    );
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
        let nonces = Arc::new(custody_http::nonces::NonceGate::fenced(
            start_nonce_set(store.as_ref(), clock.as_ref()).await?,
        ));
        let chains = crate::chains::build(&config, &catalog)?;
        let watch = crate::chains::load_watch_set(store.as_ref()).await?;
        let mut hot_wallets = std::collections::BTreeMap::new();
        for network in custody_core::Network::ALL {
            let address = custody_core::wallet::hot_wallet_address(signer.as_ref(), network)
                .map_err(|e| format!("cannot derive the {network} hot wallet: {e}"))?;
            hot_wallets.insert(
                network,
                custody_core::withdrawal::HotWallet {
                    address,
                    path: custody_core::wallet::hot_wallet_path(network),
                },
            );
        }
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
            limits,
            limiter: custody_core::auth::RateLimiter::new(),
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
            custody_cli::runtime::webhooks::run(ports, settings, stop)
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
        );
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
        let reconciler = custody_cli::runtime::reconciler::Reconciler {
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            entropy: Arc::new(OsEntropy),
            chains: chains.sources.clone(),
            hot_wallets: hot_wallets.clone(),
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
        let nonce_log = custody_cli::runtime::nonce_log::NonceLog {
            gate: nonces,
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
        };
        background.spawn("nonce_log", move |stop| nonce_log.run(stop));
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
