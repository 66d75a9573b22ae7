//! [`OutgoingRepo`](custody_core::outgoing::OutgoingRepo): outgoing transactions, their leases, and
//! the EVM nonce allocator.

use std::sync::Arc;

use custody_core::amount::Amount;
use custody_core::outgoing::{Attempt, Bid, Included, OutStatus, OutgoingTx, Purpose};
use custody_core::ports::sender::Payment;
use custody_core::ports::signer::HdPath;
use custody_core::ports::store::Store;
use custody_core::Network;

use super::{assert_port_error, at, r, suite, uid, w};

suite!(
    /// Outgoing transactions: one per paying record, nonces unique per sender, leases that run
    /// out, attempts and history kept exactly.
    outgoing_suite {
        transactions_round_trip_and_only_their_state_moves,
        one_payment_per_record_and_one_transaction_per_nonce,
        nonces_are_allocated_once_from_the_seed,
        nonces_beyond_a_bigint_are_refused_not_clamped,
        claims_are_leases_of_due_unfinished_transactions,
        a_stale_lease_cannot_write_over_the_broadcaster_that_took_over,
        a_nonce_is_set_once_at_signing_and_stays_unique,
        an_attempt_belongs_to_one_transaction,
        a_transaction_is_found_by_any_of_its_attempts,
        of_two_payments_of_one_sender_funded_by_one_check_only_one_is_recorded,
    }
);

const HOT: &str = "0x00000000000000000000000000000000000000aa";

fn outgoing(n: u128, reference: u128, nonce: Option<u64>, created: i64) -> OutgoingTx {
    OutgoingTx::new(
        uid(n),
        Network::Bsc,
        Purpose::Withdrawal,
        uid(reference),
        HOT.to_owned(),
        HdPath {
            network: Network::Bsc,
            account: 2_147_483_647,
            index: 0,
        },
        Payment::Token {
            contract: "0x55d398326f99059fF775485246999027B3197955".into(),
            to: "0x00000000000000000000000000000000000000bb".into(),
            amount: Amount::from_units(u128::MAX - n),
        },
        nonce,
        at(created),
    )
}

fn attempt(hash: &str) -> Attempt {
    Attempt {
        hash: hash.into(),
        raw: vec![0xf8, 0x6b, 0x00, 0xff],
        bid: Bid::Gas {
            gas_limit: 60_000,
            gas_price_wei: u128::MAX / 3,
        },
        expires_at_ms: None,
        signed_at: at(20),
        sent_at: Some(at(21)),
        last_answer: Some(custody_core::ports::sender::BroadcastOutcome::Accepted),
        // A TRON plan, so that the round trip covers it (BSC stores none).
        plan: Some(custody_core::tron::resources::plan(
            &custody_core::tron::resources::PlanInputs {
                operation: custody_core::tron::resources::Operation::Trc20Transfer {
                    recipient_holds_token: false,
                    estimated_energy: Some(130_285),
                },
                bandwidth_bytes: 345,
                available: custody_core::tron::resources::AvailableResources::default(),
                prices: custody_core::tron::resources::ResourcePrices::MAINNET,
                energy_margin_percent: 20,
            },
        )),
        reference_block: Some(58_000_001),
        void: false,
    }
}

