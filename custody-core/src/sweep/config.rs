//! `[sweeps]` of `custody.toml`: moving deposit addresses' funds to the hot wallet
//! (decisions §13), owned here beside the [`SweepPolicy`] it becomes. The sweeper of
//! `custody-runtime` reads its timings and the TRON energy mode.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SweepPolicy;
use crate::amount::Amount;
use crate::asset::AssetCatalog;
use crate::network::Network;
use crate::settings::ConfigError;

mod defaults {
    pub fn interval_ms() -> u64 {
        60_000
    }

    pub fn cost_multiple() -> u32 {
        10
    }

    pub fn failure_backoff_ms() -> u64 {
        60 * 60 * 1000
    }

    pub fn bsc_funding_max_units() -> String {
        // 0.01 BNB: a token transfer's gas at up to about 100 gwei.
        "10000000000000000".into()
    }

    pub fn tron_funding_max_units() -> String {
        // 50 TRX: a USDT transfer to a new holder burning its energy, plus activation.
        "50000000".into()
    }

    pub fn tron_delegation_margin_percent() -> u64 {
        10
    }
}

/// `[sweeps]`: moving deposit addresses' funds to the hot wallet (decisions §13).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepsConfig {
    /// Time between two rounds of the sweeper of each network; 0 turns sweeping off.
    #[serde(default = "defaults::interval_ms")]
    pub interval_ms: u64,
    /// An amount is swept only when it is at least this many times the cost of moving it.
    #[serde(default = "defaults::cost_multiple")]
    pub cost_multiple: u32,
    /// An address whose last sweep failed is left alone this long (each try burns a fee).
    #[serde(default = "defaults::failure_backoff_ms")]
    pub failure_backoff_ms: u64,
    /// The most one treasury funding may send a deposit address, per network (smallest units
    /// of the native coin): a fee spike cannot drain the hot wallet into deposit addresses.
    #[serde(default = "defaults::bsc_funding_max_units")]
    pub bsc_funding_max_units: String,
    #[serde(default = "defaults::tron_funding_max_units")]
    pub tron_funding_max_units: String,
    /// How a TRC20 sweep gets the energy its transfer needs: `burn_trx` (a funding sends the
    /// TRX it burns) or `delegate` (the hot wallet lends the energy of its Stake 2.0 stake for
    /// the sweep and takes it back after; TRX is still sent for bandwidth and activation, and
    /// burned instead when the stake cannot lend enough).
    #[serde(default)]
    pub tron_energy_mode: TronEnergyMode,
    /// `delegate`: the energy lent is the resource planner's figure plus this percentage (the
    /// network's energy per staked TRX moves between the plan and the sweep).
    #[serde(default = "defaults::tron_delegation_margin_percent")]
    pub tron_delegation_margin_percent: u64,
    /// Per-asset minimums; an asset without one is swept above one whole coin or token
    /// (10^decimals units).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<SweepPolicyConfig>,
}

/// `[sweeps] tron_energy_mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TronEnergyMode {
    #[default]
    BurnTrx,
    Delegate,
}

/// `[[sweeps.policies]]`: amounts of `asset` at or below `min_units` stay on their address.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepPolicyConfig {
    pub network: Network,
    pub asset: String,
    pub min_units: String,
}

impl Default for SweepsConfig {
    fn default() -> Self {
        SweepsConfig {
            interval_ms: defaults::interval_ms(),
            cost_multiple: defaults::cost_multiple(),
            failure_backoff_ms: defaults::failure_backoff_ms(),
            bsc_funding_max_units: defaults::bsc_funding_max_units(),
            tron_funding_max_units: defaults::tron_funding_max_units(),
            tron_energy_mode: TronEnergyMode::default(),
            tron_delegation_margin_percent: defaults::tron_delegation_margin_percent(),
            policies: Vec::new(),
        }
    }
}

