//! The health of one chain endpoint, in one shape for every network: what the admin `rpcs`
//! listing and the dashboard show operators, whichever adapter reports it.

use serde::Serialize;

use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointHealth {
    /// `scheme://host:port`, with `/…` or `?…` in place of a path or query (they often hold an
    /// API key).
    pub url: String,
    /// The last exchange succeeded (and the endpoint serves the configured network).
    pub healthy: bool,
    /// The endpoint proved it serves the configured network (`false` until checked, and for
    /// good when it serves another one).
    pub identity_verified: bool,
    /// What proves the network: `chain_id <n>` (BSC, `eth_chainId`) or `genesis <block id>`
    /// (TRON, block 0's id).
    pub identity: String,
    pub consecutive_failures: u32,
    /// Requests and failures since start, where the adapter counts them.
    pub requests: Option<u64>,
    pub failures: Option<u64>,
    /// The last failure, scrubbed of secrets.
    pub last_error: Option<String>,
    pub last_latency_ms: Option<u64>,
    pub last_success_at: Option<Timestamp>,
    pub last_failure_at: Option<Timestamp>,
    /// The newest block this endpoint reported, where the adapter keeps it.
    pub head_block: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_json_shape_for_every_network() {
        let h = EndpointHealth {
            url: "https://node.example/…".into(),
            healthy: true,
            identity_verified: true,
            identity: "chain_id 56".into(),
            consecutive_failures: 0,
            requests: None,
            failures: None,
            last_error: None,
            last_latency_ms: Some(12),
            last_success_at: Some(Timestamp::from_unix_millis(1_800_000_000_000)),
            last_failure_at: None,
            head_block: Some(9),
        };
        let v = serde_json::to_value(&h).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "consecutive_failures",
                "failures",
                "head_block",
                "healthy",
                "identity",
                "identity_verified",
                "last_error",
                "last_failure_at",
                "last_latency_ms",
                "last_success_at",
                "requests",
                "url"
            ]
        );
        assert_eq!(v["last_success_at"], "2027-01-15T08:00:00.000Z");
    }
}
