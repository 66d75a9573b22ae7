//! Every background loop of `custody serve`, in one place. Each loop is thin, in the manner of
//! LDK's background processor: it reads the core's decision, does the I/O, and writes the
//! result back through the store; the rules themselves live in `custody-core`.
//!
//! | loop | file | core decisions it drives |
//! |---|---|---|
//! | chain scanner, one per network | `scanner.rs` | `chain::find_fork`, `deposit::apply_block` (refuses a block that does not connect), `deposit::rewind`, `deposit::advance` |
//! | webhook delivery | `webhooks.rs` | `webhook::choose_claims` (in the store's claim), `webhook::next_step` |
//! | broadcaster, one per network (wired with the withdrawals) | `broadcaster.rs` | `outgoing::decide` (send, send again, replace, rebuild, inclusion, reorg, final) |
//! | holdings check, one per network | `holdings.rs` | `deposit::holdings::unexplained` |
//! | pruning of nonces and idempotency records | `pruner.rs` | retention of `auth` and `idempotency` |
//! | reconciliation (scheduled and requested LEDGER / TREASURY runs) | `reconciler.rs` | `reconcile::schedule_due`, `reconcile::claim`, `ledger::reconcile`, `reconcile::treasury::decide`, `reconcile::finish_*` |
//!
//! [`Background`] starts them with one stop signal and stops them together on shutdown. A
//! loop never holds a store transaction across an `.await`; claims on shared work are leases
//! (see `custody_core::ports::store`), so a second instance or a restart picks up whatever a
//! stopped loop left.

pub mod broadcaster;
pub mod holdings;
pub mod nonce_log;
pub mod pruner;
pub mod reconciler;
pub mod scanner;
pub mod sweeper;
pub mod system;
pub mod webhook_client;
pub mod webhooks;

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The running loops: one stop signal for all of them.
pub struct Background {
    stop: watch::Sender<bool>,
    stopped: watch::Receiver<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Default for Background {
    fn default() -> Self {
        Self::new()
    }
}

impl Background {
    pub fn new() -> Self {
        let (stop, stopped) = watch::channel(false);
        Background {
            stop,
            stopped,
            tasks: Vec::new(),
        }
    }

    /// Starts a loop; `run` receives the stop signal and must return soon after it turns true.
    pub fn spawn<F, Fut>(&mut self, name: &'static str, run: F)
    where
        F: FnOnce(watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let task = tokio::spawn(run(self.stopped.clone()));
        self.tasks.push((name, task));
    }

    /// Signals every loop to stop and waits up to `grace` for each; a loop still running then
    /// is aborted (whatever it held is a lease that runs out, or a transaction never begun).
    pub async fn stop(self, grace: Duration) {
        let _ = self.stop.send(true);
        for (name, mut task) in self.tasks {
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                tracing::warn!(
                    loop_name = name,
                    "background loop did not stop in time; aborted"
                );
                task.abort();
            }
        }
    }
}
