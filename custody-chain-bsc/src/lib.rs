//! `custody-chain-bsc`: the BNB Smart Chain adapter.
//!
//! [`BscChain`] implements [`custody_core::ports::ChainSource`] over JSON-RPC
//! ([`rpc::RpcClient`]: hyper, batches, a timeout per request, failover across the configured
//! endpoints with a health record each). It returns data; the core decides what is a deposit.
//!
//! # Building it
//!
//! [`BscChain::new`] takes [`BscSettings`] (the `[bsc]` section of `custody.toml`: urls,
//! chain id, the BSC assets of the catalog, plus limits with defaults; built by
//! [`BscSettings::from_config`], and [`config`] holds every key only BSC reads). It does no
//! I/O. The
//! first time each endpoint is used its `eth_chainId` is compared with the configured chain
//! id: an endpoint on another chain is logged at `error` level, never used again, and shows
//! as unhealthy; when no endpoint is left the call fails as permanent.
//!
//! # What `scan_block(n)` returns
//!
//! The header of the block the node has at height `n` (hash, parent hash, timestamp in ms:
//! BSC's `milliTimestamp` when the node gives it, else seconds × 1000) and every candidate
//! transfer in it, in block order (transaction index, then log index):
//!
//! - **Native BNB**: each transaction with a recipient (`to`) and a value above zero,
//!   `log_index: None`, whatever its outcome: `succeeded` is the receipt status.
//! - **BEP20**: each `Transfer(address,address,uint256)` log (topic 0 `0xddf252ad…`) emitted by
//!   a contract of the catalog, read with `eth_getLogs` filtered by the block hash and the
//!   catalog contracts, with the receipt status of its transaction and, as `log_index`, the
//!   log's position among its transaction's logs (not the block-wide `logIndex`: a transfer
//!   re-mined in another block after a reorganization keeps its identity). Logs of
//!   any other contract are never returned. (A reverted transaction keeps no logs, so token
//!   transfers are in practice always `succeeded: true`; the status is read all the same.)
//!
//! Every returned transfer has an amount above zero: zero-value native transactions and
//! zero-value `Transfer` logs (a common address-poisoning spam) are dropped here. Amounts
//! above 2^128 − 1 units cannot be held by any ledger and are dropped with an `error` log.
//! Transfers are **not** filtered by our addresses: the core does that with a hash-set lookup.
//! Addresses are EIP-55 text, hashes 64 lowercase hex digits without `0x`.
//!
//! **Not seen: internal transactions.** BNB moved by a contract call (a multisig or exchange
//! contract paying out through `CALL` with value, a router unwrapping WBNB to a user) appears
//! in no transaction's `value` and emits no standard log, so this method does not report it.
//! Deposits of BNB made that way are not detected; seeing them needs trace APIs
//! (`debug_traceBlock`), which public BSC endpoints rarely serve.
//!
//! **Consistency.** The block is read by number once; its hash then keys everything else:
//! logs by `blockHash`, receipts by block hash (`eth_getBlockReceipts`, or batched
//! `eth_getTransactionReceipt` when the node lacks it or `use_block_receipts` is off), and every
//! log and receipt is checked to carry that block hash. So the transfers always belong to the
//! block whose hash is returned. When the block is replaced between two calls (the node answers
//! "unknown block", a missing receipt, or a receipt of another block) the scan fails as
//! **transient**; the core retries and meets the new hash. Nothing is cached across calls.
//!
//! **Answers over `response_bytes_max`.** A busy block is still scanned, in smaller requests
//! ([`rpc::RpcClient::batch_split`] halves a batch whose answer is too large, down to single
//! calls): when the logs and receipts answer is too large, the logs alone are read, then the
//! receipts of the candidate transactions; when the logs alone are too large, every receipt of
//! the block is read and the catalog logs are taken from them; when the block body is too
//! large, its transaction hashes are read, then each transaction by hash (checked to be in the
//! block). Each request is then bounded by a single transaction or receipt; one of those over
//! the limit is a permanent error. An oversized answer is not failed over and does not count
//! against the endpoint's health.
//!
//! # `balance(address, asset)`
//!
//! Reads the head number, then `eth_getBalance` (native) or `eth_call` of `balanceOf(address)`
//! (selector `0x70a08231`, BEP20) at exactly that block, and returns both.
//!
//! # Failures
//!
//! Every error is a [`custody_core::PortError`] with port `chain.bsc`, transient or permanent
//! as tabled in [`rpc`]. Messages are for operators' logs and never contain an endpoint's path
//! or query (where API keys live).

pub mod codec;
pub mod rpc;

mod chain;
pub mod config;
pub mod dex;
pub mod sender;
mod settings;

pub use chain::BscChain;
pub use dex::{BscDexRouter, DexSettings};
pub use rpc::{Answers, CallFailure, RpcClient, RpcError, RpcHealth, RpcSettings, UrlError};
pub use sender::{BscSender, BscSenderSettings, CONTRACT_NATIVE_GAS};
pub use settings::{BscConfigError, BscSettings};
