//! Benchmark (not a test): webhook events delivered per second to a fast local receiver.
//!
//! The real path: events queued in a SQLite store (the outbox), the delivery worker claiming
//! them, signing, POSTing through the hyper client and recording every attempt; the receiver
//! is a keep-alive hyper server on loopback answering 204. Bounded: at most
//! `WEBHOOK_BENCH_SECONDS_MAX` (default 120) per scenario.
//!
//! cargo bench -p custody-runtime --bench webhook_delivery
//! (`WEBHOOK_BENCH_EVENTS`, default 5000, sets the events per scenario)

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use custody_core::outbox::{EventType, NewEvent};
use custody_core::ports::store::{read, write};
use custody_core::ports::{Clock, Store};
use custody_core::vault::{SealingKey, Vault};
use custody_core::webhook::{endpoint_aad, AddressPolicy, Endpoint, RetryPolicy};
use custody_runtime::system::{OsEntropy, SystemClock};
use custody_runtime::webhook_client::{ClientSettings, HttpWebhookSink};
use custody_runtime::webhooks::{WebhookWorker, WorkerPorts, WorkerSettings};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A keep-alive HTTP/1.1 receiver answering 204 to everything; counts requests.
async fn receiver(count: Arc<AtomicU64>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let count = Arc::clone(&count);
                    async move {
                        let _ = req.into_body().collect().await;
                        count.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, Infallible>(
                            Response::builder()
                                .status(204)
                                .body(Full::new(Bytes::new()))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

struct Scenario {
    name: &'static str,
    tenants: usize,
    concurrency_max: usize,
    tenant_concurrency_max: usize,
}

async fn run(scenario: &Scenario, events: usize, seconds_max: u64) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap(),
    );
    let vault = Arc::new(Vault::new(
        SealingKey::from_bytes([7; 32]),
        Arc::new(OsEntropy),
    ));
    let received = Arc::new(AtomicU64::new(0));
    let addr = receiver(Arc::clone(&received)).await;
    let tenants: Vec<String> = (0..scenario.tenants)
        .map(|i| format!("tenant-{i}"))
        .collect();
    for tenant in &tenants {
        let endpoint = Endpoint {
            tenant: custody_core::TenantId::parse(tenant).unwrap(),
            url: format!("http://{addr}/{tenant}"),
            secret: vault.seal(b"bench-secret-0123456789abcdef", &endpoint_aad(tenant)),
            created_at: SystemClock.now(),
            updated_at: SystemClock.now(),
        };
        write(store.as_ref(), move |tx| {
            Ok(tx.put_webhook_endpoint(&endpoint)?)
        })
        .await
        .unwrap();
    }

    // Queue every event first (as commands would, in their own transactions, 500 per job).
    let queued = Instant::now();
    let data = serde_json::json!({
        "id": "4f0b7a52-0000-4000-8000-000000000000",
        "external_user_id": "user-42",
        "network": "BSC",
        "address": "0x52908400098527886E0F7030069857D2E4169EE7",
        "created_at": "2026-01-01T00:00:00.000Z"
    });
    for chunk in (0..events).collect::<Vec<_>>().chunks(500) {
        let batch: Vec<NewEvent> = chunk
            .iter()
            .map(|i| {
                NewEvent::new(
                    uuid::Uuid::new_v4(),
                    &tenants[i % tenants.len()],
                    EventType::WalletCreated,
                    &data,
                    SystemClock.now(),
                )
            })
            .collect();
        write(store.as_ref(), move |tx| {
            for e in &batch {
                tx.enqueue_event(e)?;
            }
            Ok(())
        })
        .await
        .unwrap();
    }
    let queued = queued.elapsed();

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let sink = HttpWebhookSink::new(
        ClientSettings {
            policy: AddressPolicy {
                allow_insecure_loopback: true,
            },
            timeout_ms: 10_000,
        },
        Arc::clone(&clock),
    )
    .unwrap();
    let settings = WorkerSettings {
        retry: RetryPolicy::default(),
        timeout_ms: 10_000,
        concurrency_max: scenario.concurrency_max,
        tenant_concurrency_max: scenario.tenant_concurrency_max,
        poll_interval_ms: 500,
    };
    let started = Instant::now();
    let worker = WebhookWorker::spawn(
        WorkerPorts {
            store: Arc::clone(&store) as Arc<dyn Store>,
            sink: Arc::new(sink),
            clock,
            entropy: Arc::new(OsEntropy),
            vault: Arc::clone(&vault),
            metrics: Arc::default(),
        },
        settings,
    );
    let deadline = started + Duration::from_secs(seconds_max);
    let delivered = loop {
        let counts = read(store.as_ref(), |tx| Ok(tx.count_webhook_events()?))
            .await
            .unwrap();
        if usize::try_from(counts.delivered).unwrap_or(usize::MAX) >= events
            || Instant::now() > deadline
        {
            break counts.delivered;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let elapsed = started.elapsed();
    worker.stop(Duration::from_secs(5)).await;
    store.close();
    #[allow(clippy::float_arithmetic)]
    let rate = delivered as f64 / elapsed.as_secs_f64();
    println!(
        "{:<34} events={events:<6} tenants={:<3} concurrency={}/{}  queued in {:>6.2?}  delivered={delivered} in {:>7.2?}  => {rate:>7.0} events/s  (receiver saw {})",
        scenario.name,
        scenario.tenants,
        scenario.concurrency_max,
        scenario.tenant_concurrency_max,
        queued,
        elapsed,
        received.load(Ordering::Relaxed),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and runs it small.
    let benching = std::env::args().any(|a| a == "--bench");
    let events = usize::try_from(env_u64(
        "WEBHOOK_BENCH_EVENTS",
        if benching { 5_000 } else { 200 },
    ))
    .unwrap_or(5_000);
    let seconds_max = env_u64("WEBHOOK_BENCH_SECONDS_MAX", 120);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let defaults = WorkerSettings::default();
    let scenarios = [
        Scenario {
            name: "1 tenant, default limits",
            tenants: 1,
            concurrency_max: defaults.concurrency_max,
            tenant_concurrency_max: defaults.tenant_concurrency_max,
        },
        Scenario {
            name: "16 tenants, default limits",
            tenants: 16,
            concurrency_max: defaults.concurrency_max,
            tenant_concurrency_max: defaults.tenant_concurrency_max,
        },
        Scenario {
            name: "16 tenants, 16 per tenant",
            tenants: 16,
            concurrency_max: 256,
            tenant_concurrency_max: 16,
        },
    ];
    for s in &scenarios {
        rt.block_on(run(s, events, seconds_max));
    }
}
