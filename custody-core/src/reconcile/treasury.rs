//! The TREASURY decision of decisions §14, pure: per (network, asset), are the funds on chain
//! at least what users are owed?
//!
//! The rule, per (network, asset) of the catalog:
//!
//! ```text
//! holdings    = hot wallet + every deposit address (on-chain balances) + in transit
//! liabilities = users' available + reserved (posted credits − posted debits of user accounts)
//! balanced   ⇔ holdings ≥ liabilities;  otherwise short by liabilities − holdings
//! ```
//!
//! **In transit**: a withdrawal or swap holds its total (`reserve`) and the hold counts in the
//! liabilities (as reserved) until it settles, in the transaction that records its outgoing
//! transaction final (or releases it, on failure). Once the payment is on chain it has left the
//! holdings while its hold still counts, so a healthy service would look short between the
//! inclusion and the settlement. Every such hold is therefore counted with the holdings, as
//! already paid out, from the moment its payment has been signed (`signed`, `sent` or
//! `included`) until it ends: the store learns of an inclusion only when the broadcaster next
//! looks, so "signed" is the earliest the funds may have left. A payment not signed yet is
//! counted on neither side beyond its hold (its funds are still on chain). This can overstate
//! the holdings by the house's share of those holds, and by a signed payment not yet mined, for
//! as long as they are in flight: a real shortfall is then reported once they have ended, never
//! a healthy service as short.
//!
//! **Pending outgoing** (what unfinished payments still take out of the hot wallet, as the
//! treasury view shows it) is listed beside the figures; it is not added to the liabilities,
//! because every payment with an amount today is a withdrawal or a swap whose hold already
//! counts there (an approval moves no funds; its fee, like a token payment's gas, is the
//! house's).
//!
//! The balances are read before the ledger and the outgoing transactions (one snapshot), so a
//! payment signed in between is counted in transit while its funds are still read on chain:
//! the error goes the safe way.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::amount::Amount;
use crate::asset::AssetId;
use crate::network::Network;
use crate::outgoing::OutStatus;
use crate::treasury::AssetFigures;

/// A withdrawal's or swap's hold with the state of the outgoing transaction that pays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPayment {
    /// The held asset (a swap's `asset_in`).
    pub asset: AssetId,
    /// The held total (`total_debited_units`).
    pub hold: Amount,
    pub status: OutStatus,
}

/// Whether a payment in `status` may already have left the holdings while its hold still
/// counts in the liabilities (see the module docs).
pub const fn counts_in_transit(status: OutStatus) -> bool {
    match status {
        OutStatus::Signed | OutStatus::Sent | OutStatus::Included => true,
        // Built: nothing signed, the funds are still there. Final / Failed: the hold has
        // settled or been released in the same transaction.
        OutStatus::Built | OutStatus::Final | OutStatus::Failed => false,
    }
}

/// What signed, unfinished payments hold, per asset.
pub fn in_transit(held: &[HeldPayment]) -> BTreeMap<AssetId, Amount> {
    let mut sums: BTreeMap<AssetId, Amount> = BTreeMap::new();
    for p in held.iter().filter(|p| counts_in_transit(p.status)) {
        let sum = sums.entry(p.asset.clone()).or_insert(Amount::ZERO);
        // Saturating: a sum past u128 can only overstate the holdings, and is not a real figure.
        *sum = sum.checked_add(p.hold).unwrap_or(Amount::MAX);
    }
    sums
}

/// One (network, asset) whose holdings fall short, with the figures on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discrepancy {
    pub network: Network,
    pub asset: String,
    pub hot_wallet_units: Amount,
    pub deposit_addresses_units: Amount,
    pub in_transit_units: Amount,
    pub holdings_units: Amount,
    pub user_liabilities_units: Amount,
    pub pending_outgoing_units: Amount,
    pub shortfall_units: Amount,
}

impl Discrepancy {
    pub fn asset_id(&self) -> AssetId {
        AssetId::new(self.network, self.asset.clone())
    }

