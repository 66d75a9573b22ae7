//! Signed webhooks: the pure rules of delivery.
//!
//! Events are outbox rows written in the same transaction as the change they report
//! ([`crate::outbox`]). A worker in the binary claims due events through [`WebhookRepo`],
//! prepares each request with [`sign::prepare`], sends it through the
//! [`WebhookSink`](crate::ports::webhook::WebhookSink) port, and records the attempt together
//! with the event's next state decided by [`retry::next_step`]. Nothing here does I/O.
//!
//! - [`ssrf`]: which IP addresses a webhook may reach.
//! - [`url`]: the strict endpoint URL parser (and odd IPv4 notations).
//! - [`sign`]: headers and signature.
//! - [`retry`]: backoff with injected jitter, outcome classification, dead-letter.

mod claim;
pub mod retry;
pub mod sign;
pub mod ssrf;
pub mod url;

pub use claim::{choose_claims, tenant_room, ClaimCandidate};

use serde::Serialize;
use uuid::Uuid;

use crate::admin::AuditRecord;
use crate::error::{CoreResult, ErrorCode, PortError, Refusal};
use crate::outbox::{EventType, NewEvent};
use crate::ports::store::WriteTx;
use crate::ports::webhook::DeliveryOutcome;
use crate::ports::Entropy;
use crate::secret::Secret;
use crate::time::Timestamp;
use crate::vault::{Sealed, Vault};

pub use retry::{classify_response, next_step, RetryPolicy, Step, ATTEMPTS_MAX};
pub use ssrf::{classify, AddressClass, AddressPolicy, ForbiddenAddress};
pub use url::{parse_endpoint_url, parse_host, EndpointUrl, Host, Scheme, UrlError};

/// Random bytes of a webhook secret; the secret is their lowercase hex (64 characters) and
/// the HMAC key is the UTF-8 bytes of that text, as for API credentials.
pub const SECRET_BYTES: usize = 32;

/// Where an event is in its life. Stored values are the `as_str` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventStatus {
    Pending,
    Delivered,
    DeadLettered,
}

impl EventStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Delivered => "delivered",
            EventStatus::DeadLettered => "dead_lettered",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(EventStatus::Pending),
            "delivered" => Some(EventStatus::Delivered),
            "dead_lettered" => Some(EventStatus::DeadLettered),
            _ => None,
        }
    }
}

impl Serialize for EventStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A tenant's endpoint. Its secret is sealed by the core ([`endpoint_aad`]); the store keeps
/// the sealed bytes.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub tenant: crate::tenant::TenantId,
    /// Canonical form ([`EndpointUrl`]'s `Display`).
    pub url: String,
    pub secret: Sealed,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An event claimed for one attempt, with what it takes to send it.
#[derive(Debug, Clone)]
pub struct DueEvent {
    pub id: Uuid,
    pub tenant: String,
    pub event_type: String,
    /// The envelope bytes written at creation: every attempt sends exactly these.
    pub body: Vec<u8>,
    /// Attempts made since the event was queued or last replayed.
    pub attempts: u32,
    pub url: String,
    /// The endpoint's secret, sealed: open it with [`DueEvent::open_secret`] to sign.
    pub secret: Sealed,
}

/// What binds an endpoint's sealed secret to its tenant.
pub fn endpoint_aad(tenant: &str) -> String {
    format!("webhook_endpoint:{tenant}:secret")
}

impl DueEvent {
    /// The signing secret of the event's endpoint.
    pub fn open_secret(&self, vault: &Vault) -> Result<Secret<Vec<u8>>, PortError> {
        vault.open(&self.secret, &endpoint_aad(&self.tenant))
    }
}

/// What the worker asks the store for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub now: Timestamp,
    /// A claimed event is not claimed again before this time; a crashed process's claims
    /// simply run out (they are never released in bulk: another instance may hold them).
    pub lease_until: Timestamp,
    /// Most events in this claim.
    pub limit: usize,
    /// Most events of one tenant in flight at once, counting those claimed before.
    pub tenant_max: usize,
}

/// One attempt as recorded for the admin listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    #[serde(skip)]
    pub event_id: Uuid,
    pub at: Timestamp,
    pub url: String,
    /// The HTTP status, when the endpoint answered.
    pub status_code: Option<u16>,
    /// Why it failed (never the response body).
    pub error: Option<String>,
    pub latency_ms: u64,
}

impl Attempt {
    pub fn new(event_id: Uuid, url: &str, at: Timestamp, outcome: &DeliveryOutcome) -> Self {
        let (status_code, error, latency_ms) = match outcome {
            DeliveryOutcome::Delivered { status, latency_ms } => (Some(*status), None, *latency_ms),
            DeliveryOutcome::Retry {
                status,
                error,
                latency_ms,
                ..
            }
            | DeliveryOutcome::Permanent {
                status,
                error,
                latency_ms,
            } => (*status, Some(error.clone()), *latency_ms),
        };
        Attempt {
            event_id,
            at,
            url: url.to_owned(),
            status_code,
            error,
            latency_ms,
        }
    }
}

/// An event as the admin listing shows it (no body, no secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventView {
    pub id: Uuid,
    pub tenant: String,
    pub event_type: String,
    pub status: EventStatus,
    /// Every attempt made, across replays.
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When the next attempt is due; `null` unless pending.
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The attempts, oldest first.
    pub attempt_history: Vec<Attempt>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EventCounts {
    pub pending: u64,
    pub delivered: u64,
    pub dead_lettered: u64,
}

