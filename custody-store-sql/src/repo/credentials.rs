use std::collections::BTreeSet;

use custody_core::auth::second_factor::Attempts;
use custody_core::auth::{CredentialReads, CredentialRepo, Scope, StoredCredential};
use custody_core::error::PortError;
use custody_core::secret::Secret;
use custody_core::time::Timestamp;
use custody_core::vault::Sealed;
use uuid::Uuid;

use crate::sql::{params, Dialect, OptionalExtension, Row, ToValue, Value};

use super::{parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const COLUMNS: &str = "id, api_key, tenant, scopes, admin, rate_limit, hmac_secret_sealed, \
                       pin_hash, totp_secret_sealed, totp_last_step, created_at, revoked_at";

struct RawCredential {
    id: String,
    api_key: String,
    tenant: String,
    scopes: String,
    admin: bool,
    rate_limit: i64,
    hmac_sealed: Vec<u8>,
    pin_hash: Option<String>,
    totp_sealed: Option<Vec<u8>>,
    totp_last_step: Option<i64>,
    created_at: i64,
    revoked_at: Option<i64>,
}

fn raw(row: &Row<'_>) -> crate::sql::Result<RawCredential> {
    Ok(RawCredential {
        id: row.get(0)?,
        api_key: row.get(1)?,
        tenant: row.get(2)?,
        scopes: row.get(3)?,
        admin: row.get(4)?,
        rate_limit: row.get(5)?,
        hmac_sealed: row.get(6)?,
        pin_hash: row.get(7)?,
        totp_sealed: row.get(8)?,
        totp_last_step: row.get(9)?,
        created_at: row.get(10)?,
        revoked_at: row.get(11)?,
    })
}

impl SqlTx<'_> {
    fn decode_credential(&self, r: RawCredential) -> Result<StoredCredential, PortError> {
        let id = parse_uuid(&r.id)?;
        let scopes = r
            .scopes
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<Scope>()
                    .map_err(|e| PortError::permanent("store", e))
            })
            .collect::<Result<BTreeSet<_>, _>>()?;
        Ok(StoredCredential {
            id,
            api_key: r.api_key,
            tenant: custody_core::TenantId::from_stored(r.tenant)?,
            scopes,
            admin: r.admin,
            rate_limit: u32::try_from(r.rate_limit).unwrap_or(u32::MAX),
            hmac_secret: Sealed::from_stored(r.hmac_sealed),
            pin_hash: r.pin_hash.map(Secret::new),
            totp_secret: r.totp_sealed.map(Sealed::from_stored),
            totp_last_step: r.totp_last_step,
            created_at: ts(r.created_at),
            revoked_at: r.revoked_at.map(ts),
        })
    }
}

