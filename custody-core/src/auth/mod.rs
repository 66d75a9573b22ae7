//! Request authentication and authorization rules (interface §5, decisions §5).
//!
//! Order of checks, and why: the signature first, so a forged request learns nothing and never
//! consumes a nonce; then the timestamp window; then the nonce, which is the only check that
//! writes. Rate limiting counts authenticated requests of a credential.

pub mod canonical;
pub mod credential;
pub mod issue;
pub mod nonce_set;
pub mod pin;
pub mod rate_limit;
pub mod second_factor;
pub mod totp;

pub use canonical::{canonical_string, signature_hex, verify_signature};
pub use credential::{
    load_credential, Credential, CredentialReads, CredentialRepo, Scope, StoredCredential,
};
pub use rate_limit::{quote_budget, window_of, RateDecision, RateLimit, RateLimiter, WINDOW_S};

use crate::error::{ErrorCode, Refusal};
use crate::time::Timestamp;

/// Largest distance between the request's timestamp and our clock.
pub const TIMESTAMP_WINDOW_S: i64 = 300;
pub const NONCE_CHARS_MIN: usize = 16;
pub const NONCE_CHARS_MAX: usize = 128;
pub const IDEMPOTENCY_KEY_CHARS_MIN: usize = 8;
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 128;

/// The authentication headers of one request, as received.
#[derive(Debug, Clone, Copy)]
pub struct AuthHeaders<'a> {
    pub api_key: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub nonce: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
}

/// The parts of a request that the signature covers.
#[derive(Debug, Clone, Copy)]
pub struct SignedParts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub body: &'a [u8],
}

/// Headers that passed the format checks.
#[derive(Debug, Clone)]
pub struct CheckedHeaders<'a> {
    pub api_key: &'a str,
    pub timestamp_s: i64,
    pub timestamp_raw: &'a str,
    pub nonce: &'a str,
    pub signature: &'a str,
    pub idempotency_key: &'a str,
}

fn auth_failed(message: &str) -> Refusal {
    Refusal::new(ErrorCode::AuthenticationFailed, message)
}

/// Format checks that need no secret and write nothing.
pub fn check_headers<'a>(h: &AuthHeaders<'a>) -> Result<CheckedHeaders<'a>, Refusal> {
    let (Some(api_key), Some(timestamp_raw), Some(nonce), Some(signature)) =
        (h.api_key, h.timestamp, h.nonce, h.signature)
    else {
        return Err(auth_failed(
            "X-Service-Key, X-Service-Timestamp, X-Service-Nonce and X-Service-Signature are required",
        ));
    };
    let timestamp_s = if !timestamp_raw.is_empty()
        && timestamp_raw.len() <= 12
        && timestamp_raw.bytes().all(|b| b.is_ascii_digit())
    {
        timestamp_raw
            .parse::<i64>()
            .map_err(|_| auth_failed("X-Service-Timestamp is not valid"))?
    } else {
        return Err(auth_failed(
            "X-Service-Timestamp must be Unix time in seconds",
        ));
    };
    let nonce_chars = nonce.chars().count();
    if !(NONCE_CHARS_MIN..=NONCE_CHARS_MAX).contains(&nonce_chars) {
        return Err(auth_failed("X-Service-Nonce must be 16 to 128 characters"));
    }
    Ok(CheckedHeaders {
        api_key,
        timestamp_s,
        timestamp_raw,
        nonce,
        signature,
        idempotency_key: h.idempotency_key.unwrap_or(""),
    })
}

/// Verifies the signature with the credential's secret, then the timestamp window.
pub fn check_signature_and_window(
    credential: &Credential,
    headers: &CheckedHeaders<'_>,
    parts: &SignedParts<'_>,
    now: Timestamp,
) -> Result<(), Refusal> {
    if credential.revoked_at.is_some() {
        return Err(auth_failed("the credentials are not valid"));
    }
    let canonical = canonical_string(
        parts.method,
        parts.path,
        headers.timestamp_raw,
        headers.nonce,
        headers.idempotency_key,
        parts.body,
    );
    if !verify_signature(
        credential.hmac_secret.expose(),
        &canonical,
        headers.signature,
    ) {
        return Err(auth_failed("the credentials are not valid"));
    }
    if (now.unix_seconds() - headers.timestamp_s).abs() > TIMESTAMP_WINDOW_S {
        return Err(Refusal::new(
            ErrorCode::TimestampOutOfWindow,
            "X-Service-Timestamp is more than 300 seconds away from the server time",
        ));
    }
    Ok(())
}

/// When a nonce may be forgotten: after any timestamp it could be replayed with has left the
/// window on both sides.
pub fn nonce_expiry(headers: &CheckedHeaders<'_>, now: Timestamp) -> Timestamp {
    let latest = headers.timestamp_s.max(now.unix_seconds());
    Timestamp::from_unix_millis(0).plus_seconds(latest + TIMESTAMP_WINDOW_S + 1)
}

/// How long after its expiry a used nonce is kept: longer than the clocks of the instances
/// sharing a store (and the database's) may disagree. The expiry was set by the clock of the
/// instance that accepted the nonce, with a margin of one second; an instance whose clock runs
/// ahead by more would otherwise forget a nonce that the first one still accepts a replay of.
pub const NONCE_PRUNE_MARGIN_S: i64 = 120;

/// The expiry before which used nonces may be pruned at `now` (the pruning instance's clock):
/// `now` less [`NONCE_PRUNE_MARGIN_S`].
pub fn nonce_prune_horizon(now: Timestamp) -> Timestamp {
    now.plus_seconds(-NONCE_PRUNE_MARGIN_S)
}

/// Validates an `Idempotency-Key` header on a route that requires one.
pub fn check_idempotency_key(key: Option<&str>) -> Result<&str, Refusal> {
    let Some(key) = key else {
        return Err(Refusal::validation(
            "Idempotency-Key",
            "this header is required",
        ));
    };
    let n = key.chars().count();
    if !(IDEMPOTENCY_KEY_CHARS_MIN..=IDEMPOTENCY_KEY_CHARS_MAX).contains(&n) {
        return Err(Refusal::validation(
            "Idempotency-Key",
            "must be 8 to 128 characters",
        ));
    }
    if key.chars().any(|c| c.is_control()) {
        return Err(Refusal::validation(
            "Idempotency-Key",
            "must not contain control characters",
        ));
    }
    Ok(key)
}
