//! `custody-core`: the pure domain of the custody service.
//!
//! It does no I/O, spawns nothing and reads no clock: adapters implement the [`ports`] and the
//! binary drives the core. Everything that moves money is decided here and executed inside one
//! store transaction.
//!
//! # Embedding the core
//!
//! Another Rust service can use the core in its own process, as the `custody` binary does. It
//! supplies the ports:
//!
//! - a [`ports::Store`]: `custody-store-sqlite` (one file, one process) or
//!   `custody-store-postgres` (several instances); every command runs inside one of its
//!   transactions through [`ports::store::write`] and [`ports::store::read`];
//! - a [`ports::Signer`]: [`keys::HdSigner`] over a BIP-39 mnemonic, or its own (an HSM, a
//!   remote signer) that derives and signs the same way;
//! - a [`ports::Clock`] and an [`ports::Entropy`] (times and record ids are passed in, never
//!   read by the core);
//! - for money on chain, a [`ports::ChainSource`] (blocks and balances) and a
//!   [`ports::ChainSender`] (pricing, building, broadcasting): `custody-chain-bsc`,
//!   `custody-chain-tron`, or its own.
//!
//! Then it calls the commands: [`wallet::create_wallet`], [`deposit::apply_block`] with the
//! blocks its scanner read, [`transfer::execute`], [`withdrawal::create_quote`] and
//! [`withdrawal::execute`], and reads balances with [`ledger::user_balances`]. Each command is a
//! function of the store transaction, the ids and the time it is given: what it decides
//! commits together or not at all. The `custody-examples` crate runs the whole path on the
//! SQLite store (`cargo run -p custody-examples --example embed_sqlite`) and property-tests a
//! ledger rule on its own.
//!
//! A user's deposit address and an internal transfer, on the in-memory store the core's tests
//! use (`custody-testkit`, a dev-dependency; a service passes its own store instead):
//!
//! ```
//! use custody_core::keys::{HdSigner, Mnemonic};
//! use custody_core::ledger::{self, Direction, ReferenceType, TxMeta, UserAccount};
//! use custody_core::ports::store::{read, write};
//! use custody_core::transfer::{self, TransferIds, TransferRequest};
//! use custody_core::{Amount, AssetId, Network, TenantId, Timestamp};
//! use custody_testkit::{block_on, MemoryStore, MNEMONIC};
//! use uuid::Uuid;
//!
//! let store = MemoryStore::new();
//! let signer = HdSigner::from_seed(&Mnemonic::parse(MNEMONIC).unwrap().to_seed()).unwrap();
//! let acme = TenantId::parse("acme").unwrap();
//! let now = Timestamp::from_unix_millis(1_800_000_000_000);
//! let usdt = |user: &str| UserAccount::new("acme", user, AssetId::new(Network::Bsc, "USDT"));
//!
//! block_on(write(&store, move |tx| {
//!     for (n, user) in ["alice", "bob"].into_iter().enumerate() {
//!         let ids = [Uuid::from_u128(2 * n as u128 + 1), Uuid::from_u128(2 * n as u128 + 2)];
//!         let created =
//!             custody_core::wallet::create_wallet(tx, &signer, ids, &acme, user, Network::Bsc, now)?;
//!         assert!(created.wallet.address.starts_with("0x"));
//!     }
//!     // Alice's opening balance, as an operator's correction would post it.
//!     let meta = TxMeta {
//!         id: Uuid::from_u128(10),
//!         reference_type: ReferenceType::Adjustment,
//!         reference_id: Uuid::from_u128(10),
//!         created_at: now,
//!     };
//!     ledger::adjust(tx, &meta, &usdt("alice"), Direction::Credit, Amount::from_units(100))
//!         .map_err(|e| custody_core::CoreError::Invariant(e.to_string()))?;
//!     let request = TransferRequest {
//!         tenant: acme.clone(),
//!         sender: "alice".into(),
//!         recipient: "bob".into(),
//!         network: Network::Bsc,
//!         asset: "USDT".into(),
//!         amount: Amount::from_units(40),
//!     };
//!     let ids = TransferIds {
//!         transfer: Uuid::from_u128(20),
//!         ledger_tx: Uuid::from_u128(21),
//!         sender_event: Uuid::from_u128(22),
//!         recipient_event: Uuid::from_u128(23),
//!     };
//!     transfer::execute(tx, ids, &request, now)
//! }))
//! .unwrap();
//!
//! let balances = block_on(read(&store, move |tx| {
//!     ledger::user_balances(tx, &[usdt("alice"), usdt("bob")])
//!         .map_err(|e| custody_core::CoreError::Invariant(e.to_string()))
//! }))
//! .unwrap();
//! assert_eq!(balances[0].available, Amount::from_units(60));
//! assert_eq!(balances[1].available, Amount::from_units(40));
//! ```

#[macro_use]
mod stored_enum;

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
pub mod moves;
pub mod network;
pub mod outbox;
pub mod outgoing;
pub mod page;
pub mod ports;
pub mod pricing;
pub mod reconcile;
pub mod secret;
pub mod settings;
pub mod swap;
pub mod sweep;
pub mod tenant;
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
