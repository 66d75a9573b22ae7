//! Hot wallet records.

use crate::sql::params;
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::time::Timestamp;
use custody_core::wallet::hot::{HotWalletReads, HotWalletRecord, HotWalletRepo, HotWalletStatus};

use super::{bad, ts};
use crate::tx::{db_err, SqlTx};

type Row = (
    String,
    String,
    i64,
    i64,
    String,
    String,
    String,
    i64,
    Option<i64>,
);

fn record(row: Row) -> Result<HotWalletRecord, PortError> {
    let (network, address, account, index, status, rotated_by, reason, created, retired) = row;
    Ok(HotWalletRecord {
        network: network.parse().map_err(|_| bad("network", &network))?,
        address,
        account: u32::try_from(account).map_err(|_| bad("account", &account.to_string()))?,
        index: u32::try_from(index).map_err(|_| bad("index", &index.to_string()))?,
        status: HotWalletStatus::parse(&status).ok_or_else(|| bad("hot wallet status", &status))?,
        rotated_by,
        reason,
        created_at: ts(created),
        retired_at: retired.map(ts),
    })
}

impl HotWalletReads for SqlTx<'_> {
    fn hot_wallet_records(&mut self, network: Network) -> Result<Vec<HotWalletRecord>, PortError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT network, address, account, idx, status, rotated_by, reason, created_at, \
                 retired_at FROM hot_wallets WHERE network = ?1 ORDER BY created_at, address",
            )
            .map_err(db_err)?
            .query_map([network.as_str()], |r| {
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
            })
            .map_err(db_err)?
            .collect::<Result<Vec<Row>, _>>()
            .map_err(db_err)?;
        rows.into_iter().map(record).collect()
    }
}

impl HotWalletRepo for SqlTx<'_> {
    fn allocate_hot_wallet_account(
        &mut self,
        label: &str,
        at: Timestamp,
    ) -> Result<u32, PortError> {
        // The tenants' allocator (`allocate_tenant_account`): one above the highest ever.
        let account: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO tenant_accounts (tenant, account, created_at) \
                 VALUES (?1, (SELECT COALESCE(MAX(account) + 1, 0) FROM tenant_accounts), ?2) \
                 RETURNING account",
            )
            .map_err(db_err)?
            .query_row(params![label, at.unix_millis()], |r| r.get(0))
            .map_err(db_err)?;
        u32::try_from(account).map_err(|_| bad("account", &account.to_string()))
    }

    fn insert_hot_wallet(&mut self, r: &HotWalletRecord) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO hot_wallets (network, address, account, idx, status, rotated_by, \
                 reason, created_at, retired_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .map_err(db_err)?
            .execute(params![
                r.network.as_str(),
                r.address,
                i64::from(r.account),
                i64::from(r.index),
                r.status.as_str(),
                r.rotated_by,
                r.reason,
                r.created_at.unix_millis(),
                r.retired_at.map(|t| t.unix_millis()),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn retire_hot_wallet(
        &mut self,
        network: Network,
        address: &str,
        at: Timestamp,
    ) -> Result<(), PortError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE hot_wallets SET status = 'retired', retired_at = ?3 \
                 WHERE network = ?1 AND address = ?2 AND status = 'active'",
            )
            .map_err(db_err)?
            .execute(params![network.as_str(), address, at.unix_millis()])
            .map_err(db_err)?;
        if n != 1 {
            return Err(PortError::permanent(
                "store",
                format!("{address} is not the active {network} hot wallet"),
            ));
        }
        Ok(())
    }
}
