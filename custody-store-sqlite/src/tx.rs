//! The transaction handle jobs see. It wraps a connection that is already inside a
//! transaction (the writer's batch, or a reader's snapshot) and implements every repository
//! trait of the core; the repositories live in `repo/`, one file each.

use custody_core::error::PortError;
use custody_core::ports::store::Savepoints;
use rusqlite::{CachedStatement, Connection, Params, Row};

use crate::wallet_cache::SnapshotWallets;

/// How many prepared statements a connection keeps. Every repository's statements fit, so a
/// request never compiles SQL after the first use of its statements (rusqlite keeps 16).
pub(crate) const STATEMENT_CACHE: usize = 512;

/// The connection as the repositories see it: `execute`, `query_row` and `prepare` of rusqlite,
/// but through the connection's statement cache, so SQL is compiled once per connection rather
/// than on every call (compiling costs more than running most of these statements).
///
/// The second field is set in the writer's transaction: once SQLite has rolled that transaction
/// back on its own (an I/O error, a full disk, `RAISE(ROLLBACK)`), every further statement is
/// refused, so a job that ignored the failing statement's error cannot go on writing outside
/// any transaction, where each statement would commit by itself.
#[derive(Clone, Copy)]
pub(crate) struct Cached<'c>(pub(crate) &'c Connection, pub(crate) bool);

impl<'c> Cached<'c> {
    fn statement(&self, sql: &str) -> rusqlite::Result<CachedStatement<'c>> {
        if self.1 && self.0.is_autocommit() {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some(
                    "the store transaction was rolled back by SQLite; nothing more runs in it"
                        .into(),
                ),
            ));
        }
        self.0.prepare_cached(sql)
    }

    pub(crate) fn execute<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.statement(sql)?.execute(params)
    }

    pub(crate) fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.statement(sql)?.query_row(params, f)
    }

    pub(crate) fn prepare(&self, sql: &str) -> rusqlite::Result<CachedStatement<'c>> {
        self.statement(sql)
    }

    pub(crate) fn prepare_cached(&self, sql: &str) -> rusqlite::Result<CachedStatement<'c>> {
        self.statement(sql)
    }

    pub(crate) fn last_insert_rowid(&self) -> i64 {
        self.0.last_insert_rowid()
    }

    /// Runs one statement without results (savepoints), cached like the others.
    pub(crate) fn run(&self, sql: &str) -> rusqlite::Result<()> {
        self.statement(sql)?.execute([]).map(|_| ())
    }
}

pub struct SqliteTx<'c> {
    pub(crate) conn: Cached<'c>,
    depth: u32,
    /// The credentials version of a reader's snapshot, read when the snapshot was opened
    /// (`crate::read_in`); `None` in the writer's transaction, which reads it when asked.
    pub(crate) snapshot_version: Option<u64>,
    /// The wallets a reader's snapshot may answer from memory (`crate::wallet_cache`); `None`
    /// in the writer's transaction, which reads every wallet.
    pub(crate) wallets: Option<SnapshotWallets<'c>>,
    /// In a batch run without savepoints (`crate::writer`): a savepoint opens and releases
    /// without SQL, and rolling one back cannot be done, so it marks the attempt lost instead.
    optimistic: bool,
    lost_a_rollback: bool,
}

impl<'c> SqliteTx<'c> {
    /// The writer's transaction (`crate::writer`), with a savepoint per job.
    pub(crate) fn new(conn: &'c Connection) -> Self {
        SqliteTx {
            conn: Cached(conn, true),
            depth: 0,
            snapshot_version: None,
            wallets: None,
            optimistic: false,
            lost_a_rollback: false,
        }
    }

    /// The writer's transaction in a batch run without savepoints.
    pub(crate) fn optimistic(conn: &'c Connection) -> Self {
        SqliteTx {
            optimistic: true,
            ..SqliteTx::new(conn)
        }
    }

    /// Whether the job asked to roll a savepoint back in a batch run without them: its writes
    /// then cannot be trusted, whatever it answered.
    pub(crate) fn lost_a_rollback(&self) -> bool {
        self.lost_a_rollback
    }

    /// A reader's snapshot, opened by reading the credentials version `version` and the
    /// wallets version of `wallets`.
    pub(crate) fn in_snapshot(
        conn: &'c Connection,
        version: u64,
        wallets: SnapshotWallets<'c>,
    ) -> Self {
        SqliteTx {
            // A reader's snapshot is held by a statement, not by BEGIN: SQLite reports it in
            // autocommit mode, and it cannot write anyway (query_only).
            conn: Cached(conn, false),
            snapshot_version: Some(version),
            wallets: Some(wallets),
            ..SqliteTx::new(conn)
        }
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
            .run(&format!("RELEASE n{}", self.depth))
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
            .run(&format!("ROLLBACK TO n{d}"))
            .map_err(db_err)?;
        self.conn.run(&format!("RELEASE n{d}")).map_err(db_err)?;
        self.depth -= 1;
        Ok(())
    }
}
