//! Issuing and revoking credentials (`auth::issue`) on the memory store: the secrets shown once
//! and never in the view, a revocation audited once.

use custody_core::auth::issue::*;
use custody_core::ports::store::{read, write};
use custody_core::secret::Secret;
use custody_core::tenant::TenantId;
use custody_core::time::Timestamp;
use custody_testkit::{block_on, CountingEntropy, MemoryStore};
use uuid::Uuid;

fn request(pin: Option<&str>, totp: bool) -> NewCredential {
    NewCredential {
        tenant: TenantId::parse("acme").unwrap(),
        scopes: check_scopes(&["wallets:read".into(), "wallets:write".into()]).unwrap(),
        admin: false,
        rate_limit: 60,
        pin: pin.map(|p| Secret::new(p.to_owned())),
        totp,
    }
}

#[test]
fn the_secrets_are_shown_once_and_never_in_the_view() {
    let entropy = CountingEntropy::new(1);
    let issued = issue(
        request(None, true),
        &entropy,
        Timestamp::from_unix_millis(5),
    )
    .unwrap();
    let shown = issued.shown_once();
    let secret = issued.hmac_secret.expose().clone();
    assert_eq!(secret.len(), 64);
    assert_eq!(shown["hmac_secret"], secret);
    let b32 = shown["totp_secret"].as_str().unwrap().to_owned();
    assert!(shown["totp_uri"]
        .as_str()
        .unwrap()
        .contains(&format!("secret={b32}&")));
    let view = serde_json::to_string(&CredentialView::of_credential(&issued.credential)).unwrap();
    assert!(!view.contains(&secret) && !view.contains(&b32));
    assert!(view.contains("\"totp\":true") && view.contains("\"status\":\"active\""));
}

#[test]
fn revoking_is_audited_once_and_refuses_unknown_keys() {
    let entropy = CountingEntropy::new(1);
    let store = MemoryStore::new();
    let issued = issue(
        request(Some("2468"), false),
        &entropy,
        Timestamp::from_unix_millis(5),
    )
    .unwrap();
    let vault = custody_core::vault::Vault::new(
        custody_core::vault::SealingKey::from_bytes([7; 32]),
        std::sync::Arc::new(CountingEntropy::new(1)),
    );
    let stored = issued.credential.seal(&vault);
    let key = stored.api_key.clone();
    let at = Timestamp::from_unix_millis(9);
    block_on(write(&store, move |tx| {
        record_issued(tx, Uuid::from_u128(1), "t", &stored, at)
    }))
    .unwrap();
    let k = key.clone();
    let v = block_on(write(&store, move |tx| {
        revoke(
            tx,
            Uuid::from_u128(2),
            "t",
            &CredentialRef::ApiKey(k.clone()),
            " lost ",
            at,
        )
    }))
    .unwrap();
    assert_eq!((v.status, v.revoked_at), ("revoked", Some(at)));
    let k = key.clone();
    let again = block_on(write(&store, move |tx| {
        revoke(
            tx,
            Uuid::from_u128(3),
            "t",
            &CredentialRef::ApiKey(k.clone()),
            "again",
            at,
        )
    }))
    .unwrap();
    assert_eq!(again, v);
    let audit = block_on(read(&store, |tx| {
        Ok(tx.list_audit(custody_core::page::Page::first(10))?)
    }))
    .unwrap()
    .unwrap();
    assert_eq!(
        audit
            .iter()
            .map(|a| (a.action.as_str(), a.reason.as_str()))
            .collect::<Vec<_>>(),
        [
            ("credential.revoke", "lost"),
            ("credential.create", "credential issued")
        ]
    );
    let missing = block_on(write(&store, move |tx| {
        revoke(
            tx,
            Uuid::from_u128(4),
            "t",
            &CredentialRef::Id(Uuid::from_u128(77)),
            "x",
            at,
        )
    }));
    assert!(
        matches!(missing, Err(custody_core::error::CoreError::Refused(r)) if r.code == custody_core::error::ErrorCode::NotFound)
    );
}
