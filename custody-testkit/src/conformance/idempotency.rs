//! [`IdempotencyRepo`](custody_core::idempotency::IdempotencyRepo): records, expiry, replacement.

use std::sync::Arc;

use custody_core::error::{CoreError, ErrorCode, Refusal};
use custody_core::idempotency::{self, IdempotencyRecord, Outcome, StoredResponse};
use custody_core::ports::store::{write, Store};

use super::{assert_port_error, at, r, suite, tid, uid, w};

suite!(
    /// Idempotency records: live until they expire, stored once, replaced once expired.
    idempotency_suite {
        a_record_is_found_until_it_expires,
        a_live_key_is_stored_once,
        an_expired_record_is_replaced,
        pruning_forgets_expired_records,
        idempotent_commands_replay_conflict_and_store_business_refusals,
    }
);

fn record(tenant: &str, key: &str, fp: u8, created: i64, expires: i64) -> IdempotencyRecord {
    IdempotencyRecord {
        tenant: tid(tenant),
        key: key.to_owned(),
        fingerprint: [fp; 32],
        response: StoredResponse {
            status: 201,
            body: vec![b'{', fp, 0, 0xff, b'}'],
        },
        created_at: at(created),
        expires_at: at(expires),
    }
}

async fn a_record_is_found_until_it_expires(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let stored = record("acme", "key-0001", 1, 100, 200);
    let rec = stored.clone();
    w(s, move |tx| tx.insert_idempotency_record(&rec))
        .await
        .unwrap();
    let found = |tenant: &'static str, key: &'static str, now: i64| {
        r(s, move |tx| {
            tx.idempotency_record(&tid(tenant), key, at(now))
        })
    };
    assert_eq!(found("acme", "key-0001", 100).await, Some(stored.clone()));
    assert_eq!(found("acme", "key-0001", 199).await, Some(stored));
    assert_eq!(
        found("acme", "key-0001", 200).await,
        None,
        "expired at its expiry"
    );
    assert_eq!(
        found("other", "key-0001", 150).await,
        None,
        "keys are per tenant"
    );
    assert_eq!(found("acme", "key-0002", 150).await, None);
}

async fn a_live_key_is_stored_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = record("acme", "key-0001", 1, 100, 200);
    let f = first.clone();
    w(s, move |tx| tx.insert_idempotency_record(&f))
        .await
        .unwrap();
    let second = record("acme", "key-0001", 2, 199, 299);
    assert_port_error(w(s, move |tx| tx.insert_idempotency_record(&second)).await);
    let other_tenant = record("other", "key-0001", 3, 150, 250);
    w(s, move |tx| tx.insert_idempotency_record(&other_tenant))
        .await
        .unwrap();
    assert_eq!(
        r(s, |tx| tx.idempotency_record(
            &tid("acme"),
            "key-0001",
            at(150)
        ))
        .await,
        Some(first)
    );
}

async fn an_expired_record_is_replaced(store: Arc<dyn Store>) {
    let s = store.as_ref();
    w(s, |tx| {
        tx.insert_idempotency_record(&record("acme", "key-0001", 1, 100, 200))
    })
    .await
    .unwrap();
    // Expired when the new record is created (its expiry is not after that): replaced, without
    // a prune first.
    let new = record("acme", "key-0001", 2, 200, 300);
    let n = new.clone();
    w(s, move |tx| tx.insert_idempotency_record(&n))
        .await
        .unwrap();
    assert_eq!(
        r(s, |tx| tx.idempotency_record(
            &tid("acme"),
            "key-0001",
            at(250)
        ))
        .await,
        Some(new)
    );
}

