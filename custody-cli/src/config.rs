//! `custody.toml`: the settings of one data dir. Every field has a default, so `init` writes a
//! complete file an operator can read and edit.

use std::net::SocketAddr;

use custody_core::asset::{Asset, AssetCatalog, AssetKind};
use custody_core::Network;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub store: StoreConfig,
    pub bsc: ChainConfig,
    pub tron: ChainConfig,
    #[serde(default)]
    pub swaps: SwapsConfig,
    #[serde(default)]
    pub webhooks: crate::webhooks::WebhooksConfig,
}

/// `[server]`. The connection limits are explained in docs/operations.md; keys added after the
/// first release default when a data dir's file lacks them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub body_bytes_max: usize,
    pub connections_max: usize,
    #[serde(default = "defaults::connections_per_peer_max")]
    pub connections_per_peer_max: usize,
    #[serde(default = "defaults::idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    #[serde(default = "defaults::body_read_timeout_ms")]
    pub body_read_timeout_ms: u64,
}

mod defaults {
    pub fn connections_per_peer_max() -> usize {
        custody_http::HttpLimits::default().connections_per_peer_max
    }

    pub fn idle_timeout_ms() -> u64 {
        custody_http::HttpLimits::default().idle_timeout_ms
    }

    pub fn body_read_timeout_ms() -> u64 {
        custody_http::HttpLimits::default().body_read_timeout_ms
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let limits = custody_http::HttpLimits::default();
        ServerConfig {
            listen: "127.0.0.1:8080".parse().expect("valid address"),
            body_bytes_max: limits.body_bytes_max,
            connections_max: limits.connections_max,
            connections_per_peer_max: limits.connections_per_peer_max,
            idle_timeout_ms: limits.idle_timeout_ms,
            body_read_timeout_ms: limits.body_read_timeout_ms,
        }
    }
}

