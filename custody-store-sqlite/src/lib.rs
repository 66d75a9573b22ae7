//! `custody-store-sqlite`: the embedded default store.
//!
//! One SQLite file in WAL mode. Writes go through a single writer thread that batches
//! concurrent commands into one transaction (see the `writer` module); reads run on a small pool of
//! read-only connections, each in its own snapshot. `synchronous=FULL`: a commit is on disk
//! before anyone is told it happened. Amounts are TEXT, never INTEGER (i64 overflows at about
//! 9.2 tokens of 18 decimals).

mod backend;
mod migrations;
mod writer;

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::{ReadJob, Store, WriteJob};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot, Semaphore};

use backend::{db_err, SqliteDb};
use custody_store_sql::wallet_cache::{SnapshotWallets, WalletCache};
use custody_store_sql::{Db, SqlTx};
pub use migrations::latest_version as schema_version;

/// Tuning of the store. Limits carry their unit last.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most commands committed in one transaction. 1 turns group commit off (benchmarks).
    pub batch_max: usize,
    /// Commands waiting for the writer before callers wait to enqueue.
    pub queue_max: usize,
    pub readers: usize,
    pub busy_timeout_ms: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            batch_max: 256,
            queue_max: 4096,
            readers: 4,
            busy_timeout_ms: 5_000,
        }
    }
}

impl StoreOptions {
    /// The tuning `[store]` of `custody.toml` sets (`batch_max`, `readers`; the section is
    /// shared with the PostgreSQL store), with the default queue and busy timeout.
    pub fn from_config(store: &custody_store_sql::StoreConfig) -> Self {
        StoreOptions {
            batch_max: store.batch_max,
            readers: store.readers,
            ..StoreOptions::default()
        }
    }
}

/// Page cache of the writer connection (negative: KiB, as SQLite's `cache_size` takes it).
///
/// Not larger: when a b-tree page splits into pages whose numbers are out of order, SQLite
/// parks a page under the number of the 1 GiB pending-byte page while it sorts them, and that
/// number stays the cache's highest key; while the file is smaller than 1 GiB, the commit that
/// follows walks every page in the cache to drop pages past the end of the file. Random inserts
/// (nonces, idempotency keys) do that in almost every batch, so the walk cost each commit a share
/// in proportion to the pages cached: with 64 MiB, 5% of a transfer's CPU.
const WRITER_CACHE_KIB: i64 = -8_192;
/// WAL pages between automatic checkpoints (SQLite's default is 1,000: about 4 MiB).
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;
/// Reads through a memory map instead of `pread` copies, on every connection.
const MMAP_BYTES: i64 = 256 * 1024 * 1024;

/// Connections that run quick reads on the caller's thread.
const QUICK_READERS: usize = 2;

/// The statement that opens a reader's snapshot ([`read_in`]): the credentials version and the
/// wallets version (migrations 0019 and 0023), one row.
const SNAPSHOT_VERSIONS_SQL: &str = "SELECT c.n, w.n FROM credentials_version c, \
     wallets_version w WHERE c.id = 1 AND w.id = 1";

/// Runs a read job in a snapshot of `conn`.
///
/// The snapshot is opened by the statement that reads the credentials version and the wallets
/// version (`wallet_cache`), stepped to its one row and held until the job ends. Outside
/// `BEGIN`, SQLite keeps a connection's read transaction open while any of its statements is
/// active, and every other statement of the connection reads that same snapshot; the snapshot
/// ends when the held statement is reset. So the version a fenced route checks
/// (`SqlTx::credentials_version`) comes from the snapshot its reads use, and so does the
/// wallets version by which kept wallets are used. A read runs two statements fewer than with
/// `BEGIN` and `ROLLBACK`, a fenced read three (the version's `SELECT`). The held statement is
/// never stepped to its end: that would end the snapshot.
fn read_in(
    conn: &Connection,
    wallets: &WalletCache,
    job: &mut ReadJob,
) -> CoreResult<Box<dyn Any + Send>> {
    let mut pin = conn.prepare_cached(SNAPSHOT_VERSIONS_SQL).map_err(db_err)?;
    let mut rows = pin.query([]).map_err(db_err)?;
    let (version, wallets_version): (i64, i64) = match rows.next().map_err(db_err)? {
        Some(row) => (row.get(0).map_err(db_err)?, row.get(1).map_err(db_err)?),
        None => {
            return Err(CoreError::Invariant(
                "the credentials or wallets version row is missing".into(),
            ))
        }
    };
    let kept = SnapshotWallets {
        cache: wallets,
        version: wallets_version.unsigned_abs(),
    };
    let db = SqliteDb::in_snapshot(conn);
    let mut tx = SqlTx::in_snapshot(Db::new(&db), version.unsigned_abs(), kept);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut tx)))
        .unwrap_or_else(|_| Err(CoreError::Invariant("a store read panicked".into())));
    // Resetting the pinned statement ends the snapshot (drop order made explicit).
    drop(rows);
    drop(pin);
    r
}

