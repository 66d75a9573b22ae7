use uuid::Uuid;

use super::*;
use crate::network::Network;
use crate::outgoing::{Attempt, Bid};
use crate::ports::signer::HdPath;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn policy() -> EnginePolicy {
    EnginePolicy::defaults(Network::Bsc, 3)
}

fn payment(purpose: Purpose, nonce: Option<u64>) -> OutgoingTx {
    OutgoingTx::new(
        Uuid::from_u128(1),
        Network::Bsc,
        purpose,
        Uuid::from_u128(2),
        "sender".into(),
        HdPath {
            network: Network::Bsc,
            account: 0,
            index: 0,
        },
        Payment::Native {
            to: "to".into(),
            amount: Amount::from_units(5),
        },
        nonce,
        at(0),
    )
}

fn estimate() -> FeeEstimate {
    FeeEstimate {
        expected_native: Amount::from_units(21_000),
        max_native: Amount::from_units(42_000),
        bid: FeeBid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 2,
        },
        plan: None,
    }
}

fn attempt(sent: bool) -> Attempt {
    Attempt {
        hash: "h1".into(),
        raw: vec![1],
        bid: Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1,
        },
        expires_at_ms: None,
        signed_at: at(0),
        sent_at: sent.then(|| at(1)),
        last_answer: None,
        plan: None,
        reference_block: None,
        void: false,
    }
}

/// Every fact of a first attempt, all in favour of signing.
fn all_clear() -> Facts {
    Facts {
        controls: Some(true),
        predecessor: Some(true),
        signing_lock: Some(true),
        lower_nonce_pending: Some(false),
        funds_before_fee: Some(Funds::Covered(FundsSeen::default())),
        // The fee is the one asked for (see `answer`).
        funds_with_fee: Some((Amount::ZERO, Funds::Covered(FundsSeen::default()))),
        price: Some(Priced::Estimate(estimate())),
        fresh_price: Some(estimate()),
        void_price: Some(None),
        seed: Some(Ok(())),
    }
}

/// Plans `decision`, answering every need from `facts`; returns the needs in the order asked
/// and the plan.
fn run(decision: &Decision, out: &OutgoingTx, facts: &Facts) -> (Vec<Need>, Plan) {
    let mut known = Facts::default();
    let mut asked = Vec::new();
    loop {
        match plan(decision, out, &known, &policy()).expect("a signing decision") {
            Ok(Step::Act(plan)) => return (asked, *plan),
            Ok(Step::Need(need)) => {
                assert!(!asked.contains(&need), "{need:?} asked twice");
                asked.push(need);
                answer(&mut known, facts, need);
            }
            Err(e) => panic!("invariant: {e}"),
        }
    }
}

fn answer(known: &mut Facts, facts: &Facts, need: Need) {
    match need {
        Need::Controls => known.controls = facts.controls,
        Need::Predecessor => known.predecessor = facts.predecessor,
        Need::SigningLock => known.signing_lock = facts.signing_lock,
        Need::LowerNoncePending => known.lower_nonce_pending = facts.lower_nonce_pending,
        Need::FundsBeforeFee => known.funds_before_fee = facts.funds_before_fee.clone(),
        Need::FundsWithFee(fee) => {
            known.funds_with_fee = facts.funds_with_fee.clone().map(|(_, f)| (fee, f));
        }
        Need::Price => known.price = facts.price.clone(),
        Need::FreshPrice => known.fresh_price = facts.fresh_price,
        Need::VoidPrice => known.void_price = facts.void_price,
        Need::Seed => known.seed = facts.seed.clone(),
    }
}

