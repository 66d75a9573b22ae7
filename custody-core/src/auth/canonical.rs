//! The canonical string and its HMAC-SHA256 signature (interface §5).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Six elements joined by LF: method, exact path (with `/v1`, without query), timestamp,
/// nonce, idempotency key (empty when the request has none), hex SHA-256 of the body bytes.
pub fn canonical_string(
    method: &str,
    path: &str,
    timestamp: &str,
    nonce: &str,
    idempotency_key: &str,
    body: &[u8],
) -> String {
    let body_hash = hex::encode(Sha256::digest(body));
    format!("{method}\n{path}\n{timestamp}\n{nonce}\n{idempotency_key}\n{body_hash}")
}

/// Lowercase hex HMAC-SHA256 of `message` under `secret`.
pub fn signature_hex(secret: &[u8], message: &str) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Compares the presented signature with the expected one in constant time. The presented
/// value must be lowercase hex, as the contract says.
pub fn verify_signature(secret: &[u8], canonical: &str, presented: &str) -> bool {
    let expected = signature_hex(secret, canonical);
    expected.len() == presented.len() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}