pub struct SqliteStore {
    path: PathBuf,
    sender: Mutex<Option<mpsc::Sender<writer::Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    reader_slots: Arc<Semaphore>,
    /// Reads `credentials_version` inline on the caller's thread: one row through a cached
    /// statement costs a few microseconds, less than handing a job to a blocking thread.
    version_reader: Mutex<Connection>,
    /// Connections for [`Store::read_quick`], run on the caller's thread; one per runtime
    /// worker is enough (a busy one sends the read to the pool instead).
    quick_readers: Vec<Mutex<Connection>>,
    /// Wallets the readers read by id, kept by wallets version (`wallet_cache`).
    wallets: Arc<WalletCache>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Creates the database file readable by its owner only (SQLite gives the WAL and shared-memory
/// files the same mode): it holds the ledger and every customer's records.
fn create_private(path: &Path) -> Result<(), PortError> {
    if path.exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(PortError::permanent(
            "store",
            format!("cannot create {}: {e}", path.display()),
        )),
    }
}

fn configure(conn: &Connection, busy_timeout_ms: u64) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_millis(busy_timeout_ms))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.set_prepared_statement_cache_capacity(backend::STATEMENT_CACHE);
    // The writer keeps the pages it touches (index right edges, account rows) in its own cache
    // rather than reading them back from the file at every batch (SQLite's default is 2 MiB).
    conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
    // Checkpoints copy every page changed since the last one into the database file: rarer
    // checkpoints copy a page changed by many batches once instead of many times.
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    // A statement or savepoint journal that outgrows the spill size is copied to a temporary
    // file in chunks of that size, one write call per chunk, and SQLite's Unix VFS masks each
    // write's length to 17 bits: a SQLite built with a spill size past that (a service embedding
    // this crate with its own flags) would fail such a statement with SQLITE_FULL. There, keep
    // the journals in memory; SQLite's default (64 KiB, this workspace's build) spills safely.
    if sub_journal_spill_bytes(conn)? > UNIX_WRITE_MAX {
        conn.pragma_update(None, "temp_store", "MEMORY")?;
    }
    Ok(())
}

/// The writer's connection once migrated. Each job of a batch run safely (`writer`) is under a
/// savepoint, whose sub-journal keeps the original of every page the job changes; past the
/// spill size (64 KiB) it went to a temporary file, which nearly every job of such a batch did.
/// In memory (kept in 1 KiB chunks) it costs no file, but it holds every page a job changes:
/// writer jobs stay bounded (the pruner deletes in batches). Set after the migrations, which
/// keep their sorts and journals in temporary files: a migration that builds an index of a
/// large table would otherwise hold the whole sort in memory.
fn configure_writer(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "temp_store", "MEMORY")
}

/// The longest write SQLite's Unix VFS makes in one call (`seekAndWriteFd` masks the length).
const UNIX_WRITE_MAX: u64 = 0x1ffff;

