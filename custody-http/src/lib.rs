//! `custody-http`: the HTTP adapter of the custody service.
//!
//! A raw hyper 1.x server. It routes, checks signed requests, reads JSON strictly, calls the
//! core and maps every outcome to the contract's status and error shape in one place
//! ([`errors`]). No business rule lives here.

mod authn;
pub mod console;
pub mod dispatch;
pub mod errors;
mod fence;
mod handlers;
mod idempotent;
pub mod input;
pub mod metrics;
pub mod nonces;
pub mod openapi;
pub mod reply;
pub mod routes;
pub mod second_factor;
pub mod server;
mod server_config;
pub mod state;

pub use authn::CredentialCache;
pub use second_factor::SecondFactorChecks;
pub use server::serve;
pub use server_config::ServerConfig;
pub use state::{AppState, HttpLimits, NetworkSettings, ScanStatus, SwapPair};
