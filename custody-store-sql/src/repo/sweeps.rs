//! Sweeps and treasury fundings (migration 0012). Each record is stored whole as JSON beside
//! the columns that the constraints and queries need.

use crate::sql::{params, OptionalExtension};
use custody_core::error::PortError;
use custody_core::page::{Page, Paged};
use custody_core::ports::signer::HdPath;
use custody_core::sweep::{
    flows, AddressFlow, Funding, FundingKind, FundingStatus, Sweep, SweepReads, SweepRepo,
    SweepStatus, SweepStep,
};
use custody_core::{Amount, Network};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{bad, ts};
use crate::tx::{db_err, SqlTx};

#[derive(Serialize, Deserialize)]
struct SweepBody {
    id: Uuid,
    network: String,
    asset: String,
    address: String,
    account: u32,
    index: u32,
    to: String,
    amount: Amount,
    status: String,
    funding_id: Option<Uuid>,
    /// Added with energy delegations; absent from older bodies.
    #[serde(default)]
    delegation_id: Option<Uuid>,
    outgoing_id: Option<Uuid>,
    planned_fee_native: Amount,
    fee_native: Option<Amount>,
    tx_hash: Option<String>,
    block_number: Option<u64>,
    failure_reason: Option<String>,
    history: Vec<SweepStep>,
    created_at: i64,
    updated_at: i64,
}

#[derive(Serialize, Deserialize)]
struct FundingBody {
    id: Uuid,
    network: String,
    /// The fields to `reclaims` came with energy delegations; older bodies are native fundings.
    #[serde(default = "native_kind")]
    kind: FundingKind,
    #[serde(default)]
    energy: Option<u64>,
    #[serde(default)]
    waits_for: Option<Uuid>,
    #[serde(default)]
    reclaim_id: Option<Uuid>,
    #[serde(default)]
    reclaims: Option<Uuid>,
    asset: String,
    address: String,
    from: String,
    amount: Amount,
    /// `None` for a hot wallet drain, which pays no sweep.
    #[serde(default)]
    sweep_id: Option<Uuid>,
    outgoing_id: Uuid,
    status: String,
    fee_native: Option<Amount>,
    tx_hash: Option<String>,
    block_number: Option<u64>,
    failure_reason: Option<String>,
    history: Vec<SweepStep>,
    created_at: i64,
    updated_at: i64,
}

fn native_kind() -> FundingKind {
    FundingKind::Native
}

fn network(s: &str) -> Result<Network, PortError> {
    s.parse().map_err(|_| bad("network", s))
}

fn sweep_body(s: &Sweep) -> String {
    serde_json::to_string(&SweepBody {
        id: s.id,
        network: s.network.as_str().to_owned(),
        asset: s.asset.clone(),
        address: s.address.clone(),
        account: s.path.account,
        index: s.path.index,
        to: s.to.clone(),
        amount: s.amount,
        status: s.status.as_str().to_owned(),
        funding_id: s.funding_id,
        delegation_id: s.delegation_id,
        outgoing_id: s.outgoing_id,
        planned_fee_native: s.planned_fee_native,
        fee_native: s.fee_native,
        tx_hash: s.tx_hash.clone(),
        block_number: s.block_number,
        failure_reason: s.failure_reason.clone(),
        history: s.history.clone(),
        created_at: s.created_at.unix_millis(),
        updated_at: s.updated_at.unix_millis(),
    })
    .expect("a sweep serializes")
}

fn decode_sweep(text: &str) -> Result<Sweep, PortError> {
    let b: SweepBody = serde_json::from_str(text).map_err(|_| bad("sweep", text))?;
    let net = network(&b.network)?;
    Ok(Sweep {
        id: b.id,
        network: net,
        asset: b.asset,
        address: b.address,
        path: HdPath {
            network: net,
            account: b.account,
            index: b.index,
        },
        to: b.to,
        amount: b.amount,
        status: SweepStatus::parse(&b.status).ok_or_else(|| bad("sweep status", &b.status))?,
        funding_id: b.funding_id,
        delegation_id: b.delegation_id,
        outgoing_id: b.outgoing_id,
        planned_fee_native: b.planned_fee_native,
        fee_native: b.fee_native,
        tx_hash: b.tx_hash,
        block_number: b.block_number,
        failure_reason: b.failure_reason,
        history: b.history,
        created_at: ts(b.created_at),
        updated_at: ts(b.updated_at),
    })
}

