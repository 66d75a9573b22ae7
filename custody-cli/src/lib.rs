//! The composition root's library half: the background runtime of `custody serve`. The
//! `custody` binary (src/main.rs) parses commands and wires the adapters around it.

pub mod harden;
pub mod runtime;
