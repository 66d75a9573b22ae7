//! The single writer. Jobs queue on a bounded channel; the writer thread takes every job that
//! is waiting (up to `batch_max`), runs them one after the other inside one transaction and
//! commits once: durability costs one fsync per batch, not per request (group commit). Each
//! job's answer is sent only after the commit, so `Ok` always means durable.
//!
//! A batch first runs *optimistically*: without a savepoint per job. A savepoint makes SQLite
//! copy every page a job changes that an earlier job of the batch changed already (the right
//! edges of every index, the account rows), which with the savepoint statements themselves was
//! about a tenth of a transfer's CPU; jobs almost always succeed. If every job succeeds, the
//! batch commits as it ran. If any job fails (an `Err`, a panic, a savepoint it leaves open,
//! or a savepoint it must roll back, which this mode cannot do), the whole transaction is rolled
//! back and the batch runs again *safely*, each job under its own savepoint, as if the first
//! attempt had never happened: jobs may run more than once by the store's contract. After a
//! batch had to run again, the next [`SAFE_BATCHES_AFTER_A_FAILURE`] batches run safely at once,
//! so a stream of failing jobs costs one wasted attempt now and then, not one per batch.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::WriteJob;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::backend::{db_err, SqliteDb};
use custody_store_sql::{Db, SqlTx};

pub(crate) type Reply = oneshot::Sender<CoreResult<Box<dyn Any + Send>>>;

pub(crate) struct Job {
    pub work: WriteJob,
    pub reply: Reply,
}

/// Batches run with a savepoint per job after one had to run again.
const SAFE_BATCHES_AFTER_A_FAILURE: u32 = 32;

/// How the writer runs its next batches.
#[derive(Debug, Default)]
pub(crate) struct Mode {
    /// Batches still to run safely before the next optimistic attempt.
    safe_batches_left: u32,
    /// Batches committed as they first ran, and batches that had to run again (tests read them).
    pub(crate) optimistic_commits: u64,
    pub(crate) reruns: u64,
}

pub(crate) fn run(mut conn: Connection, mut rx: mpsc::Receiver<Job>, batch_max: usize) {
    let mut batch: Vec<Job> = Vec::with_capacity(batch_max);
    let mut mode = Mode::default();
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < batch_max {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&mut conn, &mut batch, &mut mode);
    }
    tracing::debug!("store writer stopped: channel closed");
}

/// Runs one statement through the connection's statement cache (no SQL compiled per batch).
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Runs the batch and answers every job of it; `batch` is empty afterwards.
pub(crate) fn run_batch(conn: &mut Connection, batch: &mut Vec<Job>, mode: &mut Mode) {
    if mode.safe_batches_left > 0 {
        mode.safe_batches_left -= 1;
    } else if let Some(answers) = run_optimistically(conn, batch) {
        if answers.iter().all(Result::is_ok) {
            mode.optimistic_commits += 1;
        }
        for (job, answer) in batch.drain(..).zip(answers) {
            let _ = job.reply.send(answer);
        }
        return;
    } else {
        mode.reruns += 1;
        mode.safe_batches_left = SAFE_BATCHES_AFTER_A_FAILURE;
    }
    run_safely(conn, batch);
}

/// The batch without savepoints. `Some`: every job's answer (it committed, or the transaction
/// could not begin or commit or was rolled back by SQLite itself, and every job is answered
/// that error); `None`: a job failed, nothing of the attempt is left, and the batch must run
/// safely.
fn run_optimistically(
    conn: &Connection,
    batch: &mut [Job],
) -> Option<Vec<CoreResult<Box<dyn Any + Send>>>> {
    if let Err(e) = begin(conn) {
        // Another process holds the write lock past the busy timeout: a second attempt now
        // would only wait as long again.
        let err = CoreError::Port(db_err(e));
        return Some(batch.iter().map(|_| Err(err.clone())).collect());
    }
    let mut answers = Vec::with_capacity(batch.len());
    for job in batch.iter_mut() {
        let db = SqliteDb::in_transaction(conn);
        let mut tx = SqlTx::optimistic(Db::new(&db));
        let result = catch_unwind(AssertUnwindSafe(|| (job.work)(&mut tx)));
        let clean = tx.open_savepoints() == 0 && !tx.lost_a_rollback();
        if conn.is_autocommit() {
            // Refused as the safe run refuses it: running it again would only meet the same
            // condition.
            let err = aborted_by_sqlite();
            return Some(batch.iter().map(|_| Err(err.clone())).collect());
        }
        match result {
            Ok(Ok(value)) if clean => answers.push(Ok(value)),
            _ => {
                let _ = exec(conn, "ROLLBACK");
                return None;
            }
        }
    }
    match exec(conn, "COMMIT") {
        Ok(()) => Some(answers),
        Err(e) => {
            let err = commit_failed(conn, e, answers.len());
            Some(answers.iter().map(|_| Err(err.clone())).collect())
        }
    }
}

