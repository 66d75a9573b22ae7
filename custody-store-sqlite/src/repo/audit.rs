use custody_core::admin::{AuditRecord, AuditRepo};
use custody_core::error::PortError;
use rusqlite::params;

use crate::tx::{db_err, SqliteTx};

impl AuditRepo for SqliteTx<'_> {
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
