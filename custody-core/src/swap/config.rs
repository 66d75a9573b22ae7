//! `[swaps]` of `custody.toml`: the enabled BSC pairs, their limits and the router, owned here
//! beside the swap flow they configure. The BSC adapter builds its router from
//! [`SwapsConfig::router_addresses`].

use serde::{Deserialize, Serialize};

use super::RouterSettings;
use crate::address::BscAddress;
use crate::amount::Amount;
use crate::asset::AssetCatalog;
use crate::network::Network;
use crate::settings::ConfigError;

mod defaults {
    // PancakeSwap V2 on BSC mainnet: its router, the factory it is built on, and WBNB.
    pub fn router() -> String {
        "0x10ED43C718714eb63d5aA57B78B54704E256024E".into()
    }

    pub fn factory() -> String {
        "0xcA143Ce32Fe78f1f7019d7d551a6402fC5350c73".into()
    }

    pub fn wrapped_native() -> String {
        "0xbb4CdB9CBd36B01bD1cBaEBF2De08d9173bc095c".into()
    }

    pub fn deadline_s() -> u64 {
        600
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapsConfig {
    /// Enabled BSC pairs as `BASE-QUOTE` asset codes.
    pub pairs: Vec<String>,
    /// The Uniswap-V2-compatible router (decisions §12), the factory it must be built on and
    /// the wrapped coin standing for BNB in its paths: PancakeSwap V2 on mainnet.
    #[serde(default = "defaults::router")]
    pub router: String,
    #[serde(default = "defaults::factory")]
    pub factory: String,
    #[serde(default = "defaults::wrapped_native")]
    pub wrapped_native: String,
    /// A swap not mined this long after it was executed reverts on chain (its `deadline`).
    #[serde(default = "defaults::deadline_s")]
    pub deadline_s: u64,
    /// Amount limits of one direction of a pair, over `asset_in`'s fee policy limits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<SwapLimitConfig>,
}

/// `[[swaps.limits]]`: `amount_in_units` of a swap from `asset_in` to `asset_out` must be
/// within `[min_amount_in_units, max_amount_in_units]` (units of `asset_in`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapLimitConfig {
    pub asset_in: String,
    pub asset_out: String,
    pub min_amount_in_units: String,
    pub max_amount_in_units: String,
}

impl Default for SwapsConfig {
    fn default() -> Self {
        SwapsConfig {
            pairs: vec!["BNB-USDT".into(), "BNB-USDC".into(), "USDT-USDC".into()],
            router: defaults::router(),
            factory: defaults::factory(),
            wrapped_native: defaults::wrapped_native(),
            deadline_s: defaults::deadline_s(),
            limits: Vec::new(),
        }
    }
}

/// The router's addresses as `[swaps]` names them, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterAddresses {
    pub router: BscAddress,
    pub factory: BscAddress,
    pub wrapped_native: BscAddress,
}

/// An enabled swap pair on BSC (asset codes of the catalog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapPair {
    pub base: String,
    pub quote: String,
    /// `[[swaps.limits]]` of each direction: (min, max) `amount_in_units`, over `asset_in`'s
    /// fee policy limits.
    pub base_to_quote: Option<(Amount, Amount)>,
    pub quote_to_base: Option<(Amount, Amount)>,
}

impl SwapPair {
    /// The limits of swapping `asset_in` for `asset_out` when this pair trades it: `Some(None)`
    /// when it does without limits of its own.
    pub fn limits(&self, asset_in: &str, asset_out: &str) -> Option<Option<(Amount, Amount)>> {
        if self.base == asset_in && self.quote == asset_out {
            Some(self.base_to_quote)
        } else if self.base == asset_out && self.quote == asset_in {
            Some(self.quote_to_base)
        } else {
            None
        }
    }

    /// Whether this pair trades `a` for `b` in either direction.
    fn trades(&self, a: &str, b: &str) -> bool {
        self.limits(a, b).is_some()
    }
}

impl SwapsConfig {
    /// The router's addresses, checked (EIP-55 when mixed case).
    pub fn router_addresses(&self) -> Result<RouterAddresses, ConfigError> {
        let parse = |key: &str, v: &str| {
            BscAddress::parse(v).map_err(|e| {
                ConfigError::value(format!("[swaps] {key}"), format!("{v:?}"), e.to_string())
            })
        };
        Ok(RouterAddresses {
            router: parse("router", &self.router)?,
            factory: parse("factory", &self.factory)?,
            wrapped_native: parse("wrapped_native", &self.wrapped_native)?,
        })
    }

    /// What the core's swap flow needs of the router.
    pub fn router_settings(&self) -> Result<RouterSettings, ConfigError> {
        let addresses = self.router_addresses()?;
        if !(60..=86_400).contains(&self.deadline_s) {
            return Err(ConfigError::value(
                "[swaps] deadline_s",
                self.deadline_s,
                "must be 60 to 86400 seconds",
            ));
        }
        Ok(RouterSettings {
            router: addresses.router.to_string(),
            wrapped_native: addresses.wrapped_native.to_string(),
            deadline_s: self.deadline_s,
        })
    }

