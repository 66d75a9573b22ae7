//! Scheduling, claiming and finishing runs, each one store transaction. A finished run's
//! alerts and automatic controls are written in the transaction that stores its result, so a
//! result is never recorded without them (nor they without it).

use uuid::Uuid;

use crate::admin::{self, Alert};
use crate::error::{CoreError, CoreResult, PortError};
use crate::ledger::LedgerReport;
use crate::ports::clock::{new_uuid, Entropy};
use crate::ports::store::WriteTx;
use crate::time::Timestamp;

use super::halt::shortfall_key;
use super::record::{Reconciliation, RunStatus, Scope};
use super::treasury::Outcome;

/// Who schedules runs on its own and turns the shortfall controls on.
pub const SYSTEM_ACTOR: &str = "system:reconciliation";

/// Schedules a run asked for by `requested_by` (`POST /admin/reconcile`).
pub fn request(
    tx: &mut dyn WriteTx,
    id: Uuid,
    scope: Scope,
    requested_by: &str,
    now: Timestamp,
) -> CoreResult<Reconciliation> {
    let run = Reconciliation::scheduled(id, scope, requested_by, now);
    tx.insert_reconciliation(&run)?;
    Ok(run)
}

/// Schedules a run of `scope` when its newest run is `every_ms` old or older, and none is
/// waiting or running. With no run yet, the first is due `every_ms` after `started` (the
/// scheduler's start, as the holdings check's first pass): a fresh service is not judged
/// before it had a period to settle. Read and written in one job, which the store runs as if
/// alone (`ports::store`): instances sharing the store never schedule the same period twice.
pub fn schedule_due(
    tx: &mut dyn WriteTx,
    id: Uuid,
    scope: Scope,
    every_ms: i64,
    started: Timestamp,
    now: Timestamp,
) -> CoreResult<Option<Reconciliation>> {
    let since = match tx.latest_reconciliation(scope)? {
        Some(latest) if !latest.status.is_finished() => return Ok(None),
        Some(latest) => latest.created_at,
        None => started,
    };
    if since.plus_millis(every_ms) > now {
        return Ok(None);
    }
    request(tx, id, scope, SYSTEM_ACTOR, now).map(Some)
}

/// Leases the next due run for `lease_ms` (see `ReconciliationRepo::claim_reconciliation`).
pub fn claim(
    tx: &mut dyn WriteTx,
    now: Timestamp,
    lease_ms: i64,
) -> CoreResult<Option<Reconciliation>> {
    Ok(tx.claim_reconciliation(now, now.plus_millis(lease_ms))?)
}

fn finish(tx: &mut dyn WriteTx, run: &Reconciliation) -> CoreResult<()> {
    if run.lease.is_none() {
        return Err(CoreError::Port(PortError::permanent(
            "reconciliation",
            "only a claimed run can be finished",
        )));
    }
    Ok(tx.finish_reconciliation(run)?)
}

fn completed(
    run: &Reconciliation,
    discrepancies: Vec<serde_json::Value>,
    now: Timestamp,
) -> Reconciliation {
    Reconciliation {
        status: RunStatus::Completed,
        balanced: Some(discrepancies.is_empty()),
        discrepancies,
        updated_at: now,
        completed_at: Some(now),
        failure_reason: None,
        ..run.clone()
    }
}

/// Records a LEDGER result; a discrepancy raises a critical `ledger_discrepancy` alert.
pub fn finish_ledger(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    run: &Reconciliation,
    report: &LedgerReport,
    now: Timestamp,
) -> CoreResult<Reconciliation> {
    let discrepancies = report
        .discrepancies
        .iter()
        .map(|m| serde_json::json!({ "message": m }))
        .collect();
    let done = completed(run, discrepancies, now);
    finish(tx, &done)?;
    if let Some(first) = report.discrepancies.first() {
        tx.raise_alert(&Alert::open(
            new_uuid(entropy),
            "ledger_discrepancy",
            "critical",
            format!(
                "LEDGER reconciliation {} found {} discrepancies; the first: {first}",
                run.id,
                report.discrepancies.len()
            ),
            Some(("reconciliation", run.id)),
            now,
        ))?;
    }
    Ok(done)
}

/// Records a TREASURY result. Each shortfall turns `treasury_shortfall.<NETWORK>.<ASSET>` on
/// (audited as [`SYSTEM_ACTOR`], the figures as reason) with a critical `treasury_shortfall`
/// alert, unless that control is on already: withdrawals and swaps of the asset stop until an
/// operator turns it off. A shortfall that persists turns it on again at the next run.
///
/// A run with an asset whose holdings could not be read is `failed` (it proved nothing for
/// that asset), yet the shortfalls it found among the others are listed and acted on all the
/// same: one unreadable token must not hide a shortfall of another asset.
pub fn finish_treasury(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    run: &Reconciliation,
    outcome: &Outcome,
    now: Timestamp,
) -> CoreResult<Reconciliation> {
    let discrepancies = outcome
        .shortfalls
        .iter()
        .map(|d| serde_json::to_value(d).expect("a discrepancy serializes"))
        .collect();
    let mut done = completed(run, discrepancies, now);
    if !outcome.unreadable.is_empty() {
        done.status = RunStatus::Failed;
        done.balanced = None;
        done.failure_reason = Some(outcome.unreadable.join("; ").chars().take(1000).collect());
    }
    finish(tx, &done)?;
    for d in &outcome.shortfalls {
        let key = shortfall_key(&d.asset_id());
        if tx.control(&key)?.is_some_and(|c| c.enabled) {
            continue;
        }
        // A control's reason is at most 500 characters; the run keeps every figure anyway.
        let reason: String = format!("TREASURY reconciliation {}: {}", run.id, d.describe())
            .chars()
            .take(500)
            .collect();
        admin::set_control(
            tx,
            new_uuid(entropy),
            SYSTEM_ACTOR,
            &key,
            true,
            &reason,
            now,
        )?;
        tx.raise_alert(&Alert::open(
            new_uuid(entropy),
            "treasury_shortfall",
            "critical",
            format!("{reason}; {key} is on: withdrawals and swaps of it are stopped"),
            Some(("reconciliation", run.id)),
            now,
        ))?;
    }
    Ok(done)
}

/// Records a run that could not be carried out (a chain unreachable, a store error).
pub fn finish_failed(
    tx: &mut dyn WriteTx,
    run: &Reconciliation,
    reason: &str,
    now: Timestamp,
) -> CoreResult<Reconciliation> {
    let done = Reconciliation {
        status: RunStatus::Failed,
        balanced: None,
        discrepancies: Vec::new(),
        updated_at: now,
        completed_at: Some(now),
        failure_reason: Some(reason.chars().take(1000).collect()),
        ..run.clone()
    };
    finish(tx, &done)?;
    Ok(done)
}
