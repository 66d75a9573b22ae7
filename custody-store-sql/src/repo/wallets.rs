use crate::sql::{params, OptionalExtension, Row};
use custody_core::error::PortError;
use custody_core::ports::signer::HdPath;
use custody_core::time::Timestamp;
use custody_core::wallet::{PreviousAddress, Wallet, WalletReads, WalletRepo};
use custody_core::Network;
use uuid::Uuid;

use super::{bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

const COLUMNS: &str =
    "id, tenant, external_user_id, network, address, account, address_index, created_at";
/// The statement of `SqlTx::one_wallet` for one `WHERE` clause (a literal naming the
/// wallet's columns as `w.<column>`): built at compile time, so a wallet read formats nothing.
macro_rules! one_wallet_sql {
    ($where:literal) => {
        concat!(
            "SELECT w.id, w.tenant, w.external_user_id, w.network, w.address, w.account, \
             w.address_index, w.created_at, a.address, a.account, a.address_index, a.retired_at \
             FROM wallets w LEFT JOIN wallet_addresses a \
             ON a.wallet_id = w.id AND a.retired_at IS NOT NULL WHERE ",
            $where,
            " ORDER BY a.seq"
        )
    };
}

type RawWallet = (String, String, String, String, String, i64, i64, i64);

fn raw(r: &Row<'_>) -> crate::sql::Result<RawWallet> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

fn decode(
    (id, tenant, user, network, address, account, index, created): RawWallet,
) -> Result<Wallet, PortError> {
    Ok(Wallet {
        id: parse_uuid(&id)?,
        tenant: custody_core::TenantId::from_stored(tenant)?,
        external_user_id: user,
        network: network.parse().map_err(|_| bad("network", &network))?,
        address,
        account: u32::try_from(account).map_err(|_| bad("account", &account.to_string()))?,
        index: u32::try_from(index).map_err(|_| bad("index", &index.to_string()))?,
        created_at: ts(created),
        previous_addresses: Vec::new(),
    })
}

fn u32_of(what: &str, v: i64) -> Result<u32, PortError> {
    u32::try_from(v).map_err(|_| bad(what, &v.to_string()))
}

impl SqlTx<'_> {
    /// One wallet and its previous addresses in one statement, `sql`, built by
    /// `one_wallet_sql!` from a `WHERE` clause. A wallet read is most of a signed GET, and each
    /// statement has a fixed cost (cache look-up, bind, step, reset) of the same order as the
    /// read itself.
    fn one_wallet(
        &self,
        sql: &'static str,
        args: impl crate::sql::Params,
    ) -> Result<Option<Wallet>, PortError> {
        let mut wallet: Option<Wallet> = None;
        self.conn
            .prepare_cached(sql)
            .map_err(db_err)?
            .for_each(args, |r| {
                let w = match wallet.as_mut() {
                    Some(w) => w,
                    None => wallet.insert(decode(raw(r).map_err(db_err)?)?),
                };
                let previous: Option<String> = r.get(8).map_err(db_err)?;
                if let Some(address) = previous {
                    w.previous_addresses.push(PreviousAddress {
                        address,
                        account: u32_of("account", r.get(9).map_err(db_err)?)?,
                        index: u32_of("index", r.get(10).map_err(db_err)?)?,
                        retired_at: ts(r.get(11).map_err(db_err)?),
                    });
                }
                Ok::<_, PortError>(())
            })?;
        Ok(wallet)
    }

    /// Fills in the wallet's previous addresses (every address of it but the current one).
    fn with_previous(&self, mut w: Wallet) -> Result<Wallet, PortError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT address, account, address_index, retired_at FROM wallet_addresses \
                 WHERE wallet_id = ?1 AND retired_at IS NOT NULL ORDER BY seq",
            )
            .map_err(db_err)?
            .query_map([w.id.to_string()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        for (address, account, index, retired) in rows {
            w.previous_addresses.push(PreviousAddress {
                address,
                account: u32_of("account", account)?,
                index: u32_of("index", index)?,
                retired_at: ts(retired),
            });
        }
        Ok(w)
    }

    fn add_address(
        &self,
        wallet_id: Uuid,
        network: Network,
        address: &str,
        account: u32,
        index: u32,
    ) -> Result<(), PortError> {
        self.conn
            .prepare_cached(self.conn.dialect().pick(
                // `seq` is the rowid: one writer, so it grows in commit order.
                "INSERT INTO wallet_addresses (wallet_id, network, address, account, address_index) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                // The watch-set position is taken as MAX + 1 inside the SERIALIZABLE
                // transaction: positions then grow in commit order.
                "INSERT INTO wallet_addresses (seq, wallet_id, network, address, account, address_index) \
                 VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM wallet_addresses), ?1, ?2, ?3, ?4, ?5)",
            ))
            .map_err(db_err)?
            .execute(params![
                wallet_id.to_string(),
                network.as_str(),
                address,
                i64::from(account),
                i64::from(index),
            ])
            .map_err(db_err)?;
        Ok(())
    }
}

impl WalletRepo for SqlTx<'_> {
    fn allocate_tenant_account(
        &mut self,
        tenant: &custody_core::TenantId,
        at: Timestamp,
    ) -> Result<u32, PortError> {
        // The next index after the highest ever allocated: rows are never deleted, so an
        // index is never reused.
        let account: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO tenant_accounts (tenant, account, created_at) \
                 VALUES (?1, (SELECT COALESCE(MAX(account) + 1, 0) FROM tenant_accounts), ?2) \
                 RETURNING account",
            )
            .map_err(db_err)?
            .query_row(params![tenant.as_str(), at.unix_millis()], |r| r.get(0))
            .map_err(db_err)?;
        u32::try_from(account).map_err(|_| bad("account", &account.to_string()))
    }

    fn take_address_index(
        &mut self,
        tenant: &custody_core::TenantId,
        network: Network,
    ) -> Result<u32, PortError> {
        let next: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO address_counters (tenant, network, next_index) VALUES (?1, ?2, 1) \
                 ON CONFLICT (tenant, network) DO UPDATE SET next_index = address_counters.next_index + 1 \
                 RETURNING next_index",
            )
            .map_err(db_err)?
            .query_row(params![tenant.as_str(), network.as_str()], |r| r.get(0))
            .map_err(db_err)?;
        u32::try_from(next - 1).map_err(|_| bad("address index", &next.to_string()))
    }

    fn insert_wallet(&mut self, w: &Wallet) -> Result<(), PortError> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO wallets ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"
            ))
            .map_err(db_err)?
            .execute(params![
                w.id.to_string(),
                w.tenant.as_str(),
                w.external_user_id,
                w.network.as_str(),
                w.address,
                i64::from(w.account),
                i64::from(w.index),
                w.created_at.unix_millis(),
            ])
            .map_err(db_err)?;
        self.add_address(w.id, w.network, &w.address, w.account, w.index)
    }

    fn replace_tenant_account(
        &mut self,
        tenant: &custody_core::TenantId,
        _at: Timestamp,
    ) -> Result<u32, PortError> {
        // The same allocator as `allocate_tenant_account`: accounts only grow, so the old one
        // (now gone from this table) is below every index handed out later, never reused.
        let account: i64 = self
            .conn
            .prepare_cached(
                "UPDATE tenant_accounts \
                 SET account = (SELECT MAX(account) + 1 FROM tenant_accounts) \
                 WHERE tenant = ?1 RETURNING account",
            )
            .map_err(db_err)?
            .query_row([tenant.as_str()], |r| r.get(0))
            .optional()
            .map_err(db_err)?
            .ok_or_else(|| {
                PortError::permanent("store", format!("tenant {tenant} has no account"))
            })?;
        // Address indexes restart under the new account: no path under it is taken.
        self.conn
            .prepare_cached("DELETE FROM address_counters WHERE tenant = ?1")
            .map_err(db_err)?
            .execute([tenant.as_str()])
            .map_err(db_err)?;
        u32_of("account", account)
    }

    fn move_wallet(
        &mut self,
        wallet_id: Uuid,
        address: &str,
        account: u32,
        index: u32,
        at: Timestamp,
    ) -> Result<(), PortError> {
        let network: Option<String> = self
            .conn
            .prepare_cached("SELECT network FROM wallets WHERE id = ?1")
            .map_err(db_err)?
            .query_row([wallet_id.to_string()], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        let Some(network) = network else {
            return Err(PortError::permanent(
                "store",
                format!("wallet {wallet_id} does not exist"),
            ));
        };
        let network: Network = network.parse().map_err(|_| bad("network", &network))?;
        self.conn
            .prepare_cached(
                "UPDATE wallet_addresses SET retired_at = ?2 \
                 WHERE wallet_id = ?1 AND retired_at IS NULL",
            )
            .map_err(db_err)?
            .execute(params![wallet_id.to_string(), at.unix_millis()])
            .map_err(db_err)?;
        // The address log's constraints refuse an address or a path that was ever any
        // wallet's, before the wallet row changes.
        self.add_address(wallet_id, network, address, account, index)?;
        self.conn
            .prepare_cached(
                "UPDATE wallets SET address = ?2, account = ?3, address_index = ?4 WHERE id = ?1",
            )
            .map_err(db_err)?
            .execute(params![
                wallet_id.to_string(),
                address,
                i64::from(account),
                i64::from(index)
            ])
            .map_err(db_err)?;
        Ok(())
    }
}

