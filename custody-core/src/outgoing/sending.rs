//! `[bsc.sending]` and `[tron.sending]` of `custody.toml`: the outgoing-transaction engine's
//! tuning, owned here beside the [`EnginePolicy`] it becomes. The gas keys are read by the BSC
//! sender (`custody-chain-bsc`), which checks them; TRON's section refuses them there.

use serde::{Deserialize, Serialize};

use super::EnginePolicy;
use crate::network::Network;
use crate::settings::{chain_section, ConfigError};

/// Below this a step (several calls to a slow node) could outlive its lease; above it a
/// crashed instance's transactions wait too long for another to take them.
pub const LEASE_MS_MIN: u64 = 2_000;
pub const LEASE_MS_MAX: u64 = 600_000;

mod defaults {
    pub fn rebroadcast_after_ms() -> u64 {
        15_000
    }

    pub fn replace_after_ms() -> u64 {
        60_000
    }

    pub fn bump_percent() -> u32 {
        12
    }

    pub fn lease_ms() -> u64 {
        60_000
    }
}

/// `[<network>.sending]`: the outgoing-transaction engine's tuning. Gas keys are BSC's only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendingConfig {
    /// The same signed bytes are sent again this long after the last send while nothing is
    /// included.
    #[serde(default = "defaults::rebroadcast_after_ms")]
    pub rebroadcast_after_ms: u64,
    /// BSC: a transaction not included after this long is replaced under its nonce with a
    /// higher gas price (a refused one is priced again).
    #[serde(default = "defaults::replace_after_ms")]
    pub replace_after_ms: u64,
    /// BSC: each replacement bids at least this many percent more (nodes require 10).
    #[serde(default = "defaults::bump_percent")]
    pub bump_percent: u32,
    /// How long a broadcaster holds a transaction it works on; another instance (or this one
    /// after a crash) takes it over only once this has run out. Longer than any step takes.
    #[serde(default = "defaults::lease_ms")]
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
            rebroadcast_after_ms: defaults::rebroadcast_after_ms(),
            replace_after_ms: defaults::replace_after_ms(),
            bump_percent: defaults::bump_percent(),
            lease_ms: defaults::lease_ms(),
            gas_price_floor_wei: None,
            gas_price_cap_wei: None,
            token_gas_margin_percent: None,
        }
    }
}

impl SendingConfig {
    /// The engine's policy for `network` at `confirmations`. On BSC the configured gas price
    /// cap bounds replacements too: one cap for the price and for every bid after it.
    pub fn engine_policy(&self, network: Network, confirmations: u32) -> EnginePolicy {
        let mut policy = EnginePolicy::defaults(network, confirmations);
        policy.rebroadcast_after_ms = i64::try_from(self.rebroadcast_after_ms).unwrap_or(i64::MAX);
        policy.replace_after_ms = i64::try_from(self.replace_after_ms).unwrap_or(i64::MAX);
        policy.bump_percent = self.bump_percent;
        if network == Network::Bsc {
            if let Some(cap) = self.gas_price_cap_wei {
                policy.gas_price_cap_wei = u128::from(cap);
            }
        }
        policy
    }

    /// Refuses timings under which the engine would climb to the cap at once, flood the
    /// endpoints, or leave a crashed instance's transactions without a taker for long. The gas
    /// keys are the chain adapters' to check.
    pub fn validate(&self, network: Network) -> Result<(), ConfigError> {
        let key = |name: &str| format!("[{}.sending] {name}", chain_section(network));
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_gets_the_defaults_and_passes() {
        let section: SendingConfig = toml::from_str("").unwrap();
        assert_eq!(section, SendingConfig::default());
        section.validate(Network::Bsc).unwrap();
        let policy = section.engine_policy(Network::Tron, 19);
        assert_eq!(
            (policy.rebroadcast_after_ms, policy.replace_after_ms),
            (15_000, 60_000)
        );
        assert!(toml::from_str::<SendingConfig>("bump_percnt = 12").is_err());
    }

    #[test]
    fn the_cap_bounds_bsc_replacements_only() {
        let section = SendingConfig {
            gas_price_cap_wei: Some(7_000_000_000),
            ..SendingConfig::default()
        };
        let bsc = section.engine_policy(Network::Bsc, 15);
        assert_eq!(bsc.gas_price_cap_wei, 7_000_000_000);
        let tron = section.engine_policy(Network::Tron, 19);
        assert_eq!(
            tron.gas_price_cap_wei,
            EnginePolicy::defaults(Network::Tron, 19).gas_price_cap_wei
        );
    }

    #[test]
    fn timings_that_would_misbehave_are_refused_by_key() {
        let refused = |edit: fn(&mut SendingConfig), network| {
            let mut section = SendingConfig::default();
            edit(&mut section);
            section.validate(network).unwrap_err().to_string()
        };
        let err = refused(|s| s.bump_percent = 9, Network::Bsc);
        assert!(err.starts_with("[bsc.sending] bump_percent = 9: "), "{err}");
        let err = refused(|s| s.bump_percent = 101, Network::Tron);
        assert!(
            err.starts_with("[tron.sending] bump_percent = 101: "),
            "{err}"
        );
        let err = refused(|s| s.lease_ms = 1_999, Network::Bsc);
        assert!(
            err.contains("lease_ms = 1999: must be 2000 to 600000"),
            "{err}"
        );
        let err = refused(|s| s.rebroadcast_after_ms = 999, Network::Bsc);
        assert!(err.contains("rebroadcast_after_ms = 999"), "{err}");
        let err = refused(|s| s.replace_after_ms = 10_000, Network::Bsc);
        assert!(err.contains("replace_after_ms = 10000"), "{err}");
    }
}
