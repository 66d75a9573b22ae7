//! `custody outgoing cancel`: an operator's way out for a payment that can never proceed,
//! recorded for the running service to carry out (`outgoing::request_cancel`); prints the
//! transaction as it stands.

use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::write;
use custody_core::ports::Clock;
use custody_runtime::system::{OsEntropy, SystemClock};

use crate::datadir::DataDir;
use crate::support::{open_store, print_json, runtime};

pub fn cancel(dir: &DataDir, id: &str, reason: &str) -> Result<(), String> {
    let id: uuid::Uuid = id
        .parse()
        .map_err(|_| format!("{id:?} is not an outgoing transaction id (a UUID)"))?;
    let actor = format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".into())
    );
    let (reason, audit_id, now) = (reason.to_owned(), new_uuid(&OsEntropy), SystemClock.now());
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let out = runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            custody_core::outgoing::request_cancel(tx, audit_id, &actor, id, &reason, now)
        }))
        .map_err(|e| match e {
            custody_core::CoreError::Refused(r) => crate::support::refusal_text(&r),
            other => format!("the cancel failed: {other}"),
        })?;
    store.close();
    print_json(&out.operator_view())
}
