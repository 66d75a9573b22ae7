//! The nonce log: writes the nonces that `custody_http::nonces::NonceGate` accepted in memory
//! (reads, with the embedded store) to the store in batches, each batch with the fence that
//! covers what is accepted until the next one (`custody_core::auth::nonce_set`). A request
//! signed after the durable fence wakes it at once; otherwise it flushes every
//! [`FLUSH_EVERY`] while there is traffic. On stop it logs what is left and marks the fence
//! clean, so the next start refuses nothing.

use std::sync::Arc;
use std::time::Duration;

use custody_core::auth::nonce_set::NonceFence;
use custody_core::ports::store::write;
use custody_core::ports::{Clock, Store};
use custody_http::nonces::NonceGate;
use tokio::sync::watch;

/// Longest a read's nonce waits in memory before it is logged.
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);
/// How often expired nonces are forgotten from memory.
const PRUNE_EVERY: Duration = Duration::from_secs(1);

pub struct NonceLog {
    pub gate: Arc<NonceGate>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
}

impl NonceLog {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut last_prune = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = self.gate.wait_for_work(FLUSH_EVERY) => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                break;
            }
            if self.gate.has_work() {
                self.flush(false).await;
            }
            if last_prune.elapsed() >= PRUNE_EVERY {
                self.gate.prune(self.clock.now().unix_seconds());
                last_prune = tokio::time::Instant::now();
            }
        }
        // The server has drained before the loops stop: nothing is accepted after this flush.
        if !self.flush(true).await {
            tracing::error!("the last nonce log flush failed: the next start refuses requests signed around now");
        }
    }

    /// Writes the pending nonces and the fence in one transaction; `true` once committed.
    async fn flush(&self, clean: bool) -> bool {
        let now_s = self.clock.now().unix_seconds();
        let (pending, fence) = self.gate.take(now_s, clean);
        let fence = NonceFence { clean, ..fence };
        let batch = pending.clone();
        let written = write(self.store.as_ref(), move |tx| {
            // Appended unchecked: the set claimed them (a log that failed after its commit
            // appends them twice, which the next start reads as one).
            tx.log_nonces(&batch)?;
            tx.put_nonce_fence(&fence)?;
            Ok(())
        })
        .await;
        match written {
            Ok(()) => {
                self.gate.committed(fence);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, nonces = pending.len(), "nonce log flush failed; retried");
                self.gate.failed(pending);
                false
            }
        }
    }
}