async fn transactions_round_trip_and_only_their_state_moves(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let t = outgoing(1, 100, Some(7), 10);
    let t2 = t.clone();
    w(s, move |tx| tx.insert_outgoing(&t2)).await.unwrap();
    assert_eq!(r(s, |tx| tx.outgoing(uid(1))).await, Some(t.clone()));
    assert_eq!(
        r(s, |tx| tx.outgoing_for(Purpose::Withdrawal, uid(100))).await,
        Some(t.clone())
    );
    assert_eq!(r(s, |tx| tx.outgoing(uid(2))).await, None);

    let mut moved = t.clone();
    moved.add_attempt(attempt("aa"), at(20)).unwrap();
    moved
        .transition(OutStatus::Sent, "accepted", at(21))
        .unwrap();
    moved.included = Some(Included {
        hash: "aa".into(),
        block_number: 99,
        block_hash: "bb".into(),
        succeeded: false,
        fee_native: Amount::from_units(u128::MAX - 1),
        moves: vec![custody_core::ports::sender::TokenMove {
            contract: "0x0000000000000000000000000000000000000001".into(),
            kind: custody_core::ports::sender::MoveKind::Unwrap,
            from: "0x0000000000000000000000000000000000000002".into(),
            to: "0x0000000000000000000000000000000000000002".into(),
            amount: Amount::from_units(u128::MAX),
        }],
        resources: Some(custody_core::tron::resources::ActualResources {
            energy_usage: 1,
            energy_usage_total: 130_285,
            energy_fee: 13_028_400,
            net_usage: 0,
            net_fee: 345_000,
            fee: 13_373_400,
        }),
        block_time_ms: Some(1_800_000_000_000),
    });
    moved.failure_reason = Some("reverted".into());
    moved.next_check_at = at(30);
    // What the transaction is cannot be rewritten by an update: another payment is ignored,
    // another nonce refused (bytes signed with it would not be the transaction's).
    let mut renonced = moved.clone();
    renonced.nonce = Some(8);
    assert_port_error(w(s, move |tx| tx.update_outgoing(&renonced)).await);
    let mut tampered = moved.clone();
    tampered.payment = Payment::Native {
        to: "0x00000000000000000000000000000000000000cc".into(),
        amount: Amount::from_units(1),
    };
    w(s, move |tx| tx.update_outgoing(&tampered)).await.unwrap();
    assert_eq!(r(s, |tx| tx.outgoing(uid(1))).await, Some(moved));
    let missing = outgoing(5, 500, None, 10);
    assert_port_error(w(s, move |tx| tx.update_outgoing(&missing)).await);
}

async fn one_payment_per_record_and_one_transaction_per_nonce(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = outgoing(1, 100, Some(7), 10);
    w(s, move |tx| tx.insert_outgoing(&first)).await.unwrap();
    // A second payment for the same withdrawal: refused, whatever its id or nonce.
    let again = outgoing(2, 100, Some(8), 11);
    assert_port_error(w(s, move |tx| tx.insert_outgoing(&again)).await);
    // The same nonce of the same sender: refused.
    let same_nonce = outgoing(3, 101, Some(7), 12);
    assert_port_error(w(s, move |tx| tx.insert_outgoing(&same_nonce)).await);
    let same_id = outgoing(1, 102, Some(9), 12);
    assert_port_error(w(s, move |tx| tx.insert_outgoing(&same_id)).await);
    // No nonce (TRON): any number of them.
    let (a, b) = (outgoing(4, 103, None, 13), outgoing(5, 104, None, 14));
    w(s, move |tx| {
        tx.insert_outgoing(&a)?;
        tx.insert_outgoing(&b)
    })
    .await
    .unwrap();
    let open = r(s, |tx| tx.outgoing_in_flight(Network::Bsc, HOT)).await;
    let ids: Vec<_> = open.iter().map(|t| t.id).collect();
    assert_eq!(ids, [uid(1), uid(4), uid(5)], "oldest first");
    assert!(r(s, |tx| tx.outgoing_in_flight(Network::Tron, HOT))
        .await
        .is_empty());
    assert_eq!(
        r(s, |tx| Ok((
            tx.unfinished_outgoing_count(Network::Bsc)?,
            tx.unfinished_outgoing_count(Network::Tron)?
        )))
        .await,
        (3, 0)
    );
    // A final one leaves the queue.
    let mut done = r(s, |tx| tx.outgoing(uid(5))).await.expect("stored");
    done.status = OutStatus::Failed;
    w(s, move |tx| tx.update_outgoing(&done)).await.unwrap();
    assert_eq!(
        r(s, |tx| tx.unfinished_outgoing_count(Network::Bsc)).await,
        2
    );
}

