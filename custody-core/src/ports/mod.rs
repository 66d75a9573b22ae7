//! The ports: one small trait per external capability. Adapters implement them; the core only
//! calls them. Each trait's rustdoc states what an implementation MUST and MUST NOT do, and what
//! happens on retry and on crash.

pub mod chain;
pub mod clock;
pub mod dex;
pub mod exclusive;
pub mod sender;
pub mod signer;
pub mod stake;
pub mod store;
pub mod webhook;

pub use chain::{ChainSource, OnchainBalance};
pub use clock::{Clock, Entropy};
pub use dex::DexRouter;
pub use exclusive::{Alone, Exclusive};
pub use sender::ChainSender;
pub use signer::{HdPath, RecoverableSignature, Signer};
pub use stake::{EnergyStake, StakeFacts};
pub use store::{nested, read, write, ReadTx, Savepoints, Store, WriteTx};
pub use webhook::{DeliveryOutcome, WebhookRequest, WebhookSink};
