//! BIP39: the mnemonic phrase and the seed it stretches to.
//!
//! New phrases are 24 English words from 32 bytes of caller-supplied entropy (the core has no
//! randomness of its own). Imported phrases may have 12, 15, 18, 21 or 24 words; their checksum
//! is verified. The seed is PBKDF2-HMAC-SHA512 of the phrase, 2048 rounds, salt `"mnemonic"`
//! (empty passphrase).

use std::fmt;
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use zeroize::{Zeroize, Zeroizing};

use super::KeyError;
use crate::secret::Secret;

/// The BIP39 English word list (2048 words, sorted), as published with BIP39.
const ENGLISH_WORDS: &str = include_str!("bip39_english.txt");
const PBKDF2_ROUNDS: u32 = 2048;
const SEED_LEN: usize = 64;

fn english_words() -> &'static [&'static str] {
    static WORDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    WORDS.get_or_init(|| ENGLISH_WORDS.split_whitespace().collect())
}

/// A BIP39 mnemonic phrase (English), normalized to lowercase words separated by one space.
/// Zeroed on drop; `Debug` is redacted.
pub struct Mnemonic {
    phrase: Secret<String>,
    word_count: usize,
}

impl Mnemonic {
    /// A new 24-word phrase from 32 bytes of entropy, which the caller draws from a CSPRNG.
    pub fn from_entropy(entropy: &[u8; 32]) -> Self {
        let phrase = bip32::Mnemonic::from_entropy(*entropy, bip32::Language::English);
        Mnemonic {
            phrase: Secret::new(phrase.phrase().to_owned()),
            word_count: 24,
        }
    }

    /// Reads a phrase of 12, 15, 18, 21 or 24 English words and verifies its checksum. Words
    /// may be separated by any whitespace and written in any ASCII case.
    pub fn parse(phrase: &str) -> Result<Self, KeyError> {
        let words: Vec<&str> = phrase.split_whitespace().collect();
        let count = words.len();
        if !matches!(count, 12 | 15 | 18 | 21 | 24) {
            return Err(KeyError::MnemonicWordCount(count));
        }
        let list = english_words();
        // 11 bits per word: at most 24 * 11 = 264 bits = 33 bytes.
        let mut bits = Zeroizing::new([0u8; 33]);
        let mut normalized = Zeroizing::new(String::with_capacity(phrase.len()));
        for (position, word) in words.iter().enumerate() {
            let lower = Zeroizing::new(word.to_ascii_lowercase());
            let index =
                list.binary_search(&lower.as_str())
                    .map_err(|_| KeyError::MnemonicUnknownWord {
                        position: position + 1,
                    })?;
            for bit in 0..11 {
                if (index >> (10 - bit)) & 1 == 1 {
                    let at = position * 11 + bit;
                    bits[at / 8] |= 0x80 >> (at % 8);
                }
            }
            if position > 0 {
                normalized.push(' ');
            }
            normalized.push_str(list[index]);
        }
        // ENT + ENT/32 = 11 * count bits, so ENT = 32 * count / 3 and CS = count / 3 (<= 8).
        let checksum_bits = count / 3;
        let entropy_len = count * 4 / 3;
        let mut hash = Sha256::digest(&bits[..entropy_len]);
        let expected = hash[0] >> (8 - checksum_bits);
        let found = bits[entropy_len] >> (8 - checksum_bits);
        hash.zeroize();
        if expected != found {
            return Err(KeyError::MnemonicChecksum);
        }
        let phrase = std::mem::take(&mut *normalized);
        Ok(Mnemonic {
            phrase: Secret::new(phrase),
            word_count: count,
        })
    }

    pub fn word_count(&self) -> usize {
        self.word_count
    }

    /// The phrase itself, for the one place that must show or seal it (`custody init`).
    pub fn expose_phrase(&self) -> &str {
        self.phrase.expose()
    }

    /// The 64-byte BIP39 seed (empty passphrase).
    pub fn to_seed(&self) -> MasterSeed {
        self.to_seed_with_passphrase("")
    }

    fn to_seed_with_passphrase(&self, passphrase: &str) -> MasterSeed {
        let salt = Zeroizing::new(format!("mnemonic{passphrase}"));
        MasterSeed(Secret::new(pbkdf2_hmac_sha512(
            self.phrase.expose().as_bytes(),
            salt.as_bytes(),
            PBKDF2_ROUNDS,
        )))
    }
}

