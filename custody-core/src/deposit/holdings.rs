//! Funds on a deposit address that no deposit explains. The scanner sees native transfers of
//! transactions and token `Transfer` logs; BNB or TRX moved by a contract's internal call is
//! never seen, so it is never credited. Comparing each address's on-chain balance with what the
//! ledger credited for it (and has not swept away: nothing is swept yet) shows such funds to an
//! operator instead of leaving them unnoticed.

use serde::Serialize;

use crate::amount::Amount;
use crate::network::Network;
use crate::time::Timestamp;

/// One address holding more of an asset than its credited deposits explain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnexplainedBalance {
    pub network: Network,
    pub address: String,
    pub asset: String,
    pub onchain_units: Amount,
    pub onchain_block: u64,
    pub credited_units: Amount,
    /// `onchain_units - credited_units`.
    pub unexplained_units: Amount,
}

/// The last completed check of one network's addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HoldingsReport {
    pub checked_at: Option<Timestamp>,
    pub addresses_checked: u64,
    /// Balances that could not be read (the check goes on without them).
    pub errors: u64,
    pub unexplained: Vec<UnexplainedBalance>,
}

/// The excess of `onchain` over `credited`, when there is one. Less on chain than credited is
/// not this check's business (pending sweeps, and the treasury reconciliation, own that side).
pub fn unexplained(onchain: Amount, credited: Amount) -> Option<Amount> {
    onchain
        .checked_sub(credited)
        .filter(|excess| !excess.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_excess_is_unexplained() {
        let u = Amount::from_units;
        assert_eq!(unexplained(u(10), u(7)), Some(u(3)));
        assert_eq!(unexplained(u(7), u(7)), None);
        assert_eq!(unexplained(u(5), u(7)), None);
        assert_eq!(unexplained(u(1), Amount::ZERO), Some(u(1)));
    }
}
