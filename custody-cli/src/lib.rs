//! The composition root's library half: the process hardening the `custody` binary applies
//! before anything else. The binary (src/main.rs) parses commands and wires the adapters and
//! the background loops (`custody-runtime`) around the core.

pub mod harden;