fn funding_body(f: &Funding) -> String {
    serde_json::to_string(&FundingBody {
        id: f.id,
        network: f.network.as_str().to_owned(),
        kind: f.kind,
        energy: f.energy,
        waits_for: f.waits_for,
        reclaim_id: f.reclaim_id,
        reclaims: f.reclaims,
        asset: f.asset.clone(),
        address: f.address.clone(),
        from: f.from.clone(),
        amount: f.amount,
        sweep_id: f.sweep_id,
        outgoing_id: f.outgoing_id,
        status: f.status.as_str().to_owned(),
        fee_native: f.fee_native,
        tx_hash: f.tx_hash.clone(),
        block_number: f.block_number,
        failure_reason: f.failure_reason.clone(),
        history: f.history.clone(),
        created_at: f.created_at.unix_millis(),
        updated_at: f.updated_at.unix_millis(),
    })
    .expect("a funding serializes")
}

fn decode_funding(text: &str) -> Result<Funding, PortError> {
    let b: FundingBody = serde_json::from_str(text).map_err(|_| bad("treasury funding", text))?;
    Ok(Funding {
        id: b.id,
        network: network(&b.network)?,
        kind: b.kind,
        energy: b.energy,
        waits_for: b.waits_for,
        reclaim_id: b.reclaim_id,
        reclaims: b.reclaims,
        asset: b.asset,
        address: b.address,
        from: b.from,
        amount: b.amount,
        sweep_id: b.sweep_id,
        outgoing_id: b.outgoing_id,
        status: FundingStatus::parse(&b.status)
            .ok_or_else(|| bad("treasury funding status", &b.status))?,
        fee_native: b.fee_native,
        tx_hash: b.tx_hash,
        block_number: b.block_number,
        failure_reason: b.failure_reason,
        history: b.history,
        created_at: ts(b.created_at),
        updated_at: ts(b.updated_at),
    })
}

