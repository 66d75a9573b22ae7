//! Seed generations.

use crate::sql::params;
use custody_core::error::PortError;
use custody_core::wallet::seeds::{SeedReads, SeedRecord, SeedRepo};

use super::{bad, ts};
use crate::tx::{db_err, SqlTx};

impl SeedReads for SqlTx<'_> {
    fn seeds(&mut self) -> Result<Vec<SeedRecord>, PortError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT generation, first_account, sealed_mnemonic, fingerprint, created_at \
                 FROM seed_generations ORDER BY generation",
            )
            .map_err(db_err)?
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(|(g, first, sealed, fingerprint, at)| {
                Ok(SeedRecord {
                    generation: u32::try_from(g).map_err(|_| bad("generation", &g.to_string()))?,
                    first_account: u32::try_from(first)
                        .map_err(|_| bad("first_account", &first.to_string()))?,
                    sealed_mnemonic: sealed,
                    fingerprint,
                    created_at: ts(at),
                })
            })
            .collect()
    }

    fn next_account(&mut self) -> Result<u32, PortError> {
        // The allocator of `allocate_tenant_account` / `replace_tenant_account`.
        let next: i64 = self
            .conn
            .prepare_cached("SELECT COALESCE(MAX(account) + 1, 0) FROM tenant_accounts")
            .map_err(db_err)?
            .query_row([], |r| r.get(0))
            .map_err(db_err)?;
        u32::try_from(next).map_err(|_| bad("account", &next.to_string()))
    }
}

impl SeedRepo for SqlTx<'_> {
    fn insert_seed(&mut self, seed: &SeedRecord) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO seed_generations (generation, first_account, sealed_mnemonic, \
                 fingerprint, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(db_err)?
            .execute(params![
                i64::from(seed.generation),
                i64::from(seed.first_account),
                seed.sealed_mnemonic,
                seed.fingerprint,
                seed.created_at.unix_millis(),
            ])
            .map_err(db_err)?;
        Ok(())
    }
}