impl ServerConfig {
    /// The limits of the HTTP layer; a zero would refuse every connection or request.
    pub fn limits(&self) -> Result<custody_http::HttpLimits, String> {
        for (key, value) in [
            ("body_bytes_max", self.body_bytes_max as u64),
            ("connections_max", self.connections_max as u64),
            (
                "connections_per_peer_max",
                self.connections_per_peer_max as u64,
            ),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
        ] {
            if value == 0 {
                return Err(format!("server.{key} must be greater than 0"));
            }
        }
        Ok(custody_http::HttpLimits {
            body_bytes_max: self.body_bytes_max,
            connections_max: self.connections_max,
            connections_per_peer_max: self.connections_per_peer_max,
            idle_timeout_ms: self.idle_timeout_ms,
            body_read_timeout_ms: self.body_read_timeout_ms,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Commands per transaction; 1 disables group commit.
    pub batch_max: usize,
    pub readers: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            batch_max: 256,
            readers: 4,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetConfig {
    pub code: String,
    pub kind: AssetKind,
    pub decimals: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
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
    #[serde(default = "default_blocks_kept")]
    pub blocks_kept: u64,
    /// Accept plain-http endpoints off loopback (never for real funds).
    #[serde(default)]
    pub allow_insecure_http: bool,
    /// TRON only: sent as TRON-PRO-API-KEY. Env `CUSTODY_TRON_API_KEY` overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

fn default_blocks_kept() -> u64 {
    1_000
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapsConfig {
    /// Enabled BSC pairs as `BASE-QUOTE` asset codes.
    pub pairs: Vec<String>,
}

impl Default for SwapsConfig {
    fn default() -> Self {
        SwapsConfig {
            pairs: vec!["BNB-USDT".into(), "BNB-USDC".into(), "USDT-USDC".into()],
        }
    }
}

impl Config {
    /// The defaults: mainnet catalog, no endpoints configured.
    pub fn default_for_init() -> Self {
        let mainnet = AssetCatalog::mainnet();
        let chain = |network: Network, poll_interval_ms| ChainConfig {
            urls: Vec::new(),
            chain_id: network.default_chain_id(),
            confirmations: network.default_confirmations(),
            poll_interval_ms,
            start_block: None,
            blocks_kept: default_blocks_kept(),
            allow_insecure_http: false,
            api_key: None,
            assets: mainnet
                .of_network(network)
                .map(|a| AssetConfig {
                    code: a.code.clone(),
                    kind: a.kind,
                    decimals: a.decimals,
                    contract: a.contract.clone(),
                })
                .collect(),
        };
        Config {
            server: ServerConfig::default(),
            store: StoreConfig::default(),
            bsc: chain(Network::Bsc, 1_000),
            tron: chain(Network::Tron, 3_000),
            swaps: SwapsConfig::default(),
            webhooks: crate::webhooks::WebhooksConfig::default(),
        }
    }

    pub fn chain(&self, network: Network) -> &ChainConfig {
        match network {
            Network::Bsc => &self.bsc,
            Network::Tron => &self.tron,
        }
    }

    /// Applies `CUSTODY_BSC_RPC_URLS` / `CUSTODY_TRON_API_URLS` (comma-separated).
    pub fn apply_env(&mut self) {
        for (var, chain) in [
            ("CUSTODY_BSC_RPC_URLS", &mut self.bsc),
            ("CUSTODY_TRON_API_URLS", &mut self.tron),
        ] {
            if let Ok(v) = std::env::var(var) {
                chain.urls = v
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
            }
        }
        if let Ok(key) = std::env::var("CUSTODY_TRON_API_KEY") {
            self.tron.api_key = Some(key).filter(|k| !k.is_empty());
        }
    }

    pub fn catalog(&self) -> Result<AssetCatalog, String> {
        let mut assets = Vec::new();
        for network in Network::ALL {
            for a in &self.chain(network).assets {
                assets.push(Asset {
                    network,
                    code: a.code.clone(),
                    kind: a.kind,
                    decimals: a.decimals,
                    contract: a.contract.clone(),
                });
            }
        }
        AssetCatalog::new(assets).map_err(|e| e.to_string())
    }

    /// Swap pairs, checked against the BSC catalog.
    pub fn swap_pairs(
        &self,
        catalog: &AssetCatalog,
    ) -> Result<Vec<custody_http::SwapPair>, String> {
        self.swaps
            .pairs
            .iter()
            .map(|p| {
                let (base, quote) = p
                    .split_once('-')
                    .ok_or_else(|| format!("swap pair {p:?} must be BASE-QUOTE"))?;
                for code in [base, quote] {
                    if catalog.get(Network::Bsc, code).is_none() {
                        return Err(format!("swap pair {p:?}: {code} is not a BSC asset"));
                    }
                }
                if base == quote {
                    return Err(format!("swap pair {p:?} swaps an asset for itself"));
                }
                Ok(custody_http::SwapPair {
                    base: base.into(),
                    quote: quote.into(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_toml() {
        let c = Config::default_for_init();
        let text = toml::to_string_pretty(&c).unwrap();
        let back: Config = toml::from_str(&text).unwrap();
        let catalog = back.catalog().unwrap();
        assert_eq!(catalog, AssetCatalog::mainnet());
        assert_eq!(back.swap_pairs(&catalog).unwrap().len(), 3);
        assert_eq!(back.tron.confirmations, 19);
        let limits = back.server.limits().unwrap();
        assert_eq!(limits.connections_per_peer_max, 128);
        assert_eq!(limits.body_read_timeout_ms, 10_000);
    }

    #[test]
    fn a_server_section_written_before_the_connection_limits_still_loads() {
        let mut text = toml::to_string_pretty(&Config::default_for_init()).unwrap();
        for key in [
            "connections_per_peer_max",
            "idle_timeout_ms",
            "body_read_timeout_ms",
        ] {
            let line = text
                .lines()
                .find(|l| l.starts_with(key))
                .unwrap()
                .to_owned();
            text = text.replace(&format!("{line}\n"), "");
        }
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.server.idle_timeout_ms, 10_000);
        let mut zero = back.server.clone();
        zero.body_read_timeout_ms = 0;
        assert!(zero.limits().unwrap_err().contains("body_read_timeout_ms"));
    }
}
