//! The in-memory [`Signer`]: [`HdKeys`] behind the signer port.

use std::fmt;

use super::{HdKeys, KeyError, MasterSeed};
use crate::error::PortError;
use crate::network::Network;
use crate::ports::signer::{HdPath, RecoverableSignature, Signer};

/// Signs with keys derived from the master seed held in memory. Every error is a permanent
/// [`PortError`] of port `"signer"` whose message names no key material.
pub struct HdSigner {
    keys: HdKeys,
}

impl HdSigner {
    pub fn new(keys: HdKeys) -> Self {
        HdSigner { keys }
    }

    pub fn from_seed(seed: &MasterSeed) -> Result<Self, KeyError> {
        Ok(HdSigner::new(HdKeys::from_seed(seed)?))
    }

    pub fn keys(&self) -> &HdKeys {
        &self.keys
    }
}

impl fmt::Debug for HdSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HdSigner(<redacted>)")
    }
}

impl Signer for HdSigner {
    fn external_chain_public_key(
        &self,
        network: Network,
        account: u32,
    ) -> Result<([u8; 33], [u8; 32]), PortError> {
        Ok(self.keys.external_chain_public_key(network, account)?)
    }

    fn sign_digest(
        &self,
        path: &HdPath,
        digest: &[u8; 32],
    ) -> Result<RecoverableSignature, PortError> {
        Ok(self.keys.sign_digest(path, digest)?)
    }
}

#[cfg(test)]
mod tests {
    use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};

    use super::*;
    use crate::error::Retry;
    use crate::keys::{derive_address, Mnemonic};

    const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                              abandon abandon abandon about";

    fn signer() -> HdSigner {
        HdSigner::from_seed(&Mnemonic::parse(ABANDON_12).unwrap().to_seed()).unwrap()
    }

    #[test]
    fn port_derives_addresses_and_signs_for_them() {
        let signer = signer();
        let port: &dyn Signer = &signer;
        let (pubkey, chain_code) = port.external_chain_public_key(Network::Bsc, 0).unwrap();
        let (address, public_key) = derive_address(Network::Bsc, &pubkey, &chain_code, 0).unwrap();
        assert_eq!(address, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");

        let digest = [0x5a; 32];
        let path = HdPath {
            network: Network::Bsc,
            account: 0,
            index: 0,
        };
        let sig = port.sign_digest(&path, &digest).unwrap();
        let signature = Signature::from_scalars(sig.r, sig.s).unwrap();
        let recovered = VerifyingKey::recover_from_prehash(
            &digest,
            &signature,
            RecoveryId::from_byte(sig.recovery_id).unwrap(),
        )
        .unwrap();
        assert_eq!(
            recovered,
            VerifyingKey::from_sec1_bytes(&public_key).unwrap()
        );
        assert_eq!(port.sign_digest(&path, &digest).unwrap(), sig);
    }

    #[test]
    fn out_of_range_is_a_permanent_signer_error() {
        let signer = signer();
        let too_big = HdPath::COMPONENT_MAX + 1;
        let e = signer
            .external_chain_public_key(Network::Tron, too_big)
            .unwrap_err();
        assert_eq!((e.port, e.retry), ("signer", Retry::Permanent));
        let path = HdPath {
            network: Network::Tron,
            account: 0,
            index: too_big,
        };
        let e = signer.sign_digest(&path, &[0; 32]).unwrap_err();
        assert_eq!((e.port, e.retry), ("signer", Retry::Permanent));
        assert!(e.message.contains("index"), "{e}");
    }

    #[test]
    fn debug_and_errors_never_show_key_material() {
        let signer = signer();
        let (pubkey, chain_code) = signer
            .keys()
            .external_chain_public_key(Network::Bsc, 0)
            .unwrap();
        let shown = format!("{signer:?} {signer:#?}");
        assert_eq!(format!("{signer:?}"), "HdSigner(<redacted>)");
        let path = HdPath {
            network: Network::Bsc,
            account: 0,
            index: u32::MAX,
        };
        let error = signer.sign_digest(&path, &[0; 32]).unwrap_err();
        let error = format!("{error} {error:?}");
        for text in [&shown, &error] {
            assert!(!text.contains("abandon"));
            assert!(!text.contains(&hex::encode(chain_code)));
            assert!(!text.contains(&hex::encode(pubkey)));
        }
    }
}
