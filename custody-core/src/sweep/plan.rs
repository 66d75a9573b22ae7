//! Whether to sweep an address now, and how: pure arithmetic over what the chain says the
//! address holds and what the transfer would cost.
//!
//! The rule (decisions §13): sweep only when the amount is above the asset's minimum and at
//! least `cost_multiple` × the cost of moving it (so fees never eat a meaningful share of what
//! is moved). A native sweep sends everything but the fee, leaving nothing behind the chain
//! does not force; a token sweep sends the whole token balance and needs the address to hold
//! the transfer's worst fee in the native coin, or a treasury funding of exactly what is
//! missing (capped, so a fee spike cannot drain the hot wallet into deposit addresses).

use crate::amount::Amount;

use super::record::Funding;
use super::{FundingKind, FundingStatus};

/// A sweep policy of one asset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepPolicy {
    /// Amounts at or below this are left where they are.
    pub min_units: Amount,
    /// The amount must be at least this many times the cost of moving it.
    pub cost_multiple: u32,
    /// The most one treasury funding may send (native units).
    pub funding_max_native: Amount,
}

/// What to do with one asset of one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing now, and why.
    Skip(String),
    /// Send `amount` to the hot wallet.
    Sweep { amount: Amount },
    /// Send the address `funding` of the native coin first; then sweep `amount`.
    Fund { amount: Amount, funding: Amount },
    /// TRON: lend the address the energy of `delegation` (after `funding` of TRX for its
    /// bandwidth and activation, when it needs any); then sweep `amount`; then take the energy
    /// back.
    Delegate {
        amount: Amount,
        funding: Option<Amount>,
        delegation: Delegation,
    },
}

/// The energy a token sweep borrows from the hot wallet's stake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delegation {
    /// Sun of stake whose energy is lent.
    pub stake_sun: Amount,
    /// The energy the transfer lacks, margin included (what the stake yields at least).
    pub energy: u64,
}

fn below_cost(amount: Amount, cost: Amount, multiple: u32) -> bool {
    // u128 × u32 cannot overflow the comparison: a product above u128 is more than any amount.
    match cost.units().checked_mul(u128::from(multiple)) {
        Some(bar) => amount.units() < bar,
        None => true,
    }
}

/// A native sweep of an address holding `balance`, whose transfer burns `fee` (on EVM the
/// exact 21,000 × price of a legacy transfer; on TRON the bandwidth it will burn).
pub fn plan_native(balance: Amount, fee: Amount, policy: &SweepPolicy) -> Plan {
    let Some(amount) = balance.checked_sub(fee).filter(|a| !a.is_zero()) else {
        return Plan::Skip(format!(
            "the balance {} does not cover the fee {}",
            balance.units(),
            fee.units()
        ));
    };
    if amount <= policy.min_units {
        return Plan::Skip(format!(
            "{} is not above the minimum {}",
            amount.units(),
            policy.min_units.units()
        ));
    }
    if below_cost(amount, fee, policy.cost_multiple) {
        return Plan::Skip(format!(
            "{} is less than {} × the fee {}",
            amount.units(),
            policy.cost_multiple,
            fee.units()
        ));
    }
    Plan::Sweep { amount }
}

/// What a token sweep reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenFacts {
    /// The address's token balance.
    pub token_balance: Amount,
    /// The address's native balance (what pays the fee).
    pub native_balance: Amount,
    /// The most the token transfer may burn (native units): what the address must hold.
    pub fee_max_native: Amount,
    /// The whole cost of the sweep (the transfer's expected fee, plus a funding's when one is
    /// needed) in units of the token, when a price of the native coin in it is known; without
    /// one only the minimum applies.
    pub cost_in_token: Option<Amount>,
}

