//! [`OutboxRepo`](custody_core::outbox::OutboxRepo) and [`WebhookRepo`](custody_core::webhook::WebhookRepo):
//! endpoints, the queue, leased claims, attempts, replays.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use crate::join_all;
use custody_core::outbox::{EventType, NewEvent};
use custody_core::ports::store::Store;
use custody_core::ports::webhook::DeliveryOutcome;
use custody_core::webhook::{Attempt, Claim, DueEvent, Endpoint, EventCounts, EventStatus, Step};

use super::{assert_port_error, at, r, suite, tid, uid, w};

suite!(
    /// Webhook endpoints and the outbox: claims are leases, fair per tenant; attempts and
    /// replays move events.
    webhook_suite {
        endpoints_are_registered_and_replaced,
        an_enqueued_event_is_pending_and_due_at_once,
        counts_add_up_across_tenants,
        events_are_listed_newest_first,
        claims_skip_tenants_without_endpoint_and_bound_each_tenant,
        a_lease_holds_until_it_runs_out,
        in_flight_events_count_against_the_tenant_until_finished_or_expired,
        attempts_move_events_and_are_recorded,
        a_dead_lettered_event_is_requeued_under_its_id,
        concurrent_claims_never_share_an_event,
    }
);

const LEASE_MS: i64 = 60_000;

fn endpoint(tenant: &str, secret: &[u8], created: i64) -> Endpoint {
    Endpoint {
        tenant: tid(tenant),
        url: format!("https://{tenant}.example.com/hook"),
        secret: custody_core::vault::Sealed::from_stored(secret.to_vec()),
        created_at: at(created),
        updated_at: at(created),
    }
}

fn event(n: u128, tenant: &str, created: i64) -> NewEvent {
    NewEvent::new(
        uid(n),
        tenant,
        EventType::WebhookTest,
        &serde_json::json!({ "n": n.to_string() }),
        at(created),
    )
}

async fn setup(s: &dyn Store, tenants: &[&str], events: Vec<NewEvent>) {
    let endpoints: Vec<Endpoint> = tenants
        .iter()
        .map(|t| endpoint(t, format!("secret-of-{t}").as_bytes(), 1))
        .collect();
    w(s, move |tx| {
        for e in &endpoints {
            tx.put_webhook_endpoint(e)?;
        }
        events.iter().try_for_each(|e| tx.enqueue_event(e))
    })
    .await
    .unwrap();
}

async fn claim(s: &dyn Store, now: i64, limit: usize, tenant_max: usize) -> Vec<DueEvent> {
    w(s, move |tx| {
        tx.claim_due_events(&Claim {
            now: at(now),
            lease_until: at(now + LEASE_MS),
            limit,
            tenant_max,
        })
    })
    .await
    .unwrap()
}

fn ids(due: &[DueEvent]) -> Vec<u128> {
    due.iter().map(|e| e.id.as_u128()).collect()
}

fn sorted(mut v: Vec<u128>) -> Vec<u128> {
    v.sort_unstable();
    v
}

async fn finish(s: &dyn Store, attempt: Attempt, step: Step) -> bool {
    w(s, move |tx| tx.finish_attempt(&attempt, step))
        .await
        .unwrap()
}

fn attempt(id: u128, at_ms: i64, status: Option<u16>, error: Option<&str>) -> Attempt {
    Attempt {
        event_id: uid(id),
        at: at(at_ms),
        url: "https://acme.example.com/hook".into(),
        status_code: status,
        error: error.map(str::to_owned),
        latency_ms: 12,
    }
}

