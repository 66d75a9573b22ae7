//! Webhook endpoints, delivery claims and attempts (migration 0003).

use custody_core::error::PortError;
use custody_core::time::Timestamp;
use custody_core::vault::Sealed;
use std::collections::BTreeMap;

use crate::sql::{params, OptionalExtension};
use custody_core::webhook::{
    choose_claims, tenant_room, Attempt, Claim, ClaimCandidate, DueEvent, Endpoint, EventCounts,
    EventStatus, EventView, Step, WebhookReads, WebhookRepo,
};
use uuid::Uuid;

use super::{parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn limit_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

type RawEvent = (
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
    i64,
    i64,
    i64,
);

const EVENT_COLUMNS: &str = "o.id, o.tenant, o.event_type, o.status, o.last_error, \
     o.next_attempt_at, o.created_at, o.updated_at, \
     (SELECT COUNT(*) FROM webhook_attempts a WHERE a.event_id = o.id)";

fn raw_event(r: &crate::sql::Row<'_>) -> crate::sql::Result<RawEvent> {
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
    ))
}

impl SqlTx<'_> {
    fn attempts_of(&self, event_id: &str) -> Result<Vec<Attempt>, PortError> {
        let id = parse_uuid(event_id)?;
        self.conn
            .prepare_cached(
                "SELECT at, url, status_code, error, latency_ms FROM webhook_attempts \
                 WHERE event_id = ?1 ORDER BY id",
            )
            .map_err(db_err)?
            .query_map([event_id], |r| {
                Ok(Attempt {
                    event_id: id,
                    at: ts(r.get(0)?),
                    url: r.get(1)?,
                    status_code: r
                        .get::<_, Option<i64>>(2)?
                        .and_then(|s| u16::try_from(s).ok()),
                    error: r.get(3)?,
                    latency_ms: count(r.get(4)?),
                })
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }

    fn decode_event(&self, raw: RawEvent) -> Result<EventView, PortError> {
        let (id, tenant, event_type, status, last_error, next_at, created_at, updated_at, n) = raw;
        let status = EventStatus::parse(&status).ok_or_else(|| {
            PortError::permanent("store", format!("bad outbox status {status:?}"))
        })?;
        let attempt_history = self.attempts_of(&id)?;
        Ok(EventView {
            id: parse_uuid(&id)?,
            tenant,
            event_type,
            status,
            attempts: u32::try_from(n).unwrap_or(u32::MAX),
            last_error,
            next_attempt_at: (status == EventStatus::Pending).then(|| ts(next_at)),
            created_at: ts(created_at),
            updated_at: ts(updated_at),
            attempt_history,
        })
    }

    fn due_of_tenant(
        &self,
        tenant: &str,
        now: i64,
        room: usize,
    ) -> Result<Vec<(i64, i64)>, PortError> {
        self.conn
            .prepare_cached(
                "SELECT rowid, next_attempt_at FROM outbox \
                 WHERE tenant = ?1 AND status = 'pending' AND next_attempt_at <= ?2 \
                   AND (leased_until IS NULL OR leased_until <= ?2) \
                 ORDER BY next_attempt_at, rowid LIMIT ?3",
            )
            .map_err(db_err)?
            .query_map(params![tenant, now, limit_i64(room)], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
}

impl WebhookRepo for SqlTx<'_> {
    fn put_webhook_endpoint(&mut self, e: &Endpoint) -> Result<Option<Endpoint>, PortError> {
        let old = self.webhook_endpoint(&e.tenant)?;
        let sealed = e.secret.as_bytes();
        self.conn
            .prepare_cached(
                "INSERT INTO webhook_endpoints (tenant, url, secret_sealed, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (tenant) DO UPDATE SET url = excluded.url, \
                   secret_sealed = excluded.secret_sealed, updated_at = excluded.updated_at",
            )
            .map_err(db_err)?
            .execute(params![
                e.tenant.as_str(),
                e.url,
                sealed,
                e.created_at.unix_millis(),
                e.updated_at.unix_millis()
            ])
            .map_err(db_err)?;
        Ok(old)
    }

    fn claim_due_events(&mut self, claim: &Claim) -> Result<Vec<DueEvent>, PortError> {
        if claim.limit == 0 || claim.tenant_max == 0 {
            return Ok(Vec::new());
        }
        let now = claim.now.unix_millis();
        let tenants = self
            .conn
            .prepare_cached("SELECT tenant FROM webhook_endpoints ORDER BY tenant")
            .map_err(db_err)?
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        let busy: Vec<(String, i64)> = self
            .conn
            .prepare_cached(
                "SELECT tenant, COUNT(*) FROM outbox \
                 WHERE leased_until IS NOT NULL AND leased_until > ?1 AND status = 'pending' \
                 GROUP BY tenant",
            )
            .map_err(db_err)?
            .query_map([now], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db_err)?
            .collect::<Result<_, _>>()
            .map_err(db_err)?;
        let in_flight: BTreeMap<String, usize> = busy
            .into_iter()
            .map(|(t, n)| (t, usize::try_from(n).unwrap_or(usize::MAX)))
            .collect();
        let mut candidates = Vec::new();
        for tenant in tenants {
            let room = tenant_room(claim, in_flight.get(&tenant).copied().unwrap_or(0));
            if room > 0 {
                for (rowid, due) in self.due_of_tenant(&tenant, now, room)? {
                    candidates.push(ClaimCandidate {
                        key: rowid,
                        tenant: tenant.clone(),
                        due_at: ts(due),
                    });
                }
            }
        }
        let chosen = choose_claims(claim, &in_flight, candidates);

        let mut out = Vec::with_capacity(chosen.len());
        for rowid in chosen {
            self.conn
                .prepare_cached("UPDATE outbox SET leased_until = ?2 WHERE rowid = ?1")
                .map_err(db_err)?
                .execute(params![rowid, claim.lease_until.unix_millis()])
                .map_err(db_err)?;
            let (id, tenant, event_type, body, attempts, url, sealed) = self
                .conn
                .prepare_cached(
                    "SELECT o.id, o.tenant, o.event_type, o.body, o.attempts, e.url, e.secret_sealed \
                     FROM outbox o JOIN webhook_endpoints e ON e.tenant = o.tenant \
                     WHERE o.rowid = ?1",
                )
                .map_err(db_err)?
                .query_row([rowid], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Vec<u8>>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, Vec<u8>>(6)?,
                    ))
                })
                .map_err(db_err)?;
            let secret = Sealed::from_stored(sealed);
            out.push(DueEvent {
                id: parse_uuid(&id)?,
                tenant,
                event_type,
                body,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                url,
                secret,
            });
        }
        Ok(out)
    }

    fn finish_attempt(&mut self, a: &Attempt, step: Step) -> Result<bool, PortError> {
        let (status, next_at) = match step {
            Step::Delivered => (EventStatus::Delivered, None),
            Step::RetryAt(at) => (EventStatus::Pending, Some(at.unix_millis())),
            Step::DeadLetter => (EventStatus::DeadLettered, None),
        };
        let updated = self
            .conn
            .prepare_cached(
                "UPDATE outbox SET attempts = attempts + 1, status = ?2, \
                   next_attempt_at = COALESCE(?3, next_attempt_at), \
                   last_error = CASE WHEN ?2 = 'delivered' THEN NULL ELSE COALESCE(?4, last_error) END, \
                   leased_until = NULL, updated_at = ?5 \
                 WHERE id = ?1 AND status = 'pending'",
            )
            .map_err(db_err)?
            .execute(params![
                a.event_id.to_string(),
                status.as_str(),
                next_at,
                a.error,
                a.at.unix_millis()
            ])
            .map_err(db_err)?;
        if updated == 0 {
            return Ok(false);
        }
        self.conn
            .prepare_cached(
                "INSERT INTO webhook_attempts (event_id, at, url, status_code, error, latency_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(db_err)?
            .execute(params![
                a.event_id.to_string(),
                a.at.unix_millis(),
                a.url,
                a.status_code.map(i64::from),
                a.error,
                i64::try_from(a.latency_ms).unwrap_or(i64::MAX)
            ])
            .map_err(db_err)?;
        Ok(true)
    }

    fn requeue_dead_lettered(&mut self, id: Uuid, now: Timestamp) -> Result<bool, PortError> {
        let n = self
            .conn
            .execute(
                "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ?2, \
                   leased_until = NULL, updated_at = ?2 \
                 WHERE id = ?1 AND status = 'dead_lettered'",
                params![id.to_string(), now.unix_millis()],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }
}

impl WebhookReads for SqlTx<'_> {
    fn webhook_endpoint(
        &mut self,
        tenant: &custody_core::TenantId,
    ) -> Result<Option<Endpoint>, PortError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT url, secret_sealed, created_at, updated_at FROM webhook_endpoints \
                 WHERE tenant = ?1",
            )
            .map_err(db_err)?
            .query_row([tenant.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()
            .map_err(db_err)?;
        row.map(|(url, sealed, created_at, updated_at)| {
            let secret = Sealed::from_stored(sealed);
            Ok(Endpoint {
                tenant: tenant.to_owned(),
                url,
                secret,
                created_at: ts(created_at),
                updated_at: ts(updated_at),
            })
        })
        .transpose()
    }

    fn list_webhook_events(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<EventView>, PortError> {
        let Some(args) = super::page_args(self.conn, "outbox", page)? else {
            return Ok(None);
        };
        // `o.` is the only table of the query, so the clause's bare column names are its own.
        let raws = self
            .conn
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM outbox o WHERE {}",
                super::PAGE_CLAUSE
            ))
            .map_err(db_err)?
            .query_map(args, raw_event)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter()
            .map(|r| self.decode_event(r))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn webhook_event(&mut self, id: Uuid) -> Result<Option<EventView>, PortError> {
        let raw = self
            .conn
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM outbox o WHERE o.id = ?1"
            ))
            .map_err(db_err)?
            .query_row([id.to_string()], raw_event)
            .optional()
            .map_err(db_err)?;
        raw.map(|r| self.decode_event(r)).transpose()
    }

    fn count_webhook_events(&mut self) -> Result<EventCounts, PortError> {
        let rows = self
            .conn
            // Grouped by tenant too, so the scan walks outbox_due_by_tenant in its own order
            // (a covering index) instead of sorting every row into a temporary b-tree; the
            // tenants' counts are summed below.
            .prepare_cached("SELECT status, COUNT(*) FROM outbox GROUP BY tenant, status")
            .map_err(db_err)?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        let mut counts = EventCounts::default();
        for (status, n) in rows {
            match EventStatus::parse(&status) {
                Some(EventStatus::Pending) => counts.pending += count(n),
                Some(EventStatus::Delivered) => counts.delivered += count(n),
                Some(EventStatus::DeadLettered) => counts.dead_lettered += count(n),
                None => return Err(PortError::permanent("store", "bad outbox status")),
            }
        }
        Ok(counts)
    }
}
