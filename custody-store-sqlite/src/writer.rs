//! The single writer. Jobs queue on a bounded channel; the writer thread takes every job that
//! is waiting (up to `batch_max`), runs each under its own savepoint inside one transaction and
//! commits once: durability costs one fsync per batch, not per request (group commit). Each
//! job's answer is sent only after the commit, so `Ok` always means durable.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::ports::store::WriteJob;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::tx::{db_err, SqliteTx};

pub(crate) type Reply = oneshot::Sender<CoreResult<Box<dyn Any + Send>>>;

pub(crate) struct Job {
    pub work: WriteJob,
    pub reply: Reply,
}

pub(crate) fn run(mut conn: Connection, mut rx: mpsc::Receiver<Job>, batch_max: usize) {
    let mut batch: Vec<Job> = Vec::with_capacity(batch_max);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < batch_max {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&mut conn, &mut batch);
    }
    tracing::debug!("store writer stopped: channel closed");
}

/// Runs one statement through the connection's statement cache (no SQL compiled per batch).
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

fn run_batch(conn: &mut Connection, batch: &mut Vec<Job>) {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        let err = db_err(e);
        for job in batch.drain(..) {
            let _ = job.reply.send(Err(CoreError::Port(err.clone())));
        }
        return;
    }
    let mut answers = Vec::with_capacity(batch.len());
    let mut jobs = batch.drain(..);
    for job in jobs.by_ref() {
        let result = run_job(conn, job.work);
        answers.push((job.reply, result));
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back on its own (I/O error, disk full):
            // nothing of this batch happened, and what follows must not run outside it.
            tracing::error!("the store transaction was aborted by SQLite; the batch is refused");
            let err = PortError::transient("store", "the transaction was aborted; retry");
            for (reply, _) in answers.drain(..) {
                let _ = reply.send(Err(CoreError::Port(err.clone())));
            }
            for job in jobs {
                let _ = job.reply.send(Err(CoreError::Port(err.clone())));
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
            tracing::error!(error = %e, jobs = answers.len(), "store commit failed; batch rolled back");
            let _ = conn.execute_batch("ROLLBACK");
            let err = PortError::transient("store", format!("commit failed: {e}"));
            for (reply, _) in answers {
                let _ = reply.send(Err(CoreError::Port(err.clone())));
            }
        }
    }
}

fn run_job(conn: &Connection, mut work: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
    exec(conn, "SAVEPOINT job").map_err(db_err)?;
    let (result, left_open) = {
        let mut tx = SqliteTx::new(conn);
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