async fn endpoints_are_registered_and_replaced(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = w(s, |tx| {
        tx.put_webhook_endpoint(&endpoint("acme", &[0, 1, 0xfe, 0xff], 10))
    })
    .await
    .unwrap();
    assert!(first.is_none());
    let mut second = endpoint("acme", b"second-secret", 20);
    second.url = "https://new.example.com/in".into();
    let old = w(s, move |tx| tx.put_webhook_endpoint(&second))
        .await
        .unwrap()
        .expect("the replaced endpoint");
    assert_eq!(
        (
            old.url.as_str(),
            old.secret.as_bytes(),
            old.created_at,
            old.updated_at
        ),
        (
            "https://acme.example.com/hook",
            &[0u8, 1, 0xfe, 0xff][..],
            at(10),
            at(10)
        )
    );
    let (now, other) = r(s, |tx| {
        Ok((
            tx.webhook_endpoint(&tid("acme"))?,
            tx.webhook_endpoint(&tid("other"))?,
        ))
    })
    .await;
    let now = now.expect("the endpoint");
    assert_eq!(
        (now.tenant.as_str(), now.url.as_str(), now.secret.as_bytes()),
        ("acme", "https://new.example.com/in", &b"second-secret"[..])
    );
    assert_eq!(
        (now.created_at, now.updated_at),
        (at(10), at(20)),
        "a replacement keeps the creation time"
    );
    assert!(other.is_none());
}

async fn counts_add_up_across_tenants(store: Arc<dyn Store>) {
    let s = store.as_ref();
    setup(
        s,
        &["acme", "globex"],
        vec![
            event(1, "acme", 100),
            event(2, "globex", 100),
            event(3, "acme", 100),
        ],
    )
    .await;
    assert_eq!(
        r(s, |tx| tx.count_webhook_events()).await,
        EventCounts {
            pending: 3,
            delivered: 0,
            dead_lettered: 0
        }
    );
}

async fn an_enqueued_event_is_pending_and_due_at_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    setup(s, &["acme"], vec![event(1, "acme", 100)]).await;
    let view = r(s, |tx| tx.webhook_event(uid(1)))
        .await
        .expect("the event");
    assert_eq!(
        (
            view.id,
            view.tenant.as_str(),
            view.event_type.as_str(),
            view.status,
            view.attempts,
            view.last_error.clone(),
            view.next_attempt_at,
            view.created_at,
            view.updated_at,
        ),
        (
            uid(1),
            "acme",
            "webhook.test",
            EventStatus::Pending,
            0,
            None,
            Some(at(100)),
            at(100),
            at(100),
        )
    );
    assert!(view.attempt_history.is_empty());
    assert!(r(s, |tx| tx.webhook_event(uid(2))).await.is_none());
    assert_port_error(w(s, |tx| tx.enqueue_event(&event(1, "acme", 200))).await);
    assert_eq!(
        r(s, |tx| tx.count_webhook_events()).await,
        EventCounts {
            pending: 1,
            delivered: 0,
            dead_lettered: 0
        }
    );
    let due = claim(s, 100, 10, 10).await;
    assert_eq!(ids(&due), [1], "due at its creation");
    assert_eq!(due[0].body, event(1, "acme", 100).body, "the bytes queued");
    assert_eq!(due[0].event_type, "webhook.test");
}

async fn events_are_listed_newest_first(store: Arc<dyn Store>) {
    let s = store.as_ref();
    // Newest first; equal creation times, the higher id first.
    let events = vec![
        event(1, "acme", 10),
        event(2, "acme", 30),
        event(3, "other", 20),
        event(4, "acme", 30),
    ];
    setup(s, &["acme"], events).await;
    let listed = |limit: usize| {
        r(s, move |tx| {
            tx.list_webhook_events(custody_core::page::Page::first(limit))
                .map(super::rows)
        })
    };
    let all: Vec<u128> = listed(10).await.iter().map(|e| e.id.as_u128()).collect();
    assert_eq!(all, [4, 2, 3, 1]);
    let two: Vec<u128> = listed(2).await.iter().map(|e| e.id.as_u128()).collect();
    assert_eq!(two, [4, 2]);
    assert!(listed(0).await.is_empty());
    for limit in [1, 3] {
        super::check_paging(s, limit, |tx, p| tx.list_webhook_events(p), |e| e.id).await;
    }
}

