//! Where a request's nonce is recorded (decisions §5: a used nonce is refused, across restarts).
//!
//! Every nonce is first claimed in this process's [`NonceSet`], so no two requests of one
//! process can pass with one nonce whichever path each takes. Then:
//! - a mutation that writes under an idempotency key (wallet creation, internal transfers)
//!   writes its nonce in its command's own transaction: one store job per request (with a
//!   store only this process writes, the command appends it to the nonce log:
//!   [`DeferredNonce::record`]);
//! - with a store only this process writes (the embedded SQLite file, which `serve` locks), a
//!   read's (GET) nonce signed around now is accepted in memory and logged in batches under a durable
//!   fence (`custody_core::auth::nonce_set` says why a crash loses no refusal); the loop that
//!   logs them is `custody-runtime/src/nonce_log.rs`;
//! - anything else (every other method, whatever its route), and every nonce with a store
//!   shared by several processes, is written by a store job of its own before the request goes
//!   on. With a shared store nothing is kept in memory: the database decides, and a process
//!   holds no set that only the (absent) log loop would prune.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use custody_core::auth::nonce_set::{NonceFence, NonceSet, PendingNonce, Verdict};
use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::{read, write, Store, WriteTx};
use custody_core::ports::Clock;
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
    /// Claimed in this process's nonce set, which holds every nonce the store keeps (restored
    /// at start) and every one this process claimed since: the set decided, and the nonce is
    /// only appended to the log. Otherwise (a shared store) the store's unique key decides.
    pub logged: bool,
}

impl DeferredNonce {
    /// Writes the nonce in the caller's transaction; `false` when it was used already.
    pub fn record(&self, tx: &mut dyn WriteTx) -> Result<bool, PortError> {
        if self.logged {
            return tx.log_nonce(self.credential, &self.nonce, self.expires_at);
        }
        tx.use_nonce(self.credential, &self.nonce, self.expires_at)
    }
}

/// The nonce set of a process that alone writes `store`, as the store left it: the fence, the
/// latest used nonce, and every nonce kept (used or logged) not expired at `now_s`, read in one
/// job before the process answers anything.
pub async fn restore_set(store: &dyn Store, now_s: i64) -> CoreResult<NonceSet> {
    read(store, move |tx| {
        let set = NonceSet::new(tx.nonce_fence()?, tx.latest_nonce_expiry()?, now_s);
        let now = Timestamp::from_unix_millis(0).plus_seconds(now_s);
        tx.visit_nonces(now, &mut |c, n, e| set.remember(c, n, e))?;
        Ok(set)
    })
    .await
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
    /// Claimed; the command's transaction writes it (with a shared store, it may still find it
    /// used there).
    Deferred(DeferredNonce),
}

pub struct NonceGate {
    /// Only with a store no other process writes: reads' nonces may be accepted in memory.
    set: Option<NonceSet>,
    /// The highest timestamp a waiting request needs the fence raised to.
    wanted: AtomicI64,
    wake: Notify,
    durable: watch::Sender<i64>,
}

impl std::fmt::Debug for NonceGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonceGate")
            .field("fenced", &self.set.is_some())
            .finish_non_exhaustive()
    }
}

impl NonceGate {
    /// Every nonce goes to the store before the request goes on (a store several processes
    /// share: a nonce used on one instance is refused by the others).
    pub fn shared_store() -> Self {
        Self::build(None)
    }

    /// Reads' nonces in memory under the fence; only for a store this process alone writes,
    /// with the log loop running. `set` starts from the store's fence and nonces.
    pub fn fenced(set: NonceSet) -> Self {
        Self::build(Some(set))
    }

    fn build(set: Option<NonceSet>) -> Self {
        let (durable, _) = watch::channel(set.as_ref().map_or(i64::MIN, NonceSet::durable_high));
        NonceGate {
            set,
            wanted: AtomicI64::new(i64::MIN),
            wake: Notify::new(),
            durable,
        }
    }

