//! Forgets what has outlived its retention: used nonces (`auth::NONCE_PRUNE_MARGIN_S` past
//! their expiry, so that instances whose clocks disagree never forget a nonce one of them still
//! accepts) and idempotency records (24 h). Idempotent: two instances pruning the same rows is harmless.

use std::sync::Arc;
use std::time::Duration;

use custody_core::ports::store::write;
use custody_core::ports::{Clock, Store};
use tokio::sync::watch;

pub struct Pruner {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub interval: Duration,
}

impl Pruner {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            self.prune_once(&shutdown).await;
        }
    }

    /// Prunes everything expired, `PRUNE_BATCH` rows of each kind per write job, so that a
    /// backlog is many small jobs between the others rather than one that holds the writer
    /// (and, in a batch run with savepoints, journals every page it deletes in memory). A stop
    /// asked meanwhile ends the round after the job under way; the next start goes on.
    async fn prune_once(&self, shutdown: &watch::Receiver<bool>) {
        let now = self.clock.now();
        let nonces_before = custody_core::auth::nonce_prune_horizon(now);
        let (mut nonces, mut records) = (0, 0);
        while !*shutdown.borrow() {
            let pruned = write(self.store.as_ref(), move |tx| {
                Ok((
                    tx.prune_nonces(nonces_before, PRUNE_BATCH)?,
                    tx.prune_idempotency(now, PRUNE_BATCH)?,
                ))
            })
            .await;
            match pruned {
                Ok((n, i)) => {
                    nonces += n;
                    records += i;
                    if n < PRUNE_BATCH as u64 && i < PRUNE_BATCH as u64 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pruning failed");
                    break;
                }
            }
        }
        if nonces + records > 0 {
            tracing::debug!(nonces, idempotency = records, "pruned");
        }
    }
}

/// Rows of each kind one pruning job deletes at most.
const PRUNE_BATCH: usize = 5_000;

#[cfg(test)]
mod tests {
    use super::*;
    use custody_core::idempotency::{IdempotencyRecord, StoredResponse};
    use custody_core::ports::store::read;
    use custody_core::time::Timestamp;
    use custody_core::TenantId;
    use custody_store_sqlite::{SqliteStore, StoreOptions};

    struct At(Timestamp);
    impl Clock for At {
        fn now(&self) -> Timestamp {
            self.0
        }
    }

    /// A backlog of more than two batches is pruned by one round, in jobs of `PRUNE_BATCH`;
    /// what has not expired stays.
    #[tokio::test]
    async fn a_backlog_is_pruned_in_one_round_of_bounded_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap(),
        );
        let expired = 2 * PRUNE_BATCH + 7;
        let record = |i: usize, expires_at: i64| IdempotencyRecord {
            tenant: TenantId::parse("acme").unwrap(),
            key: format!("key-{i:08}"),
            fingerprint: [0; 32],
            response: StoredResponse {
                status: 201,
                body: b"{}".to_vec(),
            },
            created_at: Timestamp::from_unix_millis(0),
            expires_at: Timestamp::from_unix_millis(expires_at),
        };
        write(store.as_ref(), move |tx| {
            for i in 0..expired {
                tx.insert_idempotency_record(&record(i, 1_000))?;
            }
            Ok(tx.insert_idempotency_record(&record(expired, 9_000))?)
        })
        .await
        .unwrap();
        let pruner = Pruner {
            store: Arc::clone(&store),
            clock: Arc::new(At(Timestamp::from_unix_millis(5_000))),
            interval: Duration::from_secs(60),
        };
        let (_stop, stopping) = watch::channel(true);
        pruner.prune_once(&stopping).await;
        let count_left = |store: Arc<dyn Store>| async move {
            read(store.as_ref(), move |tx| {
                let mut left = 0;
                for i in 0..=expired {
                    let key = format!("key-{i:08}");
                    let at = Timestamp::from_unix_millis(0);
                    left += usize::from(
                        tx.idempotency_record(&TenantId::parse("acme").unwrap(), &key, at)?
                            .is_some(),
                    );
                }
                Ok(left)
            })
            .await
            .unwrap()
        };
        assert_eq!(
            count_left(Arc::clone(&store)).await,
            expired + 1,
            "a stop asked before the round prunes nothing"
        );
        let (_stop, running) = watch::channel(false);
        pruner.prune_once(&running).await;
        let left = count_left(Arc::clone(&store)).await;
        assert_eq!(left, 1, "every expired record pruned, the live one kept");
    }

    /// Instance A accepted a nonce and set its expiry by its own clock; instance B, whose clock
    /// runs 30 s ahead of A's, prunes the shared store. While A would still accept a replay of
    /// the request (its timestamp inside A's window), the nonce must stay used.
    #[tokio::test]
    async fn an_instance_whose_clock_runs_ahead_keeps_a_nonce_another_still_accepts() {
        use custody_core::auth::StoredCredential as Credential;
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap(),
        );
        let credential = uuid::Uuid::from_u128(7);
        // Signed at A's now: the expiry A computes (timestamp + window + 1 s).
        let a_now = Timestamp::from_unix_millis(1_800_000_000_000);
        let expires = a_now.plus_seconds(custody_core::auth::TIMESTAMP_WINDOW_S + 1);
        write(store.as_ref(), move |tx| {
            tx.insert_credential(&Credential {
                id: credential,
                api_key: "ak_skew".into(),
                tenant: TenantId::parse("acme").unwrap(),
                scopes: Default::default(),
                admin: false,
                rate_limit: 600,
                hmac_secret: custody_core::vault::Sealed::from_stored(vec![1]),
                pin_hash: None,
                totp_secret: None,
                totp_last_step: None,
                created_at: a_now,
                revoked_at: None,
            })?;
            Ok(tx.use_nonce(credential, "n-skew", expires)?)
        })
        .await
        .unwrap();
        let used_again = |store: Arc<dyn Store>| async move {
            // A replay: refused (false) while the nonce is kept. Rolled back, so it changes
            // nothing.
            let answer = write(store.as_ref(), move |tx| {
                let fresh = tx.use_nonce(credential, "n-skew", expires)?;
                Err::<(), _>(
                    custody_core::error::PortError::permanent(
                        "test",
                        if fresh { "fresh" } else { "used" },
                    )
                    .into(),
                )
            })
            .await
            .unwrap_err();
            answer.to_string().contains("fresh")
        };
        // A at the last second of its window for that timestamp: B's clock reads 30 s later.
        let a_last = a_now.plus_seconds(custody_core::auth::TIMESTAMP_WINDOW_S);
        let b = Pruner {
            store: Arc::clone(&store),
            clock: Arc::new(At(a_last.plus_seconds(30))),
            interval: Duration::from_secs(60),
        };
        let (_stop, running) = watch::channel(false);
        b.prune_once(&running).await;
        assert!(
            !used_again(Arc::clone(&store)).await,
            "the nonce is still used while A accepts its timestamp"
        );
        // Long after every clock has left the window: forgotten.
        let later = Pruner {
            store: Arc::clone(&store),
            clock: Arc::new(At(
                expires.plus_seconds(custody_core::auth::NONCE_PRUNE_MARGIN_S + 1)
            )),
            interval: Duration::from_secs(60),
        };
        later.prune_once(&running).await;
        assert!(used_again(Arc::clone(&store)).await, "pruned once expired");
    }
}
