//! BIP32/BIP44 derivation with a per-account cache, and public-only address derivation.
//!
//! Paths are `m/44'/{coin}'/{account}'/0/{index}`. The external-chain key
//! `m/44'/{coin}'/{account}'/0` is derived once from the master key and cached; a new address
//! then costs one non-hardened public derivation ([`derive_address`]) and a signature one
//! private child derivation.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bip32::{ChildNumber, ExtendedKeyAttrs, XPrv, XPub};
use k256::ecdsa::{SigningKey, VerifyingKey};

use super::{KeyError, MasterSeed, Mnemonic};
use crate::address::address_of;
use crate::network::Network;
use crate::ports::signer::{HdPath, RecoverableSignature};

const BIP44_PURPOSE: u32 = 44;
const EXTERNAL_CHAIN: u32 = 0;
/// Depth of `m/44'/{coin}'/{account}'/0`.
const EXTERNAL_CHAIN_DEPTH: u8 = 4;

fn check_component(what: &'static str, value: u32) -> Result<(), KeyError> {
    if value > HdPath::COMPONENT_MAX {
        return Err(KeyError::ComponentOutOfRange { what, value });
    }
    Ok(())
}

fn hardened(index: u32) -> Result<ChildNumber, KeyError> {
    Ok(ChildNumber::new(index, true)?)
}

fn normal(index: u32) -> Result<ChildNumber, KeyError> {
    Ok(ChildNumber::new(index, false)?)
}

/// `0x04 ‖ X ‖ Y`.
fn uncompressed(key: &VerifyingKey) -> [u8; 65] {
    let point = key.to_encoded_point(false);
    let mut out = [0u8; 65];
    out.copy_from_slice(point.as_bytes());
    out
}

/// The deposit address `{index}` under an external-chain extended public key, with ONE
/// non-hardened public child derivation (BIP32 CKDpub); no private key is involved.
///
/// Returns the canonical address text of `network` and the child's uncompressed public key.
pub fn derive_address(
    network: Network,
    external_chain_pubkey: &[u8; 33],
    chain_code: &[u8; 32],
    index: u32,
) -> Result<(String, [u8; 65]), KeyError> {
    check_component("index", index)?;
    let parent = VerifyingKey::from_sec1_bytes(external_chain_pubkey)
        .map_err(|_| KeyError::InvalidPublicKey)?;
    // Depth, parent fingerprint and child number do not enter CKDpub; they are filled in for
    // the record only.
    let attrs = ExtendedKeyAttrs {
        depth: EXTERNAL_CHAIN_DEPTH,
        parent_fingerprint: [0; 4],
        child_number: ChildNumber(EXTERNAL_CHAIN),
        chain_code: *chain_code,
    };
    let child = XPub::new(parent, attrs).derive_child(normal(index)?)?;
    let public_key = uncompressed(child.public_key());
    Ok((address_of(network, &public_key), public_key))
}

/// The cached external-chain key of one (network, account).
struct ExternalChainKey {
    xprv: XPrv,
    public_key: [u8; 33],
    chain_code: [u8; 32],
}

/// The master key and a cache of external-chain keys `m/44'/{coin}'/{account}'/0`.
///
/// Built once from the seed. Thread-safe: the cache sits behind a mutex that is held only to
/// look up or insert (derivation runs outside it). Private keys are `k256` keys, zeroed on drop.
pub struct HdKeys {
    master: XPrv,
    accounts: Mutex<HashMap<(Network, u32), Arc<ExternalChainKey>>>,
}

impl HdKeys {
    pub fn from_seed(seed: &MasterSeed) -> Result<Self, KeyError> {
        Self::from_seed_bytes(seed.expose())
    }

    /// Stretches the mnemonic (PBKDF2, ~2048 HMAC rounds) and builds the keys.
    pub fn from_mnemonic(mnemonic: &Mnemonic) -> Result<Self, KeyError> {
        Self::from_seed(&mnemonic.to_seed())
    }

