//! The delivery worker: claims due outbox events, sends each through the `WebhookSink`, and
//! records the attempt with the next state the core decides (`webhook::next_step`).
//!
//! - At-least-once: an event leaves `pending` only in the transaction that records a 2xx or its
//!   dead-lettering. A crash between the POST and that record sends it again (same id, same
//!   bytes); nothing is lost, nothing invented. Claims of a crashed process are released at
//!   start-up.
//! - Concurrency: `concurrency_max` attempts in flight overall and at most
//!   `tenant_concurrency_max` per tenant (the store counts a tenant's claimed events), so a slow
//!   endpoint holds a few slots while other tenants' events keep flowing. Ordering per tenant is
//!   not promised.
//! - No transaction is held across an `.await`: claim and record are separate write jobs.

use std::sync::Arc;
use std::time::Duration;

use custody_core::ports::store::write;
use custody_core::ports::webhook::{DeliveryOutcome, WebhookSink};
use custody_core::ports::{Clock, Entropy, Store};
use custody_core::webhook::{self, sign, Attempt, Claim, DueEvent, RetryPolicy, Step};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

mod config;
pub use config::{delivery, WebhooksConfig};

/// How long the worker lets attempts gather after one ends before it claims again.
const CLAIM_COALESCE: Duration = Duration::from_millis(1);

/// Settings of the worker, units last.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSettings {
    pub retry: RetryPolicy,
    /// Longest an attempt may take; claims last longer than this.
    pub timeout_ms: u64,
    pub concurrency_max: usize,
    pub tenant_concurrency_max: usize,
    /// How often the outbox is looked at when nothing wakes the worker.
    pub poll_interval_ms: u64,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            retry: RetryPolicy::default(),
            timeout_ms: 10_000,
            concurrency_max: 64,
            tenant_concurrency_max: 4,
            poll_interval_ms: 500,
        }
    }
}

impl WorkerSettings {
    /// How long a claim holds: the attempt's timeout plus room to record it. A crashed
    /// worker's claims run out after this (there is no bulk release at start-up, since another
    /// instance may hold them); recording after the lease ran out is harmless (at least once).
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.timeout_ms.saturating_add(5_000)).unwrap_or(i64::MAX)
    }
}

/// The ports the worker drives.
#[derive(Clone)]
pub struct WorkerPorts {
    pub store: Arc<dyn Store>,
    pub sink: Arc<dyn WebhookSink>,
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    /// Opens the endpoint secrets the store keeps sealed.
    pub vault: Arc<custody_core::vault::Vault>,
    /// Counts each recorded attempt's outcome (`/v1/metrics`).
    pub metrics: Arc<custody_http::metrics::Metrics>,
}

/// A running worker; `stop` ends it.
pub struct WebhookWorker {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl std::fmt::Debug for WebhookWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookWorker")
    }
}

impl WebhookWorker {
    /// Starts the worker on the current Tokio runtime.
    pub fn spawn(ports: WorkerPorts, settings: WorkerSettings) -> Self {
        let (stop, stopped) = watch::channel(false);
        let handle = tokio::spawn(run(ports, settings, stopped));
        WebhookWorker { stop, handle }
    }

    /// Stops claiming, waits up to `grace` for attempts in flight to be recorded, and returns.
    /// Attempts still running then are dropped; their events stay pending and are sent again
    /// after the next start.
    pub async fn stop(self, grace: Duration) {
        let _ = self.stop.send(true);
        let mut handle = self.handle;
        if tokio::time::timeout(grace, &mut handle).await.is_err() {
            handle.abort();
        }
    }
}

