//! Properties of the resource planner over arbitrary inputs: the totals add up, nothing
//! overflows, a new token holder never costs less, and more resources never cost more.

use proptest::prelude::*;

use super::resources::*;

/// Far beyond realistic magnitudes (mainnet: 100 sun per energy, 1,000 per bandwidth point,
/// 130,285 energy for a USDT transfer), and still nothing saturates: every input up to 10^9.
const REAL: u64 = 1_000_000_000;

fn operation(max: u64) -> impl Strategy<Value = Operation> {
    prop_oneof![
        any::<bool>().prop_map(|exists| Operation::TrxTransfer {
            recipient_exists: exists
        }),
        (any::<bool>(), proptest::option::of(0..=max)).prop_map(|(holds, energy)| {
            Operation::Trc20Transfer {
                recipient_holds_token: holds,
                estimated_energy: energy,
            }
        }),
        Just(Operation::SystemContract),
    ]
}

fn available(max: u64) -> impl Strategy<Value = AvailableResources> {
    (0..=max, 0..=max, 0..=max).prop_map(|(f, s, e)| AvailableResources {
        free_bandwidth: f,
        staked_bandwidth: s,
        energy: e,
    })
}

fn prices(max: u64) -> impl Strategy<Value = ResourcePrices> {
    (0..=max, 0..=max, 0..=max, 0..=max).prop_map(|(e, b, c, s)| ResourcePrices {
        energy_sun: e,
        bandwidth_sun: b,
        create_account_sun: c,
        create_account_system_sun: s,
    })
}

fn inputs(max: u64) -> impl Strategy<Value = PlanInputs> {
    (
        operation(max),
        0..=max,
        available(max),
        prices(max),
        0u64..=1_000,
    )
        .prop_map(|(operation, bytes, available, prices, margin)| PlanInputs {
            operation,
            bandwidth_bytes: bytes,
            available,
            prices,
            energy_margin_percent: margin,
        })
}

/// Exact sums in u128: what the saturating u64 figures must equal when they fit.
fn exact(p: &ResourcePlan) -> u128 {
    u128::from(p.bandwidth_burn_sun) + u128::from(p.energy_burn_sun) + u128::from(p.activation_sun)
}

proptest! {
    #[test]
    fn totals_add_up_for_inputs_up_to_a_billion(i in inputs(REAL)) {
        let p = plan(&i);
        prop_assert_eq!(u128::from(p.total_burn_sun), exact(&p));
        prop_assert_eq!(p.energy_from_account + p.energy_burned, p.energy_needed);
        prop_assert_eq!(
            u128::from(p.energy_burn_sun),
            u128::from(p.energy_burned) * u128::from(i.prices.energy_sun)
        );
        prop_assert!(p.energy_from_account <= i.available.energy);
        prop_assert_eq!(p.bandwidth_needed, i.bandwidth_bytes);
        // Whole from one source: nothing is burned for bandwidth unless neither source covers
        // it all, and then all of it is.
        match p.bandwidth_source {
            BandwidthSource::Staked => {
                prop_assert!(i.available.staked_bandwidth >= i.bandwidth_bytes)
            }
            BandwidthSource::Free => {
                prop_assert!(i.available.free_bandwidth >= i.bandwidth_bytes)
            }
            BandwidthSource::Burned => prop_assert_eq!(
                u128::from(p.bandwidth_burn_sun),
                u128::from(i.bandwidth_bytes) * u128::from(i.prices.bandwidth_sun)
            ),
            BandwidthSource::CreateAccountFee => prop_assert_eq!(p.bandwidth_burn_sun, 0),
        }
        if p.bandwidth_source != BandwidthSource::Burned {
            prop_assert_eq!(p.bandwidth_burn_sun, 0);
        }
        // What it may burn covers what it is expected to burn.
        prop_assert!(p.max_burn_sun >= p.total_burn_sun);
        if p.fee_limit_sun > 0 {
            prop_assert!(p.fee_limit_sun >= p.energy_burn_sun);
        }
    }

    #[test]
    fn any_u64_input_saturates_instead_of_overflowing(i in inputs(u64::MAX)) {
        let p = plan(&i);
        // No panic (debug builds trap on overflow), and a total that saturated is u64::MAX,
        // never a wrapped small number.
        let sum = exact(&p);
        prop_assert_eq!(u128::from(p.total_burn_sun), sum.min(u128::from(u64::MAX)));
        prop_assert!(p.max_burn_sun >= p.total_burn_sun);
        let largest = p.energy_burn_sun.max(p.bandwidth_burn_sun).max(p.activation_sun);
        prop_assert!(p.total_burn_sun >= largest);
    }

    #[test]
    fn a_new_holder_never_costs_less(i in inputs(REAL)) {
        let with = |holds| plan(&PlanInputs {
            operation: Operation::Trc20Transfer {
                recipient_holds_token: holds,
                estimated_energy: None,
            },
            ..i
        });
        let (holder, new) = (with(true), with(false));
        prop_assert!(new.energy_needed > holder.energy_needed);
        prop_assert!(new.total_burn_sun >= holder.total_burn_sun);
        prop_assert!(new.fee_limit_sun >= holder.fee_limit_sun);
        prop_assert!(new.max_burn_sun >= holder.max_burn_sun);
    }

    #[test]
    fn more_resources_never_cost_more(
        i in inputs(REAL),
        more in available(REAL),
    ) {
        let richer = AvailableResources {
            free_bandwidth: i.available.free_bandwidth.saturating_add(more.free_bandwidth),
            staked_bandwidth: i.available.staked_bandwidth.saturating_add(more.staked_bandwidth),
            energy: i.available.energy.saturating_add(more.energy),
        };
        let (less, rich) = (plan(&i), plan(&PlanInputs { available: richer, ..i }));
        prop_assert!(rich.total_burn_sun <= less.total_burn_sun);
        prop_assert!(rich.energy_burned <= less.energy_burned);
        // The bid and the worst case do not depend on what the account has left.
        prop_assert_eq!(rich.fee_limit_sun, less.fee_limit_sun);
        prop_assert_eq!(rich.max_burn_sun, less.max_burn_sun);
    }
}
