//! [`CredentialRepo`](custody_core::auth::CredentialRepo): credentials, nonces, TOTP steps.

use std::collections::BTreeSet;
use std::sync::Arc;

use custody_core::auth::nonce_set::PendingNonce;
use custody_core::auth::{Scope, StoredCredential as Credential};
use custody_core::ports::store::Store;
use custody_core::secret::Secret;
use custody_core::vault::Sealed;

use super::{assert_port_error, at, r, suite, tid, uid, w};

suite!(
    /// API credentials (secrets kept and returned byte for byte), used nonces, TOTP steps.
    credentials_suite {
        credentials_round_trip_every_field,
        an_api_key_and_an_id_are_stored_once,
        credentials_are_listed_oldest_first,
        a_credential_is_revoked_once,
        a_nonce_is_used_once_until_pruned,
        logged_nonces_come_back_until_pruned,
        the_nonce_fence_and_the_latest_expiry_are_kept,
        totp_steps_only_move_forward,
    }
);

fn credential(n: u128, api_key: &str, created: i64) -> Credential {
    Credential {
        id: uid(n),
        api_key: api_key.to_owned(),
        tenant: tid("acme"),
        scopes: BTreeSet::from([Scope::CatalogRead, Scope::WalletsWrite]),
        admin: false,
        rate_limit: 600,
        // Opaque sealed bytes: the store keeps what it is given.
        hmac_secret: Sealed::from_stored(vec![
            0,
            1,
            2,
            0x80,
            0xfe,
            0xff,
            u8::try_from(n % 256).unwrap_or(0),
        ]),
        pin_hash: Some(Secret::new(
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".into(),
        )),
        totp_secret: Some(Sealed::from_stored(vec![0x5a; 20])),
        totp_last_step: None,
        created_at: at(created),
        revoked_at: None,
    }
}

/// Every field, secrets compared byte for byte.
#[track_caller]
fn assert_same(got: &Credential, want: &Credential) {
    assert_eq!(
        (
            got.id,
            &got.api_key,
            &got.tenant,
            &got.scopes,
            got.admin,
            got.rate_limit,
            got.totp_last_step,
            got.created_at,
            got.revoked_at,
        ),
        (
            want.id,
            &want.api_key,
            &want.tenant,
            &want.scopes,
            want.admin,
            want.rate_limit,
            want.totp_last_step,
            want.created_at,
            want.revoked_at,
        )
    );
    assert_eq!(got.hmac_secret.as_bytes(), want.hmac_secret.as_bytes());
    assert_eq!(
        got.pin_hash.as_ref().map(|p| p.expose().clone()),
        want.pin_hash.as_ref().map(|p| p.expose().clone())
    );
    assert_eq!(
        got.totp_secret.as_ref().map(|t| t.as_bytes().to_vec()),
        want.totp_secret.as_ref().map(|t| t.as_bytes().to_vec())
    );
}

async fn credentials_round_trip_every_field(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let plain = credential(1, "ck_plain", 1_000);
    let mut admin = credential(2, "ck_admin", 2_000);
    admin.admin = true;
    admin.tenant = tid("other");
    admin.scopes = BTreeSet::new();
    admin.rate_limit = 1;
    admin.pin_hash = None;
    admin.totp_secret = None;
    admin.totp_last_step = Some(57_000_000);
    admin.revoked_at = Some(at(3_000));
    let (a, b) = (plain.clone(), admin.clone());
    w(s, move |tx| {
        tx.insert_credential(&a)?;
        tx.insert_credential(&b)
    })
    .await
    .unwrap();
    let got = r(s, |tx| {
        Ok((
            tx.credential_by_api_key("ck_plain")?,
            tx.credential_by_api_key("ck_admin")?,
            tx.credential_by_api_key("ck_nobody")?,
        ))
    })
    .await;
    assert_same(&got.0.expect("ck_plain is stored"), &plain);
    assert_same(&got.1.expect("ck_admin is stored"), &admin);
    assert!(got.2.is_none());
}

async fn an_api_key_and_an_id_are_stored_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = credential(1, "ck_one", 1_000);
    let f = first.clone();
    w(s, move |tx| tx.insert_credential(&f)).await.unwrap();

    let mut same_key = credential(2, "ck_one", 2_000);
    same_key.tenant = tid("intruder");
    assert_port_error(w(s, move |tx| tx.insert_credential(&same_key)).await);
    let same_id = credential(1, "ck_two", 2_000);
    assert_port_error(w(s, move |tx| tx.insert_credential(&same_id)).await);
    let mut no_rate = credential(3, "ck_three", 2_000);
    no_rate.rate_limit = 0;
    assert_port_error(w(s, move |tx| tx.insert_credential(&no_rate)).await);

    let all = r(s, |tx| tx.list_credentials()).await;
    assert_eq!(all.len(), 1);
    assert_same(&all[0], &first);
}