    /// From a raw BIP32 seed of 16, 32 or 64 bytes (BIP39 seeds are 64).
    pub fn from_seed_bytes(seed: &[u8]) -> Result<Self, KeyError> {
        if ![16, 32, 64].contains(&seed.len()) {
            return Err(KeyError::SeedLength(seed.len()));
        }
        Ok(HdKeys {
            master: XPrv::new(seed)?,
            accounts: Mutex::new(HashMap::new()),
        })
    }

    /// (33-byte compressed public key, 32-byte chain code) of `m/44'/{coin}'/{account}'/0`.
    pub fn external_chain_public_key(
        &self,
        network: Network,
        account: u32,
    ) -> Result<([u8; 33], [u8; 32]), KeyError> {
        let key = self.external_chain(network, account)?;
        Ok((key.public_key, key.chain_code))
    }

    /// Address and uncompressed public key of `path`, through the cached external-chain key.
    pub fn address(&self, path: &HdPath) -> Result<(String, [u8; 65]), KeyError> {
        check_component("index", path.index)?;
        let key = self.external_chain(path.network, path.account)?;
        derive_address(path.network, &key.public_key, &key.chain_code, path.index)
    }

    /// Address and uncompressed public key of `path`, walking all five levels from the master
    /// key and bypassing the cache. Slow; for audits, recovery tools and benchmarks.
    pub fn address_from_root(&self, path: &HdPath) -> Result<(String, [u8; 65]), KeyError> {
        let key = self.walk_from_root(path)?;
        let public_key = uncompressed(key.private_key().verifying_key());
        Ok((address_of(path.network, &public_key), public_key))
    }

    /// Signs a 32-byte prehash with the key at `path`: RFC 6979 deterministic ECDSA, low `s`,
    /// recovery id 0 or 1.
    pub fn sign_digest(
        &self,
        path: &HdPath,
        digest: &[u8; 32],
    ) -> Result<RecoverableSignature, KeyError> {
        check_component("index", path.index)?;
        let account = self.external_chain(path.network, path.account)?;
        let child = account.xprv.derive_child(normal(path.index)?)?;
        sign_prehash(child.private_key(), digest)
    }

    /// How many (network, account) external-chain keys are cached.
    pub fn cached_accounts(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(Network, u32), Arc<ExternalChainKey>>> {
        // The map is only ever inserted into whole entries, so a poisoned lock is still sound.
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn external_chain(
        &self,
        network: Network,
        account: u32,
    ) -> Result<Arc<ExternalChainKey>, KeyError> {
        check_component("account", account)?;
        if let Some(key) = self.lock().get(&(network, account)) {
            return Ok(Arc::clone(key));
        }
        let xprv = self
            .master
            .derive_child(hardened(BIP44_PURPOSE)?)?
            .derive_child(hardened(network.coin_type())?)?
            .derive_child(hardened(account)?)?
            .derive_child(normal(EXTERNAL_CHAIN)?)?;
        let public_key = xprv.public_key().to_bytes();
        let chain_code = xprv.attrs().chain_code;
        let key = Arc::new(ExternalChainKey {
            xprv,
            public_key,
            chain_code,
        });
        // Another thread may have derived the same key meanwhile; keep whichever came first.
        Ok(Arc::clone(
            self.lock().entry((network, account)).or_insert(key),
        ))
    }

    fn walk_from_root(&self, path: &HdPath) -> Result<XPrv, KeyError> {
        check_component("account", path.account)?;
        check_component("index", path.index)?;
        Ok(self
            .master
            .derive_child(hardened(BIP44_PURPOSE)?)?
            .derive_child(hardened(path.network.coin_type())?)?
            .derive_child(hardened(path.account)?)?
            .derive_child(normal(EXTERNAL_CHAIN)?)?
            .derive_child(normal(path.index)?)?)
    }
}

impl fmt::Debug for HdKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HdKeys(<redacted>)")
    }
}

