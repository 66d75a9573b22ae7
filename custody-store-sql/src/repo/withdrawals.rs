//! Withdrawal quotes and withdrawals (migration 0009).

use crate::sql::{params, Row};
use custody_core::error::PortError;
use custody_core::page::{Page, Paged};
use custody_core::time::Timestamp;
use custody_core::withdrawal::{
    Quote, Withdrawal, WithdrawalReads, WithdrawalRepo, WithdrawalStatus, WithdrawalStep,
};
use custody_core::TenantId;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{amount, bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const QUOTE_COLUMNS: &str = "id, tenant, external_user_id, network, asset, destination_address, \
     amount, costs, network_native, rate, created_at, expires_at, used_at";

const COLUMNS: &str = "id, tenant, quote_id, external_user_id, network, asset, \
     destination_address, amount, costs, rate, status, hold_id, outgoing_id, tx_hash, \
     block_number, confirmations, actual_network_cost_units, failure_reason, history, \
     created_at, updated_at";

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a stored record serializes")
}

fn from_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, PortError> {
    serde_json::from_str(text).map_err(|_| bad(what, text))
}

type RawQuote = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    Option<i64>,
);

fn raw_quote(r: &Row<'_>) -> crate::sql::Result<RawQuote> {
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
        r.get(10)?,
        r.get(11)?,
        r.get(12)?,
    ))
}

fn decode_quote(r: RawQuote) -> Result<Quote, PortError> {
    let (id, tenant, user, network, asset, dest, amt, costs, native, rate, created, expires, used) =
        r;
    Ok(Quote {
        id: parse_uuid(&id)?,
        tenant: TenantId::from_stored(tenant)?,
        external_user_id: user,
        network: network.parse().map_err(|_| bad("network", &network))?,
        asset,
        destination_address: dest,
        amount: amount(&amt)?,
        costs: from_json("costs", &costs)?,
        network_native: amount(&native)?,
        rate: from_json("rate", &rate)?,
        created_at: ts(created),
        expires_at: ts(expires),
        used_at: used.map(ts),
    })
}

struct Raw {
    cols: [String; 13],
    tx_hash: Option<String>,
    block_number: Option<i64>,
    confirmations: i64,
    actual: Option<String>,
    failure_reason: Option<String>,
    history: String,
    created_at: i64,
    updated_at: i64,
}

fn raw(r: &Row<'_>) -> crate::sql::Result<Raw> {
    let mut cols: [String; 13] = Default::default();
    for (i, c) in cols.iter_mut().enumerate() {
        *c = r.get(i)?;
    }
    Ok(Raw {
        cols,
        tx_hash: r.get(13)?,
        block_number: r.get(14)?,
        confirmations: r.get(15)?,
        actual: r.get(16)?,
        failure_reason: r.get(17)?,
        history: r.get(18)?,
        created_at: r.get(19)?,
        updated_at: r.get(20)?,
    })
}

fn decode(r: Raw) -> Result<Withdrawal, PortError> {
    let [id, tenant, quote_id, user, network, asset, dest, amt, costs, rate, status, hold, out] =
        r.cols;
    Ok(Withdrawal {
        id: parse_uuid(&id)?,
        tenant: TenantId::from_stored(tenant)?,
        quote_id: parse_uuid(&quote_id)?,
        external_user_id: user,
        network: network.parse().map_err(|_| bad("network", &network))?,
        asset,
        destination_address: dest,
        amount: amount(&amt)?,
        costs: from_json("costs", &costs)?,
        rate: from_json("rate", &rate)?,
        status: WithdrawalStatus::parse(&status).ok_or_else(|| bad("status", &status))?,
        hold_id: parse_uuid(&hold)?,
        outgoing_id: parse_uuid(&out)?,
        tx_hash: r.tx_hash,
        block_number: r
            .block_number
            .map(|n| u64::try_from(n).map_err(|_| bad("block number", &n.to_string())))
            .transpose()?,
        confirmations: u32::try_from(r.confirmations)
            .map_err(|_| bad("confirmations", &r.confirmations.to_string()))?,
        actual_network_cost_units: r.actual.as_deref().map(amount).transpose()?,
        failure_reason: r.failure_reason,
        history: from_json::<Vec<WithdrawalStep>>("history", &r.history)?,
        created_at: ts(r.created_at),
        updated_at: ts(r.updated_at),
    })
}

