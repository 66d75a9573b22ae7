//! Encryption at rest: XChaCha20-Poly1305 under a 32-byte key, which comes from the operator's
//! passphrase through Argon2id. Pure functions: the caller supplies the random nonce and salt.
//!
//! Sealed layout: `version (1) ‖ nonce (24) ‖ ciphertext+tag`. The associated data binds a
//! ciphertext to its place (record id and field), so sealed values cannot be swapped.

use argon2::{Algorithm, Argon2, Params, Version};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::secret::Secret;

const SEALED_VERSION: u8 = 1;
pub const NONCE_BYTES: usize = 24;
pub const KEY_BYTES: usize = 32;
pub const SALT_BYTES: usize = 16;

/// Argon2id cost. The defaults follow the OWASP recommendation for interactive use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl Default for KdfParams {
    fn default() -> Self {
        KdfParams {
            memory_kib: 64 * 1024,
            iterations: 3,
            parallelism: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaultError {
    #[error("the key derivation parameters are not valid")]
    Params,
    #[error("the sealed value is damaged or the key is wrong")]
    Open,
    #[error("the sealed value has an unknown format")]
    Format,
}

/// The key that seals secrets at rest.
#[derive(Clone)]
pub struct SealingKey(Secret<[u8; KEY_BYTES]>);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(<redacted>)")
    }
}

impl SealingKey {
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Self {
        SealingKey(Secret::new(bytes))
    }

    /// Derives the key from a passphrase (Argon2id).
    pub fn from_passphrase(
        passphrase: &[u8],
        salt: &[u8; SALT_BYTES],
        params: KdfParams,
    ) -> Result<Self, VaultError> {
        let params = Params::new(
            params.memory_kib,
            params.iterations,
            params.parallelism,
            Some(KEY_BYTES),
        )
        .map_err(|_| VaultError::Params)?;
        let mut key = [0u8; KEY_BYTES];
        Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password_into(passphrase, salt, &mut key)
            .map_err(|_| VaultError::Params)?;
        Ok(SealingKey(Secret::new(key)))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.0.expose().into())
    }

    /// Seals `plaintext`; `nonce` must be fresh random bytes for every call.
    pub fn seal(&self, plaintext: &[u8], aad: &[u8], nonce: &[u8; NONCE_BYTES]) -> Vec<u8> {
        let ct = self
            .cipher()
            .encrypt(
                &XNonce::from(*nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .expect("XChaCha20-Poly1305 encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(1 + NONCE_BYTES + ct.len());
        out.push(SEALED_VERSION);
        out.extend_from_slice(nonce);
        out.extend_from_slice(&ct);
        out
    }

    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Secret<Vec<u8>>, VaultError> {
        if sealed.len() < 1 + NONCE_BYTES + 16 || sealed[0] != SEALED_VERSION {
            return Err(VaultError::Format);
        }
        let mut nonce = [0u8; NONCE_BYTES];
        nonce.copy_from_slice(&sealed[1..=NONCE_BYTES]);
        self.cipher()
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &sealed[1 + NONCE_BYTES..],
                    aad,
                },
            )
            .map(Secret::new)
            .map_err(|_| VaultError::Open)
    }
}

/// A secret as the store keeps it: opaque sealed bytes it can neither read nor produce. Only
/// the core's [`Vault`] seals and opens them.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed(Vec<u8>);

impl Sealed {
    /// Bytes read back from the store.
    pub fn from_stored(bytes: Vec<u8>) -> Self {
        Sealed(bytes)
    }

    /// The bytes to store.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealed({} bytes)", self.0.len())
    }
}

/// Seals and opens secrets at rest for the service: the sealing key and a source of fresh
/// nonces. The store only ever sees [`Sealed`] bytes, so a store adapter (or a database dump)
/// holds no usable secret.
pub struct Vault {
    key: SealingKey,
    entropy: std::sync::Arc<dyn crate::ports::Entropy>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault(<redacted>)")
    }
}

impl Vault {
    pub fn new(key: SealingKey, entropy: std::sync::Arc<dyn crate::ports::Entropy>) -> Self {
        Vault { key, entropy }
    }

