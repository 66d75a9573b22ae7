//! The deterministic simulator: one seed drives the real code (the core's deposit pipeline and
//! ledger, the runtime's scanner, over the memory store) through a simulated world. Only the
//! edges are simulated: the clock, the entropy and the chain. Nothing runs concurrently and
//! nothing reads the wall clock: a seed runs the same way every time, and a failing seed prints
//! the command that replays it and the steps that led there.
//!
//! Every choice comes from the seed through `custody_testkit::Rng`.
//!
//! The world so far ([`chain::SimChain`]): an honest BSC chain whose blocks link by hash;
//! outside senders who pay deposit addresses and other addresses in BNB and USDT, some in
//! transfers that fail; BNB from the hot wallet to deposit addresses; blocks that take all or
//! part of the pool; reorganizations of 1 to [`run::DEEPEST_REORG`] blocks (deeper than the
//! confirmations) replaced by shorter, equal or longer branches, whose transfers return to the
//! pool or vanish; a clock that moves forward.
//!
//! The invariants: after every step the books balance; once the world stops, every user's
//! balance of every asset is exactly what outside senders paid to their deposit address in
//! successful canonical transfers (each credited once, nothing from a dropped block, a failed
//! transfer, or the hot wallet), and more ticks move nothing.
//!
//! A scheduler of its own, not `turmoil`: the system under test has no sockets to simulate,
//! only ports, so the world implements the ports and the simulator calls each loop's step.
//! See `docs/internals/simulator.md`.

pub mod chain;
pub mod run;
