//! The `[webhooks]` section of `custody.toml`: delivery settings, owned here with the worker
//! they configure.

use std::sync::Arc;

use custody_core::ports::{Clock, Store};
use custody_core::webhook::{AddressPolicy, RetryPolicy, ATTEMPTS_MAX};
use serde::{Deserialize, Serialize};

use super::{WorkerPorts, WorkerSettings};
use crate::system::OsEntropy;
use crate::webhook_client::{ClientSettings, HttpWebhookSink};

/// `[webhooks]`: delivery settings. Every key has a default, and a data dir written before
/// the section existed loads unchanged.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Allow `http://` endpoints on a literal loopback address (local use and tests only).
    pub allow_insecure_loopback: bool,
    /// Shortest wait between two tries of an event (decisions §9: 5 s).
    pub retry_base_ms: u64,
    /// Longest wait between two tries (decisions §9: 1 h).
    pub retry_cap_ms: u64,
    /// One attempt, connect to response head (decisions §9: 10 s).
    pub timeout_ms: u64,
    /// Attempts in flight at once, all tenants together.
    pub concurrency_max: usize,
    /// Attempts in flight at once for one tenant.
    pub tenant_concurrency_max: usize,
    /// How often the outbox is checked for due events.
    pub poll_interval_ms: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        let worker = WorkerSettings::default();
        WebhooksConfig {
            allow_insecure_loopback: false,
            retry_base_ms: worker.retry.base_ms,
            retry_cap_ms: worker.retry.cap_ms,
            timeout_ms: worker.timeout_ms,
            concurrency_max: worker.concurrency_max,
            tenant_concurrency_max: worker.tenant_concurrency_max,
            poll_interval_ms: worker.poll_interval_ms,
        }
    }
}

impl WebhooksConfig {
    pub fn policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_insecure_loopback: self.allow_insecure_loopback,
        }
    }

    pub fn worker_settings(&self) -> Result<WorkerSettings, String> {
        let retry = RetryPolicy::new(self.retry_base_ms, self.retry_cap_ms, ATTEMPTS_MAX)
            .map_err(|e| format!("[webhooks] {e}"))?;
        if self.timeout_ms == 0 || self.concurrency_max == 0 || self.tenant_concurrency_max == 0 {
            return Err(
                "[webhooks] timeout_ms, concurrency_max and tenant_concurrency_max must be positive"
                    .into(),
            );
        }
        Ok(WorkerSettings {
            retry,
            timeout_ms: self.timeout_ms,
            concurrency_max: self.concurrency_max,
            tenant_concurrency_max: self.tenant_concurrency_max,
            poll_interval_ms: self.poll_interval_ms.max(1),
        })
    }
}

/// The ports and settings of webhook delivery under `config` (`serve` runs it as a background
/// loop).
pub fn delivery(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    vault: Arc<custody_core::vault::Vault>,
    metrics: Arc<custody_http::metrics::Metrics>,
    config: &WebhooksConfig,
) -> Result<(WorkerPorts, WorkerSettings), String> {
    let settings = config.worker_settings()?;
    if config.allow_insecure_loopback {
        tracing::warn!("webhooks.allow_insecure_loopback is on: http:// to loopback is allowed");
    }
    let sink = HttpWebhookSink::new(
        ClientSettings {
            policy: config.policy(),
            timeout_ms: settings.timeout_ms,
        },
        Arc::clone(&clock),
    )?;
    let ports = WorkerPorts {
        store,
        sink: Arc::new(sink),
        clock,
        entropy: Arc::new(OsEntropy),
        vault,
        metrics,
    };
    Ok((ports, settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_without_the_section_loads_with_defaults() {
        let section: WebhooksConfig = toml::from_str("").unwrap();
        assert!(!section.allow_insecure_loopback);
        assert_eq!(
            (
                section.retry_base_ms,
                section.retry_cap_ms,
                section.timeout_ms
            ),
            (5_000, 3_600_000, 10_000)
        );
        let partial: WebhooksConfig = toml::from_str(
            "allow_insecure_loopback = true\nretry_base_ms = 50\nretry_cap_ms = 200",
        )
        .unwrap();
        let s = partial.worker_settings().unwrap();
        assert_eq!((s.retry.base_ms, s.retry.cap_ms), (50, 200));
        assert!(toml::from_str::<WebhooksConfig>("retry_bse_ms = 1").is_err());
        let bad: WebhooksConfig =
            toml::from_str("retry_base_ms = 500\nretry_cap_ms = 100").unwrap();
        assert!(bad.worker_settings().is_err());
    }
}
