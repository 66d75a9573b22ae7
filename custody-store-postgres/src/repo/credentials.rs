use std::collections::BTreeSet;

use crate::sql::{params, OptionalExtension, Row};
use custody_core::auth::second_factor::Attempts;
use custody_core::auth::{CredentialReads, CredentialRepo, Scope, StoredCredential};
use custody_core::error::PortError;
use custody_core::secret::Secret;
use custody_core::time::Timestamp;
use custody_core::vault::Sealed;
use uuid::Uuid;

use super::{parse_uuid, ts};
use crate::tx::{db_err, PgTx};

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

impl PgTx<'_> {
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

impl CredentialRepo for PgTx<'_> {
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

    /// Several instances share this store, so no process's set holds what the others accepted:
    /// a logged nonce is recorded as used, under the primary key, like any other.
    fn log_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError> {
        self.use_nonce(credential, nonce, expires_at)
    }

    /// Several instances share these rows, each with its own clock: besides the caller's
    /// `now` (the pruning instance's clock, less its margin), the database's clock less
    /// `auth::NONCE_PRUNE_MARGIN_S` bounds what is forgotten, so one instance whose clock runs
    /// far ahead cannot forget the nonces the others still accept.
    fn prune_nonces(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError> {
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

impl CredentialReads for PgTx<'_> {
    fn nonce_fence(
        &mut self,
    ) -> Result<Option<custody_core::auth::nonce_set::NonceFence>, PortError> {
        self.conn
            .query_row(
                "SELECT low_s, high_s, clean FROM nonce_fence WHERE id = 1",
                params![],
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
            .query_row("SELECT MAX(expires_at) FROM nonces", params![], |r| {
                r.get(0)
            })
            .map_err(db_err)?;
        Ok(latest.map(ts))
    }

    fn visit_nonces(
        &mut self,
        now: Timestamp,
        visit: &mut dyn FnMut(Uuid, &str, Timestamp),
    ) -> Result<u64, PortError> {
        let mut rows = self
            .conn
            .prepare(
                "SELECT credential_id, nonce, expires_at FROM nonces WHERE expires_at >= ?1 \
                 ORDER BY expires_at",
            )
            .map_err(db_err)?
            .query(params![now.unix_millis()])
            .map_err(db_err)?;
        let mut n = 0;
        while let Some(row) = rows.next().map_err(db_err)? {
            let credential: String = row.get(0).map_err(db_err)?;
            let nonce: String = row.get(1).map_err(db_err)?;
            visit(
                parse_uuid(&credential)?,
                &nonce,
                ts(row.get(2).map_err(db_err)?),
            );
            n += 1;
        }
        Ok(n)
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
}
