//! Signing. One primitive, `sign_digest`, plus the account-level public key from which the core
//! derives deposit addresses without touching private keys.

use crate::error::PortError;
use crate::network::Network;

/// A BIP44 path `m/44'/{coin}'/{account}'/0/{index}`; `coin` follows from the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HdPath {
    pub network: Network,
    pub account: u32,
    pub index: u32,
}

impl HdPath {
    /// The largest account or index: both are below the hardened offset 2^31.
    pub const COMPONENT_MAX: u32 = (1 << 31) - 1;

    pub fn render(&self) -> String {
        format!(
            "m/44'/{}'/{}'/0/{}",
            self.network.coin_type(),
            self.account,
            self.index
        )
    }
}

/// A secp256k1 signature with its recovery id, as EVM and TRON transactions carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoverableSignature {
    pub r: [u8; 32],
    pub s: [u8; 32],
    /// 0 or 1 (the parity of R's y coordinate). `s` is always low (EIP-2).
    pub recovery_id: u8,
}

impl RecoverableSignature {
    /// `r ‖ s ‖ v` with `v = recovery_id` (TRON's layout; EVM adapters add their own offset).
    pub fn to_rsv(&self) -> [u8; 65] {
        let mut out = [0u8; 65];
        out[..32].copy_from_slice(&self.r);
        out[32..64].copy_from_slice(&self.s);
        out[64] = self.recovery_id;
        out
    }
}

/// Holds the master seed and signs with keys derived from it.
///
/// An implementation:
/// - MUST keep key material out of every `Debug`, `Display`, log line and error message.
/// - MUST sign deterministically (RFC 6979) with a low `s`, so a retried signing of the same
///   digest yields the same signature and a rebroadcast is the same transaction.
/// - MUST NOT sign anything other than the 32-byte digest it is given; hashing the transaction
///   is the chain adapter's job, which keeps one primitive for every chain.
/// - MAY cache account-level keys; deriving a new address must not walk from the root.
///
/// Both calls are synchronous and fast (in-memory keys). A remote signer adapter must keep
/// `account_public_key` answerable from a local cache, because the core calls it inside a
/// store transaction when it allocates a new account.
pub trait Signer: Send + Sync {
    /// The extended public key of the external chain `m/44'/{coin}'/{account}'/0` as (33-byte
    /// compressed public key, 32-byte chain code). The core derives `/{index}` from it with one
    /// public (non-hardened) child derivation.
    fn external_chain_public_key(
        &self,
        network: Network,
        account: u32,
    ) -> Result<([u8; 33], [u8; 32]), PortError>;

    /// Signs a 32-byte digest with the private key at `path`.
    fn sign_digest(
        &self,
        path: &HdPath,
        digest: &[u8; 32],
    ) -> Result<RecoverableSignature, PortError>;

    /// The seed generation this signer derives `account` from (`crate::wallet::seeds`): 0, the
    /// master seed, for a signer holding one seed. The core compares it with the store's
    /// before deriving an address, so that a process started before a seed was imported never
    /// hands out an address of the wrong seed.
    fn seed_generation(&self, account: u32) -> u32 {
        let _ = account;
        0
    }
}
