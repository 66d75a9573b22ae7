//! The writer's two ways of running a batch, driven directly on a real SQLite file.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use custody_core::error::{CoreError, ErrorCode, Refusal};
use custody_core::ports::store::{nested, WriteTx};
use custody_core::time::Timestamp;
use rusqlite::Connection;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{run_batch, Job, Mode, SAFE_BATCHES_AFTER_A_FAILURE};

type Answer = oneshot::Receiver<custody_core::error::CoreResult<Box<dyn std::any::Any + Send>>>;

fn writer_connection(dir: &tempfile::TempDir) -> Connection {
    let mut conn = Connection::open(dir.path().join("custody.db")).unwrap();
    crate::configure(&conn, 5_000).unwrap();
    crate::migrations::migrate(&mut conn).unwrap();
    // As `SqliteStore::open` leaves the writer's connection.
    crate::configure_writer(&conn).unwrap();
    conn
}

fn use_nonce(tx: &mut dyn WriteTx, nonce: &str) -> custody_core::error::CoreResult<bool> {
    Ok(tx.use_nonce(Uuid::nil(), nonce, Timestamp::from_unix_millis(1))?)
}

/// A job that records `nonce` and answers whether it was new, counting its runs in `runs`.
/// Each attempt that ran it and was not kept must have left nothing: a second run of the same
/// job after an attempt that was rolled back finds the nonce new again.
fn nonce_job(nonce: &'static str, runs: &Arc<AtomicU32>, fails: bool) -> (Job, Answer) {
    let runs = Arc::clone(runs);
    let (reply, answer) = oneshot::channel();
    let work = Box::new(move |tx: &mut dyn WriteTx| {
        runs.fetch_add(1, Ordering::SeqCst);
        let fresh = use_nonce(tx, nonce)?;
        if fails {
            return Err(Refusal::new(ErrorCode::InsufficientBalance, "no").into());
        }
        Ok(Box::new(fresh) as Box<dyn std::any::Any + Send>)
    });
    (Job { work, reply }, answer)
}

fn answer_of(mut answer: Answer) -> custody_core::error::CoreResult<bool> {
    answer
        .try_recv()
        .expect("every job is answered when its batch ends")
        .map(|v| *v.downcast::<bool>().unwrap())
}

fn is_new(conn: &mut Connection, mode: &mut Mode, nonce: &'static str) -> bool {
    let runs = Arc::new(AtomicU32::new(0));
    let (job, answer) = nonce_job(nonce, &runs, false);
    let mut batch = vec![job];
    run_batch(conn, &mut batch, mode);
    answer_of(answer).unwrap()
}

#[test]
fn a_batch_whose_jobs_all_succeed_commits_as_it_first_ran() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    let mut mode = Mode::default();
    let runs = Arc::new(AtomicU32::new(0));
    let (a, a_answer) = nonce_job("clean-nonce-0001", &runs, false);
    let (b, b_answer) = nonce_job("clean-nonce-0002", &runs, false);
    let mut batch = vec![a, b];
    run_batch(&mut conn, &mut batch, &mut mode);
    assert!(batch.is_empty());
    assert!(answer_of(a_answer).unwrap());
    assert!(answer_of(b_answer).unwrap());
    assert_eq!(runs.load(Ordering::SeqCst), 2, "each job ran once");
    assert_eq!((mode.optimistic_commits, mode.reruns), (1, 0));
    assert!(
        !is_new(&mut conn, &mut mode, "clean-nonce-0001"),
        "committed"
    );
    assert!(
        !is_new(&mut conn, &mut mode, "clean-nonce-0002"),
        "committed"
    );
}

#[test]
fn a_failing_job_makes_the_batch_run_again_with_each_job_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    let mut mode = Mode::default();
    let runs = Arc::new(AtomicU32::new(0));
    let (a, a_answer) = nonce_job("rerun-nonce-0001", &runs, false);
    let (b, b_answer) = nonce_job("rerun-nonce-0002", &runs, true);
    let (c, c_answer) = nonce_job("rerun-nonce-0003", &runs, false);
    let mut batch = vec![a, b, c];
    run_batch(&mut conn, &mut batch, &mut mode);
    // The first attempt ran a and b, then was rolled back; the second ran all three. The
    // nonces of a and c read as new in the second run: nothing of the first was kept.
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert!(answer_of(a_answer).unwrap());
    assert!(matches!(
        answer_of(b_answer),
        Err(CoreError::Refused(r)) if r.code == ErrorCode::InsufficientBalance
    ));
    assert!(answer_of(c_answer).unwrap());
    assert_eq!((mode.optimistic_commits, mode.reruns), (0, 1));
    assert!(!is_new(&mut conn, &mut mode, "rerun-nonce-0001"));
    assert!(
        is_new(&mut conn, &mut mode, "rerun-nonce-0002"),
        "rolled back alone"
    );
    assert!(!is_new(&mut conn, &mut mode, "rerun-nonce-0003"));
}

