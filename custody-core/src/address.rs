//! Network addresses: BSC (EIP-55 hex) and TRON (base58check).
//!
//! Both networks take an address from the same 20 bytes: the last 20 bytes of the keccak-256 of
//! the 64-byte uncompressed public key (without its `0x04` prefix). BSC writes them as `0x` + 40
//! hex digits with the EIP-55 mixed-case checksum; TRON prefixes the version byte `0x41` and
//! writes the 21 bytes in base58check (`T...`). TRON nodes also answer with the hex form
//! `41...` (42 hex digits), which [`TronAddress::from_hex`] reads.

use std::fmt;
use std::str::FromStr;

use tiny_keccak::{Hasher, Keccak};

use crate::network::Network;

/// The version byte of a TRON mainnet address.
pub const TRON_ADDRESS_PREFIX: u8 = 0x41;

/// Longest text accepted by the parsers: rejects oversized input before decoding it.
const MAX_ADDRESS_TEXT: usize = 64;

/// Why a text is not an address of the expected network. Messages are safe to show a partner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("a BSC address must start with \"0x\"")]
    BscMissingPrefix,
    #[error("a BSC address must have 40 hex digits after \"0x\", got {0} characters")]
    BscLength(usize),
    #[error("a BSC address may only contain hex digits after \"0x\"")]
    BscNotHex,
    #[error("the mixed-case BSC address does not match its EIP-55 checksum")]
    BscChecksum,
    #[error("a TRON address must be at most {MAX_ADDRESS_TEXT} characters, got {0}")]
    TronTooLong(usize),
    #[error("a TRON address must be base58 text (a 'T' followed by 33 characters)")]
    TronNotBase58,
    #[error("the TRON address does not match its base58check checksum")]
    TronChecksum,
    #[error("a TRON address must decode to 21 bytes, got {0}")]
    TronLength(usize),
    #[error("a TRON address must start with the version byte 0x41, got 0x{0:02x}")]
    TronPrefix(u8),
    #[error("a hex TRON address must be 42 hex digits starting with \"41\"")]
    TronHex,
}

/// keccak-256 of `data`.
pub fn keccak256(data: &[u8]) -> [u8; 32] {
    let mut hasher = Keccak::v256();
    hasher.update(data);
    let mut out = [0u8; 32];
    hasher.finalize(&mut out);
    out
}

/// The 20 address bytes of an uncompressed secp256k1 public key (`0x04 ‖ X ‖ Y`): the last 20
/// bytes of keccak-256(X ‖ Y). The prefix byte is not checked; callers pass a key they encoded.
fn account_bytes(uncompressed_public_key: &[u8; 65]) -> [u8; 20] {
    let hash = keccak256(&uncompressed_public_key[1..]);
    let mut out = [0u8; 20];
    out.copy_from_slice(&hash[12..]);
    out
}

/// A BSC (EVM) address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BscAddress(pub [u8; 20]);

