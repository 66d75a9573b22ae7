//! The [`Store`] contract: what commits, what rolls back, savepoints, read snapshots.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::{block_on, join_all};
use custody_core::admin::{AuditRecord, Control};
use custody_core::error::{CoreError, CoreResult, ErrorCode, Refusal};
use custody_core::ledger::{AccountBalances, AccountKey, SystemAccount};
use custody_core::outbox::{EventType, NewEvent};
use custody_core::ports::store::{nested, read, write, Store};
use custody_core::{Amount, AssetId, Network};

use super::{assert_port_error, at, r, suite, tid, uid, w};

suite!(
    /// Jobs commit all or nothing, alone; savepoints nest; reads see a snapshot.
    transactions_suite {
        an_ok_write_is_visible_to_every_later_read,
        a_failed_job_leaves_no_trace,
        a_panicking_job_is_an_error_and_leaves_no_trace,
        failed_jobs_do_not_affect_the_jobs_around_them,
        savepoints_nest_and_roll_back,
        nested_keeps_what_succeeds_and_undoes_what_fails,
        savepoint_misuse_is_an_error,
        a_read_job_sees_a_snapshot,
    }
);

fn audit(n: u128, created: i64) -> AuditRecord {
    AuditRecord {
        id: uid(n),
        actor: "cli:test".into(),
        action: "test.action".into(),
        target: format!("thing:{n}"),
        old_value: None,
        new_value: Some(serde_json::json!({ "n": n.to_string() })),
        reason: "conformance".into(),
        created_at: at(created),
    }
}

fn control(key: &str, enabled: bool) -> Control {
    Control {
        control_key: key.into(),
        enabled,
        reason: "conformance".into(),
        updated_by: "cli:test".into(),
        updated_at: at(5),
    }
}

fn clearing() -> AccountKey {
    AccountKey::system(
        SystemAccount::DepositClearing,
        AssetId::new(Network::Bsc, "USDT"),
    )
}

fn refusal() -> CoreError {
    Refusal::new(ErrorCode::InsufficientBalance, "refused by the test").into()
}

fn audit_ids(records: &[AuditRecord]) -> Vec<u128> {
    records.iter().map(|a| a.id.as_u128()).collect()
}

async fn an_ok_write_is_visible_to_every_later_read(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let answer = write(s, |tx| {
        tx.append_audit(&audit(1, 10))?;
        tx.put_control(&control("maintenance.BSC", true))?;
        Ok("committed")
    })
    .await
    .unwrap();
    assert_eq!(answer, "committed", "the job's own answer comes back");
    for _ in 0..3 {
        let (records, control) = r(s, |tx| {
            Ok((
                tx.list_audit(custody_core::page::Page::first(10))
                    .map(super::rows)?,
                tx.control("maintenance.BSC")?,
            ))
        })
        .await;
        assert_eq!(records, vec![audit(1, 10)]);
        assert!(control.is_some_and(|c| c.enabled));
    }
    let seen_by_a_write = w(s, |tx| {
        tx.list_audit(custody_core::page::Page::first(10))
            .map(super::rows)
    })
    .await
    .unwrap();
    assert_eq!(seen_by_a_write, vec![audit(1, 10)]);

    // Jobs submitted together (a store may commit them as one batch) are all visible after.
    let jobs: Vec<_> = (0..20u8)
        .map(|i| {
            w(s, move |tx| {
                tx.append_audit(&audit(100 + u128::from(i), 20 + i64::from(i)))
            })
        })
        .collect();
    for answer in join_all(jobs).await {
        answer.unwrap();
    }
    assert_eq!(
        r(s, |tx| tx
            .list_audit(custody_core::page::Page::first(100))
            .map(super::rows))
        .await
        .len(),
        21
    );
}

async fn a_failed_job_leaves_no_trace(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let err = write(s, |tx| {
        tx.append_audit(&audit(1, 10))?;
        tx.put_control(&control("maintenance.BSC", true))?;
        tx.use_nonce(uid(1), "nonce-of-a-failed-job", at(10))?;
        tx.enqueue_event(&NewEvent::new(
            uid(2),
            "acme",
            EventType::WebhookTest,
            &serde_json::json!({}),
            at(10),
        ))?;
        tx.put_ledger_account(
            &clearing(),
            &AccountBalances {
                debits_posted: Amount::from_units(5),
                ..AccountBalances::default()
            },
        )?;
        tx.allocate_tenant_account(&tid("acme"), at(10))?;
        tx.record_block(Network::Bsc, 7, "h7", "h6")?;
        Err::<(), _>(refusal())
    })
    .await
    .unwrap_err();
    assert!(
        matches!(&err, CoreError::Refused(r) if r.code == ErrorCode::InsufficientBalance),
        "the job's own error comes back: {err:?}"
    );
    let left = r(s, |tx| {
        Ok((
            tx.list_audit(custody_core::page::Page::first(10))
                .map(super::rows)?
                .is_empty(),
            tx.control("maintenance.BSC")?.is_none(),
            tx.count_webhook_events()?.pending,
            tx.ledger_account(&clearing())?.is_none(),
            tx.tenant_account(&tid("acme"))?.is_none(),
            tx.chain_cursor(Network::Bsc)?.is_none(),
        ))
    })
    .await;
    assert_eq!(left, (true, true, 0, true, true, true));
    assert!(
        w(s, |tx| tx.use_nonce(
            uid(1),
            "nonce-of-a-failed-job",
            at(10)
        ))
        .await
        .unwrap(),
        "the failed job's nonce was never used"
    );

    // A repository error fails the job the same way, with the job's earlier writes.
    w(s, |tx| tx.append_audit(&audit(2, 20))).await.unwrap();
    assert_port_error(
        w(s, |tx| {
            tx.put_control(&control("maintenance.TRON", true))?;
            tx.append_audit(&audit(2, 20))
        })
        .await,
    );
    assert_eq!(r(s, |tx| tx.control("maintenance.TRON")).await, None);
    assert_eq!(
        audit_ids(
            &r(s, |tx| tx
                .list_audit(custody_core::page::Page::first(10))
                .map(super::rows))
            .await
        ),
        [2]
    );
}

