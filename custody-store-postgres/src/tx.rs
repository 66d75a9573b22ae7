//! The transaction handle jobs see. It wraps a connection that is already inside a
//! transaction (a write job's SERIALIZABLE one, or a read job's snapshot) and implements every
//! repository trait of the core; the repositories live in `repo/`, one file each, mirroring the
//! SQLite store's.

use custody_core::error::PortError;
use custody_core::ports::store::Savepoints;

use crate::sql::{Conn, Error};

pub struct PgTx<'c> {
    pub(crate) conn: &'c Conn,
    depth: u32,
}

impl<'c> PgTx<'c> {
    pub(crate) fn new(conn: &'c Conn) -> Self {
        PgTx { conn, depth: 0 }
    }

    /// Savepoints the job opened and did not close; the store rolls the job back if any.
    pub(crate) fn open_savepoints(&self) -> u32 {
        self.depth
    }
}

/// Maps a statement error to a port error. Lost conflicts and connection failures may pass on
/// a retry; the rest will not get better by retrying.
pub(crate) fn db_err(e: Error) -> PortError {
    let transient = e.is_conflict() || e.is_connection();
    let msg = format!("postgres: {e}");
    if transient {
        PortError::transient("store", msg)
    } else {
        PortError::permanent("store", msg)
    }
}

impl Savepoints for PgTx<'_> {
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
            .execute_batch(&format!("RELEASE SAVEPOINT n{}", self.depth))
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
            .execute_batch(&format!(
                "ROLLBACK TO SAVEPOINT n{d}; RELEASE SAVEPOINT n{d}"
            ))
            .map_err(db_err)?;
        self.depth -= 1;
        Ok(())
    }
}
