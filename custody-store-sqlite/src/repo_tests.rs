//! Tests of the shared repositories that need the SQLite store itself: its schema's indexes and
//! its writer.

mod deposits {
    use rusqlite::Connection;

    use custody_core::deposit::DepositStatus;
    use custody_store_sql::{PENDING_CONDITION, PENDING_UNITS_SQL};

    /// The statuses a balance counts as pending, as the core defines them.
    fn pending_statuses() -> impl Iterator<Item = &'static str> {
        DepositStatus::ALL
            .into_iter()
            .filter(|s| s.is_pending())
            .map(DepositStatus::as_str)
    }

    /// The partial index names exactly the statuses the core counts as pending, and the
    /// balance read's statement reads it alone (a covering seek).
    #[test]
    fn pending_deposits_are_read_from_their_partial_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("custody.db")).unwrap();
        crate::migrations::migrate(&mut conn).unwrap();
        let index: String = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE name = 'deposits_pending_by_user'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            index.ends_with(&format!("WHERE {PENDING_CONDITION}")),
            "{index}"
        );
        let pending: Vec<&str> = pending_statuses().collect();
        for status in DepositStatus::ALL {
            let named = PENDING_CONDITION.contains(&format!("'{}'", status.as_str()));
            assert_eq!(named, pending.contains(&status.as_str()), "{status:?}");
        }
        let plan: String = conn
            .query_row(
                &format!("EXPLAIN QUERY PLAN {PENDING_UNITS_SQL}"),
                ["acme", "alice", "BSC"],
                |r| r.get(3),
            )
            .unwrap();
        assert!(
            plan.contains("USING COVERING INDEX deposits_pending_by_user"),
            "{plan}"
        );
    }
}

mod webhooks {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use custody_core::error::{CoreError, ErrorCode};
    use custody_core::outbox::{EventType, NewEvent};
    use custody_core::ports::store::{read, write};
    use custody_core::ports::webhook::DeliveryOutcome;
    use custody_core::ports::Entropy;
    use custody_core::vault::{SealingKey, Vault};
    use custody_core::webhook::{self, AddressPolicy, Operator};

    use custody_core::time::Timestamp;
    use custody_core::webhook::{Attempt, Claim, DueEvent, Endpoint, EventCounts, EventStatus};
    use uuid::Uuid;

    use crate::{SqliteStore, StoreOptions};

    struct Counter(AtomicU64);
    impl Entropy for Counter {
        fn fill(&self, buf: &mut [u8]) {
            let n = self.0.fetch_add(1, Ordering::Relaxed).to_le_bytes();
            for (i, b) in buf.iter_mut().enumerate() {
                *b = n[i % 8] ^ u8::try_from(i % 251).unwrap_or(0);
            }
        }
    }

    fn open(dir: &tempfile::TempDir, _key: u8) -> SqliteStore {
        SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap()
    }