async fn nonces_are_allocated_once_from_the_seed(store: Arc<dyn Store>) {
    let s = store.as_ref();
    assert_eq!(r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await, None);
    let first = w(s, |tx| tx.allocate_nonce(Network::Bsc, HOT, 41))
        .await
        .unwrap();
    assert_eq!(first, 41, "the chain's confirmed nonce seeds the allocator");
    // Later seeds are ignored: the allocator is the truth once it exists.
    let second = w(s, |tx| tx.allocate_nonce(Network::Bsc, HOT, 0))
        .await
        .unwrap();
    assert_eq!(second, 42);
    // A job that fails after allocating gives its nonce back: no gap is left behind.
    let failed = w(s, |tx| {
        tx.allocate_nonce(Network::Bsc, HOT, 0)?;
        Err::<(), _>(custody_core::error::PortError::permanent(
            "test",
            "build failed",
        ))
    })
    .await;
    assert!(failed.is_err());
    assert_eq!(r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await, Some(43));
    let other = w(s, |tx| tx.allocate_nonce(Network::Tron, HOT, 5))
        .await
        .unwrap();
    assert_eq!(other, 5, "per network and address");
    // Moved forward to where the chain is (a restored backup), never back, never seeded by it.
    assert!(w(s, |tx| tx.advance_nonce(Network::Bsc, HOT, 50))
        .await
        .unwrap());
    assert_eq!(r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await, Some(50));
    assert!(!w(s, |tx| tx.advance_nonce(Network::Bsc, HOT, 7))
        .await
        .unwrap());
    assert!(!w(s, |tx| tx.advance_nonce(Network::Bsc, HOT, 50))
        .await
        .unwrap());
    assert_eq!(r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await, Some(50));
    let next = w(s, |tx| tx.allocate_nonce(Network::Bsc, HOT, 0))
        .await
        .unwrap();
    assert_eq!(next, 50);
    assert!(!w(s, |tx| tx.advance_nonce(Network::Bsc, "0xnever", 9))
        .await
        .unwrap());
    assert_eq!(
        r(s, |tx| tx.next_nonce(Network::Bsc, "0xnever")).await,
        None
    );
}

/// Any nonce a BIGINT holds is kept as it is (a seed above 2^31 too); one above it is refused,
/// never stored as another number, and leaves the allocator as it was.
async fn nonces_beyond_a_bigint_are_refused_not_clamped(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let seed = 1_u64 << 40;
    let first = w(s, move |tx| tx.allocate_nonce(Network::Bsc, HOT, seed))
        .await
        .unwrap();
    let second = w(s, |tx| tx.allocate_nonce(Network::Bsc, HOT, 0))
        .await
        .unwrap();
    assert_eq!((first, second), (seed, seed + 1));
    assert!(
        w(s, |tx| tx.allocate_nonce(Network::Bsc, "0xbig", u64::MAX))
            .await
            .is_err()
    );
    assert_eq!(r(s, |tx| tx.next_nonce(Network::Bsc, "0xbig")).await, None);
    assert!(w(s, |tx| tx.advance_nonce(Network::Bsc, HOT, u64::MAX))
        .await
        .is_err());
    assert_eq!(
        r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await,
        Some(seed + 2)
    );
}

async fn claims_are_leases_of_due_unfinished_transactions(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let due = outgoing(1, 100, Some(1), 10);
    let mut later = outgoing(2, 101, Some(2), 11);
    later.next_check_at = at(1_000);
    let mut done = outgoing(3, 102, Some(3), 12);
    done.add_attempt(attempt("aa"), at(20)).unwrap();
    done.included = Some(Included {
        hash: "aa".into(),
        block_number: 1,
        block_hash: "bb".into(),
        succeeded: true,
        fee_native: Amount::from_units(1),
        moves: Vec::new(),
        resources: None,
        block_time_ms: None,
    });
    done.transition(OutStatus::Included, "", at(21)).unwrap();
    done.transition(OutStatus::Final, "", at(22)).unwrap();
    let tron = OutgoingTx {
        network: Network::Tron,
        ..outgoing(4, 103, None, 13)
    };
    w(s, move |tx| {
        tx.insert_outgoing(&due)?;
        tx.insert_outgoing(&later)?;
        tx.insert_outgoing(&done)?;
        tx.insert_outgoing(&tron)
    })
    .await
    .unwrap();
    let claim = |now: i64, until: i64| {
        w(s, move |tx| {
            tx.claim_outgoing(Network::Bsc, at(now), at(until), 10)
        })
    };
    let first = claim(100, 200).await.unwrap();
    assert_eq!(first.iter().map(|t| t.id).collect::<Vec<_>>(), [uid(1)]);
    // Leased: nobody else gets it before the lease runs out.
    assert!(claim(150, 250).await.unwrap().is_empty());
    let after = claim(200, 300).await.unwrap();
    assert_eq!(after.iter().map(|t| t.id).collect::<Vec<_>>(), [uid(1)]);
    // An update ends the lease; the next check decides when it is due again.
    let mut t = after[0].clone();
    t.next_check_at = at(250);
    w(s, move |tx| tx.update_outgoing(&t)).await.unwrap();
    assert!(claim(240, 400).await.unwrap().is_empty());
    let both = claim(1_000, 1_100).await.unwrap();
    assert_eq!(
        both.iter().map(|t| t.id).collect::<Vec<_>>(),
        [uid(1), uid(2)],
        "due first, oldest first; the final one never"
    );
}

