//! A broken invariant latches `kill_switch.global` through the `InvariantGuard`, and money stops
//! (internal transfers, deposit crediting) until an operator turns the switch off.

mod common;

use std::sync::Arc;

use common::*;
use custody_core::admin::set_control;
use custody_core::deposit::{self, Applied, DepositStatus, WatchSet};
use custody_core::error::{CoreError, ErrorCode};
use custody_core::invariants::{InvariantGuard, GLOBAL_KILL_SWITCH, LATCH_ACTOR};
use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
use custody_core::ports::store::{read, write};
use custody_core::{Amount, Network};
use uuid::Uuid;

#[tokio::test]
async fn a_broken_invariant_latches_the_global_kill_switch_and_money_stops() {
    let dir = tempfile::tempdir().unwrap();
    let store = InvariantGuard::new(open(&dir), Arc::new(FixedClock), Arc::new(RandomEntropy));
    let addresses = wallets(&store, &["alice", "bob"]).await;
    // Alice holds 10 USDT and can send.
    write(&store, |tx| {
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
            tx.list_alerts(10)?,
            tx.list_audit(10)?,
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
    let alerts = read(&store, |tx| Ok(tx.list_alerts(10)?)).await.unwrap();
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
