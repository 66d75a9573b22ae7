//! What a withdrawal costs the user (decisions §3, §11), in units of the withdrawn asset:
//! integer arithmetic only, every division rounded up (in the house's favour), every sum
//! checked. The destination receives exactly `amount_units`; the user is debited
//! `total_debited_units`.

use serde::Serialize;

use crate::amount::Amount;
use crate::error::{ErrorCode, Refusal};

/// Basis points: 10,000 = 100 %.
pub const BPS: u128 = 10_000;

/// A fee policy of one (network, asset) (decisions §11, `[[fee_policies]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeePolicy {
    pub min_amount_units: Amount,
    pub max_amount_units: Amount,
    /// Of the network cost.
    pub markup_bps: u32,
    /// A fixed fee per withdrawal.
    pub service_fee_units: Amount,
    /// Of the amount.
    pub service_fee_bps: u32,
    /// Of a network cost converted from the native coin into a token.
    pub spread_bps: u32,
}

/// The price of the native coin in units of the withdrawn asset: `asset_units` for
/// `native_units` (a DEX quote on BSC, a configured rate on TRON). For the native coin itself,
/// [`Rate::NATIVE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Rate {
    pub asset_units: Amount,
    pub native_units: Amount,
}

impl Rate {
    pub const NATIVE: Rate = Rate {
        asset_units: Amount::from_units(1),
        native_units: Amount::from_units(1),
    };

    fn is_native(&self) -> bool {
        *self == Rate::NATIVE
    }
}

/// The itemized costs of decisions §3, all in units of the debited asset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Costs {
    pub network_cost_units: Amount,
    pub markup_units: Amount,
    pub service_fee_units: Amount,
    pub spread_units: Amount,
    pub total_debited_units: Amount,
}

/// `value × num / den`, rounded up, or `None` on overflow (or a zero `den`).
pub fn mul_div_ceil(value: u128, num: u128, den: u128) -> Option<u128> {
    if den == 0 {
        return None;
    }
    // (value × num) may not fit; split value = q·den + r to keep the intermediate small.
    let (q, r) = (value / den, value % den);
    let whole = q.checked_mul(num)?;
    let part = r.checked_mul(num)?.div_ceil(den);
    whole.checked_add(part)
}

fn too_large(what: &str) -> Refusal {
    Refusal::new(
        ErrorCode::AmountTooLarge,
        format!("the {what} does not fit in 128 bits"),
    )
}

/// `field` must be within the policy's `[min, max]` and above zero: 422 `AMOUNT_TOO_SMALL` /
/// `AMOUNT_TOO_LARGE` otherwise (decisions §11).
pub fn check_limits(policy: &FeePolicy, amount: Amount, field: &str) -> Result<(), Refusal> {
    if amount.is_zero() || amount < policy.min_amount_units {
        return Err(Refusal::new(
            ErrorCode::AmountTooSmall,
            format!(
                "{field} must be at least {}",
                policy.min_amount_units.max(Amount::from_units(1))
            ),
        ));
    }
    if amount > policy.max_amount_units {
        return Err(Refusal::new(
            ErrorCode::AmountTooLarge,
            format!("{field} must be at most {}", policy.max_amount_units),
        ));
    }
    Ok(())
}

