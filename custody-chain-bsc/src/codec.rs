//! Reading the JSON-RPC wire forms: quantities (`0x`-prefixed big-endian hex without leading
//! zeros), fixed-length data (hashes, addresses, 32-byte words) and the ABI words of
//! `Transfer` logs and `balanceOf` calls. Every reader is strict about length and alphabet;
//! whatever does not fit is a malformed answer.

use custody_core::address::BscAddress;
use serde_json::Value;

/// `keccak256("Transfer(address,address,uint256)")`, topic 0 of ERC-20/BEP-20 transfers.
pub const TRANSFER_TOPIC: &str =
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// Selector of `balanceOf(address)`.
pub const BALANCE_OF_SELECTOR: &str = "70a08231";

/// Longest quantity accepted: 256 bits.
const QUANTITY_HEX_DIGITS_MAX: usize = 64;

/// The `0x` + hex body of a JSON string, or why not.
fn hex_body(v: &Value) -> Result<&str, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("expected a hex string, got {}", kind(v)))?;
    let body = s
        .strip_prefix("0x")
        .ok_or_else(|| format!("hex string without 0x: {}", short(s)))?;
    if !body.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("not hex: {}", short(s)));
    }
    Ok(body)
}

/// A quantity up to 256 bits, as a u128 when it fits (`Ok(None)` when it does not).
pub fn quantity_u128_opt(v: &Value) -> Result<Option<u128>, String> {
    let body = hex_body(v)?;
    if body.is_empty() || body.len() > QUANTITY_HEX_DIGITS_MAX {
        return Err(format!("quantity of {} hex digits", body.len()));
    }
    let significant = body.trim_start_matches('0');
    if significant.len() > 32 {
        return Ok(None);
    }
    if significant.is_empty() {
        return Ok(Some(0));
    }
    u128::from_str_radix(significant, 16)
        .map(Some)
        .map_err(|e| format!("quantity {}: {e}", short(body)))
}

pub fn quantity_u64(v: &Value) -> Result<u64, String> {
    let value = quantity_u128_opt(v)?.ok_or("quantity above 128 bits")?;
    u64::try_from(value).map_err(|_| format!("quantity {value} does not fit in 64 bits"))
}

/// A 32-byte hash as 64 lowercase hex digits without `0x` (the port's form).
pub fn hash(v: &Value) -> Result<String, String> {
    let body = hex_body(v)?;
    if body.len() != 64 {
        return Err(format!("hash of {} hex digits", body.len()));
    }
    Ok(body.to_ascii_lowercase())
}

/// A 20-byte address (any case; the node writes lowercase).
pub fn address(v: &Value) -> Result<BscAddress, String> {
    let body = hex_body(v)?;
    let mut bytes = [0u8; 20];
    hex::decode_to_slice(body, &mut bytes)
        .map_err(|_| format!("address of {} hex digits", body.len()))?;
    Ok(BscAddress::from_bytes(bytes))
}

/// Fixed-length data: `0x` + exactly `2 * len` hex digits.
pub fn data(v: &Value) -> Result<Vec<u8>, String> {
    let body = hex_body(v)?;
    hex::decode(body).map_err(|_| format!("odd-length data: {}", short(body)))
}

/// An address from a 32-byte ABI word: twelve zero bytes, then the address.
pub fn word_address(word: &[u8]) -> Result<BscAddress, String> {
    if word.len() != 32 || word[..12].iter().any(|b| *b != 0) {
        return Err("an address word must be 12 zero bytes and 20 address bytes".into());
    }
    let mut bytes = [0u8; 20];
    bytes.copy_from_slice(&word[12..]);
    Ok(BscAddress::from_bytes(bytes))
}

/// A uint256 from a 32-byte ABI word, as a u128 when it fits (`Ok(None)` when it does not).
pub fn word_u128_opt(word: &[u8]) -> Result<Option<u128>, String> {
    if word.len() != 32 {
        return Err(format!(
            "a uint256 word must be 32 bytes, got {}",
            word.len()
        ));
    }
    if word[..16].iter().any(|b| *b != 0) {
        return Ok(None);
    }
    let mut low = [0u8; 16];
    low.copy_from_slice(&word[16..]);
    Ok(Some(u128::from_be_bytes(low)))
}

/// `0x` + hex of `n`, the JSON-RPC form of a block number.
pub fn quantity_hex(n: u64) -> String {
    format!("{n:#x}")
}

/// Calldata of `balanceOf(owner)`.
pub fn balance_of_call(owner: &BscAddress) -> String {
    format!(
        "0x{BALANCE_OF_SELECTOR}{:0>64}",
        hex::encode(owner.as_bytes())
    )
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// At most 80 characters of a node's text, for error messages.
fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities() {
        assert_eq!(quantity_u64(&json!("0x0")), Ok(0));
        assert_eq!(quantity_u64(&json!("0x38")), Ok(56));
        assert_eq!(quantity_u64(&json!("0xffffffffffffffff")), Ok(u64::MAX));
        assert!(quantity_u64(&json!("0x10000000000000000")).is_err());
        assert!(quantity_u64(&json!("56")).is_err());
        assert!(quantity_u64(&json!("0x")).is_err());
        assert!(quantity_u64(&json!("0xg1")).is_err());
        assert!(quantity_u64(&json!(56)).is_err());
        assert_eq!(
            quantity_u128_opt(&json!(format!("0x{}", "f".repeat(32)))),
            Ok(Some(u128::MAX))
        );
        assert_eq!(
            quantity_u128_opt(&json!(format!("0x1{}", "0".repeat(32)))),
            Ok(None)
        );
        assert!(quantity_u128_opt(&json!(format!("0x{}", "1".repeat(65)))).is_err());
    }

    #[test]
    fn hashes_addresses_and_words() {
        let h = format!("0x{}", "AB".repeat(32));
        assert_eq!(hash(&json!(h)).unwrap(), "ab".repeat(32));
        assert!(hash(&json!("0xabcd")).is_err());

        let a = address(&json!("0x55d398326f99059ff775485246999027b3197955")).unwrap();
        assert_eq!(a.to_string(), "0x55d398326f99059fF775485246999027B3197955");
        assert!(address(&json!("0x55d3")).is_err());

        let mut word = [0u8; 32];
        word[12..].copy_from_slice(a.as_bytes());
        assert_eq!(word_address(&word).unwrap(), a);
        word[0] = 1;
        assert!(word_address(&word).is_err());

        let mut amount = [0u8; 32];
        amount[31] = 7;
        assert_eq!(word_u128_opt(&amount), Ok(Some(7)));
        amount[15] = 1;
        assert_eq!(word_u128_opt(&amount), Ok(None));
        assert!(word_u128_opt(&amount[1..]).is_err());
    }

    #[test]
    fn calldata() {
        let owner = address(&json!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")).unwrap();
        assert_eq!(
            balance_of_call(&owner),
            "0x70a0823100000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8"
        );
        assert_eq!(quantity_hex(0), "0x0");
        assert_eq!(quantity_hex(255), "0xff");
    }
}
