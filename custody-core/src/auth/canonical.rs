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
    let mut body_hash = [0u8; 64];
    hex::encode_to_slice(Sha256::digest(body), &mut body_hash).expect("64 hex digits");
    let parts = [method, path, timestamp, nonce, idempotency_key];
    // Built in one allocation: this runs for every signed request.
    let mut s = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 64);
    for part in parts {
        s.push_str(part);
        s.push('\n');
    }
    s.push_str(std::str::from_utf8(&body_hash).expect("hex is ASCII"));
    s
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
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(canonical.as_bytes());
    let mut expected = [0u8; 64];
    hex::encode_to_slice(mac.finalize().into_bytes(), &mut expected).expect("64 hex digits");
    expected.len() == presented.len() && bool::from(expected.as_slice().ct_eq(presented.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values computed with Python's hashlib/hmac, not with this module:
    //   c = "\n".join([m, p, t, n, i, hashlib.sha256(b).hexdigest()])
    //   hmac.new(secret.encode(), c.encode(), hashlib.sha256).hexdigest()
    #[test]
    fn get_without_idempotency_key_matches_the_reference() {
        let c = canonical_string(
            "GET",
            "/v1/assets",
            "1795313474",
            "0123456789abcdef",
            "",
            b"",
        );
        assert_eq!(
            c,
            "GET\n/v1/assets\n1795313474\n0123456789abcdef\n\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let secret = "f3c6d20e87539f3d087a2b672a78a95d842070ea27511f835366589a25d4035b";
        let sig = "eeecc77311bbbbaf7140a7bc50e16dc1ef9b79ca902abae8b00fc349e2455dd1";
        assert_eq!(signature_hex(secret.as_bytes(), &c), sig);
        assert!(verify_signature(secret.as_bytes(), &c, sig));
    }

    #[test]
    fn post_with_body_and_key_matches_the_reference() {
        let body = br#"{"external_user_id":"u1","network":"BSC"}"#;
        let c = canonical_string(
            "POST",
            "/v1/wallets",
            "1795313474",
            "nonce-ümlaut-000001",
            "idem-key-0001",
            body,
        );
        assert!(c.ends_with("c3c8809416c20e42a60511d9f0e0b33705fa4edaa627a3292e03e98d2e8e016e"));
        let sig = "9b8adccbd33793057f68697d4c9b1d171e0ce4c3d8b86210ddc572765a5c4c6b";
        assert!(verify_signature(b"secret", &c, sig));
    }

    #[test]
    fn rejects_uppercase_truncated_and_other_signatures() {
        let c = canonical_string("GET", "/v1/assets", "1", "0123456789abcdef", "", b"");
        let good = signature_hex(b"k", &c);
        assert!(verify_signature(b"k", &c, &good));
        assert!(!verify_signature(b"k", &c, &good.to_uppercase()));
        assert!(!verify_signature(b"k", &c, &good[..63]));
        assert!(!verify_signature(b"k", &c, ""));
        assert!(!verify_signature(b"other", &c, &good));
    }
}
