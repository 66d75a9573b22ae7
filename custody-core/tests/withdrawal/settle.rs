//! A withdrawal's settlement posted on a real ledger (the testkit's memory ledger): the hold
//! settles with the settlement's legs and the books reconcile.

use custody_core::asset::AssetId;
use custody_core::ledger::{AccountKey, SystemAccount};
use custody_core::network::Network;
use custody_core::withdrawal::costs::{Costs, Rate};
use custody_core::withdrawal::settle::settlement;
use custody_core::Amount;

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn bnb() -> AssetId {
    AssetId::new(Network::Bsc, "BNB".to_owned())
}

fn usdt() -> AssetId {
    AssetId::new(Network::Bsc, "USDT".to_owned())
}

fn costs(amount: u128, network: u128, markup: u128, fee: u128, spread: u128) -> Costs {
    Costs {
        network_cost_units: u(network),
        markup_units: u(markup),
        service_fee_units: u(fee),
        spread_units: u(spread),
        total_debited_units: u(amount + network + markup + fee + spread),
    }
}

#[test]
fn a_real_hold_settles_with_the_legs_and_the_ledger_reconciles() {
    use custody_core::ledger::{
        self, HoldPurpose, NewHold, ReferenceType, Settle, TxMeta, UserAccount,
    };
    use custody_core::time::Timestamp;
    use custody_testkit::MemoryLedger;
    use uuid::Uuid;
    let mut l = MemoryLedger::new();
    let at = Timestamp::from_unix_millis(1_800_000_000_000);
    let meta = |n: u128, reference: u128| TxMeta {
        id: Uuid::from_u128(n),
        reference_type: ReferenceType::Withdrawal,
        reference_id: Uuid::from_u128(reference),
        created_at: at,
    };
    let alice = UserAccount::new("t".to_owned(), "alice".to_owned(), usdt());
    let deposit = TxMeta {
        reference_type: ReferenceType::Deposit,
        ..meta(1, 100)
    };
    ledger::credit_deposit(&mut l, &deposit, &alice, u(10_000)).unwrap();
    let rate = Rate {
        asset_units: u(600),
        native_units: u(1),
    };
    let c = costs(100, 600, 60, 8, 3);
    ledger::reserve(
        &mut l,
        &meta(2, 7),
        &NewHold {
            id: Uuid::from_u128(7),
            purpose: HoldPurpose::Withdrawal,
            user: alice.clone(),
            counter: AccountKey::system(SystemAccount::Treasury, usdt()),
            amount: c.total_debited_units,
        },
    )
    .unwrap();
    let s = settlement(&usdt(), &bnb(), u(100), &c, rate, u(2)).unwrap();
    ledger::settle(
        &mut l,
        &Settle {
            hold_id: Uuid::from_u128(7),
            tx_id: Uuid::from_u128(3),
            amount: s.user_pays,
            also: s.also.clone(),
            at,
        },
    )
    .unwrap();
    let b = ledger::user_balance(&mut l, &alice).unwrap();
    assert_eq!((b.available, b.reserved), (u(10_000 - 771), u(0)));
    let report = ledger::reconcile(&mut l).unwrap();
    assert!(report.balanced, "{:?}", report.discrepancies);
}
