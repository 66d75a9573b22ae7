//! [`SwapRepo`](custody_core::swap::SwapRepo): swap quotes used once, one swap per quote, records
//! kept exactly and per tenant, every tenant's swaps newest first, and router allowances one
//! per (network, owner, token, spender) whatever the case of the addresses.

use std::sync::Arc;

use custody_core::amount::Amount;
use custody_core::network::Network;
use custody_core::ports::store::Store;
use custody_core::swap::{Allowance, Swap, SwapQuote, SwapStatus};
use custody_core::withdrawal::{Costs, Rate, WithdrawalStep};

use super::{assert_port_error, at, r, suite, tid, uid, w};

suite!(
    /// Swap quotes, swaps and router allowances.
    swap_suite {
        swap_quotes_round_trip_and_are_used_once,
        swaps_round_trip_one_per_quote_and_only_their_state_moves,
        every_tenants_swaps_are_listed_newest_first,
        allowances_are_one_per_owner_token_and_spender,
    }
);

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn quote(n: u128, tenant: &str) -> SwapQuote {
    SwapQuote {
        id: uid(n),
        tenant: tid(tenant),
        external_user_id: "alice".into(),
        asset_in: "USDT".into(),
        asset_out: "USDC".into(),
        amount_in: u(u128::MAX / 3),
        route: vec!["USDT".into(), "BNB".into(), "USDC".into()],
        path: vec!["0x01".into(), "0x02".into(), "0x03".into()],
        expected_amount_out: u(u128::MAX / 4),
        min_amount_out: u(u128::MAX / 5),
        slippage_bps: 50,
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
        expires_at: at(30_010),
        used_at: None,
    }
}

