//! `custody.toml`: the settings of one data dir. Every field has a default, so `init` writes a
//! complete file an operator can read and edit.

use custody_core::asset::{Asset, AssetCatalog, AssetKind};
use custody_core::pricing::NativeRateConfig;
use custody_core::swap::SwapsConfig;
use custody_core::sweep::SweepsConfig;
use custody_core::withdrawal::FeePolicyConfig;
use custody_core::Network;
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
    pub webhooks: custody_runtime::webhooks::WebhooksConfig,
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
    /// TRON only: the `blockID` of block 0 every endpoint must serve before it is used (the
    /// network's identity, as `chain_id` is BSC's). Absent = mainnet's. Set it for Nile,
    /// Shasta or a devnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genesis_block_id: Option<String>,
    /// How long the scanner may fail without progress before a `scan_stuck` critical alert.
    #[serde(default = "default_stuck_alert_after_ms")]
    pub stuck_alert_after_ms: u64,
    /// How often every deposit address's on-chain balances are compared with what was credited
    /// (funds no deposit explains show on the dashboard). 0 turns the check off.
    #[serde(default = "default_holdings_check_interval_ms")]
    pub holdings_check_interval_ms: u64,
    /// How the network's broadcaster prices, sends again and replaces outgoing transactions
    /// (`[bsc.sending]`, `[tron.sending]`).
    #[serde(default)]
    pub sending: SendingConfig,
}

/// `[<network>.sending]`: the outgoing-transaction engine's tuning. Gas keys are BSC's only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendingConfig {
    /// The same signed bytes are sent again this long after the last send while nothing is
    /// included.
    #[serde(default = "default_rebroadcast_after_ms")]
    pub rebroadcast_after_ms: u64,
    /// BSC: a transaction not included after this long is replaced under its nonce with a
    /// higher gas price (a refused one is priced again).
    #[serde(default = "default_replace_after_ms")]
    pub replace_after_ms: u64,
    /// BSC: each replacement bids at least this many percent more (nodes require 10).
    #[serde(default = "default_bump_percent")]
    pub bump_percent: u32,
    /// How long a broadcaster holds a transaction it works on; another instance (or this one
    /// after a crash) takes it over only once this has run out. Longer than any step takes.
    #[serde(default = "default_lease_ms")]
    pub lease_ms: u64,
    /// BSC: the node's `eth_gasPrice` is raised to at least this (the validators' minimum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gas_price_floor_wei: Option<u64>,
    /// BSC: never bid above this, replacements included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gas_price_cap_wei: Option<u64>,
    /// BSC: added to the node's gas estimate of a token transfer for its gas limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_gas_margin_percent: Option<u64>,
}

impl Default for SendingConfig {
    fn default() -> Self {
        SendingConfig {
            rebroadcast_after_ms: default_rebroadcast_after_ms(),
            replace_after_ms: default_replace_after_ms(),
            bump_percent: default_bump_percent(),
            lease_ms: default_lease_ms(),
            gas_price_floor_wei: None,
            gas_price_cap_wei: None,
            token_gas_margin_percent: None,
        }
    }
}

impl SendingConfig {
    /// BSC's defaults written by `custody init`.
    fn bsc_default() -> Self {
        let pricing = custody_chain_bsc::BscSenderSettings::default();
        SendingConfig {
            gas_price_floor_wei: u64::try_from(pricing.gas_price_floor_wei).ok(),
            gas_price_cap_wei: u64::try_from(pricing.gas_price_cap_wei).ok(),
            token_gas_margin_percent: Some(pricing.token_gas_margin_percent),
            ..SendingConfig::default()
        }
    }

    /// The BSC sender's pricing: the configured keys over the defaults.
    pub fn bsc_pricing(&self) -> custody_chain_bsc::BscSenderSettings {
        let d = custody_chain_bsc::BscSenderSettings::default();
        custody_chain_bsc::BscSenderSettings {
            gas_price_floor_wei: self
                .gas_price_floor_wei
                .map_or(d.gas_price_floor_wei, u128::from),
            gas_price_cap_wei: self
                .gas_price_cap_wei
                .map_or(d.gas_price_cap_wei, u128::from),
            token_gas_margin_percent: self
                .token_gas_margin_percent
                .unwrap_or(d.token_gas_margin_percent),
        }
    }

    /// The engine's policy for `network` at `confirmations`.
    pub fn engine_policy(
        &self,
        network: Network,
        confirmations: u32,
    ) -> custody_core::outgoing::EnginePolicy {
        let mut policy = custody_core::outgoing::EnginePolicy::defaults(network, confirmations);
        policy.rebroadcast_after_ms = i64::try_from(self.rebroadcast_after_ms).unwrap_or(i64::MAX);
        policy.replace_after_ms = i64::try_from(self.replace_after_ms).unwrap_or(i64::MAX);
        policy.bump_percent = self.bump_percent;
        if network == Network::Bsc {
            policy.gas_price_cap_wei = self.bsc_pricing().gas_price_cap_wei;
        }
        policy
    }

    fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let key = |name: &str| format!("[{section}.sending] {name}");
        if self.bump_percent < 10 {
            return Err(ConfigError::value(
                key("bump_percent"),
                self.bump_percent,
                "must be at least 10 (nodes refuse a replacement that bids less than 10 % more)",
            ));
        }
        if !(LEASE_MS_MIN..=LEASE_MS_MAX).contains(&self.lease_ms) {
            return Err(ConfigError::value(
                key("lease_ms"),
                self.lease_ms,
                format!("must be {LEASE_MS_MIN} to {LEASE_MS_MAX}"),
            ));
        }
        if self.bump_percent > 100 {
            return Err(ConfigError::value(
                key("bump_percent"),
                self.bump_percent,
                "at most 100 (each replacement would more than double the price)",
            ));
        }
        if self.rebroadcast_after_ms < 1_000 {
            return Err(ConfigError::value(
                key("rebroadcast_after_ms"),
                self.rebroadcast_after_ms,
                "at least 1000 (sending the same bytes faster only loads the endpoints)",
            ));
        }
        if self.replace_after_ms < 3_000 || self.replace_after_ms < self.rebroadcast_after_ms {
            return Err(ConfigError::value(
                key("replace_after_ms"),
                self.replace_after_ms,
                "at least 3000 and at least rebroadcast_after_ms (a replacement every look \
                 would climb to the cap in a minute)",
            ));
        }
        if section == "tron" {
            if self.gas_price_floor_wei.is_some()
                || self.gas_price_cap_wei.is_some()
                || self.token_gas_margin_percent.is_some()
            {
                return Err(ConfigError::new(
                    "[tron.sending] gas_price_floor_wei, gas_price_cap_wei, token_gas_margin_percent",
                    "BSC settings (TRON bids a fee limit)",
                ));
            }
            return Ok(());
        }
        let p = self.bsc_pricing();
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
        Ok(())
    }
}

fn default_rebroadcast_after_ms() -> u64 {
    15_000
}

fn default_replace_after_ms() -> u64 {
    60_000
}

fn default_bump_percent() -> u32 {
    12
}

fn default_lease_ms() -> u64 {
    60_000
}

/// Below this a step (several calls to a slow node) could outlive its lease; above it a
/// crashed instance's transactions wait too long for another to take them.
const LEASE_MS_MIN: u64 = 2_000;
const LEASE_MS_MAX: u64 = 600_000;

/// No bid above 1000 gwei: a typo in the cap could otherwise spend a fortune in gas.
const GAS_PRICE_CAP_WEI_MAX: u128 = 1_000_000_000_000;

impl ChainConfig {
    /// The genesis block id TRON endpoints are checked against (lowercase): the configured
    /// one, or mainnet's. Call after [`Config::validate`].
    pub fn tron_genesis_block_id(&self) -> String {
        self.genesis_block_id
            .as_deref()
            .and_then(custody_chain_tron::parse_genesis_block_id)
            .unwrap_or_else(|| custody_chain_tron::MAINNET_GENESIS_BLOCK_ID.to_owned())
    }
}

fn default_blocks_kept() -> u64 {
    1_000
}

fn default_stuck_alert_after_ms() -> u64 {
    10 * 60 * 1000
}

