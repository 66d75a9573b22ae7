//! What a finished reconciliation run writes, on the memory store: the shortfall control, its
//! audit and alert, the LEDGER alert, the schedule. (The TREASURY decision alone: the unit
//! tests of `reconcile`.)

use proptest::prelude::*;
use uuid::Uuid;

use custody_core::admin::{restricted, set_control};
use custody_core::asset::AssetId;
use custody_core::error::{CoreError, ErrorCode};
use custody_core::ledger::LedgerReport;
use custody_core::network::Network;
use custody_core::outgoing::OutStatus;
use custody_core::ports::store::{read, write, Store};
use custody_core::reconcile::treasury::{decide, in_transit, HeldPayment, Outcome};
use custody_core::reconcile::*;
use custody_core::time::Timestamp;
use custody_core::treasury::AssetFigures;
use custody_core::Amount;
use custody_testkit::{block_on, CountingEntropy, MemoryStore};

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(1_800_000_000_000 + ms)
}

fn bnb() -> AssetId {
    AssetId::new(Network::Bsc, "BNB")
}

fn figures(hot: u128, deposits: u128, transit: u128, liabilities: u128) -> AssetFigures {
    AssetFigures {
        network: Network::Bsc,
        asset: "BNB".into(),
        hot_wallet_units: Some(u(hot)),
        deposit_addresses_units: Some(u(deposits)),
        deposit_addresses: 1,
        in_transit_units: u(transit),
        user_liabilities_units: u(liabilities),
        pending_outgoing_units: Amount::ZERO,
        errors: Vec::new(),
    }
}

/// One withdrawal of a model service: its hold (amount + fee + the house's margin) and how far
/// its payment got.
#[derive(Debug, Clone)]
struct Payment {
    amount: u128,
    fee: u128,
    margin: u128,
    status: OutStatus,
    /// Signed or sent: whether the chain has in fact mined it (the store does not know yet).
    mined_unseen: bool,
}

fn payment() -> impl Strategy<Value = Payment> {
    (
        1u128..1_000_000,
        0u128..10_000,
        0u128..10_000,
        prop::sample::select(OutStatus::ALL.to_vec()),
        any::<bool>(),
    )
        .prop_map(|(amount, fee, margin, status, mined_unseen)| Payment {
            amount,
            fee,
            margin,
            status,
            mined_unseen,
        })
}

/// The chain and the books of a service that lost nothing: users deposited `deposits` (all on
/// chain, `on_hot` of it moved to the hot wallet), the house holds `house` on top, and each
/// payment's funds left the chain once mined, its hold leaving the liabilities once final.
fn healthy(deposits: u128, on_hot: u128, house: u128, payments: &[Payment]) -> AssetFigures {
    let mut onchain = deposits + house;
    let mut liabilities = deposits;
    let mut held = Vec::new();
    for p in payments {
        let hold = p.amount + p.fee + p.margin;
        let mined = match p.status {
            OutStatus::Included | OutStatus::Final => true,
            OutStatus::Signed | OutStatus::Sent => p.mined_unseen,
            OutStatus::Built | OutStatus::Failed => false,
        };
        if mined {
            onchain -= p.amount + p.fee;
        }
        match p.status {
            // Settled: the user paid the hold (the margin went to the house's revenue).
            OutStatus::Final => liabilities -= hold,
            // Released in full: nothing left the user (a failure's gas is the house's).
            OutStatus::Failed => {}
            _ => {}
        }
        held.push(HeldPayment {
            asset: bnb(),
            hold: u(hold),
            status: p.status,
        });
    }
    let hot = on_hot.min(onchain);
    let mut f = figures(
        hot,
        onchain - hot,
        in_transit(&held)
            .get(&bnb())
            .copied()
            .unwrap_or_default()
            .units(),
        liabilities,
    );
    f.pending_outgoing_units = Amount::ZERO;
    f
}

proptest! {
    /// Whatever state its payments are in (mined or not, seen or not), a service that lost
    /// nothing is never found short.
    #[test]
    fn a_healthy_service_with_payments_in_flight_is_never_short(
        payments in prop::collection::vec(payment(), 0..8),
        on_hot in 0u128..100_000_000,
        house in 0u128..1_000,
    ) {
        let total: u128 = payments.iter().map(|p| p.amount + p.fee + p.margin).sum();
        // Users deposited at least what they hold for their payments.
        let deposits = total + 1_000;
        let f = healthy(deposits, on_hot, house, &payments);
        prop_assert_eq!(decide(std::slice::from_ref(&f)), Outcome::default(), "{:?}", f);
    }

    /// Funds moved away beyond the house's share are found once nothing is in flight, by the
    /// exact amount.
    #[test]
    fn funds_moved_away_are_short_by_what_is_missing(
        deposits in 1u128..1_000_000_000,
        house in 0u128..1_000,
        taken_past_house in 1u128..1_000_000,
    ) {
        let taken = (house + taken_past_house).min(deposits + house);
        let f = figures(0, deposits + house - taken, 0, deposits);
        let found = decide(&[f]).shortfalls;
        prop_assert_eq!(found.len(), 1);
        prop_assert_eq!(found[0].shortfall_units, u(taken - house));
    }
}

