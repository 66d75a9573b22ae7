//! `[[native_rates]]` of `custody.toml`: the native coin's price in a token where no router
//! prices it (decisions §11: TRON at a configured rate), owned here beside the router's price.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::amount::Amount;
use crate::asset::{AssetCatalog, AssetId};
use crate::network::Network;
use crate::settings::ConfigError;
use crate::withdrawal::Rate;

/// One `[[native_rates]]` entry: `asset_units` of `asset` are worth `native_units` of the
/// network's native coin (smallest units both).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NativeRateConfig {
    pub network: Network,
    pub asset: String,
    pub asset_units: String,
    pub native_units: String,
}

/// The configured native-coin prices, checked: a TRON token of the catalog, named once,
/// positive figures. A token without one cannot be withdrawn (quotes answer 503
/// CHAIN_UNAVAILABLE).
pub fn native_rates(
    configured: &[NativeRateConfig],
    catalog: &AssetCatalog,
) -> Result<BTreeMap<AssetId, Rate>, ConfigError> {
    let mut rates = BTreeMap::new();
    for entry in configured {
        let name = format!("[[native_rates]] {} {}", entry.network, entry.asset);
        let asset = catalog
            .get(entry.network, &entry.asset)
            .ok_or_else(|| ConfigError::new(name.clone(), "not an asset of the catalog"))?;
        if asset.contract.is_none() {
            return Err(ConfigError::new(name, "the native coin needs no rate"));
        }
        if entry.network == Network::Bsc {
            return Err(ConfigError::new(
                name,
                "BSC tokens are priced at the DEX router ([swaps]); rates are TRON's",
            ));
        }
        if rates.insert(asset.id(), entry.rate(&name)?).is_some() {
            return Err(ConfigError::new(name, "named twice"));
        }
    }
    Ok(rates)
}

impl NativeRateConfig {
    /// The rate this entry sets; `name` is how errors name the entry.
    fn rate(&self, name: &str) -> Result<Rate, ConfigError> {
        let positive = |v: &str, key: &str| {
            Amount::parse_units(v)
                .ok()
                .filter(|a| !a.is_zero())
                .ok_or_else(|| {
                    ConfigError::value(
                        format!("{name} {key}"),
                        format!("{v:?}"),
                        "must be a positive integer",
                    )
                })
        };
        Ok(Rate {
            asset_units: positive(&self.asset_units, "asset_units")?,
            native_units: positive(&self.native_units, "native_units")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(network: Network, asset: &str, asset_units: &str) -> NativeRateConfig {
        NativeRateConfig {
            network,
            asset: asset.into(),
            asset_units: asset_units.into(),
            native_units: "1000000".into(),
        }
    }

    #[test]
    fn a_tron_token_gets_its_rate() {
        let rates = native_rates(
            &[rate(Network::Tron, "USDT", "250000")],
            &AssetCatalog::mainnet(),
        )
        .unwrap();
        assert_eq!(
            rates[&AssetId::new(Network::Tron, "USDT")],
            Rate {
                asset_units: Amount::from_units(250_000),
                native_units: Amount::from_units(1_000_000),
            }
        );
    }

    #[test]
    fn rates_that_cannot_be_used_are_refused_by_name() {
        let refused = |entries: &[NativeRateConfig]| {
            native_rates(entries, &AssetCatalog::mainnet())
                .unwrap_err()
                .to_string()
        };
        let usdt = rate(Network::Tron, "USDT", "250000");
        assert_eq!(
            refused(&[rate(Network::Tron, "TRX", "1")]),
            "[[native_rates]] TRON TRX: the native coin needs no rate"
        );
        assert!(refused(&[rate(Network::Bsc, "USDT", "1")]).contains("DEX router"));
        assert_eq!(
            refused(&[rate(Network::Tron, "USDT", "0")]),
            "[[native_rates]] TRON USDT asset_units = \"0\": must be a positive integer"
        );
        assert_eq!(
            refused(&[usdt.clone(), usdt]),
            "[[native_rates]] TRON USDT: named twice"
        );
    }
}
