//! Outgoing transactions and EVM nonces (migration 0008).

use crate::sql::{params, OptionalExtension, Row};
use custody_core::error::PortError;
use custody_core::outgoing::{
    Attempt, Included, OutStatus, OutStep, OutgoingReads, OutgoingRepo, OutgoingTx, Purpose,
};
use custody_core::ports::sender::Payment;
use custody_core::ports::signer::HdPath;
use custody_core::time::Timestamp;
use custody_core::Network;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const COLUMNS: &str = "id, network, purpose, reference_id, from_address, from_account, \
     from_index, payment, nonce, status, attempts, included, failure_reason, history, \
     next_check_at, created_at, updated_at, after_id";

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a stored record serializes")
}

fn from_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, PortError> {
    serde_json::from_str(text).map_err(|_| bad(what, text))
}

struct Raw {
    id: String,
    network: String,
    purpose: String,
    reference_id: String,
    from: String,
    account: i64,
    index: i64,
    payment: String,
    nonce: Option<i64>,
    status: String,
    attempts: String,
    included: Option<String>,
    failure_reason: Option<String>,
    history: String,
    next_check_at: i64,
    created_at: i64,
    updated_at: i64,
    after: Option<String>,
}

fn raw(r: &Row<'_>) -> crate::sql::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        network: r.get(1)?,
        purpose: r.get(2)?,
        reference_id: r.get(3)?,
        from: r.get(4)?,
        account: r.get(5)?,
        index: r.get(6)?,
        payment: r.get(7)?,
        nonce: r.get(8)?,
        status: r.get(9)?,
        attempts: r.get(10)?,
        included: r.get(11)?,
        failure_reason: r.get(12)?,
        history: r.get(13)?,
        next_check_at: r.get(14)?,
        created_at: r.get(15)?,
        updated_at: r.get(16)?,
        after: r.get(17)?,
    })
}

fn decode(r: Raw) -> Result<OutgoingTx, PortError> {
    let network: Network = r.network.parse().map_err(|_| bad("network", &r.network))?;
    let component = |v: i64, what: &str| u32::try_from(v).map_err(|_| bad(what, &v.to_string()));
    Ok(OutgoingTx {
        id: parse_uuid(&r.id)?,
        network,
        purpose: Purpose::parse(&r.purpose).ok_or_else(|| bad("purpose", &r.purpose))?,
        reference_id: parse_uuid(&r.reference_id)?,
        from: r.from,
        from_path: HdPath {
            network,
            account: component(r.account, "account")?,
            index: component(r.index, "index")?,
        },
        payment: from_json::<Payment>("payment", &r.payment)?,
        nonce: r
            .nonce
            .map(|n| u64::try_from(n).map_err(|_| bad("nonce", &n.to_string())))
            .transpose()?,
        after: r.after.as_deref().map(parse_uuid).transpose()?,
        status: OutStatus::parse(&r.status).ok_or_else(|| bad("status", &r.status))?,
        attempts: from_json::<Vec<Attempt>>("attempts", &r.attempts)?,
        included: r
            .included
            .as_deref()
            .map(|t| from_json::<Included>("inclusion", t))
            .transpose()?,
        failure_reason: r.failure_reason,
        history: from_json::<Vec<OutStep>>("history", &r.history)?,
        next_check_at: ts(r.next_check_at),
        lease: None,
        seen_head: None,
        created_at: ts(r.created_at),
        updated_at: ts(r.updated_at),
    })
}

impl SqlTx<'_> {
    /// Records each attempt's hash as `t`'s; fails if one is another transaction's.
    fn own_attempt_hashes(&self, t: &OutgoingTx) -> Result<(), PortError> {
        for a in &t.attempts {
            let owner: String = self
                .conn
                .prepare_cached(
                    "INSERT INTO outgoing_attempt_hashes (network, hash, outgoing_id) \
                     VALUES (?1, ?2, ?3) \
                     ON CONFLICT (network, hash) DO UPDATE SET outgoing_id = outgoing_attempt_hashes.outgoing_id \
                     RETURNING outgoing_id",
                )
                .map_err(db_err)?
                .query_row(params![t.network.as_str(), a.hash, t.id.to_string()], |r| {
                    r.get(0)
                })
                .map_err(db_err)?;
            if owner != t.id.to_string() {
                return Err(PortError::permanent(
                    "store",
                    format!(
                        "constraint failed: attempt {} is outgoing transaction {owner}'s",
                        a.hash
                    ),
                ));
            }
        }
        Ok(())
    }

    fn outgoing_where(
        &self,
        clause: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<OutgoingTx>, PortError> {
        let raws = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM outgoing_txs WHERE {clause}"
            ))
            .map_err(db_err)?
            .query_map(args, raw)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter().map(decode).collect()
    }
}