    /// The enabled pairs with their limits, checked against the BSC assets of `catalog`. A
    /// limit of a direction no enabled pair trades is refused: it would silently do nothing.
    pub fn pairs(&self, catalog: &AssetCatalog) -> Result<Vec<SwapPair>, ConfigError> {
        let pairs = self
            .pairs
            .iter()
            .map(|p| self.pair(p, catalog))
            .collect::<Result<Vec<_>, _>>()?;
        for l in &self.limits {
            if !pairs.iter().any(|p| p.trades(&l.asset_in, &l.asset_out)) {
                return Err(ConfigError::new(
                    format!("[[swaps.limits]] {} to {}", l.asset_in, l.asset_out),
                    "not an enabled pair",
                ));
            }
        }
        Ok(pairs)
    }

    /// One `BASE-QUOTE` entry of `pairs` with the limits of its two directions.
    fn pair(&self, written: &str, catalog: &AssetCatalog) -> Result<SwapPair, ConfigError> {
        let refused =
            |reason: String| ConfigError::value("[swaps] pairs", format!("{written:?}"), reason);
        let (base, quote) = written
            .split_once('-')
            .ok_or_else(|| refused("must be BASE-QUOTE".into()))?;
        for code in [base, quote] {
            if catalog.get(Network::Bsc, code).is_none() {
                return Err(refused(format!("{code} is not a BSC asset")));
            }
        }
        if base == quote {
            return Err(refused("swaps an asset for itself".into()));
        }
        Ok(SwapPair {
            base: base.into(),
            quote: quote.into(),
            base_to_quote: self.limit(base, quote)?,
            quote_to_base: self.limit(quote, base)?,
        })
    }

    /// The `[[swaps.limits]]` of swapping `asset_in` for `asset_out`, if one is set.
    fn limit(
        &self,
        asset_in: &str,
        asset_out: &str,
    ) -> Result<Option<(Amount, Amount)>, ConfigError> {
        let found = self
            .limits
            .iter()
            .find(|l| l.asset_in == asset_in && l.asset_out == asset_out);
        let Some(l) = found else { return Ok(None) };
        let name = format!("[[swaps.limits]] {asset_in} to {asset_out}");
        let parse = |v: &str, key: &str| {
            Amount::parse_units(v).map_err(|_| {
                ConfigError::value(
                    format!("{name} {key}"),
                    format!("{v:?}"),
                    "not a whole number of units",
                )
            })
        };
        let min = parse(&l.min_amount_in_units, "min_amount_in_units")?;
        let max = parse(&l.max_amount_in_units, "max_amount_in_units")?;
        if min > max {
            return Err(ConfigError::new(name, "the minimum is above the maximum"));
        }
        Ok(Some((min, max)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swaps(text: &str) -> SwapsConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn the_defaults_are_pancakeswap_and_three_pairs() {
        let section = SwapsConfig::default();
        let router = section.router_settings().unwrap();
        assert_eq!(router.router, "0x10ED43C718714eb63d5aA57B78B54704E256024E");
        assert_eq!(router.deadline_s, 600);
        let pairs = section.pairs(&AssetCatalog::mainnet()).unwrap();
        assert_eq!(pairs.len(), 3);
        assert_eq!(pairs[0].limits("USDT", "BNB"), Some(None));
        assert_eq!(pairs[0].limits("USDT", "USDC"), None);
    }

    #[test]
    fn limits_are_read_per_direction() {
        let section = swaps(
            "pairs = [\"BNB-USDT\"]\n[[limits]]\nasset_in = \"USDT\"\nasset_out = \"BNB\"\n\
             min_amount_in_units = \"10\"\nmax_amount_in_units = \"20\"\n",
        );
        let pairs = section.pairs(&AssetCatalog::mainnet()).unwrap();
        let range = (Amount::from_units(10), Amount::from_units(20));
        assert_eq!(pairs[0].limits("USDT", "BNB"), Some(Some(range)));
        assert_eq!(pairs[0].limits("BNB", "USDT"), Some(None));
    }

    #[test]
    fn settings_that_cannot_be_used_are_refused_by_key() {
        let catalog = AssetCatalog::mainnet();
        let refused = |text: &str| {
            let section = swaps(text);
            match section.router_settings() {
                Err(e) => e.to_string(),
                Ok(_) => section.pairs(&catalog).unwrap_err().to_string(),
            }
        };
        assert_eq!(
            refused("pairs = [\"BNB\"]"),
            "[swaps] pairs = \"BNB\": must be BASE-QUOTE"
        );
        assert_eq!(
            refused("pairs = [\"BNB-TRX\"]"),
            "[swaps] pairs = \"BNB-TRX\": TRX is not a BSC asset"
        );
        assert!(refused("pairs = [\"BNB-BNB\"]").contains("itself"));
        assert!(refused("pairs = []\ndeadline_s = 59").starts_with("[swaps] deadline_s = 59"));
        assert!(refused("pairs = []\nfactory = \"0x12\"").starts_with("[swaps] factory"));
        let unused = "pairs = [\"BNB-USDT\"]\n[[limits]]\nasset_in = \"USDC\"\n\
                      asset_out = \"BNB\"\nmin_amount_in_units = \"1\"\n\
                      max_amount_in_units = \"2\"\n";
        assert_eq!(
            refused(unused),
            "[[swaps.limits]] USDC to BNB: not an enabled pair"
        );
        let inverted = "pairs = [\"BNB-USDT\"]\n[[limits]]\nasset_in = \"BNB\"\n\
                        asset_out = \"USDT\"\nmin_amount_in_units = \"3\"\n\
                        max_amount_in_units = \"2\"\n";
        assert_eq!(
            refused(inverted),
            "[[swaps.limits]] BNB to USDT: the minimum is above the maximum"
        );
    }
}
