//! `custody webhooks ...` (decisions §1).

use clap::{Args, Subcommand};
use custody_core::auth::credential::valid_tenant_id;
use custody_core::error::CoreError;
use custody_core::ports::store::write;
use custody_core::ports::Clock;
use custody_core::webhook::{self, Host, Operator};
use custody_runtime::system::{OsEntropy, SystemClock};
use custody_runtime::webhook_client::resolve_checked;
use serde_json::json;

use crate::datadir::DataDir;
use crate::support::{open_store, print_json, runtime};

fn parse_tenant(tenant: &str) -> Result<custody_core::TenantId, String> {
    custody_core::TenantId::parse(tenant).map_err(|e| format!("--tenant: {e}"))
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
    let vault = crate::support::vault_of(&unlocked);
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
