//! The transaction handle jobs see. It wraps a connection that is already inside a
//! transaction (the writer's batch, or a reader's snapshot) and implements every repository
//! trait of the core; the repositories live in `repo/`, one file each.

use custody_core::error::PortError;
use custody_core::ports::store::Savepoints;
use rusqlite::Connection;

pub struct SqliteTx<'c> {
    pub(crate) conn: &'c Connection,
    depth: u32,
}

impl<'c> SqliteTx<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        SqliteTx { conn, depth: 0 }
    }

    /// Savepoints the job opened and did not close; the writer rolls the job back if any.
    pub(crate) fn open_savepoints(&self) -> u32 {
        self.depth
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
