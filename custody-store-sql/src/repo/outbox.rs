use crate::sql::params;
use custody_core::error::PortError;
use custody_core::outbox::{NewEvent, OutboxRepo};

use crate::tx::{db_err, SqlTx};

impl OutboxRepo for SqlTx<'_> {
    fn enqueue_event(&mut self, e: &NewEvent) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO outbox (id, tenant, event_type, body, created_at, next_attempt_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?5)",
            )
            .map_err(db_err)?
            .execute(params![
                e.id.to_string(),
                e.tenant,
                e.event_type.as_str(),
                e.body,
                e.created_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }
}