impl CredentialRepo for SqlTx<'_> {
    fn insert_credential(&mut self, c: &StoredCredential) -> Result<(), PortError> {
        let scopes = c
            .scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let hmac_sealed = c.hmac_secret.as_bytes();
        let totp_sealed = c.totp_secret.as_ref().map(|s| s.as_bytes());
        self.conn
            .execute(
                &format!("INSERT INTO credentials ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)"),
                params![
                    c.id.to_string(),
                    c.api_key,
                    c.tenant.as_str(),
                    scopes,
                    c.admin,
                    i64::from(c.rate_limit),
                    hmac_sealed,
                    c.pin_hash.as_ref().map(|h| h.expose().clone()),
                    totp_sealed,
                    c.totp_last_step,
                    c.created_at.unix_millis(),
                    c.revoked_at.map(|t| t.unix_millis()),
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn revoke_credential(&mut self, api_key: &str, at: Timestamp) -> Result<bool, PortError> {
        let n = self
            .conn
            .execute(
                "UPDATE credentials SET revoked_at = ?2 WHERE api_key = ?1 AND revoked_at IS NULL",
                params![api_key, at.unix_millis()],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn use_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError> {
        // The primary key decides; an existing row means the nonce was used.
        let n = self
            .conn
            .prepare_cached(
                "INSERT INTO nonces (credential_id, nonce, expires_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT DO NOTHING",
            )
            .map_err(db_err)?
            .execute(params![
                credential.to_string(),
                nonce,
                expires_at.unix_millis()
            ])
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn put_nonce_fence(
        &mut self,
        fence: &custody_core::auth::nonce_set::NonceFence,
    ) -> Result<(), PortError> {
        self.conn
            .execute(
                "INSERT INTO nonce_fence (id, low_s, high_s, clean) VALUES (1, ?1, ?2, ?3) \
                 ON CONFLICT (id) DO UPDATE SET low_s = ?1, high_s = ?2, clean = ?3",
                params![fence.low_s, fence.high_s, fence.clean],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// On PostgreSQL several instances share the store, so no process's set holds what the
    /// others accepted: a logged nonce is recorded as used, under the primary key, like any
    /// other.
    fn log_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError> {
        if self.conn.dialect() == Dialect::Postgres {
            return self.use_nonce(credential, nonce, expires_at);
        }
        self.conn
            .prepare_cached(
                "INSERT INTO nonce_log (credential_id, nonce, expires_at) VALUES (?1, ?2, ?3)",
            )
            .map_err(db_err)?
            .execute(params![
                credential.to_string(),
                nonce,
                expires_at.unix_millis()
            ])
            .map_err(db_err)?;
        Ok(true)
    }

    /// Rows of `LOG_CHUNK` per statement: a batch is a few hundred nonces, and each
    /// statement's fixed cost (look-up, reset) was most of a logged nonce's.
    fn log_nonces(
        &mut self,
        nonces: &[custody_core::auth::nonce_set::PendingNonce],
    ) -> Result<(), PortError> {
        let mut chunks = nonces.chunks_exact(LOG_CHUNK);
        if nonces.len() >= LOG_CHUNK && self.conn.dialect() == Dialect::Sqlite {
            let mut stmt = self.conn.prepare_cached(log_insert_sql()).map_err(db_err)?;
            for chunk in chunks.by_ref() {
                let ids: Vec<String> = chunk.iter().map(|n| n.credential.to_string()).collect();
                let mut values: Vec<&dyn ToValue> = Vec::with_capacity(3 * LOG_CHUNK);
                let expiries: Vec<i64> = chunk.iter().map(|n| n.expires_at.unix_millis()).collect();
                for ((n, id), expiry) in chunk.iter().zip(&ids).zip(&expiries) {
                    values.extend([id as &dyn ToValue, &n.nonce, expiry]);
                }
                stmt.execute(values.as_slice()).map_err(db_err)?;
            }
        }
        for n in if self.conn.dialect() == Dialect::Sqlite {
            chunks.remainder()
        } else {
            nonces
        } {
            self.log_nonce(n.credential, &n.nonce, n.expires_at)?;
        }
        Ok(())
    }

    /// On PostgreSQL several instances share these rows, each with its own clock: besides the
    /// caller's `now` (the pruning instance's clock, less its margin), the database's clock
    /// less `auth::NONCE_PRUNE_MARGIN_S` bounds what is forgotten, so one instance whose clock
    /// runs far ahead cannot forget the nonces the others still accept. It keeps no log.
    fn prune_nonces(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError> {
        if self.conn.dialect() == Dialect::Postgres {
            let n = self
                .conn
                .execute(
                    "DELETE FROM nonces WHERE (credential_id, nonce) IN (SELECT credential_id, nonce \
                     FROM nonces WHERE expires_at < LEAST(?1::BIGINT, \
                     (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT - ?3::BIGINT) \
                     ORDER BY expires_at LIMIT ?2)",
                    params![
                        now.unix_millis(),
                        i64::try_from(limit).unwrap_or(i64::MAX),
                        custody_core::auth::NONCE_PRUNE_MARGIN_S.saturating_mul(1_000)
                    ],
                )
                .map_err(db_err)?;
            return Ok(n as u64);
        }
        let mut n = 0;
        for sql in [
            "DELETE FROM nonces WHERE (credential_id, nonce) IN (SELECT credential_id, nonce \
             FROM nonces WHERE expires_at < ?1 ORDER BY expires_at LIMIT ?2)",
            "DELETE FROM nonce_log WHERE rowid IN (SELECT rowid FROM nonce_log \
             WHERE expires_at < ?1 ORDER BY expires_at LIMIT ?2)",
        ] {
            n += self
                .conn
                .execute(
                    sql,
                    params![now.unix_millis(), i64::try_from(limit).unwrap_or(i64::MAX)],
                )
                .map_err(db_err)?;
        }
        Ok(n as u64)
    }

    fn advance_totp_step(&mut self, credential: Uuid, step: i64) -> Result<bool, PortError> {
        let n = self
            .conn
            .execute(
                "UPDATE credentials SET totp_last_step = ?2 \
                 WHERE id = ?1 AND (totp_last_step IS NULL OR totp_last_step < ?2)",
                params![credential.to_string(), step],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn second_factor_attempts(&mut self, credential: Uuid) -> Result<Attempts, PortError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT failures, locked_until, in_flight, in_flight_until \
                 FROM second_factor_attempts WHERE credential_id = ?1",
            )
            .map_err(db_err)?
            .query_row([credential.to_string()], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                ))
            })
            .optional()
            .map_err(db_err)?;
        let Some((failures, locked_until, in_flight, in_flight_until)) = row else {
            return Ok(Attempts::default());
        };
        let count = |n: i64| {
            u32::try_from(n)
                .map_err(|_| PortError::permanent("store", "attempt count out of range"))
        };
        Ok(Attempts {
            failures: count(failures)?,
            locked_until: locked_until.map(ts),
            in_flight: count(in_flight)?,
            in_flight_until: in_flight_until.map(ts),
        })
    }

    fn put_second_factor_attempts(
        &mut self,
        credential: Uuid,
        a: &Attempts,
    ) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO second_factor_attempts \
                 (credential_id, failures, locked_until, in_flight, in_flight_until) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (credential_id) DO UPDATE SET failures = excluded.failures, \
                 locked_until = excluded.locked_until, in_flight = excluded.in_flight, \
                 in_flight_until = excluded.in_flight_until",
            )
            .map_err(db_err)?
            .execute(params![
                credential.to_string(),
                i64::from(a.failures),
                a.locked_until.map(|t| t.unix_millis()),
                i64::from(a.in_flight),
                a.in_flight_until.map(|t| t.unix_millis()),
            ])
            .map_err(db_err)?;
        Ok(())
    }
}

/// Nonces per `INSERT` of the log (3 parameters each, far below SQLite's limit of 32,766).
const LOG_CHUNK: usize = 64;

/// The `INSERT` of [`LOG_CHUNK`] log rows, built once per process.
fn log_insert_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let rows = vec!["(?,?,?)"; LOG_CHUNK].join(",");
        format!("INSERT INTO nonce_log (credential_id, nonce, expires_at) VALUES {rows}")
    })
}

