//! The keys of `custody.toml` only TRON reads, owned here with the adapter that uses them:
//! `[tron] genesis_block_id` (the network's identity) and `api_key`, and the endpoints. The
//! section itself is the core's [`ChainConfig`], which checks the keys both networks share.

use custody_core::chain::ChainConfig;
use custody_core::settings::ConfigError;
use custody_core::{AssetCatalog, Network};

use crate::client::{parse_genesis_block_id, TronSettings, MAINNET_GENESIS_BLOCK_ID};

/// `[tron] poll_interval_ms` as `init` writes it: TRON makes a block every 3 s.
const INIT_POLL_INTERVAL_MS: u64 = 3_000;

/// The `[tron]` section `custody init` writes: `catalog`'s TRON assets, and mainnet's genesis
/// block id spelled out so that an operator sees where to name a testnet's.
pub fn init_section(catalog: &AssetCatalog) -> ChainConfig {
    ChainConfig {
        genesis_block_id: Some(MAINNET_GENESIS_BLOCK_ID.to_owned()),
        ..ChainConfig::for_init(Network::Tron, INIT_POLL_INTERVAL_MS, catalog)
    }
}

/// The genesis block id TRON endpoints are checked against (lowercase): the configured one,
/// or mainnet's. Call after [`validate`].
pub fn genesis_block_id(tron: &ChainConfig) -> String {
    tron.genesis_block_id
        .as_deref()
        .and_then(parse_genesis_block_id)
        .unwrap_or_else(|| MAINNET_GENESIS_BLOCK_ID.to_owned())
}

/// Refuses what only TRON can judge in `[tron]`: BSC's gas keys in `[tron.sending]` (TRON bids
/// a fee limit), and a `genesis_block_id` that is not a block 0's.
pub fn validate(tron: &ChainConfig) -> Result<(), ConfigError> {
    let sending = &tron.sending;
    if sending.gas_price_floor_wei.is_some()
        || sending.gas_price_cap_wei.is_some()
        || sending.token_gas_margin_percent.is_some()
    {
        return Err(ConfigError::new(
            "[tron.sending] gas_price_floor_wei, gas_price_cap_wei, token_gas_margin_percent",
            "BSC settings (TRON bids a fee limit)",
        ));
    }
    if let Some(id) = &tron.genesis_block_id {
        if parse_genesis_block_id(id).is_none() {
            return Err(ConfigError::value(
                "[tron] genesis_block_id",
                format!("{id:?}"),
                format!(
                    "must be the blockID of block 0, 64 hex digits whose first 16 are zeros \
                     (mainnet's is {MAINNET_GENESIS_BLOCK_ID})"
                ),
            ));
        }
    }
    Ok(())
}

impl TronSettings {
    /// The client of `tron`'s endpoints, with its API key and its genesis block id, and the
    /// default limits. Call after [`validate`].
    pub fn from_config(tron: &ChainConfig) -> Self {
        let mut settings = TronSettings::new(tron.urls.clone());
        settings.api_key = tron.api_key.clone();
        settings.allow_insecure_http = tron.allow_insecure_http;
        settings.genesis_block_id = Some(genesis_block_id(tron));
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_names_mainnet_and_an_absent_id_means_mainnet() {
        let mut tron = init_section(&AssetCatalog::mainnet());
        assert_eq!(
            tron.genesis_block_id.as_deref(),
            Some(MAINNET_GENESIS_BLOCK_ID)
        );
        validate(&tron).unwrap();
        tron.validate(Network::Tron).unwrap();
        tron.genesis_block_id = None;
        assert_eq!(genesis_block_id(&tron), MAINNET_GENESIS_BLOCK_ID);
        let settings = TronSettings::from_config(&tron);
        assert_eq!(
            settings.genesis_block_id.as_deref(),
            Some(MAINNET_GENESIS_BLOCK_ID)
        );
    }

    #[test]
    fn bsc_gas_keys_and_a_malformed_genesis_are_refused() {
        let mut tron = init_section(&AssetCatalog::mainnet());
        tron.sending.gas_price_cap_wei = Some(1);
        let err = validate(&tron).unwrap_err().to_string();
        assert!(
            err.starts_with("[tron.sending] gas_price_floor_wei"),
            "{err}"
        );
        tron.sending.gas_price_cap_wei = None;
        tron.genesis_block_id = Some("0x1ebf".into());
        let err = validate(&tron).unwrap_err().to_string();
        assert!(
            err.starts_with("[tron] genesis_block_id = \"0x1ebf\": must be the blockID"),
            "{err}"
        );
    }
}
