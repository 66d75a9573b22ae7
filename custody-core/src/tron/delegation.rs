//! Lending the hot wallet's staked energy (Stake 2.0): how much stake a given energy takes.
//! Pure: the TRON adapter reads the inputs ([`EnergyMarket`] from `wallet/getaccountresource`,
//! the delegatable stake from `wallet/getcandelegatedmaxsize`).
//!
//! The rule (java-tron `EnergyProcessor.calculateGlobalEnergyLimitV2`, and the TRON
//! documentation's "Resource Model": energy = staked TRX / the network's TRX staked for energy
//! × the network's daily energy): an account's energy limit from `stake` sun is
//! `floor(stake / 10^6) × TotalEnergyLimit / TotalEnergyWeight`, where `TotalEnergyWeight` is
//! counted in whole TRX. Only whole TRX of stake count, so [`stake_for_energy`] asks for whole
//! TRX, and at least 1 TRX (`DelegateResourceActuator` refuses less).
//!
//! The ratio moves with everybody's staking between the plan and the sweep (the receiver's
//! limit is computed with the weight of the moment it spends), hence the margin.

use serde::{Deserialize, Serialize};

/// Sun per TRX.
pub const SUN_PER_TRX: u64 = 1_000_000;
/// The smallest delegation java-tron accepts: 1 TRX of stake.
pub const DELEGATION_MIN_SUN: u64 = SUN_PER_TRX;

/// The network's energy per staked TRX, from any account's `wallet/getaccountresource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnergyMarket {
    /// `TotalEnergyLimit`: the energy the whole network gets a day.
    pub total_energy_limit: u64,
    /// `TotalEnergyWeight`: whole TRX staked for energy by the whole network.
    pub total_energy_weight: u64,
}

impl EnergyMarket {
    /// The energy `stake_sun` of stake yields (rounded down as java-tron does); 0 for a market
    /// that has no weight.
    pub fn energy_of_stake(&self, stake_sun: u64) -> u64 {
        if self.total_energy_weight == 0 {
            return 0;
        }
        let energy = u128::from(stake_sun / SUN_PER_TRX) * u128::from(self.total_energy_limit)
            / u128::from(self.total_energy_weight);
        u64::try_from(energy).unwrap_or(u64::MAX)
    }
}

/// The sun of stake to delegate so that the receiver gets at least `energy` plus
/// `margin_percent` of it: whole TRX, at least [`DELEGATION_MIN_SUN`]. `None` when the market
/// gives no energy (a node that did not print the totals) or the figure does not fit a `u64`.
///
/// java-tron computes the limit in `double` (`(long) (stake / 10^6 × (limit / weight))`),
/// which can land 1 below the exact integer when the exact energy is a whole number: the stake
/// is computed for one energy more than wanted, so that even then the receiver has it (with a
/// margin of 0 too).
pub fn stake_for_energy(energy: u64, market: &EnergyMarket, margin_percent: u64) -> Option<u64> {
    if market.total_energy_limit == 0 || market.total_energy_weight == 0 {
        return None;
    }
    let wanted = u128::from(energy) + u128::from(energy) * u128::from(margin_percent) / 100;
    // trx × limit / weight ≥ wanted + 1  ⇔  trx ≥ (wanted + 1) × weight / limit (rounded up).
    let trx = ((wanted + 1) * u128::from(market.total_energy_weight))
        .div_ceil(u128::from(market.total_energy_limit))
        .max(1);
    u64::try_from(trx.checked_mul(u128::from(SUN_PER_TRX))?).ok()
}

