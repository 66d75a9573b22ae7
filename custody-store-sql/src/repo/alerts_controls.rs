use crate::sql::{params, OptionalExtension};
use custody_core::admin::{Alert, AlertReads, AlertRepo, Control, ControlReads, ControlRepo};
use custody_core::error::PortError;
use custody_core::page::{Page, Paged};
use custody_core::time::Timestamp;
use uuid::Uuid;

use super::{parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

impl AlertRepo for SqlTx<'_> {
    fn raise_alert(&mut self, a: &Alert) -> Result<(), PortError> {
        if a.acknowledged_at.is_some() || a.acknowledged_by.is_some() {
            return Err(PortError::permanent(
                "store",
                "a new alert is unacknowledged",
            ));
        }
        self.conn
            .execute(
                "INSERT INTO alerts (id, kind, severity, message, reference_type, reference_id, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    a.id.to_string(),
                    a.kind,
                    a.severity,
                    a.message,
                    a.reference_type,
                    a.reference_id.map(|r| r.to_string()),
                    a.created_at.unix_millis(),
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn acknowledge_alert(&mut self, id: Uuid, at: Timestamp, by: &str) -> Result<(), PortError> {
        // The first acknowledgement stands: a second one matches the row and changes nothing.
        let found = self
            .conn
            .execute(
                "UPDATE alerts SET acknowledged_at = COALESCE(acknowledged_at, ?2), \
                 acknowledged_by = COALESCE(acknowledged_by, ?3) WHERE id = ?1",
                params![id.to_string(), at.unix_millis(), by],
            )
            .map_err(db_err)?;
        if found == 0 {
            return Err(PortError::permanent("store", format!("no alert {id}")));
        }
        Ok(())
    }
}

impl SqlTx<'_> {
    fn alerts_where(
        &self,
        clause: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Alert>, PortError> {
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT id, kind, severity, message, reference_type, reference_id, created_at, \
                 acknowledged_at, acknowledged_by FROM alerts WHERE {clause}"
            ))
            .map_err(db_err)?
            .query_map(args, |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ),
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, Option<i64>>(7)?,
                    r.get::<_, Option<String>>(8)?,
                ))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(
                |(
                    (id, kind, severity, message),
                    reference_type,
                    reference_id,
                    at,
                    ack_at,
                    ack_by,
                )| {
                    Ok(Alert {
                        id: parse_uuid(&id)?,
                        kind,
                        severity,
                        message,
                        reference_type,
                        reference_id: reference_id.as_deref().map(parse_uuid).transpose()?,
                        created_at: ts(at),
                        acknowledged_at: ack_at.map(ts),
                        acknowledged_by: ack_by,
                    })
                },
            )
            .collect()
    }
}

impl AlertReads for SqlTx<'_> {
    fn list_alerts(&mut self, page: Page) -> Result<Paged<Alert>, PortError> {
        let Some(args) = super::page_args(self.conn, "alerts", page)? else {
            return Ok(None);
        };
        self.alerts_where(super::PAGE_CLAUSE, args).map(Some)
    }

    fn alert(&mut self, id: Uuid) -> Result<Option<Alert>, PortError> {
        Ok(self.alerts_where("id = ?1", [id.to_string()])?.pop())
    }

    fn open_alert_count(&mut self) -> Result<u64, PortError> {
        let n: i64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM alerts WHERE acknowledged_at IS NULL",
                [],
                |r| r.get(0),
            )
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

impl ControlRepo for SqlTx<'_> {
    fn put_control(&mut self, c: &Control) -> Result<(), PortError> {
        self.conn
            .execute(
                "INSERT INTO controls (control_key, enabled, reason, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (control_key) DO UPDATE SET enabled = ?2, reason = ?3, updated_by = ?4, updated_at = ?5",
                params![c.control_key, c.enabled, c.reason, c.updated_by, c.updated_at.unix_millis()],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

impl ControlReads for SqlTx<'_> {
    fn control(&mut self, key: &str) -> Result<Option<Control>, PortError> {
        self.conn
            .prepare_cached(
                "SELECT control_key, enabled, reason, updated_by, updated_at FROM controls WHERE control_key = ?1",
            )
            .map_err(db_err)?
            .query_row([key], |r| {
                Ok(Control {
                    control_key: r.get(0)?,
                    enabled: r.get(1)?,
                    reason: r.get(2)?,
                    updated_by: r.get(3)?,
                    updated_at: ts(r.get(4)?),
                })
            })
            .optional()
            .map_err(db_err)
    }

    fn list_controls(&mut self) -> Result<Vec<Control>, PortError> {
        self.conn
            .prepare("SELECT control_key, enabled, reason, updated_by, updated_at FROM controls ORDER BY control_key")
            .map_err(db_err)?
            .query_map([], |r| {
                Ok(Control {
                    control_key: r.get(0)?,
                    enabled: r.get(1)?,
                    reason: r.get(2)?,
                    updated_by: r.get(3)?,
                    updated_at: ts(r.get(4)?),
                })
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
}
