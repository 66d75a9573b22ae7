//! Seed generations (decisions §13: a wallet migration to a new seed). Generation 0 is the
//! master seed of `seed.json`; each later one is a mnemonic an operator imported with
//! `custody wallets migrate --mnemonic-file`, kept sealed in the store under the same key as
//! `seed.json`, registered with the first account it serves. Accounts only grow (one global
//! allocator), so the account of a path says which seed derived it: the newest generation
//! whose first account is at or below it ([`generation_of`]); the hot wallets' account stays
//! generation 0's.
//!
//! A process whose signer does not hold a generation the store has (a service started before
//! the import) must not derive an address under it: [`check_seed_loaded`] refuses, so no
//! deposit address is ever handed out that the service cannot sign for.

use crate::error::{CoreResult, ErrorCode, PortError, Refusal};
use crate::ports::signer::Signer;
use crate::ports::store::ReadTx;
use crate::time::Timestamp;

use super::HOT_WALLET_ACCOUNT;

/// One imported seed.
#[derive(Clone, PartialEq, Eq)]
pub struct SeedRecord {
    /// 1, 2, ...: generation 0 is `seed.json`.
    pub generation: u32,
    /// The first account derived from it; every later account is too, until the next one.
    pub first_account: u32,
    /// The mnemonic sealed with the data dir's key (associated data [`seed_aad`]).
    pub sealed_mnemonic: Vec<u8>,
    /// Public: the BSC address at `m/44'/60'/0'/0/0` of the seed, so that importing a seed the
    /// service already has is refused.
    pub fingerprint: String,
    pub created_at: Timestamp,
}

impl std::fmt::Debug for SeedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedRecord")
            .field("generation", &self.generation)
            .field("first_account", &self.first_account)
            .field("fingerprint", &self.fingerprint)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// The associated data that binds a sealed mnemonic to its generation and the first account it
/// serves: neither can be changed in the store (one record swapped for another, a seed made to
/// derive accounts it did not) without the record failing to open.
pub fn seed_aad(generation: u32, first_account: u32) -> Vec<u8> {
    format!("custody:seed:v2:generation:{generation}:first_account:{first_account}").into_bytes()
}

/// The associated data of records sealed before the first account was bound (generation only):
/// still opened, so that no stored record needs rewriting.
pub fn seed_aad_v1(generation: u32) -> Vec<u8> {
    format!("custody:seed:v1:generation:{generation}").into_bytes()
}

/// The generation that derives `account`, among `(generation, first_account)` ranges.
pub fn generation_of(ranges: &[(u32, u32)], account: u32) -> u32 {
    if account == HOT_WALLET_ACCOUNT {
        return 0;
    }
    ranges
        .iter()
        .filter(|(_, first)| *first <= account)
        .max_by_key(|(_, first)| *first)
        .map_or(0, |(g, _)| *g)
}

/// Refuses to derive under `account` when `signer` would use another seed than the store
/// says derives it (a seed imported after this process started: restart it).
pub fn check_seed_loaded(
    tx: &mut (impl ReadTx + ?Sized),
    signer: &dyn Signer,
    account: u32,
) -> CoreResult<()> {
    let ranges: Vec<(u32, u32)> = tx
        .seeds()?
        .iter()
        .map(|s| (s.generation, s.first_account))
        .chain(std::iter::once((0, 0)))
        .collect();
    let stored = generation_of(&ranges, account);
    let loaded = signer.seed_generation(account);
    if stored != loaded {
        return Err(Refusal::new(
            ErrorCode::InternalError,
            format!(
                "account {account} is derived from seed generation {stored}, which this process \
                 has not loaded (it uses generation {loaded}): restart the service to load the \
                 imported seed"
            ),
        )
        .into());
    }
    Ok(())
}

/// Registers an imported seed as the next generation, serving every account from the one the
/// allocator hands out next, in the caller's transaction (with the wallet migrations that move
/// wallets onto it: both commit or neither). Refuses a seed the service already has (same
/// fingerprint as generation 0, `first_fingerprint`, or an imported one) and a record that does
/// not follow the store (another generation or first account: an allocation raced it).
pub fn register_seed(
    tx: &mut (impl crate::ports::store::WriteTx + ?Sized),
    seed: &SeedRecord,
    first_fingerprint: &str,
) -> CoreResult<()> {
    let seeds = tx.seeds()?;
    if seed.fingerprint == first_fingerprint {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            "the service already has this seed (it is the first seed, seed.json): a migration \
             to a new seed needs a mnemonic the service does not have",
        )
        .into());
    }
    if let Some(s) = seeds.iter().find(|s| s.fingerprint == seed.fingerprint) {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!(
                "the service already has this seed (imported as generation {}): new accounts \
                 already come from it, so to migrate wallets an earlier run left behind, run \
                 the command again without --mnemonic-file",
                s.generation
            ),
        )
        .into());
    }
    let generation = u32::try_from(seeds.len())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let first_account = tx.next_account()?;
    if seed.generation != generation || seed.first_account != first_account {
        return Err(Refusal::new(
            ErrorCode::InternalError,
            format!(
                "the new seed was prepared as generation {} from account {}, but the store is at                  generation {generation} from account {first_account}: run the migration again",
                seed.generation, seed.first_account
            ),
        )
        .into());
    }
    if first_account >= HOT_WALLET_ACCOUNT {
        return Err(Refusal::new(ErrorCode::InternalError, "no account index is left").into());
    }
    tx.insert_seed(seed)?;
    Ok(())
}

/// Seeds in the store.
pub trait SeedReads {
    /// Every imported seed, by generation ascending (generation 0 is not in the store).
    fn seeds(&mut self) -> Result<Vec<SeedRecord>, PortError>;
    /// The account the global allocator hands out next (`allocate_tenant_account`,
    /// `replace_tenant_account`): one above the largest ever handed out, 0 at first.
    fn next_account(&mut self) -> Result<u32, PortError>;
}

pub trait SeedRepo: SeedReads {
    /// MUST fail if the generation, the first account or the fingerprint is already there.
    fn insert_seed(&mut self, seed: &SeedRecord) -> Result<(), PortError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_generation_at_or_below_the_account_derives_it() {
        let ranges = [(0, 0), (1, 7), (2, 12)];
        assert_eq!(generation_of(&ranges, 0), 0);
        assert_eq!(generation_of(&ranges, 6), 0);
        assert_eq!(generation_of(&ranges, 7), 1);
        assert_eq!(generation_of(&ranges, 11), 1);
        assert_eq!(generation_of(&ranges, 12), 2);
        assert_eq!(generation_of(&ranges, HOT_WALLET_ACCOUNT), 0);
        assert_eq!(generation_of(&[], 9), 0);
    }
}