#[test]
fn after_a_rerun_batches_run_safely_for_a_while_then_optimistically_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    let mut mode = Mode::default();
    let runs = Arc::new(AtomicU32::new(0));
    let (failing, _) = nonce_job("streak-nonce-0000", &runs, true);
    run_batch(&mut conn, &mut vec![failing], &mut mode);
    assert_eq!(runs.load(Ordering::SeqCst), 2, "run, then run again alone");
    const NONCES: [&str; 3] = [
        "streak-nonce-0001",
        "streak-nonce-0002",
        "streak-nonce-0003",
    ];
    for i in 0..SAFE_BATCHES_AFTER_A_FAILURE {
        let (failing, _) = nonce_job(NONCES[usize::try_from(i % 3).unwrap()], &runs, true);
        let before = runs.load(Ordering::SeqCst);
        run_batch(&mut conn, &mut vec![failing], &mut mode);
        assert_eq!(
            runs.load(Ordering::SeqCst) - before,
            1,
            "safe batch {i}: no optimistic attempt before it"
        );
    }
    assert_eq!((mode.optimistic_commits, mode.reruns), (0, 1));
    assert!(is_new(&mut conn, &mut mode, "streak-nonce-0004"));
    assert_eq!((mode.optimistic_commits, mode.reruns), (1, 1));
}

#[test]
fn a_command_refused_under_its_own_savepoint_is_undone_after_the_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    let mut mode = Mode::default();
    let (reply, answer) = oneshot::channel();
    let work = Box::new(|tx: &mut dyn WriteTx| {
        let refused: custody_core::error::CoreResult<()> = nested(tx, |tx| {
            use_nonce(tx, "nested-nonce-0001")?;
            Err(Refusal::new(ErrorCode::InsufficientBalance, "no").into())
        });
        // What idempotency does with a refusal: the command's writes go, the job records more.
        if !matches!(refused, Err(CoreError::Refused(_))) {
            return refused.map(|()| Box::new(false) as Box<dyn std::any::Any + Send>);
        }
        Ok(Box::new(use_nonce(tx, "nested-nonce-0002")?) as Box<dyn std::any::Any + Send>)
    });
    run_batch(&mut conn, &mut vec![Job { work, reply }], &mut mode);
    assert!(
        answer_of(answer).unwrap(),
        "the job succeeded in the safe run"
    );
    assert_eq!((mode.optimistic_commits, mode.reruns), (0, 1));
    assert!(is_new(&mut conn, &mut mode, "nested-nonce-0001"), "undone");
    assert!(!is_new(&mut conn, &mut mode, "nested-nonce-0002"), "kept");
}

#[test]
fn a_panic_or_a_savepoint_left_open_fails_that_job_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    let mut mode = Mode::default();
    let runs = Arc::new(AtomicU32::new(0));
    let (good, good_answer) = nonce_job("alone-nonce-0001", &runs, false);
    let (reply, panic_answer) = oneshot::channel();
    let panicking = Job {
        work: Box::new(|tx: &mut dyn WriteTx| {
            use_nonce(tx, "alone-nonce-0002")?;
            panic!("boom")
        }),
        reply,
    };
    let (reply, open_answer) = oneshot::channel();
    let left_open = Job {
        work: Box::new(|tx: &mut dyn WriteTx| {
            tx.savepoint()?;
            use_nonce(tx, "alone-nonce-0003")?;
            Ok(Box::new(true) as Box<dyn std::any::Any + Send>)
        }),
        reply,
    };
    run_batch(&mut conn, &mut vec![good, panicking], &mut mode);
    assert!(answer_of(good_answer).unwrap());
    assert!(matches!(
        answer_of(panic_answer),
        Err(CoreError::Invariant(_))
    ));
    mode = Mode::default();
    run_batch(&mut conn, &mut vec![left_open], &mut mode);
    assert!(matches!(
        answer_of(open_answer),
        Err(CoreError::Invariant(_))
    ));
    assert_eq!((mode.optimistic_commits, mode.reruns), (0, 1));
    assert!(!is_new(&mut conn, &mut mode, "alone-nonce-0001"));
    assert!(is_new(&mut conn, &mut mode, "alone-nonce-0002"));
    assert!(is_new(&mut conn, &mut mode, "alone-nonce-0003"));
}

