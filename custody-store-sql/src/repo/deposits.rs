use crate::sql::{params, OptionalExtension, Row};
use custody_core::chain::{ChainCursor, ChainReads, ChainRepo};
use custody_core::deposit::{
    Deposit, DepositFilter, DepositReads, DepositRepo, DepositStatus, HistoryStep,
};
use custody_core::error::PortError;
use custody_core::{Amount, Network};
use uuid::Uuid;

use super::{amount, bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const COLUMNS: &str = "id, tenant, network, asset, external_user_id, wallet_id, address, tx_hash, log_key, \
     from_address, amount, block_number, block_hash, confirmations, required_confirmations, status, \
     history, credit_tx_id, created_at, updated_at, shortfall";

const NATIVE: i64 = -1;

fn log_key(log_index: Option<u32>) -> i64 {
    log_index.map_or(NATIVE, i64::from)
}

struct Raw {
    id: String,
    tenant: String,
    network: String,
    asset: String,
    user: String,
    wallet_id: String,
    address: String,
    tx_hash: String,
    log_key: i64,
    from: String,
    amount: String,
    block_number: Option<i64>,
    block_hash: Option<String>,
    confirmations: i64,
    required: i64,
    status: String,
    history: String,
    credit_tx_id: Option<String>,
    created_at: i64,
    updated_at: i64,
    shortfall: String,
}

fn raw(r: &Row<'_>) -> crate::sql::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        tenant: r.get(1)?,
        network: r.get(2)?,
        asset: r.get(3)?,
        user: r.get(4)?,
        wallet_id: r.get(5)?,
        address: r.get(6)?,
        tx_hash: r.get(7)?,
        log_key: r.get(8)?,
        from: r.get(9)?,
        amount: r.get(10)?,
        block_number: r.get(11)?,
        block_hash: r.get(12)?,
        confirmations: r.get(13)?,
        required: r.get(14)?,
        status: r.get(15)?,
        history: r.get(16)?,
        credit_tx_id: r.get(17)?,
        created_at: r.get(18)?,
        updated_at: r.get(19)?,
        shortfall: r.get(20)?,
    })
}

fn decode(r: Raw) -> Result<Deposit, PortError> {
    let u32_of = |v: i64, what: &str| u32::try_from(v).map_err(|_| bad(what, &v.to_string()));
    Ok(Deposit {
        id: parse_uuid(&r.id)?,
        tenant: custody_core::TenantId::from_stored(r.tenant)?,
        network: r.network.parse().map_err(|_| bad("network", &r.network))?,
        asset: r.asset,
        external_user_id: r.user,
        wallet_id: parse_uuid(&r.wallet_id)?,
        address: r.address,
        tx_hash: r.tx_hash,
        log_index: if r.log_key == NATIVE {
            None
        } else {
            Some(u32_of(r.log_key, "log index")?)
        },
        from_address: r.from,
        amount: amount(&r.amount)?,
        block_number: r
            .block_number
            .map(|n| u64::try_from(n).map_err(|_| bad("block number", &n.to_string())))
            .transpose()?,
        block_hash: r.block_hash,
        confirmations: u32_of(r.confirmations, "confirmations")?,
        required_confirmations: u32_of(r.required, "required confirmations")?,
        status: r
            .status
            .parse()
            .map_err(|()| bad("deposit status", &r.status))?,
        history: serde_json::from_str::<Vec<HistoryStep>>(&r.history)
            .map_err(|_| bad("history", &r.history))?,
        credit_tx_id: r.credit_tx_id.as_deref().map(parse_uuid).transpose()?,
        shortfall: amount(&r.shortfall)?,
        created_at: ts(r.created_at),
        updated_at: ts(r.updated_at),
    })
}

