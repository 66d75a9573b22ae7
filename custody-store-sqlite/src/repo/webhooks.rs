//! Webhook endpoints, delivery claims and attempts (migration 0003).

use custody_core::error::PortError;
use custody_core::time::Timestamp;
use custody_core::vault::Sealed;
use std::collections::BTreeMap;

use custody_core::webhook::{
    choose_claims, tenant_room, Attempt, Claim, ClaimCandidate, DueEvent, Endpoint, EventCounts,
    EventStatus, EventView, Step, WebhookReads, WebhookRepo,
};
use rusqlite::{params, OptionalExtension};
use uuid::Uuid;

use super::{parse_uuid, ts};
use crate::tx::{db_err, SqliteTx};

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn limit_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

type RawEvent = (
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
    i64,
    i64,
    i64,
);

const EVENT_COLUMNS: &str = "o.id, o.tenant, o.event_type, o.status, o.last_error, \
     o.next_attempt_at, o.created_at, o.updated_at, \
     (SELECT COUNT(*) FROM webhook_attempts a WHERE a.event_id = o.id)";

fn raw_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEvent> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

impl SqliteTx<'_> {
    fn attempts_of(&self, event_id: &str) -> Result<Vec<Attempt>, PortError> {
        let id = parse_uuid(event_id)?;
        self.conn
            .prepare_cached(
                "SELECT at, url, status_code, error, latency_ms FROM webhook_attempts \
                 WHERE event_id = ?1 ORDER BY id",
            )
            .map_err(db_err)?
            .query_map([event_id], |r| {
                Ok(Attempt {
                    event_id: id,
                    at: ts(r.get(0)?),
                    url: r.get(1)?,
                    status_code: r
                        .get::<_, Option<i64>>(2)?
                        .and_then(|s| u16::try_from(s).ok()),
                    error: r.get(3)?,
                    latency_ms: count(r.get(4)?),
                })
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }

    fn decode_event(&self, raw: RawEvent) -> Result<EventView, PortError> {
        let (id, tenant, event_type, status, last_error, next_at, created_at, updated_at, n) = raw;
        let status = EventStatus::parse(&status).ok_or_else(|| {
            PortError::permanent("store", format!("bad outbox status {status:?}"))
        })?;
        let attempt_history = self.attempts_of(&id)?;
        Ok(EventView {
            id: parse_uuid(&id)?,
            tenant,
            event_type,
            status,
            attempts: u32::try_from(n).unwrap_or(u32::MAX),
            last_error,
            next_attempt_at: (status == EventStatus::Pending).then(|| ts(next_at)),
            created_at: ts(created_at),
            updated_at: ts(updated_at),
            attempt_history,
        })
    }

    fn due_of_tenant(
        &self,
        tenant: &str,
        now: i64,
        room: usize,
    ) -> Result<Vec<(i64, i64)>, PortError> {
        self.conn
            .prepare_cached(
                "SELECT rowid, next_attempt_at FROM outbox \
                 WHERE tenant = ?1 AND status = 'pending' AND next_attempt_at <= ?2 \
                   AND (leased_until IS NULL OR leased_until <= ?2) \
                 ORDER BY next_attempt_at, rowid LIMIT ?3",
            )
            .map_err(db_err)?
            .query_map(params![tenant, now, limit_i64(room)], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
}

impl WebhookRepo for SqliteTx<'_> {
    fn put_webhook_endpoint(&mut self, e: &Endpoint) -> Result<Option<Endpoint>, PortError> {
        let old = self.webhook_endpoint(&e.tenant)?;
        let sealed = e.secret.as_bytes();
        self.conn
            .prepare_cached(
                "INSERT INTO webhook_endpoints (tenant, url, secret_sealed, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (tenant) DO UPDATE SET url = excluded.url, \
                   secret_sealed = excluded.secret_sealed, updated_at = excluded.updated_at",
            )
            .map_err(db_err)?
            .execute(params![
                e.tenant.as_str(),
                e.url,
                sealed,
                e.created_at.unix_millis(),
                e.updated_at.unix_millis()
            ])
            .map_err(db_err)?;
        Ok(old)
    }

    fn claim_due_events(&mut self, claim: &Claim) -> Result<Vec<DueEvent>, PortError> {
        if claim.limit == 0 || claim.tenant_max == 0 {
            return Ok(Vec::new());
        }
        let now = claim.now.unix_millis();
        let tenants = self
            .conn
            .prepare_cached("SELECT tenant FROM webhook_endpoints ORDER BY tenant")
            .map_err(db_err)?
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        let busy: Vec<(String, i64)> = self
            .conn
            .prepare_cached(
                "SELECT tenant, COUNT(*) FROM outbox \
                 WHERE leased_until IS NOT NULL AND leased_until > ?1 AND status = 'pending' \
                 GROUP BY tenant",
            )
            .map_err(db_err)?
            .query_map([now], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db_err)?
            .collect::<Result<_, _>>()
            .map_err(db_err)?;
        let in_flight: BTreeMap<String, usize> = busy
            .into_iter()
            .map(|(t, n)| (t, usize::try_from(n).unwrap_or(usize::MAX)))
            .collect();
        let mut candidates = Vec::new();
        for tenant in tenants {
            let room = tenant_room(claim, in_flight.get(&tenant).copied().unwrap_or(0));
            if room > 0 {
                for (rowid, due) in self.due_of_tenant(&tenant, now, room)? {
                    candidates.push(ClaimCandidate {
                        key: rowid,
                        tenant: tenant.clone(),
                        due_at: ts(due),
                    });
                }
            }
        }
        let chosen = choose_claims(claim, &in_flight, candidates);

        let mut out = Vec::with_capacity(chosen.len());
        for rowid in chosen {
            self.conn
                .prepare_cached("UPDATE outbox SET leased_until = ?2 WHERE rowid = ?1")
                .map_err(db_err)?
                .execute(params![rowid, claim.lease_until.unix_millis()])
                .map_err(db_err)?;
            let (id, tenant, event_type, body, attempts, url, sealed) = self
                .conn
                .prepare_cached(
                    "SELECT o.id, o.tenant, o.event_type, o.body, o.attempts, e.url, e.secret_sealed \
                     FROM outbox o JOIN webhook_endpoints e ON e.tenant = o.tenant \
                     WHERE o.rowid = ?1",
                )
                .map_err(db_err)?
                .query_row([rowid], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Vec<u8>>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, Vec<u8>>(6)?,
                    ))
                })
                .map_err(db_err)?;
            let secret = Sealed::from_stored(sealed);
            out.push(DueEvent {
                id: parse_uuid(&id)?,
                tenant,
                event_type,
                body,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                url,
                secret,
            });
        }
        Ok(out)
    }

    fn finish_attempt(&mut self, a: &Attempt, step: Step) -> Result<bool, PortError> {
        let (status, next_at) = match step {
            Step::Delivered => (EventStatus::Delivered, None),
            Step::RetryAt(at) => (EventStatus::Pending, Some(at.unix_millis())),
            Step::DeadLetter => (EventStatus::DeadLettered, None),
        };
        let updated = self
            .conn
            .prepare_cached(
                "UPDATE outbox SET attempts = attempts + 1, status = ?2, \
                   next_attempt_at = COALESCE(?3, next_attempt_at), \
                   last_error = CASE WHEN ?2 = 'delivered' THEN NULL ELSE COALESCE(?4, last_error) END, \
                   leased_until = NULL, updated_at = ?5 \
                 WHERE id = ?1 AND status = 'pending'",
            )
            .map_err(db_err)?
            .execute(params![
                a.event_id.to_string(),
                status.as_str(),
                next_at,
                a.error,
                a.at.unix_millis()
            ])
            .map_err(db_err)?;
        if updated == 0 {
            return Ok(false);
        }
        self.conn
            .prepare_cached(
                "INSERT INTO webhook_attempts (event_id, at, url, status_code, error, latency_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(db_err)?
            .execute(params![
                a.event_id.to_string(),
                a.at.unix_millis(),
                a.url,
                a.status_code.map(i64::from),
                a.error,
                i64::try_from(a.latency_ms).unwrap_or(i64::MAX)
            ])
            .map_err(db_err)?;
        Ok(true)
    }

    fn requeue_dead_lettered(&mut self, id: Uuid, now: Timestamp) -> Result<bool, PortError> {
        let n = self
            .conn
            .execute(
                "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ?2, \
                   leased_until = NULL, updated_at = ?2 \
                 WHERE id = ?1 AND status = 'dead_lettered'",
                params![id.to_string(), now.unix_millis()],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }
}

impl WebhookReads for SqliteTx<'_> {
    fn webhook_endpoint(
        &mut self,
        tenant: &custody_core::TenantId,
    ) -> Result<Option<Endpoint>, PortError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT url, secret_sealed, created_at, updated_at FROM webhook_endpoints \
                 WHERE tenant = ?1",
            )
            .map_err(db_err)?
            .query_row([tenant.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()
            .map_err(db_err)?;
        row.map(|(url, sealed, created_at, updated_at)| {
            let secret = Sealed::from_stored(sealed);
            Ok(Endpoint {
                tenant: tenant.to_owned(),
                url,
                secret,
                created_at: ts(created_at),
                updated_at: ts(updated_at),
            })
        })
        .transpose()
    }

    fn list_webhook_events(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<EventView>, PortError> {
        let Some(args) = super::page_args(self.conn.0, "outbox", page)? else {
            return Ok(None);
        };
        // `o.` is the only table of the query, so the clause's bare column names are its own.
        let raws = self
            .conn
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM outbox o WHERE {}",
                super::PAGE_CLAUSE
            ))
            .map_err(db_err)?
            .query_map(args, raw_event)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter()
            .map(|r| self.decode_event(r))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn webhook_event(&mut self, id: Uuid) -> Result<Option<EventView>, PortError> {
        let raw = self
            .conn
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM outbox o WHERE o.id = ?1"
            ))
            .map_err(db_err)?
            .query_row([id.to_string()], raw_event)
            .optional()
            .map_err(db_err)?;
        raw.map(|r| self.decode_event(r)).transpose()
    }

    fn count_webhook_events(&mut self) -> Result<EventCounts, PortError> {
        let rows = self
            .conn
            // Grouped by tenant too, so the scan walks outbox_due_by_tenant in its own order
            // (a covering index) instead of sorting every row into a temporary b-tree; the
            // tenants' counts are summed below.
            .prepare_cached("SELECT status, COUNT(*) FROM outbox GROUP BY tenant, status")
            .map_err(db_err)?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        let mut counts = EventCounts::default();
        for (status, n) in rows {
            match EventStatus::parse(&status) {
                Some(EventStatus::Pending) => counts.pending += count(n),
                Some(EventStatus::Delivered) => counts.delivered += count(n),
                Some(EventStatus::DeadLettered) => counts.dead_lettered += count(n),
                None => return Err(PortError::permanent("store", "bad outbox status")),
            }
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use custody_core::error::{CoreError, ErrorCode};
    use custody_core::outbox::{EventType, NewEvent};
    use custody_core::ports::store::{read, write};
    use custody_core::ports::webhook::DeliveryOutcome;
    use custody_core::ports::Entropy;
    use custody_core::vault::{SealingKey, Vault};
    use custody_core::webhook::{self, AddressPolicy, Operator};

    use super::*;
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
