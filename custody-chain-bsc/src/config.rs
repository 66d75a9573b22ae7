//! The keys of `custody.toml` only BSC reads, owned here with the adapter that uses them: the
//! endpoints of `[bsc]`, the gas keys of `[bsc.sending]` (the sender's pricing) and the
//! router addresses of `[swaps]` (the DEX router). The sections themselves are the core's
//! ([`ChainConfig`], [`SwapsConfig`]), which checks the keys both networks share.

use custody_core::chain::ChainConfig;
use custody_core::outgoing::sending::SendingConfig;
use custody_core::settings::ConfigError;
use custody_core::swap::SwapsConfig;
use custody_core::{AssetCatalog, Network};

use crate::{BscSenderSettings, BscSettings, DexSettings};

/// No bid above 1000 gwei: a typo in the cap could otherwise spend a fortune in gas.
pub const GAS_PRICE_CAP_WEI_MAX: u128 = 1_000_000_000_000;

/// `[bsc] poll_interval_ms` as `init` writes it: BSC makes blocks faster than TRON's 3 s.
const INIT_POLL_INTERVAL_MS: u64 = 1_000;

/// The `[bsc]` section `custody init` writes: `catalog`'s BSC assets, and the sender's gas
/// pricing spelled out so that an operator sees what may be tuned.
pub fn init_section(catalog: &AssetCatalog) -> ChainConfig {
    let pricing = BscSenderSettings::default();
    let sending = SendingConfig {
        gas_price_floor_wei: u64::try_from(pricing.gas_price_floor_wei).ok(),
        gas_price_cap_wei: u64::try_from(pricing.gas_price_cap_wei).ok(),
        token_gas_margin_percent: Some(pricing.token_gas_margin_percent),
        ..SendingConfig::default()
    };
    ChainConfig {
        sending,
        ..ChainConfig::for_init(Network::Bsc, INIT_POLL_INTERVAL_MS, catalog)
    }
}

/// Refuses what only BSC can judge in `[bsc]`: a gas price floor above the cap, a cap of 0 or
/// above [`GAS_PRICE_CAP_WEI_MAX`], and TRON's `genesis_block_id`.
pub fn validate(bsc: &ChainConfig) -> Result<(), ConfigError> {
    let p = BscSenderSettings::from_config(&bsc.sending);
    if p.gas_price_floor_wei > p.gas_price_cap_wei {
        return Err(ConfigError::value(
            "[bsc.sending] gas_price_floor_wei",
            p.gas_price_floor_wei,
            format!("above gas_price_cap_wei = {}", p.gas_price_cap_wei),
        ));
    }
    if p.gas_price_cap_wei == 0 || p.gas_price_cap_wei > GAS_PRICE_CAP_WEI_MAX {
        return Err(ConfigError::value(
            "[bsc.sending] gas_price_cap_wei",
            p.gas_price_cap_wei,
            format!("must be above 0 and at most {GAS_PRICE_CAP_WEI_MAX} (1000 gwei)"),
        ));
    }
    if bsc.genesis_block_id.is_some() {
        return Err(ConfigError::new(
            "[bsc] genesis_block_id",
            "a TRON setting; BSC endpoints are checked with chain_id",
        ));
    }
    Ok(())
}

impl BscSettings {
    /// The adapter over `bsc`'s endpoints, serving `catalog`'s BSC assets, with the default
    /// limits.
    pub fn from_config(bsc: &ChainConfig, catalog: &AssetCatalog) -> Self {
        BscSettings {
            urls: bsc.urls.clone(),
            chain_id: bsc.chain_id,
            allow_insecure_http: bsc.allow_insecure_http,
            assets: catalog.of_network(Network::Bsc).cloned().collect(),
            ..BscSettings::default()
        }
    }
}

impl BscSenderSettings {
    /// The sender's pricing: the gas keys `[bsc.sending]` sets, over the defaults.
    pub fn from_config(sending: &SendingConfig) -> Self {
        let d = BscSenderSettings::default();
        BscSenderSettings {
            gas_price_floor_wei: sending
                .gas_price_floor_wei
                .map_or(d.gas_price_floor_wei, u128::from),
            gas_price_cap_wei: sending
                .gas_price_cap_wei
                .map_or(d.gas_price_cap_wei, u128::from),
            token_gas_margin_percent: sending
                .token_gas_margin_percent
                .unwrap_or(d.token_gas_margin_percent),
        }
    }
}

impl DexSettings {
    /// The router `[swaps]` names, checked (EIP-55 when mixed case).
    pub fn from_config(swaps: &SwapsConfig) -> Result<Self, ConfigError> {
        let a = swaps.router_addresses()?;
        Ok(DexSettings {
            router: a.router,
            factory: a.factory,
            wrapped_native: a.wrapped_native,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_cap_is_the_same_for_the_price_and_the_replacements() {
        // The engine falls back on its own default cap when `[bsc.sending]` names none, the
        // sender on this crate's: they must be one figure.
        let sending = SendingConfig::default();
        assert_eq!(
            BscSenderSettings::from_config(&sending).gas_price_cap_wei,
            sending.engine_policy(Network::Bsc, 15).gas_price_cap_wei
        );
    }

    #[test]
    fn init_writes_the_pricing_and_it_reads_back_unchanged() {
        let bsc = init_section(&AssetCatalog::mainnet());
        assert_eq!(bsc.sending.gas_price_cap_wei, Some(50_000_000_000));
        assert_eq!(
            BscSenderSettings::from_config(&bsc.sending),
            BscSenderSettings::default()
        );
        validate(&bsc).unwrap();
        bsc.validate(Network::Bsc).unwrap();
    }

    #[test]
    fn pricing_that_could_overspend_and_tron_keys_are_refused() {
        let refused = |edit: fn(&mut ChainConfig)| {
            let mut bsc = init_section(&AssetCatalog::mainnet());
            edit(&mut bsc);
            validate(&bsc).unwrap_err().to_string()
        };
        let err = refused(|c| c.sending.gas_price_floor_wei = Some(60_000_000_000));
        assert!(err.contains("above gas_price_cap_wei"), "{err}");
        let err = refused(|c| c.sending.gas_price_cap_wei = Some(1_000_000_000_001));
        assert!(
            err.starts_with("[bsc.sending] gas_price_cap_wei = 1000000000001: "),
            "{err}"
        );
        let err = refused(|c| c.genesis_block_id = Some("00".into()));
        assert!(
            err.starts_with("[bsc] genesis_block_id: a TRON setting"),
            "{err}"
        );
    }

    #[test]
    fn the_router_is_read_from_the_swaps_section() {
        let dex = DexSettings::from_config(&SwapsConfig::default()).unwrap();
        assert_eq!(
            dex.router.to_string(),
            "0x10ED43C718714eb63d5aA57B78B54704E256024E"
        );
        let bad = SwapsConfig {
            wrapped_native: "WBNB".into(),
            ..SwapsConfig::default()
        };
        let err = DexSettings::from_config(&bad).unwrap_err();
        assert_eq!(err.key, "[swaps] wrapped_native");
    }
}