async fn claims_skip_tenants_without_endpoint_and_bound_each_tenant(store: Arc<dyn Store>) {
    let s = store.as_ref();
    // "slow" has a backlog of 50 older events; "fast" one newer event; "none" no endpoint;
    // "later" an event created after the claim's `now`.
    let mut events: Vec<_> = (0..50).map(|i| event(1000 + i, "slow", 100)).collect();
    events.push(event(1, "fast", 200));
    events.push(event(2, "none", 50));
    events.push(event(3, "later", 5_000));
    w(s, |tx| {
        tx.put_webhook_endpoint(&endpoint("fast", &[7, 0, 7], 1))
    })
    .await
    .unwrap();
    setup(s, &["slow", "later"], events).await;

    assert!(claim(s, 1_000, 0, 4).await.is_empty(), "limit 0");
    assert!(claim(s, 1_000, 5, 0).await.is_empty(), "tenant_max 0");

    let first = claim(s, 1_000, 5, 4).await;
    assert_eq!(first.len(), 5);
    let slow: Vec<u128> = first
        .iter()
        .filter(|e| e.tenant == "slow")
        .map(|e| e.id.as_u128())
        .collect();
    assert_eq!(
        sorted(slow),
        [1000, 1001, 1002, 1003],
        "the oldest, up to the tenant's room"
    );
    let fast = first
        .iter()
        .find(|e| e.tenant == "fast")
        .expect("fast's event");
    assert_eq!(fast.id, uid(1));
    assert_eq!(fast.secret.as_bytes(), &[7, 0, 7]);
    assert_eq!(fast.url, "https://fast.example.com/hook");
    assert_eq!(fast.body, event(1, "fast", 200).body);
    assert_eq!(fast.attempts, 0);
    assert!(first
        .iter()
        .all(|e| e.tenant != "none" && e.tenant != "later"));

    // Everything "slow" may have in flight is claimed; nothing more while leased.
    assert!(claim(s, 1_001, 10, 4).await.is_empty());
    assert_eq!(ids(&claim(s, 5_000, 10, 4).await), [3], "due once created");
    // The leases ran out: claimed again (nothing else releases a claim).
    let later = claim(s, 1_000 + LEASE_MS, 10, 4).await;
    assert_eq!(sorted(ids(&later)), [1, 1000, 1001, 1002, 1003]);
}

async fn a_lease_holds_until_it_runs_out(store: Arc<dyn Store>) {
    let s = store.as_ref();
    setup(
        s,
        &["acme"],
        vec![
            event(1, "acme", 10),
            event(2, "acme", 20),
            event(3, "acme", 30),
        ],
    )
    .await;
    assert_eq!(
        ids(&claim(s, 100, 2, 10).await),
        [1, 2],
        "oldest first, up to the limit"
    );
    assert_eq!(ids(&claim(s, 100, 2, 10).await), [3]);
    assert!(claim(s, 200, 10, 10).await.is_empty());
    assert!(claim(s, 100 + LEASE_MS - 1, 10, 10).await.is_empty());
    assert_eq!(
        ids(&claim(s, 100 + LEASE_MS, 10, 10).await),
        [1, 2, 3],
        "a lease ends at its time"
    );
    let view = r(s, |tx| tx.webhook_event(uid(1))).await.expect("event 1");
    assert_eq!(
        (view.status, view.attempts),
        (EventStatus::Pending, 0),
        "a claim is not an attempt"
    );
}