#[test]
fn a_batch_that_cannot_begin_is_answered_once_without_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    conn.busy_timeout(std::time::Duration::from_millis(20))
        .unwrap();
    let other = Connection::open(dir.path().join("custody.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut mode = Mode::default();
    let runs = Arc::new(AtomicU32::new(0));
    let (job, answer) = nonce_job("locked-nonce-0001", &runs, false);
    run_batch(&mut conn, &mut vec![job], &mut mode);
    assert!(matches!(
        answer_of(answer),
        Err(CoreError::Port(e)) if e.retry == custody_core::error::Retry::Transient
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!((mode.optimistic_commits, mode.reruns), (0, 0));
    other.execute_batch("ROLLBACK").unwrap();
    assert!(is_new(&mut conn, &mut mode, "locked-nonce-0001"));
}

#[test]
fn a_savepoint_rolled_back_and_released_in_an_optimistic_batch_loses_that_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    let mut mode = Mode::default();
    let (reply, answer) = oneshot::channel();
    let work = Box::new(|tx: &mut dyn WriteTx| {
        tx.savepoint()?;
        use_nonce(tx, "undone-nonce-0001")?;
        // A job that undoes its savepoint by hand and carries on: the depth is back to zero,
        // so only the lost rollback tells the writer that the write is still there.
        let _ = tx.rollback_to_savepoint();
        let _ = tx.release_savepoint();
        Ok(Box::new(true) as Box<dyn std::any::Any + Send>)
    });
    run_batch(&mut conn, &mut vec![Job { work, reply }], &mut mode);
    assert!(answer_of(answer).unwrap());
    assert_eq!((mode.optimistic_commits, mode.reruns), (0, 1));
    assert!(is_new(&mut conn, &mut mode, "undone-nonce-0001"), "undone");
}

#[test]
fn a_transaction_sqlite_rolled_back_refuses_the_batch_and_every_later_write_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = writer_connection(&dir);
    conn.execute_batch(
        "CREATE TRIGGER abort_the_transaction BEFORE INSERT ON nonces \
         WHEN NEW.nonce = 'abort-nonce-0000' BEGIN SELECT RAISE(ROLLBACK, 'aborted'); END",
    )
    .unwrap();
    for mut mode in [
        Mode::default(),
        Mode {
            safe_batches_left: 1,
            ..Mode::default()
        },
    ] {
        let runs = Arc::new(AtomicU32::new(0));
        let (before, before_answer) = nonce_job("abort-nonce-0001", &runs, false);
        let (reply, aborting_answer) = oneshot::channel();
        let aborting = Job {
            // Ignores the failing statement's error and writes on, as no job should.
            work: Box::new(|tx: &mut dyn WriteTx| {
                let _ = use_nonce(tx, "abort-nonce-0000");
                let after = use_nonce(tx, "abort-nonce-0002");
                Ok(Box::new(after.is_ok()) as Box<dyn std::any::Any + Send>)
            }),
            reply,
        };
        let (later, later_answer) = nonce_job("abort-nonce-0003", &runs, false);
        run_batch(&mut conn, &mut vec![before, aborting, later], &mut mode);
        assert_eq!(mode.optimistic_commits, 0);
        assert_eq!(mode.reruns, 0, "the batch is refused, not run again");
        for answer in [before_answer, aborting_answer, later_answer] {
            assert!(matches!(
                answer_of(answer),
                Err(CoreError::Port(e)) if e.retry == custody_core::error::Retry::Transient
            ));
        }
        for nonce in ["abort-nonce-0001", "abort-nonce-0002", "abort-nonce-0003"] {
            assert!(
                is_new(&mut conn, &mut mode, nonce),
                "{nonce} was not written"
            );
            conn.execute("DELETE FROM nonces WHERE nonce = ?1", [nonce])
                .unwrap();
        }
    }
}
