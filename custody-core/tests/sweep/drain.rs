//! A retired hot wallet's drain (`custody_core::wallet::hot`): its records and outgoing transactions,
//! and the books after it (only its fees move).

use uuid::Uuid;

use super::{asset, at, mined, sent, u, Fx, HOT};
use custody_core::ledger::SystemAccount;
use custody_core::network::Network;
use custody_core::outgoing::Purpose;
use custody_core::ports::sender::Payment;
use custody_core::ports::signer::HdPath;
use custody_core::ports::store::{read, write};
use custody_core::sweep::*;
use custody_core::wallet::hot::{create_drain, DrainPlan};
use custody_core::wallet::hot_wallet_path;
use custody_core::withdrawal::HotWallet;
use custody_testkit::block_on;

const NEW: &str = "0x00000000000000000000000000000000000000cC";

fn wallets() -> (HotWallet, HotWallet) {
    let old = HotWallet {
        address: HOT.into(),
        path: hot_wallet_path(Network::Bsc),
    };
    let new = HotWallet {
        address: NEW.into(),
        path: HdPath {
            network: Network::Bsc,
            account: 7,
            index: 0,
        },
    };
    (old, new)
}

fn drain(fx: &Fx, seen: Vec<Uuid>) -> custody_core::error::CoreResult<Vec<Funding>> {
    let plan = DrainPlan {
        transfers: vec![(asset("USDT"), u(300)), (asset("BNB"), u(678_000))],
        left: Vec::new(),
    };
    block_on(write(fx.store.as_ref(), move |tx| {
        let mut n = 9_000u128;
        let mut ids = || {
            n += 1;
            Uuid::from_u128(n)
        };
        let (old, new) = wallets();
        create_drain(
            tx,
            &mut ids,
            (&old, &new),
            Network::Bsc,
            &plan,
            &seen,
            at(1),
        )
    }))
}

#[test]
fn a_drain_sends_tokens_first_and_the_native_coin_last_from_the_old_key() {
    let fx = Fx::new(&[]);
    let fundings = drain(&fx, Vec::new()).unwrap();
    assert_eq!(fundings.len(), 2);
    let (usdt, bnb) = (
        fx.outgoing_for(Purpose::Rebalance, fundings[0].id),
        fx.outgoing_for(Purpose::Rebalance, fundings[1].id),
    );
    assert_eq!(
        (usdt.from.as_str(), usdt.from_path),
        (HOT, hot_wallet_path(Network::Bsc))
    );
    assert_eq!(usdt.after, None);
    assert_eq!(bnb.after, Some(usdt.id), "the native coin goes last");
    assert_eq!(
        bnb.payment,
        Payment::Native {
            to: NEW.into(),
            amount: u(678_000)
        }
    );
    assert!(
        matches!(&usdt.payment, Payment::Token { to, amount, .. } if to == NEW && *amount == u(300))
    );
    for f in &fundings {
        assert_eq!(f.kind, FundingKind::HotWalletDrain);
        assert_eq!((f.from.as_str(), f.address.as_str()), (HOT, NEW));
        assert_eq!(f.sweep_id, None);
    }
    // Listed with the treasury fundings.
    let listed = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.list_fundings(custody_core::page::Page::first(10))?)
    }))
    .unwrap()
    .unwrap();
    assert_eq!(listed.len(), 2);
}

#[test]
fn a_drain_books_only_its_fees_both_wallets_being_the_treasurys() {
    let fx = Fx::new(&[("BNB", 5), ("USDT", 7)]);
    let before = |code| fx.system(SystemAccount::Treasury, code);
    let (bnb0, usdt0) = (before("BNB"), before("USDT"));
    let clearing = |code| fx.system(SystemAccount::DepositClearing, code);
    let (cbnb0, cusdt0) = (clearing("BNB"), clearing("USDT"));
    let users = |fx: &Fx| {
        block_on(read(fx.store.as_ref(), |tx| {
            Ok(custody_core::admin::user_liabilities(tx)?)
        }))
        .unwrap()
    };
    let users0 = users(&fx);
    let fundings = drain(&fx, Vec::new()).unwrap();
    for (f, fee) in fundings.iter().zip([60_000u128, 21_000]) {
        let out = fx.outgoing_for(Purpose::Rebalance, f.id);
        fx.moved(out, sent);
        assert_eq!(fx.funding(f.id).status, FundingStatus::Broadcasted);
        let out = fx.outgoing_for(Purpose::Rebalance, f.id);
        fx.moved(out, mined(fee, true));
        let done = fx.funding(f.id);
        assert_eq!(done.status, FundingStatus::Confirmed);
        assert_eq!(done.fee_native, Some(u(fee)));
    }
    assert_eq!(fx.system(SystemAccount::Treasury, "BNB"), bnb0 - 81_000);
    assert_eq!(fx.system(SystemAccount::NetworkFees, "BNB"), 81_000);
    assert_eq!(fx.system(SystemAccount::Treasury, "USDT"), usdt0);
    assert_eq!(fx.system(SystemAccount::NetworkFees, "USDT"), 0);
    assert_eq!(clearing("BNB"), cbnb0);
    assert_eq!(clearing("USDT"), cusdt0);
    assert_eq!(users(&fx), users0, "no user's balance moves");
    fx.reconciles();
}

#[test]
fn a_failed_drain_books_its_fee_and_raises_a_critical_alert() {
    let fx = Fx::new(&[]);
    let fundings = drain(&fx, Vec::new()).unwrap();
    let out = fx.outgoing_for(Purpose::Rebalance, fundings[0].id);
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Rebalance, fundings[0].id);
    fx.moved(out, mined(40_000, false));
    assert_eq!(fx.funding(fundings[0].id).status, FundingStatus::Failed);
    assert_eq!(fx.system(SystemAccount::NetworkFees, "BNB"), 40_000);
    let alerts = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.list_alerts(custody_core::page::Page::first(10))?)
    }))
    .unwrap()
    .unwrap();
    assert!(alerts
        .iter()
        .any(|a| a.kind == "hot_wallet_drain_failed" && a.severity == "critical"));
    fx.reconciles();
}

#[test]
fn a_drain_planned_on_other_unfinished_payments_is_refused() {
    let fx = Fx::new(&[]);
    let err = drain(&fx, vec![Uuid::from_u128(1)]).unwrap_err();
    assert!(
        err.to_string()
            .contains("changed while the drain was planned"),
        "{err}"
    );
    let none = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.list_fundings(custody_core::page::Page::first(10))?)
    }))
    .unwrap()
    .unwrap_or_default();
    assert!(none.is_empty());
}
