//! `custody webhooks ...` (decisions §1) and the `[webhooks]` section of `custody.toml`.

use std::sync::Arc;

use clap::{Args, Subcommand};
use custody_core::auth::credential::valid_tenant_id;
use custody_core::error::CoreError;
use custody_core::ports::store::write;
use custody_core::ports::{Clock, Store};
use custody_core::webhook::{self, AddressPolicy, Host, Operator, RetryPolicy, ATTEMPTS_MAX};
use custody_runtime::system::{OsEntropy, SystemClock};
use custody_runtime::webhook_client::{resolve_checked, ClientSettings, HttpWebhookSink};
use custody_runtime::webhooks::{WorkerPorts, WorkerSettings};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::commands::{open_store, print_json, runtime};
use crate::datadir::DataDir;

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

fn parse_tenant(tenant: &str) -> Result<custody_core::TenantId, String> {
    custody_core::TenantId::parse(tenant).map_err(|e| format!("--tenant: {e}"))
}

/// The ports and settings of webhook delivery (`serve` runs it as a background loop).
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

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Register (or replace) a tenant's endpoint; prints {url, secret}, the secret only here.
    Set(SetArgs),
    /// Queue a `webhook.test` event for a tenant.
    Test {
        #[arg(long)]
        tenant: String,
    },
    /// Re-queue a dead-lettered event under the same id.
    Replay {
        #[arg(long)]
        event_id: String,
    },
}

#[derive(Debug, Args)]
pub struct SetArgs {
    #[arg(long)]
    pub tenant: String,
    /// https:// URL of the receiver (http:// to loopback only with
    /// webhooks.allow_insecure_loopback).
    #[arg(long)]
    pub url: String,
}

pub fn run(dir: &DataDir, command: &WebhooksCommand) -> Result<(), String> {
    match command {
        WebhooksCommand::Set(args) => set(dir, args),
        WebhooksCommand::Test { tenant } => test(dir, tenant),
        WebhooksCommand::Replay { event_id } => replay(dir, event_id),
    }
}

fn operator() -> Operator {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "operator".into());
    Operator {
        audit_id: custody_core::ports::clock::new_uuid(&OsEntropy),
        actor: format!("cli:{user}"),
    }
}

fn core_message(e: CoreError) -> String {
    match e {
        CoreError::Refused(r) => r.message,
        other => other.to_string(),
    }
}

fn check_tenant(tenant: &str) -> Result<(), String> {
    if valid_tenant_id(tenant) {
        Ok(())
    } else {
        Err("--tenant must be 1 to 64 characters of A-Z a-z 0-9 - _ .".into())
    }
}

fn set(dir: &DataDir, args: &SetArgs) -> Result<(), String> {
    check_tenant(&args.tenant)?;
    let config = dir.load_config()?;
    let policy = config.webhooks.policy();
    let url = webhook::parse_endpoint_url(&args.url, policy).map_err(|e| format!("--url: {e}"))?;
    let rt = runtime()?;
    // A name is resolved now and every address checked; delivery checks again each time.
    if let Host::Domain(name) = &url.host {
        rt.block_on(resolve_checked(name, url.port, policy))
            .map_err(|e| format!("--url: {e}"))?;
    }
    let (store, unlocked) = open_store(dir, &config)?;
    let vault = crate::commands::vault_of(&unlocked);
    let secret = webhook::generate_secret(&OsEntropy);
    let (tenant, stored_url, stored_secret, op) = (
        parse_tenant(&args.tenant)?,
        url.clone(),
        secret.clone(),
        operator(),
    );
    let now = SystemClock.now();
    let result = rt.block_on(write(store.as_ref(), move |tx| {
        webhook::set_endpoint(tx, &vault, &tenant, &stored_url, &stored_secret, now, &op)
    }));
    store.close();
    result.map_err(|e| format!("cannot register the endpoint: {}", core_message(e)))?;
    print_json(&json!({ "url": url.to_string(), "secret": secret.expose() }))
}

fn test(dir: &DataDir, tenant: &str) -> Result<(), String> {
    check_tenant(tenant)?;
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let id = custody_core::ports::clock::new_uuid(&OsEntropy);
    let owned = parse_tenant(tenant)?;
    let now = SystemClock.now();
    let result = runtime()?.block_on(write(store.as_ref(), move |tx| {
        webhook::queue_test_event(tx, &owned, id, now)
    }));
    store.close();
    let event = result.map_err(core_message)?;
    print_json(&json!({
        "event_id": event.id,
        "event_type": event.event_type.as_str(),
        "tenant": event.tenant,
        "status": webhook::EventStatus::Pending,
        "created_at": event.created_at,
    }))
}

fn replay(dir: &DataDir, event_id: &str) -> Result<(), String> {
    let id =
        uuid::Uuid::parse_str(event_id).map_err(|_| "--event-id must be a UUID".to_string())?;
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let (now, op) = (SystemClock.now(), operator());
    let result = runtime()?.block_on(write(store.as_ref(), move |tx| {
        webhook::replay(tx, id, now, &op)
    }));
    store.close();
    let event = result.map_err(core_message)?;
    print_json(&json!({
        "event_id": event.id,
        "event_type": event.event_type,
        "tenant": event.tenant,
        "status": event.status,
        "attempts": event.attempts,
        "next_attempt_at": event.next_attempt_at,
    }))
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
