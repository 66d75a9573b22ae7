//! Wallet migration records (migration 0015).

use crate::sql::{params, OptionalExtension, Row};
use custody_core::error::PortError;
use custody_core::ports::signer::HdPath;
use custody_core::wallet::migration::{
    MigrationReads, MigrationRepo, MigrationStatus, MigrationStep, WalletMigration,
};
use custody_core::Network;
use uuid::Uuid;

use super::{bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const COLUMNS: &str = "id, tenant, wallet_id, network, external_user_id, old_address, \
     old_account, old_index, new_address, new_account, new_index, reason, status, history, \
     created_at, updated_at";

struct Raw {
    id: String,
    tenant: String,
    wallet_id: String,
    network: String,
    user: String,
    old_address: String,
    old_account: i64,
    old_index: i64,
    new_address: String,
    new_account: i64,
    new_index: i64,
    reason: String,
    status: String,
    history: String,
    created_at: i64,
    updated_at: i64,
}

fn raw(r: &Row<'_>) -> crate::sql::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        tenant: r.get(1)?,
        wallet_id: r.get(2)?,
        network: r.get(3)?,
        user: r.get(4)?,
        old_address: r.get(5)?,
        old_account: r.get(6)?,
        old_index: r.get(7)?,
        new_address: r.get(8)?,
        new_account: r.get(9)?,
        new_index: r.get(10)?,
        reason: r.get(11)?,
        status: r.get(12)?,
        history: r.get(13)?,
        created_at: r.get(14)?,
        updated_at: r.get(15)?,
    })
}

fn path(network: Network, account: i64, index: i64) -> Result<HdPath, PortError> {
    Ok(HdPath {
        network,
        account: u32::try_from(account).map_err(|_| bad("account", &account.to_string()))?,
        index: u32::try_from(index).map_err(|_| bad("index", &index.to_string()))?,
    })
}

fn decode(r: Raw) -> Result<WalletMigration, PortError> {
    let network: Network = r.network.parse().map_err(|_| bad("network", &r.network))?;
    Ok(WalletMigration {
        id: parse_uuid(&r.id)?,
        tenant: custody_core::TenantId::from_stored(r.tenant)?,
        wallet_id: parse_uuid(&r.wallet_id)?,
        network,
        external_user_id: r.user,
        old_address: r.old_address,
        old_path: path(network, r.old_account, r.old_index)?,
        new_address: r.new_address,
        new_path: path(network, r.new_account, r.new_index)?,
        reason: r.reason,
        status: MigrationStatus::parse(&r.status).ok_or_else(|| bad("status", &r.status))?,
        history: serde_json::from_str::<Vec<MigrationStep>>(&r.history)
            .map_err(|_| bad("history", &r.history))?,
        created_at: ts(r.created_at),
        updated_at: ts(r.updated_at),
    })
}

fn history(m: &WalletMigration) -> String {
    serde_json::to_string(&m.history).expect("a migration history serializes")
}

impl SqlTx<'_> {
    fn migrations_where(
        &self,
        sql: &str,
        args: impl crate::sql::Params,
    ) -> Result<Vec<WalletMigration>, PortError> {
        self.conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM wallet_migrations {sql}"))
            .map_err(db_err)?
            .query_map(args, raw)
            .map_err(db_err)?
            .map(|r| decode(r.map_err(db_err)?))
            .collect()
    }
}

impl MigrationRepo for SqlTx<'_> {
    fn insert_migration(&mut self, m: &WalletMigration) -> Result<(), PortError> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO wallet_migrations ({COLUMNS}) \
                 VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)"
            ))
            .map_err(db_err)?
            .execute(params![
                m.id.to_string(),
                m.tenant.as_str(),
                m.wallet_id.to_string(),
                m.network.as_str(),
                m.external_user_id,
                m.old_address,
                i64::from(m.old_path.account),
                i64::from(m.old_path.index),
                m.new_address,
                i64::from(m.new_path.account),
                i64::from(m.new_path.index),
                m.reason,
                m.status.as_str(),
                history(m),
                m.created_at.unix_millis(),
                m.updated_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_migration(&mut self, m: &WalletMigration) -> Result<(), PortError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE wallet_migrations SET status = ?2, history = ?3, updated_at = ?4 \
                 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                m.id.to_string(),
                m.status.as_str(),
                history(m),
                m.updated_at.unix_millis()
            ])
            .map_err(db_err)?;
        if n == 0 {
            return Err(PortError::permanent(
                "store",
                format!("wallet migration {} does not exist", m.id),
            ));
        }
        Ok(())
    }
}

impl MigrationReads for SqlTx<'_> {
    fn migration_by_id(&mut self, id: Uuid) -> Result<Option<WalletMigration>, PortError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM wallet_migrations WHERE id = ?1"
            ))
            .map_err(db_err)?
            .query_row([id.to_string()], raw)
            .optional()
            .map_err(db_err)?
            .map(decode)
            .transpose()
    }

    fn open_migrations(&mut self, network: Network) -> Result<Vec<WalletMigration>, PortError> {
        self.migrations_where(
            "WHERE network = ?1 AND status IN ('planned', 'sweeping') \
             ORDER BY created_at, seq",
            [network.as_str()],
        )
    }

    fn list_migrations(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<WalletMigration>, PortError> {
        let Some(args) = super::page_args(self.conn, "wallet_migrations", page)? else {
            return Ok(None);
        };
        self.migrations_where(&format!("WHERE {}", super::PAGE_CLAUSE), args)
            .map(Some)
    }
}