    /// Checks the nonce of a request signed at `ts`. `read`: a GET, the only requests whose
    /// nonce may be accepted in memory. `in_command`: the route's command writes the nonce
    /// itself (answered [`NonceCheck::Deferred`]).
    pub async fn check(
        &self,
        store: &dyn Store,
        signed: SignedNonce<'_>,
        clock: &dyn Clock,
        read: bool,
        in_command: bool,
    ) -> CoreResult<NonceCheck> {
        let SignedNonce {
            credential,
            nonce,
            ts,
            expires_at,
        } = signed;
        let Some(set) = &self.set else {
            // A shared store: the database alone decides (its unique key refuses the second use
            // on any instance); nothing is remembered here.
            return if in_command {
                Ok(NonceCheck::Deferred(DeferredNonce {
                    credential,
                    nonce: nonce.to_owned(),
                    expires_at,
                    logged: false,
                }))
            } else {
                Self::write_now(store, credential, nonce, expires_at).await
            };
        };
        let mut waited = false;
        loop {
            // Read on every pass: after a wait for the fence the time read before is stale, and
            // the fast path must be judged against the band the flush just made durable.
            let now_s = clock.now().unix_seconds();
            let verdict = set.check(
                credential,
                nonce,
                ts,
                expires_at,
                now_s,
                in_command || !read,
            );
            return match verdict {
                Verdict::Accepted => Ok(NonceCheck::Fresh),
                Verdict::Replay => Ok(NonceCheck::Replay),
                Verdict::Store if in_command => Ok(NonceCheck::Deferred(DeferredNonce {
                    credential,
                    nonce: nonce.to_owned(),
                    expires_at,
                    logged: true,
                })),
                Verdict::Store => Self::write_now(store, credential, nonce, expires_at).await,
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

    async fn write_now(
        store: &dyn Store,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> CoreResult<NonceCheck> {
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

    /// Records, in a store job of its own, a deferred nonce its command did not write (the
    /// request stopped before its command ran).
    pub async fn record_deferred(&self, store: &dyn Store, d: DeferredNonce) -> CoreResult<bool> {
        write(store, move |tx| Ok(d.record(tx)?)).await
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
        self.set.is_some()
    }

    /// How many nonces this process holds in memory (none with a shared store).
    pub fn remembered(&self) -> usize {
        self.set.as_ref().map_or(0, NonceSet::len)
    }

    /// Waits until a request needs the fence raised, or `interval` passed.
    pub async fn wait_for_work(&self, interval: Duration) {
        let _ = tokio::time::timeout(interval, self.wake.notified()).await;
    }

    /// Whether a flush has anything to do: nonces to log, or a request waiting for the fence.
    pub fn has_work(&self) -> bool {
        self.set.as_ref().is_some_and(|set| {
            set.has_pending() || self.wanted.load(Ordering::SeqCst) > set.durable_high()
        })
    }

    /// The nonces and the fence of the next flush. With traffic the fence covers the current
    /// second, so requests signed now do not wait. `last`: the final flush of a clean stop,
    /// after which every nonce goes to the store (requests may still be served after the
    /// drain's timeout), so the clean mark it writes covers everything accepted in memory.
    pub fn take(&self, now_s: i64, last: bool) -> (Vec<PendingNonce>, NonceFence) {
        let wanted = self.wanted.load(Ordering::SeqCst).max(now_s);
        match &self.set {
            Some(set) => set.take_pending(wanted, now_s, last),
            None => (
                Vec::new(),
                NonceFence {
                    low_s: now_s,
                    high_s: now_s,
                    clean: true,
                },
            ),
        }
    }

    /// The flush committed.
    pub fn committed(&self, fence: NonceFence) {
        if let Some(set) = &self.set {
            set.made_durable(fence);
            self.durable.send_replace(set.durable_high());
        }
    }

    /// The flush failed: its nonces wait for the next one.
    pub fn failed(&self, pending: Vec<PendingNonce>) {
        if let Some(set) = &self.set {
            set.restore_pending(pending);
        }
    }

    pub fn prune(&self, now_s: i64) {
        if let Some(set) = &self.set {
            set.prune(now_s);
        }
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

    struct At(i64);

    impl Clock for At {
        fn now(&self) -> Timestamp {
            Timestamp::from_unix_millis(0).plus_seconds(self.0)
        }
    }

    fn sqlite() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("db"), StoreOptions::default()).unwrap());
        (dir, store)
    }

    #[tokio::test]
    async fn a_shared_store_writes_every_nonce_so_another_instance_refuses_it() {
        let (_dir, store) = sqlite();
        let (one, other) = (NonceGate::shared_store(), NonceGate::shared_store());
        let clock = At(NOW_S);
        let s = store.as_ref();
        let read_nonce = signed("read-nonce-00000001");
        assert!(matches!(
            one.check(s, read_nonce, &clock, true, false).await.unwrap(),
            NonceCheck::Fresh
        ));
        let kept = read(s, |tx| Ok(tx.latest_nonce_expiry()?)).await.unwrap();
        assert_eq!(
            kept,
            Some(read_nonce.expires_at),
            "written before the answer"
        );
        assert!(matches!(
            other
                .check(s, read_nonce, &clock, true, false)
                .await
                .unwrap(),
            NonceCheck::Replay
        ));
        assert!(matches!(
            one.check(s, read_nonce, &clock, true, false).await.unwrap(),
            NonceCheck::Replay
        ));

        // A mutation's nonce is left to its command, claimed; the other instance's command
        // finds it once the first one's committed.
        let command_nonce = signed("command-nonce-0001");
        let NonceCheck::Deferred(d) = one
            .check(s, command_nonce, &clock, false, true)
            .await
            .unwrap()
        else {
            panic!("deferred to the command");
        };
        assert!(one.record_deferred(s, d.clone()).await.unwrap());
        assert!(matches!(
            one.check(s, command_nonce, &clock, true, false)
                .await
                .unwrap(),
            NonceCheck::Replay
        ));
        let NonceCheck::Deferred(again) = other
            .check(s, command_nonce, &clock, false, true)
            .await
            .unwrap()
        else {
            panic!("the other instance defers it too");
        };
        assert!(!other.record_deferred(s, again).await.unwrap(), "used");
        assert!(!one.is_fenced() && !other.has_work());
        // No log loop prunes a shared gate: it must hold nothing.
        assert_eq!((one.remembered(), other.remembered()), (0, 0));
    }

    /// Only a GET may be accepted in memory: any other request (here a POST whose command does
    /// not write its nonce) has its nonce in the store before it runs, so a crash right after
    /// cannot let its replay through.
    #[tokio::test]
    async fn only_reads_take_the_in_memory_path() {
        let (_dir, store) = sqlite();
        let s = store.as_ref();
        let clock = At(NOW_S);
        let gate = NonceGate::fenced(NonceSet::new(None, None, NOW_S - 10));
        let (pending, fence) = gate.take(NOW_S, false);
        assert!(pending.is_empty());
        gate.committed(fence);

        let post = signed("post-nonce-0000001");
        assert!(matches!(
            gate.check(s, post, &clock, false, false).await.unwrap(),
            NonceCheck::Fresh
        ));
        assert_eq!(
            read(s, |tx| Ok(tx.latest_nonce_expiry()?)).await.unwrap(),
            Some(post.expires_at),
            "a POST's nonce is durable before it runs"
        );
        let get = signed("get-nonce-00000001");
        assert!(matches!(
            gate.check(s, get, &clock, true, false).await.unwrap(),
            NonceCheck::Fresh
        ));
        assert!(gate.has_work(), "the read's nonce waits for the log");

        // kill -9 now: the next process refuses the POST's replay from the store, and the
        // read's from the durable band.
        let after = NonceGate::fenced(NonceSet::new(
            Some(fence),
            read(s, |tx| Ok(tx.latest_nonce_expiry()?)).await.unwrap(),
            NOW_S + 1,
        ));
        let later = At(NOW_S + 1);
        assert!(matches!(
            after.check(s, post, &later, false, false).await.unwrap(),
            NonceCheck::Replay
        ));
        assert!(matches!(
            after.check(s, get, &later, true, false).await.unwrap(),
            NonceCheck::Replay
        ));
    }

    /// The nonce log's round trip: what one process accepted in memory (a read), appended with
    /// its command (a mutation) or wrote through the store's unique key (a lagging read) is
    /// refused by the next process on every path after a stop that was not clean, even when
    /// sent again with a new timestamp (a reused nonce, not only a replayed request).
    #[tokio::test]
    async fn a_new_process_refuses_every_nonce_the_last_one_kept() {
        let (_dir, store) = sqlite();
        let s = store.as_ref();
        let clock = At(NOW_S);
        let first = NonceGate::fenced(restore_set(s, NOW_S - 10).await.unwrap());
        let (_, fence) = first.take(NOW_S, false);
        first.committed(fence);

        let get = signed("logged-read-000001");
        assert!(matches!(
            first.check(s, get, &clock, true, false).await.unwrap(),
            NonceCheck::Fresh
        ));
        let (pending, fence) = first.take(NOW_S, false);
        assert_eq!(pending.len(), 1);
        write(s, move |tx| {
            for n in &pending {
                tx.log_nonce(n.credential, &n.nonce, n.expires_at)?;
            }
            Ok(tx.put_nonce_fence(&fence)?)
        })
        .await
        .unwrap();
        first.committed(fence);

        let command = signed("logged-command-001");
        let NonceCheck::Deferred(d) = first.check(s, command, &clock, false, true).await.unwrap()
        else {
            panic!("deferred to the command");
        };
        assert!(d.logged, "a fenced gate logs its commands' nonces");
        assert!(first.record_deferred(s, d).await.unwrap());

        let lagging = SignedNonce {
            ts: NOW_S - 60,
            expires_at: Timestamp::from_unix_millis(0).plus_seconds(NOW_S - 60 + 301),
            ..signed("lagging-read-00001")
        };
        assert!(matches!(
            first.check(s, lagging, &clock, true, false).await.unwrap(),
            NonceCheck::Fresh
        ));
        assert_eq!(
            read(s, |tx| Ok(tx.latest_nonce_expiry()?)).await.unwrap(),
            Some(lagging.expires_at),
            "a lagging read goes through the unique key; the logged ones (a minute later to \
             expire) do not"
        );

        // kill -9: no clean flush. Two seconds on, past the fence's band.
        let later = At(NOW_S + 2);
        let restored = restore_set(s, NOW_S + 2).await.unwrap();
        assert_eq!(restored.len(), 3, "logged and used nonces alike");
        let second = NonceGate::fenced(restored);
        let (_, fence) = second.take(NOW_S + 2, false);
        second.committed(fence);
        for n in [get, command, lagging] {
            for (read_path, in_command) in [(true, false), (false, true), (false, false)] {
                let reused = SignedNonce { ts: NOW_S + 2, ..n };
                assert!(
                    matches!(
                        second
                            .check(s, reused, &later, read_path, in_command)
                            .await
                            .unwrap(),
                        NonceCheck::Replay
                    ),
                    "{} reused (read {read_path}, command {in_command})",
                    n.nonce
                );
            }
        }
        let other_credential = SignedNonce {
            credential: Uuid::from_u128(8),
            ts: NOW_S + 2,
            ..get
        };
        assert!(matches!(
            second
                .check(s, other_credential, &later, true, false)
                .await
                .unwrap(),
            NonceCheck::Fresh
        ));
    }
}
