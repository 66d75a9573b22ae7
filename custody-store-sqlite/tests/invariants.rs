//! A broken invariant latches `kill_switch.global` through the `InvariantGuard`, and money stops
//! (internal transfers, deposit crediting) until an operator turns the switch off.

mod common;

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use custody_core::admin::set_control;
use custody_core::deposit::{self, Applied, DepositStatus, WatchSet};
use custody_core::error::{CoreError, CoreResult, ErrorCode, PortError};
use custody_core::invariants::{InvariantGuard, GLOBAL_KILL_SWITCH, LATCH_ACTOR};
use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
use custody_core::ports::store::{read, write, ReadJob, WriteJob};
use custody_core::ports::Store;
use custody_core::{Amount, Network};
use uuid::Uuid;

#[tokio::test]
async fn a_broken_invariant_latches_the_global_kill_switch_and_money_stops() {
    let dir = tempfile::tempdir().unwrap();
    let store = InvariantGuard::new(open(&dir), Arc::new(FixedClock), Arc::new(RandomEntropy));
    let addresses = wallets(&store, &["alice", "bob"]).await;
    fund_alice(&store).await;
    transfer(&store, "alice", "bob", 1).await.unwrap();

    // A job that finds the books broken: answered as an invariant error, and the switch latches.
    let broken = write(&store, |_tx| -> Result<(), CoreError> {
        Err(CoreError::Invariant(
            "forced: account totals disagree".into(),
        ))
    })
    .await;
    assert!(matches!(broken, Err(CoreError::Invariant(_))), "{broken:?}");
    let (control, alerts, audit) = read(&store, |tx| {
        Ok((
            tx.control(GLOBAL_KILL_SWITCH)?,
            tx.list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
            tx.list_audit(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
        ))
    })
    .await
    .unwrap();
    let control = control.expect("the switch is recorded");
    assert!(control.enabled);
    assert_eq!(control.updated_by, LATCH_ACTOR);
    assert!(control.reason.contains("account totals disagree"));
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        (alerts[0].kind.as_str(), alerts[0].severity.as_str()),
        ("invariant_violated", "critical")
    );
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].actor, LATCH_ACTOR);
    assert_eq!(audit[0].target, GLOBAL_KILL_SWITCH);

    // A second violation while latched adds nothing: the first is the one to read.
    let _ = write(&store, |_tx| -> Result<(), CoreError> {
        Err(CoreError::Invariant("again".into()))
    })
    .await;
    let alerts = read(&store, |tx| {
        Ok(tx
            .list_alerts(custody_core::page::Page::first(10))?
            .unwrap_or_default())
    })
    .await
    .unwrap();
    assert_eq!(alerts.len(), 1);

    // Transfers stop.
    match transfer(&store, "alice", "bob", 1).await {
        Err(CoreError::Refused(r)) => assert_eq!(r.code, ErrorCode::KillSwitchActive),
        other => panic!("a transfer went through a latched kill switch: {other:?}"),
    }
    // Deposit crediting stops: a deposit reaches full depth and stays confirmed.
    let watch = Arc::new(WatchSet::new());
    watch.extend(Network::Bsc, [addresses[1].clone()]);
    for n in 1..=4 {
        let deposit = (n == 2).then_some((addresses[1].as_str(), 7));
        let applied = apply(&store, &watch, block(n, 0, 0, deposit)).await;
        assert!(matches!(applied, Applied::Block(_)), "{applied:?}");
    }
    assert_eq!(deposit_statuses(&store).await, [DepositStatus::Confirmed]);

    // An operator looks and turns it off (audited): money moves again.
    write(&store, |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "operator",
            GLOBAL_KILL_SWITCH,
            false,
            "checked the books",
            NOW,
        )
    })
    .await
    .unwrap();
    transfer(&store, "alice", "bob", 1).await.unwrap();
    write(&store, |tx| {
        deposit::advance(tx, &RandomEntropy, &settings(), 4, NOW)
    })
    .await
    .unwrap();
    assert_eq!(deposit_statuses(&store).await, [DepositStatus::Credited]);
}

/// A store whose writes fail while `down` is set, as a disk or a lock can at the worst moment.
struct Flaky {
    inner: Arc<dyn Store>,
    down: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl Store for Flaky {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        if self.down.load(Ordering::SeqCst) {
            return Err(PortError::transient("store", "disk unavailable").into());
        }
        self.inner.write(job).await
    }
    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        self.inner.read(job).await
    }
}

