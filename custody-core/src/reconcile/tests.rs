//! The TREASURY decision: a healthy service with payments in flight is never short; funds moved
//! away are. And the shortfall controls' keys. What a finished run writes is in
//! `tests/reconcile.rs`, on the memory store.

use super::*;
use crate::asset::AssetId;
use crate::network::Network;
use crate::outgoing::OutStatus;
use crate::reconcile::treasury::{decide, in_transit, HeldPayment, Outcome};
use crate::treasury::AssetFigures;
use crate::Amount;

fn u(n: u128) -> Amount {
    Amount::from_units(n)
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

#[test]
fn holdings_equal_to_liabilities_are_balanced_and_less_is_short_with_both_sides() {
    assert_eq!(decide(&[figures(40, 60, 0, 100)]), Outcome::default());
    let found = decide(&[figures(40, 50, 5, 100)]).shortfalls;
    assert_eq!(found.len(), 1);
    let d = &found[0];
    assert_eq!(
        (
            d.hot_wallet_units,
            d.deposit_addresses_units,
            d.in_transit_units
        ),
        (u(40), u(50), u(5))
    );
    assert_eq!(d.holdings_units, u(95));
    assert_eq!(d.user_liabilities_units, u(100));
    assert_eq!(d.shortfall_units, u(5));
    assert!(d.describe().contains("short by 5"), "{}", d.describe());
}

#[test]
fn unreadable_holdings_decide_nothing_of_their_asset_and_do_not_hide_another() {
    let mut f = figures(1, 1, 0, 100);
    f.deposit_addresses_units = None;
    f.errors.push("deposit address 0xabc: timeout".into());
    let mut usdt = figures(0, 5, 0, 9);
    usdt.asset = "USDT".into();
    let outcome = decide(&[f, usdt]);
    assert_eq!(outcome.unreadable.len(), 1);
    assert!(
        outcome.unreadable[0].contains("BSC BNB could not be read: deposit address 0xabc: timeout"),
        "{:?}",
        outcome.unreadable
    );
    assert_eq!(outcome.shortfalls.len(), 1);
    assert_eq!(
        (
            outcome.shortfalls[0].asset.as_str(),
            outcome.shortfalls[0].shortfall_units
        ),
        ("USDT", u(4))
    );
}

#[test]
fn only_signed_unfinished_holds_count_in_transit() {
    let held = |status| HeldPayment {
        asset: bnb(),
        hold: u(10),
        status,
    };
    let all: Vec<_> = OutStatus::ALL.into_iter().map(held).collect();
    // signed, sent, included: 3 × 10. Built (nothing signed) and final/failed (hold ended) not.
    assert_eq!(in_transit(&all).get(&bnb()), Some(&u(30)));
    assert!(in_transit(&[held(OutStatus::Built)]).is_empty());
}

#[test]
fn shortfall_keys_round_trip_and_other_shapes_are_refused() {
    assert_eq!(shortfall_key(&bnb()), "treasury_shortfall.BSC.BNB");
    assert_eq!(
        parse_shortfall_key("treasury_shortfall.TRON.USDT"),
        Some(AssetId::new(Network::Tron, "USDT"))
    );
    for bad in [
        "treasury_shortfall.BSC",
        "treasury_shortfall.BSC.",
        "treasury_shortfall.ETH.BNB",
        "treasury_shortfall.BSC.bnb",
        "treasury_shortfall.BSC.BNB.X",
        "kill_switch.BSC.BNB",
    ] {
        assert_eq!(parse_shortfall_key(bad), None, "{bad}");
    }
    let catalog = crate::asset::AssetCatalog::mainnet();
    assert!(
        crate::admin::check_control_request("treasury_shortfall.BSC.USDT", "r", &catalog).is_ok()
    );
    assert_eq!(
        crate::admin::check_control_request("treasury_shortfall.BSC.DOGE", "r", &catalog)
            .unwrap_err()
            .code,
        crate::error::ErrorCode::UnsupportedAsset
    );
    assert!(crate::admin::check_control_request("kill_switch.global", "r", &catalog).is_ok());
}