impl BscAddress {
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        BscAddress(bytes)
    }

    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// The address of an uncompressed public key (`0x04 ‖ X ‖ Y`).
    pub fn from_uncompressed_public_key(public_key: &[u8; 65]) -> Self {
        BscAddress(account_bytes(public_key))
    }

    /// Reads `0x` + 40 hex digits. All-lowercase and all-uppercase digits are accepted as they
    /// are; mixed case must match the EIP-55 checksum exactly.
    pub fn parse(s: &str) -> Result<Self, AddressError> {
        let body = s.strip_prefix("0x").ok_or(AddressError::BscMissingPrefix)?;
        if body.len() != 40 {
            return Err(AddressError::BscLength(body.len()));
        }
        if !body.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AddressError::BscNotHex);
        }
        let mut bytes = [0u8; 20];
        hex::decode_to_slice(body, &mut bytes).map_err(|_| AddressError::BscNotHex)?;
        let address = BscAddress(bytes);
        let has_lower = body.bytes().any(|b| b.is_ascii_lowercase());
        let has_upper = body.bytes().any(|b| b.is_ascii_uppercase());
        if has_lower && has_upper && address.checksummed_body() != body {
            return Err(AddressError::BscChecksum);
        }
        Ok(address)
    }

    /// `0x` + 40 lowercase hex digits (the form JSON-RPC filters and logs use).
    pub fn to_lowercase_hex(&self) -> String {
        format!("0x{}", hex::encode(self.0))
    }

    /// The 40 hex digits with EIP-55 case: a letter is uppercase when the matching nibble of
    /// keccak-256(lowercase hex) is 8 or more.
    fn checksummed_body(&self) -> String {
        let lower = hex::encode(self.0);
        let hash = keccak256(lower.as_bytes());
        lower
            .char_indices()
            .map(|(i, c)| {
                let byte = hash[i / 2];
                let nibble = if i % 2 == 0 { byte >> 4 } else { byte & 0x0f };
                if nibble >= 8 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }
}

impl fmt::Display for BscAddress {
    /// EIP-55 checksummed, `0x`-prefixed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", self.checksummed_body())
    }
}

impl fmt::Debug for BscAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BscAddress({self})")
    }
}

impl FromStr for BscAddress {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BscAddress::parse(s)
    }
}

/// A TRON address: the 20 account bytes, without the `0x41` version byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TronAddress(pub [u8; 20]);

impl TronAddress {
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        TronAddress(bytes)
    }

    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// The address of an uncompressed public key (`0x04 ‖ X ‖ Y`).
    pub fn from_uncompressed_public_key(public_key: &[u8; 65]) -> Self {
        TronAddress(account_bytes(public_key))
    }

    /// Reads the base58check text form (`T...`): 21 bytes, the first being `0x41`.
    pub fn parse(s: &str) -> Result<Self, AddressError> {
        if s.len() > MAX_ADDRESS_TEXT {
            return Err(AddressError::TronTooLong(s.len()));
        }
        let decoded = bs58::decode(s)
            .with_check(None)
            .into_vec()
            .map_err(|e| match e {
                bs58::decode::Error::InvalidChecksum { .. } => AddressError::TronChecksum,
                bs58::decode::Error::NoChecksum => AddressError::TronLength(0),
                _ => AddressError::TronNotBase58,
            })?;
        Self::from_versioned(&decoded)
    }

    /// Reads the hex form TRON nodes return: `41` + 40 hex digits (either case, no `0x`).
    pub fn from_hex(s: &str) -> Result<Self, AddressError> {
        if s.len() != 42 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AddressError::TronHex);
        }
        let mut bytes = [0u8; 21];
        hex::decode_to_slice(s, &mut bytes).map_err(|_| AddressError::TronHex)?;
        if bytes[0] != TRON_ADDRESS_PREFIX {
            return Err(AddressError::TronHex);
        }
        Self::from_versioned(&bytes)
    }

    fn from_versioned(bytes: &[u8]) -> Result<Self, AddressError> {
        if bytes.len() != 21 {
            return Err(AddressError::TronLength(bytes.len()));
        }
        if bytes[0] != TRON_ADDRESS_PREFIX {
            return Err(AddressError::TronPrefix(bytes[0]));
        }
        let mut out = [0u8; 20];
        out.copy_from_slice(&bytes[1..]);
        Ok(TronAddress(out))
    }

    /// The 21 bytes `0x41 ‖ account`.
    pub fn to_versioned_bytes(&self) -> [u8; 21] {
        let mut out = [0u8; 21];
        out[0] = TRON_ADDRESS_PREFIX;
        out[1..].copy_from_slice(&self.0);
        out
    }

    /// `41` + 40 lowercase hex digits, as TRON's HTTP API takes and returns addresses.
    pub fn to_hex41(&self) -> String {
        hex::encode(self.to_versioned_bytes())
    }
}

