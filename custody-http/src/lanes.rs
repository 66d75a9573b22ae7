//! Connection lanes: threads that each run a one-thread runtime and keep every connection handed
//! to them for its whole life.
//!
//! Why not the service's multi-thread runtime: profiled on two cores, a signed GET cost about
//! a fifth more CPU there than on one thread (work stealing moved a connection's task between
//! workers, parked workers were woken for each burst, the workers contended for the same
//! locks), and the store's writer thread, which every mutation waits on, competed with both
//! workers for the cores. A lane runs a connection where it was accepted, and the default count
//! leaves one core to the writer and the background loops (`docs/benchmarks.md`).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// How many lanes `configured` (0: automatic) gives on a machine of `cores` cores: one fewer
/// than the cores, at least one.
pub fn lane_count(configured: usize, cores: usize) -> usize {
    if configured > 0 {
        configured
    } else {
        cores.saturating_sub(1).max(1)
    }
}

/// The lanes; connections are handed out in turn.
pub struct Lanes {
    handles: Vec<Handle>,
    threads: Vec<(oneshot::Sender<()>, JoinHandle<()>)>,
    next: AtomicUsize,
}

impl Lanes {
    /// Starts `n` lanes (at least one), named `http-0`, `http-1`, ...
    pub fn start(n: usize) -> std::io::Result<Self> {
        let n = n.max(1);
        let mut handles = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(rt.handle().clone());
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("http-{i}"))
                // Runs the lane's tasks until told to stop, or until the lanes are dropped
                // (the sender goes with them); the runtime and what it still holds are dropped
                // on this thread.
                .spawn(move || {
                    rt.block_on(async {
                        let _ = stopped.await;
                    });
                })?;
            threads.push((stop, thread));
        }
        Ok(Lanes {
            handles,
            threads,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `task` on the next lane.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        drop(self.handles[i].spawn(task));
    }

    /// Stops every lane, dropping the tasks still on it, and waits for their threads.
    pub fn stop(self) {
        for (stop, thread) in self.threads {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    #[test]
    fn one_lane_fewer_than_the_cores_unless_configured() {
        assert_eq!(lane_count(0, 1), 1);
        assert_eq!(lane_count(0, 2), 1);
        assert_eq!(lane_count(0, 16), 15);
        assert_eq!(lane_count(3, 2), 3);
    }

    #[test]
    fn tasks_go_to_each_lane_in_turn_and_stop_joins_the_threads() {
        let lanes = Lanes::start(3).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for _ in 0..6 {
            let (seen, done) = (Arc::clone(&seen), done_tx.clone());
            lanes.spawn(async move {
                // A task of a lane can use the runtime's timers and spawn more tasks there.
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                let name = tokio::spawn(async { std::thread::current().name().map(str::to_owned) })
                    .await
                    .unwrap();
                seen.lock().unwrap().push(name.unwrap());
                done.send(()).unwrap();
            });
        }
        for _ in 0..6 {
            done_rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap();
        }
        let names: Vec<String> = seen.lock().unwrap().clone();
        let distinct: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(
            distinct,
            BTreeSet::from(["http-0", "http-1", "http-2"]),
            "{names:?}"
        );
        for lane in ["http-0", "http-1", "http-2"] {
            assert_eq!(names.iter().filter(|n| *n == lane).count(), 2, "{names:?}");
        }

        // A task still waiting when the lanes stop is dropped, not left running.
        let (dropped_tx, dropped_rx) = std::sync::mpsc::channel::<()>();
        struct Signal(std::sync::mpsc::Sender<()>);
        impl Drop for Signal {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let signal = Signal(dropped_tx);
        lanes.spawn(async move {
            let _signal = signal;
            std::future::pending::<()>().await;
        });
        lanes.stop();
        dropped_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
    }
}