    /// The figures in one line, for the alert and the control's reason.
    pub fn describe(&self) -> String {
        format!(
            "{} {}: holdings {} (hot wallet {} + deposit addresses {} + in transit {}) < user \
             liabilities {}: short by {} (pending outgoing {})",
            self.network,
            self.asset,
            self.holdings_units,
            self.hot_wallet_units,
            self.deposit_addresses_units,
            self.in_transit_units,
            self.user_liabilities_units,
            self.shortfall_units,
            self.pending_outgoing_units
        )
    }
}

/// What a TREASURY run found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    /// The (network, asset)s short, with their figures.
    pub shortfalls: Vec<Discrepancy>,
    /// Why each (network, asset) whose on-chain holdings could not be read was not decided.
    pub unreadable: Vec<String>,
}

/// Keeps the shortfalls `first` found that a second, later read (`second`) finds too, with the
/// second's figures. The holdings are read address by address while blocks go on: a sweep
/// landing between the hot wallet's read and its deposit address's, or a deposit credited
/// after its address was read, shows money missing that is not; such a race does not happen
/// twice on the same asset in a row. What either read could not read stays unread.
pub fn confirm(first: Outcome, second: Outcome) -> Outcome {
    let shortfalls = second
        .shortfalls
        .into_iter()
        .filter(|d| {
            first
                .shortfalls
                .iter()
                .any(|f| f.network == d.network && f.asset == d.asset)
        })
        .collect();
    let mut unreadable = first.unreadable;
    for u in second.unreadable {
        if !unreadable.contains(&u) {
            unreadable.push(u);
        }
    }
    Outcome {
        shortfalls,
        unreadable,
    }
}

/// Decides every (network, asset) of `figures` whose on-chain holdings were read. One that
/// could not be read (a node down, a token contract missing) is listed in `unreadable` and
/// decided on nothing; it does not keep the others from being checked.
pub fn decide(figures: &[AssetFigures]) -> Outcome {
    let mut out = Outcome::default();
    for f in figures {
        let (Some(hot), Some(deposits)) = (f.hot_wallet_units, f.deposit_addresses_units) else {
            out.unreadable.push(format!(
                "the on-chain holdings of {} {} could not be read: {}",
                f.network,
                f.asset,
                f.errors.join("; ")
            ));
            continue;
        };
        let holdings = hot
            .checked_add(deposits)
            .and_then(|h| h.checked_add(f.in_transit_units))
            .unwrap_or(Amount::MAX);
        if let Some(short) = f.user_liabilities_units.checked_sub(holdings) {
            if !short.is_zero() {
                out.shortfalls.push(Discrepancy {
                    network: f.network,
                    asset: f.asset.clone(),
                    hot_wallet_units: hot,
                    deposit_addresses_units: deposits,
                    in_transit_units: f.in_transit_units,
                    holdings_units: holdings,
                    user_liabilities_units: f.user_liabilities_units,
                    pending_outgoing_units: f.pending_outgoing_units,
                    shortfall_units: short,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod confirm_tests {
    use super::*;

    fn short(network: Network, asset: &str, units: u128) -> Discrepancy {
        Discrepancy {
            network,
            asset: asset.into(),
            hot_wallet_units: Amount::ZERO,
            deposit_addresses_units: Amount::ZERO,
            in_transit_units: Amount::ZERO,
            holdings_units: Amount::ZERO,
            user_liabilities_units: Amount::from_units(units),
            pending_outgoing_units: Amount::ZERO,
            shortfall_units: Amount::from_units(units),
        }
    }

    #[test]
    fn only_a_shortfall_both_reads_find_is_kept_with_the_later_figures() {
        let first = Outcome {
            shortfalls: vec![
                short(Network::Bsc, "BNB", 5),
                short(Network::Bsc, "USDT", 7),
            ],
            unreadable: vec!["a".into()],
        };
        // The BNB one was a sweep landing between two reads: gone on the second read.
        let second = Outcome {
            shortfalls: vec![
                short(Network::Bsc, "USDT", 9),
                short(Network::Tron, "TRX", 1),
            ],
            unreadable: vec!["a".into(), "b".into()],
        };
        let kept = confirm(first, second);
        assert_eq!(kept.shortfalls, vec![short(Network::Bsc, "USDT", 9)]);
        assert_eq!(kept.unreadable, vec!["a".to_owned(), "b".to_owned()]);
    }
}
