use crate::sql::{params, OptionalExtension};
use custody_core::error::PortError;
use custody_core::idempotency::{
    IdempotencyReads, IdempotencyRecord, IdempotencyRepo, StoredResponse,
};
use custody_core::time::Timestamp;

use super::ts;
use crate::tx::{db_err, SqlTx};

impl IdempotencyRepo for SqlTx<'_> {
    fn insert_idempotency_record(&mut self, r: &IdempotencyRecord) -> Result<(), PortError> {
        // An expired record for the key is replaced; a live one makes the insert fail.
        self.conn
            .prepare_cached(
                "DELETE FROM idempotency WHERE tenant = ?1 AND key = ?2 AND expires_at <= ?3",
            )
            .map_err(db_err)?
            .execute(params![
                r.tenant.as_str(),
                r.key,
                r.created_at.unix_millis()
            ])
            .map_err(db_err)?;
        self.conn
            .prepare_cached(
                "INSERT INTO idempotency (tenant, key, fingerprint, status, body, created_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(db_err)?
            .execute(params![
                r.tenant.as_str(),
                r.key,
                r.fingerprint.as_slice(),
                i64::from(r.response.status),
                r.response.body,
                r.created_at.unix_millis(),
                r.expires_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn prune_idempotency(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError> {
        let n = self
            .conn
            .execute(
                // SQLite deletes by rowid, the table's own b-tree key.
                self.conn.dialect().pick(
                    "DELETE FROM idempotency WHERE rowid IN (SELECT rowid FROM idempotency \
                     WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
                    "DELETE FROM idempotency WHERE (tenant, key) IN (SELECT tenant, key \
                     FROM idempotency WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
                ),
                params![now.unix_millis(), i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .map_err(db_err)?;
        Ok(n as u64)
    }
}

impl IdempotencyReads for SqlTx<'_> {
    fn idempotency_record(
        &mut self,
        tenant: &custody_core::TenantId,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<IdempotencyRecord>, PortError> {
        self.conn
            .prepare_cached(
                "SELECT fingerprint, status, body, created_at, expires_at FROM idempotency \
                 WHERE tenant = ?1 AND key = ?2 AND expires_at > ?3",
            )
            .map_err(db_err)?
            .query_row(params![tenant.as_str(), key, now.unix_millis()], |r| {
                let fp: Vec<u8> = r.get(0)?;
                Ok((
                    fp,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get(3)?,
                    r.get(4)?,
                ))
            })
            .optional()
            .map_err(db_err)?
            .map(|(fp, status, body, created, expires)| {
                let fingerprint = <[u8; 32]>::try_from(fp.as_slice())
                    .map_err(|_| PortError::permanent("store", "bad idempotency fingerprint"))?;
                Ok(IdempotencyRecord {
                    tenant: tenant.to_owned(),
                    key: key.to_owned(),
                    fingerprint,
                    response: StoredResponse {
                        status: u16::try_from(status).unwrap_or(500),
                        body,
                    },
                    created_at: ts(created),
                    expires_at: ts(expires),
                })
            })
            .transpose()
    }
}
