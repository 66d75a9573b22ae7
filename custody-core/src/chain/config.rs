//! `[bsc]` and `[tron]` of `custody.toml`: one network's endpoints, depth, scanning and
//! catalog assets. Both networks' sections are this one type, so a key of the other network
//! is refused with a reason instead of as an unknown field; the keys only one network reads
//! (TRON's `api_key` and `genesis_block_id`, BSC's gas keys under `sending`) are checked by
//! its adapter crate, the rest here.

use serde::{Deserialize, Serialize};

use crate::asset::{Asset, AssetCatalog, AssetKind};
use crate::network::Network;
use crate::outgoing::sending::SendingConfig;
use crate::settings::{chain_section, ConfigError};

mod defaults {
    pub fn blocks_kept() -> u64 {
        1_000
    }

    pub fn stuck_alert_after_ms() -> u64 {
        10 * 60 * 1000
    }

    pub fn holdings_check_interval_ms() -> u64 {
        60 * 60 * 1000
    }
}

/// `[[bsc.assets]]`, `[[tron.assets]]`: one asset of the catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetConfig {
    pub code: String,
    pub kind: AssetKind,
    pub decimals: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
}

impl AssetConfig {
    /// The catalog entry this describes on `network` (the catalog checks it).
    pub fn asset(&self, network: Network) -> Asset {
        Asset {
            network,
            code: self.code.clone(),
            kind: self.kind,
            decimals: self.decimals,
            contract: self.contract.clone(),
        }
    }
}

impl From<&Asset> for AssetConfig {
    fn from(a: &Asset) -> Self {
        AssetConfig {
            code: a.code.clone(),
            kind: a.kind,
            decimals: a.decimals,
            contract: a.contract.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// Endpoints in order of preference (failover).
    #[serde(default)]
    pub urls: Vec<String>,
    pub chain_id: u64,
    pub confirmations: u32,
    pub poll_interval_ms: u64,
    pub assets: Vec<AssetConfig>,
    /// First block to scan on a fresh data dir; absent = the node's head at first start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_block: Option<u64>,
    /// Block hashes kept for reorganization detection (the deepest reorg handled).
    #[serde(default = "defaults::blocks_kept")]
    pub blocks_kept: u64,
    /// Accept plain-http endpoints off loopback (never for real funds).
    #[serde(default)]
    pub allow_insecure_http: bool,
    /// TRON only: sent as TRON-PRO-API-KEY. Env `CUSTODY_TRON_API_KEY` overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// TRON only: the `blockID` of block 0 every endpoint must serve before it is used (the
    /// network's identity, as `chain_id` is BSC's). Absent = mainnet's. Set it for Nile,
    /// Shasta or a devnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genesis_block_id: Option<String>,
    /// How long the scanner may fail without progress before a `scan_stuck` critical alert.
    #[serde(default = "defaults::stuck_alert_after_ms")]
    pub stuck_alert_after_ms: u64,
    /// How often every deposit address's on-chain balances are compared with what was credited
    /// (funds no deposit explains show on the dashboard). 0 turns the check off.
    #[serde(default = "defaults::holdings_check_interval_ms")]
    pub holdings_check_interval_ms: u64,
    /// How the network's broadcaster prices, sends again and replaces outgoing transactions
    /// (`[bsc.sending]`, `[tron.sending]`).
    #[serde(default)]
    pub sending: SendingConfig,
}

impl ChainConfig {
    /// `network`'s section as `custody init` writes it before its adapter adds its own keys:
    /// no endpoints, the network's chain id and deposit depth, `catalog`'s assets of the
    /// network, and the defaults.
    pub fn for_init(network: Network, poll_interval_ms: u64, catalog: &AssetCatalog) -> Self {
        ChainConfig {
            urls: Vec::new(),
            chain_id: network.default_chain_id(),
            confirmations: network.default_confirmations(),
            poll_interval_ms,
            assets: catalog.of_network(network).map(AssetConfig::from).collect(),
            start_block: None,
            blocks_kept: defaults::blocks_kept(),
            allow_insecure_http: false,
            api_key: None,
            genesis_block_id: None,
            stuck_alert_after_ms: defaults::stuck_alert_after_ms(),
            holdings_check_interval_ms: defaults::holdings_check_interval_ms(),
            sending: SendingConfig::default(),
        }
    }

    /// Refuses settings that would lose or invent money: a deposit credited at 0
    /// confirmations, or a reorganization window (`blocks_kept`) too short to follow a
    /// reorganization that reverses a credited deposit; and the engine timings
    /// [`SendingConfig::validate`] refuses.
    pub fn validate(&self, network: Network) -> Result<(), ConfigError> {
        self.sending.validate(network)?;
        let section = chain_section(network);
        if self.confirmations < 1 {
            return Err(ConfigError::value(
                format!("[{section}] confirmations"),
                self.confirmations,
                "must be at least 1 (with 0 a deposit is credited from a block that may \
                 still be replaced)",
            ));
        }
        let floor = 2 * u64::from(self.confirmations);
        if self.blocks_kept < floor {
            return Err(ConfigError::value(
                format!("[{section}] blocks_kept"),
                self.blocks_kept,
                format!(
                    "must be at least 2 × confirmations = {floor} (the block hashes kept \
                     must reach below every credited deposit's block, or a reorganization \
                     reversing one could not be followed)"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_section_lists_the_catalog_and_passes() {
        let catalog = AssetCatalog::mainnet();
        let tron = ChainConfig::for_init(Network::Tron, 3_000, &catalog);
        assert_eq!(tron.confirmations, 19);
        let listed: Vec<Asset> = tron.assets.iter().map(|a| a.asset(Network::Tron)).collect();
        let expected: Vec<Asset> = catalog.of_network(Network::Tron).cloned().collect();
        assert_eq!(listed, expected);
        tron.validate(Network::Tron).unwrap();
    }

    #[test]
    fn the_depth_and_the_reorganization_window_are_checked() {
        let mut bsc = ChainConfig::for_init(Network::Bsc, 1_000, &AssetCatalog::mainnet());
        bsc.confirmations = 0;
        let err = bsc.validate(Network::Bsc).unwrap_err();
        assert_eq!(
            (err.key.as_str(), err.value.as_deref()),
            ("[bsc] confirmations", Some("0"))
        );
        bsc.confirmations = 501;
        let err = bsc.validate(Network::Bsc).unwrap_err().to_string();
        assert!(
            err.starts_with("[bsc] blocks_kept = 1000: must be at least 2 × confirmations = 1002"),
            "{err}"
        );
        bsc.sending.lease_ms = 0;
        let err = bsc.validate(Network::Bsc).unwrap_err();
        assert_eq!(err.key, "[bsc.sending] lease_ms", "the engine's keys first");
    }
}
