//! [`SeedSet`]: the [`Signer`] over every seed the service has had. After a wallet migration
//! to a new seed (decisions §13, `custody wallets migrate --mnemonic-file`), wallets of later
//! accounts are derived from the new seed while old addresses keep being swept with the keys of
//! the seed that derived them. Which seed derived a path follows from its account: the
//! account allocator only grows, and a new seed is registered with the first account it will
//! serve (`wallet::seeds`), so every account belongs to exactly one seed generation: the
//! newest whose first account is at or below it. The hot wallets' account (decisions §11)
//! always belongs to the first seed.

use std::fmt;

use super::{HdKeys, KeyError};
use crate::error::PortError;
use crate::network::Network;
use crate::ports::signer::{HdPath, RecoverableSignature, Signer};
use crate::wallet::seeds::generation_of;

/// Every seed generation held in memory, decrypted once at start-up.
pub struct SeedSet {
    /// (generation, first account, keys), by first account ascending; generation 0 first.
    generations: Vec<(u32, u32, HdKeys)>,
}

impl SeedSet {
    /// The first seed (`seed.json`): generation 0, from account 0.
    pub fn new(first: HdKeys) -> Self {
        SeedSet {
            generations: vec![(0, 0, first)],
        }
    }

    /// Adds generation `generation` serving accounts from `first_account`. Generations come in
    /// order, each starting above the previous one.
    pub fn add(
        &mut self,
        generation: u32,
        first_account: u32,
        keys: HdKeys,
    ) -> Result<(), KeyError> {
        let (last_generation, last_first, _) = self.generations.last().expect("generation 0");
        if generation != last_generation + 1 || first_account <= *last_first {
            return Err(KeyError::Derivation(format!(
                "seed generation {generation} from account {first_account} does not follow \
                 generation {last_generation} from account {last_first}"
            )));
        }
        self.generations.push((generation, first_account, keys));
        Ok(())
    }

    pub fn generations(&self) -> usize {
        self.generations.len()
    }

    fn ranges(&self) -> Vec<(u32, u32)> {
        self.generations.iter().map(|(g, f, _)| (*g, *f)).collect()
    }

    fn keys_of(&self, account: u32) -> &HdKeys {
        let generation = generation_of(&self.ranges(), account);
        self.generations
            .iter()
            .find(|(g, _, _)| *g == generation)
            .map(|(_, _, k)| k)
            .unwrap_or(&self.generations[0].2)
    }
}

impl fmt::Debug for SeedSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SeedSet({} generations, <redacted>)",
            self.generations.len()
        )
    }
}

impl Signer for SeedSet {
    fn external_chain_public_key(
        &self,
        network: Network,
        account: u32,
    ) -> Result<([u8; 33], [u8; 32]), PortError> {
        Ok(self
            .keys_of(account)
            .external_chain_public_key(network, account)?)
    }

    fn sign_digest(
        &self,
        path: &HdPath,
        digest: &[u8; 32],
    ) -> Result<RecoverableSignature, PortError> {
        Ok(self.keys_of(path.account).sign_digest(path, digest)?)
    }

    fn seed_generation(&self, account: u32) -> u32 {
        generation_of(&self.ranges(), account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{derive_address, Mnemonic};
    use crate::wallet::HOT_WALLET_ACCOUNT;

    const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                              abandon abandon abandon about";
    const ZOO_12: &str = "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong";

    fn keys(phrase: &str) -> HdKeys {
        HdKeys::from_mnemonic(&Mnemonic::parse(phrase).unwrap()).unwrap()
    }

    fn address(signer: &dyn Signer, account: u32) -> String {
        let (k, c) = signer
            .external_chain_public_key(Network::Bsc, account)
            .unwrap();
        derive_address(Network::Bsc, &k, &c, 0).unwrap().0
    }

    #[test]
    fn each_account_is_derived_and_signed_with_its_own_seed() {
        let mut set = SeedSet::new(keys(ABANDON_12));
        set.add(1, 5, keys(ZOO_12)).unwrap();
        let (old, new) = (signer_of(ABANDON_12), signer_of(ZOO_12));
        for account in [0, 4] {
            assert_eq!(address(&set, account), address(&old, account));
            assert_eq!(set.seed_generation(account), 0);
        }
        for account in [5, 6, 1_000] {
            assert_eq!(address(&set, account), address(&new, account));
            assert_eq!(set.seed_generation(account), 1);
        }
        // The hot wallets stay on the first seed.
        assert_eq!(set.seed_generation(HOT_WALLET_ACCOUNT), 0);
        assert_eq!(
            address(&set, HOT_WALLET_ACCOUNT),
            address(&old, HOT_WALLET_ACCOUNT)
        );
        let path = HdPath {
            network: Network::Bsc,
            account: 5,
            index: 0,
        };
        assert_eq!(
            set.sign_digest(&path, &[7; 32]).unwrap(),
            new.sign_digest(&path, &[7; 32]).unwrap()
        );
        assert_eq!(format!("{set:?}"), "SeedSet(2 generations, <redacted>)");
    }

    #[test]
    fn generations_come_in_order() {
        let mut set = SeedSet::new(keys(ABANDON_12));
        assert!(set.add(2, 5, keys(ZOO_12)).is_err());
        assert!(set.add(1, 0, keys(ZOO_12)).is_err());
        set.add(1, 3, keys(ZOO_12)).unwrap();
        assert!(set.add(2, 3, keys(ABANDON_12)).is_err());
    }

    fn signer_of(phrase: &str) -> crate::keys::HdSigner {
        crate::keys::HdSigner::new(keys(phrase))
    }
}
