//! Which arrivals at a watched address are deposits.
//!
//! The treasury moves coins into deposit addresses too: a token sweep is preceded by a gas
//! top-up from the hot wallet. Such a move is the service's own money going from one of its
//! addresses to another; crediting it to the address's user would create unbacked balance. So
//! every transfer to a watched address is classified here before it may become a deposit:
//!
//! - a transaction that is an attempt of one of the service's own outgoing transactions (the
//!   attempts' hashes are indexed by the store) is the treasury's, unless that transaction is a
//!   withdrawal: a user withdrawing to another user's deposit address of this service makes an
//!   ordinary deposit of the recipient;
//! - a native transfer from a hot wallet of the network that is no known withdrawal is the
//!   treasury's too (an operator's manual top-up, or an attempt the store does not know).

use uuid::Uuid;

use crate::chain::ChainAddress;
use crate::error::PortError;
use crate::outgoing::{OutgoingReads, Purpose};
use crate::ports::chain::ObservedTransfer;
use crate::Network;

/// What a transfer to a watched address is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// A user's deposit: recorded, confirmed and credited.
    Deposit,
    /// The treasury's own move: never a deposit, never on a user's ledger or webhooks.
    Treasury(TreasuryMove),
}

/// Why an arrival is the treasury's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreasuryMove {
    /// An attempt of outgoing transaction `outgoing_id`, paying for `purpose` (a funding, a
    /// sweep, a delegation or reclaim, a swap or an approval): its own record tracks it.
    Own { purpose: Purpose, outgoing_id: Uuid },
    /// Native coin from hot wallet `from` in a transaction the service did not sign as any
    /// payment it knows: recorded for admins as an alert.
    FromHotWallet { from: String },
}

/// Classifies transfer `t` of `network`. `hot_wallets` are the network's hot wallet addresses
/// (the current one and any former one).
pub fn classify<R: OutgoingReads + ?Sized>(
    reads: &mut R,
    network: Network,
    hot_wallets: &[ChainAddress],
    t: &ObservedTransfer,
) -> Result<Arrival, PortError> {
    if let Some(out) = reads.outgoing_by_attempt(network, &t.tx_hash.to_hex())? {
        return Ok(match out.purpose {
            Purpose::Withdrawal => Arrival::Deposit,
            purpose => Arrival::Treasury(TreasuryMove::Own {
                purpose,
                outgoing_id: out.id,
            }),
        });
    }
    let native = t.log_index.is_none();
    if native && hot_wallets.contains(&t.from) {
        return Ok(Arrival::Treasury(TreasuryMove::FromHotWallet {
            from: t.from.as_str().to_owned(),
        }));
    }
    Ok(Arrival::Deposit)
}