pub fn plan_token(facts: &TokenFacts, policy: &SweepPolicy) -> Plan {
    let amount = facts.token_balance;
    if amount.is_zero() || amount <= policy.min_units {
        return Plan::Skip(format!(
            "{} is not above the minimum {}",
            amount.units(),
            policy.min_units.units()
        ));
    }
    if let Some(cost) = facts.cost_in_token {
        if below_cost(amount, cost, policy.cost_multiple) {
            return Plan::Skip(format!(
                "{} is less than {} × the cost {}",
                amount.units(),
                policy.cost_multiple,
                cost.units()
            ));
        }
    }
    match facts.fee_max_native.checked_sub(facts.native_balance) {
        None => Plan::Sweep { amount },
        Some(missing) if missing.is_zero() => Plan::Sweep { amount },
        Some(missing) if missing > policy.funding_max_native => Plan::Skip(format!(
            "the fee needs a funding of {}, above the cap {}",
            missing.units(),
            policy.funding_max_native.units()
        )),
        Some(missing) => Plan::Fund {
            amount,
            funding: missing,
        },
    }
}

/// The energy reclaim of `address` not yet final, among the network's open fundings: while one
/// is, nothing new is planned for the address. java-tron keeps one delegation record per
/// (owner, receiver), so the reclaim takes its stake's energy from whatever is delegated to the
/// address when it lands: a sweep planned on the address's energy now (the old loan still
/// counted) would find it gone, and a new loan would be eaten by the old reclaim.
pub fn reclaim_pending<'a>(open: &'a [Funding], address: &str) -> Option<&'a Funding> {
    open.iter().find(|f| {
        f.kind == FundingKind::EnergyReclaim
            && f.address == address
            && matches!(
                f.status,
                FundingStatus::Planned | FundingStatus::Broadcasted
            )
    })
}

/// The share of what the node says the hot wallet may delegate (`getcandelegatedmaxsize`) kept
/// back: that figure moves between the plan and the delegation's execution (the owner's own
/// energy use holds stake back, an operator may delegate too), and a delegation above it is
/// refused on chain, failing the sweep after its funding was paid.
pub const DELEGATION_HEADROOM_PERCENT: u128 = 5;

/// The stake (sun) a new delegation may take: `delegatable` (the node's figure) less
/// [`DELEGATION_HEADROOM_PERCENT`], less the open delegations of this service the node cannot
/// have counted yet (those not in a block: an included one is in the node's figure already).
pub fn delegation_budget(delegatable: Amount, open: &[Funding]) -> Amount {
    let kept = Amount::from_units(
        delegatable
            .units()
            .saturating_mul(100 - DELEGATION_HEADROOM_PERCENT)
            / 100,
    );
    let in_flight = open
        .iter()
        .filter(|f| {
            f.kind == FundingKind::EnergyDelegation
                && matches!(
                    f.status,
                    FundingStatus::Planned | FundingStatus::Broadcasted
                )
                && f.block_number.is_none()
        })
        .fold(Amount::ZERO, |sum, f| {
            sum.checked_add(f.amount).unwrap_or(Amount::MAX)
        });
    kept.checked_sub(in_flight).unwrap_or(Amount::ZERO)
}

/// What a TRON token sweep reads when the hot wallet lends energy
/// (`[sweeps] tron_energy_mode = "delegate"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegationFacts {
    pub token_balance: Amount,
    pub native_balance: Amount,
    /// What the transfer burns with the address's resources as they are, its energy aside:
    /// bandwidth it has no free or staked points for (sun). The address must hold it.
    pub burn_without_energy: Amount,
    /// Energy the transfer needs beyond what the address has (the resource planner's
    /// `energy_needed − energy_from_account`).
    pub energy_missing: u64,
    /// The stake lending `energy_missing` plus the margin, and that energy; `None` when the
    /// node gave no energy market.
    pub delegation: Option<Delegation>,
    /// What the hot wallet may delegate now, less its delegations in flight.
    pub delegatable: Amount,
    /// The whole cost (fundings, delegation and reclaim, the transfer's burn) in the token.
    pub cost_in_token: Option<Amount>,
}

