//! [`ReconciliationRepo`](custody_core::reconcile::ReconciliationRepo): runs kept exactly, listed
//! newest first, the newest per scope; a run claimed by one runner at a time under a lease that
//! only a crashed runner's expiry hands over, and results fenced by that lease.

use std::sync::Arc;

use serde_json::json;

use custody_core::ports::store::Store;
use custody_core::reconcile::{Reconciliation, RunStatus, Scope};

use super::{assert_port_error, at, r, suite, uid, w};

suite!(
    /// Reconciliation runs and their leases.
    reconciliation_suite {
        runs_round_trip_and_ids_are_unique,
        runs_are_listed_newest_first_and_the_latest_is_per_scope,
        the_oldest_due_run_is_claimed_once_until_its_lease_runs_out,
        a_result_is_fenced_by_the_lease_it_was_claimed_under,
    }
);

fn run(n: u128, scope: Scope, created: i64) -> Reconciliation {
    Reconciliation::scheduled(uid(n), scope, "credential:op", at(created))
}

fn finished(claimed: &Reconciliation, now: i64) -> Reconciliation {
    Reconciliation {
        status: RunStatus::Completed,
        balanced: Some(false),
        discrepancies: vec![
            json!({ "network": "BSC", "asset": "BNB", "shortfall_units": "340282366920938463463374607431768211455" }),
        ],
        updated_at: at(now),
        completed_at: Some(at(now)),
        ..claimed.clone()
    }
}

async fn runs_round_trip_and_ids_are_unique(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let a = run(1, Scope::Treasury, 10);
    let a2 = a.clone();
    w(s, move |tx| tx.insert_reconciliation(&a2)).await.unwrap();
    assert_eq!(r(s, |tx| tx.reconciliation(uid(1))).await, Some(a.clone()));
    assert_eq!(r(s, |tx| tx.reconciliation(uid(2))).await, None);
    let again = run(1, Scope::Ledger, 11);
    assert_port_error(w(s, move |tx| tx.insert_reconciliation(&again)).await);

    // A finished run keeps every field, figures of any size and the failure reason included.
    let claimed = w(s, |tx| tx.claim_reconciliation(at(20), at(80)))
        .await
        .unwrap()
        .unwrap();
    let mut done = finished(&claimed, 30);
    done.failure_reason = Some("résumé: ünïcode kept".into());
    let done2 = done.clone();
    w(s, move |tx| tx.finish_reconciliation(&done2))
        .await
        .unwrap();
    let stored = r(s, |tx| tx.reconciliation(uid(1))).await.unwrap();
    assert_eq!(
        stored,
        Reconciliation {
            lease: None,
            ..done
        }
    );
}

async fn runs_are_listed_newest_first_and_the_latest_is_per_scope(store: Arc<dyn Store>) {
    let s = store.as_ref();
    for (n, scope, created) in [
        (1, Scope::Ledger, 100),
        (2, Scope::Treasury, 300),
        (3, Scope::Ledger, 200),
        (4, Scope::Ledger, 300),
    ] {
        let x = run(n, scope, created);
        w(s, move |tx| tx.insert_reconciliation(&x)).await.unwrap();
    }
    let ids: Vec<_> = r(s, |tx| {
        tx.list_reconciliations(custody_core::page::Page::first(10))
            .map(super::rows)
    })
    .await
    .iter()
    .map(|x| x.id)
    .collect();
    // Same time: the higher id first (the keyset of the pages).
    assert_eq!(ids, vec![uid(4), uid(2), uid(3), uid(1)]);
    assert_eq!(
        r(s, |tx| tx
            .list_reconciliations(custody_core::page::Page::first(2))
            .map(super::rows))
        .await
        .len(),
        2
    );
    super::check_paging(s, 1, |tx, p| tx.list_reconciliations(p), |x| x.id).await;
    let latest = |scope| async move {
        r(s, move |tx| tx.latest_reconciliation(scope))
            .await
            .map(|x| x.id)
    };
    assert_eq!(latest(Scope::Ledger).await, Some(uid(4)));
    assert_eq!(latest(Scope::Treasury).await, Some(uid(2)));
}

async fn the_oldest_due_run_is_claimed_once_until_its_lease_runs_out(store: Arc<dyn Store>) {
    let s = store.as_ref();
    for (n, created) in [(1, 200), (2, 100)] {
        let x = run(n, Scope::Ledger, created);
        w(s, move |tx| tx.insert_reconciliation(&x)).await.unwrap();
    }
    let first = w(s, |tx| tx.claim_reconciliation(at(1_000), at(2_000)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.id, uid(2), "oldest first");
    assert_eq!(first.status, RunStatus::Running);
    assert_eq!(first.lease, Some(at(2_000)));
    assert_eq!(first.updated_at, at(1_000));
    let second = w(s, |tx| tx.claim_reconciliation(at(1_001), at(2_001)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.id, uid(1));
    assert_eq!(
        w(s, |tx| tx.claim_reconciliation(at(1_999), at(3_000)))
            .await
            .unwrap(),
        None,
        "both leased"
    );
    // A copy read, not claimed, carries no lease.
    let read = r(s, |tx| tx.reconciliation(uid(2))).await.unwrap();
    assert_eq!((read.status, read.lease), (RunStatus::Running, None));
    // The first runner died: its lease runs out and the run is claimed again.
    let taken = w(s, |tx| tx.claim_reconciliation(at(2_000), at(5_000)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.id, taken.lease), (uid(2), Some(at(5_000))));
    let done = finished(&taken, 2_500);
    w(s, move |tx| tx.finish_reconciliation(&done))
        .await
        .unwrap();
    // A finished run is never claimed again.
    let next = w(s, |tx| tx.claim_reconciliation(at(9_000), at(10_000)))
        .await
        .unwrap()
        .map(|x| x.id);
    assert_eq!(next, Some(uid(1)), "only the other one, its lease over");
    assert_eq!(
        w(s, |tx| tx.claim_reconciliation(at(9_001), at(10_000)))
            .await
            .unwrap(),
        None
    );
}

async fn a_result_is_fenced_by_the_lease_it_was_claimed_under(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let x = run(1, Scope::Treasury, 0);
    w(s, move |tx| tx.insert_reconciliation(&x)).await.unwrap();
    // Not claimed yet: nothing to finish.
    let unclaimed = Reconciliation {
        lease: Some(at(1)),
        ..finished(&run(1, Scope::Treasury, 0), 1)
    };
    assert_port_error(w(s, move |tx| tx.finish_reconciliation(&unclaimed)).await);
    let old = w(s, |tx| tx.claim_reconciliation(at(10), at(20)))
        .await
        .unwrap()
        .unwrap();
    let new = w(s, |tx| tx.claim_reconciliation(at(20), at(40)))
        .await
        .unwrap()
        .unwrap();
    // The runner whose lease ran out cannot overwrite the new holder's result.
    let stale = finished(&old, 25);
    assert_port_error(w(s, move |tx| tx.finish_reconciliation(&stale)).await);
    assert_eq!(
        r(s, |tx| tx.reconciliation(uid(1))).await.unwrap().status,
        RunStatus::Running
    );
    let done = finished(&new, 30);
    let done2 = done.clone();
    w(s, move |tx| tx.finish_reconciliation(&done2))
        .await
        .unwrap();
    // Once finished, the same lease cannot finish it again.
    assert_port_error(w(s, move |tx| tx.finish_reconciliation(&done)).await);
}
