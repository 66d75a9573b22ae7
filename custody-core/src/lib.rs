//! `custody-core`: the pure domain of the custody service.
//!
//! It does no I/O, spawns nothing and reads no clock: adapters implement the [`ports`] and the
//! binary drives the core. Everything that moves money is decided here and executed inside one
//! store transaction.

pub mod address;
pub mod adjustment;
pub mod admin;
pub mod amount;
pub mod asset;
pub mod auth;
pub mod balance_event;
pub mod chain;
pub mod deposit;
pub mod error;
pub mod idempotency;
pub mod invariants;
pub mod keys;
pub mod ledger;
pub mod network;
pub mod outbox;
pub mod outgoing;
pub mod page;
pub mod ports;
pub mod pricing;
pub mod reconcile;
pub mod secret;
pub mod swap;
pub mod sweep;
pub mod tenant;
#[cfg(feature = "test-utils")]
pub mod testing;
pub mod time;
pub mod transfer;
pub mod treasury;
pub mod tron;
pub mod vault;
pub mod wallet;
pub mod webhook;
pub mod withdrawal;

pub use amount::Amount;
pub use asset::{Asset, AssetCatalog, AssetId, AssetKind};
pub use error::{CoreError, CoreResult, ErrorCode, PortError, Refusal};
pub use network::Network;
pub use tenant::TenantId;
pub use time::Timestamp;
