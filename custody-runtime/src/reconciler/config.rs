//! The `[reconciliation]` section of `custody.toml`, owned here with the reconciler it
//! configures.

use custody_core::settings::ConfigError;
use serde::{Deserialize, Serialize};

mod defaults {
    pub fn ledger_every_ms() -> u64 {
        600_000
    }

    pub fn treasury_every_ms() -> u64 {
        3_600_000
    }

    pub fn reconcile_claim_interval_ms() -> u64 {
        1_000
    }

    pub fn reconcile_lease_ms() -> u64 {
        600_000
    }
}

/// `[reconciliation]`: how often the service reconciles on its own (decisions §14), and how
/// the reconciler picks up runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconciliationConfig {
    /// A LEDGER run this long after the last one; 0 schedules none.
    #[serde(default = "defaults::ledger_every_ms")]
    pub ledger_every_ms: u64,
    /// A TREASURY run this long after the last one; 0 schedules none.
    #[serde(default = "defaults::treasury_every_ms")]
    pub treasury_every_ms: u64,
    /// How often the reconciler looks for runs to carry out (requested ones included).
    #[serde(default = "defaults::reconcile_claim_interval_ms")]
    pub claim_interval_ms: u64,
    /// How long a run is one runner's before another instance may take it over.
    #[serde(default = "defaults::reconcile_lease_ms")]
    pub lease_ms: u64,
}

impl Default for ReconciliationConfig {
    fn default() -> Self {
        ReconciliationConfig {
            ledger_every_ms: defaults::ledger_every_ms(),
            treasury_every_ms: defaults::treasury_every_ms(),
            claim_interval_ms: defaults::reconcile_claim_interval_ms(),
            lease_ms: defaults::reconcile_lease_ms(),
        }
    }
}

impl ReconciliationConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.claim_interval_ms < 100 {
            return Err(ConfigError::value(
                "[reconciliation] claim_interval_ms",
                self.claim_interval_ms,
                "must be at least 100",
            ));
        }
        if self.lease_ms < 10_000 {
            return Err(ConfigError::value(
                "[reconciliation] lease_ms",
                self.lease_ms,
                "must be at least 10000 (a TREASURY run reads every deposit address; a lease \
                 shorter than a run lets another instance run it again)",
            ));
        }
        Ok(())
    }
}