    /// A deterministic digest of `data` that only the holder of the sealing key can compute:
    /// HMAC-SHA256 under a subkey of the sealing key (never the sealing key itself), over
    /// `purpose`, a newline and `data`. For fingerprints of requests that carry a secret: a
    /// plain hash of a guessable body with a short PIN in it could be brute-forced from a
    /// database copy.
    pub fn keyed_digest(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        type HmacSha256 = Hmac<sha2::Sha256>;
        let mut derive = <HmacSha256 as Mac>::new_from_slice(self.key.0.expose())
            .expect("HMAC takes any key length");
        derive.update(b"custody vault keyed digest v1");
        let subkey = derive.finalize().into_bytes();
        let mut mac =
            <HmacSha256 as Mac>::new_from_slice(&subkey).expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\n");
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Seals `plaintext` bound to `aad` (the record and field it belongs to).
    pub fn seal(&self, plaintext: &[u8], aad: &str) -> Sealed {
        let mut nonce = [0u8; NONCE_BYTES];
        self.entropy.fill(&mut nonce);
        Sealed(self.key.seal(plaintext, aad.as_bytes(), &nonce))
    }

    /// Opens what [`Vault::seal`] sealed with the same `aad`. A wrong key (passphrase) or a
    /// value moved to another record is a permanent port error.
    pub fn open(
        &self,
        sealed: &Sealed,
        aad: &str,
    ) -> Result<Secret<Vec<u8>>, crate::error::PortError> {
        self.key.open(&sealed.0, aad.as_bytes()).map_err(|e| {
            crate::error::PortError::permanent(
                "vault",
                format!("cannot unseal {aad}: {e} (wrong passphrase?)"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct bytes on every fill; the digests below never draw any, the vault just needs a
    /// source. (The shared test fakes live in `custody-testkit`, which the core cannot use.)
    struct CountingEntropy(std::sync::atomic::AtomicU8);

    impl crate::ports::Entropy for CountingEntropy {
        fn fill(&self, buf: &mut [u8]) {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            buf.fill(n);
        }
    }

    #[test]
    fn keyed_digests_depend_on_the_key_purpose_and_data() {
        let entropy = std::sync::Arc::new(CountingEntropy(1.into()));
        let a = Vault::new(SealingKey::from_bytes([1; KEY_BYTES]), entropy.clone());
        let b = Vault::new(SealingKey::from_bytes([2; KEY_BYTES]), entropy);
        let d = a.keyed_digest("p", b"body");
        assert_eq!(d, a.keyed_digest("p", b"body"));
        assert_ne!(d, b.keyed_digest("p", b"body"));
        assert_ne!(d, a.keyed_digest("q", b"body"));
        assert_ne!(d, a.keyed_digest("p", b"body2"));
        let plain: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(b"body").into();
        assert_ne!(d, plain);
    }

    fn cheap() -> KdfParams {
        KdfParams {
            memory_kib: 1024,
            iterations: 1,
            parallelism: 1,
        }
    }

    #[test]
    fn round_trips_and_binds_associated_data() {
        let key = SealingKey::from_passphrase(b"correct horse", &[1; 16], cheap()).unwrap();
        let sealed = key.seal(b"secret", b"credential:1:hmac", &[9; 24]);
        assert_eq!(
            key.open(&sealed, b"credential:1:hmac").unwrap().expose(),
            b"secret"
        );
        assert_eq!(
            key.open(&sealed, b"credential:2:hmac").unwrap_err(),
            VaultError::Open
        );
        let other = SealingKey::from_passphrase(b"wrong horse", &[1; 16], cheap()).unwrap();
        assert_eq!(
            other.open(&sealed, b"credential:1:hmac").unwrap_err(),
            VaultError::Open
        );
        let mut damaged = sealed.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert_eq!(
            key.open(&damaged, b"credential:1:hmac").unwrap_err(),
            VaultError::Open
        );
        assert!(!format!("{key:?}").contains('1'));
    }
}
