//! Just enough of an executor to drive the core's futures in a test without a runtime crate:
//! the memory store's futures never wait, and the suites need no timers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

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
/// [`MemoryStore`](crate::MemoryStore) (whose futures never wait) and for futures woken from
/// other threads; not for futures that need a runtime's reactor or timers.
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
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn block_on_drives_futures_woken_from_other_threads() {
        let flag = Arc::new(AtomicBool::new(false));
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
}