async fn a_stale_lease_cannot_write_over_the_broadcaster_that_took_over(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let t = outgoing(1, 100, Some(1), 10);
    w(s, move |tx| tx.insert_outgoing(&t)).await.unwrap();
    // A claims with a lease to 100; its step outlives it; B claims at 200.
    let a = w(s, |tx| tx.claim_outgoing(Network::Bsc, at(50), at(100), 10))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(a.lease, Some(at(100)));
    let b = w(s, |tx| {
        tx.claim_outgoing(Network::Bsc, at(200), at(300), 10)
    })
    .await
    .unwrap()
    .pop()
    .unwrap();
    assert_eq!(b.lease, Some(at(300)));
    // A's writes fail (transient: it gives up the step), its release too; B's go through.
    let mut stale = a.clone();
    stale.history.push(stale.history[0].clone());
    let e = w(s, move |tx| tx.update_outgoing(&stale))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            custody_core::error::CoreError::Port(ref p) if p.retry == custody_core::error::Retry::Transient
        ),
        "{e:?}"
    );
    assert_port_error(w(s, move |tx| tx.release_outgoing(uid(1), at(100))).await);
    let mut moved = b.clone();
    moved.next_check_at = at(250);
    let m2 = moved.clone();
    w(s, move |tx| tx.update_outgoing(&m2)).await.unwrap();
    // Still B's: nobody else may claim it before B releases it or its lease runs out.
    assert!(w(s, |tx| tx.claim_outgoing(
        Network::Bsc,
        at(260),
        at(400),
        10
    ))
    .await
    .unwrap()
    .is_empty());
    w(s, |tx| tx.release_outgoing(uid(1), at(300)))
        .await
        .unwrap();
    let released = w(s, |tx| {
        tx.claim_outgoing(Network::Bsc, at(260), at(400), 10)
    })
    .await
    .unwrap();
    assert_eq!(released.len(), 1, "due and released");
    let stored = r(s, |tx| tx.outgoing(uid(1))).await.unwrap();
    assert_eq!(stored.history.len(), 1, "A's stale write left nothing");
    assert_eq!(stored.lease, None, "a read copy carries no lease");
}

