//! Delivery of signed webhook events to a partner endpoint.

use async_trait::async_trait;

/// One HTTP POST, fully prepared (body bytes and signature headers) by the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What one delivery attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The endpoint answered 2xx.
    Delivered { status: u16, latency_ms: u64 },
    /// Worth another try later: 408, 425, 429, 5xx, a redirect (never followed), timeout,
    /// connection error.
    Retry {
        status: Option<u16>,
        error: String,
        retry_after_s: Option<u64>,
        latency_ms: u64,
    },
    /// Never worth retrying: any other 4xx, an address that is not allowed.
    Permanent {
        status: Option<u16>,
        error: String,
        latency_ms: u64,
    },
}

/// Sends one webhook request.
///
/// An implementation:
/// - MUST NOT follow redirects (a 3xx is a failed attempt, `Retry`).
/// - MUST time out (the contract says 10 s) and report a timeout as `Retry`.
/// - MUST re-check the resolved address against the SSRF rules before connecting, because DNS
///   may change after registration.
/// - MUST read at most a small prefix of the response body and never return it to tenants.
/// - MUST NOT retry by itself: the core owns the schedule and records every attempt.
#[async_trait]
pub trait WebhookSink: Send + Sync {
    async fn send(&self, request: WebhookRequest) -> DeliveryOutcome;
}
