//! Energy delegations as treasury fundings (TRON, `[sweeps] tron_energy_mode = "delegate"`):
//! the delegation waits for the native funding that activates the address, the transfer for
//! the delegation, the reclaim for the transfer's end, final or failed; each step happens once
//! whatever crashes or repeats in between. The flow is network-agnostic: the fixture's
//! addresses and coin are those of the sweep tests.

use std::sync::Arc;

use uuid::Uuid;

use super::{at, hash_of, mined, sent, u, Fx, ADDR, HOT};
use custody_core::ledger::SystemAccount;
use custody_core::outgoing::{Included, OutStatus, OutgoingTx, Purpose};
use custody_core::ports::sender::Payment;
use custody_core::ports::store::{read, write};
use custody_core::sweep::*;
use custody_testkit::block_on;

const STAKE: u128 = 14_332_000_000;

fn delegate(funding: Option<u128>) -> Plan {
    Plan::Delegate {
        amount: u(5_000_000),
        funding: funding.map(u),
        delegation: Delegation {
            stake_sun: u(STAKE),
            energy: 143_313,
        },
    }
}

fn maybe_outgoing(fx: &Fx, id: Uuid) -> Option<OutgoingTx> {
    block_on(read(fx.store.as_ref(), move |tx| {
        Ok(tx.outgoing_for(Purpose::Funding, id)?)
    }))
    .unwrap()
}

fn start_delegation_of(fx: &Fx, sweep: Uuid) -> Option<Funding> {
    block_on(write(fx.store.as_ref(), move |tx| {
        start_delegation(tx, sweep, at(35))
    }))
    .unwrap()
}

fn start_transfer(fx: &Fx, sweep: Uuid) -> Option<Sweep> {
    let usdt = super::asset("USDT");
    block_on(write(fx.store.as_ref(), move |tx| {
        start_funded_sweep(tx, sweep, Uuid::from_u128(999), &usdt, u(5_000_000), at(40))
    }))
    .unwrap()
}

/// Sends and finalizes the funding `id`'s outgoing transaction, burning `fee`.
fn confirm_funding(fx: &Fx, id: Uuid, fee: u128) {
    let out = fx.outgoing_for(Purpose::Funding, id);
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Funding, id);
    fx.moved(out, mined(fee, true));
}

fn fundings_of(fx: &Fx, sweep: Uuid) -> Vec<Funding> {
    block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.list_fundings(custody_core::page::Page::first(100))?)
    }))
    .unwrap()
    .unwrap_or_default()
    .into_iter()
    .filter(|f| f.sweep_id == Some(sweep))
    .collect()
}