/// Plans a token sweep whose energy is lent. `Err(why)` when it cannot be lent (no market,
/// not enough delegatable stake): the caller then burns TRX ([`plan_token`]).
pub fn plan_token_delegated(facts: &DelegationFacts, policy: &SweepPolicy) -> Result<Plan, String> {
    let amount = facts.token_balance;
    if amount.is_zero() || amount <= policy.min_units {
        return Ok(Plan::Skip(format!(
            "{} is not above the minimum {}",
            amount.units(),
            policy.min_units.units()
        )));
    }
    if let Some(cost) = facts.cost_in_token {
        if below_cost(amount, cost, policy.cost_multiple) {
            return Ok(Plan::Skip(format!(
                "{} is less than {} × the cost {}",
                amount.units(),
                policy.cost_multiple,
                cost.units()
            )));
        }
    }
    let funding = match facts.burn_without_energy.checked_sub(facts.native_balance) {
        None => None,
        Some(missing) if missing.is_zero() => None,
        Some(missing) if missing > policy.funding_max_native => {
            return Ok(Plan::Skip(format!(
                "the bandwidth needs a funding of {}, above the cap {}",
                missing.units(),
                policy.funding_max_native.units()
            )))
        }
        Some(missing) => Some(missing),
    };
    if facts.energy_missing == 0 {
        // The address has the energy already (a delegation still there, its own stake).
        return Ok(match funding {
            None => Plan::Sweep { amount },
            Some(funding) => Plan::Fund { amount, funding },
        });
    }
    let Some(delegation) = facts.delegation else {
        return Err(
            "the node gave no energy per staked TRX (TotalEnergyLimit, TotalEnergyWeight)".into(),
        );
    };
    if delegation.energy < facts.energy_missing {
        return Err(format!(
            "a delegation of {} energy does not cover the {} missing",
            delegation.energy, facts.energy_missing
        ));
    }
    if delegation.stake_sun > facts.delegatable {
        return Err(format!(
            "{} energy takes {} sun of stake; the hot wallet can delegate {}",
            delegation.energy,
            delegation.stake_sun.units(),
            facts.delegatable.units()
        ));
    }
    Ok(Plan::Delegate {
        amount,
        funding,
        delegation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn delegation_facts() -> DelegationFacts {
        DelegationFacts {
            token_balance: u(5_000),
            native_balance: u(0),
            burn_without_energy: u(345),
            energy_missing: 130_285,
            delegation: Some(Delegation {
                stake_sun: u(14_332_000_000),
                energy: 143_313,
            }),
            delegatable: u(20_000_000_000),
            cost_in_token: Some(u(100)),
        }
    }

    #[test]
    fn a_delegated_sweep_funds_only_the_bandwidth_and_lends_the_energy() {
        assert_eq!(
            plan_token_delegated(&delegation_facts(), &policy()),
            Ok(Plan::Delegate {
                amount: u(5_000),
                funding: Some(u(345)),
                delegation: Delegation {
                    stake_sun: u(14_332_000_000),
                    energy: 143_313
                }
            })
        );
        // Free bandwidth: nothing burned, no TRX sent.
        let free = DelegationFacts {
            burn_without_energy: u(0),
            ..delegation_facts()
        };
        assert!(matches!(
            plan_token_delegated(&free, &policy()),
            Ok(Plan::Delegate { funding: None, .. })
        ));
        // The address has the energy: no delegation.
        let has_energy = DelegationFacts {
            energy_missing: 0,
            ..delegation_facts()
        };
        assert_eq!(
            plan_token_delegated(&has_energy, &policy()),
            Ok(Plan::Fund {
                amount: u(5_000),
                funding: u(345)
            })
        );
    }

    #[test]
    fn a_delegation_falls_back_to_burning_without_enough_stake_or_a_market() {
        let short = DelegationFacts {
            delegatable: u(14_331_999_999),
            ..delegation_facts()
        };
        assert!(plan_token_delegated(&short, &policy()).is_err());
        let no_market = DelegationFacts {
            delegation: None,
            ..delegation_facts()
        };
        assert!(plan_token_delegated(&no_market, &policy()).is_err());
        // Small amounts are skipped before any stake is looked at.
        let small = DelegationFacts {
            token_balance: u(100),
            ..short
        };
        assert!(matches!(
            plan_token_delegated(&small, &policy()),
            Ok(Plan::Skip(_))
        ));
    }

    fn u(n: u128) -> Amount {
        Amount::from_units(n)
    }

    fn policy() -> SweepPolicy {
        SweepPolicy {
            min_units: u(100),
            cost_multiple: 10,
            funding_max_native: u(1_000),
        }
    }

    #[test]
    fn a_native_sweep_leaves_exactly_the_fee() {
        assert_eq!(
            plan_native(u(10_000), u(210), &policy()),
            Plan::Sweep { amount: u(9_790) }
        );
    }

    #[test]
    fn small_or_costly_native_amounts_stay() {
        assert!(matches!(
            plan_native(u(300), u(210), &policy()),
            Plan::Skip(_)
        ));
        assert!(matches!(
            plan_native(u(200), u(210), &policy()),
            Plan::Skip(_)
        ));
        // 1,999 is above the minimum but less than 10 × 210.
        assert!(matches!(
            plan_native(u(2_209), u(210), &policy()),
            Plan::Skip(_)
        ));
        assert_eq!(
            plan_native(u(2_310), u(210), &policy()),
            Plan::Sweep { amount: u(2_100) }
        );
    }

    #[test]
    fn a_token_sweep_is_funded_with_exactly_what_is_missing() {
        let facts = TokenFacts {
            token_balance: u(5_000),
            native_balance: u(30),
            fee_max_native: u(500),
            cost_in_token: Some(u(400)),
        };
        assert_eq!(
            plan_token(&facts, &policy()),
            Plan::Fund {
                amount: u(5_000),
                funding: u(470)
            }
        );
        let enough = TokenFacts {
            native_balance: u(500),
            ..facts
        };
        assert_eq!(
            plan_token(&enough, &policy()),
            Plan::Sweep { amount: u(5_000) }
        );
    }

    #[test]
    fn a_token_sweep_skips_when_the_funding_is_above_the_cap_or_the_cost_too_high() {
        let facts = TokenFacts {
            token_balance: u(5_000),
            native_balance: u(0),
            fee_max_native: u(1_001),
            cost_in_token: None,
        };
        assert!(matches!(plan_token(&facts, &policy()), Plan::Skip(_)));
        let costly = TokenFacts {
            fee_max_native: u(10),
            cost_in_token: Some(u(501)),
            ..facts
        };
        assert!(matches!(plan_token(&costly, &policy()), Plan::Skip(_)));
        let small = TokenFacts {
            token_balance: u(100),
            fee_max_native: u(10),
            ..facts
        };
        assert!(matches!(plan_token(&small, &policy()), Plan::Skip(_)));
    }

    proptest! {
        #[test]
        fn a_native_sweep_never_sends_more_than_the_balance_less_the_fee(
            balance in 0u128..u128::MAX / 2, fee in 0u128..1u128 << 80, min in 0u128..1u128 << 70,
            multiple in 0u32..1_000,
        ) {
            let p = SweepPolicy { min_units: u(min), cost_multiple: multiple, funding_max_native: u(0) };
            if let Plan::Sweep { amount } = plan_native(u(balance), u(fee), &p) {
                prop_assert_eq!(amount.units() + fee, balance);
                prop_assert!(amount.units() > min);
                prop_assert!(amount.units() >= fee * u128::from(multiple));
            }
        }

        #[test]
        fn a_token_plan_never_funds_above_the_cap_nor_more_than_is_missing(
            token in 0u128..1u128 << 100, native in 0u128..1u128 << 70, fee in 0u128..1u128 << 70,
            cap in 0u128..1u128 << 70,
        ) {
            let p = SweepPolicy { min_units: u(0), cost_multiple: 1, funding_max_native: u(cap) };
            let facts = TokenFacts { token_balance: u(token), native_balance: u(native), fee_max_native: u(fee), cost_in_token: None };
            match plan_token(&facts, &p) {
                Plan::Fund { amount, funding } => {
                    prop_assert_eq!(amount.units(), token);
                    prop_assert!(funding.units() <= cap);
                    prop_assert_eq!(funding.units() + native, fee);
                }
                Plan::Sweep { amount } => {
                    prop_assert_eq!(amount.units(), token);
                    prop_assert!(native >= fee);
                }
                Plan::Skip(_) => {}
                Plan::Delegate { .. } => prop_assert!(false, "plan_token never delegates"),
            }
        }
    }
}
