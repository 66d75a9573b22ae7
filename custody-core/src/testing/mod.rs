//! Test support (feature `test-utils`), shared by the core's tests and by every store adapter's:
//!
//! - [`MemoryStore`]: a [`Store`](crate::ports::Store) in memory, with the observable semantics
//!   of the SQLite store (constraints, orderings, transactions, savepoints, read snapshots).
//! - [`conformance`]: one suite per repository trait, run against any store.
//! - Deterministic [`CountingEntropy`] and [`ManualClock`], the test [`MNEMONIC`].
//! - [`block_on`] and [`join_all`]: just enough of an executor to drive the store futures without
//!   a runtime crate (the core depends on none).
//!
//! Nothing here is for production: the memory store keeps everything in one process and
//! forgets it on drop.

pub mod conformance;
mod memory_store;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

pub use memory_store::MemoryStore;

use crate::ports::{Clock, Entropy};
use crate::time::Timestamp;

/// The BIP39 test vector mnemonic (all `abandon` and `about`): test wallets only.
pub const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

/// An HD signer over [`MNEMONIC`].
pub fn test_signer() -> crate::keys::HdSigner {
    let mnemonic = crate::keys::Mnemonic::parse(MNEMONIC).expect("the test mnemonic parses");
    crate::keys::HdSigner::from_seed(&mnemonic.to_seed()).expect("the test seed derives")
}

/// Distinct, repeatable bytes: every `fill` differs from the one before. Enough for ids and
/// nonces in tests; never for keys.
#[derive(Debug)]
pub struct CountingEntropy(AtomicU64);

impl CountingEntropy {
    pub fn new(seed: u64) -> Self {
        CountingEntropy(AtomicU64::new(seed))
    }
}

impl Default for CountingEntropy {
    fn default() -> Self {
        CountingEntropy::new(1)
    }
}

impl Entropy for CountingEntropy {
    fn fill(&self, buf: &mut [u8]) {
        let n = self.0.fetch_add(1, Ordering::Relaxed).to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = n[i % 8] ^ u8::try_from(i % 251).unwrap_or(0);
        }
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(now: Timestamp) -> Self {
        ManualClock(AtomicI64::new(now.unix_millis()))
    }

    pub fn set(&self, now: Timestamp) {
        self.0.store(now.unix_millis(), Ordering::SeqCst);
    }

    pub fn advance_millis(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.0.load(Ordering::SeqCst))
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread, parking it while the future waits. Enough for
/// [`MemoryStore`] (whose futures never wait) and for futures woken from other threads; not for
/// futures that need a runtime's reactor or timers.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Polls every future concurrently until all are done; the answers in the order given. A store
/// that batches concurrent jobs (the SQLite writer's group commit) sees them together.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (f, slot) in pending.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => all = false,
                }
            }
        }
        if all {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    done.into_iter()
        .map(|v| v.expect("every future finished"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_drives_futures_woken_from_other_threads() {
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut spawned = None;
        let answer = block_on(std::future::poll_fn(|cx| {
            if flag.load(Ordering::SeqCst) {
                return Poll::Ready(7);
            }
            if spawned.is_none() {
                let (f, waker) = (Arc::clone(&flag), cx.waker().clone());
                spawned = Some(std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    f.store(true, Ordering::SeqCst);
                    waker.wake();
                }));
            }
            Poll::Pending
        }));
        assert_eq!(answer, 7);
        spawned.unwrap().join().unwrap();
        let joined = block_on(join_all(vec![std::future::ready(1), std::future::ready(2)]));
        assert_eq!(joined, [1, 2]);
    }

    #[test]
    fn counting_entropy_never_repeats_and_the_clock_moves_when_told() {
        let e = CountingEntropy::default();
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        e.fill(&mut a);
        e.fill(&mut b);
        assert_ne!(a, b);
        let c = ManualClock::new(Timestamp::from_unix_millis(5));
        c.advance_millis(10);
        assert_eq!(c.now(), Timestamp::from_unix_millis(15));
        c.set(Timestamp::from_unix_millis(1));
        assert_eq!(c.now(), Timestamp::from_unix_millis(1));
    }
}
