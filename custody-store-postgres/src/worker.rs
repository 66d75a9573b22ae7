//! The worker threads. Each owns one connection and takes jobs from a queue shared with the
//! other workers of its pool; a job runs synchronously on the thread, inside one transaction,
//! so no transaction is held across an `.await`.
//!
//! A write job runs in a SERIALIZABLE transaction. When PostgreSQL refuses it because it lost a
//! conflict with a concurrent transaction (40001) or a deadlock (40P01), whether on a statement
//! or at the commit, the transaction is rolled back and the job runs again from the start, on a
//! fresh snapshot (jobs are `FnMut` and have no effect but their writes). The answer is sent
//! after the commit, so `Ok` means durable.
//!
//! A connection lost during `COMMIT` leaves the client not knowing whether the server committed;
//! the worker then asks the server ([`crate::commit_outcome`]) by the transaction id it took at
//! `BEGIN`, so that `Ok` still means durable and `Err` still means it did not happen.

use std::any::Any;
use std::hash::{BuildHasher, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::{ReadJob, WriteJob};
use tokio::sync::{mpsc, oneshot};

use crate::commit_outcome::{self, Outcome};
use crate::sql::Conn;
use custody_store_sql::{db_err, Db, SqlTx};

pub(crate) type Reply = oneshot::Sender<CoreResult<Box<dyn Any + Send>>>;

/// Statements run on a connection outside any job's transaction, each committing on its own
/// (the rate counter's atomic upserts).
pub(crate) type DirectJob = Box<dyn FnOnce(&Conn) -> CoreResult<Box<dyn Any + Send>> + Send>;

pub(crate) enum Task {
    Write(WriteJob, Reply),
    Read(ReadJob, Reply),
    Direct(DirectJob, Reply),
}

pub(crate) type Queue = Arc<Mutex<mpsc::Receiver<Task>>>;

/// What a worker needs to (re)connect and how hard it retries.
#[derive(Clone)]
pub(crate) struct Settings {
    pub config: postgres::Config,
    pub conflict_retries_max: u32,
}

pub(crate) fn run(mut conn: Option<Conn>, queue: Queue, settings: Settings) {
    loop {
        let task = {
            let mut rx = queue.lock().unwrap_or_else(|p| p.into_inner());
            rx.blocking_recv()
        };
        let Some(task) = task else { break };
        if conn.as_ref().is_none_or(Conn::is_closed) {
            conn = match settings.config.connect(postgres::NoTls) {
                Ok(client) => Some(Conn::new(client)),
                Err(e) => {
                    let err = CoreError::Port(PortError::transient(
                        "store",
                        format!("cannot connect to PostgreSQL: {e}"),
                    ));
                    match task {
                        Task::Write(_, reply) | Task::Read(_, reply) | Task::Direct(_, reply) => {
                            let _ = reply.send(Err(err));
                        }
                    }
                    continue;
                }
            };
        }
        let Some(c) = conn.as_ref() else { continue };
        match task {
            Task::Write(mut job, reply) => {
                let _ = reply.send(write(c, &mut job, &settings));
            }
            Task::Read(mut job, reply) => {
                let _ = reply.send(read(c, &mut job));
            }
            Task::Direct(job, reply) => {
                let result = catch_unwind(AssertUnwindSafe(|| job(c))).unwrap_or_else(|_| {
                    Err(CoreError::Invariant("a store statement panicked".into()))
                });
                c.take_conflict();
                let _ = reply.send(result);
            }
        }
    }
    tracing::debug!("store worker stopped: queue closed");
}

enum Attempt {
    Done(CoreResult<Box<dyn Any + Send>>),
    Conflict,
}

fn port(e: crate::sql::Error) -> CoreError {
    CoreError::Port(db_err(e.into()))
}

fn write(conn: &Conn, job: &mut WriteJob, settings: &Settings) -> CoreResult<Box<dyn Any + Send>> {
    let retries_max = settings.conflict_retries_max;
    let mut attempt = 0u32;
    loop {
        match write_once(conn, job, &settings.config) {
            Attempt::Done(result) => return result,
            Attempt::Conflict if attempt < retries_max => {
                attempt += 1;
                std::thread::sleep(backoff(attempt));
            }
            Attempt::Conflict => {
                tracing::warn!(attempts = attempt + 1, "a store job kept losing conflicts");
                return Err(CoreError::Port(PortError::transient(
                    "store",
                    "the transaction kept losing conflicts with concurrent ones; retry",
                )));
            }
        }
    }
}

/// Up to 2^attempt ms (at most 64 ms), at random, so that jobs that conflicted do not meet
/// again in step.
fn backoff(attempt: u32) -> Duration {
    let ceiling = 1u64 << attempt.min(6);
    let noise = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    Duration::from_micros(noise % (ceiling * 1000))
}

fn write_once(conn: &Conn, job: &mut WriteJob, config: &postgres::Config) -> Attempt {
    conn.take_conflict();
    let xid = match conn.begin_with_xid("BEGIN ISOLATION LEVEL SERIALIZABLE") {
        Ok(xid) => xid,
        Err(e) => return Attempt::Done(Err(port(e))),
    };
    let (result, left_open) = {
        let mut tx = SqlTx::new(Db::new(conn));
        let result = catch_unwind(AssertUnwindSafe(|| job(&mut tx)))
            .unwrap_or_else(|_| Err(CoreError::Invariant("a store job panicked".into())));
        (result, tx.open_savepoints())
    };
    let result = match result {
        Ok(_) if left_open > 0 => Err(CoreError::Invariant(format!(
            "a store job left {left_open} savepoints open"
        ))),
        other => other,
    };
    if conn.take_conflict() {
        // Whatever the job made of the error, its reads are stale: run it again.
        let _ = conn.execute_batch("ROLLBACK");
        return Attempt::Conflict;
    }
    if result.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
        return Attempt::Done(result);
    }
    #[cfg(not(feature = "test-utils"))]
    let committed = conn.execute_batch("COMMIT");
    #[cfg(feature = "test-utils")]
    let committed =
        crate::testing::commit_fault::commit(conn, config, || conn.execute_batch("COMMIT"));
    match committed {
        Ok(()) => Attempt::Done(result),
        Err(e) if e.is_conflict() => {
            conn.take_conflict();
            Attempt::Conflict
        }
        Err(e) if e.is_connection() => Attempt::Done(after_lost_commit(config, xid, &e, result)),
        Err(e) => {
            tracing::error!(error = %e, "store commit failed; the job is rolled back");
            let _ = conn.execute_batch("ROLLBACK");
            Attempt::Done(Err(CoreError::Port(PortError::transient(
                "store",
                format!("commit failed: {e}"),
            ))))
        }
    }
}

