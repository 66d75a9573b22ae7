//! Forgets what has outlived its retention: used nonces (a minute past the signature window)
//! and idempotency records (24 h). Idempotent: two instances pruning the same rows is harmless.

use std::sync::Arc;
use std::time::Duration;

use custody_core::ports::store::write;
use custody_core::ports::{Clock, Store};
use tokio::sync::watch;

pub struct Pruner {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub interval: Duration,
}

impl Pruner {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            let now = self.clock.now();
            let pruned = write(self.store.as_ref(), move |tx| {
                Ok((tx.prune_nonces(now)?, tx.prune_idempotency(now)?))
            })
            .await;
            match pruned {
                Ok((n, i)) if n + i > 0 => tracing::debug!(nonces = n, idempotency = i, "pruned"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "pruning failed"),
            }
        }
    }
}