/// RFC 6979 deterministic ECDSA over a prehash, normalized to low `s` (EIP-2). Normalizing
/// negates `s`, which mirrors R: the recovery id's parity flips with it.
fn sign_prehash(key: &SigningKey, digest: &[u8; 32]) -> Result<RecoverableSignature, KeyError> {
    let (signature, recovery_id) = key
        .sign_prehash_recoverable(digest)
        .map_err(|_| KeyError::Signing("the digest could not be signed"))?;
    // k256 already returns a low `s`; normalizing again is a no-op kept as a guarantee.
    let (signature, recovery_id) = match signature.normalize_s() {
        Some(low) => (low, recovery_id.to_byte() ^ 1),
        None => (signature, recovery_id.to_byte()),
    };
    if recovery_id > 1 {
        // Only when r overflowed the group order (probability ~2^-128).
        return Err(KeyError::Signing("the recovery id is not 0 or 1"));
    }
    let bytes = signature.to_bytes();
    let mut r = [0u8; 32];
    let mut s = [0u8; 32];
    r.copy_from_slice(&bytes[..32]);
    s.copy_from_slice(&bytes[32..]);
    Ok(RecoverableSignature { r, s, recovery_id })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use bip32::Prefix;
    use k256::ecdsa::signature::hazmat::PrehashVerifier;
    use k256::ecdsa::{RecoveryId, Signature};

    use super::*;

    const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                              abandon abandon abandon about";

    fn abandon_keys() -> HdKeys {
        HdKeys::from_mnemonic(&Mnemonic::parse(ABANDON_12).unwrap()).unwrap()
    }

    fn path(network: Network, account: u32, index: u32) -> HdPath {
        HdPath {
            network,
            account,
            index,
        }
    }

    /// One step of a BIP32 test vector: the child derived from the previous step (None for the
    /// master key), then the expected xpub and xprv.
    type Step = (Option<(u32, bool)>, &'static str, &'static str);

    /// Checks a BIP32 test vector: master key from the seed through `HdKeys`, each child level
    /// through the bip32 crate, and every non-hardened step also through our public-only
    /// `derive_address` against the public key of the published xpub.
    fn check_bip32_vector(seed_hex: &str, steps: &[Step]) {
        let keys = HdKeys::from_seed_bytes(&hex::decode(seed_hex).unwrap()).unwrap();
        let mut key = keys.master.clone();
        for (child, xpub, xprv) in steps {
            if let Some((index, is_hardened)) = *child {
                let parent_pub = key.public_key();
                key = key
                    .derive_child(ChildNumber::new(index, is_hardened).unwrap())
                    .unwrap();
                if !is_hardened {
                    let (_, derived) = derive_address(
                        Network::Bsc,
                        &parent_pub.to_bytes(),
                        &parent_pub.attrs().chain_code,
                        index,
                    )
                    .unwrap();
                    let expected = XPub::from_str(xpub).unwrap();
                    assert_eq!(derived, uncompressed(expected.public_key()), "{xpub}");
                }
            }
            assert_eq!(key.to_string(Prefix::XPRV).as_str(), *xprv);
            assert_eq!(key.public_key().to_string(Prefix::XPUB), *xpub);
        }
    }

    #[test]
    fn bip32_test_vector_1() {
        check_bip32_vector(
            "000102030405060708090a0b0c0d0e0f",
            &[
                (
                    None,
                    "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8",
                    "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi",
                ),
                (
                    Some((0, true)),
                    "xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp1bgwQ9xv5ski8PX9rL2dZXvgGDnw",
                    "xprv9uHRZZhk6KAJC1avXpDAp4MDc3sQKNxDiPvvkX8Br5ngLNv1TxvUxt4cV1rGL5hj6KCesnDYUhd7oWgT11eZG7XnxHrnYeSvkzY7d2bhkJ7",
                ),
                (
                    Some((1, false)),
                    "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ",
                    "xprv9wTYmMFdV23N2TdNG573QoEsfRrWKQgWeibmLntzniatZvR9BmLnvSxqu53Kw1UmYPxLgboyZQaXwTCg8MSY3H2EU4pWcQDnRnrVA1xe8fs",
                ),
                (
                    Some((2, true)),
                    "xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5",
                    "xprv9z4pot5VBttmtdRTWfWQmoH1taj2axGVzFqSb8C9xaxKymcFzXBDptWmT7FwuEzG3ryjH4ktypQSAewRiNMjANTtpgP4mLTj34bhnZX7UiM",
                ),
                (
                    Some((2, false)),
                    "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV",
                    "xprvA2JDeKCSNNZky6uBCviVfJSKyQ1mDYahRjijr5idH2WwLsEd4Hsb2Tyh8RfQMuPh7f7RtyzTtdrbdqqsunu5Mm3wDvUAKRHSC34sJ7in334",
                ),
                (
                    Some((1_000_000_000, false)),
                    "xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy",
                    "xprvA41z7zogVVwxVSgdKUHDy1SKmdb533PjDz7J6N6mV6uS3ze1ai8FHa8kmHScGpWmj4WggLyQjgPie1rFSruoUihUZREPSL39UNdE3BBDu76",
                ),
            ],
        );
    }

    #[test]
    fn bip32_test_vector_2() {
        check_bip32_vector(
            "fffcf9f6f3f0edeae7e4e1dedbd8d5d2cfccc9c6c3c0bdbab7b4b1aeaba8a5a2\
             9f9c999693908d8a8784817e7b7875726f6c696663605d5a5754514e4b484542",
            &[
                (
                    None,
                    "xpub661MyMwAqRbcFW31YEwpkMuc5THy2PSt5bDMsktWQcFF8syAmRUapSCGu8ED9W6oDMSgv6Zz8idoc4a6mr8BDzTJY47LJhkJ8UB7WEGuduB",
                    "xprv9s21ZrQH143K31xYSDQpPDxsXRTUcvj2iNHm5NUtrGiGG5e2DtALGdso3pGz6ssrdK4PFmM8NSpSBHNqPqm55Qn3LqFtT2emdEXVYsCzC2U",
                ),
                (
                    Some((0, false)),
                    "xpub69H7F5d8KSRgmmdJg2KhpAK8SR3DjMwAdkxj3ZuxV27CprR9LgpeyGmXUbC6wb7ERfvrnKZjXoUmmDznezpbZb7ap6r1D3tgFxHmwMkQTPH",
                    "xprv9vHkqa6EV4sPZHYqZznhT2NPtPCjKuDKGY38FBWLvgaDx45zo9WQRUT3dKYnjwih2yJD9mkrocEZXo1ex8G81dwSM1fwqWpWkeS3v86pgKt",
                ),
                (
                    Some((2_147_483_647, true)),
                    "xpub6ASAVgeehLbnwdqV6UKMHVzgqAG8Gr6riv3Fxxpj8ksbH9ebxaEyBLZ85ySDhKiLDBrQSARLq1uNRts8RuJiHjaDMBU4Zn9h8LZNnBC5y4a",
                    "xprv9wSp6B7kry3Vj9m1zSnLvN3xH8RdsPP1Mh7fAaR7aRLcQMKTR2vidYEeEg2mUCTAwCd6vnxVrcjfy2kRgVsFawNzmjuHc2YmYRmagcEPdU9",
                ),
                (
                    Some((1, false)),
                    "xpub6DF8uhdarytz3FWdA8TvFSvvAh8dP3283MY7p2V4SeE2wyWmG5mg5EwVvmdMVCQcoNJxGoWaU9DCWh89LojfZ537wTfunKau47EL2dhHKon",
                    "xprv9zFnWC6h2cLgpmSA46vutJzBcfJ8yaJGg8cX1e5StJh45BBciYTRXSd25UEPVuesF9yog62tGAQtHjXajPPdbRCHuWS6T8XA2ECKADdw4Ef",
                ),
                (
                    Some((2_147_483_646, true)),
                    "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL",
                    "xprvA1RpRA33e1JQ7ifknakTFpgNXPmW2YvmhqLQYMmrj4xJXXWYpDPS3xz7iAxn8L39njGVyuoseXzU6rcxFLJ8HFsTjSyQbLYnMpCqE2VbFWc",
                ),
                (
                    Some((2, false)),
                    "xpub6FnCn6nSzZAw5Tw7cgR9bi15UV96gLZhjDstkXXxvCLsUXBGXPdSnLFbdpq8p9HmGsApME5hQTZ3emM2rnY5agb9rXpVGyy3bdW6EEgAtqt",
                    "xprvA2nrNbFZABcdryreWet9Ea4LvTJcGsqrMzxHx98MMrotbir7yrKCEXw7nadnHM8Dq38EGfSh6dqA9QWTyefMLEcBYJUuekgW4BYPJcr9E7j",
                ),
            ],
        );
    }

    #[test]
    fn abandon_mnemonic_gives_the_published_bsc_and_tron_addresses() {
        let keys = abandon_keys();
        let published = [
            (
                Network::Bsc,
                0,
                "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
            ),
            (
                Network::Bsc,
                1,
                "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0",
            ),
            (
                Network::Bsc,
                2,
                "0xb6716976A3ebe8D39aCEB04372f22Ff8e6802D7A",
            ),
            (Network::Tron, 0, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"),
            (Network::Tron, 1, "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK"),
        ];
        for (network, index, expected) in published {
            let p = path(network, 0, index);
            // Through the private key, walking from the root.
            let (from_root, pk_root) = keys.address_from_root(&p).unwrap();
            assert_eq!(from_root, expected, "{}", p.render());
            // Through the cached external-chain public key only.
            let (pubkey, chain_code) = keys.external_chain_public_key(network, 0).unwrap();
            let (public_only, pk_pub) =
                derive_address(network, &pubkey, &chain_code, index).unwrap();
            assert_eq!(public_only, expected, "{}", p.render());
            assert_eq!(pk_pub, pk_root);
            assert_eq!(keys.address(&p).unwrap().0, expected);
        }
    }

    #[test]
    fn abandon_external_chain_key_matches_the_published_xpub() {
        // The external-chain xpub m/44'/60'/0'/0 of the abandon mnemonic, as wallets publish it.
        let expected = XPub::from_str(
            "xpub6EF8jXqFeFEW5bwMU7RpQtHkzE4KJxcqJtvkCjJumzW8CPpacXkb92ek4WzLQXjL93HycJwTPUAcuNxCqFPKKU5m5Z2Vq4nCyh5CyPeBFFr",
        )
        .unwrap();
        assert_eq!(expected.attrs().depth, EXTERNAL_CHAIN_DEPTH);
        let (pubkey, chain_code) = abandon_keys()
            .external_chain_public_key(Network::Bsc, 0)
            .unwrap();
        assert_eq!(pubkey, expected.to_bytes());
        assert_eq!(chain_code, expected.attrs().chain_code);
    }

    #[test]
    fn cached_and_root_derivations_agree_across_accounts_and_indexes() {
        let keys = abandon_keys();
        let max = HdPath::COMPONENT_MAX;
        for network in Network::ALL {
            for account in [0, 1, 7, max] {
                for index in [0, 1, 2, 1000, max] {
                    let p = path(network, account, index);
                    assert_eq!(
                        keys.address(&p).unwrap(),
                        keys.address_from_root(&p).unwrap()
                    );
                }
            }
        }
        assert_eq!(keys.cached_accounts(), 8);
        // Networks use different coin types, so the same account differs across networks.
        let bsc = keys.external_chain_public_key(Network::Bsc, 0).unwrap();
        let tron = keys.external_chain_public_key(Network::Tron, 0).unwrap();
        assert_ne!(bsc, tron);
    }

    #[test]
    fn out_of_range_components_are_rejected() {
        let keys = abandon_keys();
        let too_big = HdPath::COMPONENT_MAX + 1;
        let e = keys
            .external_chain_public_key(Network::Bsc, too_big)
            .unwrap_err();
        assert_eq!(
            e,
            KeyError::ComponentOutOfRange {
                what: "account",
                value: too_big
            }
        );
        let e = keys.address(&path(Network::Tron, 0, too_big)).unwrap_err();
        assert_eq!(
            e,
            KeyError::ComponentOutOfRange {
                what: "index",
                value: too_big
            }
        );
        assert!(keys
            .address_from_root(&path(Network::Tron, too_big, 0))
            .is_err());
        assert!(keys
            .sign_digest(&path(Network::Bsc, 0, u32::MAX), &[1; 32])
            .is_err());
        assert!(keys
            .sign_digest(&path(Network::Bsc, u32::MAX, 0), &[1; 32])
            .is_err());
        let (pubkey, chain_code) = keys.external_chain_public_key(Network::Bsc, 0).unwrap();
        assert!(derive_address(Network::Bsc, &pubkey, &chain_code, too_big).is_err());
        assert_eq!(
            keys.cached_accounts(),
            1,
            "nothing cached for a rejected account"
        );
    }

    #[test]
    fn invalid_public_key_and_seed_are_rejected() {
        let mut not_a_point = [0u8; 33];
        not_a_point[0] = 0x02;
        not_a_point[1..].fill(0xff); // x >= p
        assert_eq!(
            derive_address(Network::Bsc, &not_a_point, &[0; 32], 0),
            Err(KeyError::InvalidPublicKey)
        );
        assert_eq!(
            derive_address(Network::Bsc, &[0; 33], &[0; 32], 0),
            Err(KeyError::InvalidPublicKey)
        );
        assert_eq!(
            HdKeys::from_seed_bytes(&[0; 15]).unwrap_err(),
            KeyError::SeedLength(15)
        );
    }

    #[test]
    fn signatures_verify_recover_to_the_path_key_and_are_deterministic_and_low_s() {
        let keys = abandon_keys();
        for (i, network) in Network::ALL.into_iter().enumerate() {
            for index in 0..8u32 {
                let p = path(network, 3, index);
                let digest: [u8; 32] = core::array::from_fn(|j| {
                    u8::try_from((j * 31 + i * 7) % 256).unwrap() ^ index.to_le_bytes()[0]
                });
                let sig = keys.sign_digest(&p, &digest).unwrap();
                assert!(sig.recovery_id <= 1);
                // Deterministic (RFC 6979): the same digest gives the same signature.
                assert_eq!(keys.sign_digest(&p, &digest).unwrap(), sig);

                let signature = Signature::from_scalars(sig.r, sig.s).unwrap();
                assert!(signature.normalize_s().is_none(), "s must be low");

                let (_, expected_pub) = keys.address_from_root(&p).unwrap();
                let verifying = VerifyingKey::from_sec1_bytes(&expected_pub).unwrap();
                verifying.verify_prehash(&digest, &signature).unwrap();
                let recovery = RecoveryId::from_byte(sig.recovery_id).unwrap();
                let recovered =
                    VerifyingKey::recover_from_prehash(&digest, &signature, recovery).unwrap();
                assert_eq!(recovered, verifying);

                // The signing key is exactly the one at the path walked from the root.
                let root_key = keys.walk_from_root(&p).unwrap();
                let (direct, direct_recid) = root_key
                    .private_key()
                    .sign_prehash_recoverable(&digest)
                    .unwrap();
                assert_eq!(&direct.to_bytes()[..], &sig.to_rsv()[..64]);
                assert_eq!(direct_recid.to_byte(), sig.recovery_id);
            }
        }
    }

    #[test]
    fn other_digests_or_paths_give_other_signatures() {
        let keys = abandon_keys();
        let a = keys
            .sign_digest(&path(Network::Bsc, 0, 0), &[7; 32])
            .unwrap();
        let b = keys
            .sign_digest(&path(Network::Bsc, 0, 0), &[8; 32])
            .unwrap();
        let c = keys
            .sign_digest(&path(Network::Bsc, 0, 1), &[7; 32])
            .unwrap();
        let d = keys
            .sign_digest(&path(Network::Tron, 0, 0), &[7; 32])
            .unwrap();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn debug_is_redacted() {
        let keys = abandon_keys();
        keys.external_chain_public_key(Network::Bsc, 0).unwrap();
        let shown = format!("{keys:?} {keys:#?}");
        assert_eq!(format!("{keys:?}"), "HdKeys(<redacted>)");
        let master_hex = hex::encode(keys.master.to_bytes());
        let (pubkey, chain_code) = keys.external_chain_public_key(Network::Bsc, 0).unwrap();
        for secret in [master_hex, hex::encode(chain_code), hex::encode(pubkey)] {
            assert!(!shown.contains(&secret));
        }
        assert!(!shown.contains("abandon"));
    }
}