fn swap(n: u128, q: &SwapQuote) -> Swap {
    Swap {
        id: uid(n),
        tenant: q.tenant.clone(),
        quote_id: q.id,
        external_user_id: q.external_user_id.clone(),
        asset_in: q.asset_in.clone(),
        asset_out: q.asset_out.clone(),
        amount_in: q.amount_in,
        route: q.route.clone(),
        path: q.path.clone(),
        expected_amount_out: q.expected_amount_out,
        min_amount_out: q.min_amount_out,
        costs: q.costs,
        rate: q.rate,
        status: SwapStatus::Reserved,
        hold_id: uid(n),
        outgoing_id: uid(n + 1_000),
        tx_hash: None,
        block_number: None,
        actual_amount_in: None,
        actual_amount_out: None,
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

async fn swap_quotes_round_trip_and_are_used_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let q = quote(1, "acme");
    let q2 = q.clone();
    w(s, move |tx| tx.insert_swap_quote(&q2)).await.unwrap();
    assert_eq!(
        r(s, |tx| tx.swap_quote(&tid("acme"), uid(1))).await,
        Some(q.clone())
    );
    assert_eq!(r(s, |tx| tx.swap_quote(&tid("other"), uid(1))).await, None);
    let again = q.clone();
    assert_port_error(w(s, move |tx| tx.insert_swap_quote(&again)).await);
    assert!(w(s, |tx| tx.use_swap_quote(uid(1), at(30))).await.unwrap());
    assert!(
        !w(s, |tx| tx.use_swap_quote(uid(1), at(31))).await.unwrap(),
        "used once"
    );
    assert!(!w(s, |tx| tx.use_swap_quote(uid(2), at(31))).await.unwrap());
    let used = r(s, |tx| tx.swap_quote(&tid("acme"), uid(1)))
        .await
        .unwrap();
    assert_eq!(used.used_at, Some(at(30)));
}

async fn swaps_round_trip_one_per_quote_and_only_their_state_moves(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let q = quote(1, "acme");
    let (q2, sw) = (q.clone(), swap(10, &q));
    let sw2 = sw.clone();
    w(s, move |tx| {
        tx.insert_swap_quote(&q2)?;
        tx.insert_swap(&sw2)
    })
    .await
    .unwrap();
    assert_eq!(
        r(s, |tx| tx.swap(&tid("acme"), uid(10))).await,
        Some(sw.clone())
    );
    assert_eq!(r(s, |tx| tx.swap(&tid("other"), uid(10))).await, None);
    assert_eq!(r(s, |tx| tx.swap_by_id(uid(10))).await, Some(sw.clone()));
    let same_quote = swap(11, &q);
    assert_port_error(w(s, move |tx| tx.insert_swap(&same_quote)).await);
    let no_quote = swap(12, &quote(9, "acme"));
    assert_port_error(w(s, move |tx| tx.insert_swap(&no_quote)).await);

    let mut moved = sw.clone();
    moved.status = SwapStatus::Confirmed;
    moved.tx_hash = Some("ab".repeat(32));
    moved.block_number = Some(77);
    moved.actual_amount_in = Some(u(u128::MAX / 3));
    moved.actual_amount_out = Some(u(u128::MAX / 4 + 1));
    moved.actual_network_cost_units = Some(u(u128::MAX / 7));
    moved.failure_reason = Some("none".into());
    moved.history.push(WithdrawalStep {
        status: "confirmed".into(),
        tx_hash: Some("ab".repeat(32)),
        at: "2027-01-15T08:01:00.000Z".into(),
    });
    moved.updated_at = at(99);
    let mut tampered = moved.clone();
    tampered.amount_in = u(1);
    tampered.route = vec!["BNB".into()];
    w(s, move |tx| tx.update_swap(&tampered)).await.unwrap();
    assert_eq!(r(s, |tx| tx.swap_by_id(uid(10))).await, Some(moved));
    let missing = swap(13, &quote(2, "acme"));
    assert_port_error(w(s, move |tx| tx.update_swap(&missing)).await);
}

async fn every_tenants_swaps_are_listed_newest_first(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let rows = [
        (10, "acme", 5),
        (11, "beta", 9),
        (12, "acme", 9),
        (13, "beta", 1),
    ];
    for (n, tenant, t) in rows {
        let q = quote(n + 100, tenant);
        let mut sw = swap(n, &q);
        sw.created_at = at(t);
        // Two on their way, two final: what the pending count tells apart.
        sw.status = match n {
            10 => SwapStatus::Reserved,
            11 => SwapStatus::Broadcasted,
            12 => SwapStatus::Confirmed,
            _ => SwapStatus::Failed,
        };
        w(s, move |tx| {
            tx.insert_swap_quote(&q)?;
            tx.insert_swap(&sw)
        })
        .await
        .unwrap();
    }
    let ids = |v: Vec<Swap>| v.iter().map(|x| x.id).collect::<Vec<_>>();
    assert_eq!(
        ids(r(s, |tx| tx
            .list_swaps(custody_core::page::Page::first(10))
            .map(super::rows))
        .await),
        [uid(12), uid(11), uid(10), uid(13)]
    );
    assert_eq!(
        ids(r(s, |tx| tx
            .list_swaps(custody_core::page::Page::first(1))
            .map(super::rows))
        .await),
        [uid(12)]
    );
    super::check_paging(s, 1, |tx, p| tx.list_swaps(p), |x| x.id).await;
    assert_eq!(r(s, |tx| tx.pending_swap_count()).await, 2);
}

async fn allowances_are_one_per_owner_token_and_spender(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let (owner, token, spender) = (
        "0xAbCd000000000000000000000000000000000001",
        "0xAbCd000000000000000000000000000000000002",
        "0xAbCd000000000000000000000000000000000003",
    );
    let get = move |net: Network| r(s, move |tx| tx.allowance(net, owner, token, spender));
    assert_eq!(get(Network::Bsc).await, None);
    let a = Allowance {
        network: Network::Bsc,
        owner: owner.into(),
        token: token.into(),
        spender: spender.into(),
        remaining: u(u128::MAX),
        approval_outgoing_id: uid(1),
    };
    let a2 = a.clone();
    w(s, move |tx| tx.put_allowance(&a2)).await.unwrap();
    assert_eq!(
        get(Network::Bsc).await.map(|x| x.remaining),
        Some(u(u128::MAX))
    );
    // Named in another case: the same allowance, replaced.
    let mut lower = a.clone();
    lower.owner = owner.to_lowercase();
    lower.token = token.to_uppercase().replace("0X", "0x");
    lower.remaining = u(5);
    lower.approval_outgoing_id = uid(2);
    w(s, move |tx| tx.put_allowance(&lower)).await.unwrap();
    let now = get(Network::Bsc).await.unwrap();
    assert_eq!((now.remaining, now.approval_outgoing_id), (u(5), uid(2)));
    assert_eq!(get(Network::Tron).await, None, "per network");
    // Listed for the owner, in any case, in lowercase; another spender of the same token too.
    let mut other = a.clone();
    other.spender = "0xAbCd000000000000000000000000000000000004".into();
    other.approval_outgoing_id = uid(3);
    w(s, move |tx| tx.put_allowance(&other)).await.unwrap();
    let listed = r(s, move |tx| {
        tx.allowances_of(Network::Bsc, &owner.to_uppercase().replace("0X", "0x"))
    })
    .await;
    let seen: Vec<_> = listed
        .iter()
        .map(|x| (x.spender.clone(), x.remaining, x.approval_outgoing_id))
        .collect();
    assert_eq!(
        seen,
        [
            (spender.to_lowercase(), u(5), uid(2)),
            (
                "0xabcd000000000000000000000000000000000004".to_owned(),
                u(u128::MAX),
                uid(3)
            ),
        ]
    );
    assert!(listed.iter().all(|x| x.owner == owner.to_lowercase()
        && x.token == token.to_lowercase()
        && x.network == Network::Bsc));
    assert!(r(s, move |tx| tx.allowances_of(Network::Tron, owner))
        .await
        .is_empty());
    w(s, |tx| {
        tx.drop_allowance(
            Network::Bsc,
            "0xabcd000000000000000000000000000000000001",
            "0xabcd000000000000000000000000000000000002",
            "0xabcd000000000000000000000000000000000004",
        )
    })
    .await
    .unwrap();
    w(s, move |tx| {
        tx.drop_allowance(
            Network::Bsc,
            &owner.to_uppercase().replace("0X", "0x"),
            token,
            spender,
        )
    })
    .await
    .unwrap();
    assert_eq!(get(Network::Bsc).await, None);
}
