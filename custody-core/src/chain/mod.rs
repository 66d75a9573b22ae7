//! Our position on each chain and the pure rules that keep it true: which block may follow the
//! cursor, and where a reorganization forked. The scanner does the I/O; these functions decide.
//! [`endpoints`] is the failover set of a network's endpoints, which every chain adapter holds.

mod config;
pub mod endpoints;
mod fork;
mod health;
mod ids;

pub use config::{AssetConfig, ChainConfig};
pub use fork::{connects, find_fork, ForkSearch};
pub use health::EndpointHealth;
pub use ids::{display_hash, ChainAddress, TxHash};

use serde::Serialize;

use crate::error::PortError;
use crate::network::Network;
use crate::time::Timestamp;

/// What the scanner of one network last saw, for the dashboard and the admin listings (one
/// JSON shape everywhere).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScanStatus {
    pub head_block: Option<u64>,
    pub scanned_block: Option<u64>,
    pub last_error: Option<String>,
    /// Since when the scanner has failed without progress (`None` while it moves).
    pub failing_since: Option<Timestamp>,
    pub updated_at: Option<Timestamp>,
}

impl ScanStatus {
    pub fn lag_blocks(&self) -> Option<u64> {
        Some(self.head_block?.saturating_sub(self.scanned_block?))
    }
}

/// The scanner's position on one network: the last block applied and its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainCursor {
    pub number: u64,
    pub hash: String,
}

/// Chain position, written only in the transaction that applies or rewinds blocks.
///
/// Its own repository, because everything that trusts a block (deposits, and soon the receipts
/// of outgoing transactions) checks it against the same recorded hashes.
pub trait ChainRepo: ChainReads {
    /// Records block `number` as applied with `hash` and moves the cursor to it.
    fn record_block(
        &mut self,
        network: Network,
        number: u64,
        hash: &str,
        parent_hash: &str,
    ) -> Result<(), PortError>;
    /// Forgets recorded blocks above `number` and moves the cursor back to it.
    fn rewind_blocks(&mut self, network: Network, number: u64) -> Result<(), PortError>;
    /// Forgets recorded blocks below `number` (they are final for us).
    fn prune_blocks(&mut self, network: Network, below: u64) -> Result<(), PortError>;
}

pub trait ChainReads {
    fn chain_cursor(&mut self, network: Network) -> Result<Option<ChainCursor>, PortError>;
    /// The hash recorded for block `number`, if still kept.
    fn recorded_block_hash(
        &mut self,
        network: Network,
        number: u64,
    ) -> Result<Option<String>, PortError>;
}