/// The connection broke during `COMMIT`: the server alone knows whether it committed.
fn after_lost_commit(
    config: &postgres::Config,
    xid: i64,
    error: &crate::sql::Error,
    result: CoreResult<Box<dyn Any + Send>>,
) -> CoreResult<Box<dyn Any + Send>> {
    tracing::warn!(xid, error = %error, "connection lost during COMMIT; asking the server whether it committed");
    match commit_outcome::resolve(config, xid, commit_outcome::RESOLVE_FOR) {
        Outcome::Committed => {
            tracing::info!(
                xid,
                "the transaction committed before the connection was lost"
            );
            result
        }
        Outcome::Aborted => Err(CoreError::Port(PortError::transient(
            "store",
            format!("commit failed ({error}); the server rolled the transaction back"),
        ))),
        Outcome::Unknown(why) => {
            tracing::error!(xid, why = %why, "the outcome of a COMMIT is unknown");
            Err(CoreError::Port(PortError::permanent(
                "store",
                format!(
                    "the outcome of the commit is unknown ({why}); PostgreSQL transaction {xid} \
                     may have committed: check txid_status({xid}) before doing it again"
                ),
            )))
        }
    }
}

fn read(conn: &Conn, job: &mut ReadJob) -> CoreResult<Box<dyn Any + Send>> {
    conn.execute_batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .map_err(port)?;
    let mut tx = SqlTx::new(Db::new(conn));
    let result = catch_unwind(AssertUnwindSafe(|| job(&mut tx)))
        .unwrap_or_else(|_| Err(CoreError::Invariant("a store read panicked".into())));
    let _ = conn.execute_batch("ROLLBACK");
    conn.take_conflict();
    result
}