async fn a_nonce_is_set_once_at_signing_and_stays_unique(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let first = outgoing(1, 100, None, 10);
    let second = outgoing(2, 200, None, 10).after(uid(1));
    let (a, b) = (first.clone(), second.clone());
    w(s, move |tx| {
        tx.insert_outgoing(&a)?;
        tx.insert_outgoing(&b)
    })
    .await
    .unwrap();
    assert_eq!(
        r(s, |tx| tx.outgoing(uid(2))).await.unwrap().after,
        Some(uid(1)),
        "the order is kept"
    );
    // The first attempt, signed with the predicted nonce, and the nonce allocated in one job.
    let mut signed = first.clone();
    signed.nonce = Some(41);
    signed.add_attempt(attempt("a1"), at(20)).unwrap();
    let stored = signed.clone();
    assert_eq!(
        custody_core::ports::store::write(s, move |tx| {
            custody_core::outgoing::record_signed(tx, &stored, Some(41), None)
        })
        .await
        .unwrap(),
        custody_core::outgoing::Recorded::Stored
    );
    let got = r(s, |tx| tx.outgoing(uid(1))).await.unwrap();
    assert_eq!((got.nonce, got.attempts.len()), (Some(41), 1));
    // A prediction the allocator does not confirm writes nothing: no nonce without its attempt.
    let mut stale = second.clone();
    stale.nonce = Some(41);
    stale.add_attempt(attempt("b1"), at(20)).unwrap();
    let refused = custody_core::ports::store::write(s, move |tx| {
        custody_core::outgoing::record_signed(tx, &stale, Some(0), None)
    })
    .await;
    assert!(refused.is_err());
    let untouched = r(s, |tx| tx.outgoing(uid(2))).await.unwrap();
    assert_eq!((untouched.nonce, untouched.attempts.len()), (None, 0));
    assert_eq!(
        r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await,
        Some(42),
        "the refused job's allocation was rolled back"
    );
    // Once set it never changes: a later copy with another one is refused.
    let mut again = signed.clone();
    again.nonce = Some(99);
    assert_port_error(w(s, move |tx| tx.update_outgoing(&again)).await);
    assert_eq!(
        r(s, |tx| tx.outgoing(uid(1))).await.unwrap().nonce,
        Some(41)
    );
    // Another transaction of the sender cannot take it.
    let mut clash = second.clone();
    clash.nonce = Some(41);
    assert_port_error(w(s, move |tx| tx.update_outgoing(&clash)).await);
    assert_eq!(r(s, |tx| tx.outgoing(uid(2))).await.unwrap().nonce, None);
    let mut next = second.clone();
    next.nonce = Some(42);
    next.add_attempt(attempt("b2"), at(20)).unwrap();
    // A switch turned on after the broadcaster's check: refused in the write, which stores
    // nothing and allocates nothing.
    let record_next = |next: OutgoingTx| {
        custody_core::ports::store::write(s, move |tx| {
            custody_core::outgoing::record_signed(tx, &next, Some(0), None)
        })
    };
    let switch = |on: bool| {
        let audit = uid(if on { 90 } else { 91 });
        custody_core::ports::store::write(s, move |tx| {
            custody_core::admin::set_control(
                tx,
                audit,
                "ops",
                "maintenance.BSC",
                on,
                "test",
                at(20),
            )
        })
    };
    switch(true).await.unwrap();
    assert_eq!(
        record_next(next.clone()).await.unwrap(),
        custody_core::outgoing::Recorded::Refused
    );
    let untouched = r(s, |tx| tx.outgoing(uid(2))).await.unwrap();
    assert_eq!((untouched.nonce, untouched.attempts.len()), (None, 0));
    assert_eq!(
        r(s, |tx| tx.next_nonce(Network::Bsc, HOT)).await,
        Some(42),
        "no nonce taken under the switch"
    );
    switch(false).await.unwrap();
    assert_eq!(
        record_next(next).await.unwrap(),
        custody_core::outgoing::Recorded::Stored
    );
    assert_eq!(
        r(s, |tx| tx.outgoing(uid(2))).await.unwrap().nonce,
        Some(42),
        "the allocator, seeded once, moves on"
    );
}

async fn an_attempt_belongs_to_one_transaction(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let (a, b) = (outgoing(1, 100, None, 10), outgoing(2, 200, None, 10));
    let (a2, b2) = (a.clone(), b.clone());
    w(s, move |tx| {
        tx.insert_outgoing(&a2)?;
        tx.insert_outgoing(&b2)
    })
    .await
    .unwrap();
    let mut with = a.clone();
    with.add_attempt(attempt("cafe"), at(20)).unwrap();
    let stored = with.clone();
    w(s, move |tx| tx.update_outgoing(&stored)).await.unwrap();
    // Saving the same transaction again is fine; the same bytes as another payment's are not.
    let again = with.clone();
    w(s, move |tx| tx.update_outgoing(&again)).await.unwrap();
    let mut twin = b.clone();
    twin.add_attempt(attempt("cafe"), at(20)).unwrap();
    assert_port_error(w(s, move |tx| tx.update_outgoing(&twin)).await);
    assert!(r(s, |tx| tx.outgoing(uid(2)))
        .await
        .unwrap()
        .attempts
        .is_empty());
    let mut inserted = outgoing(3, 300, None, 10);
    inserted.add_attempt(attempt("cafe"), at(20)).unwrap();
    assert_port_error(w(s, move |tx| tx.insert_outgoing(&inserted)).await);
    // On another network the same hash is another transaction.
    let mut tron = outgoing(4, 400, None, 10);
    tron.network = Network::Tron;
    tron.add_attempt(attempt("cafe"), at(20)).unwrap();
    w(s, move |tx| tx.insert_outgoing(&tron)).await.unwrap();
}