async fn credentials_are_listed_oldest_first(store: Arc<dyn Store>) {
    let s = store.as_ref();
    // Oldest first; equal creation times by id.
    let rows = [
        credential(9, "ck_d", 30),
        credential(3, "ck_b", 10),
        credential(2, "ck_a", 10),
        credential(1, "ck_c", 20),
    ];
    w(s, move |tx| {
        rows.iter().try_for_each(|c| tx.insert_credential(c))
    })
    .await
    .unwrap();
    let keys: Vec<String> = r(s, |tx| tx.list_credentials())
        .await
        .into_iter()
        .map(|c| c.api_key)
        .collect();
    assert_eq!(keys, ["ck_a", "ck_b", "ck_c", "ck_d"]);
}

async fn a_credential_is_revoked_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    w(s, |tx| {
        tx.insert_credential(&credential(1, "ck_one", 1_000))
    })
    .await
    .unwrap();
    assert!(w(s, |tx| tx.revoke_credential("ck_one", at(5_000)))
        .await
        .unwrap());
    assert!(
        !w(s, |tx| tx.revoke_credential("ck_one", at(6_000)))
            .await
            .unwrap(),
        "already revoked"
    );
    assert!(!w(s, |tx| tx.revoke_credential("ck_nobody", at(6_000)))
        .await
        .unwrap());
    let got = r(s, |tx| {
        Ok((tx.credential_by_api_key("ck_one")?, tx.list_credentials()?))
    })
    .await;
    assert_eq!(got.0.and_then(|c| c.revoked_at), Some(at(5_000)));
    assert_eq!(got.1[0].revoked_at, Some(at(5_000)));
}

async fn a_nonce_is_used_once_until_pruned(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let use_nonce = |credential: u128, nonce: &'static str, expires: i64| {
        w(s, move |tx| {
            tx.use_nonce(uid(credential), nonce, at(expires))
        })
    };
    assert!(use_nonce(1, "n-0001", 100).await.unwrap());
    assert!(!use_nonce(1, "n-0001", 100).await.unwrap(), "used already");
    assert!(
        !use_nonce(1, "n-0001", 900).await.unwrap(),
        "used already, whatever the new expiry"
    );
    assert!(
        use_nonce(2, "n-0001", 100).await.unwrap(),
        "nonces are per credential"
    );
    assert!(use_nonce(1, "n-0002", 200).await.unwrap());

    // Pruning forgets nonces whose expiry is before `now`; until then a nonce stays used.
    assert_eq!(w(s, |tx| tx.prune_nonces(at(100), 100)).await.unwrap(), 0);
    assert!(!use_nonce(1, "n-0001", 100).await.unwrap());
    // At most `limit` of each kind per call.
    assert_eq!(w(s, |tx| tx.prune_nonces(at(101), 1)).await.unwrap(), 1);
    assert_eq!(w(s, |tx| tx.prune_nonces(at(101), 1)).await.unwrap(), 1);
    assert!(
        use_nonce(1, "n-0001", 300).await.unwrap(),
        "pruned, so usable again"
    );
    assert!(
        !use_nonce(1, "n-0002", 200).await.unwrap(),
        "not expired yet"
    );
    assert_eq!(w(s, |tx| tx.prune_nonces(at(201), 100)).await.unwrap(), 1);
    assert_eq!(w(s, |tx| tx.prune_nonces(at(201), 100)).await.unwrap(), 0);
    assert!(!use_nonce(1, "n-0001", 300).await.unwrap());
}