#[test]
fn a_first_attempt_asks_the_store_before_the_chain_and_signs_with_the_worst_fee_held() {
    let out = payment(Purpose::Withdrawal, None);
    let (asked, plan) = run(&Decision::FirstAttempt, &out, &all_clear());
    assert_eq!(
        asked,
        vec![
            Need::Controls,
            Need::Predecessor,
            Need::SigningLock,
            Need::FundsBeforeFee,
            Need::Price,
            Need::Seed,
            Need::FundsWithFee(Amount::from_units(42_000)),
        ]
    );
    assert_eq!(
        plan,
        Plan::act(Action::Sign(Signing {
            bid: estimate().bid,
            plan: None,
            seen: FundsSeen::default(),
            first: true,
            if_refused: Fallback::CheckLater,
        }))
    );
}

#[test]
fn a_control_that_refuses_costs_no_chain_call() {
    let out = payment(Purpose::Withdrawal, None);
    let facts = Facts {
        controls: Some(false),
        ..all_clear()
    };
    for decision in [Decision::FirstAttempt, Decision::Rebuild] {
        let (asked, plan) = run(&decision, &out, &facts);
        assert_eq!(asked, vec![Need::Controls]);
        assert_eq!(plan, Plan::act(Action::CheckLater));
    }
}

#[test]
fn a_hot_wallet_short_raises_one_alert_per_wait_and_a_short_sweep_fails_unsent() {
    let mut out = payment(Purpose::Withdrawal, None);
    let facts = Facts {
        funds_before_fee: Some(Funds::Short("needs 5 more".into())),
        ..all_clear()
    };
    let (_, plan) = run(&Decision::FirstAttempt, &out, &facts);
    assert_eq!(plan.action, Action::CheckLater);
    let notice = plan.notice.expect("the first wait raises the alert");
    assert_eq!(notice.wait, Wait::HotWalletShort);
    assert_eq!(notice.alert.kind, "hot_wallet_insufficient");
    assert_eq!(notice.alert.reference, ("withdrawal", out.reference_id));
    out.note_wait(notice.wait, &notice.more, at(1));
    let (_, again) = run(&Decision::FirstAttempt, &out, &facts);
    assert_eq!(again, Plan::act(Action::CheckLater));

    let sweep = payment(Purpose::Sweep, None);
    let (_, plan) = run(&Decision::FirstAttempt, &sweep, &facts);
    assert!(matches!(plan.action, Action::FailUnsent { .. }));
    assert_eq!(plan.notice, None);
    // A sweep that holds a nonce must not leave a gap: it waits.
    let (_, plan) = run(
        &Decision::FirstAttempt,
        &payment(Purpose::Sweep, Some(3)),
        &facts,
    );
    assert_eq!(plan, Plan::act(Action::CheckLater));
}

#[test]
fn a_payment_the_node_refuses_to_price_waits_with_one_alert_and_no_seed_check() {
    let out = payment(Purpose::Withdrawal, None);
    let facts = Facts {
        price: Some(Priced::Refused("execution reverted".into())),
        ..all_clear()
    };
    let (asked, plan) = run(&Decision::FirstAttempt, &out, &facts);
    assert_eq!(asked.last(), Some(&Need::Price));
    assert_eq!(plan.action, Action::CheckLater);
    assert_eq!(plan.notice.map(|n| n.wait), Some(Wait::CannotPrice));
}

#[test]
fn a_replacement_sends_the_old_bytes_again_when_it_may_not_sign() {
    let mut out = payment(Purpose::Withdrawal, Some(4));
    out.attempts.push(attempt(true));
    let bid = FeeBid::Gas {
        gas_limit: 21_000,
        gas_price_wei: 3,
    };
    let pending = Facts {
        lower_nonce_pending: Some(true),
        ..all_clear()
    };
    let (asked, plan) = run(&Decision::Replace { bid }, &out, &pending);
    assert_eq!(asked, vec![Need::Controls, Need::LowerNoncePending]);
    assert_eq!(plan, Plan::act(Action::Resend));
    let short = Facts {
        funds_with_fee: Some((Amount::ZERO, Funds::Short("gas".into()))),
        ..all_clear()
    };
    let (asked, plan) = run(&Decision::Replace { bid }, &out, &short);
    assert_eq!(asked.last(), Some(&Need::FundsWithFee(max_fee(bid))));
    assert_eq!(plan.action, Action::Resend);
    assert_eq!(plan.notice.map(|n| n.wait), Some(Wait::HotWalletShort));
}