#[test]
fn the_delegation_waits_for_the_activation_the_transfer_for_the_delegation_then_it_is_reclaimed() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx
        .create(fx.order("USDT", delegate(Some(345_000))), 100)
        .expect("a sweep");
    assert_eq!(s.status, SweepStatus::Funding);
    let (native_id, delegation_id) = (s.funding_id.unwrap(), s.delegation_id.unwrap());
    let d = fx.funding(delegation_id);
    assert_eq!(
        (d.kind, d.status, d.amount, d.energy, d.waits_for),
        (
            FundingKind::EnergyDelegation,
            FundingStatus::Planned,
            u(STAKE),
            Some(143_313),
            Some(native_id)
        )
    );
    assert!(
        maybe_outgoing(&fx, delegation_id).is_none(),
        "nothing is delegated to an address the chain may not know yet"
    );
    assert_eq!(
        fx.outgoing_for(Purpose::Funding, native_id).payment,
        Payment::Native {
            to: ADDR.into(),
            amount: u(345_000)
        }
    );
    assert!(
        start_delegation_of(&fx, s.id).is_none(),
        "funding not final"
    );
    assert!(start_transfer(&fx, s.id).is_none());
    confirm_funding(&fx, native_id, 1_100_000);
    assert!(
        start_transfer(&fx, s.id).is_none(),
        "not before the delegation is final"
    );
    let started = start_delegation_of(&fx, s.id).expect("the delegation sent");
    assert_eq!(started.waits_for, None);
    assert!(start_delegation_of(&fx, s.id).is_none(), "once");
    let dout = fx.outgoing_for(Purpose::Funding, delegation_id);
    assert_eq!(dout.from, HOT, "the hot wallet's stake");
    assert_eq!(
        dout.payment,
        Payment::DelegateEnergy {
            receiver: ADDR.into(),
            balance_sun: u(STAKE)
        }
    );
    // Included but not final: still no transfer.
    fx.moved(dout, sent);
    let dout = fx.outgoing_for(Purpose::Funding, delegation_id);
    fx.moved(dout, |o| {
        o.included = Some(Included {
            hash: hash_of(o),
            block_number: 100,
            block_hash: "cd".repeat(32),
            succeeded: true,
            fee_native: u(268_000),
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
        });
        o.transition(OutStatus::Included, "", at(20)).unwrap();
    });
    assert_eq!(fx.funding(delegation_id).status, FundingStatus::Broadcasted);
    assert!(start_transfer(&fx, s.id).is_none(), "included is not final");
    let dout = fx.outgoing_for(Purpose::Funding, delegation_id);
    fx.moved(dout, |o| {
        o.transition(OutStatus::Final, "final", at(45)).unwrap()
    });
    assert_eq!(fx.funding(delegation_id).status, FundingStatus::Confirmed);
    let transfer = start_transfer(&fx, s.id).expect("the transfer");
    assert!(transfer.outgoing_id.is_some());
    assert!(start_transfer(&fx, s.id).is_none(), "once");
    // No reclaim while the transfer is on its way.
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, sent);
    assert_eq!(fundings_of(&fx, s.id).len(), 2);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, mined(345_000, true));
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Confirmed);
    let reclaim_id = fx
        .funding(delegation_id)
        .reclaim_id
        .expect("the delegation names its reclaim");
    let reclaim = fx.funding(reclaim_id);
    assert_eq!(
        (
            reclaim.kind,
            reclaim.status,
            reclaim.reclaims,
            reclaim.amount
        ),
        (
            FundingKind::EnergyReclaim,
            FundingStatus::Planned,
            Some(delegation_id),
            u(STAKE)
        )
    );
    let rout = fx.outgoing_for(Purpose::Funding, reclaim_id);
    assert_eq!(rout.from, HOT);
    assert_eq!(
        rout.payment,
        Payment::UndelegateEnergy {
            receiver: ADDR.into(),
            balance_sun: u(STAKE)
        }
    );
    // The broadcaster records the final transfer again (a retry): no second reclaim.
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, |_| {});
    assert_eq!(fundings_of(&fx, s.id).len(), 3);
    confirm_funding(&fx, reclaim_id, 268_000);
    assert_eq!(fx.funding(reclaim_id).status, FundingStatus::Confirmed);
    // Coins: only the native funding moved any; every fee is the house's expense.
    assert_eq!(
        fx.system(SystemAccount::Treasury, "BNB"),
        -345_000 - 1_100_000 - 268_000 - 268_000
    );
    assert_eq!(
        fx.system(SystemAccount::NetworkFees, "BNB"),
        1_100_000 + 268_000 + 345_000 + 268_000
    );
    assert_eq!(fx.system(SystemAccount::DepositClearing, "BNB"), 0);
    fx.reconciles();
    let view = serde_json::to_value(fx.funding(delegation_id).view()).unwrap();
    assert_eq!(view["kind"], "energy_delegation");
    assert_eq!(view["energy_units"], 143_313);
    assert_eq!(view["reclaim_id"], reclaim_id.to_string());
}

