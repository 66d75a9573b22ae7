//! Chain access. Adapters return plain data (blocks, hashes, transfers); the core connects
//! blocks to what it knows, detects reorganizations and decides what is a deposit.

use async_trait::async_trait;

use crate::amount::Amount;
use crate::asset::Asset;
use crate::chain::{ChainAddress, EndpointHealth, TxHash};
use crate::error::PortError;
use crate::network::Network;

/// A block header as far as the core needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    pub number: u64,
    /// Lowercase hex without `0x`.
    pub hash: String,
    pub parent_hash: String,
    pub timestamp_ms: i64,
}

/// One movement of value seen in a block: a native transfer or a token `Transfer` log of a
/// catalog contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedTransfer {
    pub tx_hash: TxHash,
    /// `None` for native value; the log index for token transfers.
    pub log_index: Option<u32>,
    /// Catalog asset code on this network.
    pub asset_code: String,
    /// Typed, hence in the network's canonical text form (EIP-55 on BSC, base58 on TRON).
    pub from: ChainAddress,
    pub to: ChainAddress,
    pub amount: Amount,
    /// Whether the transaction succeeded (EVM receipt status 1, TRON `SUCCESS`).
    pub succeeded: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedBlock {
    pub header: BlockHeader,
    pub transfers: Vec<ObservedTransfer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnchainBalance {
    /// Everything the address owns of the asset, `staked_units` included.
    pub units: Amount,
    /// TRX: the part of `units` staked (Stake 2.0, delegated or unstaking too): the owner's,
    /// not spendable until unstaked. Zero elsewhere.
    pub staked_units: Amount,
    pub block_number: u64,
}

/// Read access to one network.
///
/// An implementation:
/// - MUST classify every failure as transient (timeouts, 5xx, connection errors, rate limits:
///   the caller retries later) or permanent (malformed answers, unsupported requests).
/// - MUST return a block's transfers only from successful and failed transactions as they are;
///   it MUST NOT filter by our addresses (the core does that with a hash-set lookup) and MUST
///   report token transfers only for contracts of the catalog it was configured with.
/// - MUST NOT cache block contents across calls: after a reorganization the same number may
///   have another hash, and only fresh hashes reveal it.
/// - MAY fail over between several endpoints; a call is retried on the next endpoint only if
///   it is a read.
#[async_trait]
pub trait ChainSource: Send + Sync {
    fn network(&self) -> Network;

    /// Number of the newest block the node knows.
    async fn head_number(&self) -> Result<u64, PortError>;

    /// The header of block `number`, or `None` when the node has no such block (yet).
    async fn header(&self, number: u64) -> Result<Option<BlockHeader>, PortError>;

    /// The block with every candidate transfer in it, or `None` when it does not exist (yet).
    async fn scan_block(&self, number: u64) -> Result<Option<ScannedBlock>, PortError>;

    /// The on-chain balance of `address` in `asset` at the newest block.
    async fn balance(&self, address: &str, asset: &Asset) -> Result<OnchainBalance, PortError>;

    /// The health of every configured endpoint, in configured order (no I/O: what the
    /// adapter recorded of its last exchanges).
    fn endpoint_health(&self) -> Vec<EndpointHealth>;
}
