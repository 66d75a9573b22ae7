//! `GET /v1/metrics`: what operators' monitoring scrapes, in the OpenMetrics text format
//! (which Prometheus reads), through the `prometheus-client` crate.
//!
//! Two kinds of figures:
//! - counted as they happen, in memory, per instance (a restart starts them again, which
//!   Prometheus' `rate()` and `increase()` expect of counters): requests per route template,
//!   method and status with their latencies, and webhook delivery outcomes;
//! - read at scrape time (gauges): scanner lag per network from the scanners' status, and
//!   the queue depths from the store in one read snapshot, so they are the same for every
//!   instance that shares the store.
//!
//! Labels are bounded by construction: a route is one of the route table's templates (or
//! `unknown` / `/admin/*` for paths that match none), a method one of a fixed list, a network
//! one of the configured ones. Recording a request takes no allocation once its label set
//! has been seen: every label is a `&'static str` or an integer.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use custody_core::webhook::Step;

/// The content type of the exposition `prometheus-client` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NetworkLabels {
    network: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms to about 16 s: a cached read answers in a millisecond, a quote that asks a slow
    // node takes seconds, and the body read times out after 10 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The registry and every metric in it; one per process, shared by the server and the loops.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<RequestLabels>,
    webhook_outcomes: Family<OutcomeLabels, Counter>,
    scanner_lag: Family<NetworkLabels, Gauge>,
    scanned_block: Family<NetworkLabels, Gauge>,
    queue_depth: Family<QueueLabels, Gauge>,
    outgoing_unfinished: Family<NetworkLabels, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The method as a bounded label: anything outside the usual set is `OTHER`, so a client
/// inventing methods cannot grow the label space.
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("custody");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template, method and status",
            requests.clone(),
        );
        let latency: HistogramFamily<RequestLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time from the request's arrival to its answer, by route template, method and status",
            latency.clone(),
        );
        let webhook_outcomes = Family::<OutcomeLabels, Counter>::default();
        // Every outcome is exposed from the start, at 0: a series that appears only with its
        // first dead letter has no earlier sample, and increase() over it misses that one.
        for outcome in ["delivered", "retry", "dead_lettered"] {
            let _series = webhook_outcomes.get_or_create(&OutcomeLabels { outcome });
        }
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered, retry (another attempt is due), dead_lettered",
            webhook_outcomes.clone(),
        );
        let scanner_lag = Family::<NetworkLabels, Gauge>::default();
        registry.register(
            "scanner_lag_blocks",
            "Blocks between the node's head and the last block the scanner applied",
            scanner_lag.clone(),
        );
        let scanned_block = Family::<NetworkLabels, Gauge>::default();
        registry.register(
            "scanner_scanned_block",
            "The last block the scanner applied",
            scanned_block.clone(),
        );
        let queue_depth = Family::<QueueLabels, Gauge>::default();
        registry.register(
            "queue_depth",
            "Work waiting in the store: outbox_pending (webhook events not delivered yet), webhooks_dead_lettered, withdrawals_pending, swaps_pending, sweeps_open, alerts_open",
            queue_depth.clone(),
        );
        let outgoing_unfinished = Family::<NetworkLabels, Gauge>::default();
        registry.register(
            "outgoing_unfinished",
            "Outgoing transactions of a network not final yet (the broadcaster's queue)",
            outgoing_unfinished.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            webhook_outcomes,
            scanner_lag,
            scanned_block,
            queue_depth,
            outgoing_unfinished,
        }
    }

    /// One answered request. `route` is a route template (or `unknown` / `/admin/*`).
    pub fn record_request(&self, route: &'static str, method: &str, status: u16, seconds: f64) {
        let labels = RequestLabels {
            route,
            method: method_label(method),
            status,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(seconds);
    }

    /// One webhook attempt recorded with the step the core decided.
    pub fn record_webhook(&self, step: &Step) {
        let outcome = match step {
            Step::Delivered => "delivered",
            Step::RetryAt(_) => "retry",
            Step::DeadLetter => "dead_lettered",
        };
        self.webhook_outcomes
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    pub(crate) fn set_scanner(
        &self,
        network: &'static str,
        scanned: Option<u64>,
        lag: Option<u64>,
    ) {
        let labels = NetworkLabels { network };
        // A network whose scanner has not reported yet has no figure rather than a false 0.
        if let Some(lag) = lag {
            self.scanner_lag.get_or_create(&labels).set(gauge(lag));
        }
        if let Some(scanned) = scanned {
            self.scanned_block
                .get_or_create(&labels)
                .set(gauge(scanned));
        }
    }

    pub(crate) fn set_queue(&self, queue: &'static str, depth: u64) {
        self.queue_depth
            .get_or_create(&QueueLabels { queue })
            .set(gauge(depth));
    }

    pub(crate) fn set_outgoing(&self, network: &'static str, unfinished: u64) {
        self.outgoing_unfinished
            .get_or_create(&NetworkLabels { network })
            .set(gauge(unfinished));
    }

    /// The exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_per_template_and_methods_are_bounded() {
        let m = Metrics::new();
        m.record_request("/wallets/{id}", "GET", 200, 0.002);
        m.record_request("/wallets/{id}", "GET", 200, 0.003);
        m.record_request("/wallets/{id}", "BREW", 405, 0.001);
        m.record_webhook(&Step::DeadLetter);
        m.set_queue("outbox_pending", 7);
        m.set_scanner("BSC", Some(100), Some(3));
        m.set_scanner("TRON", None, None);
        let text = m.encode();
        assert!(
            text.contains(
                r#"custody_http_requests_total{route="/wallets/{id}",method="GET",status="200"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"method="OTHER",status="405"} 1"#), "{text}");
        assert!(text.contains(
            r#"custody_http_request_duration_seconds_bucket{le="0.004",route="/wallets/{id}",method="GET",status="200"} 2"#
        ), "{text}");
        assert!(text.contains(r#"custody_webhook_deliveries_total{outcome="dead_lettered"} 1"#));
        assert!(text.contains(r#"custody_webhook_deliveries_total{outcome="delivered"} 0"#));
        assert!(text.contains(r#"custody_queue_depth{queue="outbox_pending"} 7"#));
        assert!(text.contains(r#"custody_scanner_lag_blocks{network="BSC"} 3"#));
        assert!(text.contains(r#"custody_scanner_scanned_block{network="BSC"} 100"#));
        assert!(
            !text.contains(r#"network="TRON""#),
            "no figure before a report: {text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }
}
