//! [`SweepRepo`](custody_core::sweep::SweepRepo): sweeps and treasury fundings kept exactly, one open
//! sweep per (network, address) by constraint, only their state moving on update, the funded
//! sweeps still waiting for their transfer, every record listed newest first, and the flows
//! of confirmed records per address.

use std::sync::Arc;

use custody_core::amount::Amount;
use custody_core::network::Network;
use custody_core::ports::signer::HdPath;
use custody_core::ports::store::Store;
use custody_core::sweep::{Funding, FundingKind, FundingStatus, Sweep, SweepStatus, SweepStep};

use super::{assert_port_error, at, r, suite, uid, w};

suite!(
    /// Sweeps and treasury fundings.
    sweep_suite {
        sweeps_round_trip_and_only_their_state_moves,
        one_open_sweep_per_address,
        fundings_round_trip_and_funded_sweeps_wait_for_their_transfer,
        sweeps_and_fundings_are_listed_newest_first,
        flows_count_confirmed_records_per_address,
        energy_delegations_round_trip_and_open_fundings_are_listed,
    }
);

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn sweep(n: u128, network: Network, address: &str, status: SweepStatus) -> Sweep {
    Sweep {
        id: uid(n),
        network,
        asset: "USDT".into(),
        address: address.into(),
        path: HdPath {
            network,
            account: 3,
            index: 9,
        },
        to: "hot".into(),
        amount: u(u128::MAX / 3),
        status,
        funding_id: None,
        delegation_id: None,
        outgoing_id: Some(uid(n + 1_000)),
        planned_fee_native: u(21_000),
        fee_native: None,
        tx_hash: None,
        block_number: None,
        failure_reason: None,
        history: vec![SweepStep {
            status: status.as_str().into(),
            tx_hash: None,
            at: "2026-11-24T00:00:00Z".into(),
            detail: String::new(),
        }],
        created_at: at(i64::try_from(n).unwrap()),
        updated_at: at(i64::try_from(n).unwrap()),
    }
}

fn funding(n: u128, sweep_id: u128, status: FundingStatus) -> Funding {
    Funding {
        id: uid(n),
        network: Network::Bsc,
        kind: FundingKind::Native,
        asset: "BNB".into(),
        address: "0xabc".into(),
        from: "hot".into(),
        amount: u(60_000),
        energy: None,
        waits_for: None,
        reclaim_id: None,
        reclaims: None,
        sweep_id: Some(uid(sweep_id)),
        outgoing_id: uid(n + 1_000),
        status,
        fee_native: None,
        tx_hash: None,
        block_number: None,
        failure_reason: None,
        history: Vec::new(),
        created_at: at(i64::try_from(n).unwrap()),
        updated_at: at(i64::try_from(n).unwrap()),
    }
}

async fn sweeps_round_trip_and_only_their_state_moves(store: Arc<dyn Store>) {
    let s = sweep(1, Network::Bsc, "0xabc", SweepStatus::Planned);
    let stored = s.clone();
    w(store.as_ref(), move |tx| tx.insert_sweep(&stored))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.sweep_by_id(uid(1))).await,
        Some(s.clone())
    );
    assert_eq!(r(store.as_ref(), |tx| tx.sweep_by_id(uid(2))).await, None);
    let dup = s.clone();
    assert_port_error(w(store.as_ref(), move |tx| tx.insert_sweep(&dup)).await);
    let mut moved = s.clone();
    moved.status = SweepStatus::Confirmed;
    moved.fee_native = Some(u(20_000));
    moved.tx_hash = Some("ab".repeat(32));
    moved.block_number = Some(u64::MAX >> 1);
    moved.failure_reason = Some("why".into());
    moved.history.push(SweepStep {
        status: "confirmed".into(),
        tx_hash: Some("ab".repeat(32)),
        at: "2026-11-24T00:01:00Z".into(),
        detail: "d".into(),
    });
    moved.updated_at = at(99);
    // What is swept and from where is fixed at insert.
    let mut attempt = moved.clone();
    attempt.address = "0xother".into();
    attempt.asset = "BNB".into();
    w(store.as_ref(), move |tx| tx.update_sweep(&attempt))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.sweep_by_id(uid(1))).await,
        Some(moved)
    );
    let missing = sweep(5, Network::Bsc, "0xabc", SweepStatus::Planned);
    assert_port_error(w(store.as_ref(), move |tx| tx.update_sweep(&missing)).await);
}