/// The costs of withdrawing `amount` whose transaction is expected to burn `network_native`
/// (wei, sun), under `policy`, with the native coin priced at `rate`.
pub fn withdrawal_costs(
    policy: &FeePolicy,
    amount: Amount,
    network_native: Amount,
    rate: Rate,
) -> Result<Costs, Refusal> {
    check_limits(policy, amount, "amount_units")?;
    let network = mul_div_ceil(
        network_native.units(),
        rate.asset_units.units(),
        rate.native_units.units(),
    )
    .ok_or_else(|| too_large("network cost"))?;
    let markup = mul_div_ceil(network, u128::from(policy.markup_bps), BPS)
        .ok_or_else(|| too_large("markup"))?;
    let service = mul_div_ceil(amount.units(), u128::from(policy.service_fee_bps), BPS)
        .and_then(|v| v.checked_add(policy.service_fee_units.units()))
        .ok_or_else(|| too_large("service fee"))?;
    let spread = if rate.is_native() {
        0
    } else {
        mul_div_ceil(network, u128::from(policy.spread_bps), BPS)
            .ok_or_else(|| too_large("spread"))?
    };
    let total = [network, markup, service, spread]
        .into_iter()
        .try_fold(amount.units(), u128::checked_add)
        .ok_or_else(|| too_large("total debited"))?;
    Ok(Costs {
        network_cost_units: Amount::from_units(network),
        markup_units: Amount::from_units(markup),
        service_fee_units: Amount::from_units(service),
        spread_units: Amount::from_units(spread),
        total_debited_units: Amount::from_units(total),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn u(n: u128) -> Amount {
        Amount::from_units(n)
    }

    fn policy() -> FeePolicy {
        FeePolicy {
            min_amount_units: u(10),
            max_amount_units: u(1_000_000_000_000_000_000_000),
            markup_bps: 1_000,
            service_fee_units: u(7),
            service_fee_bps: 25,
            spread_bps: 50,
        }
    }

    #[test]
    fn a_native_withdrawal_is_itemized_and_rounded_up() {
        // 21,000 gas at 3 gwei; 1 BNB withdrawn.
        let c = withdrawal_costs(
            &policy(),
            u(1_000_000_000_000_000_000),
            u(63_000_000_000_000),
            Rate::NATIVE,
        )
        .unwrap();
        assert_eq!(c.network_cost_units, u(63_000_000_000_000));
        assert_eq!(c.markup_units, u(6_300_000_000_000));
        assert_eq!(c.service_fee_units, u(2_500_000_000_000_007));
        assert_eq!(c.spread_units, u(0), "no conversion, no spread");
        assert_eq!(
            c.total_debited_units,
            u(1_000_000_000_000_000_000
                + 63_000_000_000_000
                + 6_300_000_000_000
                + 2_500_000_000_000_007)
        );
    }

    #[test]
    fn a_token_withdrawal_converts_the_network_cost_and_charges_a_spread() {
        // 1 BNB = 600 USDT (18 decimals each): 600e18 per 1e18.
        let rate = Rate {
            asset_units: u(600_000_000_000_000_000_000),
            native_units: u(1_000_000_000_000_000_000),
        };
        let c = withdrawal_costs(&policy(), u(100), u(1), rate).unwrap();
        assert_eq!(c.network_cost_units, u(600));
        assert_eq!(c.markup_units, u(60));
        assert_eq!(c.spread_units, u(3));
        assert_eq!(c.service_fee_units, u(8), "7 + ceil(100 × 0.25 %)");
        assert_eq!(c.total_debited_units, u(771));
    }

    #[test]
    fn amounts_outside_the_policy_are_refused() {
        let code = |a| {
            withdrawal_costs(&policy(), u(a), u(1), Rate::NATIVE)
                .unwrap_err()
                .code
        };
        assert_eq!(code(0), ErrorCode::AmountTooSmall);
        assert_eq!(code(9), ErrorCode::AmountTooSmall);
        assert_eq!(
            code(1_000_000_000_000_000_000_001),
            ErrorCode::AmountTooLarge
        );
        let mut open = policy();
        open.max_amount_units = u(u128::MAX);
        let huge = withdrawal_costs(&open, u(u128::MAX - 1), u(10), Rate::NATIVE).unwrap_err();
        assert_eq!(huge.code, ErrorCode::AmountTooLarge, "{}", huge.message);
    }

    #[test]
    fn mul_div_ceil_is_exact_where_it_fits() {
        assert_eq!(mul_div_ceil(10, 3, 4), Some(8));
        assert_eq!(mul_div_ceil(12, 3, 4), Some(9));
        assert_eq!(mul_div_ceil(u128::MAX, 1, 1), Some(u128::MAX));
        assert_eq!(mul_div_ceil(u128::MAX, 2, 1), None);
        assert_eq!(mul_div_ceil(u128::MAX, 3, 3), Some(u128::MAX));
        assert_eq!(mul_div_ceil(5, 1, 0), None);
    }

    /// Whether `r` is `value × num / den` rounded up (checked where the products fit).
    fn ceil_of(r: u128, value: u128, num: u128, den: u128) -> bool {
        let exact = value.checked_mul(num);
        let at_least = match (r.checked_mul(den), exact) {
            (Some(x), Some(y)) => x >= y,
            _ => true,
        };
        let below_next = r == 0
            || match ((r - 1).checked_mul(den), exact) {
                (Some(x), Some(y)) => x < y,
                _ => true,
            };
        at_least && below_next
    }

    proptest! {
        #[test]
        fn totals_add_up_and_rounding_favours_the_house(
            amount in 1u128..u128::MAX / 4,
            native in 0u128..u128::MAX / 4,
            asset_units in 1u128..1u128 << 96,
            native_units in 1u128..1u128 << 96,
            markup in 0u32..20_000,
            fee_bps in 0u32..10_000,
            spread in 0u32..10_000,
            fixed in 0u128..1u128 << 64,
        ) {
            let p = FeePolicy {
                min_amount_units: u(1),
                max_amount_units: u(u128::MAX),
                markup_bps: markup,
                service_fee_units: u(fixed),
                service_fee_bps: fee_bps,
                spread_bps: spread,
            };
            let rate = Rate { asset_units: u(asset_units), native_units: u(native_units) };
            match withdrawal_costs(&p, u(amount), u(native), rate) {
                Ok(c) => {
                    let sum = [c.network_cost_units, c.markup_units, c.service_fee_units, c.spread_units]
                        .iter()
                        .fold(amount, |s, x| s + x.units());
                    prop_assert_eq!(c.total_debited_units.units(), sum);
                    // Each rounded item is the exact value rounded up: never below it, and
                    // less than one unit above it.
                    let n = c.network_cost_units.units();
                    prop_assert!(ceil_of(n, native, asset_units, native_units));
                    prop_assert!(ceil_of(c.markup_units.units(), n, u128::from(markup), BPS));
                    prop_assert!(ceil_of(c.spread_units.units(), n, u128::from(spread), BPS));
                }
                Err(r) => prop_assert_eq!(r.code, ErrorCode::AmountTooLarge),
            }
        }
    }
}
