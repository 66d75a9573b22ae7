//! A credited deposit that leaves the chain after the user spent it: what is left is reversed,
//! the rest is booked as owed, the user's outgoing operations stop, and the transfer mined again
//! settles the debt (security review, item 5).

mod common;

use std::sync::Arc;

use common::*;
use custody_core::deposit::{self, Applied, DepositStatus, WatchSet};
use custody_core::error::{CoreError, ErrorCode};
use custody_core::ledger::{self, AccountKey, SystemAccount, UserAccount};
use custody_core::ports::store::{read, write};
use custody_core::Network;

async fn available(store: &dyn custody_core::ports::Store, user: &'static str) -> u128 {
    read(store, move |tx| {
        let account = UserAccount::new("t".to_owned(), user.to_owned(), usdt());
        Ok(ledger::user_balance(tx, &account)?.available.units())
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_spent_deposit_reversed_by_a_reorg_is_owed_then_settled_by_its_return() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let addresses = wallets(store.as_ref(), &["alice", "bob"]).await;
    let watch = Arc::new(WatchSet::new());
    watch.extend(Network::Bsc, addresses.clone());

    // 80 USDT to alice at block 2, credited at block 3; alice sends 50 to bob.
    assert!(matches!(
        apply(store.as_ref(), &watch, block(1, 0, 0, None)).await,
        Applied::Block(_)
    ));
    apply(
        store.as_ref(),
        &watch,
        block(2, 0, 0, Some((&addresses[0], 80))),
    )
    .await;
    apply(store.as_ref(), &watch, block(3, 0, 0, None)).await;
    assert_eq!(
        deposit_statuses(store.as_ref()).await,
        [DepositStatus::Credited]
    );
    transfer(store.as_ref(), "alice", "bob", 50).await.unwrap();

    // Blocks 2 and 3 leave the chain.
    write(store.as_ref(), |tx| {
        deposit::rewind(tx, &RandomEntropy, &settings(), 1, NOW)
    })
    .await
    .unwrap();
    assert_eq!(
        deposit_statuses(store.as_ref()).await,
        [DepositStatus::Reversed]
    );
    assert_eq!(available(store.as_ref(), "alice").await, 0);
    let (shortfall, owed, alerts, report) = read(store.as_ref(), |tx| {
        let d = tx
            .list_deposits(
                &custody_core::TenantId::parse("t").unwrap(),
                &Default::default(),
                1,
            )?
            .remove(0);
        let owed =
            tx.ledger_account(&AccountKey::system(SystemAccount::ReorgReceivable, usdt()))?;
        Ok((
            d.shortfall,
            owed.unwrap_or_default(),
            tx.list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
            ledger::reconcile(tx)?,
        ))
    })
    .await
    .unwrap();
    assert_eq!(shortfall.units(), 50);
    assert_eq!(
        (owed.debits_posted.units(), owed.credits_posted.units()),
        (50, 0)
    );
    assert!(report.balanced, "{:?}", report.discrepancies);
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].severity, "critical");
    assert!(
        alerts[0].message.contains("50 units"),
        "{}",
        alerts[0].message
    );

    // Alice's outgoing USDT is refused while she owes, even with new funds; bob is unaffected.
    transfer(store.as_ref(), "bob", "alice", 5).await.unwrap();
    match transfer(store.as_ref(), "alice", "bob", 1).await {
        Err(CoreError::Refused(r)) => {
            assert_eq!(r.code, ErrorCode::InsufficientBalance);
            assert!(r.message.contains("owes 50"), "{}", r.message);
        }
        other => panic!("a user owing a reorg shortfall sent funds: {other:?}"),
    }

    // A debit adjustment would not settle the debt (the re-mined transfer does): refused.
    let debit = |direction| {
        let req = custody_core::adjustment::AdjustmentRequest {
            tenant: custody_core::TenantId::parse("t").unwrap(),
            external_user_id: "alice".into(),
            network: Network::Bsc,
            asset: "USDT".into(),
            direction,
            amount: custody_core::Amount::from_units(5),
            reason: "settling by hand".into(),
            actor: "cli:ops".into(),
        };
        let ids = custody_core::adjustment::AdjustmentIds {
            audit: uuid::Uuid::new_v4(),
            ledger_tx: uuid::Uuid::new_v4(),
            event: uuid::Uuid::new_v4(),
        };
        write(store.as_ref(), move |tx| {
            custody_core::adjustment::execute(tx, ids, &req, NOW).map(|_| ())
        })
    };
    match debit(custody_core::ledger::Direction::Debit).await {
        Err(CoreError::Refused(r)) => assert!(format!("{r:?}").contains("owes 50"), "{r:?}"),
        other => panic!("a debit adjustment of a user who owes went through: {other:?}"),
    }

    // The transfer is mined again on the new branch: the debt is settled first, alice gets
    // back the 30 that were taken, and she may send again.
    apply(
        store.as_ref(),
        &watch,
        block(2, 1, 0, Some((&addresses[0], 80))),
    )
    .await;
    apply(store.as_ref(), &watch, block(3, 1, 1, None)).await;
    assert_eq!(
        deposit_statuses(store.as_ref()).await,
        [DepositStatus::Credited]
    );
    assert_eq!(available(store.as_ref(), "alice").await, 35);
    let (shortfall, owed, report) = read(store.as_ref(), |tx| {
        let d = tx
            .list_deposits(
                &custody_core::TenantId::parse("t").unwrap(),
                &Default::default(),
                1,
            )?
            .remove(0);
        let owed =
            tx.ledger_account(&AccountKey::system(SystemAccount::ReorgReceivable, usdt()))?;
        Ok((
            d.shortfall,
            owed.unwrap_or_default(),
            ledger::reconcile(tx)?,
        ))
    })
    .await
    .unwrap();
    assert!(shortfall.is_zero());
    assert_eq!(owed.debits_posted, owed.credits_posted);
    assert!(report.balanced, "{:?}", report.discrepancies);
    transfer(store.as_ref(), "alice", "bob", 1).await.unwrap();
}
