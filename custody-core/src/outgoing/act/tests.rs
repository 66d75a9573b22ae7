use proptest::prelude::*;
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
        funds_with_fee: Some(Funds::Covered(FundsSeen::default())),
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
        Need::FundsWithFee(_) => known.funds_with_fee = facts.funds_with_fee.clone(),
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
        funds_with_fee: Some(Funds::Short("gas".into())),
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

fn fact_bool() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![Just(None), any::<bool>().prop_map(Some)]
}

fn fact_funds() -> impl Strategy<Value = Option<Funds>> {
    prop_oneof![
        Just(None),
        Just(Some(Funds::Covered(FundsSeen::default()))),
        Just(Some(Funds::Short("short".into()))),
    ]
}

fn any_facts() -> impl Strategy<Value = Facts> {
    (
        (fact_bool(), fact_bool(), fact_bool(), fact_bool()),
        (fact_funds(), fact_funds()),
        prop_oneof![
            Just(None),
            Just(Some(Priced::Estimate(estimate()))),
            Just(Some(Priced::Refused("no".into()))),
        ],
        prop_oneof![Just(None), Just(Some(Ok(()))), Just(Some(Err("no".into())))],
    )
        .prop_map(
            |((controls, predecessor, signing_lock, lower), (before, with), price, seed)| Facts {
                controls,
                predecessor,
                signing_lock,
                lower_nonce_pending: lower,
                funds_before_fee: before,
                funds_with_fee: with,
                price,
                fresh_price: Some(estimate()),
                void_price: Some(None),
                seed,
            },
        )
}

proptest! {
    /// Whatever is known, nothing is signed unless every fact that guards a signature is known
    /// and in favour: the controls, the lock, the seed (where checked) and the funds with the fee.
    #[test]
    fn nothing_is_signed_that_a_known_fact_refuses(
        facts in any_facts(),
        decision in prop_oneof![Just(Decision::FirstAttempt), Just(Decision::Rebuild)],
    ) {
        let out = payment(Purpose::Withdrawal, None);
        if let Some(Ok(Step::Act(planned))) = plan(&decision, &out, &facts, &policy()) {
          if matches!(planned.action, Action::Sign(_)) {
            prop_assert_eq!(facts.controls, Some(true));
            prop_assert_eq!(facts.signing_lock, Some(true));
            prop_assert_eq!(facts.seed, Some(Ok(())));
            prop_assert!(matches!(facts.funds_with_fee, Some(Funds::Covered(_))));
            prop_assert!(matches!(facts.funds_before_fee, Some(Funds::Covered(_))));
            if decision == Decision::FirstAttempt {
                prop_assert_eq!(facts.predecessor, Some(true));
            }
          }
        }
    }
}
