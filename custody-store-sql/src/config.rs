//! `[store]` of `custody.toml`: which store serves the data dir and its tuning. It lives here,
//! in the layer both stores are built on, because it is one section for both: `url` selects
//! PostgreSQL (`custody-store-postgres` reads it, with the database's credentials), else the
//! data dir's SQLite file is used; `batch_max` is SQLite's, `writers` PostgreSQL's, `readers`
//! both's. Neither store crate depends on the other, so neither could hold the other's keys.

use serde::{Deserialize, Serialize};

mod defaults {
    pub fn writers() -> usize {
        8
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Commands per transaction; 1 disables group commit (SQLite).
    pub batch_max: usize,
    pub readers: usize,
    /// `postgres://user@host:port/database`: the shared PostgreSQL store instead of the data
    /// dir's SQLite file (decisions §16). The environment's `CUSTODY_DATABASE_URL` wins over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Connections running write jobs (PostgreSQL).
    #[serde(default = "defaults::writers")]
    pub writers: usize,
}

impl Default for StoreConfig {
    /// The stores' own defaults (each store crate's tests hold them equal to its options').
    fn default() -> Self {
        StoreConfig {
            batch_max: 256,
            readers: 4,
            url: None,
            writers: defaults::writers(),
        }
    }
}
