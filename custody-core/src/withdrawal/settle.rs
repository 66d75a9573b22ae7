//! How a confirmed withdrawal's hold settles (decisions §11): the user pays the whole total
//! they were quoted; the amount and the network cost actually paid leave the treasury; the
//! rest (markup, service fee, spread, and the difference between quoted and actual network
//! cost) is the house's revenue in the withdrawn asset. For a token, the gas was paid in the
//! native coin: that is a network-fee expense of the house in the native coin.
//!
//! The hold moves the total from the user to the treasury account of the asset; these legs,
//! posted in the same transaction, move the house's share on to revenue and book the native
//! gas. Every leg balances per asset on its own.

use crate::amount::Amount;
use crate::asset::AssetId;
use crate::ledger::{AccountKey, LedgerError, Leg, SystemAccount};

use super::costs::{mul_div_ceil, Costs, Rate};

/// What settling one withdrawal posts beside the hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// What the user pays: the quoted total, always.
    pub user_pays: Amount,
    /// Legs posted with the settle.
    pub also: Vec<Leg>,
    /// The actual network cost in units of the withdrawn asset (at the quote's rate, rounded
    /// up), shown as `actual_network_cost_units`.
    pub actual_cost_units: Amount,
}

fn overflow(what: &str) -> LedgerError {
    LedgerError::Invariant(format!("withdrawal settlement: {what} overflows"))
}

