//! The transaction handle jobs see. It wraps a connection that is already inside a
//! transaction (the writer's batch, or a reader's snapshot) and implements every repository
//! trait of the core; the repositories live in `repo/`, one file each.

use std::sync::Arc;

use custody_core::error::PortError;
use custody_core::ports::store::Savepoints;
use custody_core::ports::Entropy;
use custody_core::vault::{SealingKey, NONCE_BYTES};
use rusqlite::Connection;

/// What repositories need besides the connection.
pub struct TxContext {
    pub sealing: SealingKey,
    pub entropy: Arc<dyn Entropy>,
}

pub struct SqliteTx<'c> {
    pub(crate) conn: &'c Connection,
    pub(crate) ctx: &'c TxContext,
    depth: u32,
}

impl<'c> SqliteTx<'c> {
    pub(crate) fn new(conn: &'c Connection, ctx: &'c TxContext) -> Self {
        SqliteTx {
            conn,
            ctx,
            depth: 0,
        }
    }

    /// Savepoints the job opened and did not close; the writer rolls the job back if any.
    pub(crate) fn open_savepoints(&self) -> u32 {
        self.depth
    }

    pub(crate) fn seal(&self, plaintext: &[u8], aad: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_BYTES];
        self.ctx.entropy.fill(&mut nonce);
        self.ctx.sealing.seal(plaintext, aad.as_bytes(), &nonce)
    }

    pub(crate) fn open_sealed(
        &self,
        sealed: &[u8],
        aad: &str,
    ) -> Result<custody_core::secret::Secret<Vec<u8>>, PortError> {
        self.ctx.sealing.open(sealed, aad.as_bytes()).map_err(|e| {
            PortError::permanent(
                "store",
                format!("cannot unseal {aad}: {e} (wrong passphrase?)"),
            )
        })
    }
}

/// Maps a SQLite error to a port error. Busy/locked and I/O conditions may pass; the rest will
/// not get better by retrying.
pub(crate) fn db_err(e: rusqlite::Error) -> PortError {
    use rusqlite::ErrorCode as C;
    let transient = matches!(
        e.sqlite_error_code(),
        Some(C::DatabaseBusy | C::DatabaseLocked | C::SystemIoFailure | C::DiskFull)
    );
    let msg = format!("sqlite: {e}");
    if transient {
        PortError::transient("store", msg)
    } else {
        PortError::permanent("store", msg)
    }
}

impl Savepoints for SqliteTx<'_> {
    fn savepoint(&mut self) -> Result<(), PortError> {
        self.depth += 1;
        self.conn
            .execute_batch(&format!("SAVEPOINT n{}", self.depth))
            .map_err(db_err)
    }

    fn release_savepoint(&mut self) -> Result<(), PortError> {
        if self.depth == 0 {
            return Err(PortError::permanent("store", "release without a savepoint"));
        }
        self.conn
            .execute_batch(&format!("RELEASE n{}", self.depth))
            .map_err(db_err)?;
        self.depth -= 1;
        Ok(())
    }

    fn rollback_to_savepoint(&mut self) -> Result<(), PortError> {
        if self.depth == 0 {
            return Err(PortError::permanent(
                "store",
                "rollback without a savepoint",
            ));
        }
        let d = self.depth;
        self.conn
            .execute_batch(&format!("ROLLBACK TO n{d}; RELEASE n{d}"))
            .map_err(db_err)?;
        self.depth -= 1;
        Ok(())
    }
}