#[test]
fn a_control_holds_a_signed_payment_with_one_alert_about_its_nonce() {
    let mut out = payment(Purpose::Withdrawal, Some(4));
    out.attempts.push(attempt(false));
    let facts = Facts {
        controls: Some(false),
        ..all_clear()
    };
    let (_, plan) = run(&Decision::Broadcast, &out, &facts);
    assert_eq!(plan.action, Action::CheckLater);
    let notice = plan.notice.expect("holds nonce 4");
    assert_eq!(notice.wait, Wait::HoldsNonce);
    assert_eq!(notice.more, " (nonce 4)");
    // Bytes that already went out are sent again whatever the controls say.
    out.attempts[0].sent_at = Some(at(2));
    let (asked, plan) = run(&Decision::Broadcast, &out, &facts);
    assert!(asked.is_empty());
    assert_eq!(plan, Plan::act(Action::Resend));
}

#[test]
fn a_reprice_without_an_attempt_is_an_invariant_break() {
    let out = payment(Purpose::Withdrawal, Some(1));
    let known = all_clear();
    assert!(matches!(
        plan(&Decision::Reprice, &out, &known, &policy()),
        Some(Err(_))
    ));
}

#[test]
fn decisions_that_sign_nothing_are_settled_not_planned() {
    let mut out = payment(Purpose::Withdrawal, Some(1));
    let wait = Decision::Wait { until: at(9) };
    assert_eq!(plan(&wait, &out, &Facts::default(), &policy()), None);
    assert_eq!(
        settle(&mut out, &wait, &policy(), at(1)),
        Some(Ok(Settled::default()))
    );
    assert_eq!(out.next_check_at, at(9));
    assert_eq!(
        settle(&mut out, &Decision::FirstAttempt, &policy(), at(1)),
        None
    );
}

#[test]
fn a_refusal_keeps_the_attempt_unsent_and_a_long_one_raises_one_alert() {
    let mut out = payment(Purpose::Withdrawal, Some(1));
    out.add_attempt(attempt(false), at(0)).unwrap();
    let p = policy();
    let refused = || BroadcastOutcome::Rejected("insufficient funds".into());
    assert_eq!(record_answer(&mut out, refused(), &p, at(5)), Ok(None));
    assert_eq!(out.attempts[0].sent_at, None);
    assert_eq!(out.next_check_at, at(5 + p.rebroadcast_after_ms));
    // "Expired" after a refusal says nothing new: the refusal stays the answer.
    record_answer(&mut out, BroadcastOutcome::Expired, &p, at(6)).unwrap();
    assert_eq!(out.attempts[0].last_answer, Some(refused()));
    let long = at(p.replace_after_ms * REFUSED_ALERT_AFTER_REPLACES);
    let notice = record_answer(&mut out, refused(), &p, long).unwrap();
    let notice = notice.expect("refused for long");
    assert_eq!(notice.wait, Wait::RefusedLong);
    out.note_wait(notice.wait, &notice.more, long);
    assert_eq!(record_answer(&mut out, refused(), &p, long), Ok(None));
    assert_eq!(out.status, OutStatus::Signed);
    record_answer(&mut out, BroadcastOutcome::Accepted, &p, long).unwrap();
    assert_eq!(out.status, OutStatus::Sent);
    assert_eq!(out.attempts[0].sent_at, Some(long));
}

