//! TRON (Stake 2.0): what the hot wallet's stake can lend. The sweeper reads it before it plans
//! an energy delegation instead of burning TRX for a token sweep's energy.

use async_trait::async_trait;

use crate::amount::Amount;
use crate::error::PortError;
use crate::tron::delegation::EnergyMarket;

/// What `owner`'s stake can lend now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StakeFacts {
    /// The network's energy per staked TRX; `None` when the node did not print it (an
    /// account with no resources at all is answered `{}`).
    pub market: Option<EnergyMarket>,
    /// Sun of `owner`'s energy stake it may delegate now (`wallet/getcandelegatedmaxsize`,
    /// type 1): what it keeps of its stake, less the share its own used energy holds. 0 when
    /// the node answers `{}`.
    pub delegatable_sun: Amount,
}

/// Reading an account's energy stake.
///
/// An implementation MUST read both figures from the chain on each call (no cache: the
/// sweeper subtracts its own delegations not yet included itself, and a cached figure would
/// count them twice or not at all), and MUST return a transient error rather than a guess when
/// a node does not answer.
#[async_trait]
pub trait EnergyStake: Send + Sync {
    async fn stake_facts(&self, owner: &str) -> Result<StakeFacts, PortError>;

    /// `address`'s energy limit (its own stake and what is lent to it) and the part of it used
    /// (`EnergyLimit`, `EnergyUsed`; both 0 for an account the chain does not know).
    async fn account_energy(&self, address: &str) -> Result<(u64, u64), PortError>;
}
