//! `custody-store-postgres`: the shared store, for several `custody serve` instances on one
//! database (decisions §16).
//!
//! Concurrency: every write job runs in its own SERIALIZABLE transaction on one of a pool of
//! worker threads, each owning one connection (the `worker` module). PostgreSQL's serializable snapshot
//! isolation refuses a transaction whose outcome would differ from some serial order (40001) and
//! the store then runs the job again on a fresh snapshot, so every job behaves as if it ran alone
//! after every job answered before it: the port's contract, across threads and processes alike.
//! Jobs keep the code they have for the embedded store (read a balance, check it, write it back)
//! and need no row locks of their own. Reads run on a second pool in REPEATABLE READ READ ONLY
//! transactions: one consistent snapshot per job.
//!
//! Schema: numbered migrations (`migrations/`) applied at open under an advisory lock. Amounts
//! are decimal TEXT, as in SQLite, never floats.

pub mod commit_outcome;
mod config;
mod connection;
mod exclusive;
mod migrations;
mod rate;
mod sql;
mod worker;

#[cfg(feature = "test-utils")]
pub mod testing;

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::{ReadJob, Store, WriteJob};
use tokio::sync::{mpsc, oneshot};

pub use config::{database_url, without_password, DATABASE_PASSWORD_ENV, DATABASE_URL_ENV};
pub use exclusive::PgExclusive;
pub use migrations::latest_version as schema_version;
pub use rate::PgRateLimiter;
use worker::{Settings, Task};

/// Tuning of the store. Limits carry their unit last.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Connections (and threads) running write jobs.
    pub writers: usize,
    /// Connections (and threads) running read jobs.
    pub readers: usize,
    /// Jobs waiting for a worker before callers wait to enqueue.
    pub queue_max: usize,
    /// Times a write job that lost a serialization conflict is run again before the caller gets
    /// a transient error.
    pub conflict_retries_max: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            writers: 8,
            readers: 4,
            queue_max: 4096,
            conflict_retries_max: 100,
        }
    }
}

/// Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

struct Pool {
    sender: Mutex<Option<mpsc::Sender<Task>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Pool {
    fn start(
        name: &str,
        clients: Vec<postgres::Client>,
        settings: &Settings,
        queue_max: usize,
    ) -> Result<Pool, PortError> {
        let (tx, rx) = mpsc::channel(queue_max.max(1));
        let queue = Arc::new(Mutex::new(rx));
        let mut threads = Vec::with_capacity(clients.len());
        for (i, client) in clients.into_iter().enumerate() {
            let queue = Arc::clone(&queue);
            let settings = settings.clone();
            let handle = std::thread::Builder::new()
                .name(format!("store-{name}-{i}"))
                .spawn(move || worker::run(Some(sql::Conn::new(client)), queue, settings))
                .map_err(|e| {
                    PortError::permanent("store", format!("cannot start a worker: {e}"))
                })?;
            threads.push(handle);
        }
        Ok(Pool {
            sender: Mutex::new(Some(tx)),
            threads: Mutex::new(threads),
        })
    }

    pub(crate) async fn submit(
        &self,
        make: impl FnOnce(worker::Reply) -> Task,
    ) -> CoreResult<Box<dyn Any + Send>> {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(closed)?;
        let (reply, answer) = oneshot::channel();
        sender.send(make(reply)).await.map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    fn close(&self) {
        drop(self.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

fn closed() -> CoreError {
    CoreError::Port(PortError::transient("store", "the store is shut down"))
}

pub struct PgStore {
    /// Where it connects, without the password.
    target: String,
    config: postgres::Config,
    writes: Pool,
    reads: Pool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

fn describe(config: &postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(h) => h.clone(),
            postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .collect();
    format!(
        "postgres://{}@{}/{}",
        config.get_user().unwrap_or(""),
        hosts.join(","),
        config.get_dbname().unwrap_or("")
    )
}

impl PgStore {
    /// Connects to `url`, applies pending migrations (under an advisory lock) and starts the
    /// workers. The connections are made on a thread of their own, so this may be called from
    /// inside a Tokio runtime.
    pub fn open(url: &str, options: StoreOptions) -> Result<Self, PortError> {
        let config: postgres::Config = url
            .parse()
            .map_err(|e| PortError::permanent("store", format!("bad PostgreSQL url: {e}")))?;
        let config = connection::hardened(&config);
        let target = describe(&config);
        let settings = Settings {
            config: config.clone(),
            conflict_retries_max: options.conflict_retries_max,
        };
        let (writers, readers) = (options.writers.max(1), options.readers.max(1));
        let connect = config.clone();
        let (write_clients, read_clients) = std::thread::spawn(move || {
            let mut first = connect.connect(postgres::NoTls).map_err(|e| {
                PortError::transient("store", format!("cannot connect to PostgreSQL: {e}"))
            })?;
            migrations::migrate(&mut first).map_err(|e| PortError::permanent("store", e))?;
            let mut all = vec![first];
            for _ in 1..writers + readers {
                all.push(connect.connect(postgres::NoTls).map_err(|e| {
                    PortError::transient("store", format!("cannot connect to PostgreSQL: {e}"))
                })?);
            }
            let reads = all.split_off(writers);
            Ok::<_, PortError>((all, reads))
        })
        .join()
        .map_err(|_| PortError::permanent("store", "connecting panicked"))??;
        Ok(PgStore {
            writes: Pool::start("writer", write_clients, &settings, options.queue_max)?,
            reads: Pool::start("reader", read_clients, &settings, options.queue_max)?,
            target,
            config,
        })
    }

    /// Work locks on this database (see [`PgExclusive`]), on a connection of their own.
    pub fn exclusive(&self) -> PgExclusive {
        PgExclusive::new(self.config.clone())
    }

    /// Binds the database to the seed with `fingerprint` if it is bound to none yet, and answers
    /// the fingerprint it is bound to: the caller refuses to go on when it is not its own. The
    /// primary key makes the first binding the only one, so two `init`s racing on one database
    /// cannot both win.
    pub fn bind_seed(&self, fingerprint: &str, now_ms: i64) -> Result<String, PortError> {
        let config = self.config.clone();
        let fingerprint = fingerprint.to_owned();
        std::thread::spawn(move || {
            let mut client = config.connect(postgres::NoTls).map_err(|e| {
                PortError::transient("store", format!("cannot connect to PostgreSQL: {e}"))
            })?;
            client
                .execute(
                    "INSERT INTO deployment (id, seed_fingerprint, bound_at) VALUES (1, $1, $2)
                     ON CONFLICT (id) DO NOTHING",
                    &[&fingerprint, &now_ms],
                )
                .and_then(|_| {
                    client.query_one("SELECT seed_fingerprint FROM deployment WHERE id = 1", &[])
                })
                .map(|row| row.get::<_, String>(0))
                .map_err(|e| {
                    PortError::transient("store", format!("cannot read the deployment: {e}"))
                })
        })
        .join()
        .map_err(|_| PortError::permanent("store", "binding the seed panicked"))?
    }

    /// Where the store connects (user, hosts, database; never the password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Stops taking jobs, lets the workers finish what is queued and waits for them.
    pub fn close(&self) {
        self.writes.close();
        self.reads.close();
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[async_trait]
impl Store for PgStore {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        self.writes.submit(|reply| Task::Write(job, reply)).await
    }

    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        self.reads.submit(|reply| Task::Read(job, reply)).await
    }
}
