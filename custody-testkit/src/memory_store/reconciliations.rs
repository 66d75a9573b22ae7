//! [`ReconciliationRepo`] in memory. The stored record keeps its lease in `lease`; copies read
//! out carry none, as the SQLite store's do.

use std::cmp::Reverse;

use uuid::Uuid;

use custody_core::error::PortError;
use custody_core::reconcile::{
    Reconciliation, ReconciliationReads, ReconciliationRepo, RunStatus, Scope,
};
use custody_core::time::Timestamp;

use super::{constraint, Tx};

fn unleased(r: &Reconciliation) -> Reconciliation {
    Reconciliation {
        lease: None,
        ..r.clone()
    }
}

impl ReconciliationRepo for Tx {
    fn insert_reconciliation(&mut self, run: &Reconciliation) -> Result<(), PortError> {
        if self.state.reconciliations.iter().any(|r| r.id == run.id) {
            return Err(constraint(format!("reconciliation id {} exists", run.id)));
        }
        self.state.reconciliations.push(unleased(run));
        Ok(())
    }

    fn claim_reconciliation(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Option<Reconciliation>, PortError> {
        let due = self
            .state
            .reconciliations
            .iter_mut()
            .enumerate()
            .filter(|(_, r)| match r.status {
                RunStatus::Scheduled => true,
                RunStatus::Running => r.lease.is_none_or(|l| l <= now),
                RunStatus::Completed | RunStatus::Failed => false,
            })
            .min_by_key(|(i, r)| (r.created_at, *i))
            .map(|(_, r)| r);
        Ok(due.map(|r| {
            r.status = RunStatus::Running;
            r.updated_at = now;
            r.lease = Some(lease_until);
            r.clone()
        }))
    }

    fn finish_reconciliation(&mut self, run: &Reconciliation) -> Result<(), PortError> {
        let stored = self
            .state
            .reconciliations
            .iter_mut()
            .find(|r| r.id == run.id)
            .ok_or_else(|| {
                PortError::permanent("store", format!("no reconciliation {}", run.id))
            })?;
        if stored.status != RunStatus::Running
            || stored.lease.is_none()
            || stored.lease != run.lease
        {
            return Err(PortError::transient(
                "store",
                format!("reconciliation {} is no longer under this lease", run.id),
            ));
        }
        *stored = unleased(run);
        Ok(())
    }
}

impl ReconciliationReads for Tx {
    fn reconciliation(&mut self, id: Uuid) -> Result<Option<Reconciliation>, PortError> {
        Ok(self
            .state
            .reconciliations
            .iter()
            .find(|r| r.id == id)
            .map(unleased))
    }

    fn list_reconciliations(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<Reconciliation>, PortError> {
        let rows =
            custody_core::page::select(&self.state.reconciliations, |r| (r.created_at, r.id), page);
        Ok(rows.map(|rows| rows.iter().map(unleased).collect()))
    }

    fn latest_reconciliation(&mut self, scope: Scope) -> Result<Option<Reconciliation>, PortError> {
        // Newest by time, then the later inserted (what the schedule counts from).
        let mut rows: Vec<&Reconciliation> = self.state.reconciliations.iter().rev().collect();
        rows.sort_by_key(|r| Reverse(r.created_at));
        Ok(rows.into_iter().find(|r| r.scope == scope).map(unleased))
    }
}
