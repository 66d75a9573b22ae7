//! What every command shares: the passphrase taken from the environment at start-up, the
//! store and seed of a data dir, the JSON line a command prints, who the audit trail names.
//! Commands import from here; nothing here imports a command.

use std::sync::Arc;

use custody_runtime::system::OsEntropy;

use crate::config::Config;
use crate::database::Database;
use crate::datadir::{DataDir, PASSPHRASE_ENV};

/// The passphrase, taken out of the environment once at start-up ([`take_passphrase`]).
static PASSPHRASE: std::sync::OnceLock<Option<zeroize::Zeroizing<String>>> =
    std::sync::OnceLock::new();

/// Moves `CUSTODY_PASSPHRASE` out of the environment; `main` calls it before any thread starts.
pub(crate) fn take_passphrase() {
    PASSPHRASE.get_or_init(|| custody_cli::harden::take_secret_env(PASSPHRASE_ENV));
}

pub(crate) fn passphrase_from_env() -> Option<zeroize::Zeroizing<String>> {
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
    let bound = crate::datadir::fingerprint(&unlocked.mnemonic).and_then(|f| store.check_seed(&f));
    if let Err(e) = bound {
        store.close();
        return Err(e);
    }
    Ok((Arc::new(store), unlocked))
}

pub(crate) fn warn_insecure() {
    eprintln!(
        "WARNING: this data dir uses --insecure-dev-seed: the master seed and every API secret \
         can be read by anyone who can read the data dir. Never hold real funds with it."
    );
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

/// A refusal as one line: its code, message and each field's issue.
pub(crate) fn refusal_text(r: &custody_core::error::Refusal) -> String {
    let mut text = format!("{}: {}", r.code, r.message);
    for d in &r.details {
        text.push_str(&format!("; {}: {}", d.field, d.issue));
    }
    text
}