impl SqlTx<'_> {
    fn withdrawals_where(
        &self,
        clause: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Withdrawal>, PortError> {
        let raws = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM withdrawals WHERE {clause}"))
            .map_err(db_err)?
            .query_map(args, raw)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter().map(decode).collect()
    }
}

impl WithdrawalRepo for SqlTx<'_> {
    fn insert_quote(&mut self, q: &Quote) -> Result<(), PortError> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO withdrawal_quotes ({QUOTE_COLUMNS}) VALUES \
                 (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)"
            ))
            .map_err(db_err)?
            .execute(params![
                q.id.to_string(),
                q.tenant.as_str(),
                q.external_user_id,
                q.network.as_str(),
                q.asset,
                q.destination_address,
                q.amount.to_string(),
                json(&q.costs),
                q.network_native.to_string(),
                json(&q.rate),
                q.created_at.unix_millis(),
                q.expires_at.unix_millis(),
                q.used_at.map(|t| t.unix_millis()),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn use_quote(&mut self, id: Uuid, at: Timestamp) -> Result<bool, PortError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE withdrawal_quotes SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL",
            )
            .map_err(db_err)?
            .execute(params![id.to_string(), at.unix_millis()])
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn insert_withdrawal(&mut self, w: &Withdrawal) -> Result<(), PortError> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO withdrawals ({COLUMNS}) VALUES \
                 (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21)"
            ))
            .map_err(db_err)?
            .execute(params![
                w.id.to_string(),
                w.tenant.as_str(),
                w.quote_id.to_string(),
                w.external_user_id,
                w.network.as_str(),
                w.asset,
                w.destination_address,
                w.amount.to_string(),
                json(&w.costs),
                json(&w.rate),
                w.status.as_str(),
                w.hold_id.to_string(),
                w.outgoing_id.to_string(),
                w.tx_hash,
                w.block_number.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                i64::from(w.confirmations),
                w.actual_network_cost_units.map(|a| a.to_string()),
                w.failure_reason,
                json(&w.history),
                w.created_at.unix_millis(),
                w.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_withdrawal(&mut self, w: &Withdrawal) -> Result<(), PortError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE withdrawals SET status = ?2, tx_hash = ?3, block_number = ?4, \
                 confirmations = ?5, actual_network_cost_units = ?6, failure_reason = ?7, \
                 history = ?8, updated_at = ?9 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                w.id.to_string(),
                w.status.as_str(),
                w.tx_hash,
                w.block_number.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                i64::from(w.confirmations),
                w.actual_network_cost_units.map(|a| a.to_string()),
                w.failure_reason,
                json(&w.history),
                w.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        if n == 1 {
            Ok(())
        } else {
            Err(PortError::permanent(
                "store",
                format!("withdrawal {} does not exist", w.id),
            ))
        }
    }
}

impl WithdrawalReads for SqlTx<'_> {
    fn quote(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Quote>, PortError> {
        let raws = self
            .conn
            .prepare_cached(&format!(
                "SELECT {QUOTE_COLUMNS} FROM withdrawal_quotes WHERE id = ?1 AND tenant = ?2"
            ))
            .map_err(db_err)?
            .query_map(params![id.to_string(), tenant.as_str()], raw_quote)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter().next().map(decode_quote).transpose()
    }

    fn withdrawal(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Withdrawal>, PortError> {
        Ok(self
            .withdrawals_where(
                "id = ?1 AND tenant = ?2",
                params![id.to_string(), tenant.as_str()],
            )?
            .pop())
    }

    fn withdrawal_by_id(&mut self, id: Uuid) -> Result<Option<Withdrawal>, PortError> {
        Ok(self
            .withdrawals_where("id = ?1", params![id.to_string()])?
            .pop())
    }

    fn list_withdrawals(&mut self, page: Page) -> Result<Paged<Withdrawal>, PortError> {
        let Some(args) = super::page_args(self.conn, "withdrawals", page)? else {
            return Ok(None);
        };
        self.withdrawals_where(super::PAGE_CLAUSE, args).map(Some)
    }

    fn pending_withdrawal_count(&mut self) -> Result<u64, PortError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM withdrawals WHERE status IN ('reserved', 'broadcasted')",
            )
            .map_err(db_err)?
            .query_row([], |r| r.get(0))
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
