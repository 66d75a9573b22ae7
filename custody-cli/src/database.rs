//! The store `serve` and the other commands open: the data dir's SQLite file, or the shared
//! PostgreSQL database named by `CUSTODY_DATABASE_URL` / `[store] url` (decisions §16).

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use custody_core::auth::{RateLimit, RateLimiter};
use custody_core::error::CoreResult;
use custody_core::ports::store::{ReadJob, Store, WriteJob};
use custody_core::ports::{Alone, Exclusive};
use custody_store_postgres::{PgRateLimiter, PgStore};
use custody_store_sqlite::SqliteStore;

use crate::config::Config;
use crate::datadir::DataDir;

pub enum Database {
    Sqlite(Box<SqliteStore>),
    Postgres(Arc<PgStore>),
}

impl Database {
    /// Opens (creating and migrating as needed) the store `config` selects for `dir`.
    pub fn open(dir: &DataDir, config: &Config) -> Result<Database, String> {
        match custody_store_postgres::database_url(&config.store)? {
            Some(url) => {
                let options = custody_store_postgres::StoreOptions::from_config(&config.store);
                PgStore::open(&url, options)
                    .map(|s| Database::Postgres(Arc::new(s)))
                    .map_err(|e| format!("cannot open the PostgreSQL database: {}", e.message))
            }
            None => {
                let options = custody_store_sqlite::StoreOptions::from_config(&config.store);
                SqliteStore::open(&dir.db_path(), options)
                    .map(|s| Database::Sqlite(Box::new(s)))
                    .map_err(|e| format!("cannot open the database: {}", e.message))
            }
        }
    }

    /// Where the data is: the SQLite file, or the PostgreSQL target without its password.
    pub fn describe(&self) -> String {
        match self {
            Database::Sqlite(s) => s.path().display().to_string(),
            Database::Postgres(p) => p.target().to_owned(),
        }
    }

    pub fn schema_version(&self) -> usize {
        match self {
            Database::Sqlite(_) => custody_store_sqlite::schema_version(),
            Database::Postgres(_) => custody_store_postgres::schema_version(),
        }
    }

    /// Whether several instances may share this store (and must coordinate through it).
    pub fn is_shared(&self) -> bool {
        matches!(self, Database::Postgres(_))
    }

    /// Where request rates are counted: in memory for the embedded store (one process), in the
    /// database for the shared one, so a credential's limit holds across instances.
    pub fn rate_limiter(&self) -> Arc<dyn RateLimit> {
        match self {
            Database::Sqlite(_) => Arc::new(RateLimiter::new()),
            Database::Postgres(p) => Arc::new(PgRateLimiter::new(Arc::clone(p))),
        }
    }

    /// Who does a network's scanning: this process alone on the embedded store; on the shared
    /// one, the instance holding the work's advisory lock (the others stand by).
    pub fn exclusive(&self) -> Arc<dyn Exclusive> {
        match self {
            Database::Sqlite(_) => Arc::new(Alone),
            Database::Postgres(p) => Arc::new(p.exclusive()),
        }
    }

    /// Refuses a shared database bound to another seed than `fingerprint` (binding it to this
    /// one if it is bound to none). The embedded store needs no binding: its file lives in the
    /// data dir next to the seed that made it.
    pub fn check_seed(&self, fingerprint: &str) -> Result<(), String> {
        let Database::Postgres(p) = self else {
            return Ok(());
        };
        let now = custody_core::ports::Clock::now(&custody_runtime::system::SystemClock);
        let bound = p
            .bind_seed(fingerprint, now.unix_millis())
            .map_err(|e| format!("cannot check the database's seed: {}", e.message))?;
        if bound != fingerprint {
            return Err(format!(
                "the database {} belongs to another seed (fingerprint {bound}) than this data \
                 dir's (fingerprint {fingerprint}): it is another service's database, or this \
                 is another service's data dir; refusing to derive addresses from its counters",
                p.target()
            ));
        }
        Ok(())
    }

    pub fn close(&self) {
        match self {
            Database::Sqlite(s) => s.close(),
            Database::Postgres(p) => p.close(),
        }
    }
}

#[async_trait]
impl Store for Database {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        match self {
            Database::Sqlite(s) => s.write(job).await,
            Database::Postgres(p) => p.write(job).await,
        }
    }

    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        match self {
            Database::Sqlite(s) => s.read(job).await,
            Database::Postgres(p) => p.read(job).await,
        }
    }

    // Forwarded, not left to the defaults: the credential cache and the inline reads are the
    // embedded store's, and a wrapper that dropped them would silently cost every request.
    async fn credentials_version(&self) -> CoreResult<Option<u64>> {
        match self {
            Database::Sqlite(s) => s.credentials_version().await,
            Database::Postgres(p) => p.credentials_version().await,
        }
    }

    async fn read_quick(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        match self {
            Database::Sqlite(s) => s.read_quick(job).await,
            Database::Postgres(p) => p.read_quick(job).await,
        }
    }
}
