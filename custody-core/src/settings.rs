//! What every crate that owns a section of `custody.toml` answers for a setting it cannot use.

use crate::network::Network;

/// The table of `custody.toml` that configures `network` (`bsc`, `tron`), as the keys of its
/// sections are named in a [`ConfigError`] (`[bsc] confirmations`, `[tron.sending] lease_ms`).
pub const fn chain_section(network: Network) -> &'static str {
    match network {
        Network::Bsc => "bsc",
        Network::Tron => "tron",
    }
}

/// A setting of `custody.toml` (or of the environment variable that overrides it) that cannot
/// be used: the key as the file names it (`[bsc.sending] bump_percent`,
/// `[[fee_policies]] TRON DOGE`), the value when one was written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub value: Option<String>,
    pub reason: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            value: None,
            reason: reason.into(),
        }
    }

    /// A key whose written value is refused.
    pub fn value(
        key: impl Into<String>,
        value: impl std::fmt::Display,
        reason: impl Into<String>,
    ) -> Self {
        ConfigError {
            value: Some(value.to_string()),
            ..ConfigError::new(key, reason)
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key)?;
        if let Some(v) = &self.value {
            write!(f, " = {v}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> Self {
        e.to_string()
    }
}
