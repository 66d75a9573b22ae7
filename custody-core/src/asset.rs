//! The asset catalog. An asset is identified by (network, code): BSC USDT and TRON USDT are two
//! assets with two ledgers. Loadable from config so devnets can use their own contracts.

use serde::{Deserialize, Serialize};

use crate::network::Network;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AssetKind {
    #[serde(rename = "native")]
    Native,
    #[serde(rename = "BEP20")]
    Bep20,
    #[serde(rename = "TRC20")]
    Trc20,
}

impl AssetKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            AssetKind::Native => "native",
            AssetKind::Bep20 => "BEP20",
            AssetKind::Trc20 => "TRC20",
        }
    }
}

/// Identity of an asset: network plus code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AssetId {
    pub network: Network,
    pub code: String,
}

impl AssetId {
    pub fn new(network: Network, code: impl Into<String>) -> Self {
        AssetId {
            network,
            code: code.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asset {
    pub network: Network,
    pub code: String,
    pub kind: AssetKind,
    pub decimals: u8,
    /// Token contract (EIP-55 hex on BSC, base58 on TRON); `None` for the native coin.
    pub contract: Option<String>,
}

impl Asset {
    pub fn id(&self) -> AssetId {
        AssetId::new(self.network, self.code.clone())
    }
}

/// Largest `decimals` we accept: 10^38 still fits in u128, so any whole-token figure of one
/// token converts without overflow.
pub const DECIMALS_MAX: u8 = 38;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("asset {network} {code} is listed twice")]
    Duplicate { network: Network, code: String },
    #[error("asset {network} {code}: decimals {decimals} is above {DECIMALS_MAX}")]
    Decimals {
        network: Network,
        code: String,
        decimals: u8,
    },
    #[error("asset {network} {code}: kind {kind} does not belong on this network")]
    KindMismatch {
        network: Network,
        code: String,
        kind: &'static str,
    },
    #[error("asset {network} {code}: a token needs a contract and a native coin has none")]
    Contract { network: Network, code: String },
    #[error("asset code {0:?} must be 1 to 16 characters A-Z, 0-9")]
    Code(String),
    #[error("network {0} has no native coin in the catalog")]
    NoNative(Network),
}

/// What resolving an asset code on a network can say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssetLookup<'a> {
    Found(&'a Asset),
    /// The code exists, but only on the other network (CROSS_CHAIN_NOT_SUPPORTED).
    OtherNetwork(Network),
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetCatalog {
    assets: Vec<Asset>,
}

impl AssetCatalog {
    /// Validates and builds a catalog; order is kept as given (it is the listing order).
    pub fn new(assets: Vec<Asset>) -> Result<Self, CatalogError> {
        for (i, a) in assets.iter().enumerate() {
            let valid_code = (1..=16).contains(&a.code.len())
                && a.code
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
            if !valid_code {
                return Err(CatalogError::Code(a.code.clone()));
            }
            if assets[..i]
                .iter()
                .any(|b| b.network == a.network && b.code == a.code)
            {
                return Err(CatalogError::Duplicate {
                    network: a.network,
                    code: a.code.clone(),
                });
            }
            if a.decimals > DECIMALS_MAX {
                return Err(CatalogError::Decimals {
                    network: a.network,
                    code: a.code.clone(),
                    decimals: a.decimals,
                });
            }
            let kind_fits = matches!(
                (a.network, a.kind),
                (_, AssetKind::Native)
                    | (Network::Bsc, AssetKind::Bep20)
                    | (Network::Tron, AssetKind::Trc20)
            );
            if !kind_fits {
                return Err(CatalogError::KindMismatch {
                    network: a.network,
                    code: a.code.clone(),
                    kind: a.kind.as_str(),
                });
            }
            if (a.kind == AssetKind::Native) == a.contract.is_some() {
                return Err(CatalogError::Contract {
                    network: a.network,
                    code: a.code.clone(),
                });
            }
        }
        for n in Network::ALL {
            let has_assets = assets.iter().any(|a| a.network == n);
            if has_assets
                && !assets
                    .iter()
                    .any(|a| a.network == n && a.kind == AssetKind::Native)
            {
                return Err(CatalogError::NoNative(n));
            }
        }
        Ok(AssetCatalog { assets })
    }

    /// The mainnet catalog of decisions §2.
    pub fn mainnet() -> Self {
        let token = |network, code: &str, kind, decimals, contract: &str| Asset {
            network,
            code: code.into(),
            kind,
            decimals,
            contract: Some(contract.into()),
        };
        let native = |network, code: &str, decimals| Asset {
            network,
            code: code.into(),
            kind: AssetKind::Native,
            decimals,
            contract: None,
        };
        AssetCatalog::new(vec![
            native(Network::Bsc, "BNB", 18),
            token(
                Network::Bsc,
                "USDT",
                AssetKind::Bep20,
                18,
                "0x55d398326f99059fF775485246999027B3197955",
            ),
            token(
                Network::Bsc,
                "USDC",
                AssetKind::Bep20,
                18,
                "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d",
            ),
            native(Network::Tron, "TRX", 6),
            token(
                Network::Tron,
                "USDT",
                AssetKind::Trc20,
                6,
                "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
            ),
        ])
        .expect("the built-in catalog is valid")
    }

    pub fn all(&self) -> &[Asset] {
        &self.assets
    }

    pub fn of_network(&self, network: Network) -> impl Iterator<Item = &Asset> {
        self.assets.iter().filter(move |a| a.network == network)
    }

    pub fn get(&self, network: Network, code: &str) -> Option<&Asset> {
        self.assets
            .iter()
            .find(|a| a.network == network && a.code == code)
    }

    pub fn native(&self, network: Network) -> Option<&Asset> {
        self.assets
            .iter()
            .find(|a| a.network == network && a.kind == AssetKind::Native)
    }

    pub fn lookup(&self, network: Network, code: &str) -> AssetLookup<'_> {
        if let Some(a) = self.get(network, code) {
            return AssetLookup::Found(a);
        }
        match self.assets.iter().find(|a| a.code == code) {
            Some(other) => AssetLookup::OtherNetwork(other.network),
            None => AssetLookup::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mainnet_catalog_matches_decisions() {
        let c = AssetCatalog::mainnet();
        assert_eq!(c.all().len(), 5);
        assert_eq!(c.get(Network::Bsc, "USDT").unwrap().decimals, 18);
        assert_eq!(c.get(Network::Tron, "USDT").unwrap().decimals, 6);
        assert_eq!(c.native(Network::Tron).unwrap().code, "TRX");
        assert_eq!(
            c.lookup(Network::Tron, "BNB"),
            AssetLookup::OtherNetwork(Network::Bsc)
        );
        assert_eq!(c.lookup(Network::Tron, "DOGE"), AssetLookup::Unknown);
    }

    #[test]
    fn refuses_inconsistent_catalogs() {
        let mut assets = AssetCatalog::mainnet().all().to_vec();
        assets.push(assets[0].clone());
        assert!(matches!(
            AssetCatalog::new(assets),
            Err(CatalogError::Duplicate { .. })
        ));

        let mut assets = AssetCatalog::mainnet().all().to_vec();
        assets[1].kind = AssetKind::Trc20;
        assert!(matches!(
            AssetCatalog::new(assets),
            Err(CatalogError::KindMismatch { .. })
        ));

        let mut assets = AssetCatalog::mainnet().all().to_vec();
        assets[1].contract = None;
        assert!(matches!(
            AssetCatalog::new(assets),
            Err(CatalogError::Contract { .. })
        ));
    }
}