#[test]
fn a_funds_check_made_with_another_fee_is_no_answer() {
    let out = payment(Purpose::Withdrawal, None);
    let facts = Facts {
        funds_with_fee: Some((Amount::from_units(1), Funds::Covered(FundsSeen::default()))),
        ..all_clear()
    };
    assert_eq!(
        plan(&Decision::FirstAttempt, &out, &facts, &policy()),
        Some(Ok(Step::Need(Need::FundsWithFee(Amount::from_units(
            42_000
        )))))
    );
}

#[test]
fn a_reprice_signs_at_the_higher_price_or_sends_the_old_bytes_again() {
    let mut out = payment(Purpose::Withdrawal, Some(4));
    out.add_attempt(attempt(true), at(0)).unwrap();
    let (asked, plan) = run(&Decision::Reprice, &out, &all_clear());
    assert_eq!(
        asked[..4],
        [
            Need::Controls,
            Need::SigningLock,
            Need::LowerNoncePending,
            Need::FreshPrice
        ]
    );
    let Action::Sign(signing) = plan.action else {
        panic!("{plan:?}")
    };
    assert!(!signing.first);
    assert_eq!(signing.if_refused, Fallback::HeldByControl);
    assert_eq!(asked[4], Need::FundsWithFee(max_fee(signing.bid)));
    // The node's price no higher than what was refused: the same bytes again.
    let cheap = FeeEstimate {
        bid: FeeBid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1,
        },
        ..estimate()
    };
    let facts = Facts {
        fresh_price: Some(cheap),
        ..all_clear()
    };
    assert_eq!(
        run(&Decision::Reprice, &out, &facts).1,
        Plan::act(Action::Resend)
    );
    // A lock held elsewhere: looked at later; a control: held (its bytes went out: resent).
    let facts = Facts {
        signing_lock: Some(false),
        ..all_clear()
    };
    assert_eq!(
        run(&Decision::Reprice, &out, &facts).1,
        Plan::act(Action::CheckLater)
    );
    let facts = Facts {
        controls: Some(false),
        ..all_clear()
    };
    let (asked, plan) = run(&Decision::Reprice, &out, &facts);
    assert_eq!(
        (asked, plan),
        (vec![Need::Controls], Plan::act(Action::Resend))
    );
}

#[test]
fn a_void_needs_the_seed_before_a_price_and_no_control() {
    let mut out = payment(Purpose::Withdrawal, Some(4));
    out.add_attempt(attempt(true), at(0)).unwrap();
    let minimum = FeeBid::Gas {
        gas_limit: 21_000,
        gas_price_wei: 5,
    };
    let decision = Decision::Void { bid: minimum };
    let (asked, plan) = run(&decision, &out, &all_clear());
    assert_eq!(asked, vec![Need::Seed, Need::VoidPrice]);
    assert_eq!(plan, Plan::act(Action::SignVoid { bid: minimum }));
    let facts = Facts {
        seed: Some(Err("seed 2 is not loaded".into())),
        ..all_clear()
    };
    let (asked, plan) = run(&decision, &out, &facts);
    assert_eq!(asked, vec![Need::Seed]);
    assert_eq!(plan.action, Action::CheckLater);
    assert_eq!(plan.notice.map(|n| n.wait), Some(Wait::SeedNotLoaded));
    // The same void again is sent again, not signed again.
    let mut void = attempt(true);
    void.hash = "v1".into();
    void.void = true;
    void.bid = minimum.into();
    out.add_attempt(void, at(1)).unwrap();
    assert_eq!(
        run(&decision, &out, &all_clear()).1,
        Plan::act(Action::Resend)
    );
}

#[test]
fn the_fee_held_is_the_worst_except_for_a_native_sweep_and_a_tron_plan() {
    let withdrawal = payment(Purpose::Withdrawal, None);
    assert_eq!(
        fee_to_hold(&withdrawal, &estimate()),
        Amount::from_units(42_000)
    );
    let sweep = payment(Purpose::Sweep, None);
    assert_eq!(fee_to_hold(&sweep, &estimate()), Amount::from_units(21_000));
    let mut token_sweep = payment(Purpose::Sweep, None);
    token_sweep.payment = Payment::Token {
        contract: "c".into(),
        to: "to".into(),
        amount: Amount::from_units(5),
    };
    assert_eq!(
        fee_to_hold(&token_sweep, &estimate()),
        Amount::from_units(42_000)
    );
}

