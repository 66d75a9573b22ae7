//! `custody-chain-tron`: the TRON adapter.
//!
//! - [`client`]: a client for the TRON full-node HTTP API (the API TronGrid serves) with
//!   endpoint failover, health ([`EndpointHealth`], serde-serializable for the admin `rpcs`
//!   listing), the optional `TRON-PRO-API-KEY` header, timeouts and transient/permanent errors.
//!   Each endpoint's block 0 is compared with the configured genesis block id
//!   ([`MAINNET_GENESIS_BLOCK_ID`] by default) before its first use: an endpoint of another
//!   network is never used.
//! - [`config`]: the keys of `custody.toml` only TRON reads (`[tron] genesis_block_id`,
//!   `api_key`), checked, and the client's settings built from the `[tron]` section.
//! - [`chain`]: [`TronChain`], the [`ChainSource`](custody_core::ports::ChainSource) port:
//!   head, headers (`blockID`, `parentHash`, `number`, `timestamp`), blocks with their TRX and
//!   TRC20 transfers ([`scan`] says exactly what is reported; a block's transaction infos
//!   over the response limit are read one by one), balances.
//! - [`tx`]: the `raw_data` protobuf of TRX and TRC20 transfers and of Stake 2.0 energy
//!   delegations ([`proto`] has the messages),
//!   txID, signing through the [`Signer`](custody_core::ports::Signer) port, broadcast hex.
//! - [`fees`]: the inputs of the core's TRON resource planner read from the node (prices,
//!   the account's resources), and the resources a transaction actually used.
//! - [`sender`]: [`TronSender`], the [`ChainSender`](custody_core::ports::ChainSender) port:
//!   price, build (reference block, expiration), assemble, broadcast (the node's answer
//!   classified), look up by txID, head and balances.
//! - [`stake`]: [`TronStake`], the [`EnergyStake`](custody_core::ports::EnergyStake) port: the
//!   network's energy per staked TRX and what the hot wallet's stake can delegate now.
//! - [`api`]: the node's JSON, with the documentation each field was checked against.
//!
//! Nothing here decides what is a deposit: the core does, from the returned data.

pub mod abi;
pub mod api;
pub mod chain;
pub mod client;
pub mod config;
pub mod fees;
pub mod proto;
pub mod scan;
pub mod sender;
pub mod stake;
pub mod tx;

pub use chain::TronChain;
pub use client::{
    parse_genesis_block_id, redact_url, BroadcastOutcome, EndpointHealth, ReadError, SettingsError,
    TronClient, TronSettings, API_KEY_HEADER, MAINNET_GENESIS_BLOCK_ID,
};
pub use fees::{PlanInputs, ResourcePlan};
pub use sender::{classify_broadcast, SenderSettingsError, TronSender, TronSenderSettings};
pub use stake::TronStake;
pub use tx::{
    attach_signature, energy_delegation, sign, trc20_transfer, trx_transfer, RefBlock,
    SignedTransaction, TxError, TxTiming, UnsignedTransaction,
};
