//! Used nonces in a store several instances share, each pruning by its own clock: the
//! database's clock bounds what any of them forgets.

use std::collections::BTreeSet;

use custody_core::auth::{StoredCredential, NONCE_PRUNE_MARGIN_S, TIMESTAMP_WINDOW_S};
use custody_core::ports::store::write;
use custody_core::time::Timestamp;
use custody_core::vault::Sealed;
use custody_core::TenantId;
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgStore, StoreOptions};
use uuid::Uuid;

fn wall_clock() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    Timestamp::from_unix_millis(i64::try_from(ms).unwrap())
}

/// Whether `nonce` is still used (a replay would be refused); asked in a job that rolls back.
async fn still_used(store: &PgStore, credential: Uuid, expires: Timestamp) -> bool {
    let e = write(store, move |tx| {
        let fresh = tx.use_nonce(credential, "n-ahead", expires)?;
        Err::<(), _>(
            custody_core::error::PortError::permanent("test", if fresh { "fresh" } else { "used" })
                .into(),
        )
    })
    .await
    .unwrap_err();
    e.to_string().contains("used")
}

/// An instance whose clock runs an hour ahead of the database's prunes: the nonce another
/// instance accepted just now (its expiry within the window of the database's time) stays.
#[tokio::test]
async fn an_instance_clock_far_ahead_of_the_database_prunes_no_nonce_still_in_its_window() {
    let schema = TestSchema::new();
    let store = PgStore::open(&schema.url(), StoreOptions::default()).expect("the store opens");
    let credential = Uuid::from_u128(7);
    let now = wall_clock();
    let expires = now.plus_seconds(TIMESTAMP_WINDOW_S + 1);
    write(&store, move |tx| {
        tx.insert_credential(&StoredCredential {
            id: credential,
            api_key: "ak_ahead".into(),
            tenant: TenantId::parse("acme").unwrap(),
            scopes: BTreeSet::new(),
            admin: false,
            rate_limit: 600,
            hmac_secret: Sealed::from_stored(vec![1]),
            pin_hash: None,
            totp_secret: None,
            totp_last_step: None,
            created_at: now,
            revoked_at: None,
        })?;
        Ok(tx.use_nonce(credential, "n-ahead", expires)?)
    })
    .await
    .unwrap();
    let ahead = now.plus_seconds(3_600);
    let pruned = write(&store, move |tx| Ok(tx.prune_nonces(ahead, 100)?))
        .await
        .unwrap();
    assert_eq!(pruned, 0, "nothing expired by the database's clock");
    assert!(still_used(&store, credential, expires).await);
    // Expired by the database's clock less the margin too: forgotten.
    let old_expiry = now.plus_seconds(-NONCE_PRUNE_MARGIN_S - 10);
    write(&store, move |tx| {
        Ok(tx.use_nonce(credential, "n-old", old_expiry)?)
    })
    .await
    .unwrap();
    let pruned = write(&store, move |tx| Ok(tx.prune_nonces(ahead, 100)?))
        .await
        .unwrap();
    assert_eq!(pruned, 1, "the nonce that expired long ago");
    store.close();
}
