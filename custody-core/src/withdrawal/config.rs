//! `[[fee_policies]]` of `custody.toml`: the withdrawal fee policy of each (network, asset)
//! (decisions §11), owned here beside the [`FeePolicy`] it becomes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::FeePolicy;
use crate::amount::Amount;
use crate::asset::{AssetCatalog, AssetId};
use crate::network::Network;
use crate::settings::ConfigError;

/// One `[[fee_policies]]` entry. Amounts are `*_units` strings like the API's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeePolicyConfig {
    pub network: Network,
    pub asset: String,
    pub min_amount_units: String,
    pub max_amount_units: String,
    #[serde(default)]
    pub markup_bps: u32,
    #[serde(default = "zero_units")]
    pub service_fee_units: String,
    #[serde(default)]
    pub service_fee_bps: u32,
    #[serde(default)]
    pub spread_bps: u32,
}

fn zero_units() -> String {
    "0".into()
}

/// The policy of an asset the file does not name: at least 1/10,000 of a whole token, at most
/// 1,000,000 tokens, 10 % markup on the network cost, 0.5 % spread on converted costs, no
/// service fee. Operators set their own in `[[fee_policies]]`.
pub fn default_fee_policy(decimals: u8) -> FeePolicy {
    let pow = |e: u32| Amount::from_units(10u128.saturating_pow(e));
    FeePolicy {
        min_amount_units: pow(u32::from(decimals).saturating_sub(4)),
        max_amount_units: pow(u32::from(decimals) + 6),
        markup_bps: 1_000,
        service_fee_units: Amount::ZERO,
        service_fee_bps: 0,
        spread_bps: 50,
    }
}

/// The fee policy of every asset of `catalog`: the entry of `configured` naming it, else
/// [`default_fee_policy`]. Refuses an entry for an asset outside the catalog, two for one
/// asset, a minimum above the maximum, and basis points over 100 % (markup: 1,000 %).
pub fn fee_policies(
    configured: &[FeePolicyConfig],
    catalog: &AssetCatalog,
) -> Result<Vec<(AssetId, FeePolicy)>, ConfigError> {
    let mut named = BTreeMap::new();
    for entry in configured {
        let name = format!("[[fee_policies]] {} {}", entry.network, entry.asset);
        if catalog.get(entry.network, &entry.asset).is_none() {
            return Err(ConfigError::new(name, "not an asset of the catalog"));
        }
        let policy = entry.policy()?;
        let id = AssetId::new(entry.network, entry.asset.clone());
        if named.insert(id, policy).is_some() {
            return Err(ConfigError::new(name, "named twice"));
        }
    }
    Ok(catalog
        .all()
        .iter()
        .map(|a| {
            let policy = named
                .remove(&a.id())
                .unwrap_or_else(|| default_fee_policy(a.decimals));
            (a.id(), policy)
        })
        .collect())
}

impl FeePolicyConfig {
    /// The policy this entry sets, checked on its own.
    fn policy(&self) -> Result<FeePolicy, ConfigError> {
        let name = format!("[[fee_policies]] {} {}", self.network, self.asset);
        let units = |key: &str, v: &str| {
            Amount::parse_units(v).map_err(|e| {
                ConfigError::value(format!("{name} {key}"), format!("{v:?}"), e.to_string())
            })
        };
        let policy = FeePolicy {
            min_amount_units: units("min_amount_units", &self.min_amount_units)?,
            max_amount_units: units("max_amount_units", &self.max_amount_units)?,
            markup_bps: self.markup_bps,
            service_fee_units: units("service_fee_units", &self.service_fee_units)?,
            service_fee_bps: self.service_fee_bps,
            spread_bps: self.spread_bps,
        };
        if policy.min_amount_units > policy.max_amount_units {
            return Err(ConfigError::new(
                name,
                "min_amount_units is above max_amount_units",
            ));
        }
        if self.service_fee_bps > 10_000 || self.spread_bps > 10_000 || self.markup_bps > 100_000 {
            return Err(ConfigError::new(
                name,
                "service_fee_bps and spread_bps are at most 10000, markup_bps 100000",
            ));
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<FeePolicyConfig> {
        #[derive(Deserialize)]
        struct File {
            fee_policies: Vec<FeePolicyConfig>,
        }
        toml::from_str::<File>(text).unwrap().fee_policies
    }

    const USDT: &str = "[[fee_policies]]\nnetwork = \"TRON\"\nasset = \"USDT\"\n\
                        min_amount_units = \"1000000\"\nmax_amount_units = \"5000000000\"\n";

    #[test]
    fn a_named_asset_gets_its_entry_and_the_others_the_default() {
        let catalog = AssetCatalog::mainnet();
        let policies = fee_policies(&entries(USDT), &catalog).unwrap();
        assert_eq!(policies.len(), catalog.all().len());
        let usdt = &policies
            .iter()
            .find(|(id, _)| *id == AssetId::new(Network::Tron, "USDT"))
            .unwrap()
            .1;
        assert_eq!(usdt.min_amount_units, Amount::from_units(1_000_000));
        assert_eq!(
            (usdt.markup_bps, usdt.service_fee_units, usdt.spread_bps),
            (0, Amount::ZERO, 0),
            "an entry's omitted keys are zero, not the default policy's"
        );
        let trx = &policies
            .iter()
            .find(|(id, _)| *id == AssetId::new(Network::Tron, "TRX"))
            .unwrap()
            .1;
        assert_eq!(*trx, default_fee_policy(6));
    }

    #[test]
    fn entries_that_cannot_be_applied_are_refused_by_name() {
        let catalog = AssetCatalog::mainnet();
        let refused = |text: &str| {
            fee_policies(&entries(text), &catalog)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused(&USDT.replace("USDT", "DOGE")),
            "[[fee_policies]] TRON DOGE: not an asset of the catalog"
        );
        assert_eq!(
            refused(&format!("{USDT}{USDT}")),
            "[[fee_policies]] TRON USDT: named twice"
        );
        assert_eq!(
            refused(&USDT.replace("\"1000000\"", "\"9000000000\"")),
            "[[fee_policies]] TRON USDT: min_amount_units is above max_amount_units"
        );
        assert!(refused(&format!("{USDT}spread_bps = 10001\n")).contains("at most 10000"));
        let err = refused(&USDT.replace("\"1000000\"", "\"1.5\""));
        assert!(
            err.starts_with("[[fee_policies]] TRON USDT min_amount_units = \"1.5\": "),
            "{err}"
        );
    }
}
