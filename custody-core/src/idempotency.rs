//! Idempotency (decisions §6). A key is scoped to a tenant; its record holds a fingerprint of
//! the request and the exact response. The record is written in the same transaction as the
//! command's effects, and its uniqueness is a store constraint, not a cache.
//!
//! "In progress" is tracked in memory: the only writer is this process, so a key being executed
//! is known here, and a crash cannot leave a key stuck (the durable record is written with the
//! effects or not at all).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::error::{CoreError, CoreResult, ErrorCode, PortError, Refusal};
use crate::ports::store::{nested, WriteTx};
use crate::time::Timestamp;

/// How long a key is remembered.
pub const RETENTION_S: i64 = 24 * 60 * 60;

pub type Fingerprint = [u8; 32];

/// SHA-256 over method, path and SHA-256 of the body.
pub fn fingerprint(method: &str, path: &str, body: &[u8]) -> Fingerprint {
    let body_hash = Sha256::digest(body);
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(body_hash);
    h.finalize().into()
}

/// A stored response: status and exact body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub tenant: crate::tenant::TenantId,
    pub key: String,
    pub fingerprint: Fingerprint,
    pub response: StoredResponse,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

pub trait IdempotencyRepo: IdempotencyReads {
    /// Stores a record. MUST fail if a live record for (tenant, key) exists (a constraint);
    /// MUST replace an expired one.
    fn insert_idempotency_record(&mut self, record: &IdempotencyRecord) -> Result<(), PortError>;
    /// Forgets at most `limit` expired records, the earliest to expire first; returns how many.
    /// The caller runs it again, in a job of its own, while it forgets `limit`: a backlog (after
    /// an outage, or at a high request rate) is never one large job, whose savepoint journal and
    /// write lock would grow with it.
    fn prune_idempotency(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError>;
}

pub trait IdempotencyReads {
    /// The record of (tenant, key) if one exists and has not expired at `now`.
    fn idempotency_record(
        &mut self,
        tenant: &crate::tenant::TenantId,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<IdempotencyRecord>, PortError>;
}

/// What an idempotent execution came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran now; this is its response (already stored under the key).
    Executed(StoredResponse),
    /// The key was used before with the same request: the stored response, not re-executed.
    Replayed(StoredResponse),
}

/// Whether a refusal is a business outcome that is stored under the key (decisions §6), or a
/// condition the partner may retry the same key after (503s, throttling, authentication).
pub fn refusal_is_stored(code: ErrorCode) -> bool {
    use ErrorCode::*;
    !matches!(
        code,
        MalformedJson
            | AuthenticationFailed
            | TimestampOutOfWindow
            | ReplayDetected
            | PinRequired
            | InvalidPin
            | OtpRequired
            | InvalidOtp
            | Forbidden
            | MethodNotAllowed
            | PayloadTooLarge
            | RequestTimeout
            | ValidationFailed
            | RateLimited
            | InternalError
            | ChainUnavailable
            | Maintenance
            | KillSwitchActive
            | IdempotencyConflict
            | IdempotencyInProgress
    )
}

/// Keys being executed right now in this process.
#[derive(Debug, Default, Clone)]
pub struct InFlight {
    keys: Arc<Mutex<HashMap<(String, String), Fingerprint>>>,
}

/// Holds a key while its command runs; dropping it releases the key.
#[derive(Debug)]
pub struct InFlightGuard {
    keys: Arc<Mutex<HashMap<(String, String), Fingerprint>>>,
    entry: (String, String),
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.keys
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.entry);
    }
}

impl InFlight {
    pub fn new() -> Self {
        Self::default()
    }

    /// Claims (tenant, key) for this request, or says why it cannot.
    pub fn enter(
        &self,
        tenant: &str,
        key: &str,
        fp: Fingerprint,
    ) -> Result<InFlightGuard, Refusal> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let entry = (tenant.to_owned(), key.to_owned());
        if let Some(running) = keys.get(&entry) {
            return Err(if *running == fp {
                Refusal::new(
                    ErrorCode::IdempotencyInProgress,
                    "a request with this Idempotency-Key is still being executed",
                )
            } else {
                conflict()
            });
        }
        keys.insert(entry.clone(), fp);
        Ok(InFlightGuard {
            keys: Arc::clone(&self.keys),
            entry,
        })
    }
}

fn conflict() -> Refusal {
    Refusal::new(
        ErrorCode::IdempotencyConflict,
        "this Idempotency-Key was used with a different request",
    )
}

/// The body of one idempotent execution, run inside the store's write transaction: looks the
/// key up, runs `command` under a savepoint if the key is new, and stores its response (or its
/// stored refusal, rendered by `render_refusal`) under the key in the same transaction.
///
/// Refusals that are not stored (see [`refusal_is_stored`]) and port errors are returned as
/// `Err`: the whole job rolls back and the key stays free.
#[allow(clippy::too_many_arguments)]
pub fn run_in_tx(
    tx: &mut dyn WriteTx,
    tenant: &crate::tenant::TenantId,
    key: &str,
    fp: Fingerprint,
    now: Timestamp,
    command: impl FnOnce(&mut dyn WriteTx) -> CoreResult<StoredResponse>,
    render_refusal: impl FnOnce(&Refusal) -> StoredResponse,
) -> CoreResult<Outcome> {
    if let Some(existing) = tx.idempotency_record(tenant, key, now)? {
        return if existing.fingerprint == fp {
            Ok(Outcome::Replayed(existing.response))
        } else {
            Err(conflict().into())
        };
    }
    let response = match nested(tx, command) {
        Ok(r) => r,
        Err(CoreError::Refused(r)) if refusal_is_stored(r.code) => render_refusal(&r),
        Err(e) => return Err(e),
    };
    tx.insert_idempotency_record(&IdempotencyRecord {
        tenant: tenant.clone(),
        key: key.to_owned(),
        fingerprint: fp,
        response: response.clone(),
        created_at: now,
        expires_at: now.plus_seconds(RETENTION_S),
    })?;
    Ok(Outcome::Executed(response))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_covers_method_path_and_body() {
        let a = fingerprint("POST", "/v1/wallets", b"{}");
        assert_ne!(a, fingerprint("PUT", "/v1/wallets", b"{}"));
        assert_ne!(a, fingerprint("POST", "/v1/wallet", b"{}"));
        assert_ne!(a, fingerprint("POST", "/v1/wallets", b"{ }"));
        assert_eq!(a, fingerprint("POST", "/v1/wallets", b"{}"));
    }

    #[test]
    fn in_flight_key_blocks_until_released() {
        let f = InFlight::new();
        let fp = [1u8; 32];
        let g = f.enter("t", "key-0001", fp).unwrap();
        assert_eq!(
            f.enter("t", "key-0001", fp).unwrap_err().code,
            ErrorCode::IdempotencyInProgress
        );
        assert_eq!(
            f.enter("t", "key-0001", [2u8; 32]).unwrap_err().code,
            ErrorCode::IdempotencyConflict
        );
        assert!(
            f.enter("other", "key-0001", fp).is_ok(),
            "keys are per tenant"
        );
        drop(g);
        assert!(f.enter("t", "key-0001", fp).is_ok());
    }
}
