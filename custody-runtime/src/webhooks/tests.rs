//! The worker against a real SQLite store and a scripted sink.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use async_trait::async_trait;
use custody_core::outbox::{EventType, NewEvent};
use custody_core::ports::store::read;
use custody_core::ports::webhook::WebhookRequest;
use custody_core::vault::SealingKey;
use custody_core::webhook::{Endpoint, EventStatus};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use uuid::Uuid;

use super::*;
use crate::system::{OsEntropy, SystemClock};

type Script = dyn Fn(&str, usize) -> (Duration, DeliveryOutcome) + Send + Sync;

/// Answers by URL and by how many requests that URL got before; records every request and
/// the most requests in flight at once per URL.
struct ScriptedSink {
    script: Box<Script>,
    seen: Mutex<Vec<WebhookRequest>>,
    counts: Mutex<HashMap<String, usize>>,
    in_flight: Mutex<HashMap<String, usize>>,
    peak: Mutex<HashMap<String, usize>>,
    total: AtomicUsize,
}

impl ScriptedSink {
    fn new(
        script: impl Fn(&str, usize) -> (Duration, DeliveryOutcome) + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(ScriptedSink {
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
            counts: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            peak: Mutex::new(HashMap::new()),
            total: AtomicUsize::new(0),
        })
    }

    fn peak(&self, url: &str) -> usize {
        self.peak.lock().unwrap().get(url).copied().unwrap_or(0)
    }
}

#[async_trait]
impl WebhookSink for ScriptedSink {
    async fn send(&self, request: WebhookRequest) -> DeliveryOutcome {
        let n = {
            let mut counts = self.counts.lock().unwrap();
            let n = counts.entry(request.url.clone()).or_insert(0);
            *n += 1;
            *n - 1
        };
        {
            let mut in_flight = self.in_flight.lock().unwrap();
            let now = in_flight.entry(request.url.clone()).or_insert(0);
            *now += 1;
            let mut peak = self.peak.lock().unwrap();
            let p = peak.entry(request.url.clone()).or_insert(0);
            *p = (*p).max(*now);
        }
        let (delay, outcome) = (self.script)(&request.url, n);
        tokio::time::sleep(delay).await;
        *self
            .in_flight
            .lock()
            .unwrap()
            .get_mut(&request.url)
            .unwrap() -= 1;
        self.seen.lock().unwrap().push(request);
        self.total.fetch_add(1, Ordering::Relaxed);
        outcome
    }
}

fn ok() -> DeliveryOutcome {
    DeliveryOutcome::Delivered {
        status: 204,
        latency_ms: 1,
    }
}

fn err500() -> DeliveryOutcome {
    DeliveryOutcome::Retry {
        status: Some(500),
        error: "HTTP 500".into(),
        retry_after_s: None,
        latency_ms: 1,
    }
}

fn url(tenant: &str) -> String {
    format!("https://{tenant}.example.com/hook")
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        retry: RetryPolicy::new(20, 40, 10).unwrap(),
        timeout_ms: 1_000,
        concurrency_max: 16,
        tenant_concurrency_max: 2,
        poll_interval_ms: 20,
    }
}

async fn setup(tenants: &[&str]) -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap(),
    );
    for tenant in tenants {
        let e = Endpoint {
            tenant: custody_core::TenantId::parse(tenant).unwrap(),
            url: url(tenant),
            secret: vault().seal(
                format!("secret-of-{tenant}").as_bytes(),
                &webhook::endpoint_aad(tenant),
            ),
            created_at: SystemClock.now(),
            updated_at: SystemClock.now(),
        };
        write(store.as_ref(), move |tx| Ok(tx.put_webhook_endpoint(&e)?))
            .await
            .unwrap();
    }
    (dir, store)
}

async fn enqueue(store: &SqliteStore, tenant: &str, n: usize) -> Vec<Uuid> {
    let events: Vec<NewEvent> = (0..n)
        .map(|i| {
            NewEvent::new(
                Uuid::new_v4(),
                tenant,
                EventType::WebhookTest,
                &serde_json::json!({ "i": i }),
                SystemClock.now(),
            )
        })
        .collect();
    let ids = events.iter().map(|e| e.id).collect();
    write(store, move |tx| {
        for e in &events {
            tx.enqueue_event(e)?;
        }
        Ok(())
    })
    .await
    .unwrap();
    ids
}

fn ports(store: &Arc<SqliteStore>, sink: Arc<ScriptedSink>) -> WorkerPorts {
    WorkerPorts {
        store: Arc::clone(store) as Arc<dyn Store>,
        sink,
        clock: Arc::new(SystemClock),
        entropy: Arc::new(OsEntropy),
        vault: Arc::new(vault()),
        metrics: Arc::default(),
    }
}

fn vault() -> custody_core::vault::Vault {
    custody_core::vault::Vault::new(SealingKey::from_bytes([5; 32]), Arc::new(OsEntropy))
}