fn store() -> MemoryStore {
    MemoryStore::new()
}

fn claim_one(s: &MemoryStore, now: Timestamp) -> Reconciliation {
    block_on(write(s, move |tx| claim(tx, now, 60_000)))
        .unwrap()
        .expect("a run is due")
}

#[test]
fn a_shortfall_turns_its_control_on_once_audited_with_an_alert_and_stops_the_asset() {
    let s = store();
    block_on(write(&s, |tx| {
        request(
            tx,
            Uuid::from_u128(1),
            Scope::Treasury,
            "credential:x",
            at(0),
        )
    }))
    .unwrap();
    let run = claim_one(&s, at(1));
    let found = decide(&[figures(0, 90, 0, 100)]);
    let (r, f) = (run.clone(), found.clone());
    let done = block_on(write(&s, move |tx| {
        finish_treasury(tx, &CountingEntropy::new(7), &r, &f, at(2))
    }))
    .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.balanced, Some(false));
    assert_eq!(done.discrepancies[0]["shortfall_units"], "10");
    assert_eq!(done.discrepancies[0]["user_liabilities_units"], "100");

    let (control, audit, alerts) = block_on(read(&s, |tx| {
        Ok((
            tx.control("treasury_shortfall.BSC.BNB")?,
            tx.list_audit(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
            tx.list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default(),
        ))
    }))
    .unwrap();
    let control = control.expect("the control exists");
    assert!(control.enabled);
    assert_eq!(control.updated_by, SYSTEM_ACTOR);
    assert!(control.reason.contains("short by 10"), "{}", control.reason);
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].actor, SYSTEM_ACTOR);
    assert_eq!(audit[0].target, "treasury_shortfall.BSC.BNB");
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        (alerts[0].kind.as_str(), alerts[0].severity.as_str()),
        ("treasury_shortfall", "critical")
    );

    // Every path's check refuses BNB, and only BNB.
    let refused = block_on(read(&s, |tx| {
        Ok(refuse_if_halted(
            tx,
            &[AssetId::new(Network::Bsc, "USDT"), bnb()],
        ))
    }))
    .unwrap();
    match refused {
        Err(CoreError::Refused(r)) => assert_eq!(r.code, ErrorCode::KillSwitchActive),
        other => panic!("expected KILL_SWITCH_ACTIVE, got {other:?}"),
    }
    assert!(block_on(read(&s, |tx| Ok(refuse_if_halted(
        tx,
        &[AssetId::new(Network::Bsc, "USDT")]
    )
    .is_ok())))
    .unwrap());

    // The same shortfall found again while the control is on writes no second audit or alert.
    block_on(write(&s, |tx| {
        request(
            tx,
            Uuid::from_u128(2),
            Scope::Treasury,
            "credential:x",
            at(3),
        )
    }))
    .unwrap();
    let again = claim_one(&s, at(4));
    block_on(write(&s, move |tx| {
        finish_treasury(tx, &CountingEntropy::new(99), &again, &found, at(5))
    }))
    .unwrap();
    let (audits, alerts) = block_on(read(&s, |tx| {
        Ok((
            tx.list_audit(custody_core::page::Page::first(10))?
                .unwrap_or_default()
                .len(),
            tx.list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default()
                .len(),
        ))
    }))
    .unwrap();
    assert_eq!((audits, alerts), (1, 1));

    // An operator turns it off (audited); the asset moves again.
    block_on(write(&s, |tx| {
        set_control(
            tx,
            Uuid::from_u128(50),
            "credential:op",
            "treasury_shortfall.BSC.BNB",
            false,
            "refunded",
            at(6),
        )
    }))
    .unwrap();
    assert!(block_on(read(&s, |tx| Ok(refuse_if_halted(tx, &[bnb()]).is_ok()))).unwrap());
    assert!(!block_on(read(&s, |tx| Ok(restricted(
        tx,
        "treasury_shortfall.BSC.BNB"
    )?)))
    .unwrap());
}