async fn a_panicking_job_is_an_error_and_leaves_no_trace(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let panicked: CoreResult<()> = write(s, |tx| {
        tx.use_nonce(uid(1), "nonce-of-a-panic", at(1))?;
        panic!("a write job panics (expected by the conformance suite)")
    })
    .await;
    assert!(
        matches!(panicked, Err(CoreError::Invariant(_))),
        "{panicked:?}"
    );
    assert!(
        w(s, |tx| tx.use_nonce(uid(1), "nonce-of-a-panic", at(1)))
            .await
            .unwrap(),
        "the panicking job's write was rolled back, and the store goes on"
    );
    let panicked: CoreResult<()> = read(s, |_tx| {
        panic!("a read job panics (expected by the conformance suite)")
    })
    .await;
    assert!(
        matches!(panicked, Err(CoreError::Invariant(_))),
        "{panicked:?}"
    );
    let refused: CoreResult<()> = read(s, |_tx| Err(refusal())).await;
    assert!(matches!(refused, Err(CoreError::Refused(_))), "{refused:?}");
    assert!(!w(s, |tx| tx.use_nonce(uid(1), "nonce-of-a-panic", at(1)))
        .await
        .unwrap());
}

async fn failed_jobs_do_not_affect_the_jobs_around_them(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let nonce = |i: u32| format!("nonce-{i:04}");
    // Every third job refuses, some panic, the rest commit: all submitted together.
    let fate = |i: u32| {
        if i % 3 == 0 {
            "refuses"
        } else if i % 10 == 5 {
            "panics"
        } else {
            "commits"
        }
    };
    let jobs: Vec<_> = (0..60u32)
        .map(|i| {
            write(s, move |tx| {
                tx.use_nonce(uid(7), &nonce(i), at(1))?;
                tx.append_audit(&audit(u128::from(i) + 1, i64::from(i)))?;
                match fate(i) {
                    "refuses" => Err(refusal()),
                    "panics" => panic!("job {i} panics (expected by the conformance suite)"),
                    _ => Ok(i),
                }
            })
        })
        .collect();
    let answers = join_all(jobs).await;
    for (i, answer) in (0..60u32).zip(&answers) {
        match fate(i) {
            "refuses" => assert!(matches!(answer, Err(CoreError::Refused(_))), "job {i}"),
            "panics" => assert!(matches!(answer, Err(CoreError::Invariant(_))), "job {i}"),
            _ => assert_eq!(answer, &Ok(i), "job {i}"),
        }
    }
    // The nonces of the failed jobs are free; those of the committed jobs are used.
    let fresh = w(s, move |tx| {
        (0..60u32)
            .map(|i| tx.use_nonce(uid(7), &nonce(i), at(1)))
            .collect::<Result<Vec<bool>, _>>()
    })
    .await
    .unwrap();
    for (i, fresh) in (0..60u32).zip(fresh) {
        assert_eq!(fresh, fate(i) != "commits", "nonce {i}");
    }
    let committed = (0..60u32).filter(|&i| fate(i) == "commits").count();
    assert_eq!(
        r(s, |tx| tx
            .list_audit(custody_core::page::Page::first(100))
            .map(super::rows))
        .await
        .len(),
        committed
    );
}