#[test]
fn a_failed_transfer_still_gives_the_energy_back() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx
        .create(fx.order("USDT", delegate(None)), 200)
        .expect("a sweep");
    assert_eq!(s.funding_id, None, "free bandwidth: no TRX sent");
    let delegation_id = s.delegation_id.unwrap();
    assert!(
        maybe_outgoing(&fx, delegation_id).is_some(),
        "nothing to wait for: the delegation goes at once"
    );
    assert!(start_delegation_of(&fx, s.id).is_none());
    confirm_funding(&fx, delegation_id, 0);
    start_transfer(&fx, s.id).expect("the transfer");
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, mined(345_000, false));
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Failed);
    let reclaim_id = fx.funding(delegation_id).reclaim_id.expect("a reclaim");
    assert_eq!(
        maybe_outgoing(&fx, reclaim_id).map(|o| o.payment),
        Some(Payment::UndelegateEnergy {
            receiver: ADDR.into(),
            balance_sun: u(STAKE)
        })
    );
    fx.reconciles();
}

#[test]
fn a_failed_activation_fails_the_sweep_and_the_delegation_that_waited() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx
        .create(fx.order("USDT", delegate(Some(345_000))), 300)
        .unwrap();
    let native_id = s.funding_id.unwrap();
    let fout = fx.outgoing_for(Purpose::Funding, native_id);
    fx.moved(fout, |o| {
        o.failure_reason = Some("refused".into());
        o.transition(OutStatus::Failed, "refused", at(20)).unwrap();
    });
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Failed);
    let d = fx.funding(s.delegation_id.unwrap());
    assert_eq!(d.status, FundingStatus::Failed);
    assert!(d.failure_reason.unwrap().contains(&native_id.to_string()));
    assert!(start_delegation_of(&fx, s.id).is_none());
    assert!(maybe_outgoing(&fx, d.id).is_none(), "never delegated");
    assert_eq!(d.reclaim_id, None, "nothing to take back");
}

#[test]
fn a_crash_inside_a_step_leaves_nothing_and_the_retry_does_it_once() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx
        .create(fx.order("USDT", delegate(Some(345_000))), 400)
        .unwrap();
    let (native_id, delegation_id) = (s.funding_id.unwrap(), s.delegation_id.unwrap());
    confirm_funding(&fx, native_id, 0);
    // The process dies after the delegation's outgoing row is written, before the commit.
    let crashed = block_on(write(fx.store.as_ref(), move |tx| {
        start_delegation(tx, s.id, at(35))?;
        Err::<(), _>(custody_core::error::CoreError::Invariant("killed".into()))
    }));
    assert!(crashed.is_err());
    assert!(maybe_outgoing(&fx, delegation_id).is_none(), "rolled back");
    assert_eq!(fx.funding(delegation_id).waits_for, Some(native_id));
    assert!(start_delegation_of(&fx, s.id).is_some());
    assert!(start_delegation_of(&fx, s.id).is_none());
    confirm_funding(&fx, delegation_id, 0);
    start_transfer(&fx, s.id).unwrap();
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, sent);
    // The transfer's end and its reclaim are one write: a crash loses both, the retry makes
    // exactly one.
    let mut out = fx.outgoing_for(Purpose::Sweep, s.id);
    mined(345_000, true)(&mut out);
    let (entropy, again) = (Arc::clone(&fx.entropy), out.clone());
    let crashed = block_on(write(fx.store.as_ref(), move |tx| {
        tx.update_outgoing(&again)?;
        on_outgoing(tx, entropy.as_ref(), &again, &super::bnb(), at(50))?;
        Err::<(), _>(custody_core::error::CoreError::Invariant("killed".into()))
    }));
    assert!(crashed.is_err());
    assert_eq!(fx.funding(delegation_id).reclaim_id, None);
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Broadcasted);
    fx.moved(out.clone(), |_| {});
    fx.moved(out, |_| {});
    let reclaims: Vec<_> = fundings_of(&fx, s.id)
        .into_iter()
        .filter(|f| f.kind == FundingKind::EnergyReclaim)
        .collect();
    assert_eq!(reclaims.len(), 1);
    assert_eq!(fx.funding(delegation_id).reclaim_id, Some(reclaims[0].id));
}