async fn a_transaction_is_found_by_any_of_its_attempts(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let mut a = outgoing(1, 100, Some(0), 10);
    a.add_attempt(attempt("a1"), at(20)).unwrap();
    a.add_attempt(attempt("a2"), at(21)).unwrap();
    let mut tron = outgoing(2, 200, None, 10);
    tron.network = Network::Tron;
    tron.add_attempt(attempt("b1"), at(20)).unwrap();
    let (a2, tron2) = (a.clone(), tron.clone());
    w(s, move |tx| {
        tx.insert_outgoing(&a2)?;
        tx.insert_outgoing(&tron2)
    })
    .await
    .unwrap();
    // An attempt added later (a replacement) is found too.
    let mut replaced = a.clone();
    replaced.add_attempt(attempt("a3"), at(22)).unwrap();
    let stored = replaced.clone();
    w(s, move |tx| tx.update_outgoing(&stored)).await.unwrap();
    for hash in ["a1", "a2", "a3"] {
        let found = r(s, move |tx| tx.outgoing_by_attempt(Network::Bsc, hash)).await;
        assert_eq!(found.map(|t| t.id), Some(uid(1)), "attempt {hash}");
    }
    let found = r(s, |tx| tx.outgoing_by_attempt(Network::Tron, "b1")).await;
    assert_eq!(found.map(|t| t.id), Some(uid(2)));
    // Another network's attempt, or a hash of no attempt, is nobody's.
    assert!(r(s, |tx| tx.outgoing_by_attempt(Network::Tron, "a1"))
        .await
        .is_none());
    assert!(r(s, |tx| tx.outgoing_by_attempt(Network::Bsc, "ffff"))
        .await
        .is_none());
}

/// Two instances each checked the hot wallet's funds for their own payment, neither counting
/// the other's (both unsigned then), and both signed: the writes that would store the two
/// attempts run at the same time. Exactly one is stored; the other sees a payment signed since
/// its check (`outgoing::funds::FundsSeen`) and writes nothing, to be checked again.
async fn of_two_payments_of_one_sender_funded_by_one_check_only_one_is_recorded(
    store: Arc<dyn Store>,
) {
    let s = store.as_ref();
    let (a, b) = (outgoing(1, 100, None, 10), outgoing(2, 200, None, 10));
    let (ia, ib) = (a.clone(), b.clone());
    w(s, move |tx| {
        tx.insert_outgoing(&ia)?;
        tx.insert_outgoing(&ib)
    })
    .await
    .unwrap();
    let before = r(s, |tx| tx.outgoing_in_flight(Network::Bsc, HOT)).await;
    let record = |mut out: OutgoingTx, hash: &'static str| {
        let seen = custody_core::outgoing::funds::FundsSeen::of(&before, out.id);
        out.add_attempt(attempt(hash), at(20)).unwrap();
        custody_core::ports::store::write(s, move |tx| {
            custody_core::outgoing::record_signed(tx, &out, None, Some(&seen))
        })
    };
    let both = crate::join_all(vec![record(a, "a1"), record(b, "b1")]).await;
    let mut results: Vec<_> = both.into_iter().map(Result::unwrap).collect();
    results.sort_by_key(|x| format!("{x:?}"));
    assert_eq!(
        results,
        vec![
            custody_core::outgoing::Recorded::FundsChanged,
            custody_core::outgoing::Recorded::Stored
        ]
    );
    let signed = r(s, |tx| tx.outgoing_in_flight(Network::Bsc, HOT))
        .await
        .iter()
        .filter(|o| !o.attempts.is_empty())
        .count();
    assert_eq!(signed, 1, "one attempt stored");
    // Checked again, with the stored one counted, the other is recorded.
    let now = r(s, |tx| tx.outgoing_in_flight(Network::Bsc, HOT)).await;
    let left = now.iter().find(|o| o.attempts.is_empty()).unwrap().clone();
    let seen = custody_core::outgoing::funds::FundsSeen::of(&now, left.id);
    let mut again = left;
    again.add_attempt(attempt("c1"), at(30)).unwrap();
    assert_eq!(
        custody_core::ports::store::write(s, move |tx| {
            custody_core::outgoing::record_signed(tx, &again, None, Some(&seen))
        })
        .await
        .unwrap(),
        custody_core::outgoing::Recorded::Stored
    );
}
