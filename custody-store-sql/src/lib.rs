//! `custody-store-sql`: the repositories of both SQL stores, written once.
//!
//! Every repository trait of the core is implemented here on [`SqlTx`], a transaction handle
//! over [`sql::Db`]: a small statement layer shaped like the part of rusqlite the repositories
//! use. Each store implements [`sql::Backend`] for its connection (`custody-store-sqlite` over
//! rusqlite, `custody-store-postgres` over the `postgres` client) and keeps what is its own:
//! opening connections, migrations, its writer or worker threads, retries and leases.
//!
//! The statements are portable SQL (`CAST(?n AS BIGINT)` where PostgreSQL must know a
//! parameter's type, upserts that name their table, `RETURNING`). Where one text cannot serve
//! both, [`sql::Dialect::pick`] chooses: SQLite's fast paths (rowid deletes, an `INDEXED BY`
//! seek, the in-process nonce log) and PostgreSQL's shared-instance rules (nonces recorded as
//! used, watch-set positions taken as `MAX + 1`, the database clock bounding nonce pruning).

mod config;
mod repo;
pub mod sql;
pub mod tx;
pub mod wallet_cache;

pub use config::StoreConfig;
pub use repo::credentials::CREDENTIALS_VERSION_SQL;
pub use repo::deposits::{PENDING_CONDITION, PENDING_UNITS_SQL};
pub use repo::PAGE_CLAUSE;
pub use sql::{Backend, Db, Dialect};
pub use tx::{db_err, SqlTx};