async fn wait_until(store: &SqliteStore, what: &str, f: impl Fn(&[webhook::EventView]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = read(store, |tx| {
            Ok(tx
                .list_webhook_events(custody_core::page::Page::first(100))?
                .unwrap_or_default())
        })
        .await
        .unwrap();
        if f(&events) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_keep_the_id_and_bytes_until_delivered() {
    let (_dir, store) = setup(&["acme"]).await;
    let ids = enqueue(&store, "acme", 1).await;
    let sink = ScriptedSink::new(|_, n| (Duration::ZERO, if n < 3 { err500() } else { ok() }));
    let worker = WebhookWorker::spawn(ports(&store, Arc::clone(&sink)), settings());
    wait_until(&store, "delivery", |e| {
        e[0].status == EventStatus::Delivered
    })
    .await;
    worker.stop(Duration::from_secs(5)).await;

    let seen = sink.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    let header = |r: &WebhookRequest, name: &str| {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    for r in &seen {
        assert_eq!(header(r, "X-Service-Event-Id"), ids[0].to_string());
        assert_eq!(r.body, seen[0].body, "every retry sends the same bytes");
        assert!(sign::verify(
            b"secret-of-acme",
            &header(r, "X-Service-Timestamp"),
            &ids[0].to_string(),
            &r.body,
            &header(r, "X-Service-Signature"),
        ));
    }
    let event = read(store.as_ref(), move |tx| Ok(tx.webhook_event(ids[0])?))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(event.attempts, 4);
    let statuses: Vec<_> = event
        .attempt_history
        .iter()
        .map(|a| a.status_code)
        .collect();
    assert_eq!(statuses, [Some(500), Some(500), Some(500), Some(204)]);
    // Backoff: at least the base (20 ms) between two tries.
    for pair in event.attempt_history.windows(2) {
        assert!(pair[1].at.unix_millis() - pair[0].at.unix_millis() >= 20);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_tenant_does_not_hold_up_others_and_stays_bounded() {
    let (_dir, store) = setup(&["slow", "fast"]).await;
    // 6 events of 2 s each, 2 at a time: the slow tenant needs 6 s. Only 4 slots overall:
    // without the per-tenant bound it would take all of them.
    enqueue(&store, "slow", 6).await;
    let slow_url = url("slow");
    let sink = ScriptedSink::new(move |u, _| {
        let delay = if u == slow_url {
            Duration::from_millis(2_000)
        } else {
            Duration::ZERO
        };
        (delay, ok())
    });
    let settings = WorkerSettings {
        concurrency_max: 4,
        ..settings()
    };
    let worker = WebhookWorker::spawn(ports(&store, Arc::clone(&sink)), settings);
    // Let the slow tenant's first attempts start, then queue the fast tenant's events.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    enqueue(&store, "fast", 20).await;
    wait_until(&store, "fast events", |events| {
        events
            .iter()
            .filter(|e| e.tenant == "fast" && e.status == EventStatus::Delivered)
            .count()
            == 20
    })
    .await;
    let fast_done = started.elapsed();
    let slow_delivered = read(store.as_ref(), |tx| {
        Ok(tx
            .list_webhook_events(custody_core::page::Page::first(100))?
            .unwrap_or_default())
    })
    .await
    .unwrap()
    .iter()
    .filter(|e| e.tenant == "slow" && e.status == EventStatus::Delivered)
    .count();
    // Faster than one slow attempt: the fast tenant never waited for a slot of the slow one.
    assert!(
        fast_done < Duration::from_millis(1_800) && slow_delivered == 0,
        "the fast tenant waited {fast_done:?} behind the slow one ({slow_delivered} slow done)"
    );
    wait_until(&store, "slow events", |events| {
        events.iter().all(|e| e.status == EventStatus::Delivered)
    })
    .await;
    worker.stop(Duration::from_secs(5)).await;
    assert_eq!(
        sink.peak(&url("slow")),
        2,
        "per-tenant concurrency is bounded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_tenth_failure_dead_letters_and_stop_is_prompt() {
    let (_dir, store) = setup(&["acme"]).await;
    enqueue(&store, "acme", 2).await;
    let sink = ScriptedSink::new(|_, _| (Duration::ZERO, err500()));
    let worker = WebhookWorker::spawn(ports(&store, Arc::clone(&sink)), settings());
    wait_until(&store, "dead letters", |events| {
        events.iter().all(|e| e.status == EventStatus::DeadLettered)
    })
    .await;
    let t = Instant::now();
    worker.stop(Duration::from_secs(5)).await;
    assert!(t.elapsed() < Duration::from_secs(1));
    let events = read(store.as_ref(), |tx| {
        Ok(tx
            .list_webhook_events(custody_core::page::Page::first(10))?
            .unwrap_or_default())
    })
    .await
    .unwrap();
    for e in events {
        assert_eq!(e.attempts, 10);
        assert_eq!(e.last_error.as_deref(), Some("HTTP 500"));
    }
    assert_eq!(sink.total.load(Ordering::Relaxed), 20);
}