/// The energy to lend an account whose energy limit is `limit` with `used` of it spent, so that
/// a transaction needing `needed` finds it available (`limit − used`, what java-tron lets it
/// take): the shortfall counted from the raw figures, so usage left above a limit that a
/// reclaim lowered is made up too.
pub fn energy_to_lend(needed: u64, limit: u64, used: u64) -> u64 {
    needed.saturating_add(used).saturating_sub(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The TRON API test server's market (mainnet's `TotalEnergyLimit`, 10 energy per TRX).
    const TEN_PER_TRX: EnergyMarket = EnergyMarket {
        total_energy_limit: 180_000_000_000,
        total_energy_weight: 18_000_000_000,
    };

    #[test]
    fn a_new_holder_usdt_transfer_takes_13_029_trx_at_ten_energy_per_trx() {
        // 130,285 energy / 10 = 13,028.5 → 13,029 TRX.
        assert_eq!(
            stake_for_energy(130_285, &TEN_PER_TRX, 0),
            Some(13_029 * SUN_PER_TRX)
        );
        // + 10 %: 143,313.5 → 143,313 energy (the margin rounds down) → 14,332 TRX.
        assert_eq!(
            stake_for_energy(130_285, &TEN_PER_TRX, 10),
            Some(14_332 * SUN_PER_TRX)
        );
        assert_eq!(TEN_PER_TRX.energy_of_stake(13_029 * SUN_PER_TRX), 130_290);
    }

    #[test]
    fn at_least_one_trx_and_nothing_without_a_market() {
        assert_eq!(stake_for_energy(0, &TEN_PER_TRX, 10), Some(SUN_PER_TRX));
        assert_eq!(stake_for_energy(1, &TEN_PER_TRX, 0), Some(SUN_PER_TRX));
        let none = EnergyMarket {
            total_energy_limit: 180_000_000_000,
            total_energy_weight: 0,
        };
        assert_eq!(stake_for_energy(1_000, &none, 0), None);
        assert_eq!(none.energy_of_stake(1_000 * SUN_PER_TRX), 0);
    }

    #[test]
    fn mainnet_like_weights_give_fractional_energy_per_trx() {
        // A documented answer: TotalEnergyLimit 180e9 over a weight of 13.4e9 TRX, about
        // 13.43 energy per TRX.
        let m = EnergyMarket {
            total_energy_limit: 180_000_000_000,
            total_energy_weight: 13_400_000_000,
        };
        let stake = stake_for_energy(64_285, &m, 0).unwrap();
        assert_eq!(stake % SUN_PER_TRX, 0);
        assert!(m.energy_of_stake(stake) > 64_285);
        assert!(m.energy_of_stake(stake - SUN_PER_TRX) <= 64_285);
    }

    /// java-tron `EnergyProcessor.calculateGlobalEnergyLimitV2`, in `double` as it computes it
    /// (not the integer formula the planner uses). Floating point on purpose: it is what is
    /// modelled.
    #[allow(
        clippy::float_arithmetic,
        clippy::cast_possible_truncation,
        clippy::cast_precision_loss,
        clippy::cast_sign_loss
    )]
    fn java_energy_limit(stake_sun: u64, m: &EnergyMarket) -> u64 {
        let energy_weight = stake_sun as f64 / SUN_PER_TRX as f64;
        (energy_weight * (m.total_energy_limit as f64 / m.total_energy_weight as f64)) as u64
    }

    #[test]
    fn a_whole_energy_figure_java_rounds_one_below_is_still_covered() {
        // 13/3 energy per TRX: 27 TRX give exactly 117 energy, which java-tron's double
        // arithmetic rounds to 116 (27 × 4.333… = 116.999…).
        let m = EnergyMarket {
            total_energy_limit: 13,
            total_energy_weight: 3,
        };
        assert_eq!(m.energy_of_stake(27 * SUN_PER_TRX), 117);
        assert_eq!(java_energy_limit(27 * SUN_PER_TRX, &m), 116);
        let stake = stake_for_energy(117, &m, 0).unwrap();
        assert!(java_energy_limit(stake, &m) >= 117, "{stake}");
    }

    #[test]
    fn the_energy_lent_makes_up_usage_above_the_limit() {
        assert_eq!(energy_to_lend(130_285, 0, 0), 130_285);
        assert_eq!(energy_to_lend(130_285, 100_000, 0), 30_285);
        assert_eq!(energy_to_lend(130_285, 200_000, 0), 0);
        // A reclaim took the limit back while 130,285 stayed used: lend that too.
        assert_eq!(energy_to_lend(64_285, 0, 130_285), 194_570);
        assert_eq!(energy_to_lend(64_285, 150_000, 100_000), 14_285);
    }

    proptest! {
        #[test]
        fn the_stake_always_yields_the_energy_and_one_trx_less_does_not(
            energy in 0u64..10_000_000_000, limit in 1u64..1_000_000_000_000,
            weight in 1u64..100_000_000_000, margin in 0u64..100,
        ) {
            let m = EnergyMarket { total_energy_limit: limit, total_energy_weight: weight };
            if let Some(stake) = stake_for_energy(energy, &m, margin) {
                let wanted = energy + energy * margin / 100;
                // Judged by java-tron's own arithmetic, not the formula under test.
                prop_assert!(java_energy_limit(stake, &m) >= wanted);
                prop_assert!(stake >= DELEGATION_MIN_SUN);
                prop_assert_eq!(stake % SUN_PER_TRX, 0);
                if stake > DELEGATION_MIN_SUN {
                    // Not more than needed: one TRX less falls short of one energy more than
                    // wanted, exactly (integers).
                    let less = u128::from(stake / SUN_PER_TRX - 1);
                    prop_assert!(
                        less * u128::from(limit) < (u128::from(wanted) + 1) * u128::from(weight)
                    );
                }
            }
        }
    }
}