impl OutgoingRepo for SqlTx<'_> {
    fn insert_outgoing(&mut self, t: &OutgoingTx) -> Result<(), PortError> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO outgoing_txs ({COLUMNS}) VALUES \
                 (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)"
            ))
            .map_err(db_err)?
            .execute(params![
                t.id.to_string(),
                t.network.as_str(),
                t.purpose.as_str(),
                t.reference_id.to_string(),
                t.from,
                i64::from(t.from_path.account),
                i64::from(t.from_path.index),
                json(&t.payment),
                t.nonce,
                t.status.as_str(),
                json(&t.attempts),
                t.included.as_ref().map(json),
                t.failure_reason,
                json(&t.history),
                t.next_check_at.unix_millis(),
                t.created_at.unix_millis(),
                t.updated_at.unix_millis(),
                t.after.map(|a| a.to_string()),
            ])
            .map_err(db_err)?;
        self.own_attempt_hashes(t)
    }

    fn update_outgoing(&mut self, t: &OutgoingTx) -> Result<(), PortError> {
        // ?9 NULL: no fence, the lease ends; else only under that very lease, which is kept.
        let n = self
            .conn
            .prepare_cached(
                "UPDATE outgoing_txs SET status = ?2, attempts = ?3, included = ?4, \
                 failure_reason = ?5, history = ?6, next_check_at = ?7, updated_at = ?8, \
                 leased_until = ?9, nonce = COALESCE(nonce, ?10) \
                 WHERE id = ?1 AND (CAST(?9 AS BIGINT) IS NULL OR leased_until = ?9) \
                 AND (nonce IS NULL OR CAST(?10 AS BIGINT) IS NULL OR nonce = ?10)",
            )
            .map_err(db_err)?
            .execute(params![
                t.id.to_string(),
                t.status.as_str(),
                json(&t.attempts),
                t.included.as_ref().map(json),
                t.failure_reason,
                json(&t.history),
                t.next_check_at.unix_millis(),
                t.updated_at.unix_millis(),
                t.lease.map(Timestamp::unix_millis),
                t.nonce,
            ])
            .map_err(db_err)?;
        if n == 1 {
            return self.own_attempt_hashes(t);
        }
        if let Some(stored) = self.outgoing(t.id)? {
            if stored.nonce.is_some() && t.nonce.is_some() && stored.nonce != t.nonce {
                return Err(PortError::permanent(
                    "store",
                    format!(
                        "outgoing transaction {}: its nonce is {:?}, not {:?}",
                        t.id, stored.nonce, t.nonce
                    ),
                ));
            }
            if t.lease.is_some() {
                return Err(lease_lost(t.id));
            }
        }
        Err(PortError::permanent(
            "store",
            format!("outgoing transaction {} does not exist", t.id),
        ))
    }

    fn release_outgoing(&mut self, id: Uuid, lease: Timestamp) -> Result<(), PortError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE outgoing_txs SET leased_until = NULL WHERE id = ?1 AND leased_until = ?2",
            )
            .map_err(db_err)?
            .execute(params![id.to_string(), lease.unix_millis()])
            .map_err(db_err)?;
        if n == 1 {
            Ok(())
        } else {
            Err(lease_lost(id))
        }
    }

    fn allocate_nonce(
        &mut self,
        network: Network,
        address: &str,
        seed: u64,
    ) -> Result<u64, PortError> {
        // One statement: the row is created at `seed` or moved on by one, and the nonce handed
        // out is the value before the move, whatever another writer did before this job.
        let next: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO outgoing_nonces (network, address, next_nonce) VALUES (?1, ?2, CAST(?3 AS BIGINT) + 1) \
                 ON CONFLICT (network, address) DO UPDATE SET next_nonce = outgoing_nonces.next_nonce + 1 \
                 RETURNING next_nonce",
            )
            .map_err(db_err)?
            .query_row(params![network.as_str(), address, seed], |r| {
                r.get(0)
            })
            .map_err(db_err)?;
        u64::try_from(next - 1).map_err(|_| bad("nonce", &next.to_string()))
    }

    fn advance_nonce(
        &mut self,
        network: Network,
        address: &str,
        next: u64,
    ) -> Result<bool, PortError> {
        let moved = self
            .conn
            .prepare_cached(
                "UPDATE outgoing_nonces SET next_nonce = CAST(?3 AS BIGINT) \
                 WHERE network = ?1 AND address = ?2 AND next_nonce < CAST(?3 AS BIGINT)",
            )
            .map_err(db_err)?
            .execute(params![network.as_str(), address, next])
            .map_err(db_err)?;
        Ok(moved > 0)
    }

    fn claim_outgoing(
        &mut self,
        network: Network,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<OutgoingTx>, PortError> {
        let due = self.outgoing_where(
            "network = ?1 AND status NOT IN ('final', 'failed') AND next_check_at <= ?2 \
             AND (leased_until IS NULL OR leased_until <= ?2) \
             ORDER BY next_check_at, created_at, id LIMIT ?3",
            params![
                network.as_str(),
                now.unix_millis(),
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
        )?;
        let mut due = due;
        for t in &mut due {
            self.conn
                .prepare_cached("UPDATE outgoing_txs SET leased_until = ?2 WHERE id = ?1")
                .map_err(db_err)?
                .execute(params![t.id.to_string(), lease_until.unix_millis()])
                .map_err(db_err)?;
            t.lease = Some(lease_until);
        }
        Ok(due)
    }
}

/// Another broadcaster took the transaction over: this one's copy is stale.
fn lease_lost(id: Uuid) -> PortError {
    PortError::transient(
        "store",
        format!("outgoing transaction {id}: its lease ran out and another broadcaster holds it"),
    )
}

impl OutgoingReads for SqlTx<'_> {
    fn outgoing(&mut self, id: Uuid) -> Result<Option<OutgoingTx>, PortError> {
        Ok(self
            .outgoing_where("id = ?1", params![id.to_string()])?
            .pop())
    }

    fn outgoing_for(
        &mut self,
        purpose: Purpose,
        reference_id: Uuid,
    ) -> Result<Option<OutgoingTx>, PortError> {
        Ok(self
            .outgoing_where(
                "purpose = ?1 AND reference_id = ?2",
                params![purpose.as_str(), reference_id.to_string()],
            )?
            .pop())
    }

    fn outgoing_by_attempt(
        &mut self,
        network: Network,
        hash: &str,
    ) -> Result<Option<OutgoingTx>, PortError> {
        Ok(self
            .outgoing_where(
                "id = (SELECT outgoing_id FROM outgoing_attempt_hashes \
                 WHERE network = ?1 AND hash = ?2)",
                params![network.as_str(), hash],
            )?
            .pop())
    }

    fn next_nonce(&mut self, network: Network, address: &str) -> Result<Option<u64>, PortError> {
        let next: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT next_nonce FROM outgoing_nonces WHERE network = ?1 AND address = ?2",
            )
            .map_err(db_err)?
            .query_row(params![network.as_str(), address], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        next.map(|n| u64::try_from(n).map_err(|_| bad("nonce", &n.to_string())))
            .transpose()
    }

    fn outgoing_in_flight(
        &mut self,
        network: Network,
        from: &str,
    ) -> Result<Vec<OutgoingTx>, PortError> {
        self.outgoing_where(
            "network = ?1 AND from_address = ?2 AND status NOT IN ('final', 'failed') \
             ORDER BY created_at, id",
            params![network.as_str(), from],
        )
    }

    fn unfinished_outgoing_count(&mut self, network: Network) -> Result<u64, PortError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM outgoing_txs WHERE network = ?1 \
                 AND status NOT IN ('final', 'failed')",
            )
            .map_err(db_err)?
            .query_row([network.as_str()], |r| r.get(0))
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