async fn in_flight_events_count_against_the_tenant_until_finished_or_expired(
    store: Arc<dyn Store>,
) {
    let s = store.as_ref();
    let events = (1..=4)
        .map(|n| event(n, "acme", 10 * i64::try_from(n).unwrap_or(0)))
        .collect();
    setup(s, &["acme"], events).await;
    assert_eq!(ids(&claim(s, 100, 10, 2).await), [1, 2]);
    assert!(claim(s, 101, 10, 2).await.is_empty(), "two in flight");
    assert!(finish(s, attempt(1, 102, Some(204), None), Step::Delivered).await);
    assert_eq!(
        ids(&claim(s, 102, 10, 2).await),
        [3],
        "a finished event frees its place"
    );
    // At 100 + LEASE_MS event 2's lease ran out, event 3's did not: one place, for the
    // oldest due.
    assert_eq!(ids(&claim(s, 100 + LEASE_MS, 10, 2).await), [2]);
}

async fn attempts_move_events_and_are_recorded(store: Arc<dyn Store>) {
    let s = store.as_ref();
    setup(
        s,
        &["acme"],
        vec![
            event(1, "acme", 10),
            event(2, "acme", 20),
            event(3, "acme", 30),
        ],
    )
    .await;
    assert_eq!(claim(s, 100, 10, 10).await.len(), 3);
    let url = "https://acme.example.com/hook";
    let retry = DeliveryOutcome::Retry {
        status: Some(500),
        error: "HTTP 500".into(),
        retry_after_s: None,
        latency_ms: 12,
    };
    let failed = Attempt::new(uid(1), url, at(200), &retry);
    assert!(finish(s, failed.clone(), Step::RetryAt(at(5_200))).await);
    let ok = DeliveryOutcome::Delivered {
        status: 204,
        latency_ms: 3,
    };
    assert!(finish(s, Attempt::new(uid(2), url, at(210), &ok), Step::Delivered).await);
    let gone = DeliveryOutcome::Permanent {
        status: Some(410),
        error: "HTTP 410".into(),
        latency_ms: 4,
    };
    assert!(
        finish(
            s,
            Attempt::new(uid(3), url, at(220), &gone),
            Step::DeadLetter
        )
        .await
    );
    // A finished event takes no more attempts; an unknown one none at all.
    assert!(!finish(s, Attempt::new(uid(2), url, at(300), &ok), Step::Delivered).await);
    assert!(!finish(s, Attempt::new(uid(3), url, at(300), &ok), Step::Delivered).await);
    assert!(!finish(s, Attempt::new(uid(9), url, at(300), &ok), Step::Delivered).await);
    // A status the schema refuses fails the job, which records nothing.
    assert_port_error(
        w(s, |tx| {
            tx.finish_attempt(&attempt(1, 300, Some(42), Some("odd")), Step::DeadLetter)
        })
        .await,
    );

    // Event 1 waits for its retry (its lease was cleared): not due before, due at.
    assert!(claim(s, 5_199, 10, 10).await.is_empty());
    let again = claim(s, 5_200, 10, 10).await;
    assert_eq!(
        again.iter().map(|e| (e.id, e.attempts)).collect::<Vec<_>>(),
        [(uid(1), 1)]
    );

    let list = r(s, |tx| {
        tx.list_webhook_events(custody_core::page::Page::first(10))
            .map(super::rows)
    })
    .await;
    assert_eq!(
        list.iter().map(|e| e.id.as_u128()).collect::<Vec<_>>(),
        [3, 2, 1]
    );
    let (dead, delivered, pending) = (&list[0], &list[1], &list[2]);
    assert_eq!(
        (
            dead.status,
            dead.last_error.as_deref(),
            dead.next_attempt_at,
            dead.updated_at
        ),
        (EventStatus::DeadLettered, Some("HTTP 410"), None, at(220))
    );
    assert_eq!(
        (
            delivered.status,
            delivered.attempts,
            delivered.last_error.as_deref(),
            delivered.updated_at
        ),
        (EventStatus::Delivered, 1, None, at(210))
    );
    assert_eq!(delivered.attempt_history[0].status_code, Some(204));
    assert_eq!(
        (
            pending.status,
            pending.next_attempt_at,
            pending.last_error.as_deref(),
            pending.updated_at
        ),
        (
            EventStatus::Pending,
            Some(at(5_200)),
            Some("HTTP 500"),
            at(200)
        )
    );
    assert_eq!(pending.attempt_history, vec![failed]);

    // A retry without an error message keeps the last one; delivery clears it.
    assert!(finish(s, attempt(1, 5_300, None, None), Step::RetryAt(at(6_000))).await);
    let view = r(s, |tx| tx.webhook_event(uid(1))).await.expect("event 1");
    assert_eq!(
        (
            view.attempts,
            view.last_error.as_deref(),
            view.next_attempt_at
        ),
        (2, Some("HTTP 500"), Some(at(6_000)))
    );
    assert_eq!(
        view.attempt_history
            .iter()
            .map(|a| a.at)
            .collect::<Vec<_>>(),
        [at(200), at(5_300)],
        "oldest first"
    );
    assert!(finish(s, attempt(1, 6_100, Some(200), None), Step::Delivered).await);
    let view = r(s, |tx| tx.webhook_event(uid(1))).await.expect("event 1");
    assert_eq!(
        (view.status, view.last_error),
        (EventStatus::Delivered, None)
    );

    assert_eq!(
        r(s, |tx| tx.count_webhook_events()).await,
        EventCounts {
            pending: 0,
            delivered: 2,
            dead_lettered: 1
        }
    );
}