/// Alice holds 10 USDT and can send.
async fn fund_alice(store: &dyn Store) {
    write(store, |tx| {
        let meta = TxMeta {
            id: Uuid::new_v4(),
            reference_type: ReferenceType::Deposit,
            reference_id: Uuid::new_v4(),
            created_at: NOW,
        };
        let alice = UserAccount::new("t".to_owned(), "alice".to_owned(), usdt());
        Ok(ledger::credit_deposit(
            tx,
            &meta,
            &alice,
            Amount::from_units(10),
        )?)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_latch_that_cannot_be_saved_refuses_every_write_until_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let down = Arc::new(AtomicBool::new(false));
    let flaky = Flaky {
        inner: open(&dir),
        down: down.clone(),
    };
    let store = InvariantGuard::new(
        Arc::new(flaky),
        Arc::new(FixedClock),
        Arc::new(RandomEntropy),
    );
    wallets(&store, &["alice", "bob"]).await;
    fund_alice(&store).await;

    // The job finds the books broken, and the store goes down before the latch is saved.
    let failing = down.clone();
    let broken = write(&store, move |_tx| -> Result<(), CoreError> {
        failing.store(true, Ordering::SeqCst);
        Err(CoreError::Invariant("forced: totals disagree".into()))
    })
    .await;
    assert!(matches!(broken, Err(CoreError::Invariant(_))), "{broken:?}");
    let control = read(&store, |tx| Ok(tx.control(GLOBAL_KILL_SWITCH)?))
        .await
        .unwrap();
    assert!(control.is_none(), "nothing could be saved: {control:?}");

    // The store is back: the first write saves the latch before anything else runs.
    down.store(false, Ordering::SeqCst);
    match transfer(&store, "alice", "bob", 1).await {
        Err(CoreError::Refused(r)) => assert_eq!(r.code, ErrorCode::KillSwitchActive),
        other => panic!("money moved past an unsaved latch: {other:?}"),
    }
    let (control, alerts) = read(&store, |tx| {
        Ok((
            tx.control(GLOBAL_KILL_SWITCH)?,
            tx.list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
        ))
    })
    .await
    .unwrap();
    let control = control.expect("the latch is saved");
    assert!(control.enabled && control.reason.contains("totals disagree"));
    assert_eq!(alerts.len(), 1);
}

#[tokio::test]
async fn while_the_latch_is_unsaved_writes_are_refused_with_the_violation() {
    let dir = tempfile::tempdir().unwrap();
    let down = Arc::new(AtomicBool::new(false));
    let flaky = Arc::new(Flaky {
        inner: open(&dir),
        down: down.clone(),
    });
    let store = InvariantGuard::new(flaky, Arc::new(FixedClock), Arc::new(RandomEntropy));
    wallets(&store, &["alice", "bob"]).await;
    fund_alice(&store).await;
    let failing = down.clone();
    let _ = write(&store, move |_tx| -> Result<(), CoreError> {
        failing.store(true, Ordering::SeqCst);
        Err(CoreError::Invariant("forced: hold ended twice".into()))
    })
    .await;
    // Still down: the write is refused with the violation, not with a retryable store error
    // that a caller might simply retry around.
    match transfer(&store, "alice", "bob", 1).await {
        Err(CoreError::Invariant(why)) => assert!(why.contains("hold ended twice"), "{why}"),
        other => panic!("expected the violation, got {other:?}"),
    }
    // Reads still answer, so operators can look.
    read(&store, |tx| {
        Ok(tx
            .list_alerts(custody_core::page::Page::first(10))?
            .unwrap_or_default())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_violation_takes_over_a_switch_an_operator_turned_on_for_another_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = InvariantGuard::new(open(&dir), Arc::new(FixedClock), Arc::new(RandomEntropy));
    write(&store, |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "operator",
            GLOBAL_KILL_SWITCH,
            true,
            "node upgrade",
            NOW,
        )
    })
    .await
    .unwrap();
    let _ = write(&store, |_tx| -> Result<(), CoreError> {
        Err(CoreError::Invariant("forced: totals disagree".into()))
    })
    .await;
    let (control, alerts) = read(&store, |tx| {
        Ok((
            tx.control(GLOBAL_KILL_SWITCH)?,
            tx.list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
        ))
    })
    .await
    .unwrap();
    let control = control.unwrap();
    // Turning the switch off "because the upgrade is done" would now be turning off a latch,
    // which the control row and the alert make plain.
    assert!(control.enabled);
    assert_eq!(control.updated_by, LATCH_ACTOR);
    assert!(control.reason.contains("totals disagree"));
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, "invariant_violated");
}
