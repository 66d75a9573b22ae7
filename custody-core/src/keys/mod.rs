//! HD keys: BIP39 mnemonic, BIP32/BIP44 derivation and the in-memory signer.
//!
//! - [`Mnemonic`] and [`MasterSeed`]: the BIP39 phrase and the 64-byte seed it stretches to.
//! - [`HdKeys`]: the master key plus a cache of the external-chain keys
//!   `m/44'/{coin}'/{account}'/0`, so a new address or signature costs one child derivation.
//! - [`derive_address`]: a deposit address from an external-chain public key, without any
//!   private key (one non-hardened public derivation).
//! - [`HdSigner`]: the [`Signer`](crate::ports::signer::Signer) port over [`HdKeys`];
//!   [`SeedSet`]: the same over every seed generation (a wallet migration to a new seed).
//!
//! Key material lives in [`Secret`](crate::secret::Secret) or in `k256` keys that zero
//! themselves on drop; no `Debug` and no error message here ever contains it.

mod hd;
mod mnemonic;
mod seeds;
mod signer;

pub use hd::{derive_address, HdKeys};
pub use mnemonic::{MasterSeed, Mnemonic};
pub use seeds::SeedSet;
pub use signer::HdSigner;

use crate::error::PortError;

/// A failure to read a mnemonic or to derive or use a key. Messages never contain key material
/// (not even a mnemonic word: a wrong word is reported by its position).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("a mnemonic must have 12, 15, 18, 21 or 24 words, got {0}")]
    MnemonicWordCount(usize),
    #[error("mnemonic word #{position} is not in the BIP39 English word list")]
    MnemonicUnknownWord { position: usize },
    #[error("the mnemonic checksum does not match (a word is wrong or out of order)")]
    MnemonicChecksum,
    #[error("a BIP32 seed must be 16, 32 or 64 bytes, got {0}")]
    SeedLength(usize),
    #[error("{what} {value} is out of range: the largest is 2^31 - 1")]
    ComponentOutOfRange { what: &'static str, value: u32 },
    #[error("the extended public key is not a valid compressed secp256k1 point")]
    InvalidPublicKey,
    #[error("key derivation failed: {0}")]
    Derivation(String),
    #[error("signing failed: {0}")]
    Signing(&'static str),
}

impl From<bip32::Error> for KeyError {
    fn from(e: bip32::Error) -> Self {
        // bip32's messages are fixed texts ("cryptographic error", ...), never key bytes.
        KeyError::Derivation(e.to_string())
    }
}

impl From<KeyError> for PortError {
    /// Every key error is permanent: retrying the same input gives the same answer.
    fn from(e: KeyError) -> Self {
        PortError::permanent("signer", e.to_string())
    }
}
