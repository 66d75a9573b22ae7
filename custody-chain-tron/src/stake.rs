//! [`TronStake`], the [`EnergyStake`] port: what the hot wallet's Stake 2.0 energy stake can
//! lend now, read from the node on every call (`wallet/getaccountresource` for the network's
//! energy per staked TRX, `wallet/getcandelegatedmaxsize` for the delegatable sun).

use async_trait::async_trait;
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::ports::stake::{EnergyStake, StakeFacts};
use custody_core::tron::delegation::EnergyMarket;

use crate::api;
use crate::client::TronClient;

#[derive(Debug, Clone)]
pub struct TronStake {
    client: TronClient,
}

impl TronStake {
    pub fn new(client: TronClient) -> Self {
        TronStake { client }
    }
}

/// The market an account's resources print; `None` when either total is missing or not
/// positive (an account the node answers `{}` for).
pub fn energy_market(r: &api::AccountResource) -> Option<EnergyMarket> {
    let limit = u64::try_from(r.total_energy_limit)
        .ok()
        .filter(|v| *v > 0)?;
    let weight = u64::try_from(r.total_energy_weight)
        .ok()
        .filter(|v| *v > 0)?;
    Some(EnergyMarket {
        total_energy_limit: limit,
        total_energy_weight: weight,
    })
}

#[async_trait]
impl EnergyStake for TronStake {
    async fn stake_facts(&self, owner: &str) -> Result<StakeFacts, PortError> {
        let owner = TronAddress::parse(owner)
            .map_err(|e| PortError::permanent("tron", format!("owner {owner:?}: {e}")))?;
        let resources = self.client.account_resource(&owner).await?;
        let delegatable = self.client.can_delegate_energy_sun(&owner).await?;
        Ok(StakeFacts {
            market: energy_market(&resources),
            // A negative figure (which no node writes) lends nothing.
            delegatable_sun: Amount::from_units(u128::try_from(delegatable).unwrap_or(0)),
        })
    }

    async fn account_energy(&self, address: &str) -> Result<(u64, u64), PortError> {
        let address = TronAddress::parse(address)
            .map_err(|e| PortError::permanent("tron", format!("address {address:?}: {e}")))?;
        let r = self.client.account_resource(&address).await?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok((n(r.energy_limit), n(r.energy_used)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_market_comes_from_the_totals_and_is_absent_without_them() {
        // Shape of a documented `getaccountresource` answer (developers.tron.network).
        let r: api::AccountResource = serde_json::from_str(
            r#"{"freeNetLimit":600,"NetLimit":0,"TotalNetLimit":43200000000,
                "TotalNetWeight":26604794772,"EnergyLimit":1335,
                "TotalEnergyLimit":180000000000,"TotalEnergyWeight":13400000000}"#,
        )
        .unwrap();
        assert_eq!(
            energy_market(&r),
            Some(EnergyMarket {
                total_energy_limit: 180_000_000_000,
                total_energy_weight: 13_400_000_000
            })
        );
        let empty: api::AccountResource = serde_json::from_str("{}").unwrap();
        assert_eq!(energy_market(&empty), None);
        let max: api::CanDelegatedMaxSize = serde_json::from_str("{}").unwrap();
        assert_eq!(max.max_size, 0, "{{}} means nothing to delegate");
    }
}