#[test]
fn a_lost_lock_raises_no_alert_and_sends_what_went_out_again() {
    let mut out = payment(Purpose::Withdrawal, Some(4));
    out.add_attempt(attempt(false), at(0)).unwrap();
    assert_eq!(lock_lost(&out), Plan::act(Action::CheckLater));
    out.attempts[0].sent_at = Some(at(1));
    assert_eq!(lock_lost(&out), Plan::act(Action::Resend));
}

#[test]
fn settling_records_inclusion_finality_and_one_stuck_alert() {
    let p = policy();
    let inclusion = Inclusion {
        block_number: 9,
        block_hash: "b9".into(),
        succeeded: false,
        fee_native: Amount::from_units(21_000),
        moves: Vec::new(),
        resources: None,
        block_time_ms: None,
        head_number: None,
    };
    let mut out = payment(Purpose::Withdrawal, Some(4));
    out.add_attempt(attempt(true), at(0)).unwrap();
    out.transition(OutStatus::Sent, "accepted", at(1)).unwrap();
    let unknown = Decision::IncludedUnknownToLookups {
        hash: "h1".into(),
        inclusion: inclusion.clone(),
    };
    let settled = settle(&mut out, &unknown, &p, at(2)).unwrap().unwrap();
    let alert = settled
        .alert
        .expect("a lagging or lying endpoint is reported");
    assert_eq!(
        (alert.kind, alert.severity),
        ("node_inconsistent", "warning")
    );
    assert_eq!(out.status, OutStatus::Included);
    assert_eq!(out.next_check_at, at(2 + p.check_every_ms));
    settle(&mut out, &Decision::Final, &p, at(3))
        .unwrap()
        .unwrap();
    assert_eq!(out.status, OutStatus::Failed, "a failed receipt fails it");
    assert_eq!(
        out.failure_reason.as_deref(),
        Some("the transaction failed on chain")
    );

    let mut stuck = payment(Purpose::Withdrawal, Some(5));
    let decision = Decision::Stuck {
        reason: "nonce gap".into(),
    };
    let settled = settle(&mut stuck, &decision, &p, at(1)).unwrap().unwrap();
    let notice = settled.notice.expect("the first time");
    stuck.note_wait(notice.wait, &notice.more, at(1));
    assert_eq!(stuck.next_check_at, at(1 + p.replace_after_ms));
    let again = settle(&mut stuck, &decision, &p, at(2)).unwrap().unwrap();
    assert_eq!(again.notice, None, "one alert per wait");

    let mut doubled = payment(Purpose::Withdrawal, Some(6));
    doubled.add_attempt(attempt(true), at(0)).unwrap();
    doubled
        .transition(OutStatus::Sent, "accepted", at(1))
        .unwrap();
    let double = Decision::DoublePayment {
        hash: "h1".into(),
        inclusion,
        hashes: vec!["h1".into(), "h2".into()],
    };
    let settled = settle(&mut doubled, &double, &p, at(2)).unwrap().unwrap();
    assert_eq!(settled.double_payment, Some(vec!["h1".into(), "h2".into()]));
    assert!(doubled
        .history
        .last()
        .unwrap()
        .detail
        .starts_with(DOUBLE_PAYMENT_NOTE));
}