impl SweepsConfig {
    /// The sweep policy of every catalog asset of `network`, by asset code. Refuses a policy
    /// for an asset outside the catalog and amounts that are not whole numbers of units.
    pub fn policies(
        &self,
        catalog: &AssetCatalog,
        network: Network,
    ) -> Result<BTreeMap<String, SweepPolicy>, ConfigError> {
        let funding_max_native = self.funding_max(network)?;
        for p in &self.policies {
            if catalog.get(p.network, &p.asset).is_none() {
                return Err(ConfigError::new(
                    format!("[[sweeps.policies]] {} {}", p.network, p.asset),
                    "not an asset of the catalog",
                ));
            }
        }
        let mut out = BTreeMap::new();
        for asset in catalog.of_network(network) {
            let min_units = match self
                .policies
                .iter()
                .find(|p| p.network == network && p.asset == asset.code)
            {
                Some(p) => units(
                    format!("[[sweeps.policies]] {} {} min_units", p.network, p.asset),
                    &p.min_units,
                )?,
                None => Amount::from_units(
                    10u128
                        .checked_pow(u32::from(asset.decimals))
                        .unwrap_or(u128::MAX),
                ),
            };
            out.insert(
                asset.code.clone(),
                SweepPolicy {
                    min_units,
                    cost_multiple: self.cost_multiple,
                    funding_max_native,
                },
            );
        }
        Ok(out)
    }

    /// Refuses what [`SweepsConfig::policies`] does not read: a delegation margin over 100 %.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.tron_delegation_margin_percent > 100 {
            return Err(ConfigError::value(
                "[sweeps] tron_delegation_margin_percent",
                self.tron_delegation_margin_percent,
                "at most 100",
            ));
        }
        Ok(())
    }

    /// The most one treasury funding may send on `network`.
    fn funding_max(&self, network: Network) -> Result<Amount, ConfigError> {
        match network {
            Network::Bsc => units(
                "[sweeps] bsc_funding_max_units".into(),
                &self.bsc_funding_max_units,
            ),
            Network::Tron => units(
                "[sweeps] tron_funding_max_units".into(),
                &self.tron_funding_max_units,
            ),
        }
    }
}

/// `v` as an amount of smallest units; `key` names it in the error.
fn units(key: String, v: &str) -> Result<Amount, ConfigError> {
    Amount::parse_units(v).map_err(|e| ConfigError::value(key, format!("{v:?}"), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweeps(text: &str) -> Result<SweepsConfig, String> {
        toml::from_str::<SweepsConfig>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_tron_energy_mode_is_burn_trx_unless_delegate_is_asked() {
        let default = sweeps("").unwrap();
        assert_eq!(default.tron_energy_mode, TronEnergyMode::BurnTrx);
        assert_eq!(default.tron_delegation_margin_percent, 10);
        let delegate = sweeps("tron_energy_mode = \"delegate\"").unwrap();
        assert_eq!(delegate.tron_energy_mode, TronEnergyMode::Delegate);
        assert!(sweeps("tron_energy_mode = \"rent\"")
            .unwrap_err()
            .contains("unknown variant"));
        let c = SweepsConfig {
            tron_delegation_margin_percent: 101,
            ..SweepsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("tron_delegation_margin_percent"));
    }

    #[test]
    fn an_asset_without_a_policy_is_swept_above_one_whole_coin() {
        let section =
            sweeps("[[policies]]\nnetwork = \"TRON\"\nasset = \"USDT\"\nmin_units = \"5000000\"\n")
                .unwrap();
        let policies = section
            .policies(&AssetCatalog::mainnet(), Network::Tron)
            .unwrap();
        assert_eq!(policies["USDT"].min_units, Amount::from_units(5_000_000));
        assert_eq!(policies["TRX"].min_units, Amount::from_units(1_000_000));
        assert_eq!(
            policies["TRX"].funding_max_native,
            Amount::from_units(50_000_000)
        );
    }

    #[test]
    fn policies_that_cannot_be_applied_are_refused_by_name() {
        let refused = |text: &str| {
            sweeps(text)
                .unwrap()
                .policies(&AssetCatalog::mainnet(), Network::Bsc)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused("[[policies]]\nnetwork = \"TRON\"\nasset = \"DOGE\"\nmin_units = \"1\"\n"),
            "[[sweeps.policies]] TRON DOGE: not an asset of the catalog"
        );
        assert!(refused("bsc_funding_max_units = \"0.01\"")
            .starts_with("[sweeps] bsc_funding_max_units = \"0.01\": "));
    }
}
