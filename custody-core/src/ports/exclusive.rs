//! Work that one process of a deployment does at a time (a network's scanner): several
//! instances on a shared store would otherwise all fetch every block. Correctness never rests
//! on it — what such work writes is fenced in the store (a block applies only onto the stored
//! cursor) — it saves the duplicate work, and the standby takes over when the holder dies.

use async_trait::async_trait;

/// The right to do a named piece of work in this process.
///
/// An implementation MUST give a name to at most one holder at a time among the processes
/// sharing its store, MUST pass it on when the holder dies (its connection closes, its lease
/// runs out) without any release by the dead, and MAY take it back from a holder that lost its
/// connection: callers ask before every round of work and stop when told `false`.
#[async_trait]
pub trait Exclusive: Send + Sync {
    /// Whether this process holds `work` now, taking it when nobody does.
    async fn hold(&self, work: &str) -> bool;
}

/// The embedded store has one process: it always holds everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Alone;

#[async_trait]
impl Exclusive for Alone {
    async fn hold(&self, _work: &str) -> bool {
        true
    }
}
