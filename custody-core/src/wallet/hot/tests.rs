//! The drain's arithmetic. Rotation runs on the memory store, in `tests/hot_wallet.rs`.

use super::*;
use crate::asset::AssetCatalog;

fn drain_asset(code: &str, spendable: u128, pending: u128, max_fee: u128) -> DrainAsset {
    DrainAsset {
        asset: AssetCatalog::mainnet()
            .get(Network::Bsc, code)
            .unwrap()
            .clone(),
        spendable: Amount::from_units(spendable),
        pending: Amount::from_units(pending),
        max_fee: Amount::from_units(max_fee),
    }
}

#[test]
fn the_drain_moves_tokens_first_then_the_native_coin_less_what_payments_and_fees_need() {
    let native = drain_asset("BNB", 1_000_000, 100_000, 21_000);
    let tokens = [
        drain_asset("USDT", 500, 200, 60_000),
        drain_asset("USDC", 0, 0, 60_000),
    ];
    let plan = plan_drain(&native, &tokens, Amount::from_units(30_000)).unwrap();
    let moved: Vec<_> = plan
        .transfers
        .iter()
        .map(|(a, n)| (a.code.as_str(), n.units()))
        .collect();
    // BNB: 1,000,000 − 100,000 pending − 2 × 30,000 in flight − 2 × 60,000 (USDT's transfer)
    // − 2 × 21,000 (its own).
    assert_eq!(moved, [("USDT", 300), ("BNB", 678_000)]);
    assert_eq!(plan.left.len(), 1);
    assert_eq!(plan.left[0].0, "USDC");
}

#[test]
fn a_drain_whose_token_fees_the_native_coin_cannot_pay_is_refused() {
    let native = drain_asset("BNB", 100_000, 0, 21_000);
    let tokens = [drain_asset("USDT", 500, 0, 60_000)];
    let err = plan_drain(&native, &tokens, Amount::ZERO).unwrap_err();
    assert!(err.message.contains("fund it"), "{}", err.message);
    // Enough for the token's fees but not for a native transfer on top: the native coin stays.
    let native = drain_asset("BNB", 130_000, 0, 21_000);
    let plan = plan_drain(&native, &tokens, Amount::ZERO).unwrap();
    assert_eq!(plan.transfers.len(), 1);
    assert_eq!(plan.left[0].0, "BNB");
}