async fn one_open_sweep_per_address(store: Arc<dyn Store>) {
    let open = sweep(1, Network::Bsc, "0xabc", SweepStatus::Broadcasted);
    w(store.as_ref(), move |tx| tx.insert_sweep(&open))
        .await
        .unwrap();
    let second = sweep(2, Network::Bsc, "0xabc", SweepStatus::Planned);
    assert_port_error(w(store.as_ref(), move |tx| tx.insert_sweep(&second)).await);
    // Another address, or the same one on the other network, is another sweep.
    let other = sweep(3, Network::Bsc, "0xdef", SweepStatus::Funding);
    let tron = sweep(4, Network::Tron, "0xabc", SweepStatus::Planned);
    w(store.as_ref(), move |tx| {
        tx.insert_sweep(&other)?;
        tx.insert_sweep(&tron)
    })
    .await
    .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.open_sweep_at(Network::Bsc, "0xabc"))
            .await
            .map(|s| s.id),
        Some(uid(1))
    );
    // Ended, it no longer holds the address.
    let mut done = sweep(1, Network::Bsc, "0xabc", SweepStatus::Failed);
    done.updated_at = at(50);
    w(store.as_ref(), move |tx| tx.update_sweep(&done))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.open_sweep_at(Network::Bsc, "0xabc")).await,
        None
    );
    assert_eq!(
        r(store.as_ref(), |tx| tx
            .latest_sweep_at(Network::Bsc, "0xabc"))
        .await
        .map(|s| (s.id, s.status)),
        Some((uid(1), SweepStatus::Failed)),
        "the newest, ended or not"
    );
    assert_eq!(
        r(store.as_ref(), |tx| tx
            .latest_sweep_at(Network::Bsc, "0xnone"))
        .await,
        None
    );
    let again = sweep(5, Network::Bsc, "0xabc", SweepStatus::Planned);
    w(store.as_ref(), move |tx| tx.insert_sweep(&again))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx
            .latest_sweep_at(Network::Bsc, "0xabc"))
        .await
        .map(|s| s.id),
        Some(uid(5))
    );
}

async fn fundings_round_trip_and_funded_sweeps_wait_for_their_transfer(store: Arc<dyn Store>) {
    let mut waiting = sweep(1, Network::Bsc, "0xabc", SweepStatus::Funding);
    waiting.outgoing_id = None;
    waiting.funding_id = Some(uid(10));
    let mut started = sweep(2, Network::Bsc, "0xdef", SweepStatus::Funding);
    started.funding_id = Some(uid(11));
    let f = funding(10, 1, FundingStatus::Planned);
    let (a, b, stored) = (waiting.clone(), started.clone(), f.clone());
    w(store.as_ref(), move |tx| {
        tx.insert_sweep(&a)?;
        tx.insert_sweep(&b)?;
        tx.insert_funding(&stored)
    })
    .await
    .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.funding_by_id(uid(10))).await,
        Some(f.clone())
    );
    let dup = f.clone();
    assert_port_error(w(store.as_ref(), move |tx| tx.insert_funding(&dup)).await);
    let awaiting = r(store.as_ref(), |tx| {
        tx.sweeps_awaiting_transfer(Network::Bsc)
    })
    .await;
    assert_eq!(awaiting.iter().map(|s| s.id).collect::<Vec<_>>(), [uid(1)]);
    assert!(r(store.as_ref(), |tx| tx
        .sweeps_awaiting_transfer(Network::Tron))
    .await
    .is_empty());
    let mut moved = f.clone();
    moved.status = FundingStatus::Confirmed;
    moved.fee_native = Some(u(21_000));
    moved.tx_hash = Some("cd".repeat(32));
    moved.block_number = Some(7);
    moved.history.push(SweepStep {
        status: "confirmed".into(),
        tx_hash: None,
        at: "x".into(),
        detail: String::new(),
    });
    moved.updated_at = at(80);
    let mut attempt = moved.clone();
    attempt.amount = u(1);
    w(store.as_ref(), move |tx| tx.update_funding(&attempt))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.funding_by_id(uid(10))).await,
        Some(moved)
    );
    // Its transfer created, the sweep no longer waits.
    let mut with_transfer = waiting.clone();
    with_transfer.outgoing_id = Some(uid(99));
    with_transfer.amount = u(5);
    w(store.as_ref(), move |tx| tx.update_sweep(&with_transfer))
        .await
        .unwrap();
    assert!(r(store.as_ref(), |tx| tx
        .sweeps_awaiting_transfer(Network::Bsc))
    .await
    .is_empty());
    let missing = funding(12, 1, FundingStatus::Planned);
    assert_port_error(w(store.as_ref(), move |tx| tx.update_funding(&missing)).await);
}