/// `BEGIN IMMEDIATE`, after rolling back a transaction that a failed `ROLLBACK` left open
/// (BEGIN would refuse, and so would every batch after it).
fn begin(conn: &Connection) -> rusqlite::Result<()> {
    if !conn.is_autocommit() {
        tracing::error!("the store writer found a transaction left open; rolling it back");
        let _ = conn.execute_batch("ROLLBACK");
    }
    exec(conn, "BEGIN IMMEDIATE")
}

/// The answer to every job of a batch whose transaction SQLite rolled back on its own (an I/O
/// error, a full disk): the connection is back in autocommit mode.
fn aborted_by_sqlite() -> CoreError {
    tracing::error!("the store transaction was aborted by SQLite; the batch is refused");
    CoreError::Port(PortError::transient(
        "store",
        "the transaction was aborted; retry",
    ))
}

fn commit_failed(conn: &Connection, e: rusqlite::Error, jobs: usize) -> CoreError {
    tracing::error!(error = %e, jobs, "store commit failed; batch rolled back");
    let _ = conn.execute_batch("ROLLBACK");
    CoreError::Port(PortError::transient("store", format!("commit failed: {e}")))
}

/// The batch with a savepoint per job: a failing job is rolled back alone.
fn run_safely(conn: &mut Connection, batch: &mut Vec<Job>) {
    if let Err(e) = begin(conn) {
        let err = db_err(e);
        for job in batch.drain(..) {
            let _ = job.reply.send(Err(CoreError::Port(err.clone())));
        }
        return;
    }
    let mut answers = Vec::with_capacity(batch.len());
    let mut jobs = batch.drain(..);
    for mut job in jobs.by_ref() {
        let result = run_job(conn, &mut job.work);
        answers.push((job.reply, result));
        if conn.is_autocommit() {
            // Nothing of this batch happened, and what follows must not run outside it.
            let err = aborted_by_sqlite();
            for (reply, _) in answers.drain(..) {
                let _ = reply.send(Err(err.clone()));
            }
            for job in jobs {
                let _ = job.reply.send(Err(err.clone()));
            }
            return;
        }
    }
    drop(jobs);
    match exec(conn, "COMMIT") {
        Ok(()) => {
            for (reply, result) in answers {
                let _ = reply.send(result);
            }
        }
        Err(e) => {
            let err = commit_failed(conn, e, answers.len());
            for (reply, _) in answers {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }
}

fn run_job(conn: &Connection, work: &mut WriteJob) -> CoreResult<Box<dyn Any + Send>> {
    exec(conn, "SAVEPOINT job").map_err(db_err)?;
    let (result, left_open) = {
        let db = SqliteDb::in_transaction(conn);
        let mut tx = SqlTx::new(Db::new(&db));
        let result = catch_unwind(AssertUnwindSafe(|| work(&mut tx)))
            .unwrap_or_else(|_| Err(CoreError::Invariant("a store job panicked".into())));
        (result, tx.open_savepoints())
    };
    let result = match result {
        Ok(_) if left_open > 0 => Err(CoreError::Invariant(format!(
            "a store job left {left_open} savepoints open"
        ))),
        other => other,
    };
    if result.is_err() {
        exec(conn, "ROLLBACK TO job").map_err(db_err)?;
    }
    exec(conn, "RELEASE job").map_err(db_err)?;
    result
}

#[cfg(test)]
mod tests;
