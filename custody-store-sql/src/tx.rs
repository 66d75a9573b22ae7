//! The transaction handle jobs see. It wraps a connection that is already inside a
//! transaction (a write job's, or a read job's snapshot) and implements every repository trait
//! of the core; the repositories live in `repo/`, one file each.

use custody_core::error::PortError;
use custody_core::ports::store::Savepoints;

use crate::sql::{Db, Error};
use crate::wallet_cache::SnapshotWallets;

pub struct SqlTx<'c> {
    pub(crate) conn: Db<'c>,
    depth: u32,
    /// The credentials version of a reader's snapshot, read when the snapshot was opened;
    /// `None` in a write transaction, which reads it when asked.
    pub(crate) snapshot_version: Option<u64>,
    /// The wallets a reader's snapshot may answer from memory; `None` where every wallet is
    /// read.
    pub(crate) wallets: Option<SnapshotWallets<'c>>,
    /// In a batch run without savepoints (the SQLite writer): a savepoint opens and releases
    /// without SQL, and rolling one back cannot be done, so it marks the attempt lost instead.
    optimistic: bool,
    lost_a_rollback: bool,
}

impl<'c> SqlTx<'c> {
    /// A transaction with a real savepoint per job.
    pub fn new(conn: Db<'c>) -> Self {
        SqlTx {
            conn,
            depth: 0,
            snapshot_version: None,
            wallets: None,
            optimistic: false,
            lost_a_rollback: false,
        }
    }

    /// A write transaction in a batch run without savepoints.
    pub fn optimistic(conn: Db<'c>) -> Self {
        SqlTx {
            optimistic: true,
            ..SqlTx::new(conn)
        }
    }

    /// A reader's snapshot, opened by reading the credentials version `version` and the
    /// wallets version of `wallets`.
    pub fn in_snapshot(conn: Db<'c>, version: u64, wallets: SnapshotWallets<'c>) -> Self {
        SqlTx {
            snapshot_version: Some(version),
            wallets: Some(wallets),
            ..SqlTx::new(conn)
        }
    }

    /// Whether the job asked to roll a savepoint back in a batch run without them: its writes
    /// then cannot be trusted, whatever it answered.
    pub fn lost_a_rollback(&self) -> bool {
        self.lost_a_rollback
    }

    /// Savepoints the job opened and did not close; the store rolls the job back if any.
    pub fn open_savepoints(&self) -> u32 {
        self.depth
    }
}

/// Maps a statement error to a port error. What the backend marked transient (a lost conflict,
/// a busy file, a lost connection) may pass on a retry; the rest will not get better by retrying.
pub fn db_err(e: Error) -> PortError {
    match e {
        Error::Db {
            message,
            transient: true,
        } => PortError::transient("store", message),
        Error::Db { message, .. } => PortError::permanent("store", message),
        other => PortError::permanent("store", other.to_string()),
    }
}

impl Savepoints for SqlTx<'_> {
    fn savepoint(&mut self) -> Result<(), PortError> {
        self.depth += 1;
        if self.optimistic {
            return Ok(());
        }
        self.conn
            .run(&format!("SAVEPOINT n{}", self.depth))
            .map_err(db_err)
    }

    fn release_savepoint(&mut self) -> Result<(), PortError> {
        if self.depth == 0 {
            return Err(PortError::permanent("store", "release without a savepoint"));
        }
        if self.optimistic {
            self.depth -= 1;
            return Ok(());
        }
        self.conn
            .run(&format!("RELEASE SAVEPOINT n{}", self.depth))
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
        if self.optimistic {
            self.lost_a_rollback = true;
            return Err(PortError::transient(
                "store",
                "a savepoint cannot be rolled back in a batch run without savepoints; the batch runs again",
            ));
        }
        let d = self.depth;
        self.conn
            .run(&format!("ROLLBACK TO SAVEPOINT n{d}"))
            .map_err(db_err)?;
        self.conn
            .run(&format!("RELEASE SAVEPOINT n{d}"))
            .map_err(db_err)?;
        self.depth -= 1;
        Ok(())
    }
}

impl From<Error> for PortError {
    fn from(e: Error) -> Self {
        db_err(e)
    }
}