impl fmt::Debug for Mnemonic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Mnemonic(<redacted>)")
    }
}

/// PBKDF2 with HMAC-SHA512 for a 64-byte output: a single block, `T1 = U1 ^ ... ^ Uc`.
fn pbkdf2_hmac_sha512(password: &[u8], salt: &[u8], rounds: u32) -> [u8; SEED_LEN] {
    let prf =
        <Hmac<Sha512> as Mac>::new_from_slice(password).expect("HMAC accepts a key of any length");
    let mut mac = prf.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u = Zeroizing::new([0u8; SEED_LEN]);
    u.copy_from_slice(&mac.finalize().into_bytes());
    let mut out = *u;
    for _ in 1..rounds {
        let mut mac = prf.clone();
        mac.update(&*u);
        u.copy_from_slice(&mac.finalize().into_bytes());
        for (o, x) in out.iter_mut().zip(u.iter()) {
            *o ^= x;
        }
    }
    out
}

/// The 64-byte BIP39 seed from which every key is derived. Zeroed on drop; `Debug` is
/// redacted.
pub struct MasterSeed(Secret<[u8; SEED_LEN]>);

impl MasterSeed {
    pub const LEN: usize = SEED_LEN;

    pub fn from_bytes(bytes: [u8; SEED_LEN]) -> Self {
        MasterSeed(Secret::new(bytes))
    }

    /// The seed bytes, for sealing at rest.
    pub fn expose(&self) -> &[u8; SEED_LEN] {
        self.0.expose()
    }
}