#[test]
fn a_failed_reclaim_tells_an_operator() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx.create(fx.order("USDT", delegate(None)), 500).unwrap();
    let delegation_id = s.delegation_id.unwrap();
    confirm_funding(&fx, delegation_id, 0);
    start_transfer(&fx, s.id).unwrap();
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, mined(0, true));
    let reclaim_id = fx.funding(delegation_id).reclaim_id.unwrap();
    let rout = fx.outgoing_for(Purpose::Funding, reclaim_id);
    fx.moved(rout, |o| {
        o.failure_reason = Some("contract validate error".into());
        o.transition(OutStatus::Failed, "refused", at(60)).unwrap();
    });
    assert_eq!(fx.funding(reclaim_id).status, FundingStatus::Failed);
    assert_eq!(
        fx.sweep(s.id).status,
        SweepStatus::Confirmed,
        "the sweep stands"
    );
    let alerts = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.list_alerts(custody_core::page::Page::first(10))?)
    }))
    .unwrap()
    .unwrap_or_default();
    assert!(alerts
        .iter()
        .any(|a| a.kind == "energy_reclaim_failed" && a.reference_id == Some(reclaim_id)));
}

#[test]
fn an_address_whose_reclaim_is_not_final_gets_no_new_plan_until_it_is() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx.create(fx.order("USDT", delegate(None)), 500).unwrap();
    let delegation_id = s.delegation_id.unwrap();
    confirm_funding(&fx, delegation_id, 0);
    start_transfer(&fx, s.id).unwrap();
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, mined(0, true));
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Confirmed);
    let reclaim_id = fx.funding(delegation_id).reclaim_id.unwrap();
    let open = |fx: &Fx| {
        block_on(read(fx.store.as_ref(), |tx| {
            Ok(tx.open_fundings(custody_core::Network::Bsc)?)
        }))
        .unwrap()
    };
    // Planned, then sent: the sweep is over, the address still waits.
    assert_eq!(
        reclaim_pending(&open(&fx), ADDR).map(|f| f.id),
        Some(reclaim_id)
    );
    let rout = fx.outgoing_for(Purpose::Funding, reclaim_id);
    fx.moved(rout, sent);
    assert_eq!(
        reclaim_pending(&open(&fx), ADDR).map(|f| f.id),
        Some(reclaim_id)
    );
    assert_eq!(reclaim_pending(&open(&fx), HOT), None, "another address");
    // Final: the address may be planned again.
    let rout = fx.outgoing_for(Purpose::Funding, reclaim_id);
    fx.moved(rout, mined(0, true));
    assert_eq!(fx.funding(reclaim_id).status, FundingStatus::Confirmed);
    assert_eq!(reclaim_pending(&open(&fx), ADDR), None);
}

#[test]
fn the_delegation_budget_keeps_headroom_and_counts_only_delegations_not_in_a_block() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx.create(fx.order("USDT", delegate(None)), 500).unwrap();
    let planned = fx.funding(s.delegation_id.unwrap());
    assert_eq!(planned.status, FundingStatus::Planned);
    let node = u(100_000_000_000);
    // 5 % of the node's figure kept back.
    assert_eq!(delegation_budget(node, &[]), u(95_000_000_000));
    // A delegation not yet in a block: the node has not counted it.
    assert_eq!(
        delegation_budget(node, std::slice::from_ref(&planned)),
        u(95_000_000_000 - STAKE)
    );
    // In a block, not final: the node's figure has it already; counting it again would take
    // the same stake twice.
    let included = Funding {
        status: FundingStatus::Broadcasted,
        block_number: Some(40),
        ..planned.clone()
    };
    assert_eq!(delegation_budget(node, &[included]), u(95_000_000_000));
    // Reclaims and native fundings lend nothing.
    let reclaim = Funding {
        kind: FundingKind::EnergyReclaim,
        ..planned.clone()
    };
    assert_eq!(delegation_budget(node, &[reclaim]), u(95_000_000_000));
    assert_eq!(delegation_budget(u(STAKE), &[planned]), u(0));
}
