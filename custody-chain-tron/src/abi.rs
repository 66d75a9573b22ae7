//! The few pieces of the Solidity ABI a TRC20 adapter needs: 32-byte words, the `transfer` and
//! `balanceOf` call data, and the `Transfer` event.
//!
//! TRON's virtual machine is the EVM's ABI with 20-byte addresses: an address argument or an
//! indexed address topic is the 20 account bytes (without TRON's `0x41` version byte),
//! left-padded with zeros to 32 bytes (developers.tron.network, "Parameter and return value
//! encoding and decoding"; the log `address` of `gettransactioninfobyid` is likewise "a hex
//! format address without the prefix 0x41").

use custody_core::address::TronAddress;

/// keccak-256("transfer(address,uint256)")[..4].
pub const SELECTOR_TRANSFER: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];
/// keccak-256("transferFrom(address,address,uint256)")[..4].
pub const SELECTOR_TRANSFER_FROM: [u8; 4] = [0x23, 0xb8, 0x72, 0xdd];
/// keccak-256("balanceOf(address)")[..4].
pub const SELECTOR_BALANCE_OF: [u8; 4] = [0x70, 0xa0, 0x82, 0x31];
/// keccak-256("Transfer(address,address,uint256)"): topic 0 of a TRC20 `Transfer` log.
pub const TOPIC_TRANSFER: [u8; 32] = [
    0xdd, 0xf2, 0x52, 0xad, 0x1b, 0xe2, 0xc8, 0x9b, 0x69, 0xc2, 0xb0, 0x68, 0xfc, 0x37, 0x8d, 0xaa,
    0x95, 0x2b, 0xa7, 0xf1, 0x63, 0xc4, 0xa1, 0x16, 0x28, 0xf5, 0x5a, 0x4d, 0xf5, 0x23, 0xb3, 0xef,
];

/// An address argument: 12 zero bytes then the 20 account bytes.
pub fn address_word(address: &TronAddress) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[12..].copy_from_slice(address.as_bytes());
    word
}

/// A `uint256` argument holding `value`.
pub fn uint_word(value: u128) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[16..].copy_from_slice(&value.to_be_bytes());
    word
}

/// The address in an address word, or `None` when the 12 padding bytes are not zero.
pub fn word_address(word: &[u8; 32]) -> Option<TronAddress> {
    if word[..12].iter().any(|b| *b != 0) {
        return None;
    }
    let mut bytes = [0u8; 20];
    bytes.copy_from_slice(&word[12..]);
    Some(TronAddress::from_bytes(bytes))
}

/// The value of a `uint256` word, or `None` when it does not fit in 128 bits.
pub fn word_u128(word: &[u8; 32]) -> Option<u128> {
    if word[..16].iter().any(|b| *b != 0) {
        return None;
    }
    let mut low = [0u8; 16];
    low.copy_from_slice(&word[16..]);
    Some(u128::from_be_bytes(low))
}

/// Reads a 64-hex-digit word (either case, an optional `0x`).
pub fn hex_word(s: &str) -> Option<[u8; 32]> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    let mut word = [0u8; 32];
    hex::decode_to_slice(s, &mut word).ok()?;
    Some(word)
}

/// Call data of `transfer(to, amount)`: 4 + 32 + 32 bytes.
pub fn transfer_call_data(to: &TronAddress, amount: u128) -> Vec<u8> {
    let mut data = Vec::with_capacity(68);
    data.extend_from_slice(&SELECTOR_TRANSFER);
    data.extend_from_slice(&address_word(to));
    data.extend_from_slice(&uint_word(amount));
    data
}

/// The `parameter` of `triggerconstantcontract` for `balanceOf(holder)`: one address word.
pub fn balance_of_parameter(holder: &TronAddress) -> [u8; 32] {
    address_word(holder)
}