async fn sweeps_and_fundings_are_listed_newest_first(store: Arc<dyn Store>) {
    w(store.as_ref(), move |tx| {
        for n in 1..=3u128 {
            tx.insert_sweep(&sweep(
                n,
                Network::Bsc,
                &format!("0x{n}"),
                SweepStatus::Planned,
            ))?;
            tx.insert_funding(&funding(10 + n, n, FundingStatus::Planned))?;
        }
        Ok(())
    })
    .await
    .unwrap();
    let ids = |v: Vec<uuid::Uuid>| v;
    assert_eq!(
        ids(r(store.as_ref(), |tx| tx
            .list_sweeps(custody_core::page::Page::first(2))
            .map(super::rows))
        .await
        .iter()
        .map(|s| s.id)
        .collect()),
        [uid(3), uid(2)]
    );
    assert_eq!(
        ids(r(store.as_ref(), |tx| tx
            .list_fundings(custody_core::page::Page::first(5))
            .map(super::rows))
        .await
        .iter()
        .map(|f| f.id)
        .collect()),
        [uid(13), uid(12), uid(11)]
    );
    super::check_paging(store.as_ref(), 2, |tx, p| tx.list_sweeps(p), |x| x.id).await;
    super::check_paging(store.as_ref(), 2, |tx, p| tx.list_fundings(p), |x| x.id).await;
    // Final sweeps leave the open count.
    w(store.as_ref(), move |tx| {
        tx.insert_sweep(&sweep(4, Network::Bsc, "0x4", SweepStatus::Confirmed))?;
        tx.insert_sweep(&sweep(5, Network::Tron, "T5", SweepStatus::Failed))?;
        tx.insert_sweep(&sweep(6, Network::Tron, "T6", SweepStatus::Broadcasted))
    })
    .await
    .unwrap();
    assert_eq!(r(store.as_ref(), |tx| tx.open_sweep_count()).await, 4);
}

async fn flows_count_confirmed_records_per_address(store: Arc<dyn Store>) {
    let mut swept = sweep(1, Network::Bsc, "0xabc", SweepStatus::Confirmed);
    swept.amount = u(500);
    swept.fee_native = Some(u(7));
    let mut failed = sweep(2, Network::Bsc, "0xabc", SweepStatus::Failed);
    failed.fee_native = Some(u(3));
    let open = sweep(3, Network::Bsc, "0xdef", SweepStatus::Broadcasted);
    let funded = funding(10, 1, FundingStatus::Confirmed);
    let unfunded = funding(11, 1, FundingStatus::Failed);
    w(store.as_ref(), move |tx| {
        tx.insert_sweep(&swept)?;
        tx.insert_sweep(&failed)?;
        tx.insert_sweep(&open)?;
        tx.insert_funding(&funded)?;
        tx.insert_funding(&unfunded)
    })
    .await
    .unwrap();
    let flows = r(store.as_ref(), |tx| tx.sweep_flows(Network::Bsc, "BNB")).await;
    let of = |asset: &str| {
        flows
            .iter()
            .find(|f| f.address == "0xabc" && f.asset == asset)
            .map(|f| (f.arrived, f.left))
    };
    assert_eq!(of("USDT"), Some((u(0), u(500))));
    assert_eq!(of("BNB"), Some((u(60_000), u(10))));
    assert!(flows.iter().all(|f| f.address != "0xdef"), "{flows:?}");
    assert!(r(store.as_ref(), |tx| tx.sweep_flows(Network::Tron, "TRX"))
        .await
        .is_empty());
}