/// Persistence of endpoints, delivery state and attempts.
///
/// An implementation:
/// - MUST store endpoint secrets exactly as given (sealed by the core) and return them so.
/// - MUST make `claim_due_events` hand an event to at most one claimer until its lease ends or
///   it is finished, and never hand out an event whose tenant has no endpoint.
/// - MUST record the attempt and the event's new state in `finish_attempt` together (one
///   transaction: the caller's), and leave a non-pending event's state alone.
/// - MUST NOT change an event's id or body, ever: retries and replays resend them as stored.
pub trait WebhookRepo: WebhookReads {
    /// Registers or replaces the tenant's endpoint; returns the one it replaced.
    fn put_webhook_endpoint(&mut self, endpoint: &Endpoint) -> Result<Option<Endpoint>, PortError>;
    /// Leases up to `claim.limit` pending events due at `claim.now` until `claim.lease_until`
    /// and returns them: events never claimed, and events whose lease ran out (a crashed or
    /// stopped worker's, in this process or another). The store reads what is due and what each
    /// tenant has in flight, and lets [`choose_claims`] pick, in one serializable job.
    fn claim_due_events(&mut self, claim: &Claim) -> Result<Vec<DueEvent>, PortError>;
    /// Records `attempt` and moves its event to `step`. Returns false (and records nothing)
    /// when the event is not pending any more.
    fn finish_attempt(&mut self, attempt: &Attempt, step: Step) -> Result<bool, PortError>;
    /// Puts a dead-lettered event back in the queue, due at `now`, with its attempt count for
    /// the schedule reset (its history is kept). Returns false unless it was dead-lettered.
    fn requeue_dead_lettered(&mut self, id: Uuid, now: Timestamp) -> Result<bool, PortError>;
}

pub trait WebhookReads {
    fn webhook_endpoint(
        &mut self,
        tenant: &crate::tenant::TenantId,
    ) -> Result<Option<Endpoint>, PortError>;
    /// A page of every tenant's events, newest first (`created_at`, then id, descending).
    fn list_webhook_events(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<EventView>, PortError>;
    fn webhook_event(&mut self, id: Uuid) -> Result<Option<EventView>, PortError>;
    fn count_webhook_events(&mut self) -> Result<EventCounts, PortError>;
}

/// A new endpoint secret (64 lowercase hex characters).
pub fn generate_secret(entropy: &dyn Entropy) -> Secret<String> {
    let mut raw = Secret::new([0u8; SECRET_BYTES]);
    entropy.fill(raw.expose_mut());
    Secret::new(hex::encode(raw.expose()))
}

/// Who did an operator action, for the audit record written with it.
#[derive(Debug, Clone)]
pub struct Operator {
    pub audit_id: Uuid,
    pub actor: String,
}

/// Registers (or replaces) `tenant`'s endpoint with `url` (already checked, and its host
/// resolved and checked by the caller) and `secret`, with its audit record.
pub fn set_endpoint(
    tx: &mut dyn WriteTx,
    vault: &Vault,
    tenant: &crate::tenant::TenantId,
    url: &EndpointUrl,
    secret: &Secret<String>,
    now: Timestamp,
    operator: &Operator,
) -> CoreResult<()> {
    let endpoint = Endpoint {
        tenant: tenant.clone(),
        url: url.to_string(),
        secret: vault.seal(secret.expose().as_bytes(), &endpoint_aad(tenant)),
        created_at: now,
        updated_at: now,
    };
    let old = tx.put_webhook_endpoint(&endpoint)?;
    tx.append_audit(&AuditRecord {
        id: operator.audit_id,
        actor: operator.actor.clone(),
        action: "webhooks.set".into(),
        target: format!("tenant:{tenant}"),
        old_value: old.map(|e| serde_json::json!({ "url": e.url })),
        new_value: Some(serde_json::json!({ "url": endpoint.url })),
        reason: "webhook endpoint registered; new secret issued".into(),
        created_at: now,
    })?;
    Ok(())
}

/// Queues a `webhook.test` event for `tenant`; refused when the tenant has no endpoint.
pub fn queue_test_event(
    tx: &mut dyn WriteTx,
    tenant: &crate::tenant::TenantId,
    id: Uuid,
    now: Timestamp,
) -> CoreResult<NewEvent> {
    let endpoint = tx.webhook_endpoint(tenant)?.ok_or_else(|| {
        Refusal::new(
            ErrorCode::NotFound,
            format!("tenant {tenant} has no webhook endpoint; register one with `webhooks set`"),
        )
    })?;
    let data = serde_json::json!({
        "tenant": tenant,
        "url": endpoint.url,
        "message": "webhook.test event queued by an operator",
    });
    let event = NewEvent::new(id, tenant, EventType::WebhookTest, &data, now);
    tx.enqueue_event(&event)?;
    Ok(event)
}

/// Re-queues a dead-lettered event under its id, with its audit record.
pub fn replay(
    tx: &mut dyn WriteTx,
    id: Uuid,
    now: Timestamp,
    operator: &Operator,
) -> CoreResult<EventView> {
    let event = tx
        .webhook_event(id)?
        .ok_or_else(|| Refusal::not_found("webhook event"))?;
    if event.status != EventStatus::DeadLettered {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "only a dead-lettered event can be replayed; event {id} is {}",
                event.status.as_str()
            ),
        )
        .into());
    }
    if !tx.requeue_dead_lettered(id, now)? {
        return Err(Refusal::not_found("webhook event").into());
    }
    tx.append_audit(&AuditRecord {
        id: operator.audit_id,
        actor: operator.actor.clone(),
        action: "webhooks.replay".into(),
        target: format!("event:{id}"),
        old_value: Some(serde_json::json!({ "status": EventStatus::DeadLettered })),
        new_value: Some(serde_json::json!({ "status": EventStatus::Pending })),
        reason: "dead-lettered webhook event re-queued".into(),
        created_at: now,
    })?;
    tx.webhook_event(id)?
        .ok_or_else(|| Refusal::not_found("webhook event").into())
}
