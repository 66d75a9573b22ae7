//! Addresses and hashes as they cross the ports: typed, so an adapter cannot hand the core a
//! form that silently matches nothing (a lowercase BSC address against EIP-55 wallets, a
//! `0x`-prefixed hash against bare stored ones).

use std::fmt;

use crate::address::{AddressError, BscAddress, TronAddress};
use crate::network::Network;

/// An address in its network's canonical text form (EIP-55 on BSC, base58check on TRON). It
/// is made only from a parsed address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainAddress {
    network: Network,
    text: String,
}

impl ChainAddress {
    /// Parses `s` as an address of `network` (any case a BSC address may be written in).
    pub fn parse(network: Network, s: &str) -> Result<Self, AddressError> {
        Ok(match network {
            Network::Bsc => BscAddress::parse(s)?.into(),
            Network::Tron => TronAddress::parse(s)?.into(),
        })
    }

    pub fn network(&self) -> Network {
        self.network
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn into_string(self) -> String {
        self.text
    }
}

impl From<BscAddress> for ChainAddress {
    fn from(a: BscAddress) -> Self {
        ChainAddress {
            network: Network::Bsc,
            text: a.to_string(),
        }
    }
}

impl From<TronAddress> for ChainAddress {
    fn from(a: TronAddress) -> Self {
        ChainAddress {
            network: Network::Tron,
            text: a.to_string(),
        }
    }
}

impl fmt::Display for ChainAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A transaction (or block) hash: 32 bytes. Stored as 64 lowercase hex digits without a
/// prefix; shown per decisions §10 with [`display_hash`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxHash([u8; 32]);

impl TxHash {
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        TxHash(bytes)
    }

    /// Reads 64 hex digits in any case, with or without `0x`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let body = s.strip_prefix("0x").unwrap_or(s);
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(body, &mut bytes)
            .map_err(|_| format!("{s:?} is not a 32-byte hex hash"))?;
        Ok(TxHash(bytes))
    }

    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 64 lowercase hex digits without a prefix: the stored form.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TxHash({})", self.to_hex())
    }
}

impl fmt::Display for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A stored hash (64 lowercase hex digits) as responses, events and listings show it
/// (decisions §10): `0x`-prefixed on BSC, bare on TRON.
pub fn display_hash(network: Network, stored: &str) -> String {
    match network {
        Network::Bsc if !stored.starts_with("0x") => format!("0x{stored}"),
        _ => stored.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_canonical_whatever_case_they_came_in() {
        let lower = "0x52908400098527886e0f7030069857d2e4169ee7";
        let a = ChainAddress::parse(Network::Bsc, lower).unwrap();
        assert_eq!(a.as_str(), "0x52908400098527886E0F7030069857D2E4169EE7");
        assert_eq!(
            a,
            ChainAddress::parse(Network::Bsc, &lower.to_uppercase().replace("0X", "0x")).unwrap()
        );
        assert!(
            ChainAddress::parse(Network::Bsc, "0x52908400098527886E0F7030069857D2E4169Ee7")
                .is_err()
        );
        assert!(ChainAddress::parse(Network::Tron, lower).is_err());
    }

    #[test]
    fn hashes_are_stored_bare_and_shown_per_network() {
        let h = TxHash::parse(&format!("0x{}", "AB".repeat(32))).unwrap();
        assert_eq!(h.to_hex(), "ab".repeat(32));
        assert_eq!(TxHash::parse(&"ab".repeat(32)).unwrap(), h);
        assert!(TxHash::parse("abc").is_err());
        assert_eq!(
            display_hash(Network::Bsc, &h.to_hex()),
            format!("0x{}", "ab".repeat(32))
        );
        assert_eq!(display_hash(Network::Tron, &h.to_hex()), "ab".repeat(32));
    }
}