fn block_i64(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

impl SqlTx<'_> {
    fn deposits_where(
        &self,
        sql_where: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<Deposit>, PortError> {
        let raws = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM deposits WHERE {sql_where}"))
            .map_err(db_err)?
            .query_map(args, raw)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter().map(decode).collect()
    }
}

impl DepositRepo for SqlTx<'_> {
    fn insert_deposit(&mut self, d: &Deposit) -> Result<(), PortError> {
        let history = serde_json::to_string(&d.history).expect("history serializes");
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO deposits ({COLUMNS}) VALUES \
                 (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21)"
            ))
            .map_err(db_err)?
            .execute(params![
                d.id.to_string(),
                d.tenant.as_str(),
                d.network.as_str(),
                d.asset,
                d.external_user_id,
                d.wallet_id.to_string(),
                d.address,
                d.tx_hash,
                log_key(d.log_index),
                d.from_address,
                d.amount.to_string(),
                block_i64(d.block_number),
                d.block_hash,
                i64::from(d.confirmations),
                i64::from(d.required_confirmations),
                d.status.as_str(),
                history,
                d.credit_tx_id.map(|t| t.to_string()),
                d.created_at.unix_millis(),
                d.updated_at.unix_millis(),
                d.shortfall.to_string(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_deposit(&mut self, d: &Deposit) -> Result<(), PortError> {
        let history = serde_json::to_string(&d.history).expect("history serializes");
        let n = self
            .conn
            .prepare_cached(
                "UPDATE deposits SET block_number = ?2, block_hash = ?3, confirmations = ?4, status = ?5, \
                 history = ?6, credit_tx_id = ?7, updated_at = ?8, shortfall = ?9 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                d.id.to_string(),
                block_i64(d.block_number),
                d.block_hash,
                i64::from(d.confirmations),
                d.status.as_str(),
                history,
                d.credit_tx_id.map(|t| t.to_string()),
                d.updated_at.unix_millis(),
                d.shortfall.to_string(),
            ])
            .map_err(db_err)?;
        if n == 1 {
            Ok(())
        } else {
            Err(PortError::permanent(
                "store",
                format!("deposit {} does not exist", d.id),
            ))
        }
    }
}

impl ChainRepo for SqlTx<'_> {
    fn record_block(
        &mut self,
        network: Network,
        number: u64,
        hash: &str,
        parent_hash: &str,
    ) -> Result<(), PortError> {
        let n = i64::try_from(number).map_err(|_| bad("block number", &number.to_string()))?;
        self.conn
            .prepare_cached(
                "INSERT INTO chain_blocks (network, number, hash, parent_hash) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (network, number) DO UPDATE SET hash = ?3, parent_hash = ?4",
            )
            .map_err(db_err)?
            .execute(params![network.as_str(), n, hash, parent_hash])
            .map_err(db_err)?;
        self.conn
            .prepare_cached(
                "INSERT INTO chain_cursors (network, number, hash) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (network) DO UPDATE SET number = ?2, hash = ?3",
            )
            .map_err(db_err)?
            .execute(params![network.as_str(), n, hash])
            .map_err(db_err)?;
        Ok(())
    }

    fn rewind_blocks(&mut self, network: Network, number: u64) -> Result<(), PortError> {
        let n = i64::try_from(number).map_err(|_| bad("block number", &number.to_string()))?;
        self.conn
            .execute(
                "DELETE FROM chain_blocks WHERE network = ?1 AND number > ?2",
                params![network.as_str(), n],
            )
            .map_err(db_err)?;
        let hash = self.recorded_block_hash(network, number)?;
        match hash {
            Some(hash) => {
                self.conn
                    .execute(
                        "UPDATE chain_cursors SET number = ?2, hash = ?3 WHERE network = ?1",
                        params![network.as_str(), n, hash],
                    )
                    .map_err(db_err)?;
            }
            None => {
                self.conn
                    .execute(
                        "DELETE FROM chain_cursors WHERE network = ?1",
                        [network.as_str()],
                    )
                    .map_err(db_err)?;
            }
        }
        Ok(())
    }

    fn prune_blocks(&mut self, network: Network, below: u64) -> Result<(), PortError> {
        let n = i64::try_from(below).unwrap_or(i64::MAX);
        self.conn
            .execute(
                "DELETE FROM chain_blocks WHERE network = ?1 AND number < ?2",
                params![network.as_str(), n],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

/// The condition of the SQLite partial index `deposits_pending_by_user`, which a statement must
/// repeat to read through it; a test of the SQLite store checks it names the pending statuses.
macro_rules! pending_condition {
    () => {
        "status = 'detected' OR status = 'confirming' OR status = 'confirmed'"
    };
}

pub const PENDING_CONDITION: &str = pending_condition!();

/// Every pending deposit of a user on a network, asset and amount, from the covering partial
/// index: one seek for all assets. `INDEXED BY` makes a statement that could not use it an
/// error at its first run, not a slow scan.
pub const PENDING_UNITS_SQL: &str = concat!(
    "SELECT asset, amount FROM deposits INDEXED BY deposits_pending_by_user \
     WHERE tenant = ?1 AND external_user_id = ?2 AND network = ?3 AND (",
    pending_condition!(),
    ")"
);

/// [`PENDING_UNITS_SQL`] for PostgreSQL, whose planner picks its own index.
const PENDING_UNITS_SQL_PG: &str = concat!(
    "SELECT asset, amount FROM deposits \
     WHERE tenant = ?1 AND external_user_id = ?2 AND network = ?3 AND (",
    pending_condition!(),
    ")"
);

impl DepositReads for SqlTx<'_> {
    fn deposit_by_identity(
        &mut self,
        network: Network,
        tx_hash: &custody_core::chain::TxHash,
        log_index: Option<u32>,
    ) -> Result<Option<Deposit>, PortError> {
        Ok(self
            .deposits_where(
                "network = ?1 AND tx_hash = ?2 AND log_key = ?3",
                params![network.as_str(), tx_hash.to_hex(), log_key(log_index)],
            )?
            .pop())
    }

    fn deposit_by_id(
        &mut self,
        tenant: &custody_core::TenantId,
        id: Uuid,
    ) -> Result<Option<Deposit>, PortError> {
        Ok(self
            .deposits_where(
                "id = ?1 AND tenant = ?2",
                params![id.to_string(), tenant.as_str()],
            )?
            .pop())
    }

    fn list_deposits(
        &mut self,
        tenant: &custody_core::TenantId,
        f: &DepositFilter,
        limit: usize,
    ) -> Result<Vec<Deposit>, PortError> {
        self.deposits_where(
            "tenant = ?1 AND (CAST(?2 AS TEXT) IS NULL OR status = ?2) AND (CAST(?3 AS TEXT) IS NULL OR external_user_id = ?3) \
             ORDER BY created_at DESC, rowid DESC LIMIT ?4",
            params![
                tenant.as_str(),
                f.status.map(DepositStatus::as_str),
                f.external_user_id,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
        )
    }

    fn deposits_from(
        &mut self,
        network: Network,
        from_address: &str,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Deposit>, PortError> {
        self.deposits_where(
            "network = ?1 AND from_address = ?2 AND id > ?3 ORDER BY id LIMIT ?4",
            params![
                network.as_str(),
                from_address,
                after.map(|a| a.to_string()).unwrap_or_default(),
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
        )
    }

    fn open_deposits(
        &mut self,
        network: Network,
        min_block: u64,
    ) -> Result<Vec<Deposit>, PortError> {
        self.deposits_where(
            "network = ?1 AND (status IN ('detected', 'confirming', 'confirmed') \
             OR (status = 'credited' AND block_number >= ?2)) ORDER BY block_number, rowid",
            params![
                network.as_str(),
                i64::try_from(min_block).unwrap_or(i64::MAX)
            ],
        )
    }

    fn pending_deposit_count(&mut self, network: Network) -> Result<u64, PortError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM deposits WHERE network = ?1 \
                 AND status IN ('detected', 'confirming', 'confirmed')",
            )
            .map_err(db_err)?
            .query_row([network.as_str()], |r| r.get(0))
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn pending_deposit_units(
        &mut self,
        tenant: &custody_core::TenantId,
        external_user_id: &str,
        network: Network,
        asset: &str,
    ) -> Result<Amount, PortError> {
        let units =
            self.pending_deposit_units_of(tenant, external_user_id, network, &[asset.to_owned()])?;
        units
            .first()
            .copied()
            .ok_or_else(|| PortError::permanent("store", "pending deposits: no figure"))
    }

    fn pending_deposit_units_of(
        &mut self,
        tenant: &custody_core::TenantId,
        external_user_id: &str,
        network: Network,
        assets: &[String],
    ) -> Result<Vec<Amount>, PortError> {
        if assets.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, String)> = self
            .conn
            .prepare_cached(
                self.conn
                    .dialect()
                    .pick(PENDING_UNITS_SQL, PENDING_UNITS_SQL_PG),
            )
            .map_err(db_err)?
            .query_map(
                params![tenant.as_str(), external_user_id, network.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db_err)?
            .collect::<Result<_, _>>()
            .map_err(db_err)?;
        assets
            .iter()
            .map(|asset| {
                rows.iter()
                    .filter(|(a, _)| a == asset)
                    .try_fold(Amount::ZERO, |sum, (_, units)| {
                        sum.checked_add(amount(units)?).ok_or_else(|| {
                            PortError::permanent("store", "pending deposits overflow u128")
                        })
                    })
            })
            .collect()
    }

    fn credited_by_address(
        &mut self,
        network: Network,
    ) -> Result<Vec<(String, String, Amount)>, PortError> {
        let rows: Vec<(String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT address, asset, amount FROM deposits \
                 WHERE network = ?1 AND status = 'credited' ORDER BY address, asset",
            )
            .map_err(db_err)?
            .query_map([network.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(db_err)?
            .collect::<Result<_, _>>()
            .map_err(db_err)?;
        let mut sums: Vec<(String, String, Amount)> = Vec::new();
        for (address, asset, units) in rows {
            let units = amount(&units)?;
            match sums.last_mut() {
                Some((a, s, total)) if *a == address && *s == asset => {
                    *total = total
                        .checked_add(units)
                        .ok_or_else(|| PortError::permanent("store", "credited sum overflows"))?;
                }
                _ => sums.push((address, asset, units)),
            }
        }
        Ok(sums)
    }

    fn owed_after_reorg_units(
        &mut self,
        tenant: &custody_core::TenantId,
        external_user_id: &str,
        network: Network,
        asset: &str,
    ) -> Result<Amount, PortError> {
        let amounts: Vec<String> = self
            .conn
            .prepare_cached(
                "SELECT shortfall FROM deposits WHERE tenant = ?1 AND external_user_id = ?2 AND network = ?3 \
                 AND asset = ?4 AND shortfall <> '0'",
            )
            .map_err(db_err)?
            .query_map(params![tenant.as_str(), external_user_id, network.as_str(), asset], |r| r.get(0))
            .map_err(db_err)?
            .collect::<Result<_, _>>()
            .map_err(db_err)?;
        amounts.iter().try_fold(Amount::ZERO, |sum, a| {
            sum.checked_add(amount(a)?)
                .ok_or_else(|| PortError::permanent("store", "owed shortfalls overflow u128"))
        })
    }
}

impl ChainReads for SqlTx<'_> {
    fn chain_cursor(&mut self, network: Network) -> Result<Option<ChainCursor>, PortError> {
        let row: Option<(i64, String)> = self
            .conn
            .prepare_cached("SELECT number, hash FROM chain_cursors WHERE network = ?1")
            .map_err(db_err)?
            .query_row([network.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(db_err)?;
        row.map(|(n, hash)| {
            Ok(ChainCursor {
                number: u64::try_from(n).map_err(|_| bad("cursor", &n.to_string()))?,
                hash,
            })
        })
        .transpose()
    }

    fn recorded_block_hash(
        &mut self,
        network: Network,
        number: u64,
    ) -> Result<Option<String>, PortError> {
        let n = i64::try_from(number).map_err(|_| bad("block number", &number.to_string()))?;
        self.conn
            .prepare_cached("SELECT hash FROM chain_blocks WHERE network = ?1 AND number = ?2")
            .map_err(db_err)?
            .query_row(params![network.as_str(), n], |r| r.get(0))
            .optional()
            .map_err(db_err)
    }
}