impl WalletReads for SqlTx<'_> {
    fn wallet_by_user(
        &mut self,
        tenant: &custody_core::TenantId,
        external_user_id: &str,
        network: Network,
    ) -> Result<Option<Wallet>, PortError> {
        self.one_wallet(
            one_wallet_sql!("w.tenant = ?1 AND w.external_user_id = ?2 AND w.network = ?3"),
            params![tenant.as_str(), external_user_id, network.as_str()],
        )
    }

    fn wallet_id_by_user(
        &mut self,
        tenant: &custody_core::TenantId,
        external_user_id: &str,
        network: Network,
    ) -> Result<Option<Uuid>, PortError> {
        // One seek of the (tenant, user, network) index and its row, where the whole wallet
        // also joins its address log and decodes eight columns.
        let id: Option<String> = self
            .conn
            .query_row(
                "SELECT id FROM wallets WHERE tenant = ?1 AND external_user_id = ?2 AND network = ?3",
                params![tenant.as_str(), external_user_id, network.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        id.as_deref().map(parse_uuid).transpose()
    }

    fn wallet_by_id(
        &mut self,
        tenant: &custody_core::TenantId,
        id: Uuid,
    ) -> Result<Option<Wallet>, PortError> {
        // Ids are unique across tenants: a kept wallet of another tenant answers none, as the
        // statement does (which another tenant's read never passes, nor fills the cache from).
        if let Some(kept) = self.wallets {
            if let Some(w) = kept.cache.get(id, kept.version) {
                return Ok((w.tenant == *tenant).then_some(w));
            }
        }
        let read = self.one_wallet(
            one_wallet_sql!("w.id = ?1 AND w.tenant = ?2"),
            params![id.to_string(), tenant.as_str()],
        )?;
        if let (Some(kept), Some(w)) = (self.wallets, &read) {
            kept.cache.put(kept.version, w);
        }
        Ok(read)
    }

    fn tenant_account(
        &mut self,
        tenant: &custody_core::TenantId,
    ) -> Result<Option<u32>, PortError> {
        let account: Option<i64> = self
            .conn
            .prepare_cached("SELECT account FROM tenant_accounts WHERE tenant = ?1")
            .map_err(db_err)?
            .query_row([tenant.as_str()], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        account
            .map(|a| u32::try_from(a).map_err(|_| bad("account", &a.to_string())))
            .transpose()
    }

    fn list_wallets(
        &mut self,
        tenant: Option<&custody_core::TenantId>,
        network: Option<Network>,
    ) -> Result<Vec<Wallet>, PortError> {
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM wallets WHERE (CAST(?1 AS TEXT) IS NULL OR tenant = ?1) \
                 AND (CAST(?2 AS TEXT) IS NULL OR network = ?2) ORDER BY rowid"
            ))
            .map_err(db_err)?
            .query_map(
                params![tenant.map(|t| t.as_str()), network.map(|n| n.as_str())],
                raw,
            )
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(|r| self.with_previous(decode(r)?))
            .collect()
    }

    fn address_path(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<HdPath>, PortError> {
        let row: Option<(i64, i64)> = self
            .conn
            .prepare_cached(
                "SELECT account, address_index FROM wallet_addresses \
                 WHERE network = ?1 AND address = ?2",
            )
            .map_err(db_err)?
            .query_row(params![network.as_str(), address], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(db_err)?;
        row.map(|(account, index)| {
            Ok(HdPath {
                network,
                account: u32_of("account", account)?,
                index: u32_of("index", index)?,
            })
        })
        .transpose()
    }

    fn wallet_by_address(
        &mut self,
        network: Network,
        address: &custody_core::chain::ChainAddress,
    ) -> Result<Option<Wallet>, PortError> {
        self.one_wallet(
            one_wallet_sql!("w.id = (SELECT wallet_id FROM wallet_addresses WHERE network = ?1 AND address = ?2)"),
            params![network.as_str(), address.as_str()],
        )
    }

    fn wallet_addresses(&mut self, network: Network) -> Result<Vec<String>, PortError> {
        self.conn
            .prepare_cached("SELECT address FROM wallet_addresses WHERE network = ?1")
            .map_err(db_err)?
            .query_map([network.as_str()], |r| r.get(0))
            .map_err(db_err)?
            .collect::<Result<Vec<String>, _>>()
            .map_err(db_err)
    }

    fn wallet_addresses_after(
        &mut self,
        network: Network,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, PortError> {
        // `seq` grows in commit order (one SQLite writer; MAX + 1 under PostgreSQL's SERIALIZABLE),
        // and rows are never deleted.
        self.conn
            .prepare_cached(
                "SELECT seq, address FROM wallet_addresses WHERE network = ?1 AND seq > ?2 \
                 ORDER BY seq LIMIT ?3",
            )
            .map_err(db_err)?
            .query_map(
                params![
                    network.as_str(),
                    i64::try_from(after).unwrap_or(i64::MAX),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
            )
            .map_err(db_err)?
            .map(|row| {
                let (seq, address) = row.map_err(db_err)?;
                Ok((u64::try_from(seq).unwrap_or(0), address))
            })
            .collect()
    }
}