impl fmt::Display for TronAddress {
    /// base58check `T...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            &bs58::encode(self.to_versioned_bytes())
                .with_check()
                .into_string(),
        )
    }
}

impl fmt::Debug for TronAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TronAddress({self})")
    }
}

impl FromStr for TronAddress {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TronAddress::parse(s)
    }
}

/// Validates `s` as an address of `network` and returns its canonical text form (EIP-55 for
/// BSC, base58check for TRON), which is the form stored and compared.
pub fn parse_address(network: Network, s: &str) -> Result<String, AddressError> {
    match network {
        Network::Bsc => BscAddress::parse(s).map(|a| a.to_string()),
        Network::Tron => TronAddress::parse(s).map(|a| a.to_string()),
    }
}

/// The canonical address text of an uncompressed public key (`0x04 ‖ X ‖ Y`) on `network`.
pub fn address_of(network: Network, uncompressed_public_key: &[u8; 65]) -> String {
    match network {
        Network::Bsc => {
            BscAddress::from_uncompressed_public_key(uncompressed_public_key).to_string()
        }
        Network::Tron => {
            TronAddress::from_uncompressed_public_key(uncompressed_public_key).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The test addresses of the EIP-55 specification (all caps, all lower, normal).
    const EIP55_VECTORS: [&str; 8] = [
        "0x52908400098527886E0F7030069857D2E4169EE7",
        "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
        "0xde709f2102306220921060314715629080e2fb77",
        "0x27b1fdb04752bbc536007a920d24acb045561c26",
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ];

    // USDT's TRC-20 contract on TRON mainnet, in both forms TRON uses.
    const USDT_TRON: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
    const USDT_TRON_HEX: &str = "41a614f803b6fd780986a42c78ec9c7f77e6ded13c";

    #[test]
    fn eip55_vectors_parse_and_display_unchanged() {
        for v in &EIP55_VECTORS[4..] {
            let a = BscAddress::parse(v).unwrap();
            assert_eq!(a.to_string(), *v);
            // Lowercase and uppercase forms are accepted and display checksummed.
            let lower = format!("0x{}", v[2..].to_ascii_lowercase());
            let upper = format!("0x{}", v[2..].to_ascii_uppercase());
            assert_eq!(BscAddress::parse(&lower).unwrap(), a);
            assert_eq!(BscAddress::parse(&upper).unwrap(), a);
            assert_eq!(a.to_lowercase_hex(), lower);
        }
        // The single-case vectors are their own checksum (only digits or only one case needed).
        for v in &EIP55_VECTORS[..4] {
            let a = BscAddress::parse(v).unwrap();
            assert_eq!(a.to_string(), *v);
        }
    }

    #[test]
    fn eip55_wrong_mixed_case_is_rejected() {
        // Flip the case of one letter in a checksummed address.
        let bad = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD";
        assert_eq!(BscAddress::parse(bad), Err(AddressError::BscChecksum));
        let bad = "0x5AAEB6053f3e94c9b9a09f33669435e7ef1beaed";
        assert_eq!(BscAddress::parse(bad), Err(AddressError::BscChecksum));
    }

    #[test]
    fn bsc_malformed_inputs_are_rejected() {
        let ok = "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
        assert_eq!(BscAddress::parse(ok), Err(AddressError::BscMissingPrefix));
        assert_eq!(
            BscAddress::parse(&format!("0X{ok}")),
            Err(AddressError::BscMissingPrefix)
        );
        assert_eq!(
            BscAddress::parse(&format!("0x{ok}0")),
            Err(AddressError::BscLength(41))
        );
        assert_eq!(
            BscAddress::parse(&format!("0x{}", &ok[1..])),
            Err(AddressError::BscLength(39))
        );
        assert_eq!(BscAddress::parse("0x"), Err(AddressError::BscLength(0)));
        let not_hex = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg";
        assert_eq!(BscAddress::parse(not_hex), Err(AddressError::BscNotHex));
        // A multi-byte character must not panic the length/hex checks.
        let unicode = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1Bé";
        assert!(BscAddress::parse(unicode).is_err());
        assert_eq!(
            BscAddress::parse(&format!(" 0x{ok}")),
            Err(AddressError::BscMissingPrefix)
        );
    }

    #[test]
    fn tron_usdt_contract_base58_and_hex_agree() {
        let a = TronAddress::parse(USDT_TRON).unwrap();
        assert_eq!(a.to_hex41(), USDT_TRON_HEX);
        assert_eq!(a.to_string(), USDT_TRON);
        let b = TronAddress::from_hex(USDT_TRON_HEX).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            TronAddress::from_hex(&USDT_TRON_HEX.to_ascii_uppercase()).unwrap(),
            a
        );
        assert_eq!(format!("{a:?}"), format!("TronAddress({USDT_TRON})"));
    }

    #[test]
    fn tron_malformed_inputs_are_rejected() {
        // One character changed: the checksum no longer matches.
        assert_eq!(
            TronAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u"),
            Err(AddressError::TronChecksum)
        );
        // '0', 'O', 'I' and 'l' are not base58.
        assert_eq!(
            TronAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj60"),
            Err(AddressError::TronNotBase58)
        );
        assert!(TronAddress::parse("").is_err());
        assert_eq!(
            TronAddress::parse(&"T".repeat(65)),
            Err(AddressError::TronTooLong(65))
        );
        // Valid base58check of 21 bytes with another version byte.
        let mut other = [0u8; 21];
        other[0] = 0x00;
        let text = bs58::encode(other).with_check().into_string();
        assert_eq!(TronAddress::parse(&text), Err(AddressError::TronPrefix(0)));
        // Valid base58check of the wrong length.
        let text = bs58::encode([0x41u8; 20]).with_check().into_string();
        assert_eq!(TronAddress::parse(&text), Err(AddressError::TronLength(20)));
        // A BSC address is not a TRON address.
        assert!(TronAddress::parse("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed").is_err());
        // Hex form: wrong prefix, wrong length, 0x prefix, non-hex.
        assert_eq!(
            TronAddress::from_hex("42a614f803b6fd780986a42c78ec9c7f77e6ded13c"),
            Err(AddressError::TronHex)
        );
        assert_eq!(
            TronAddress::from_hex(&USDT_TRON_HEX[..40]),
            Err(AddressError::TronHex)
        );
        assert_eq!(
            TronAddress::from_hex(&format!("0x{USDT_TRON_HEX}")),
            Err(AddressError::TronHex)
        );
        assert_eq!(
            TronAddress::from_hex("41a614f803b6fd780986a42c78ec9c7f77e6ded13g"),
            Err(AddressError::TronHex)
        );
    }

    #[test]
    fn parse_address_returns_canonical_text() {
        let lower = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed";
        assert_eq!(
            parse_address(Network::Bsc, lower).unwrap(),
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
        );
        assert_eq!(parse_address(Network::Tron, USDT_TRON).unwrap(), USDT_TRON);
        assert!(parse_address(Network::Tron, lower).is_err());
        assert!(parse_address(Network::Bsc, USDT_TRON).is_err());
    }

    #[test]
    fn address_of_public_key_uses_keccak_of_xy() {
        // The uncompressed public key of the secp256k1 private key 1 is the generator G; its
        // Ethereum address is the widely published 0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf.
        let g = hex::decode(
            "0479be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798\
             483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8",
        )
        .unwrap();
        let g: [u8; 65] = g.try_into().unwrap();
        assert_eq!(
            address_of(Network::Bsc, &g),
            "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf"
        );
        let tron = TronAddress::from_uncompressed_public_key(&g);
        assert_eq!(
            tron.as_bytes(),
            BscAddress::from_uncompressed_public_key(&g).as_bytes()
        );
        assert_eq!(address_of(Network::Tron, &g), tron.to_string());
    }
}