async fn a_dead_lettered_event_is_requeued_under_its_id(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let queued = event(1, "acme", 10);
    setup(s, &["acme"], vec![queued.clone(), event(2, "acme", 20)]).await;
    let requeue = |id: Uuid, now: i64| w(s, move |tx| tx.requeue_dead_lettered(id, at(now)));
    assert!(
        !requeue(uid(1), 50).await.unwrap(),
        "pending, not dead-lettered"
    );
    assert!(!requeue(uid(9), 50).await.unwrap(), "unknown");
    assert_eq!(claim(s, 100, 10, 10).await.len(), 2);
    for n in 1..=3 {
        let step = if n == 3 {
            Step::DeadLetter
        } else {
            Step::RetryAt(at(100))
        };
        assert!(finish(s, attempt(1, 100 + n, Some(500), Some("HTTP 500")), step).await);
    }
    assert!(finish(s, attempt(2, 100, Some(204), None), Step::Delivered).await);
    assert!(
        !requeue(uid(2), 500).await.unwrap(),
        "delivered, not dead-lettered"
    );

    assert!(requeue(uid(1), 500).await.unwrap());
    assert!(!requeue(uid(1), 500).await.unwrap(), "pending again");
    let view = r(s, |tx| tx.webhook_event(uid(1))).await.expect("event 1");
    assert_eq!(
        (
            view.status,
            view.attempts,
            view.next_attempt_at,
            view.updated_at,
            view.last_error.as_deref()
        ),
        (
            EventStatus::Pending,
            3,
            Some(at(500)),
            at(500),
            Some("HTTP 500")
        ),
        "its history is kept"
    );
    let due = claim(s, 500, 10, 10).await;
    assert_eq!(
        due.iter().map(|e| (e.id, e.attempts)).collect::<Vec<_>>(),
        [(uid(1), 0)],
        "the schedule starts over"
    );
    assert_eq!(due[0].body, queued.body, "the same bytes under the same id");
}

async fn concurrent_claims_never_share_an_event(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let events = (1..=12)
        .map(|n| event(n, if n % 2 == 0 { "a" } else { "b" }, 10))
        .collect();
    setup(s, &["a", "b"], events).await;
    let claims: Vec<_> = (0..6).map(|_| claim(s, 100, 3, 100)).collect();
    let claimed: Vec<u128> = join_all(claims).await.iter().flat_map(|c| ids(c)).collect();
    let distinct: BTreeSet<u128> = claimed.iter().copied().collect();
    assert_eq!(claimed.len(), 12, "{claimed:?}");
    assert_eq!(distinct, (1..=12).collect(), "each event handed out once");
}
