//! Invariants stop money. A broken ledger or chain invariant (`CoreError::Invariant`: an
//! unbalanced posting, a hold ending twice, an illegal state move, a job that panicked) means
//! the books can no longer be trusted, so nothing may move until an operator has looked:
//! `kill_switch.global` is latched on, persisted, audited with the reason, and raised as a
//! critical alert. Every path that moves money (transfers, deposit crediting, and what comes
//! later) already honours the global switch.

use std::any::Any;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::admin::{Alert, AuditRecord, Control};
use crate::error::{CoreError, CoreResult};
use crate::ports::clock::new_uuid;
use crate::ports::store::{ReadJob, Store, WriteJob, WriteTx};
use crate::ports::{Clock, Entropy};
use crate::time::Timestamp;

pub const GLOBAL_KILL_SWITCH: &str = "kill_switch.global";
/// Who latched the switch, in its audit record and control row.
pub const LATCH_ACTOR: &str = "system:invariant";

/// Ids of the records one latch writes.
#[derive(Debug, Clone, Copy)]
pub struct LatchIds {
    pub audit: uuid::Uuid,
    pub alert: uuid::Uuid,
}

/// Turns `kill_switch.global` on because of `reason`, with its audit record and a critical
/// alert, inside the caller's transaction. Returns false (writing nothing) when an earlier
/// violation latched it already: the first violation is the one an operator must read. A
/// switch an operator turned on for another reason is taken over, with its own alert, so that
/// turning it off for that reason cannot release books nobody has looked at.
pub fn latch(
    tx: &mut dyn WriteTx,
    ids: LatchIds,
    reason: &str,
    now: Timestamp,
) -> CoreResult<bool> {
    let old = tx.control(GLOBAL_KILL_SWITCH)?;
    let was_on = old.as_ref().is_some_and(|c| c.enabled);
    if old
        .as_ref()
        .is_some_and(|c| c.enabled && c.updated_by == LATCH_ACTOR)
    {
        return Ok(false);
    }
    // Bounded: the reason goes to an operator's screen, not a dump.
    let reason: String = reason.chars().take(500).collect();
    let why = format!("invariant violated: {reason}");
    tx.put_control(&Control {
        control_key: GLOBAL_KILL_SWITCH.to_owned(),
        enabled: true,
        reason: why.clone(),
        updated_by: LATCH_ACTOR.to_owned(),
        updated_at: now,
    })?;
    tx.append_audit(&AuditRecord {
        id: ids.audit,
        actor: LATCH_ACTOR.to_owned(),
        action: "control.update".into(),
        target: GLOBAL_KILL_SWITCH.to_owned(),
        old_value: Some(serde_json::json!({ "enabled": was_on })),
        new_value: Some(serde_json::json!({ "enabled": true })),
        reason: why.clone(),
        created_at: now,
    })?;
    tx.raise_alert(&Alert::open(
        ids.alert,
        "invariant_violated",
        "critical",
        format!(
            "{why}. kill_switch.global is on: nothing moves until an operator has looked and \
             turned it off through /v1/admin/controls"
        ),
        None,
        now,
    ))?;
    Ok(true)
}

/// A store that latches the global kill switch whenever a job ends with a broken invariant,
/// wrapped around the real store by the composition root, so that every path (HTTP handlers,
/// scanners, workers) is covered without each remembering to.
///
/// The latch is a write of its own (the failed job rolled back). If that write fails too, the
/// violation is kept in memory and every later write first tries to save it again; until it
/// is saved, writes are refused with the violation, so a store that hiccups at the wrong
/// moment cannot let money move past a broken invariant. Reads still run.
pub struct InvariantGuard {
    inner: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    unsaved: Mutex<Option<String>>,
}

impl InvariantGuard {
    pub fn new(inner: Arc<dyn Store>, clock: Arc<dyn Clock>, entropy: Arc<dyn Entropy>) -> Self {
        InvariantGuard {
            inner,
            clock,
            entropy,
            unsaved: Mutex::new(None),
        }
    }

    fn unsaved(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        // Only ever holds a plain value: a panic elsewhere cannot leave it half-written.
        self.unsaved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Saves the latch; on failure keeps the reason for the next write to retry.
    async fn latch_on(&self, reason: String) -> bool {
        let ids = LatchIds {
            audit: new_uuid(self.entropy.as_ref()),
            alert: new_uuid(self.entropy.as_ref()),
        };
        let now = self.clock.now();
        let saving = reason.clone();
        let saved =
            crate::ports::store::write(self.inner.as_ref(), move |tx| latch(tx, ids, &saving, now))
                .await
                .is_ok();
        let mut unsaved = self.unsaved();
        if saved {
            if unsaved.as_deref() == Some(reason.as_str()) {
                *unsaved = None;
            }
        } else if unsaved.is_none() {
            *unsaved = Some(reason);
        }
        saved
    }

    /// A violation not yet saved refuses this write, after trying once more to save it.
    async fn save_pending(&self) -> CoreResult<()> {
        let pending = self.unsaved().clone();
        match pending {
            Some(reason) if !self.latch_on(reason.clone()).await => Err(CoreError::Invariant(
                format!("{reason} (kill_switch.global could not be saved yet; writes are refused until it is)"),
            )),
            _ => Ok(()),
        }
    }
}

fn broken(result: &CoreResult<Box<dyn Any + Send>>) -> Option<String> {
    match result {
        Err(CoreError::Invariant(reason)) => Some(reason.clone()),
        _ => None,
    }
}

#[async_trait]
impl Store for InvariantGuard {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        self.save_pending().await?;
        let result = self.inner.write(job).await;
        if let Some(reason) = broken(&result) {
            self.latch_on(reason).await;
        }
        result
    }

    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        let result = self.inner.read(job).await;
        if let Some(reason) = broken(&result) {
            self.latch_on(reason).await;
        }
        result
    }

    async fn credentials_version(&self) -> CoreResult<Option<u64>> {
        self.inner.credentials_version().await
    }

    async fn read_quick(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        let result = self.inner.read_quick(job).await;
        if let Some(reason) = broken(&result) {
            self.latch_on(reason).await;
        }
        result
    }
}