    /// The core's vault, which seals what the store keeps.
    fn vault(key: u8) -> Vault {
        Vault::new(
            SealingKey::from_bytes([key; 32]),
            Arc::new(Counter(AtomicU64::new(1))),
        )
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn endpoint(tenant: &str, secret: &str) -> Endpoint {
        Endpoint {
            tenant: custody_core::TenantId::parse(tenant).unwrap(),
            url: format!("https://{tenant}.example.com/hook"),
            secret: vault(3).seal(secret.as_bytes(), &webhook::endpoint_aad(tenant)),
            created_at: at(1),
            updated_at: at(1),
        }
    }

    fn event(n: u128, tenant: &str, created: i64) -> NewEvent {
        NewEvent::new(
            Uuid::from_u128(n),
            tenant,
            EventType::WebhookTest,
            &serde_json::json!({ "n": n.to_string() }),
            at(created),
        )
    }

    async fn enqueue(store: &SqliteStore, events: Vec<NewEvent>) {
        write(store, move |tx| {
            for e in &events {
                tx.enqueue_event(e)?;
            }
            Ok(())
        })
        .await
        .unwrap();
    }

    async fn claim(
        store: &SqliteStore,
        now: i64,
        limit: usize,
        tenant_max: usize,
    ) -> Vec<DueEvent> {
        write(store, move |tx| {
            Ok(tx.claim_due_events(&Claim {
                now: at(now),
                lease_until: at(now + 60_000),
                limit,
                tenant_max,
            })?)
        })
        .await
        .unwrap()
    }

    fn outcome_500() -> DeliveryOutcome {
        DeliveryOutcome::Retry {
            status: Some(500),
            error: "HTTP 500".into(),
            retry_after_s: None,
            latency_ms: 12,
        }
    }

    #[tokio::test]
    async fn endpoints_are_sealed_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir, 3);
        let first = write(&store, |tx| {
            Ok(tx.put_webhook_endpoint(&endpoint("acme", "first-secret-0123"))?)
        });
        assert!(first.await.unwrap().is_none());
        let mut second = endpoint("acme", "second-secret-456");
        second.url = "https://new.example.com/in".into();
        let old = write(&store, move |tx| Ok(tx.put_webhook_endpoint(&second)?))
            .await
            .unwrap()
            .unwrap();
        let opened =
            |e: &Endpoint, key: u8| vault(key).open(&e.secret, &webhook::endpoint_aad(&e.tenant));
        assert_eq!(opened(&old, 3).unwrap().expose(), b"first-secret-0123");
        let now = read(&store, |tx| {
            Ok(tx.webhook_endpoint(&custody_core::TenantId::parse("acme").unwrap())?)
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(now.url, "https://new.example.com/in");
        assert_eq!(opened(&now, 3).unwrap().expose(), b"second-secret-456");
        assert!(read(&store, |tx| Ok(tx.webhook_endpoint(
            &custody_core::TenantId::parse("other").unwrap()
        )?))
        .await
        .unwrap()
        .is_none());
        store.close();
        drop(store);
        let raw = std::fs::read(dir.path().join("custody.db")).unwrap();
        assert!(!raw.windows(13).any(|w| w == b"second-secret"));
        // The store keeps sealed bytes only: another key opens nothing.
        let reopened = open(&dir, 4);
        let stored = read(&reopened, |tx| {
            Ok(tx.webhook_endpoint(&custody_core::TenantId::parse("acme").unwrap())?)
        })
        .await
        .unwrap()
        .unwrap();
        assert!(opened(&stored, 4).is_err());
        assert_eq!(opened(&stored, 3).unwrap().expose(), b"second-secret-456");
    }

    #[tokio::test]
    async fn claims_skip_tenants_without_endpoint_and_bound_each_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir, 1);
        write(&store, |tx| {
            tx.put_webhook_endpoint(&endpoint("slow", "s1"))?;
            Ok(tx.put_webhook_endpoint(&endpoint("fast", "s2"))?)
        })
        .await
        .unwrap();
        // "slow" has a backlog of 50 older events; "fast" one newer event; "none" no endpoint.
        let mut events: Vec<_> = (0..50).map(|i| event(1000 + i, "slow", 100)).collect();
        events.push(event(1, "fast", 200));
        events.push(event(2, "none", 50));
        enqueue(&store, events).await;

        let first = claim(&store, 1_000, 5, 4).await;
        assert_eq!(first.len(), 5);
        assert_eq!(first.iter().filter(|e| e.tenant == "slow").count(), 4);
        assert!(first.iter().any(|e| e.id == Uuid::from_u128(1)));
        assert!(first.iter().all(|e| e.tenant != "none"));
        let fast = first.iter().find(|e| e.tenant == "fast").unwrap();
        assert_eq!(fast.open_secret(&vault(3)).unwrap().expose(), b"s2");
        assert_eq!(fast.url, "https://fast.example.com/hook");
        assert_eq!(fast.body, event(1, "fast", 200).body);
        assert_eq!(fast.attempts, 0);

