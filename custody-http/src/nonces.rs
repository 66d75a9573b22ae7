//! Where a request's nonce is recorded (decisions §5: a used nonce is refused, across restarts).
//!
//! Every nonce is first claimed in this process's [`NonceSet`], so no two requests of one
//! process can pass with one nonce whichever path each takes. Then:
//! - a mutation that writes under an idempotency key (wallet creation, internal transfers)
//!   writes its nonce in its command's own transaction: one store job per request;
//! - with a store only this process writes (the embedded SQLite file, which `serve` locks), a
//!   read's nonce signed around now is accepted in memory and logged in batches under a durable
//!   fence (`custody_core::auth::nonce_set` says why a crash loses no refusal); the loop that
//!   logs them is `custody-cli/src/runtime/nonce_log.rs`;
//! - anything else, and every nonce with a store shared by several processes, is written by a
//!   store job of its own before the request goes on.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use custody_core::auth::nonce_set::{NonceFence, NonceSet, PendingNonce, Verdict};
use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::{write, Store};
use custody_core::time::Timestamp;
use tokio::sync::{watch, Notify};
use uuid::Uuid;

/// How long a request waits for the fence to be raised before it is answered 503.
const FENCE_WAIT: Duration = Duration::from_secs(5);

/// A nonce claimed in memory that the request's command writes in its own transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredNonce {
    pub credential: Uuid,
    pub nonce: String,
    pub expires_at: Timestamp,
}

/// A request's nonce as signed.
#[derive(Debug, Clone, Copy)]
pub struct SignedNonce<'a> {
    pub credential: Uuid,
    pub nonce: &'a str,
    /// The request's timestamp (unix s).
    pub ts: i64,
    pub expires_at: Timestamp,
}

/// The outcome of a nonce check.
#[derive(Debug)]
pub enum NonceCheck {
    Fresh,
    Replay,
    /// Claimed; the command's transaction writes it (and may still find it used).
    Deferred(DeferredNonce),
}

pub struct NonceGate {
    set: NonceSet,
    /// Reads' nonces may be accepted in memory (a store no other process writes).
    fast: bool,
    /// The highest timestamp a waiting request needs the fence raised to.
    wanted: AtomicI64,
    wake: Notify,
    durable: watch::Sender<i64>,
}

impl std::fmt::Debug for NonceGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonceGate")
            .field("fast", &self.fast)
            .finish_non_exhaustive()
    }
}

impl NonceGate {
    /// Every nonce goes to the store before the request goes on (a store several processes
    /// share: a nonce used on one instance is refused by the others).
    pub fn shared_store(now_s: i64) -> Self {
        Self::build(NonceSet::new(None, None, now_s), false)
    }

    /// Reads' nonces in memory under the fence; only for a store this process alone writes,
    /// with the log loop running. `set` starts from the store's fence and nonces.
    pub fn fenced(set: NonceSet) -> Self {
        Self::build(set, true)
    }

    fn build(set: NonceSet, fast: bool) -> Self {
        let (durable, _) = watch::channel(set.durable_high());
        NonceGate {
            set,
            fast,
            wanted: AtomicI64::new(i64::MIN),
            wake: Notify::new(),
            durable,
        }
    }

    /// Checks the nonce of a request signed at `ts`. `in_command`: the route's command writes
    /// the nonce itself (answered [`NonceCheck::Deferred`]).
    pub async fn check(
        &self,
        store: &dyn Store,
        signed: SignedNonce<'_>,
        now: Timestamp,
        in_command: bool,
    ) -> CoreResult<NonceCheck> {
        let SignedNonce {
            credential,
            nonce,
            ts,
            expires_at,
        } = signed;
        let now_s = now.unix_seconds();
        let mut waited = false;
        loop {
            // The shared store never takes the fast path: the check only claims in memory.
            let verdict = self.set.check(
                credential,
                nonce,
                ts,
                expires_at,
                now_s,
                in_command || !self.fast,
            );
            return match verdict {
                Verdict::Accepted => Ok(NonceCheck::Fresh),
                Verdict::Replay => Ok(NonceCheck::Replay),
                Verdict::Store if in_command => Ok(NonceCheck::Deferred(DeferredNonce {
                    credential,
                    nonce: nonce.to_owned(),
                    expires_at,
                })),
                Verdict::Store => {
                    let owned = nonce.to_owned();
                    let fresh = write(store, move |tx| {
                        Ok(tx.use_nonce(credential, &owned, expires_at)?)
                    })
                    .await?;
                    Ok(if fresh {
                        NonceCheck::Fresh
                    } else {
                        NonceCheck::Replay
                    })
                }
                Verdict::RaiseFence(_) if waited => Err(CoreError::Port(PortError::transient(
                    "store",
                    "the nonce log did not advance in time",
                ))),
                Verdict::RaiseFence(high) => {
                    self.raise_to(high).await?;
                    waited = true;
                    continue;
                }
            };
        }
    }