async fn savepoints_nest_and_roll_back(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let inside = write(s, |tx| {
        tx.append_audit(&audit(1, 1))?;
        tx.savepoint()?;
        tx.append_audit(&audit(2, 2))?;
        tx.savepoint()?;
        tx.append_audit(&audit(3, 3))?;
        tx.use_nonce(uid(1), "inner", at(1))?;
        tx.rollback_to_savepoint()?;
        let after_inner_rollback = audit_ids(
            &tx.list_audit(custody_core::page::Page::first(10))
                .map(super::rows)?,
        );
        tx.append_audit(&audit(4, 4))?;
        tx.release_savepoint()?;
        tx.savepoint()?;
        tx.append_audit(&audit(5, 5))?;
        tx.savepoint()?;
        tx.append_audit(&audit(6, 6))?;
        // Released into the enclosing savepoint, so rolled back with it.
        tx.release_savepoint()?;
        tx.rollback_to_savepoint()?;
        let after_outer_rollback = audit_ids(
            &tx.list_audit(custody_core::page::Page::first(10))
                .map(super::rows)?,
        );
        let inner_nonce_free = tx.use_nonce(uid(1), "inner", at(1))?;
        Ok((after_inner_rollback, after_outer_rollback, inner_nonce_free))
    })
    .await
    .unwrap();
    assert_eq!(inside, (vec![2, 1], vec![4, 2, 1], true));
    assert_eq!(
        audit_ids(
            &r(s, |tx| tx
                .list_audit(custody_core::page::Page::first(10))
                .map(super::rows))
            .await
        ),
        [4, 2, 1]
    );
    assert!(
        !w(s, |tx| tx.use_nonce(uid(1), "inner", at(1)))
            .await
            .unwrap(),
        "the nonce used after the rollbacks was committed"
    );
}

async fn nested_keeps_what_succeeds_and_undoes_what_fails(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let outcome = write(s, |tx| {
        let kept: CoreResult<()> = nested(tx, |tx| Ok(tx.append_audit(&audit(1, 1))?));
        let undone: CoreResult<()> = nested(tx, |tx| {
            tx.append_audit(&audit(2, 2))?;
            nested(tx, |tx| Ok(tx.append_audit(&audit(3, 3))?))?;
            Err(refusal())
        });
        tx.append_audit(&audit(4, 4))?;
        Ok((kept.is_ok(), undone.is_err()))
    })
    .await
    .unwrap();
    assert_eq!(outcome, (true, true));
    assert_eq!(
        audit_ids(
            &r(s, |tx| tx
                .list_audit(custody_core::page::Page::first(10))
                .map(super::rows))
            .await
        ),
        [4, 1]
    );

    // What a nested block kept is still undone when its job fails.
    let failed: CoreResult<()> = write(s, |tx| {
        nested(tx, |tx| Ok(tx.append_audit(&audit(5, 5))?))?;
        Err(refusal())
    })
    .await;
    assert!(failed.is_err());
    assert_eq!(
        audit_ids(
            &r(s, |tx| tx
                .list_audit(custody_core::page::Page::first(10))
                .map(super::rows))
            .await
        ),
        [4, 1]
    );
}

async fn savepoint_misuse_is_an_error(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let unmatched = w(s, |tx| {
        Ok((
            tx.release_savepoint().is_err(),
            tx.rollback_to_savepoint().is_err(),
        ))
    })
    .await
    .unwrap();
    assert_eq!(
        unmatched,
        (true, true),
        "release and rollback need a savepoint"
    );

    // A job that leaves a savepoint open fails, and its writes are undone.
    let left_open = w(s, |tx| {
        tx.append_audit(&audit(1, 1))?;
        tx.savepoint()?;
        tx.append_audit(&audit(2, 2))
    })
    .await;
    assert!(
        matches!(left_open, Err(CoreError::Invariant(_))),
        "{left_open:?}"
    );
    assert!(r(s, |tx| tx
        .list_audit(custody_core::page::Page::first(10))
        .map(super::rows))
    .await
    .is_empty());
}

async fn a_read_job_sees_a_snapshot(store: Arc<dyn Store>) {
    let s = store.as_ref();
    w(s, |tx| tx.put_control(&control("maintenance.BSC", false)))
        .await
        .unwrap();
    // While the read job runs, another thread commits a write; the job must not see it.
    let (started, wait_started) = mpsc::channel::<()>();
    let (written, wait_written) = mpsc::channel::<()>();
    let writer_store = Arc::clone(&store);
    let writer = std::thread::spawn(move || {
        wait_started
            .recv_timeout(Duration::from_secs(10))
            .expect("the read job started");
        block_on(w(writer_store.as_ref(), |tx| {
            tx.put_control(&control("maintenance.BSC", true))
        }))
        .expect("the concurrent write commits");
        let _ = written.send(());
    });
    let seen = read(s, move |tx| {
        let before = tx.control("maintenance.BSC")?.map(|c| c.enabled);
        let _ = started.send(());
        // A store that blocks writes while a read runs simply lets this time out.
        let _ = wait_written.recv_timeout(Duration::from_secs(5));
        let after = tx.control("maintenance.BSC")?.map(|c| c.enabled);
        Ok((before, after))
    })
    .await
    .unwrap();
    writer.join().expect("the writer thread ends");
    assert_eq!(
        seen,
        (Some(false), Some(false)),
        "one snapshot per read job"
    );
    assert_eq!(
        r(s, |tx| tx.control("maintenance.BSC"))
            .await
            .map(|c| c.enabled),
        Some(true),
        "the next read sees the write"
    );
}