/// A TRON delegation waiting for its native funding, then sent and reclaimed: its kind, energy
/// and links are kept, `waits_for` and `reclaim_id` move; open fundings are the planned and
/// broadcasted ones of the network, oldest first; a confirmed delegation moves no coin.
async fn energy_delegations_round_trip_and_open_fundings_are_listed(store: Arc<dyn Store>) {
    let mut s = sweep(1, Network::Tron, "Taddr", SweepStatus::Funding);
    s.outgoing_id = None;
    s.funding_id = Some(uid(10));
    s.delegation_id = Some(uid(11));
    let mut native = funding(10, 1, FundingStatus::Broadcasted);
    native.network = Network::Tron;
    native.asset = "TRX".into();
    native.address = "Taddr".into();
    let mut d = funding(11, 1, FundingStatus::Planned);
    d.network = Network::Tron;
    d.kind = FundingKind::EnergyDelegation;
    d.asset = "TRX".into();
    d.address = "Taddr".into();
    d.amount = u(14_332_000_000);
    d.energy = Some(143_313);
    d.waits_for = Some(uid(10));
    let mut done = funding(12, 1, FundingStatus::Confirmed);
    done.network = Network::Tron;
    let (a, b, c, e) = (s.clone(), native.clone(), d.clone(), done.clone());
    w(store.as_ref(), move |tx| {
        tx.insert_sweep(&a)?;
        tx.insert_funding(&b)?;
        tx.insert_funding(&c)?;
        tx.insert_funding(&e)
    })
    .await
    .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.sweep_by_id(uid(1))).await,
        Some(s)
    );
    assert_eq!(
        r(store.as_ref(), |tx| tx.funding_by_id(uid(11))).await,
        Some(d.clone())
    );
    let open = r(store.as_ref(), |tx| tx.open_fundings(Network::Tron)).await;
    assert_eq!(
        open.iter().map(|f| f.id).collect::<Vec<_>>(),
        [uid(10), uid(11)]
    );
    assert!(r(store.as_ref(), |tx| tx.open_fundings(Network::Bsc))
        .await
        .is_empty());
    let mut sent = d.clone();
    sent.waits_for = None;
    sent.status = FundingStatus::Confirmed;
    sent.reclaim_id = Some(uid(13));
    sent.updated_at = at(70);
    // Kind, energy and what it reclaims are fixed at insert.
    let mut attempt = sent.clone();
    attempt.kind = FundingKind::Native;
    attempt.energy = None;
    attempt.reclaims = Some(uid(1));
    w(store.as_ref(), move |tx| tx.update_funding(&attempt))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.funding_by_id(uid(11))).await,
        Some(sent)
    );
    let mut reclaim = funding(13, 1, FundingStatus::Planned);
    reclaim.network = Network::Tron;
    reclaim.kind = FundingKind::EnergyReclaim;
    reclaim.reclaims = Some(uid(11));
    let stored = reclaim.clone();
    w(store.as_ref(), move |tx| tx.insert_funding(&stored))
        .await
        .unwrap();
    assert_eq!(
        r(store.as_ref(), |tx| tx.funding_by_id(uid(13))).await,
        Some(reclaim)
    );
    let flows = r(store.as_ref(), |tx| tx.sweep_flows(Network::Tron, "TRX")).await;
    assert!(
        flows.iter().all(|f| f.address != "Taddr"),
        "a delegation lends energy, no coin: {flows:?}"
    );
}
