//! [`WithdrawalRepo`](custody_core::withdrawal::WithdrawalRepo): quotes used once, one withdrawal per
//! quote, records kept exactly and per tenant.

use std::sync::Arc;

use custody_core::amount::Amount;
use custody_core::network::Network;
use custody_core::ports::store::Store;
use custody_core::withdrawal::{Costs, Quote, Rate, Withdrawal, WithdrawalStatus, WithdrawalStep};

use super::{assert_port_error, at, r, suite, tid, uid, w};

suite!(
    /// Withdrawal quotes and withdrawals.
    withdrawal_suite {
        quotes_round_trip_and_are_used_once,
        withdrawals_round_trip_one_per_quote_and_only_their_state_moves,
        every_tenants_withdrawals_are_listed_newest_first,
    }
);

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn quote(n: u128, tenant: &str) -> Quote {
    Quote {
        id: uid(n),
        tenant: tid(tenant),
        external_user_id: "alice".into(),
        network: Network::Bsc,
        asset: "USDT".into(),
        destination_address: "0x00000000000000000000000000000000000000bB".into(),
        amount: u(u128::MAX / 3),
        costs: Costs {
            network_cost_units: u(1),
            markup_units: u(2),
            service_fee_units: u(3),
            spread_units: u(4),
            total_debited_units: u(u128::MAX / 3 + 10),
        },
        network_native: u(5),
        rate: Rate {
            asset_units: u(600),
            native_units: u(1),
        },
        created_at: at(10),
        expires_at: at(60_010),
        used_at: None,
    }
}

fn withdrawal(n: u128, quote: &Quote) -> Withdrawal {
    Withdrawal {
        id: uid(n),
        tenant: quote.tenant.clone(),
        quote_id: quote.id,
        external_user_id: quote.external_user_id.clone(),
        network: quote.network,
        asset: quote.asset.clone(),
        destination_address: quote.destination_address.clone(),
        amount: quote.amount,
        costs: quote.costs,
        rate: quote.rate,
        status: WithdrawalStatus::Reserved,
        hold_id: uid(n),
        outgoing_id: uid(n + 1_000),
        tx_hash: None,
        block_number: None,
        confirmations: 0,
        actual_network_cost_units: None,
        failure_reason: None,
        history: vec![WithdrawalStep {
            status: "reserved".into(),
            tx_hash: None,
            at: "2027-01-15T08:00:00.000Z".into(),
        }],
        created_at: at(20),
        updated_at: at(20),
    }
}

async fn quotes_round_trip_and_are_used_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let q = quote(1, "acme");
    let q2 = q.clone();
    w(s, move |tx| tx.insert_quote(&q2)).await.unwrap();
    assert_eq!(
        r(s, |tx| tx.quote(&tid("acme"), uid(1))).await,
        Some(q.clone())
    );
    assert_eq!(r(s, |tx| tx.quote(&tid("other"), uid(1))).await, None);
    let again = q.clone();
    assert_port_error(w(s, move |tx| tx.insert_quote(&again)).await);
    assert!(w(s, |tx| tx.use_quote(uid(1), at(30))).await.unwrap());
    assert!(
        !w(s, |tx| tx.use_quote(uid(1), at(31))).await.unwrap(),
        "used once"
    );
    assert!(!w(s, |tx| tx.use_quote(uid(2), at(31))).await.unwrap());
    let used = r(s, |tx| tx.quote(&tid("acme"), uid(1))).await.unwrap();
    assert_eq!(used.used_at, Some(at(30)));
}

async fn withdrawals_round_trip_one_per_quote_and_only_their_state_moves(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let q = quote(1, "acme");
    let (q2, wd) = (q.clone(), withdrawal(10, &q));
    let wd2 = wd.clone();
    w(s, move |tx| {
        tx.insert_quote(&q2)?;
        tx.insert_withdrawal(&wd2)
    })
    .await
    .unwrap();
    assert_eq!(
        r(s, |tx| tx.withdrawal(&tid("acme"), uid(10))).await,
        Some(wd.clone())
    );
    assert_eq!(r(s, |tx| tx.withdrawal(&tid("other"), uid(10))).await, None);
    assert_eq!(
        r(s, |tx| tx.withdrawal_by_id(uid(10))).await,
        Some(wd.clone())
    );
    let same_quote = withdrawal(11, &q);
    assert_port_error(w(s, move |tx| tx.insert_withdrawal(&same_quote)).await);

    let mut moved = wd.clone();
    moved.status = WithdrawalStatus::Confirmed;
    moved.tx_hash = Some("ab".repeat(32));
    moved.block_number = Some(77);
    moved.confirmations = 15;
    moved.actual_network_cost_units = Some(u(u128::MAX / 7));
    moved.failure_reason = Some("none".into());
    moved.history.push(WithdrawalStep {
        status: "confirmed".into(),
        tx_hash: Some("ab".repeat(32)),
        at: "2027-01-15T08:01:00.000Z".into(),
    });
    moved.updated_at = at(99);
    let mut tampered = moved.clone();
    tampered.amount = u(1);
    tampered.destination_address = "0x00000000000000000000000000000000000000cC".into();
    w(s, move |tx| tx.update_withdrawal(&tampered))
        .await
        .unwrap();
    assert_eq!(r(s, |tx| tx.withdrawal_by_id(uid(10))).await, Some(moved));
    let missing = withdrawal(12, &quote(2, "acme"));
    assert_port_error(w(s, move |tx| tx.update_withdrawal(&missing)).await);
}

async fn every_tenants_withdrawals_are_listed_newest_first(store: Arc<dyn Store>) {
    let s = store.as_ref();
    // (withdrawal n, tenant, created at): two share a time, ordered by id then.
    let rows = [
        (10, "acme", 5),
        (11, "beta", 9),
        (12, "acme", 9),
        (13, "beta", 1),
    ];
    for (n, tenant, t) in rows {
        let q = quote(n + 100, tenant);
        let mut wd = withdrawal(n, &q);
        wd.created_at = at(t);
        // Two on their way, two final: what the pending count tells apart.
        wd.status = match n {
            10 => WithdrawalStatus::Reserved,
            11 => WithdrawalStatus::Broadcasted,
            12 => WithdrawalStatus::Confirmed,
            _ => WithdrawalStatus::Failed,
        };
        w(s, move |tx| {
            tx.insert_quote(&q)?;
            tx.insert_withdrawal(&wd)
        })
        .await
        .unwrap();
    }
    let ids = |v: Vec<Withdrawal>| v.iter().map(|w| w.id).collect::<Vec<_>>();
    assert_eq!(
        ids(r(s, |tx| tx
            .list_withdrawals(custody_core::page::Page::first(10))
            .map(super::rows))
        .await),
        [uid(12), uid(11), uid(10), uid(13)]
    );
    assert_eq!(
        ids(r(s, |tx| tx
            .list_withdrawals(custody_core::page::Page::first(2))
            .map(super::rows))
        .await),
        [uid(12), uid(11)]
    );
    assert!(r(s, |tx| tx
        .list_withdrawals(custody_core::page::Page::first(0))
        .map(super::rows))
    .await
    .is_empty());
    super::check_paging(s, 1, |tx, p| tx.list_withdrawals(p), |w| w.id).await;
    assert_eq!(r(s, |tx| tx.pending_withdrawal_count()).await, 2);
}