/// SQLITE_STMTJRNL_SPILL as the linked SQLite was built with it; SQLite's default (64 KiB)
/// when it was not set.
fn sub_journal_spill_bytes(conn: &Connection) -> rusqlite::Result<u64> {
    let mut options = conn.prepare("PRAGMA compile_options")?;
    let mut rows = options.query([])?;
    while let Some(row) = rows.next()? {
        let option: String = row.get(0)?;
        if let Some(n) = option.strip_prefix("STMTJRNL_SPILL=") {
            // Unreadable (an expression such as `(1024*1024)`): assume the worst.
            return Ok(n.trim().parse().unwrap_or(u64::MAX));
        }
    }
    Ok(64 * 1024)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, applies pending migrations and starts
    /// the writer thread. Must be called inside a Tokio runtime only for `read`/`write` later.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Self, PortError> {
        create_private(path)?;
        let mut conn = Connection::open(path).map_err(db_err)?;
        configure(&conn, options.busy_timeout_ms).map_err(db_err)?;
        migrations::migrate(&mut conn).map_err(|e| PortError::permanent("store", e))?;
        configure_writer(&conn).map_err(db_err)?;

        let open_reader = || -> Result<Connection, PortError> {
            let r = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(db_err)?;
            r.busy_timeout(std::time::Duration::from_millis(options.busy_timeout_ms))
                .map_err(db_err)?;
            r.pragma_update(None, "query_only", "ON").map_err(db_err)?;
            r.pragma_update(None, "mmap_size", MMAP_BYTES)
                .map_err(db_err)?;
            r.set_prepared_statement_cache_capacity(backend::STATEMENT_CACHE);
            Ok(r)
        };
        let mut readers = Vec::with_capacity(options.readers.max(1));
        for _ in 0..options.readers.max(1) {
            readers.push(open_reader()?);
        }
        let version_reader = Mutex::new(open_reader()?);
        let quick_readers = (0..QUICK_READERS)
            .map(|_| open_reader().map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;

        let (tx, rx) = mpsc::channel(options.queue_max.max(1));
        let batch_max = options.batch_max.max(1);
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer::run(conn, rx, batch_max))
            .map_err(|e| PortError::permanent("store", format!("cannot start writer: {e}")))?;

        Ok(SqliteStore {
            path: path.to_owned(),
            sender: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(handle)),
            reader_slots: Arc::new(Semaphore::new(readers.len())),
            readers: Arc::new(Mutex::new(readers)),
            version_reader,
            quick_readers,
            wallets: Arc::new(WalletCache::default()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops taking writes, lets the writer finish what is queued and waits for it.
    pub fn close(&self) {
        drop(self.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(handle) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = handle.join();
        }
    }

    fn closed() -> CoreError {
        CoreError::Port(PortError::transient("store", "the store is shut down"))
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(Self::closed)?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(writer::Job { work: job, reply })
            .await
            .map_err(|_| Self::closed())?;
        answer.await.map_err(|_| Self::closed())?
    }

    async fn read(&self, mut job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        let permit = Arc::clone(&self.reader_slots)
            .acquire_owned()
            .await
            .map_err(|_| Self::closed())?;
        let readers = Arc::clone(&self.readers);
        let wallets = Arc::clone(&self.wallets);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let conn = readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
                .expect("a permit guarantees a free reader");
            let result = read_in(&conn, &wallets, &mut job);
            readers.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
            result
        })
        .await
        .map_err(|e| CoreError::Port(PortError::transient("store", format!("reader: {e}"))))?
    }

    async fn read_quick(&self, mut job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        for slot in &self.quick_readers {
            if let Ok(conn) = slot.try_lock() {
                return read_in(&conn, &self.wallets, &mut job);
            }
        }
        self.read(job).await
    }

    async fn credentials_version(&self) -> CoreResult<Option<u64>> {
        let conn = self
            .version_reader
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let n: i64 = conn
            .prepare_cached(custody_store_sql::CREDENTIALS_VERSION_SQL)
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db_err)?;
        Ok(Some(n.unsigned_abs()))
    }
}

#[cfg(test)]
mod repo_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn a_data_dir_without_store_keys_gets_this_stores_tuning() {
        let options = StoreOptions::from_config(&custody_store_sql::StoreConfig::default());
        let defaults = StoreOptions::default();
        assert_eq!(
            (options.batch_max, options.readers),
            (defaults.batch_max, defaults.readers)
        );
    }
}