/// The settlement of a withdrawal of `amount` of `asset` (native coin of its network:
/// `native`) quoted at `costs` with the native coin priced at `rate`, whose transaction paid
/// `gas_native` in the native coin.
pub fn settlement(
    asset: &AssetId,
    native: &AssetId,
    amount: Amount,
    costs: &Costs,
    rate: Rate,
    gas_native: Amount,
) -> Result<Settlement, LedgerError> {
    let treasury = |a: &AssetId| AccountKey::system(SystemAccount::Treasury, a.clone());
    let revenue = AccountKey::system(SystemAccount::Revenue, asset.clone());
    let total = costs.total_debited_units;
    let is_native = asset == native;
    let actual_cost_units = if is_native {
        gas_native
    } else {
        Amount::from_units(
            mul_div_ceil(
                gas_native.units(),
                rate.asset_units.units(),
                rate.native_units.units(),
            )
            .ok_or_else(|| overflow("the actual network cost"))?,
        )
    };
    // What leaves the treasury of this asset: the amount, and the gas when the gas is paid in
    // this very asset.
    let leaves = if is_native {
        amount
            .checked_add(gas_native)
            .ok_or_else(|| overflow("amount + gas"))?
    } else {
        amount
    };
    let mut also = Vec::new();
    // The hold credited the whole total to the treasury; the house keeps the difference.
    match total.checked_sub(leaves) {
        Some(house) if !house.is_zero() => {
            also.push(Leg::debit(treasury(asset), house));
            also.push(Leg::credit(revenue, house));
        }
        Some(_) => {}
        None => {
            // The gas cost more than everything the user paid for: a loss of the house.
            let loss = leaves
                .checked_sub(total)
                .ok_or_else(|| overflow("the loss"))?;
            also.push(Leg::debit(revenue, loss));
            also.push(Leg::credit(treasury(asset), loss));
        }
    }
    if !is_native && !gas_native.is_zero() {
        also.push(Leg::debit(
            AccountKey::system(SystemAccount::NetworkFees, native.clone()),
            gas_native,
        ));
        also.push(Leg::credit(treasury(native), gas_native));
    }
    Ok(Settlement {
        user_pays: total,
        also,
        actual_cost_units,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::ledger::Direction;
    use crate::network::Network;

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

    /// Net movement per (account, asset) of the hold (user → treasury) and the legs: credits
    /// positive.
    fn nets(asset: &AssetId, s: &Settlement) -> BTreeMap<AccountKey, i128> {
        let mut n: BTreeMap<AccountKey, i128> = BTreeMap::new();
        let total = i128::try_from(s.user_pays.units()).unwrap();
        *n.entry(AccountKey::system(SystemAccount::Treasury, asset.clone()))
            .or_default() += total;
        for leg in &s.also {
            let v = i128::try_from(leg.amount.units()).unwrap();
            *n.entry(leg.account.clone()).or_default() += match leg.direction {
                Direction::Credit => v,
                Direction::Debit => -v,
            };
        }
        n
    }

    #[test]
    fn a_bnb_withdrawal_pays_amount_and_gas_from_the_treasury_and_keeps_the_rest() {
        let c = costs(1_000, 63, 6, 7, 0);
        let s = settlement(&bnb(), &bnb(), u(1_000), &c, Rate::NATIVE, u(50)).unwrap();
        assert_eq!(s.user_pays, u(1_076));
        assert_eq!(s.actual_cost_units, u(50));
        let n = nets(&bnb(), &s);
        assert_eq!(
            n[&AccountKey::system(SystemAccount::Treasury, bnb())],
            1_050
        );
        assert_eq!(n[&AccountKey::system(SystemAccount::Revenue, bnb())], 26);
    }

    #[test]
    fn gas_above_everything_paid_is_a_loss_of_the_house() {
        let c = costs(1_000, 63, 0, 0, 0);
        let s = settlement(&bnb(), &bnb(), u(1_000), &c, Rate::NATIVE, u(100)).unwrap();
        let n = nets(&bnb(), &s);
        assert_eq!(
            n[&AccountKey::system(SystemAccount::Treasury, bnb())],
            1_100
        );
        assert_eq!(n[&AccountKey::system(SystemAccount::Revenue, bnb())], -37);
    }

    #[test]
    fn a_token_withdrawal_books_the_gas_as_a_native_expense() {
        // 1 BNB unit = 600 USDT units at the quote.
        let rate = Rate {
            asset_units: u(600),
            native_units: u(1),
        };
        let c = costs(100, 600, 60, 8, 3);
        let s = settlement(&usdt(), &bnb(), u(100), &c, rate, u(2)).unwrap();
        assert_eq!(s.actual_cost_units, u(1_200));
        let n = nets(&usdt(), &s);
        assert_eq!(n[&AccountKey::system(SystemAccount::Treasury, usdt())], 100);
        assert_eq!(n[&AccountKey::system(SystemAccount::Revenue, usdt())], 671);
        assert_eq!(n[&AccountKey::system(SystemAccount::Treasury, bnb())], 2);
        assert_eq!(
            n[&AccountKey::system(SystemAccount::NetworkFees, bnb())],
            -2
        );
    }

    proptest! {
        #[test]
        fn every_settlement_balances_per_asset(
            amount in 1u128..1u128 << 100,
            network in 0u128..1u128 << 80,
            markup in 0u128..1u128 << 80,
            fee in 0u128..1u128 << 80,
            spread in 0u128..1u128 << 80,
            gas in 0u128..1u128 << 90,
            token in any::<bool>(),
        ) {
            let asset = if token { usdt() } else { bnb() };
            let rate = if token {
                Rate { asset_units: u(3), native_units: u(2) }
            } else {
                Rate::NATIVE
            };
            let c = costs(amount, network, markup, fee, spread);
            let s = settlement(&asset, &bnb(), u(amount), &c, rate, u(gas)).unwrap();
            // The user pays exactly the total; per asset, credits equal debits.
            prop_assert_eq!(s.user_pays, c.total_debited_units);
            let mut per_asset: BTreeMap<AssetId, i128> = BTreeMap::new();
            *per_asset.entry(asset.clone()).or_default() -= i128::try_from(s.user_pays.units()).unwrap();
            for (account, net) in nets(&asset, &s) {
                *per_asset.entry(account.asset().clone()).or_default() += net;
            }
            for (a, sum) in per_asset {
                prop_assert_eq!(sum, 0, "{:?} unbalanced", a);
            }
            // The treasury of the asset loses exactly what left the hot wallet in it.
            let n = nets(&asset, &s);
            let out = if token { amount } else { amount + gas };
            prop_assert_eq!(n[&AccountKey::system(SystemAccount::Treasury, asset.clone())], i128::try_from(out).unwrap());
            prop_assert!(s.also.iter().all(|l| !l.amount.is_zero()));
        }
    }
}
