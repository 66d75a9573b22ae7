//! Every seed generation the service signs with (`custody_core::wallet::seeds`): `seed.json`'s,
//! and those `custody wallets migrate --mnemonic-file` imported, sealed in the store with the
//! same key as `seed.json` and decrypted once, here, at start-up.

use custody_core::keys::{HdKeys, Mnemonic, SeedSet};
use custody_core::ports::store::{read, Store};
use custody_core::ports::Entropy;
use custody_core::secret::Secret;
use custody_core::vault::NONCE_BYTES;
use custody_core::wallet::seeds::{seed_aad, seed_aad_v1, SeedRecord};

use crate::datadir::Unlocked;
use crate::support::runtime;

/// The BIP39 mnemonic in `path` (`wallets migrate --mnemonic-file`). Refused when the file is
/// readable by its group or others: a seed the service will sign with must not have been
/// left where other accounts could read it. The text read is wiped from memory once parsed.
pub fn read_mnemonic_file(path: &std::path::Path) -> Result<Mnemonic, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("--mnemonic-file {shown}: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "--mnemonic-file {shown} is readable by its group or others (mode {mode:04o}): \
                 restrict it to its owner (chmod 600 {shown}), and consider the seed exposed if \
                 other accounts could read it"
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let text = Secret::new(
        std::fs::read_to_string(path).map_err(|e| format!("--mnemonic-file {shown}: {e}"))?,
    );
    Mnemonic::parse(text.expose().trim()).map_err(|e| format!("--mnemonic-file {shown}: {e}"))
}

/// Every seed: generation 0 from `unlocked`, then each imported one from the store.
pub fn load(store: &dyn Store, unlocked: &Unlocked) -> Result<SeedSet, String> {
    let first = HdKeys::from_seed(&unlocked.mnemonic.to_seed())
        .map_err(|e| format!("cannot load the master key: {e}"))?;
    let mut set = SeedSet::new(first);
    let records = runtime()?
        .block_on(read(store, |tx| Ok(tx.seeds()?)))
        .map_err(|e| format!("cannot read the imported seeds: {e}"))?;
    for r in records {
        let phrase = open_record(unlocked, &r).map_err(|_| {
            format!(
                "imported seed generation {} cannot be opened: the key is not the one that \
                     sealed it, or the record is damaged",
                r.generation
            )
        })?;
        let text = std::str::from_utf8(phrase.expose())
            .map_err(|_| format!("imported seed generation {} is not text", r.generation))?;
        let mnemonic = Mnemonic::parse(text)
            .map_err(|e| format!("imported seed generation {}: {e}", r.generation))?;
        let keys = HdKeys::from_mnemonic(&mnemonic)
            .map_err(|e| format!("imported seed generation {}: {e}", r.generation))?;
        set.add(r.generation, r.first_account, keys)
            .map_err(|e| e.to_string())?;
    }
    Ok(set)
}

/// The mnemonic sealed in `r`: bound to its generation and first account, or (records sealed
/// before the first account was bound) to its generation only.
fn open_record(
    unlocked: &Unlocked,
    r: &SeedRecord,
) -> Result<custody_core::secret::Secret<Vec<u8>>, custody_core::vault::VaultError> {
    unlocked
        .sealing
        .open(&r.sealed_mnemonic, &seed_aad(r.generation, r.first_account))
        .or_else(|_| {
            unlocked
                .sealing
                .open(&r.sealed_mnemonic, &seed_aad_v1(r.generation))
        })
}

/// The record of `mnemonic` as the next generation from `first_account`, sealed with the data
/// dir's key.
pub fn seal(
    unlocked: &Unlocked,
    mnemonic: &Mnemonic,
    (generation, first_account): (u32, u32),
    entropy: &dyn Entropy,
    now: custody_core::time::Timestamp,
) -> Result<SeedRecord, String> {
    let mut nonce = [0u8; NONCE_BYTES];
    entropy.fill(&mut nonce);
    Ok(SeedRecord {
        generation,
        first_account,
        sealed_mnemonic: unlocked.sealing.seal(
            mnemonic.expose_phrase().as_bytes(),
            &seed_aad(generation, first_account),
            &nonce,
        ),
        fingerprint: crate::datadir::fingerprint(mnemonic)?,
        created_at: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use custody_core::vault::SealingKey;

    const PHRASE: &str =
        "letter advice cage absurd amount doctor acoustic avoid letter advice cage above";

    struct Counter;
    impl Entropy for Counter {
        fn fill(&self, buf: &mut [u8]) {
            buf.iter_mut().zip(0u8..).for_each(|(b, i)| *b = i);
        }
    }

    fn unlocked() -> Unlocked {
        Unlocked {
            sealing: SealingKey::from_bytes([7; 32]),
            mnemonic: Mnemonic::parse(PHRASE).unwrap(),
            insecure: true,
        }
    }

    #[test]
    fn a_sealed_seed_opens_only_with_its_generation_and_first_account() {
        let u = unlocked();
        let mnemonic = Mnemonic::parse(PHRASE).unwrap();
        let now = custody_core::time::Timestamp::from_unix_millis(0);
        let r = seal(&u, &mnemonic, (1, 5), &Counter, now).unwrap();
        assert_eq!(open_record(&u, &r).unwrap().expose(), PHRASE.as_bytes());
        // A record edited to serve other accounts, or as another generation, does not open.
        let moved = SeedRecord {
            first_account: 3,
            ..r.clone()
        };
        assert!(open_record(&u, &moved).is_err());
        let renumbered = SeedRecord {
            generation: 2,
            ..r.clone()
        };
        assert!(open_record(&u, &renumbered).is_err());
        // A record sealed before the first account was bound still opens.
        let old = SeedRecord {
            sealed_mnemonic: u
                .sealing
                .seal(PHRASE.as_bytes(), &seed_aad_v1(1), &[1; NONCE_BYTES]),
            ..r
        };
        assert_eq!(open_record(&u, &old).unwrap().expose(), PHRASE.as_bytes());
    }
}
