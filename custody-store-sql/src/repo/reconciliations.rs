//! Reconciliation runs and their leases (migration 0014).

use crate::sql::{params, OptionalExtension, Row};
use custody_core::error::PortError;
use custody_core::reconcile::{
    Reconciliation, ReconciliationReads, ReconciliationRepo, RunStatus, Scope,
};
use custody_core::time::Timestamp;
use uuid::Uuid;

use super::{bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const COLUMNS: &str = "id, scope, status, balanced, discrepancies, requested_by, created_at, \
                       updated_at, completed_at, failure_reason";

type Raw = (
    String,
    String,
    String,
    Option<bool>,
    String,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
);

fn raw(r: &Row<'_>) -> crate::sql::Result<Raw> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
    ))
}

/// A stored row as a record without a lease (a copy read, not claimed).
fn record(raw: Raw) -> Result<Reconciliation, PortError> {
    let (
        id,
        scope,
        status,
        balanced,
        discrepancies,
        requested_by,
        created,
        updated,
        completed,
        failure,
    ) = raw;
    Ok(Reconciliation {
        id: parse_uuid(&id)?,
        scope: Scope::parse(&scope).ok_or_else(|| bad("reconciliation scope", &scope))?,
        status: RunStatus::parse(&status).ok_or_else(|| bad("reconciliation status", &status))?,
        balanced,
        discrepancies: serde_json::from_str(&discrepancies)
            .map_err(|_| bad("reconciliation discrepancies", &discrepancies))?,
        requested_by,
        created_at: ts(created),
        updated_at: ts(updated),
        completed_at: completed.map(ts),
        failure_reason: failure,
        lease: None,
    })
}

fn discrepancies_json(run: &Reconciliation) -> String {
    serde_json::to_string(&run.discrepancies).expect("JSON values serialize")
}

impl SqlTx<'_> {
    fn reconciliations_where(
        &self,
        condition: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Reconciliation>, PortError> {
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM reconciliations {condition}"
            ))
            .map_err(db_err)?
            .query_map(args, raw)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter().map(record).collect()
    }
}

impl ReconciliationRepo for SqlTx<'_> {
    fn insert_reconciliation(&mut self, run: &Reconciliation) -> Result<(), PortError> {
        self.conn
            .execute(
                "INSERT INTO reconciliations (id, scope, status, balanced, discrepancies, \
                 requested_by, created_at, updated_at, completed_at, failure_reason, leased_until) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL)",
                params![
                    run.id.to_string(),
                    run.scope.as_str(),
                    run.status.as_str(),
                    run.balanced,
                    discrepancies_json(run),
                    run.requested_by,
                    run.created_at.unix_millis(),
                    run.updated_at.unix_millis(),
                    run.completed_at.map(Timestamp::unix_millis),
                    run.failure_reason,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn claim_reconciliation(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Option<Reconciliation>, PortError> {
        // Oldest first; rowid breaks ties in insertion order, as the memory store does.
        let id: Option<String> = self
            .conn
            .prepare_cached(
                "SELECT id FROM reconciliations \
                 WHERE status = 'scheduled' \
                    OR (status = 'running' AND (leased_until IS NULL OR leased_until <= ?1)) \
                 ORDER BY created_at, rowid LIMIT 1",
            )
            .map_err(db_err)?
            .query_row([now.unix_millis()], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        let Some(id) = id else { return Ok(None) };
        self.conn
            .execute(
                "UPDATE reconciliations SET status = 'running', updated_at = ?2, leased_until = ?3 \
                 WHERE id = ?1",
                params![id, now.unix_millis(), lease_until.unix_millis()],
            )
            .map_err(db_err)?;
        let mut rows = self.reconciliations_where("WHERE id = ?1", [&id])?;
        let mut run = rows
            .pop()
            .ok_or_else(|| PortError::permanent("store", "a claimed run vanished"))?;
        run.lease = Some(lease_until);
        Ok(Some(run))
    }

    fn finish_reconciliation(&mut self, run: &Reconciliation) -> Result<(), PortError> {
        let Some(lease) = run.lease else {
            return Err(PortError::transient(
                "store",
                format!("reconciliation {} was not claimed", run.id),
            ));
        };
        let changed = self
            .conn
            .execute(
                "UPDATE reconciliations SET status = ?2, balanced = ?3, discrepancies = ?4, \
                 updated_at = ?5, completed_at = ?6, failure_reason = ?7, leased_until = NULL \
                 WHERE id = ?1 AND status = 'running' AND leased_until = ?8",
                params![
                    run.id.to_string(),
                    run.status.as_str(),
                    run.balanced,
                    discrepancies_json(run),
                    run.updated_at.unix_millis(),
                    run.completed_at.map(Timestamp::unix_millis),
                    run.failure_reason,
                    lease.unix_millis(),
                ],
            )
            .map_err(db_err)?;
        if changed != 1 {
            return Err(PortError::transient(
                "store",
                format!("reconciliation {} is no longer under this lease", run.id),
            ));
        }
        Ok(())
    }
}

impl ReconciliationReads for SqlTx<'_> {
    fn reconciliation(&mut self, id: Uuid) -> Result<Option<Reconciliation>, PortError> {
        Ok(self
            .reconciliations_where("WHERE id = ?1", [id.to_string()])?
            .pop())
    }

    fn list_reconciliations(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<Reconciliation>, PortError> {
        let Some(args) = super::page_args(self.conn, "reconciliations", page)? else {
            return Ok(None);
        };
        self.reconciliations_where(&format!("WHERE {}", super::PAGE_CLAUSE), args)
            .map(Some)
    }

    fn latest_reconciliation(&mut self, scope: Scope) -> Result<Option<Reconciliation>, PortError> {
        Ok(self
            .reconciliations_where(
                "WHERE scope = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1",
                [scope.as_str()],
            )?
            .pop())
    }
}