#[test]
fn a_treasury_run_with_an_unreadable_asset_fails_yet_acts_on_the_shortfalls_it_found() {
    let s = store();
    block_on(write(&s, |tx| {
        request(tx, Uuid::from_u128(1), Scope::Treasury, SYSTEM_ACTOR, at(0))
    }))
    .unwrap();
    let run = claim_one(&s, at(1));
    let outcome = Outcome {
        shortfalls: decide(&[figures(0, 90, 0, 100)]).shortfalls,
        unreadable: vec!["the on-chain holdings of BSC USDT could not be read: no code".into()],
    };
    let done = block_on(write(&s, move |tx| {
        finish_treasury(tx, &CountingEntropy::new(7), &run, &outcome, at(2))
    }))
    .unwrap();
    assert_eq!((done.status, done.balanced), (RunStatus::Failed, None));
    assert!(done.failure_reason.unwrap().contains("BSC USDT"));
    assert_eq!(done.discrepancies.len(), 1);
    assert!(!block_on(read(&s, |tx| Ok(refuse_if_halted(tx, &[bnb()]).is_ok()))).unwrap());
}

#[test]
fn a_ledger_discrepancy_raises_a_critical_alert_and_a_clean_ledger_none() {
    let s = store();
    for (n, discrepancies) in [(1u128, vec![]), (2, vec!["account x differs".to_owned()])] {
        block_on(write(&s, move |tx| {
            request(tx, Uuid::from_u128(n), Scope::Ledger, SYSTEM_ACTOR, at(0))
        }))
        .unwrap();
        let run = claim_one(&s, at(1));
        assert_eq!(run.id, Uuid::from_u128(n));
        let report = LedgerReport {
            balanced: discrepancies.is_empty(),
            discrepancies,
            accounts: 0,
            transactions: 0,
            holds: 0,
        };
        let done = block_on(write(&s, move |tx| {
            finish_ledger(tx, &CountingEntropy::new(3), &run, &report, at(2))
        }))
        .unwrap();
        assert_eq!(done.balanced, Some(n == 1));
    }
    let alerts = block_on(read(&s, |tx| {
        Ok(tx
            .list_alerts(custody_core::page::Page::first(10))?
            .unwrap_or_default())
    }))
    .unwrap();
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        (alerts[0].kind.as_str(), alerts[0].severity.as_str()),
        ("ledger_discrepancy", "critical")
    );
    assert!(alerts[0].message.contains("account x differs"));
}

#[test]
fn the_schedule_adds_a_run_once_per_period_and_never_beside_an_unfinished_one() {
    let s = store();
    let due = |n: u128, now: Timestamp| {
        block_on(write(&s, move |tx| {
            schedule_due(
                tx,
                Uuid::from_u128(n),
                Scope::Ledger,
                600_000,
                at(-600_000),
                now,
            )
        }))
        .unwrap()
        .is_some()
    };
    assert!(
        !due(0, at(-1)),
        "none yet: the first one period after the start"
    );
    assert!(due(1, at(0)), "none yet: one period after the start");
    assert!(!due(2, at(700_000)), "the first is still scheduled");
    let run = claim_one(&s, at(700_000));
    let report = LedgerReport {
        balanced: true,
        discrepancies: vec![],
        accounts: 0,
        transactions: 0,
        holds: 0,
    };
    block_on(write(&s, move |tx| {
        finish_ledger(tx, &CountingEntropy::new(3), &run, &report, at(700_001))
    }))
    .unwrap();
    assert!(!due(3, at(599_999)), "within the period of the newest run");
    assert!(due(4, at(600_000)));
    assert!(!due(5, at(600_000)), "once per period");
    // TREASURY has its own schedule.
    assert!(block_on(write(&s, |tx| schedule_due(
        tx,
        Uuid::from_u128(6),
        Scope::Treasury,
        3_600_000,
        at(-3_600_000),
        at(0)
    )))
    .unwrap()
    .is_some());
}

#[test]
fn a_run_not_claimed_cannot_be_finished() {
    let s = store();
    let run = block_on(write(&s, |tx| {
        request(tx, Uuid::from_u128(1), Scope::Ledger, SYSTEM_ACTOR, at(0))
    }))
    .unwrap();
    assert!(block_on(write(&s, move |tx| finish_failed(tx, &run, "x", at(1)))).is_err());
}

#[test]
fn scopes_parse_exactly() {
    assert_eq!(Scope::from_request("LEDGER"), Ok(Scope::Ledger));
    assert_eq!(Scope::from_request("TREASURY"), Ok(Scope::Treasury));
    for bad in ["ledger", "", "BOTH"] {
        assert!(Scope::from_request(bad).is_err());
    }
    let _: &dyn Store = &store();
}
