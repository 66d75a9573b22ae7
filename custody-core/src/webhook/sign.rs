//! Signing a delivery (interface §6): `X-Service-Signature: sha256=<hex>` where the hex is the
//! lowercase HMAC-SHA256, keyed with the tenant's webhook secret, of
//! `timestamp + "." + event_id + "." + raw_body`.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::ports::webhook::WebhookRequest;
use crate::time::Timestamp;

pub const HEADER_EVENT_ID: &str = "X-Service-Event-Id";
pub const HEADER_TIMESTAMP: &str = "X-Service-Timestamp";
pub const HEADER_SIGNATURE: &str = "X-Service-Signature";
pub const SIGNATURE_PREFIX: &str = "sha256=";

/// The signature header value for one delivery.
pub fn signature(secret: &[u8], timestamp: i64, event_id: Uuid, body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(event_id.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "{SIGNATURE_PREFIX}{}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// What a receiver does (interface §6, receiver side): recompute and compare in constant time.
pub fn verify(secret: &[u8], timestamp: &str, event_id: &str, body: &[u8], header: &str) -> bool {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(event_id.as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = format!(
        "{SIGNATURE_PREFIX}{}",
        hex::encode(mac.finalize().into_bytes())
    );
    expected.as_bytes().ct_eq(header.as_bytes()).into()
}

/// The POST of one attempt: the stored body bytes as they are, the event id, the attempt's
/// timestamp (Unix seconds, 10 digits until 2286) and the signature over all three.
pub fn prepare(
    url: &str,
    secret: &[u8],
    event_id: Uuid,
    body: &[u8],
    now: Timestamp,
) -> WebhookRequest {
    let ts = now.unix_seconds();
    WebhookRequest {
        url: url.to_owned(),
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            (HEADER_EVENT_ID.into(), event_id.to_string()),
            (HEADER_TIMESTAMP.into(), ts.to_string()),
            (
                HEADER_SIGNATURE.into(),
                signature(secret, ts, event_id, body),
            ),
        ],
        body: body.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer() {
        // HMAC-SHA256(key="whsec", "1700000000.00000000-0000-0000-0000-000000000001.{}"),
        // computed with `printf %s '...' | openssl dgst -sha256 -hmac whsec`.
        let id = Uuid::from_u128(1);
        let sig = signature(b"whsec", 1_700_000_000, id, b"{}");
        assert_eq!(
            sig,
            "sha256=3660c89241e03a7efb8d25ed1df5ab6a43e5f01d9f27925ba825b5a4b93104ae"
        );
    }

    #[test]
    fn prepare_signs_what_it_sends() {
        let id = Uuid::from_u128(7);
        let req = prepare(
            "https://hooks.example.com/in",
            b"secret",
            id,
            br#"{"id":"x"}"#,
            Timestamp::from_unix_millis(1_795_313_474_999),
        );
        let h = |name: &str| {
            req.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(h(HEADER_TIMESTAMP), "1795313474");
        assert_eq!(h(HEADER_EVENT_ID), id.to_string());
        let sig = h(HEADER_SIGNATURE);
        assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64);
        assert!(sig[7..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert!(verify(
            b"secret",
            "1795313474",
            &id.to_string(),
            &req.body,
            &sig
        ));
        assert!(!verify(
            b"secret",
            "1795313475",
            &id.to_string(),
            &req.body,
            &sig
        ));
        assert!(!verify(
            b"other",
            "1795313474",
            &id.to_string(),
            &req.body,
            &sig
        ));
    }
}
