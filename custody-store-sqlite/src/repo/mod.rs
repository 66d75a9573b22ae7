//! One file per repository trait of the core, all implemented on [`crate::tx::SqliteTx`].

mod alerts_controls;
mod audit;
mod credentials;
mod deposits;
mod idempotency;
mod ledger;
mod outbox;
mod outgoing;
mod reconciliations;
mod swaps;
mod sweeps;
mod wallet_migrations;
mod wallets;
mod webhooks;
mod withdrawals;

use custody_core::error::PortError;
use custody_core::time::Timestamp;
use uuid::Uuid;

pub(crate) fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

pub(crate) fn parse_uuid(s: &str) -> Result<Uuid, PortError> {
    Uuid::parse_str(s).map_err(|e| PortError::permanent("store", format!("bad uuid {s:?}: {e}")))
}

pub(crate) fn amount(s: &str) -> Result<custody_core::Amount, PortError> {
    custody_core::Amount::parse_units(s)
        .map_err(|e| PortError::permanent("store", format!("bad amount {s:?}: {e}")))
}

pub(crate) fn bad(what: &str, value: &str) -> PortError {
    PortError::permanent("store", format!("bad stored {what} {value:?}"))
}