impl SqlTx<'_> {
    fn bodies(&self, sql: &str, args: impl crate::sql::Params) -> Result<Vec<String>, PortError> {
        self.conn
            .prepare_cached(sql)
            .map_err(db_err)?
            .query_map(args, |r| r.get::<_, String>(0))
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }

    fn sweeps_where(
        &self,
        clause: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Sweep>, PortError> {
        self.bodies(&format!("SELECT body FROM sweeps WHERE {clause}"), args)?
            .iter()
            .map(|b| decode_sweep(b))
            .collect()
    }

    fn fundings_where(
        &self,
        clause: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Funding>, PortError> {
        self.bodies(
            &format!("SELECT body FROM treasury_fundings WHERE {clause}"),
            args,
        )?
        .iter()
        .map(|b| decode_funding(b))
        .collect()
    }
}

impl SweepRepo for SqlTx<'_> {
    fn insert_sweep(&mut self, s: &Sweep) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO sweeps (id, network, address, status, has_transfer, body, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(db_err)?
            .execute(params![
                s.id.to_string(),
                s.network.as_str(),
                s.address,
                s.status.as_str(),
                i64::from(s.outgoing_id.is_some()),
                sweep_body(s),
                s.created_at.unix_millis(),
                s.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_sweep(&mut self, s: &Sweep) -> Result<(), PortError> {
        let Some(stored) = self.sweep_by_id(s.id)? else {
            return Err(PortError::permanent(
                "store",
                format!("sweep {} does not exist", s.id),
            ));
        };
        // What is swept, from where, is fixed at insert; only the amount of a funded sweep's
        // transfer (the balance when it was created) and the state move.
        let merged = Sweep {
            amount: s.amount,
            status: s.status,
            funding_id: s.funding_id,
            outgoing_id: s.outgoing_id,
            fee_native: s.fee_native,
            tx_hash: s.tx_hash.clone(),
            block_number: s.block_number,
            failure_reason: s.failure_reason.clone(),
            history: s.history.clone(),
            updated_at: s.updated_at,
            ..stored
        };
        self.conn
            .prepare_cached(
                "UPDATE sweeps SET status = ?2, has_transfer = ?3, body = ?4, updated_at = ?5 \
                 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                s.id.to_string(),
                merged.status.as_str(),
                i64::from(merged.outgoing_id.is_some()),
                sweep_body(&merged),
                merged.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn insert_funding(&mut self, f: &Funding) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO treasury_fundings (id, network, sweep_id, status, body, created_at, \
                 updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(db_err)?
            .execute(params![
                f.id.to_string(),
                f.network.as_str(),
                f.sweep_id.map(|id| id.to_string()),
                f.status.as_str(),
                funding_body(f),
                f.created_at.unix_millis(),
                f.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_funding(&mut self, f: &Funding) -> Result<(), PortError> {
        let Some(stored) = self.funding_by_id(f.id)? else {
            return Err(PortError::permanent(
                "store",
                format!("treasury funding {} does not exist", f.id),
            ));
        };
        let merged = Funding {
            status: f.status,
            waits_for: f.waits_for,
            reclaim_id: f.reclaim_id,
            fee_native: f.fee_native,
            tx_hash: f.tx_hash.clone(),
            block_number: f.block_number,
            failure_reason: f.failure_reason.clone(),
            history: f.history.clone(),
            updated_at: f.updated_at,
            ..stored
        };
        self.conn
            .prepare_cached(
                "UPDATE treasury_fundings SET status = ?2, body = ?3, updated_at = ?4 \
                 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                f.id.to_string(),
                merged.status.as_str(),
                funding_body(&merged),
                merged.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }
}

impl SweepReads for SqlTx<'_> {
    fn sweep_by_id(&mut self, id: Uuid) -> Result<Option<Sweep>, PortError> {
        let body: Option<String> = self
            .conn
            .prepare_cached("SELECT body FROM sweeps WHERE id = ?1")
            .map_err(db_err)?
            .query_row(params![id.to_string()], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        body.as_deref().map(decode_sweep).transpose()
    }

    fn funding_by_id(&mut self, id: Uuid) -> Result<Option<Funding>, PortError> {
        let body: Option<String> = self
            .conn
            .prepare_cached("SELECT body FROM treasury_fundings WHERE id = ?1")
            .map_err(db_err)?
            .query_row(params![id.to_string()], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        body.as_deref().map(decode_funding).transpose()
    }

    fn open_sweep_at(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<Sweep>, PortError> {
        Ok(self
            .sweeps_where(
                "network = ?1 AND address = ?2 \
                 AND status IN ('planned', 'funding', 'broadcasted')",
                params![network.as_str(), address],
            )?
            .pop())
    }

    fn latest_sweep_at(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<Sweep>, PortError> {
        Ok(self
            .sweeps_where(
                "network = ?1 AND address = ?2 ORDER BY created_at DESC, id DESC LIMIT 1",
                params![network.as_str(), address],
            )?
            .pop())
    }

    fn sweeps_awaiting_transfer(&mut self, network: Network) -> Result<Vec<Sweep>, PortError> {
        self.sweeps_where(
            "network = ?1 AND status = 'funding' AND has_transfer = 0 \
             ORDER BY created_at, id",
            params![network.as_str()],
        )
    }

    fn list_sweeps(&mut self, page: Page) -> Result<Paged<Sweep>, PortError> {
        let Some(args) = super::page_args(self.conn, "sweeps", page)? else {
            return Ok(None);
        };
        self.sweeps_where(super::PAGE_CLAUSE, args).map(Some)
    }

    fn open_sweep_count(&mut self) -> Result<u64, PortError> {
        // The statuses of SweepStatus::is_open, as in the partial index sweeps_one_open.
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM sweeps WHERE status IN ('planned', 'funding', 'broadcasted')",
            )
            .map_err(db_err)?
            .query_row([], |r| r.get(0))
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn open_fundings(&mut self, network: Network) -> Result<Vec<Funding>, PortError> {
        self.fundings_where(
            "network = ?1 AND status IN ('planned', 'broadcasted') ORDER BY created_at, id",
            params![network.as_str()],
        )
    }

    fn list_fundings(&mut self, page: Page) -> Result<Paged<Funding>, PortError> {
        let Some(args) = super::page_args(self.conn, "treasury_fundings", page)? else {
            return Ok(None);
        };
        self.fundings_where(super::PAGE_CLAUSE, args).map(Some)
    }

    fn sweep_flows(
        &mut self,
        network: Network,
        native: &str,
    ) -> Result<Vec<AddressFlow>, PortError> {
        let sweeps = self.sweeps_where(
            "network = ?1 AND status IN ('confirmed', 'failed')",
            params![network.as_str()],
        )?;
        let fundings = self.fundings_where(
            "network = ?1 AND status = 'confirmed'",
            params![network.as_str()],
        )?;
        Ok(flows(&sweeps, &fundings, native))
    }
}
