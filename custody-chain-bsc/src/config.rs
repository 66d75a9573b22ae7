//! The keys of `custody.toml` only BSC reads, owned here with the adapter that uses them: the
//! router addresses of `[swaps]` (the DEX router). The section itself is the core's
//! [`SwapsConfig`], which checks the keys.

use custody_core::settings::ConfigError;
use custody_core::swap::SwapsConfig;

use crate::DexSettings;

impl DexSettings {
    /// The router `[swaps]` names, checked (EIP-55 when mixed case).
    pub fn from_config(swaps: &SwapsConfig) -> Result<Self, ConfigError> {
        let a = swaps.router_addresses()?;
        Ok(DexSettings {
            router: a.router,
            factory: a.factory,
            wrapped_native: a.wrapped_native,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_is_read_from_the_swaps_section() {
        let dex = DexSettings::from_config(&SwapsConfig::default()).unwrap();
        assert_eq!(
            dex.router.to_string(),
            "0x10ED43C718714eb63d5aA57B78B54704E256024E"
        );
        let bad = SwapsConfig {
            wrapped_native: "WBNB".into(),
            ..SwapsConfig::default()
        };
        let err = DexSettings::from_config(&bad).unwrap_err();
        assert_eq!(err.key, "[swaps] wrapped_native");
    }
}
