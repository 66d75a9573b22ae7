//! Swap quotes, swaps and router allowances (migration 0011).

use crate::sql::{params, OptionalExtension, Row};
use custody_core::error::PortError;
use custody_core::page::{Page, Paged};
use custody_core::swap::{Allowance, Swap, SwapQuote, SwapReads, SwapRepo, SwapStatus};
use custody_core::time::Timestamp;
use custody_core::withdrawal::{Costs, Rate, WithdrawalStep};
use custody_core::{Amount, Network, TenantId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{amount, bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

/// What a quote is, fixed at insert.
#[derive(Serialize, Deserialize)]
struct QuoteBody {
    asset_in: String,
    asset_out: String,
    amount_in: Amount,
    route: Vec<String>,
    path: Vec<String>,
    expected_amount_out: Amount,
    min_amount_out: Amount,
    slippage_bps: u32,
    costs: Costs,
    network_native: Amount,
    rate: Rate,
}

/// What a swap is, fixed at insert.
#[derive(Serialize, Deserialize)]
struct SwapBody {
    asset_in: String,
    asset_out: String,
    amount_in: Amount,
    route: Vec<String>,
    path: Vec<String>,
    expected_amount_out: Amount,
    min_amount_out: Amount,
    costs: Costs,
    rate: Rate,
    hold_id: Uuid,
    outgoing_id: Uuid,
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a stored record serializes")
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, PortError> {
    serde_json::from_str(text).map_err(|_| bad(what, text))
}

const QUOTE_COLUMNS: &str = "id, tenant, external_user_id, body, created_at, expires_at, used_at";

type RawQuote = (String, String, String, String, i64, i64, Option<i64>);

fn raw_quote(r: &Row<'_>) -> crate::sql::Result<RawQuote> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn decode_quote(
    (id, tenant, user, body, created, expires, used): RawQuote,
) -> Result<SwapQuote, PortError> {
    let b: QuoteBody = from_json("swap quote", &body)?;
    Ok(SwapQuote {
        id: parse_uuid(&id)?,
        tenant: TenantId::from_stored(tenant)?,
        external_user_id: user,
        asset_in: b.asset_in,
        asset_out: b.asset_out,
        amount_in: b.amount_in,
        route: b.route,
        path: b.path,
        expected_amount_out: b.expected_amount_out,
        min_amount_out: b.min_amount_out,
        slippage_bps: b.slippage_bps,
        costs: b.costs,
        network_native: b.network_native,
        rate: b.rate,
        created_at: ts(created),
        expires_at: ts(expires),
        used_at: used.map(ts),
    })
}

const COLUMNS: &str = "id, tenant, quote_id, external_user_id, body, status, tx_hash, \
     block_number, actual_amount_in, actual_amount_out, actual_network_cost_units, \
     failure_reason, history, created_at, updated_at";

struct Raw {
    id: String,
    tenant: String,
    quote_id: String,
    user: String,
    body: String,
    status: String,
    tx_hash: Option<String>,
    block_number: Option<i64>,
    actual_in: Option<String>,
    actual_out: Option<String>,
    actual_cost: Option<String>,
    failure_reason: Option<String>,
    history: String,
    created_at: i64,
    updated_at: i64,
}

fn raw(r: &Row<'_>) -> crate::sql::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        tenant: r.get(1)?,
        quote_id: r.get(2)?,
        user: r.get(3)?,
        body: r.get(4)?,
        status: r.get(5)?,
        tx_hash: r.get(6)?,
        block_number: r.get(7)?,
        actual_in: r.get(8)?,
        actual_out: r.get(9)?,
        actual_cost: r.get(10)?,
        failure_reason: r.get(11)?,
        history: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
    })
}

fn decode(r: Raw) -> Result<Swap, PortError> {
    let b: SwapBody = from_json("swap", &r.body)?;
    let opt_amount = |s: &Option<String>| s.as_deref().map(amount).transpose();
    Ok(Swap {
        id: parse_uuid(&r.id)?,
        tenant: TenantId::from_stored(r.tenant)?,
        quote_id: parse_uuid(&r.quote_id)?,
        external_user_id: r.user,
        asset_in: b.asset_in,
        asset_out: b.asset_out,
        amount_in: b.amount_in,
        route: b.route,
        path: b.path,
        expected_amount_out: b.expected_amount_out,
        min_amount_out: b.min_amount_out,
        costs: b.costs,
        rate: b.rate,
        status: SwapStatus::parse(&r.status).ok_or_else(|| bad("status", &r.status))?,
        hold_id: b.hold_id,
        outgoing_id: b.outgoing_id,
        tx_hash: r.tx_hash,
        block_number: r
            .block_number
            .map(|n| u64::try_from(n).map_err(|_| bad("block number", &n.to_string())))
            .transpose()?,
        actual_amount_in: opt_amount(&r.actual_in)?,
        actual_amount_out: opt_amount(&r.actual_out)?,
        actual_network_cost_units: opt_amount(&r.actual_cost)?,
        failure_reason: r.failure_reason,
        history: from_json::<Vec<WithdrawalStep>>("history", &r.history)?,
        created_at: ts(r.created_at),
        updated_at: ts(r.updated_at),
    })
}

fn block(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

impl SqlTx<'_> {
    fn swaps_where(
        &self,
        clause: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Swap>, PortError> {
        let raws = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM swaps WHERE {clause}"))
            .map_err(db_err)?
            .query_map(args, raw)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter().map(decode).collect()
    }
}

impl SwapRepo for SqlTx<'_> {
    fn insert_swap_quote(&mut self, q: &SwapQuote) -> Result<(), PortError> {
        let body = QuoteBody {
            asset_in: q.asset_in.clone(),
            asset_out: q.asset_out.clone(),
            amount_in: q.amount_in,
            route: q.route.clone(),
            path: q.path.clone(),
            expected_amount_out: q.expected_amount_out,
            min_amount_out: q.min_amount_out,
            slippage_bps: q.slippage_bps,
            costs: q.costs,
            network_native: q.network_native,
            rate: q.rate,
        };
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO swap_quotes ({QUOTE_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7)"
            ))
            .map_err(db_err)?
            .execute(params![
                q.id.to_string(),
                q.tenant.as_str(),
                q.external_user_id,
                json(&body),
                q.created_at.unix_millis(),
                q.expires_at.unix_millis(),
                q.used_at.map(Timestamp::unix_millis),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn use_swap_quote(&mut self, id: Uuid, at: Timestamp) -> Result<bool, PortError> {
        let n = self
            .conn
            .prepare_cached("UPDATE swap_quotes SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL")
            .map_err(db_err)?
            .execute(params![id.to_string(), at.unix_millis()])
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn insert_swap(&mut self, s: &Swap) -> Result<(), PortError> {
        let body = SwapBody {
            asset_in: s.asset_in.clone(),
            asset_out: s.asset_out.clone(),
            amount_in: s.amount_in,
            route: s.route.clone(),
            path: s.path.clone(),
            expected_amount_out: s.expected_amount_out,
            min_amount_out: s.min_amount_out,
            costs: s.costs,
            rate: s.rate,
            hold_id: s.hold_id,
            outgoing_id: s.outgoing_id,
        };
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO swaps ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)"
            ))
            .map_err(db_err)?
            .execute(params![
                s.id.to_string(),
                s.tenant.as_str(),
                s.quote_id.to_string(),
                s.external_user_id,
                json(&body),
                s.status.as_str(),
                s.tx_hash,
                block(s.block_number),
                s.actual_amount_in.map(|a| a.to_string()),
                s.actual_amount_out.map(|a| a.to_string()),
                s.actual_network_cost_units.map(|a| a.to_string()),
                s.failure_reason,
                json(&s.history),
                s.created_at.unix_millis(),
                s.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_swap(&mut self, s: &Swap) -> Result<(), PortError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE swaps SET status = ?2, tx_hash = ?3, block_number = ?4, \
                 actual_amount_in = ?5, actual_amount_out = ?6, actual_network_cost_units = ?7, \
                 failure_reason = ?8, history = ?9, updated_at = ?10 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                s.id.to_string(),
                s.status.as_str(),
                s.tx_hash,
                block(s.block_number),
                s.actual_amount_in.map(|a| a.to_string()),
                s.actual_amount_out.map(|a| a.to_string()),
                s.actual_network_cost_units.map(|a| a.to_string()),
                s.failure_reason,
                json(&s.history),
                s.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        if n == 1 {
            Ok(())
        } else {
            Err(PortError::permanent(
                "store",
                format!("swap {} does not exist", s.id),
            ))
        }
    }

    fn put_allowance(&mut self, a: &Allowance) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO router_allowances \
                 (network, owner, token, spender, remaining, approval_outgoing_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (network, owner, token, spender) DO UPDATE SET \
                 remaining = excluded.remaining, approval_outgoing_id = excluded.approval_outgoing_id",
            )
            .map_err(db_err)?
            .execute(params![
                a.network.as_str(),
                a.owner.to_ascii_lowercase(),
                a.token.to_ascii_lowercase(),
                a.spender.to_ascii_lowercase(),
                a.remaining.to_string(),
                a.approval_outgoing_id.to_string(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn drop_allowance(
        &mut self,
        network: Network,
        owner: &str,
        token: &str,
        spender: &str,
    ) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "DELETE FROM router_allowances \
                 WHERE network = ?1 AND owner = ?2 AND token = ?3 AND spender = ?4",
            )
            .map_err(db_err)?
            .execute(params![
                network.as_str(),
                owner.to_ascii_lowercase(),
                token.to_ascii_lowercase(),
                spender.to_ascii_lowercase(),
            ])
            .map_err(db_err)?;
        Ok(())
    }
}

impl SwapReads for SqlTx<'_> {
    fn swap_quote(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<SwapQuote>, PortError> {
        let raw = self
            .conn
            .prepare_cached(&format!(
                "SELECT {QUOTE_COLUMNS} FROM swap_quotes WHERE id = ?1 AND tenant = ?2"
            ))
            .map_err(db_err)?
            .query_row(params![id.to_string(), tenant.as_str()], raw_quote)
            .optional()
            .map_err(db_err)?;
        raw.map(decode_quote).transpose()
    }

    fn swap(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Swap>, PortError> {
        Ok(self
            .swaps_where(
                "id = ?1 AND tenant = ?2",
                params![id.to_string(), tenant.as_str()],
            )?
            .pop())
    }

    fn swap_by_id(&mut self, id: Uuid) -> Result<Option<Swap>, PortError> {
        Ok(self.swaps_where("id = ?1", params![id.to_string()])?.pop())
    }

    fn list_swaps(&mut self, page: Page) -> Result<Paged<Swap>, PortError> {
        let Some(args) = super::page_args(self.conn, "swaps", page)? else {
            return Ok(None);
        };
        self.swaps_where(super::PAGE_CLAUSE, args).map(Some)
    }

    fn pending_swap_count(&mut self) -> Result<u64, PortError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM swaps WHERE status IN ('reserved', 'broadcasted')",
            )
            .map_err(db_err)?
            .query_row([], |r| r.get(0))
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn allowance(
        &mut self,
        network: Network,
        owner: &str,
        token: &str,
        spender: &str,
    ) -> Result<Option<Allowance>, PortError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT remaining, approval_outgoing_id FROM router_allowances \
                 WHERE network = ?1 AND owner = ?2 AND token = ?3 AND spender = ?4",
            )
            .map_err(db_err)?
            .query_row(
                params![
                    network.as_str(),
                    owner.to_ascii_lowercase(),
                    token.to_ascii_lowercase(),
                    spender.to_ascii_lowercase(),
                ],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()
            .map_err(db_err)?;
        row.map(|(remaining, approval)| {
            Ok(Allowance {
                network,
                owner: owner.to_owned(),
                token: token.to_owned(),
                spender: spender.to_owned(),
                remaining: amount(&remaining)?,
                approval_outgoing_id: parse_uuid(&approval)?,
            })
        })
        .transpose()
    }

    fn allowances_of(
        &mut self,
        network: Network,
        owner: &str,
    ) -> Result<Vec<Allowance>, PortError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT token, spender, remaining, approval_outgoing_id FROM router_allowances \
                 WHERE network = ?1 AND owner = ?2 ORDER BY token, spender",
            )
            .map_err(db_err)?
            .query_map(params![network.as_str(), owner.to_ascii_lowercase()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(|(token, spender, remaining, approval)| {
                Ok(Allowance {
                    network,
                    owner: owner.to_ascii_lowercase(),
                    token,
                    spender,
                    remaining: amount(&remaining)?,
                    approval_outgoing_id: parse_uuid(&approval)?,
                })
            })
            .collect()
    }
}
