use crate::sql::params;
use custody_core::admin::{AuditReads, AuditRecord, AuditRepo};
use custody_core::error::PortError;
use custody_core::page::{Page, Paged};

use super::{parse_uuid, ts};

use crate::tx::{db_err, SqlTx};

impl AuditRepo for SqlTx<'_> {
    fn append_audit(&mut self, r: &AuditRecord) -> Result<(), PortError> {
        self.conn
            .execute(
                "INSERT INTO audit (id, actor, action, target, old_value, new_value, reason, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    r.id.to_string(),
                    r.actor,
                    r.action,
                    r.target,
                    r.old_value.as_ref().map(|v| v.to_string()),
                    r.new_value.as_ref().map(|v| v.to_string()),
                    r.reason,
                    r.created_at.unix_millis(),
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

impl AuditReads for SqlTx<'_> {
    fn list_audit(&mut self, page: Page) -> Result<Paged<AuditRecord>, PortError> {
        let json = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
        let Some(args) = super::page_args(self.conn, "audit", page)? else {
            return Ok(None);
        };
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT id, actor, action, target, old_value, new_value, reason, created_at \
                 FROM audit WHERE {}",
                super::PAGE_CLAUSE
            ))
            .map_err(db_err)?
            .query_map(args, |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(|(id, actor, action, target, old, new, reason, at)| {
                Ok(AuditRecord {
                    id: parse_uuid(&id)?,
                    actor,
                    action,
                    target,
                    old_value: json(old),
                    new_value: json(new),
                    reason,
                    created_at: ts(at),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