fn jitter(entropy: &dyn Entropy) -> u64 {
    let mut bytes = [0u8; 8];
    entropy.fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

/// One attempt of one event, recorded with its outcome.
pub async fn deliver_one(ports: &WorkerPorts, retry: &RetryPolicy, event: DueEvent) -> Step {
    let started = ports.clock.now();
    let secret = match event.open_secret(&ports.vault) {
        Ok(secret) => secret,
        Err(e) => {
            // Nothing is sent or recorded: the claim runs out and the event stays pending
            // until the key is right again.
            tracing::error!(event_id = %event.id, error = %e, "cannot open the endpoint secret");
            return Step::RetryAt(started.plus_millis(60_000));
        }
    };
    let request = sign::prepare(&event.url, secret.expose(), event.id, &event.body, started);
    let outcome = ports.sink.send(request).await;
    let attempt_no = event.attempts.saturating_add(1);
    let step = webhook::next_step(
        retry,
        attempt_no,
        &outcome,
        ports.clock.now(),
        jitter(ports.entropy.as_ref()),
    );
    let attempt = Attempt::new(event.id, &event.url, started, &outcome);
    let (status, error) = match &outcome {
        DeliveryOutcome::Delivered { status, .. } => (Some(*status), None),
        DeliveryOutcome::Retry { status, error, .. }
        | DeliveryOutcome::Permanent { status, error, .. } => (*status, Some(error.clone())),
    };
    let recorded = write(ports.store.as_ref(), move |tx| {
        Ok(tx.finish_attempt(&attempt, step)?)
    })
    .await;
    match recorded {
        Ok(_) => {
            ports.metrics.record_webhook(&step);
            tracing::info!(
            event_id = %event.id,
            tenant = %event.tenant,
            event_type = %event.event_type,
            attempt = attempt_no,
            status = ?status,
            error = ?error,
            next = ?step,
            "webhook attempt"
            )
        }
        // The claim runs out and the event is sent again: at least once.
        Err(e) => {
            tracing::warn!(event_id = %event.id, error = %e, "cannot record a webhook attempt")
        }
    }
    step
}

/// The delivery loop, until `stopped` turns true; attempts in flight are then let finish and
/// recorded (each is bounded by the attempt timeout).
pub async fn run(ports: WorkerPorts, settings: WorkerSettings, mut stopped: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(settings.concurrency_max.max(1)));
    let wake = Arc::new(Notify::new());
    let poll = Duration::from_millis(settings.poll_interval_ms.max(1));
    let mut tasks = JoinSet::new();
    loop {
        if *stopped.borrow() {
            break;
        }
        while tasks.try_join_next().is_some() {}
        let free = slots.available_permits();
        let mut claimed_all = false;
        if free > 0 {
            let now = ports.clock.now();
            let claim = Claim {
                now,
                lease_until: now.plus_millis(settings.lease_ms()),
                limit: free,
                tenant_max: settings.tenant_concurrency_max.max(1),
            };
            match write(ports.store.as_ref(), move |tx| {
                Ok(tx.claim_due_events(&claim)?)
            })
            .await
            {
                Ok(events) => {
                    claimed_all = events.len() == free;
                    for event in events {
                        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                            break;
                        };
                        let ports = ports.clone();
                        let wake = Arc::clone(&wake);
                        let retry = settings.retry;
                        tasks.spawn(async move {
                            deliver_one(&ports, &retry, event).await;
                            drop(permit);
                            wake.notify_one();
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot claim webhook events"),
            }
        }
        // When the claim was full more may be due: look again as soon as a slot frees;
        // otherwise at the next poll, or when an attempt ends.
        let nap = if claimed_all { Duration::MAX } else { poll };
        tokio::select! {
            () = wake.notified() => {
                // Attempts often end together: let a few more end before claiming again, so
                // one claim fills several slots instead of one claim per slot.
                if !tasks.is_empty() {
                    tokio::time::sleep(CLAIM_COALESCE).await;
                }
            }
            () = tokio::time::sleep(nap.min(Duration::from_secs(3600))) => {}
            changed = stopped.changed() => {
                // A dropped sender means nobody can stop us any more: stop now.
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    // Let attempts in flight finish and record (each is bounded by the timeout).
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests;
