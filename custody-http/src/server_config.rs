//! The `[server]` section of `custody.toml`: where the API listens and the limits of the HTTP
//! layer, owned here with the server they configure.

use std::net::SocketAddr;

use custody_core::settings::ConfigError;
use serde::{Deserialize, Serialize};

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
        crate::HttpLimits::default().connections_per_peer_max
    }

    pub fn idle_timeout_ms() -> u64 {
        crate::HttpLimits::default().idle_timeout_ms
    }

    pub fn body_read_timeout_ms() -> u64 {
        crate::HttpLimits::default().body_read_timeout_ms
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let limits = crate::HttpLimits::default();
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
    pub fn limits(&self) -> Result<crate::HttpLimits, ConfigError> {
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
                return Err(ConfigError::value(
                    format!("[server] {key}"),
                    0,
                    "must be greater than 0",
                ));
            }
        }
        Ok(crate::HttpLimits {
            body_bytes_max: self.body_bytes_max,
            connections_max: self.connections_max,
            connections_per_peer_max: self.connections_per_peer_max,
            idle_timeout_ms: self.idle_timeout_ms,
            body_read_timeout_ms: self.body_read_timeout_ms,
        })
    }
}