    /// Records, in a store job of its own, a deferred nonce its command did not write (the
    /// request stopped before its command ran).
    pub async fn record_deferred(&self, store: &dyn Store, d: DeferredNonce) -> CoreResult<bool> {
        write(store, move |tx| {
            Ok(tx.use_nonce(d.credential, &d.nonce, d.expires_at)?)
        })
        .await
    }

    async fn raise_to(&self, high: i64) -> CoreResult<()> {
        self.wanted.fetch_max(high, Ordering::SeqCst);
        let mut durable = self.durable.subscribe();
        self.wake.notify_one();
        let reached = tokio::time::timeout(FENCE_WAIT, durable.wait_for(|&d| d >= high)).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(CoreError::Port(PortError::transient(
                "store",
                "the nonce log did not advance in time",
            ))),
        }
    }

    // ---- the log loop's side ----

    /// Whether this gate logs reads' nonces (the loop runs only then).
    pub fn is_fenced(&self) -> bool {
        self.fast
    }

    /// Waits until a request needs the fence raised, or `interval` passed.
    pub async fn wait_for_work(&self, interval: Duration) {
        let _ = tokio::time::timeout(interval, self.wake.notified()).await;
    }

    /// Whether a flush has anything to do: nonces to log, or a request waiting for the fence.
    pub fn has_work(&self) -> bool {
        self.set.has_pending() || self.wanted.load(Ordering::SeqCst) > self.set.durable_high()
    }

    /// The nonces and the fence of the next flush. With traffic the fence covers the current
    /// second, so requests signed now do not wait.
    pub fn take(&self, now_s: i64) -> (Vec<PendingNonce>, NonceFence) {
        let wanted = self.wanted.load(Ordering::SeqCst).max(now_s);
        self.set.take_pending(wanted, now_s)
    }

    /// The flush committed.
    pub fn committed(&self, fence: NonceFence) {
        self.set.made_durable(fence);
        self.durable.send_replace(self.set.durable_high());
    }

    /// The flush failed: its nonces wait for the next one.
    pub fn failed(&self, pending: Vec<PendingNonce>) {
        self.set.restore_pending(pending);
    }

    pub fn prune(&self, now_s: i64) {
        self.set.prune(now_s);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use custody_core::ports::store::read;
    use custody_store_sqlite::{SqliteStore, StoreOptions};

    use super::*;

    const NOW_S: i64 = 1_800_000_000;

    fn signed(nonce: &str) -> SignedNonce<'_> {
        SignedNonce {
            credential: Uuid::from_u128(7),
            nonce,
            ts: NOW_S,
            expires_at: Timestamp::from_unix_millis(0).plus_seconds(NOW_S + 301),
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_millis(0).plus_seconds(NOW_S)
    }

    #[tokio::test]
    async fn a_shared_store_writes_every_nonce_so_another_instance_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("db"), StoreOptions::default()).unwrap());
        let (one, other) = (
            NonceGate::shared_store(NOW_S),
            NonceGate::shared_store(NOW_S),
        );
        let s = store.as_ref();
        let read_nonce = signed("read-nonce-00000001");
        assert!(matches!(
            one.check(s, read_nonce, now(), false).await.unwrap(),
            NonceCheck::Fresh
        ));
        let kept = read(s, |tx| Ok(tx.latest_nonce_expiry()?)).await.unwrap();
        assert_eq!(
            kept,
            Some(read_nonce.expires_at),
            "written before the answer"
        );
        assert!(matches!(
            other.check(s, read_nonce, now(), false).await.unwrap(),
            NonceCheck::Replay
        ));
        assert!(matches!(
            one.check(s, read_nonce, now(), false).await.unwrap(),
            NonceCheck::Replay
        ));

        // A mutation's nonce is left to its command, claimed; the other instance's command
        // finds it once the first one's committed.
        let command_nonce = signed("command-nonce-0001");
        let NonceCheck::Deferred(d) = one.check(s, command_nonce, now(), true).await.unwrap()
        else {
            panic!("deferred to the command");
        };
        assert!(matches!(
            one.check(s, command_nonce, now(), false).await.unwrap(),
            NonceCheck::Replay
        ));
        assert!(one.record_deferred(s, d.clone()).await.unwrap());
        let NonceCheck::Deferred(again) = other.check(s, command_nonce, now(), true).await.unwrap()
        else {
            panic!("the other instance defers it too");
        };
        assert!(!other.record_deferred(s, again).await.unwrap(), "used");
        assert!(!one.is_fenced() && !other.has_work());
    }
}
