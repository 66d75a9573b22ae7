//! `custody init`: a new data dir (config, database, a new or imported master seed).

use custody_core::keys::Mnemonic;
use custody_core::ports::store::read;
use custody_core::ports::Entropy;
use custody_core::secret::Secret;
use custody_runtime::system::OsEntropy;
use serde_json::json;

use crate::config::Config;
use crate::database::Database;
use crate::datadir::{DataDir, PASSPHRASE_CHARS_MIN, PASSPHRASE_ENV};
use crate::support::{passphrase_from_env, print_json, runtime, warn_insecure};
use crate::InitArgs;

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
    config.store.url = custody_store_postgres::database_url(&config.store)?
        .map(|u| custody_store_postgres::without_password(&u));
    dir.write_config(&config)?;
    dir.write_seed(mnemonic, passphrase, &OsEntropy)?;
    let store = Database::open(dir, &config)?;
    if store.is_shared() {
        let in_use = refuse_a_database_in_use(&store).and_then(|()| {
            crate::datadir::fingerprint(mnemonic).and_then(|f| store.check_seed(&f))
        });
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