impl fmt::Debug for MasterSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterSeed(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                              abandon abandon abandon about";

    /// (entropy, phrase, seed with passphrase "TREZOR") from the reference BIP39 test vectors
    /// (trezor/python-mnemonic vectors.json).
    const TREZOR_VECTORS: [(&str, &str, &str); 6] = [
        (
            "00000000000000000000000000000000",
            ABANDON_12,
            "c55257c360c07c72029aebc1b53c05ed0362ada38ead3e3e9efa3708e53495531f09a6987599d18264c1e1c92f2cf141630c7a3c4ab7c81b2f001698e7463b04",
        ),
        (
            "7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f",
            "legal winner thank year wave sausage worth useful legal winner thank year wave sausage worth useful legal will",
            "f2b94508732bcbacbcc020faefecfc89feafa6649a5491b8c952cede496c214a0c7b3c392d168748f2d4a612bada0753b52a1c7ac53c1e93abd5c6320b9e95dd",
        ),
        (
            "0000000000000000000000000000000000000000000000000000000000000000",
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon art",
            "bda85446c68413707090a52022edd26a1c9462295029f2e60cd7c4f2bbd3097170af7a4d73245cafa9c3cca8d561a7c3de6f5d4a10be8ed2a5e608d68f92fcc8",
        ),
        (
            "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo vote",
            "dd48c104698c30cfe2b6142103248622fb7bb0ff692eebb00089b32d22484e1613912f0a5b694407be899ffd31ed3992c456cdf60f5d4564b8ba3f05a69890ad",
        ),
        (
            "6610b25967cdcca9d59875f5cb50b0ea75433311869e930b",
            "gravity machine north sort system female filter attitude volume fold club stay feature office ecology stable narrow fog",
            "628c3827a8823298ee685db84f55caa34b5cc195a778e52d45f59bcf75aba68e4d7590e101dc414bc1bbd5737666fbbef35d1f1903953b66624f910feef245ac",
        ),
        (
            "68a79eaca2324873eacc50cb9c6eca8cc68ea5d936f98787c60c7ebc74e6ce7c",
            "hamster diagram private dutch cause delay private meat slide toddler razor book happy fancy gospel tennis maple dilemma loan word shrug inflict delay length",
            "64c87cde7e12ecf6704ab95bb1408bef047c22db4cc7491c4271d170a1b213d20b385bc1588d9c7b38f1b39d415665b8a9030c9ec653d75e65f847d8fc1fc440",
        ),
    ];

    #[test]
    fn word_list_is_the_bip39_english_list() {
        let list = english_words();
        assert_eq!(list.len(), 2048);
        assert_eq!(list[0], "abandon");
        assert_eq!(list[2047], "zoo");
        assert!(list.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    }

    #[test]
    fn trezor_vectors_parse_and_stretch_to_the_published_seed() {
        for (entropy, phrase, seed) in TREZOR_VECTORS {
            let m = Mnemonic::parse(phrase).unwrap();
            assert_eq!(m.expose_phrase(), phrase);
            assert_eq!(m.word_count(), phrase.split(' ').count());
            assert_eq!(
                hex::encode(m.to_seed_with_passphrase("TREZOR").expose()),
                seed
            );
            if entropy.len() == 64 {
                let e: [u8; 32] = hex::decode(entropy).unwrap().try_into().unwrap();
                assert_eq!(Mnemonic::from_entropy(&e).expose_phrase(), phrase);
            }
        }
    }

    #[test]
    fn abandon_about_seed_with_empty_passphrase() {
        let m = Mnemonic::parse(ABANDON_12).unwrap();
        assert_eq!(
            hex::encode(m.to_seed().expose()),
            "5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc1\
             9a5ac40b389cd370d086206dec8aa6c43daea6690f20ad3d8d48b2d2ce9e38e4"
        );
    }

    #[test]
    fn generated_phrase_round_trips_and_matches_bip32_crate_seed() {
        let entropy: [u8; 32] = core::array::from_fn(|i| u8::try_from(i * 7 + 3).unwrap());
        let m = Mnemonic::from_entropy(&entropy);
        assert_eq!(m.word_count(), 24);
        let again = Mnemonic::parse(m.expose_phrase()).unwrap();
        assert_eq!(again.expose_phrase(), m.expose_phrase());
        let reference = bip32::Mnemonic::new(m.expose_phrase(), bip32::Language::English).unwrap();
        assert_eq!(reference.entropy(), &entropy);
        assert_eq!(m.to_seed().expose(), reference.to_seed("").as_bytes());
    }

    #[test]
    fn whitespace_and_case_are_normalized() {
        let messy = format!("  {}\t\n", ABANDON_12.to_uppercase().replace(' ', "   "));
        let m = Mnemonic::parse(&messy).unwrap();
        assert_eq!(m.expose_phrase(), ABANDON_12);
    }

    #[test]
    fn bad_phrases_are_rejected_without_echoing_words() {
        assert_eq!(
            Mnemonic::parse("").unwrap_err(),
            KeyError::MnemonicWordCount(0)
        );
        let eleven = ABANDON_12.rsplit_once(' ').unwrap().0;
        assert_eq!(
            Mnemonic::parse(eleven).unwrap_err(),
            KeyError::MnemonicWordCount(11)
        );
        let thirteen = format!("{ABANDON_12} abandon");
        assert_eq!(
            Mnemonic::parse(&thirteen).unwrap_err(),
            KeyError::MnemonicWordCount(13)
        );
        // Twelve valid words with a wrong checksum.
        let all_abandon = "abandon ".repeat(12);
        assert_eq!(
            Mnemonic::parse(&all_abandon).unwrap_err(),
            KeyError::MnemonicChecksum
        );
        // Swapping two words breaks the checksum too.
        let swapped = "legal winner thank year wave sausage worth useful legal winner yellow thank";
        assert_eq!(
            Mnemonic::parse(swapped).unwrap_err(),
            KeyError::MnemonicChecksum
        );
        // An unknown word is reported by position only.
        let typo = ABANDON_12
            .replacen("abandon", "abandonn", 1)
            .replace("about", "abuot");
        let err = Mnemonic::parse(&typo).unwrap_err();
        assert_eq!(err, KeyError::MnemonicUnknownWord { position: 1 });
        assert!(!err.to_string().contains("abandonn"));
        let non_ascii = ABANDON_12.replace("about", "abóut");
        assert_eq!(
            Mnemonic::parse(&non_ascii).unwrap_err(),
            KeyError::MnemonicUnknownWord { position: 12 }
        );
    }

    #[test]
    fn debug_never_shows_phrase_or_seed() {
        let m = Mnemonic::parse(ABANDON_12).unwrap();
        let seed = m.to_seed();
        let shown = format!("{m:?} {seed:?} {:#?}", (&m, &seed));
        assert!(!shown.contains("abandon"), "{shown}");
        assert!(!shown.contains("5eb00bbd"), "{shown}");
        assert_eq!(format!("{m:?}"), "Mnemonic(<redacted>)");
        assert_eq!(format!("{seed:?}"), "MasterSeed(<redacted>)");
    }
}
