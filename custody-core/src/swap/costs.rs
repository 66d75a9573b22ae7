//! What a swap costs the user (decisions §12), in units of `asset_in`: the gas converted at
//! the router's price, the markup on it, the service fee, and the spread (`spread_bps` of
//! `amount_in`, the house's margin). Integer arithmetic only, every division rounded up (in the
//! house's favour), every sum checked. The router receives exactly `amount_in`; the user is
//! debited `total_debited_units`. The minimum output passed to the router is rounded down.

use crate::amount::Amount;
use crate::error::{ErrorCode, Refusal};
use crate::withdrawal::costs::check_limits;
use crate::withdrawal::{mul_div_ceil, Costs, FeePolicy, Rate, BPS};

/// Slippage bounds of `slippage_bps` (interface §2) and its default (decisions §3).
pub const SLIPPAGE_BPS_MIN: u32 = 1;
pub const SLIPPAGE_BPS_MAX: u32 = 10_000;
pub const SLIPPAGE_BPS_DEFAULT: u32 = 50;

fn too_large(what: &str) -> Refusal {
    Refusal::new(
        ErrorCode::AmountTooLarge,
        format!("the {what} does not fit in 128 bits"),
    )
}

/// The costs of swapping `amount_in` whose transaction is expected to burn `network_native`
/// (wei), under `policy` (the `asset_in`'s), with the native coin priced at `rate` in
/// `asset_in` ([`Rate::NATIVE`] when `asset_in` is BNB). `min`/`max` bound `amount_in`: the
/// pair's limits.
pub fn swap_costs(
    policy: &FeePolicy,
    amount_in: Amount,
    network_native: Amount,
    rate: Rate,
) -> Result<Costs, Refusal> {
    check_limits(policy, amount_in, "amount_in_units")?;
    let network = mul_div_ceil(
        network_native.units(),
        rate.asset_units.units(),
        rate.native_units.units(),
    )
    .ok_or_else(|| too_large("network cost"))?;
    let markup = mul_div_ceil(network, u128::from(policy.markup_bps), BPS)
        .ok_or_else(|| too_large("markup"))?;
    let service = mul_div_ceil(amount_in.units(), u128::from(policy.service_fee_bps), BPS)
        .and_then(|v| v.checked_add(policy.service_fee_units.units()))
        .ok_or_else(|| too_large("service fee"))?;
    let spread = mul_div_ceil(amount_in.units(), u128::from(policy.spread_bps), BPS)
        .ok_or_else(|| too_large("spread"))?;
    let total = [network, markup, service, spread]
        .into_iter()
        .try_fold(amount_in.units(), u128::checked_add)
        .ok_or_else(|| too_large("total debited"))?;
    Ok(Costs {
        network_cost_units: Amount::from_units(network),
        markup_units: Amount::from_units(markup),
        service_fee_units: Amount::from_units(service),
        spread_units: Amount::from_units(spread),
        total_debited_units: Amount::from_units(total),
    })
}

