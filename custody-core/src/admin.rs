//! Operator actions leave an audit trail: who, when, what it was, what it became, and why.

use serde::Serialize;
use uuid::Uuid;

use crate::error::PortError;
use crate::page::{Page, Paged};
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    pub id: Uuid,
    /// Credential id or `cli:<user>` of the operator.
    pub actor: String,
    pub action: String,
    pub target: String,
    pub old_value: Option<serde_json::Value>,
    pub new_value: Option<serde_json::Value>,
    pub reason: String,
    pub created_at: Timestamp,
}

pub trait AuditRepo: AuditReads {
    fn append_audit(&mut self, record: &AuditRecord) -> Result<(), PortError>;
}

pub trait AuditReads {
    /// A page of the records, newest first (`created_at`, then id, descending).
    fn list_audit(&mut self, page: Page) -> Result<Paged<AuditRecord>, PortError>;
}

/// Something an operator must look at (a reversed deposit, a reorg deeper than we keep).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alert {
    pub id: Uuid,
    pub kind: String,
    /// `critical` needs action; `warning` is worth a look.
    pub severity: String,
    pub message: String,
    pub reference_type: Option<String>,
    pub reference_id: Option<Uuid>,
    pub created_at: Timestamp,
    /// When an operator took it in hand ([`acknowledge_alert`]); `None` while open.
    pub acknowledged_at: Option<Timestamp>,
    /// `credential:<id>` of that operator.
    pub acknowledged_by: Option<String>,
}

impl Alert {
    /// A new, unacknowledged alert about `reference` (its type and id), if it concerns one
    /// record.
    pub fn open(
        id: Uuid,
        kind: impl Into<String>,
        severity: impl Into<String>,
        message: String,
        reference: Option<(&str, Uuid)>,
        created_at: Timestamp,
    ) -> Alert {
        Alert {
            id,
            kind: kind.into(),
            severity: severity.into(),
            message,
            reference_type: reference.map(|(t, _)| t.to_owned()),
            reference_id: reference.map(|(_, id)| id),
            created_at,
            acknowledged_at: None,
            acknowledged_by: None,
        }
    }
}

pub trait AlertRepo: AlertReads {
    /// Stores a new alert, which MUST be unacknowledged.
    fn raise_alert(&mut self, alert: &Alert) -> Result<(), PortError>;
    /// Marks alert `id` acknowledged at `at` by `by` unless it already is (the first
    /// acknowledgement stands); a port error when no alert has that id.
    fn acknowledge_alert(&mut self, id: Uuid, at: Timestamp, by: &str) -> Result<(), PortError>;
}

pub trait AlertReads {
    /// A page of the alerts, newest first (`created_at`, then id, descending).
    fn list_alerts(&mut self, page: Page) -> Result<Paged<Alert>, PortError>;
    fn alert(&mut self, id: Uuid) -> Result<Option<Alert>, PortError>;
    /// Alerts no operator has acknowledged yet.
    fn open_alert_count(&mut self) -> Result<u64, PortError>;
}

/// The kill switches and maintenance controls of decisions §8, and `kill_switch.sweeps` (no new
/// sweep or treasury funding: what an operator turns on while hot wallets are rotated away
/// from a compromised seed). Enabled = the restriction is on.
pub const CONTROL_KEYS: [&str; 8] = [
    "kill_switch.global",
    "kill_switch.withdrawals",
    "kill_switch.swaps",
    "kill_switch.internal_transfers",
    "kill_switch.deposit_crediting",
    "kill_switch.sweeps",
    "maintenance.BSC",
    "maintenance.TRON",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Control {
    pub control_key: String,
    pub enabled: bool,
    pub reason: String,
    pub updated_by: String,
    pub updated_at: Timestamp,
}

pub trait ControlRepo: ControlReads {
    fn put_control(&mut self, control: &Control) -> Result<(), PortError>;
}

pub trait ControlReads {
    fn control(&mut self, key: &str) -> Result<Option<Control>, PortError>;
    fn list_controls(&mut self) -> Result<Vec<Control>, PortError>;
}

/// Whether the restriction `key` (or the global kill switch) is on.
pub fn restricted(repo: &mut dyn ControlReads, key: &str) -> Result<bool, PortError> {
    for k in [key, "kill_switch.global"] {
        if repo.control(k)?.is_some_and(|c| c.enabled) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn unknown_key() -> crate::error::Refusal {
    crate::error::Refusal::validation(
        "control_key",
        format!(
            "must be one of {} or treasury_shortfall.<NETWORK>.<ASSET> of a catalog asset",
            CONTROL_KEYS.join(", ")
        ),
    )
}

/// [`check_control_update`] for an operator's request: a `treasury_shortfall.<NETWORK>.<ASSET>`
/// key must also name an asset of `catalog` (decisions §8: any other key is a 422).
pub fn check_control_request<'a>(
    key: &str,
    reason: &'a str,
    catalog: &crate::asset::AssetCatalog,
) -> Result<&'a str, crate::error::Refusal> {
    if let Some(asset) = crate::reconcile::parse_shortfall_key(key) {
        // Well formed but naming no asset of this catalog: a fact about the catalog, like an
        // unknown asset code elsewhere, not a malformed request.
        if catalog.get(asset.network, &asset.code).is_none() {
            return Err(crate::error::Refusal::new(
                crate::error::ErrorCode::UnsupportedAsset,
                format!(
                    "{} {} is not an asset of the catalog",
                    asset.network, asset.code
                ),
            )
            .with_detail("control_key", "names no asset of the catalog"));
        }
    }
    check_control_update(key, reason)
}

/// Checks a control update before anything else is (second factors included): the key is
/// one of [`CONTROL_KEYS`] or shaped as an automatic `treasury_shortfall.<NETWORK>.<ASSET>`
/// control, and the reason, trimmed, is 1 to 500 characters. Returns the trimmed reason.
pub fn check_control_update<'a>(
    key: &str,
    reason: &'a str,
) -> Result<&'a str, crate::error::Refusal> {
    use crate::error::Refusal;
    if !CONTROL_KEYS.contains(&key) && crate::reconcile::parse_shortfall_key(key).is_none() {
        return Err(unknown_key());
    }
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().count() > 500 {
        return Err(Refusal::validation("reason", "must be 1 to 500 characters"));
    }
    Ok(reason)
}