/// Every combination of facts (each unknown, refusing or in favour), for every decision that
/// may sign: nothing is signed unless every fact that guards a signature is known and in
/// favour, and no chain fact (balances, price) is asked while a store fact refuses.
#[test]
fn nothing_is_signed_that_a_fact_refuses_and_a_refusal_costs_no_chain_call() {
    let bool3 = [None, Some(false), Some(true)];
    let funds3 = |fee: Amount| {
        [
            None,
            Some((fee, Funds::Short("short".into()))),
            Some((fee, Funds::Covered(FundsSeen::default()))),
        ]
    };
    let before3 = [
        None,
        Some(Funds::Short("short".into())),
        Some(Funds::Covered(FundsSeen::default())),
    ];
    let price3 = [
        None,
        Some(Priced::Refused("no".into())),
        Some(Priced::Estimate(estimate())),
    ];
    let seed3 = [None, Some(Err("no".to_owned())), Some(Ok(()))];
    let bid = FeeBid::Gas {
        gas_limit: 21_000,
        gas_price_wei: 3,
    };
    let fresh = repriced(
        Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1,
        },
        estimate().bid,
        &policy(),
    )
    .expect("a higher price");
    let mut sent = payment(Purpose::Withdrawal, Some(4));
    sent.add_attempt(attempt(true), at(0)).unwrap();
    let cases = [
        (
            Decision::FirstAttempt,
            payment(Purpose::Withdrawal, None),
            42_000,
        ),
        (
            Decision::Rebuild,
            payment(Purpose::Withdrawal, None),
            42_000,
        ),
        (Decision::Reprice, sent.clone(), max_fee(fresh).units()),
        (Decision::Replace { bid }, sent, max_fee(bid).units()),
    ];
    let mut signed = 0;
    for (decision, out, fee) in cases {
        let fee = Amount::from_units(fee);
        for controls in bool3 {
            for predecessor in bool3 {
                for signing_lock in bool3 {
                    for lower in bool3 {
                        for before in &before3 {
                            for with in funds3(fee) {
                                for price in &price3 {
                                    for seed in &seed3 {
                                        let facts = Facts {
                                            controls,
                                            predecessor,
                                            signing_lock,
                                            lower_nonce_pending: lower,
                                            funds_before_fee: before.clone(),
                                            funds_with_fee: with.clone(),
                                            price: price.clone(),
                                            fresh_price: Some(estimate()),
                                            void_price: Some(None),
                                            seed: seed.clone(),
                                        };
                                        signed += check_one(&decision, &out, &facts);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(signed > 0, "some combination signs");
}

/// The two properties for one combination; 1 when it signs.
fn check_one(decision: &Decision, out: &OutgoingTx, facts: &Facts) -> usize {
    let step = plan(decision, out, facts, &policy())
        .expect("a signing decision")
        .expect("consistent");
    let first = *decision == Decision::FirstAttempt;
    let store_says_yes = facts.controls == Some(true)
        && facts.signing_lock == Some(true)
        && (!first || facts.predecessor == Some(true));
    match step {
        Step::Need(need) => {
            let chain = matches!(
                need,
                Need::FundsBeforeFee
                    | Need::FundsWithFee(_)
                    | Need::Price
                    | Need::FreshPrice
                    | Need::VoidPrice
            );
            assert!(
                !chain || store_says_yes,
                "{decision:?} asks {need:?}: {facts:?}"
            );
            0
        }
        Step::Act(plan) => {
            let Action::Sign(_) = plan.action else {
                return 0;
            };
            assert!(store_says_yes, "{decision:?} signs: {facts:?}");
            assert!(
                matches!(facts.funds_with_fee, Some((_, Funds::Covered(_)))),
                "{decision:?} signs unfunded: {facts:?}"
            );
            match decision {
                Decision::FirstAttempt | Decision::Rebuild => {
                    assert_eq!(facts.seed, Some(Ok(())), "{facts:?}");
                    assert!(matches!(facts.funds_before_fee, Some(Funds::Covered(_))));
                    assert!(matches!(facts.price, Some(Priced::Estimate(_))));
                }
                _ => assert_eq!(facts.lower_nonce_pending, Some(false), "{facts:?}"),
            }
            1
        }
    }
}
