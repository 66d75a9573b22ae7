//! The deterministic whole-system simulator: one seed drives the real code (the core's
//! deposit pipeline and ledger, the runtime's scanner, over the memory store) through a
//! simulated world, and the invariants are checked after every step. Only the edges are
//! simulated: the clock, the entropy and the chain. Nothing runs concurrently and nothing reads
//! the wall clock: a seed runs the same way every time, and a failing seed prints the command
//! that replays it and the steps that led there.
//!
//! The world so far ([`chain::SimChain`]): a BSC chain whose blocks link by hash; outside
//! senders who pay deposit addresses and other addresses in BNB and USDT, some in transactions
//! that fail; the hot wallet's gas top-ups to deposit addresses; blocks that take all or part of the pool; reorganizations of 1 to
//! [`run::DEEPEST_REORG`] blocks (deeper than the confirmations, so credited deposits are
//! reversed too) whose transactions return to the pool or vanish; a clock that jumps.
//!
//! The invariants: after every step the books balance; once the world stops, every user's
//! balance of every asset is exactly what the canonical chain paid to their deposit address in
//! successful transfers (each credited once, nothing from a dropped block, a failed
//! transaction, another address, or the hot wallet).
//!
//! A scheduler of its own, not `turmoil`: the system under test has no sockets to simulate,
//! only ports, so the world implements the ports and the simulator calls each loop's step.

pub mod chain;
pub mod rng;
pub mod run;