        // Everything of "slow" it may have in flight is claimed; nothing more while leased.
        assert!(claim(&store, 1_001, 10, 4).await.is_empty());
        // A lease that ran out (a stuck attempt, a crashed worker of any instance) lets the
        // event be claimed again; nothing else releases it.
        let later = claim(&store, 61_001, 10, 4).await;
        assert_eq!(later.len(), 5);
        assert!(claim(&store, 61_002, 10, 4).await.is_empty());
    }

    #[tokio::test]
    async fn attempts_move_events_and_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir, 1);
        write(&store, |tx| {
            Ok(tx.put_webhook_endpoint(&endpoint("acme", "k"))?)
        })
        .await
        .unwrap();
        enqueue(
            &store,
            vec![
                event(1, "acme", 10),
                event(2, "acme", 20),
                event(3, "acme", 30),
            ],
        )
        .await;
        let due = claim(&store, 100, 10, 10).await;
        assert_eq!(due.len(), 3);
        let policy = webhook::RetryPolicy::default();
        let url = "https://acme.example.com/hook";
        let finish = |id: u128, n: u32, outcome: DeliveryOutcome, now: i64| {
            let step = webhook::next_step(&policy, n, &outcome, at(now), 0);
            let attempt = Attempt::new(Uuid::from_u128(id), url, at(now), &outcome);
            write(&store, move |tx| Ok(tx.finish_attempt(&attempt, step)?))
        };
        assert!(finish(1, 1, outcome_500(), 200).await.unwrap());
        let ok = DeliveryOutcome::Delivered {
            status: 204,
            latency_ms: 3,
        };
        assert!(finish(2, 1, ok.clone(), 200).await.unwrap());
        let gone = DeliveryOutcome::Permanent {
            status: Some(410),
            error: "HTTP 410".into(),
            latency_ms: 4,
        };
        assert!(finish(3, 1, gone, 200).await.unwrap());
        // A finished event takes no more attempts.
        assert!(!finish(2, 2, ok.clone(), 300).await.unwrap());

        // Event 1 waits for its retry: not due before, due after.
        assert!(claim(&store, 5_199, 10, 10).await.is_empty());
        let again = claim(&store, 5_200, 10, 10).await;
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].id, again[0].attempts), (Uuid::from_u128(1), 1));

        let list = read(&store, |tx| {
            Ok(tx
                .list_webhook_events(custody_core::page::Page::first(10))?
                .unwrap_or_default())
        })
        .await
        .unwrap();
        let ids: Vec<_> = list.iter().map(|e| e.id.as_u128()).collect();
        assert_eq!(ids, [3, 2, 1], "newest first");
        assert_eq!(list[0].status, EventStatus::DeadLettered);
        assert_eq!(list[0].last_error.as_deref(), Some("HTTP 410"));
        assert_eq!(list[0].next_attempt_at, None);
        assert_eq!(list[1].status, EventStatus::Delivered);
        assert_eq!(list[1].attempts, 1);
        assert_eq!(list[1].attempt_history[0].status_code, Some(204));
        assert_eq!(list[2].status, EventStatus::Pending);
        assert_eq!(list[2].next_attempt_at, Some(at(5_200)));
        assert_eq!(
            list[2].attempt_history,
            vec![Attempt {
                event_id: Uuid::from_u128(1),
                at: at(200),
                url: url.into(),
                status_code: Some(500),
                error: Some("HTTP 500".into()),
                latency_ms: 12,
            }]
        );
        let counts = read(&store, |tx| Ok(tx.count_webhook_events()?))
            .await
            .unwrap();
        assert_eq!(
            counts,
            EventCounts {
                pending: 1,
                delivered: 1,
                dead_lettered: 1
            }
        );
        let limited = read(&store, |tx| {
            Ok(tx
                .list_webhook_events(custody_core::page::Page::first(2))?
                .unwrap_or_default())
        });
        assert_eq!(limited.await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn commands_register_test_and_replay_with_audit() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir, 1);
        let op = |n: u128| Operator {
            audit_id: Uuid::from_u128(n),
            actor: "cli:test".into(),
        };
        // No endpoint: a test event is refused.
        let refused = write(&store, |tx| {
            webhook::queue_test_event(
                tx,
                &custody_core::TenantId::parse("acme").unwrap(),
                Uuid::from_u128(9),
                at(5),
            )
        })
        .await
        .unwrap_err();
        assert!(matches!(refused, CoreError::Refused(r) if r.code == ErrorCode::NotFound));

        let url =
            webhook::parse_endpoint_url("https://Hooks.Example.com/in", AddressPolicy::default())
                .unwrap();
        let secret = webhook::generate_secret(&Counter(AtomicU64::new(7)));
        assert_eq!(secret.expose().len(), 64);
        let (u, s, o) = (url.clone(), secret.clone(), op(100));
        write(&store, move |tx| {
            webhook::set_endpoint(
                tx,
                &vault(3),
                &custody_core::TenantId::parse("acme").unwrap(),
                &u,
                &s,
                at(10),
                &o,
            )
        })
        .await
        .unwrap();
        let stored = read(&store, |tx| {
            Ok(tx.webhook_endpoint(&custody_core::TenantId::parse("acme").unwrap())?)
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(stored.url, "https://hooks.example.com/in");
        let opened = vault(3)
            .open(&stored.secret, &webhook::endpoint_aad("acme"))
            .unwrap();
        assert_eq!(opened.expose(), secret.expose().as_bytes());

        let queued = write(&store, |tx| {
            webhook::queue_test_event(
                tx,
                &custody_core::TenantId::parse("acme").unwrap(),
                Uuid::from_u128(9),
                at(20),
            )
        })
        .await
        .unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&queued.body).unwrap();
        assert_eq!(envelope["event_type"], "webhook.test");
        assert_eq!(envelope["data"]["url"], "https://hooks.example.com/in");

        // Replaying a pending event is refused; a dead-lettered one comes back under its id.
        let o = op(101);
        let early = write(&store, move |tx| {
            webhook::replay(tx, Uuid::from_u128(9), at(30), &o)
        });
        assert!(
            matches!(early.await.unwrap_err(), CoreError::Refused(r) if r.code == ErrorCode::ValidationFailed)
        );
        let o = op(102);
        let missing = write(&store, move |tx| {
            webhook::replay(tx, Uuid::from_u128(404), at(30), &o)
        });
        assert!(
            matches!(missing.await.unwrap_err(), CoreError::Refused(r) if r.code == ErrorCode::NotFound)
        );

        let due = claim(&store, 40, 10, 10).await;
        assert_eq!(due.len(), 1);
        let policy = webhook::RetryPolicy::default();
        for n in 1..=10u32 {
            let step = webhook::next_step(&policy, n, &outcome_500(), at(40), 0);
            let attempt = Attempt::new(due[0].id, &due[0].url, at(40), &outcome_500());
            assert!(
                write(&store, move |tx| Ok(tx.finish_attempt(&attempt, step)?))
                    .await
                    .unwrap()
            );
        }
        let dead = read(&store, |tx| Ok(tx.webhook_event(Uuid::from_u128(9))?))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (dead.status, dead.attempts),
            (EventStatus::DeadLettered, 10)
        );

        let o = op(103);
        let replayed = write(&store, move |tx| {
            webhook::replay(tx, Uuid::from_u128(9), at(50), &o)
        })
        .await
        .unwrap();
        assert_eq!(replayed.status, EventStatus::Pending);
        assert_eq!(replayed.attempts, 10, "history is kept");
        let due = claim(&store, 50, 10, 10).await;
        assert_eq!((due[0].id, due[0].attempts), (Uuid::from_u128(9), 0));
        assert_eq!(due[0].body, queued.body, "same bytes under the same id");

        let audit = read(&store, |tx| {
            Ok(tx
                .list_audit(custody_core::page::Page::first(10))?
                .unwrap_or_default())
        })
        .await
        .unwrap();
        let actions: Vec<_> = audit.iter().map(|a| a.action.as_str()).collect();
        assert_eq!(actions, ["webhooks.replay", "webhooks.set"]);
        assert_eq!(
            audit[1].new_value,
            Some(serde_json::json!({ "url": "https://hooks.example.com/in" }))
        );
    }
}