/// `expected × (10000 − slippage_bps) / 10000`, rounded down (decisions §12): the least the
/// router may give, or the swap reverts.
pub fn min_amount_out(expected: Amount, slippage_bps: u32) -> Result<Amount, Refusal> {
    if !(SLIPPAGE_BPS_MIN..=SLIPPAGE_BPS_MAX).contains(&slippage_bps) {
        return Err(Refusal::validation(
            "slippage_bps",
            format!("must be {SLIPPAGE_BPS_MIN} to {SLIPPAGE_BPS_MAX}"),
        ));
    }
    let keep = BPS - u128::from(slippage_bps);
    // expected = q·BPS + r keeps the product in range.
    let (q, r) = (expected.units() / BPS, expected.units() % BPS);
    Ok(Amount::from_units(q * keep + r * keep / BPS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy() -> FeePolicy {
        FeePolicy {
            min_amount_units: Amount::from_units(100),
            max_amount_units: Amount::from_units(10u128.pow(30)),
            markup_bps: 1_000,
            service_fee_units: Amount::from_units(3),
            service_fee_bps: 10,
            spread_bps: 50,
        }
    }

    #[test]
    fn costs_are_itemized_in_asset_in_and_rounded_up() {
        // 1 BNB = 600 USDT (18 decimals each); the swap burns 0.001 BNB.
        let rate = Rate {
            asset_units: Amount::from_units(600 * 10u128.pow(18)),
            native_units: Amount::from_units(10u128.pow(18)),
        };
        let c = swap_costs(
            &policy(),
            Amount::from_units(1_000_001),
            Amount::from_units(10u128.pow(15)),
            rate,
        )
        .unwrap();
        assert_eq!(
            c.network_cost_units,
            Amount::from_units(600 * 10u128.pow(15))
        );
        assert_eq!(c.markup_units, Amount::from_units(60 * 10u128.pow(15)));
        // 0.1 % of 1,000,001 = 1,000.001 → 1,001, plus the fixed 3.
        assert_eq!(c.service_fee_units, Amount::from_units(1_004));
        // 0.5 % of 1,000,001 = 5,000.005 → 5,001.
        assert_eq!(c.spread_units, Amount::from_units(5_001));
        assert_eq!(
            c.total_debited_units.units(),
            1_000_001 + 660 * 10u128.pow(15) + 1_004 + 5_001
        );
    }

    #[test]
    fn amounts_outside_the_limits_are_refused_with_their_codes() {
        let p = policy();
        let small = swap_costs(&p, Amount::from_units(99), Amount::ZERO, Rate::NATIVE);
        assert_eq!(small.unwrap_err().code, ErrorCode::AmountTooSmall);
        let zero = swap_costs(&p, Amount::ZERO, Amount::ZERO, Rate::NATIVE);
        assert_eq!(zero.unwrap_err().code, ErrorCode::AmountTooSmall);
        let large = swap_costs(
            &p,
            Amount::from_units(10u128.pow(30) + 1),
            Amount::ZERO,
            Rate::NATIVE,
        );
        assert_eq!(large.unwrap_err().code, ErrorCode::AmountTooLarge);
    }

    #[test]
    fn the_minimum_out_is_rounded_down_and_slippage_is_bounded() {
        assert_eq!(
            min_amount_out(Amount::from_units(1_000), 50).unwrap(),
            Amount::from_units(995)
        );
        assert_eq!(
            min_amount_out(Amount::from_units(999), 50).unwrap(),
            Amount::from_units(994),
            "994.005 rounds down"
        );
        assert_eq!(
            min_amount_out(Amount::from_units(5), 10_000).unwrap(),
            Amount::ZERO
        );
        for bad in [0, 10_001] {
            assert_eq!(
                min_amount_out(Amount::from_units(5), bad).unwrap_err().code,
                ErrorCode::ValidationFailed
            );
        }
        assert_eq!(
            min_amount_out(Amount::from_units(u128::MAX), 1).unwrap(),
            Amount::from_units(u128::MAX / 10_000 * 9_999 + (u128::MAX % 10_000) * 9_999 / 10_000)
        );
    }

    proptest! {
        #[test]
        fn totals_add_up_and_never_favour_the_user(
            amount in 100u128..10u128.pow(30),
            native in 0u128..10u128.pow(15),
            asset_units in 1u128..10u128.pow(12),
            native_units in 1u128..10u128.pow(10),
            slippage in 1u32..=10_000,
            expected in 0u128..u128::MAX,
        ) {
            let rate = Rate {
                asset_units: Amount::from_units(asset_units),
                native_units: Amount::from_units(native_units),
            };
            let c = swap_costs(&policy(), Amount::from_units(amount), Amount::from_units(native), rate).unwrap();
            let sum = amount
                + c.network_cost_units.units()
                + c.markup_units.units()
                + c.service_fee_units.units()
                + c.spread_units.units();
            prop_assert_eq!(c.total_debited_units.units(), sum);
            // Rounded up: the exact rational value is never above the charged one.
            prop_assert!(c.network_cost_units.units() * native_units >= native * asset_units);
            prop_assert!(c.spread_units.units() * 10_000 >= amount * 50);
            let min = min_amount_out(Amount::from_units(expected), slippage).unwrap();
            prop_assert!(min.units() <= expected);
            // Rounded down: never asks the router for more than the exact bound.
            let keep = 10_000 - u128::from(slippage);
            let exact_floor = (expected / 10_000) * keep + (expected % 10_000) * keep / 10_000;
            prop_assert_eq!(min.units(), exact_floor);
        }
    }
}