async fn logged_nonces_come_back_until_pruned(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let visit = |now: i64| {
        r(s, move |tx| {
            let mut seen = Vec::new();
            let n = tx.visit_nonces(at(now), &mut |c, nonce, e| {
                seen.push((c, nonce.to_owned(), e));
            })?;
            assert_eq!(
                usize::try_from(n).unwrap(),
                seen.len(),
                "the count returned"
            );
            Ok(seen)
        })
    };
    let entry = |c: u128, nonce: &str, e: i64| (uid(c), nonce.to_owned(), at(e));
    assert_eq!(visit(0).await, vec![], "a new store keeps nothing");
    let kept = w(s, |tx| {
        Ok([
            tx.log_nonce(uid(2), "l-0001", at(300))?,
            tx.log_nonce(uid(1), "l-0001", at(100))?,
            tx.use_nonce(uid(1), "u-0001", at(250))?,
            tx.log_nonce(uid(1), "l-0002", at(200))?,
        ])
    })
    .await
    .unwrap();
    assert_eq!(kept, [true; 4]);
    // A job that fails logs nothing: a mutation's nonce is kept with its command or not at all.
    let failed = w::<()>(s, |tx| {
        tx.log_nonce(uid(3), "l-of-a-failed-job", at(500))?;
        Err(custody_core::error::PortError::permanent(
            "test",
            "the command failed",
        ))
    })
    .await;
    assert!(failed.is_err());
    assert_eq!(
        visit(100).await,
        vec![
            entry(1, "l-0001", 100),
            entry(1, "l-0002", 200),
            entry(1, "u-0001", 250),
            entry(2, "l-0001", 300)
        ],
        "every nonce kept and not expired, logged or used, earliest expiry first"
    );
    assert_eq!(
        visit(201).await,
        vec![entry(1, "u-0001", 250), entry(2, "l-0001", 300)]
    );
    assert_eq!(w(s, |tx| tx.prune_nonces(at(100), 100)).await.unwrap(), 0);
    // At most `limit` of each kind per call, the earliest to expire first.
    assert_eq!(w(s, |tx| tx.prune_nonces(at(201), 1)).await.unwrap(), 1);
    assert_eq!(
        visit(0).await,
        vec![
            entry(1, "l-0002", 200),
            entry(1, "u-0001", 250),
            entry(2, "l-0001", 300)
        ],
        "the nonce expiring at 100 went first"
    );
    assert_eq!(w(s, |tx| tx.prune_nonces(at(201), 1)).await.unwrap(), 1);
    assert_eq!(
        visit(0).await,
        vec![entry(1, "u-0001", 250), entry(2, "l-0001", 300)],
        "pruned"
    );

    // Logged again: kept (a store one process writes checks nothing; a shared one answers
    // false, the nonce being used), never an error.
    w(s, |tx| tx.log_nonce(uid(2), "l-0001", at(300)))
        .await
        .unwrap();
    assert!(visit(0).await.contains(&entry(2, "l-0001", 300)));
    w(s, |tx| tx.prune_nonces(at(301), 100)).await.unwrap();
    assert_eq!(visit(0).await, vec![], "everything expired is pruned");

    // A batch as the log loop writes it, of any length (a store may write it in chunks), and
    // one whose job fails, which keeps none of it.
    let pending = |n: usize, tag: &str| -> Vec<PendingNonce> {
        (0..n)
            .map(|i| PendingNonce {
                credential: uid(1 + (i % 3) as u128),
                nonce: format!("{tag}-{i:04}"),
                expires_at: at(1_000 + i as i64),
            })
            .collect()
    };
    for n in [0, 1, 63, 64, 65, 130] {
        let batch = pending(n, &format!("b{n}"));
        let expected: Vec<_> = batch
            .iter()
            .map(|p| (p.credential, p.nonce.clone(), p.expires_at))
            .collect();
        w(s, move |tx| tx.log_nonces(&batch)).await.unwrap();
        assert_eq!(visit(0).await, expected, "a batch of {n} kept whole");
        w(s, |tx| tx.prune_nonces(at(5_000), 1_000)).await.unwrap();
    }
    let batch = pending(130, "failed");
    let failed = w::<()>(s, move |tx| {
        tx.log_nonces(&batch)?;
        Err(custody_core::error::PortError::permanent(
            "test",
            "the flush failed",
        ))
    })
    .await;
    assert!(failed.is_err());
    assert_eq!(visit(0).await, vec![], "a failed batch keeps nothing");
}

async fn the_nonce_fence_and_the_latest_expiry_are_kept(store: Arc<dyn Store>) {
    use custody_core::auth::nonce_set::NonceFence;
    let s = store.as_ref();
    let read = || r(s, |tx| Ok((tx.nonce_fence()?, tx.latest_nonce_expiry()?)));
    assert_eq!(read().await, (None, None), "a new store has neither");
    let first = NonceFence {
        low_s: 1_000,
        high_s: 1_003,
        clean: false,
    };
    w(s, move |tx| {
        tx.use_nonce(uid(1), "n-0001", at(700_000))?;
        tx.use_nonce(uid(2), "n-0002", at(900_000))?;
        tx.use_nonce(uid(1), "n-0003", at(800_000))?;
        tx.put_nonce_fence(&first)
    })
    .await
    .unwrap();
    assert_eq!(read().await, (Some(first), Some(at(900_000))));
    let clean = NonceFence {
        low_s: 1_010,
        high_s: 1_012,
        clean: true,
    };
    w(s, move |tx| tx.put_nonce_fence(&clean)).await.unwrap();
    assert_eq!(read().await.0, Some(clean), "replaced, not added");
    // A fence written by a job that fails is not kept.
    let lost = NonceFence {
        low_s: 2_000,
        high_s: 2_001,
        clean: false,
    };
    let failed = w(s, move |tx| {
        tx.put_nonce_fence(&lost)?;
        Err::<(), _>(custody_core::error::PortError::permanent(
            "test",
            "fails after the write",
        ))
    })
    .await;
    assert!(failed.is_err());
    assert_eq!(read().await.0, Some(clean));
}

async fn totp_steps_only_move_forward(store: Arc<dyn Store>) {
    let s = store.as_ref();
    w(s, |tx| {
        tx.insert_credential(&credential(1, "ck_one", 1_000))
    })
    .await
    .unwrap();
    let advance = |step: i64| w(s, move |tx| tx.advance_totp_step(uid(1), step));
    assert!(advance(10).await.unwrap());
    assert!(!advance(10).await.unwrap(), "a step is accepted once");
    assert!(!advance(9).await.unwrap(), "an older step is refused");
    assert!(advance(11).await.unwrap());
    assert!(!w(s, |tx| tx.advance_totp_step(uid(99), 1)).await.unwrap());
    let stored = r(s, |tx| tx.credential_by_api_key("ck_one")).await;
    assert_eq!(stored.and_then(|c| c.totp_last_step), Some(11));
}
