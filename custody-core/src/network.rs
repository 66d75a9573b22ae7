//! The two networks the service serves.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Network {
    #[serde(rename = "BSC")]
    Bsc,
    #[serde(rename = "TRON")]
    Tron,
}

impl Network {
    pub const ALL: [Network; 2] = [Network::Bsc, Network::Tron];

    pub const fn as_str(self) -> &'static str {
        match self {
            Network::Bsc => "BSC",
            Network::Tron => "TRON",
        }
    }

    /// SLIP-44 coin type used in the BIP44 path of the network's addresses.
    pub const fn coin_type(self) -> u32 {
        match self {
            Network::Bsc => 60,
            Network::Tron => 195,
        }
    }

    /// Confirmations required by default before a deposit is credited (decisions §4).
    pub const fn default_confirmations(self) -> u32 {
        match self {
            Network::Bsc => 15,
            Network::Tron => 19,
        }
    }

    pub const fn display_name(self) -> &'static str {
        match self {
            Network::Bsc => "BNB Smart Chain",
            Network::Tron => "TRON",
        }
    }

    pub const fn default_chain_id(self) -> u64 {
        match self {
            Network::Bsc => 56,
            // TRON has no EIP-155 chain id; 0x2b6653dc is the id its EVM reports for mainnet.
            Network::Tron => 0x2b66_53dc,
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown network {0:?}: expected BSC or TRON")]
pub struct UnknownNetwork(pub String);

impl FromStr for Network {
    type Err = UnknownNetwork;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "BSC" => Ok(Network::Bsc),
            "TRON" => Ok(Network::Tron),
            other => Err(UnknownNetwork(other.to_owned())),
        }
    }
}