/// The credentials version (migration 0019: triggers on `credentials` raise it).
pub const CREDENTIALS_VERSION_SQL: &str = "SELECT n FROM credentials_version WHERE id = 1";

impl CredentialReads for SqlTx<'_> {
    fn credentials_version(&mut self) -> Result<Option<u64>, PortError> {
        if let Some(v) = self.snapshot_version {
            return Ok(Some(v));
        }
        // Instances sharing a PostgreSQL store keep no credentials in memory, so none needs it.
        if self.conn.dialect() == Dialect::Postgres {
            return Ok(None);
        }
        let n: i64 = self
            .conn
            .prepare_cached(CREDENTIALS_VERSION_SQL)
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db_err)?;
        Ok(Some(n.unsigned_abs()))
    }

    fn credential_by_api_key(
        &mut self,
        api_key: &str,
    ) -> Result<Option<StoredCredential>, PortError> {
        let found = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM credentials WHERE api_key = ?1"
            ))
            .map_err(db_err)?
            .query_row([api_key], raw)
            .optional()
            .map_err(db_err)?;
        found.map(|r| self.decode_credential(r)).transpose()
    }

    fn list_credentials(&mut self) -> Result<Vec<StoredCredential>, PortError> {
        let raws = self
            .conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM credentials ORDER BY created_at, id"
            ))
            .map_err(db_err)?
            .query_map([], raw)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter()
            .map(|r| self.decode_credential(r))
            .collect()
    }

    fn nonce_fence(
        &mut self,
    ) -> Result<Option<custody_core::auth::nonce_set::NonceFence>, PortError> {
        self.conn
            .query_row(
                "SELECT low_s, high_s, clean FROM nonce_fence WHERE id = 1",
                [],
                |r| {
                    Ok(custody_core::auth::nonce_set::NonceFence {
                        low_s: r.get(0)?,
                        high_s: r.get(1)?,
                        clean: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(db_err)
    }

    fn latest_nonce_expiry(&mut self) -> Result<Option<Timestamp>, PortError> {
        let latest: Option<i64> = self
            .conn
            .query_row("SELECT MAX(expires_at) FROM nonces", [], |r| r.get(0))
            .map_err(db_err)?;
        Ok(latest.map(ts))
    }

    fn visit_nonces(
        &mut self,
        now: Timestamp,
        visit: &mut dyn FnMut(Uuid, &str, Timestamp),
    ) -> Result<u64, PortError> {
        // PostgreSQL keeps no log: every nonce is recorded as used.
        let sql = self.conn.dialect().pick(
            "SELECT credential_id, nonce, expires_at FROM nonce_log WHERE expires_at >= ?1 \
             UNION ALL \
             SELECT credential_id, nonce, expires_at FROM nonces WHERE expires_at >= ?1 \
             ORDER BY expires_at",
            "SELECT credential_id, nonce, expires_at FROM nonces WHERE expires_at >= ?1 \
             ORDER BY expires_at",
        );
        let mut n = 0;
        self.conn
            .prepare(sql)
            .map_err(db_err)?
            .for_each([now.unix_millis()], |row| {
                let text = |i| match row.get_ref(i).map_err(db_err)? {
                    Value::Text(s) => Ok(s),
                    other => Err(PortError::permanent(
                        "store",
                        format!("a kept nonce: {} is not text", other.kind()),
                    )),
                };
                let credential = parse_uuid(text(0)?)?;
                visit(credential, text(1)?, ts(row.get(2).map_err(db_err)?));
                n += 1;
                Ok::<_, PortError>(())
            })?;
        Ok(n)
    }
}