async fn pruning_forgets_expired_records(store: Arc<dyn Store>) {
    let s = store.as_ref();
    w(s, |tx| {
        tx.insert_idempotency_record(&record("acme", "key-0001", 1, 0, 100))?;
        tx.insert_idempotency_record(&record("acme", "key-0002", 2, 0, 200))?;
        tx.insert_idempotency_record(&record("acme", "key-0003", 3, 0, 300))
    })
    .await
    .unwrap();
    // A record is expired at its expiry: pruned at `now >= expires_at`.
    assert_eq!(
        w(s, |tx| tx.prune_idempotency(at(199), 100)).await.unwrap(),
        1
    );
    assert_eq!(
        w(s, |tx| tx.prune_idempotency(at(200), 100)).await.unwrap(),
        1
    );
    assert_eq!(
        w(s, |tx| tx.prune_idempotency(at(200), 100)).await.unwrap(),
        0
    );
    let left = r(s, |tx| {
        Ok((
            tx.idempotency_record(&tid("acme"), "key-0002", at(0))?,
            tx.idempotency_record(&tid("acme"), "key-0003", at(0))?,
        ))
    })
    .await;
    assert_eq!(left, (None, Some(record("acme", "key-0003", 3, 0, 300))));
    // A pruned key is free.
    w(s, |tx| {
        tx.insert_idempotency_record(&record("acme", "key-0001", 4, 0, 50))
    })
    .await
    .unwrap();
    // At most `limit` records per call, the earliest to expire first.
    assert_eq!(
        w(s, |tx| tx.prune_idempotency(at(400), 1)).await.unwrap(),
        1
    );
    let kept = r(s, |tx| {
        Ok((
            tx.idempotency_record(&tid("acme"), "key-0001", at(0))?
                .is_some(),
            tx.idempotency_record(&tid("acme"), "key-0003", at(0))?
                .is_some(),
        ))
    })
    .await;
    assert_eq!(kept, (false, true), "the record expiring at 50 went first");
    assert_eq!(
        w(s, |tx| tx.prune_idempotency(at(400), 1)).await.unwrap(),
        1
    );
    assert_eq!(
        w(s, |tx| tx.prune_idempotency(at(400), 1)).await.unwrap(),
        0
    );
}

async fn idempotent_commands_replay_conflict_and_store_business_refusals(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let now = at(5_000);
    let run = |fp: [u8; 32], refuse: bool| {
        write(s, move |tx| {
            idempotency::run_in_tx(
                tx,
                &tid("acme"),
                "key-00000001",
                fp,
                now,
                |tx| {
                    tx.use_nonce(uid(0), "side-effect-00001", now)?;
                    if refuse {
                        return Err(Refusal::new(ErrorCode::InsufficientBalance, "no").into());
                    }
                    Ok(StoredResponse {
                        status: 201,
                        body: b"{\"ok\":true}".to_vec(),
                    })
                },
                |r| StoredResponse {
                    status: 409,
                    body: r.code.as_str().as_bytes().to_vec(),
                },
            )
        })
    };
    let refused = StoredResponse {
        status: 409,
        body: b"INSUFFICIENT_BALANCE".to_vec(),
    };
    // A stored business refusal: the command's write rolled back, the refusal kept.
    assert_eq!(
        run([1; 32], true).await.unwrap(),
        Outcome::Executed(refused.clone())
    );
    assert_eq!(
        run([1; 32], false).await.unwrap(),
        Outcome::Replayed(refused)
    );
    let other = run([2; 32], false).await.unwrap_err();
    assert!(
        matches!(&other, CoreError::Refused(r) if r.code == ErrorCode::IdempotencyConflict),
        "{other:?}"
    );
    assert!(
        w(s, move |tx| tx.use_nonce(uid(0), "side-effect-00001", now))
            .await
            .unwrap(),
        "the refused command's write was rolled back"
    );
    let stored = r(s, move |tx| {
        tx.idempotency_record(&tid("acme"), "key-00000001", now)
    })
    .await;
    assert_eq!(
        stored.map(|r| (r.created_at, r.expires_at)),
        Some((now, now.plus_seconds(idempotency::RETENTION_S)))
    );
}
