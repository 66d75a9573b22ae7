//! Settings of the adapter, as the composition root builds them from the `[bsc]` section of
//! `custody.toml` (urls, chain_id, assets) plus the limits below.

use std::collections::HashMap;

use custody_core::address::BscAddress;
use custody_core::asset::{Asset, AssetKind};
use custody_core::Network;

use crate::rpc::UrlError;

/// Everything [`crate::BscChain::new`] needs. Start from [`BscSettings::default`] and set at
/// least `urls`, `chain_id` and `assets`:
///
/// ```
/// # use custody_chain_bsc::BscSettings;
/// # use custody_core::{AssetCatalog, Network};
/// let catalog = AssetCatalog::mainnet();
/// let settings = BscSettings {
///     urls: vec!["https://bsc-dataseed.example/".into()],
///     chain_id: 56,
///     assets: catalog.of_network(Network::Bsc).cloned().collect(),
///     ..BscSettings::default()
/// };
/// assert_eq!(settings.request_timeout_ms, 10_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BscSettings {
    /// JSON-RPC endpoints in order of preference (failover). Empty is allowed: every call then
    /// fails as transient and the rest of the service runs without the chain.
    pub urls: Vec<String>,
    /// EIP-155 chain id every endpoint must report (`eth_chainId`): 56 mainnet, 97 testnet.
    pub chain_id: u64,
    /// Limit on one exchange with one endpoint (connect, send, read the whole answer).
    pub request_timeout_ms: u64,
    /// Largest answer read from an endpoint. A full block plus its receipts is a few MB.
    pub response_bytes_max: usize,
    /// Most calls in one JSON-RPC batch (providers cap batches; 100 is accepted widely).
    pub batch_max: usize,
    /// Accept `http://` endpoints that are not on loopback. Off by default: whoever sits on a
    /// plain-HTTP path can invent blocks and deposits.
    pub allow_insecure_http: bool,
    /// Read a block's receipts with one `eth_getBlockReceipts` call (falls back to batched
    /// `eth_getTransactionReceipt` by itself when a node lacks the method). `false` always
    /// asks for the receipts of the candidate transactions only: more calls, smaller answers.
    pub use_block_receipts: bool,
    /// The BSC part of the asset catalog: one native coin and any number of BEP20 tokens.
    pub assets: Vec<Asset>,
}

impl Default for BscSettings {
    fn default() -> Self {
        BscSettings {
            urls: Vec::new(),
            chain_id: Network::Bsc.default_chain_id(),
            request_timeout_ms: 10_000,
            response_bytes_max: 32 * 1024 * 1024,
            batch_max: 100,
            allow_insecure_http: false,
            use_block_receipts: true,
            assets: Vec::new(),
        }
    }
}

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BscConfigError {
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("asset {code}: {reason}")]
    Asset { code: String, reason: String },
    #[error("the BSC assets must contain exactly one native coin, found {0}")]
    Native(usize),
    #[error("assets {first} and {second} have the same contract {contract}")]
    SharedContract {
        first: String,
        second: String,
        contract: String,
    },
}

/// The catalog as the scanner uses it.
#[derive(Debug, Clone)]
pub(crate) struct Catalog {
    pub native_code: String,
    /// Token contract → asset code.
    pub tokens: HashMap<BscAddress, String>,
    /// The token contracts as `eth_getLogs` takes them (lowercase hex), in catalog order.
    pub log_filter: Vec<String>,
}

impl Catalog {
    pub(crate) fn from_assets(assets: &[Asset]) -> Result<Self, BscConfigError> {
        let asset_error = |a: &Asset, reason: &str| BscConfigError::Asset {
            code: a.code.clone(),
            reason: reason.into(),
        };
        let natives: Vec<&Asset> = assets
            .iter()
            .filter(|a| a.kind == AssetKind::Native)
            .collect();
        if natives.len() != 1 {
            return Err(BscConfigError::Native(natives.len()));
        }
        let mut tokens: HashMap<BscAddress, String> = HashMap::new();
        let mut log_filter = Vec::new();
        for a in assets {
            if a.network != Network::Bsc {
                return Err(asset_error(a, "is not a BSC asset"));
            }
            match (a.kind, &a.contract) {
                (AssetKind::Native, None) => {}
                (AssetKind::Bep20, Some(contract)) => {
                    let address = BscAddress::parse(contract)
                        .map_err(|e| asset_error(a, &format!("contract {contract:?}: {e}")))?;
                    if let Some(first) = tokens.get(&address) {
                        return Err(BscConfigError::SharedContract {
                            first: first.clone(),
                            second: a.code.clone(),
                            contract: address.to_string(),
                        });
                    }
                    tokens.insert(address, a.code.clone());
                    log_filter.push(address.to_lowercase_hex());
                }
                (AssetKind::Native, Some(_)) => {
                    return Err(asset_error(a, "a native coin has no contract"))
                }
                (AssetKind::Bep20, None) => {
                    return Err(asset_error(a, "a BEP20 token needs a contract"))
                }
                (AssetKind::Trc20, _) => return Err(asset_error(a, "TRC20 is not a BSC kind")),
            }
        }
        Ok(Catalog {
            native_code: natives[0].code.clone(),
            tokens,
            log_filter,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use custody_core::AssetCatalog;

    fn bsc_assets() -> Vec<Asset> {
        AssetCatalog::mainnet()
            .of_network(Network::Bsc)
            .cloned()
            .collect()
    }

    #[test]
    fn mainnet_catalog_is_accepted() {
        let c = Catalog::from_assets(&bsc_assets()).unwrap();
        assert_eq!(c.native_code, "BNB");
        assert_eq!(c.tokens.len(), 2);
        assert_eq!(
            c.log_filter[0],
            "0x55d398326f99059ff775485246999027b3197955"
        );
    }

    #[test]
    fn inconsistent_assets_are_refused() {
        let mut a = bsc_assets();
        a.remove(0);
        assert_eq!(
            Catalog::from_assets(&a).unwrap_err(),
            BscConfigError::Native(0)
        );

        let mut a = bsc_assets();
        a[2].contract = a[1].contract.clone();
        assert!(matches!(
            Catalog::from_assets(&a),
            Err(BscConfigError::SharedContract { .. })
        ));

        let mut a = bsc_assets();
        // One letter's case flipped: the EIP-55 checksum no longer matches.
        a[1].contract = Some("0x55D398326f99059fF775485246999027B3197955".into());
        assert!(matches!(
            Catalog::from_assets(&a),
            Err(BscConfigError::Asset { .. })
        ));

        let mut a = bsc_assets();
        a[1].network = Network::Tron;
        assert!(matches!(
            Catalog::from_assets(&a),
            Err(BscConfigError::Asset { .. })
        ));
    }
}
