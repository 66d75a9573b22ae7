//! `custody.toml`: the settings of one data dir. Every field has a default, so `init` writes a
//! complete file an operator can read and edit.
//!
//! Each section is a type of the crate that uses it, with its serde defaults and its checks:
//! `[server]` custody-http's, `[store]` custody-store-sql's (read by both stores), `[bsc]` and
//! `[tron]` the core's `chain::ChainConfig` (its `sending` the core's `outgoing::sending`) with
//! each network's own keys checked by its adapter, `[swaps]`, `[sweeps]`, `[[fee_policies]]`
//! and `[[native_rates]]` the core's, `[webhooks]` and `[reconciliation]` custody-runtime's.
//! This file assembles them, applies the environment, and checks what spans sections.

use custody_core::asset::AssetCatalog;
use custody_core::chain::ChainConfig;
use custody_core::pricing::NativeRateConfig;
use custody_core::swap::SwapsConfig;
use custody_core::sweep::SweepsConfig;
use custody_core::withdrawal::FeePolicyConfig;
use custody_core::Network;
use custody_runtime::webhooks::WebhooksConfig;
use custody_store_sql::StoreConfig;
use serde::{Deserialize, Serialize};

pub use custody_core::settings::ConfigError;
pub use custody_http::ServerConfig;
pub use custody_runtime::reconciler::ReconciliationConfig;

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
    pub sweeps: SweepsConfig,
    #[serde(default)]
    pub webhooks: WebhooksConfig,
    #[serde(default)]
    pub reconciliation: ReconciliationConfig,
    /// Withdrawal fee policies per (network, asset) (decisions §11); a catalog asset without
    /// one gets `custody_core::withdrawal::default_fee_policy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fee_policies: Vec<FeePolicyConfig>,
    /// The price of the native coin in a token, for the network cost of token withdrawals
    /// (decisions §11: TRON at a configured rate). A token without one cannot be withdrawn
    /// (quotes answer 503 CHAIN_UNAVAILABLE).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub native_rates: Vec<NativeRateConfig>,
}

impl Config {
    /// The defaults: mainnet catalog, no endpoints configured.
    pub fn default_for_init() -> Self {
        let mainnet = AssetCatalog::mainnet();
        Config {
            server: ServerConfig::default(),
            store: StoreConfig::default(),
            bsc: custody_chain_bsc::config::init_section(&mainnet),
            tron: custody_chain_tron::config::init_section(&mainnet),
            swaps: SwapsConfig::default(),
            sweeps: SweepsConfig::default(),
            webhooks: WebhooksConfig::default(),
            reconciliation: ReconciliationConfig::default(),
            fee_policies: Vec::new(),
            native_rates: Vec::new(),
        }
    }

    /// Refuses settings that would lose or invent money, naming the section and key: a
    /// deposit credited at 0 confirmations, a reorganization window (`blocks_kept`) too short
    /// to follow a reorganization that reverses a credited deposit, a malformed TRON genesis
    /// block id. Called on every load, so `serve` refuses to start with them. Each section's
    /// owner checks its keys; the sweep policies are checked here against the catalog the
    /// chain sections make.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.swaps.router_settings()?;
        custody_store_postgres::database_url(&self.store)?;
        if let Ok(catalog) = self.catalog() {
            for network in Network::ALL {
                self.sweeps.policies(&catalog, network)?;
            }
        }
        self.reconciliation.validate()?;
        self.sweeps.validate()?;
        for network in Network::ALL {
            self.chain(network).validate(network)?;
        }
        custody_chain_bsc::config::validate(&self.bsc)?;
        custody_chain_tron::config::validate(&self.tron)
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

    /// The asset catalog both chain sections list together.
    pub fn catalog(&self) -> Result<AssetCatalog, ConfigError> {
        let assets = Network::ALL
            .into_iter()
            .flat_map(|network| {
                let listed = &self.chain(network).assets;
                listed.iter().map(move |a| a.asset(network))
            })
            .collect();
        AssetCatalog::new(assets)
            .map_err(|e| ConfigError::new("[[bsc.assets]] / [[tron.assets]]", e.to_string()))
    }
}

#[cfg(test)]
mod tests;