/// A token movement decoded from top-level call data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedCall {
    /// `Some` for `transferFrom(from, ..)`; `None` for `transfer`, whose sender is the caller.
    pub from: Option<TronAddress>,
    pub to: TronAddress,
    pub amount: u128,
}

/// Decodes `transfer(address,uint256)` or `transferFrom(address,address,uint256)` call data.
/// `None` for any other call, for malformed arguments and for amounts above 128 bits.
pub fn decode_transfer_call(data: &[u8]) -> Option<DecodedCall> {
    let (selector, args) = data.split_first_chunk::<4>()?;
    let word = |i: usize| -> Option<[u8; 32]> {
        let slice = args.get(i * 32..(i + 1) * 32)?;
        let mut w = [0u8; 32];
        w.copy_from_slice(slice);
        Some(w)
    };
    match *selector {
        SELECTOR_TRANSFER => Some(DecodedCall {
            from: None,
            to: word_address(&word(0)?)?,
            amount: word_u128(&word(1)?)?,
        }),
        SELECTOR_TRANSFER_FROM => Some(DecodedCall {
            from: Some(word_address(&word(0)?)?),
            to: word_address(&word(1)?)?,
            amount: word_u128(&word(2)?)?,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use tiny_keccak::{Hasher, Keccak};

    use super::*;

    fn keccak(text: &str) -> [u8; 32] {
        let mut k = Keccak::v256();
        k.update(text.as_bytes());
        let mut out = [0u8; 32];
        k.finalize(&mut out);
        out
    }

    #[test]
    fn selectors_and_topic_are_the_keccak_of_their_signatures() {
        assert_eq!(
            SELECTOR_TRANSFER[..],
            keccak("transfer(address,uint256)")[..4]
        );
        assert_eq!(
            SELECTOR_TRANSFER_FROM[..],
            keccak("transferFrom(address,address,uint256)")[..4]
        );
        assert_eq!(SELECTOR_BALANCE_OF[..], keccak("balanceOf(address)")[..4]);
        assert_eq!(TOPIC_TRANSFER, keccak("Transfer(address,address,uint256)"));
    }

    #[test]
    fn words_round_trip_and_reject_dirty_padding() {
        let a = TronAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").unwrap();
        let w = address_word(&a);
        assert_eq!(
            hex::encode(w),
            "000000000000000000000000a614f803b6fd780986a42c78ec9c7f77e6ded13c"
        );
        assert_eq!(word_address(&w), Some(a));
        let mut dirty = w;
        dirty[0] = 1;
        assert_eq!(word_address(&dirty), None);

        assert_eq!(word_u128(&uint_word(u128::MAX)), Some(u128::MAX));
        let mut big = uint_word(1);
        big[15] = 1;
        assert_eq!(word_u128(&big), None);
        assert_eq!(hex_word(&format!("0x{}", hex::encode(w))), Some(w));
        assert_eq!(hex_word("00"), None);
    }

    #[test]
    fn transfer_call_data_decodes_back() {
        let to = TronAddress::from_bytes([7; 20]);
        let data = transfer_call_data(&to, 1_500_000);
        assert_eq!(data.len(), 68);
        assert_eq!(
            decode_transfer_call(&data),
            Some(DecodedCall {
                from: None,
                to,
                amount: 1_500_000
            })
        );
        let from = TronAddress::from_bytes([9; 20]);
        let mut tf = SELECTOR_TRANSFER_FROM.to_vec();
        tf.extend_from_slice(&address_word(&from));
        tf.extend_from_slice(&address_word(&to));
        tf.extend_from_slice(&uint_word(5));
        assert_eq!(
            decode_transfer_call(&tf),
            Some(DecodedCall {
                from: Some(from),
                to,
                amount: 5
            })
        );
        assert_eq!(decode_transfer_call(&data[..40]), None);
        assert_eq!(decode_transfer_call(&SELECTOR_BALANCE_OF), None);
        assert_eq!(decode_transfer_call(&[]), None);
    }
}
