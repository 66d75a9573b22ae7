//! Test support for the custody workspace: everything a test needs in place of a real port,
//! shared by the core's tests and by every adapter's.
//!
//! - [`MemoryStore`]: a [`Store`](custody_core::ports::Store) in memory, with the observable
//!   semantics of the SQLite store (constraints, orderings, transactions, savepoints, read
//!   snapshots), over [`MemoryLedger`], the reference ledger.
//! - [`conformance`]: one suite per repository trait, run against any store.
//! - Deterministic [`CountingEntropy`] and [`ManualClock`], the test [`MNEMONIC`] and its
//!   [`test_signer`].
//! - [`chain_ports`]: the conformance suite of the chain ports (`ChainSource`, `ChainSender`),
//!   run by each chain adapter against its test node.
//! - [`Rng`]: a seeded generator for tests that choose (a seed replays exactly).
//! - [`ScriptedNode`]: a chain source whose blocks, head and gaps the test scripts.
//! - [`block_on`] and [`join_all`]: just enough of an executor to drive the store futures without
//!   a runtime crate, so a test of the core needs none.
//!
//! It is a crate of its own, not a module of the core, so that the core holds only the domain
//! and its ports. Nothing here is for production: the memory store keeps everything in one
//! process and forgets it on drop. Only dev-dependencies name this crate.

pub mod chain_ports;
pub mod conformance;
mod deterministic;
mod executor;
mod keys;
mod memory_ledger;
mod memory_store;
mod rng;
mod scripted_node;

pub use deterministic::{CountingEntropy, ManualClock};
pub use executor::{block_on, join_all};
pub use keys::{test_signer, MNEMONIC};
pub use memory_ledger::MemoryLedger;
pub use memory_store::MemoryStore;
pub use rng::Rng;
pub use scripted_node::ScriptedNode;
