//! Examples of embedding `custody-core` in another Rust service; the code is in `examples/`
//! and `tests/` of this crate, which has no library code of its own.
//!
//! - `cargo run -p custody-examples --example embed_sqlite`: the core with the embedded SQLite
//!   store in the caller's own process and Tokio runtime: a user's deposit address, a deposit
//!   seen on chain and credited once confirmed, an internal transfer, and the balances.
//! - `cargo test -p custody-examples`: a ledger rule (an internal transfer moves value between
//!   users and never creates or destroys it) property-tested against the core alone, with no
//!   store, runtime or network.