/// Sets a control, with its audit record, in the caller's transaction.
pub fn set_control(
    tx: &mut dyn crate::ports::store::WriteTx,
    audit_id: Uuid,
    actor: &str,
    key: &str,
    enabled: bool,
    reason: &str,
    now: Timestamp,
) -> crate::error::CoreResult<Control> {
    let reason = check_control_update(key, reason)?;
    let old = tx.control(key)?;
    let control = Control {
        control_key: key.to_owned(),
        enabled,
        reason: reason.to_owned(),
        updated_by: actor.to_owned(),
        updated_at: now,
    };
    tx.put_control(&control)?;
    tx.append_audit(&AuditRecord {
        id: audit_id,
        actor: actor.to_owned(),
        action: "control.update".into(),
        target: key.to_owned(),
        old_value: Some(serde_json::json!({ "enabled": old.as_ref().is_some_and(|c| c.enabled) })),
        new_value: Some(serde_json::json!({ "enabled": enabled })),
        reason: reason.to_owned(),
        created_at: now,
    })?;
    Ok(control)
}

/// Checks the reason of an acknowledgement before anything else is (second factors included):
/// trimmed, 1 to 500 characters. Returns the trimmed reason.
pub fn check_ack_reason(reason: &str) -> Result<&str, crate::error::Refusal> {
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().count() > 500 {
        return Err(crate::error::Refusal::validation(
            "reason",
            "must be 1 to 500 characters",
        ));
    }
    Ok(reason)
}

/// Acknowledges alert `id` for `actor`, with its audit record, in the caller's transaction:
/// the alert no longer counts as open. Acknowledging it again changes nothing and writes no
/// second audit record (a retried request is not a second decision); the record is returned
/// as it stands either way. An unknown id is a 404.
pub fn acknowledge_alert(
    tx: &mut dyn crate::ports::store::WriteTx,
    audit_id: Uuid,
    actor: &str,
    id: Uuid,
    reason: &str,
    now: Timestamp,
) -> crate::error::CoreResult<Alert> {
    let reason = check_ack_reason(reason)?;
    let Some(alert) = tx.alert(id)? else {
        return Err(crate::error::Refusal::not_found("alert").into());
    };
    if alert.acknowledged_at.is_some() {
        return Ok(alert);
    }
    tx.acknowledge_alert(id, now, actor)?;
    tx.append_audit(&AuditRecord {
        id: audit_id,
        actor: actor.to_owned(),
        action: "alert.acknowledge".into(),
        target: id.to_string(),
        old_value: Some(serde_json::json!({ "acknowledged_at": null })),
        new_value: Some(serde_json::json!({
            "acknowledged_at": now,
            "acknowledged_by": actor,
        })),
        reason: reason.to_owned(),
        created_at: now,
    })?;
    Ok(Alert {
        acknowledged_at: Some(now),
        acknowledged_by: Some(actor.to_owned()),
        ..alert
    })
}

/// What the ledger owes users, per asset: posted credits minus posted debits of every user
/// account (available plus reserved). Checked arithmetic; an overflow is a port error.
pub fn user_liabilities(
    repo: &mut dyn crate::ledger::LedgerReads,
) -> Result<std::collections::BTreeMap<crate::AssetId, crate::Amount>, PortError> {
    let mut totals = std::collections::BTreeMap::new();
    let mut overflow = false;
    repo.scan_ledger_accounts(&mut |key, b| {
        if key.as_user().is_none() {
            return;
        }
        let owed = b
            .credits_posted
            .checked_sub(b.debits_posted)
            .unwrap_or(crate::Amount::ZERO);
        let total = totals
            .entry(key.asset().clone())
            .or_insert(crate::Amount::ZERO);
        match total.checked_add(owed) {
            Some(sum) => *total = sum,
            None => overflow = true,
        }
    })?;
    if overflow {
        return Err(PortError::permanent(
            "ledger",
            "user liabilities overflow u128",
        ));
    }
    Ok(totals)
}