fn default_holdings_check_interval_ms() -> u64 {
    60 * 60 * 1000
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
            stuck_alert_after_ms: default_stuck_alert_after_ms(),
            holdings_check_interval_ms: default_holdings_check_interval_ms(),
            sending: if network == Network::Bsc {
                SendingConfig::bsc_default()
            } else {
                SendingConfig::default()
            },
            allow_insecure_http: false,
            api_key: None,
            genesis_block_id: (network == Network::Tron)
                .then(|| custody_chain_tron::MAINNET_GENESIS_BLOCK_ID.to_owned()),
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
            sweeps: SweepsConfig::default(),
            webhooks: custody_runtime::webhooks::WebhooksConfig::default(),
            reconciliation: ReconciliationConfig::default(),
            fee_policies: Vec::new(),
            native_rates: Vec::new(),
        }
    }

    /// Refuses settings that would lose or invent money, naming the section and key: a
    /// deposit credited at 0 confirmations, a reorganization window (`blocks_kept`) too short
    /// to follow a reorganization that reverses a credited deposit, a malformed TRON genesis
    /// block id. Called on every load, so `serve` refuses to start with them.
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
        for (section, chain) in [("bsc", &self.bsc), ("tron", &self.tron)] {
            chain.sending.validate(section)?;
            if chain.confirmations < 1 {
                return Err(ConfigError::value(
                    format!("[{section}] confirmations"),
                    chain.confirmations,
                    "must be at least 1 (with 0 a deposit is credited from a block that may \
                     still be replaced)",
                ));
            }
            let floor = 2 * u64::from(chain.confirmations);
            if chain.blocks_kept < floor {
                return Err(ConfigError::value(
                    format!("[{section}] blocks_kept"),
                    chain.blocks_kept,
                    format!(
                        "must be at least 2 × confirmations = {floor} (the block hashes kept \
                         must reach below every credited deposit's block, or a reorganization \
                         reversing one could not be followed)"
                    ),
                ));
            }
        }
        if self.bsc.genesis_block_id.is_some() {
            return Err(ConfigError::new(
                "[bsc] genesis_block_id",
                "a TRON setting; BSC endpoints are checked with chain_id",
            ));
        }
        if let Some(id) = &self.tron.genesis_block_id {
            if custody_chain_tron::parse_genesis_block_id(id).is_none() {
                return Err(ConfigError::value(
                    "[tron] genesis_block_id",
                    format!("{id:?}"),
                    format!(
                        "must be the blockID of block 0, 64 hex digits whose first 16 are zeros \
                         (mainnet's is {})",
                        custody_chain_tron::MAINNET_GENESIS_BLOCK_ID
                    ),
                ));
            }
        }
        Ok(())
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

    pub fn catalog(&self) -> Result<AssetCatalog, ConfigError> {
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
        AssetCatalog::new(assets)
            .map_err(|e| ConfigError::new("[[bsc.assets]] / [[tron.assets]]", e.to_string()))
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
        assert_eq!(back.swaps.pairs(&catalog).unwrap().len(), 3);
        assert_eq!(back.tron.confirmations, 19);
        back.validate().unwrap();
        let limits = back.server.limits().unwrap();
        assert_eq!(limits.connections_per_peer_max, 128);
        assert_eq!(limits.body_read_timeout_ms, 10_000);
    }

    /// `init`'s file with `edit` applied (`from` must occur once), loaded as `serve` loads it.
    fn load_edited(edits: &[(&str, &str)]) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let data = crate::datadir::DataDir::new(dir.path().to_path_buf());
        data.write_config(&Config::default_for_init()).unwrap();
        let mut text = std::fs::read_to_string(data.config_path()).unwrap();
        for (from, to) in edits {
            assert_eq!(text.matches(from).count(), 1, "{from:?} once in:\n{text}");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(data.config_path(), text).unwrap();
        data.load_config()
    }

    #[test]
    fn sending_settings_are_written_by_init_read_and_checked() {
        let c = load_edited(&[(
            "gas_price_cap_wei = 50000000000",
            "gas_price_cap_wei = 7000000000",
        )])
        .unwrap();
        assert_eq!(c.bsc.sending.bsc_pricing().gas_price_cap_wei, 7_000_000_000);
        let policy = c.bsc.sending.engine_policy(Network::Bsc, 15);
        assert_eq!(
            policy.gas_price_cap_wei, 7_000_000_000,
            "one cap for price and replacements"
        );
        assert_eq!(policy.replace_after_ms, 60_000);
        let err = load_edited(&[(
            "gas_price_floor_wei = 50000000",
            "gas_price_floor_wei = 60000000000",
        )])
        .unwrap_err();
        assert!(err.contains("above gas_price_cap_wei"), "{err}");
        let err = load_edited(&[(
            "bump_percent = 12\nlease_ms = 60000\ngas_price_floor_wei",
            "bump_percent = 9\nlease_ms = 60000\ngas_price_floor_wei",
        )])
        .unwrap_err();
        assert!(err.contains("[bsc.sending] bump_percent = 9"), "{err}");
        let mut c = Config::default_for_init();
        c.tron.sending.gas_price_cap_wei = Some(1);
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("[tron.sending]"));
    }

    #[test]
    fn zero_confirmations_are_refused_for_either_network() {
        for (from, to, named) in [
            (
                "confirmations = 15",
                "confirmations = 0",
                "[bsc] confirmations = 0",
            ),
            (
                "confirmations = 19",
                "confirmations = 0",
                "[tron] confirmations = 0",
            ),
        ] {
            let err = load_edited(&[(from, to)]).unwrap_err();
            assert!(err.contains(named), "{err}");
            assert!(err.contains("at least 1"), "{err}");
            assert!(err.contains("custody.toml"), "the file is named: {err}");
        }
    }

    #[test]
    fn blocks_kept_below_twice_the_confirmations_is_refused() {
        // TRON: 19 confirmations need 38 blocks kept.
        let tron_kept = "poll_interval_ms = 3000\nblocks_kept = 1000";
        let err =
            load_edited(&[(tron_kept, "poll_interval_ms = 3000\nblocks_kept = 37")]).unwrap_err();
        assert!(err.contains("[tron] blocks_kept = 37"), "{err}");
        assert!(err.contains("2 × confirmations = 38"), "{err}");
        let ok = load_edited(&[(tron_kept, "poll_interval_ms = 3000\nblocks_kept = 38")]).unwrap();
        assert_eq!(ok.tron.blocks_kept, 38);

        // BSC: raising the confirmations past half the default window is refused too.
        let err = load_edited(&[("confirmations = 15", "confirmations = 501")]).unwrap_err();
        assert!(err.contains("[bsc] blocks_kept = 1000"), "{err}");
        assert!(err.contains("2 × confirmations = 1002"), "{err}");
        assert!(load_edited(&[("confirmations = 15", "confirmations = 500")]).is_ok());
        // One is the least accepted, with a window of two.
        let ok = load_edited(&[
            ("confirmations = 15", "confirmations = 1"),
            (
                "poll_interval_ms = 1000\nblocks_kept = 1000",
                "poll_interval_ms = 1000\nblocks_kept = 2",
            ),
        ]);
        assert_eq!(ok.unwrap().bsc.confirmations, 1);
    }

    #[test]
    fn the_tron_genesis_is_written_by_init_and_checked() {
        let mainnet = custody_chain_tron::MAINNET_GENESIS_BLOCK_ID;
        let c = load_edited(&[]).unwrap();
        assert_eq!(c.tron.genesis_block_id.as_deref(), Some(mainnet));
        assert_eq!(c.bsc.genesis_block_id, None);
        assert_eq!(c.tron.tron_genesis_block_id(), mainnet);
        let line = format!("genesis_block_id = \"{mainnet}\"");

        // Absent: mainnet's.
        let c = load_edited(&[(&line, "")]).unwrap();
        assert_eq!(c.tron.genesis_block_id, None);
        assert_eq!(c.tron.tron_genesis_block_id(), mainnet);

        // Nile's, written with 0x and in capitals: normalized.
        let nile = "0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc";
        let edited = format!("genesis_block_id = \"0x{}\"", nile.to_ascii_uppercase());
        let c = load_edited(&[(&line, &edited)]).unwrap();
        assert_eq!(c.tron.tron_genesis_block_id(), nile);

        for bad in [
            "genesis_block_id = \"\"",
            "genesis_block_id = \"1ebf88508a03865c71d452e25f4d51194196a1d22b6653dc\"",
            // Not block 0: the first 8 bytes are the block number.
            "genesis_block_id = \"00000000000000011ebf88508a03865c71d452e25f4d51194196a1d22b6653dc\"",
            "genesis_block_id = \"00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dz\"",
        ] {
            let err = load_edited(&[(&line, bad)]).unwrap_err();
            assert!(err.contains("[tron] genesis_block_id"), "{bad}: {err}");
        }

        let err = load_edited(&[("confirmations = 15", &format!("confirmations = 15\n{line}"))])
            .unwrap_err();
        assert!(err.contains("[bsc] genesis_block_id"), "{err}");
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
        let err = zero.limits().unwrap_err();
        assert!(err.to_string().contains("body_read_timeout_ms"));
        assert_eq!(
            (err.key.as_str(), err.value.as_deref()),
            ("[server] body_read_timeout_ms", Some("0"))
        );
    }

    #[test]
    fn the_reconciliation_schedule_is_written_by_init_read_and_checked() {
        let c = load_edited(&[
            ("ledger_every_ms = 600000", "ledger_every_ms = 5000"),
            ("treasury_every_ms = 3600000", "treasury_every_ms = 0"),
        ])
        .unwrap();
        assert_eq!(
            c.reconciliation,
            ReconciliationConfig {
                ledger_every_ms: 5_000,
                treasury_every_ms: 0,
                claim_interval_ms: 1_000,
                lease_ms: 600_000,
            }
        );
        // A file written before the section existed gets the defaults of decisions §14.
        let mut text = toml::to_string_pretty(&Config::default_for_init()).unwrap();
        let start = text.find("[reconciliation]").unwrap();
        let last = "lease_ms = 600000\n";
        let end = start + text[start..].find(last).unwrap() + last.len();
        text.replace_range(start..end, "");
        assert!(!text.contains("every_ms"), "{text}");
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.reconciliation.ledger_every_ms, 600_000);
        assert_eq!(back.reconciliation.treasury_every_ms, 3_600_000);
        let err = load_edited(&[("lease_ms = 600000", "lease_ms = 999")]).unwrap_err();
        assert!(err.contains("[reconciliation] lease_ms = 999"), "{err}");
        let err =
            load_edited(&[("treasury_every_ms = 3600000", "treasury_every_ms = -1")]).unwrap_err();
        assert!(err.contains("treasury_every_ms"), "{err}");
    }
}
