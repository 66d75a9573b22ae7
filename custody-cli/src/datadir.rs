//! The data dir: `custody.toml`, `custody.db` and `seed.json` (the sealed BIP39 mnemonic).
//!
//! The key that seals the mnemonic also seals the HMAC and TOTP secrets in the database. It
//! comes from `CUSTODY_PASSPHRASE` through Argon2id, or, with `--insecure-dev-seed`, is a random
//! key stored beside the seed (local use only: anyone who reads the dir has everything).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use custody_core::keys::Mnemonic;
use custody_core::ports::Entropy;
use custody_core::vault::{KdfParams, SealingKey, KEY_BYTES, NONCE_BYTES, SALT_BYTES};
use serde::{Deserialize, Serialize};

use crate::config::Config;

pub const CONFIG_FILE: &str = "custody.toml";
pub const DB_FILE: &str = "custody.db";
pub const SEED_FILE: &str = "seed.json";
pub const SERVE_LOCK_FILE: &str = "serve.lock";
pub const PASSPHRASE_ENV: &str = "CUSTODY_PASSPHRASE";
const SEED_AAD: &[u8] = b"custody:seed:v1";
pub const PASSPHRASE_CHARS_MIN: usize = 12;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "protection", rename_all = "kebab-case", deny_unknown_fields)]
enum SeedFile {
    Passphrase {
        version: u32,
        kdf_salt: String,
        kdf_memory_kib: u32,
        kdf_iterations: u32,
        kdf_parallelism: u32,
        sealed_mnemonic: String,
    },
    InsecureDev {
        version: u32,
        dev_key: String,
        sealed_mnemonic: String,
    },
}

pub struct DataDir {
    pub root: PathBuf,
}

/// What `open_keys` gives the rest of the program.
pub struct Unlocked {
    pub sealing: SealingKey,
    pub mnemonic: Mnemonic,
    pub insecure: bool,
}

fn write_private(path: &Path, contents: &[u8]) -> Result<(), String> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.write_all(contents)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.sync_all()
        .map_err(|e| format!("cannot sync {}: {e}", path.display()))
}

impl DataDir {
    pub fn new(root: PathBuf) -> Self {
        DataDir { root }
    }

    pub fn config_path(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }
    pub fn db_path(&self) -> PathBuf {
        self.root.join(DB_FILE)
    }

    /// Takes the data dir for one `custody serve`: an exclusive lock on `serve.lock`, held
    /// until the returned file is dropped (or the process dies: the kernel releases it). A
    /// second `serve` on the same dir is refused: the server keeps state in memory that only
    /// holds with one writer process (the nonce set, `custody_http::nonces`). Other commands
    /// (credentials, ledger, treasury) do not take it and may run beside the server.
    pub fn lock_for_serve(&self) -> Result<fs::File, String> {
        let path = self.root.join(SERVE_LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(file),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(format!(
                "another custody serve is running on {} (it holds {})",
                self.root.display(),
                path.display()
            )),
            Err(e) => Err(format!("cannot lock {}: {e}", path.display())),
        }
    }
    pub fn seed_path(&self) -> PathBuf {
        self.root.join(SEED_FILE)
    }

    /// Refuses a data dir that already holds anything.
    pub fn check_free(&self) -> Result<(), String> {
        if self.root.exists() {
            let non_empty = fs::read_dir(&self.root)
                .map_err(|e| format!("cannot read {}: {e}", self.root.display()))?
                .next()
                .is_some();
            if non_empty {
                return Err(format!(
                    "{} already exists and is not empty; refusing to overwrite it",
                    self.root.display()
                ));
            }
        }
        Ok(())
    }

    /// A sibling directory to build a new data dir in before it is moved into place.
    pub fn staging(&self) -> DataDir {
        let name = self
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parent = self
            .root
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        DataDir::new(parent.join(format!(".{name}.init-{}", std::process::id())))
    }

    /// Moves this (complete) data dir to `target`, which must not exist or be empty.
    pub fn move_to(&self, target: &DataDir) -> Result<(), String> {
        if target.root.exists() {
            fs::remove_dir(&target.root)
                .map_err(|e| format!("cannot replace {}: {e}", target.root.display()))?;
        }
        fs::rename(&self.root, &target.root).map_err(|e| {
            format!(
                "cannot move {} to {}: {e}",
                self.root.display(),
                target.root.display()
            )
        })
    }

    /// Creates the directory, owner-only; refuses one that holds anything.
    pub fn create(&self) -> Result<(), String> {
        self.check_free()?;
        fs::create_dir_all(&self.root)
            .map_err(|e| format!("cannot create {}: {e}", self.root.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&self.root, fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot restrict {}: {e}", self.root.display()))?;
        }
        Ok(())
    }

    pub fn write_config(&self, config: &Config) -> Result<(), String> {
        let text = toml::to_string_pretty(config).map_err(|e| e.to_string())?;
        let header = "# custody configuration. Every key is documented in docs/operations.md.\n\n";
        write_private(&self.config_path(), format!("{header}{text}").as_bytes())
    }

    pub fn load_config(&self) -> Result<Config, String> {
        let path = self.config_path();
        let text = fs::read_to_string(&path).map_err(|e| {
            format!(
                "cannot read {}: {e} (run `custody init` first)",
                path.display()
            )
        })?;
        let mut config: Config =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        config.apply_env();
        config
            .validate()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(config)
    }

    /// Seals `mnemonic` into `seed.json`. With `passphrase` = `None` the dev key is stored in
    /// clear beside it.
    pub fn write_seed(
        &self,
        mnemonic: &Mnemonic,
        passphrase: Option<&str>,
        entropy: &dyn Entropy,
    ) -> Result<SealingKey, String> {
        let mut nonce = [0u8; NONCE_BYTES];
        entropy.fill(&mut nonce);
        let (file, key) = match passphrase {
            Some(p) => {
                let mut salt = [0u8; SALT_BYTES];
                entropy.fill(&mut salt);
                let params = KdfParams::default();
                let key = SealingKey::from_passphrase(p.as_bytes(), &salt, params)
                    .map_err(|e| e.to_string())?;
                let sealed = key.seal(mnemonic.expose_phrase().as_bytes(), SEED_AAD, &nonce);
                let file = SeedFile::Passphrase {
                    version: 1,
                    kdf_salt: hex::encode(salt),
                    kdf_memory_kib: params.memory_kib,
                    kdf_iterations: params.iterations,
                    kdf_parallelism: params.parallelism,
                    sealed_mnemonic: hex::encode(sealed),
                };
                (file, key)
            }
            None => {
                let mut raw = [0u8; KEY_BYTES];
                entropy.fill(&mut raw);
                let key = SealingKey::from_bytes(raw);
                let sealed = key.seal(mnemonic.expose_phrase().as_bytes(), SEED_AAD, &nonce);
                let file = SeedFile::InsecureDev {
                    version: 1,
                    dev_key: hex::encode(raw),
                    sealed_mnemonic: hex::encode(sealed),
                };
                (file, key)
            }
        };
        let json = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        write_private(&self.seed_path(), &json)?;
        Ok(key)
    }

    /// Reads `seed.json` and unlocks it: with `CUSTODY_PASSPHRASE` for a protected seed.
    pub fn unlock(&self, passphrase: Option<&str>) -> Result<Unlocked, String> {
        let path = self.seed_path();
        let text = fs::read(&path).map_err(|e| {
            format!(
                "cannot read {}: {e} (run `custody init` first)",
                path.display()
            )
        })?;
        let file: SeedFile = serde_json::from_slice(&text)
            .map_err(|e| format!("{} is not a seed file: {e}", path.display()))?;
        let bad = |what: &str| format!("{}: {what}", path.display());
        let (key, sealed, insecure) = match file {
            SeedFile::Passphrase {
                kdf_salt,
                kdf_memory_kib,
                kdf_iterations,
                kdf_parallelism,
                sealed_mnemonic,
                ..
            } => {
                let passphrase = passphrase.ok_or_else(|| {
                    format!("the seed is protected by a passphrase: set {PASSPHRASE_ENV}")
                })?;
                let salt: [u8; SALT_BYTES] = hex::decode(kdf_salt)
                    .ok()
                    .and_then(|s| s.try_into().ok())
                    .ok_or_else(|| bad("bad kdf_salt"))?;
                let params = KdfParams {
                    memory_kib: kdf_memory_kib,
                    iterations: kdf_iterations,
                    parallelism: kdf_parallelism,
                };
                let key = SealingKey::from_passphrase(passphrase.as_bytes(), &salt, params)
                    .map_err(|e| bad(&e.to_string()))?;
                (key, sealed_mnemonic, false)
            }
            SeedFile::InsecureDev {
                dev_key,
                sealed_mnemonic,
                ..
            } => {
                let raw: [u8; KEY_BYTES] = hex::decode(dev_key)
                    .ok()
                    .and_then(|k| k.try_into().ok())
                    .ok_or_else(|| bad("bad dev_key"))?;
                (SealingKey::from_bytes(raw), sealed_mnemonic, true)
            }
        };
        let sealed = hex::decode(sealed).map_err(|_| bad("bad sealed_mnemonic"))?;
        let phrase = key
            .open(&sealed, SEED_AAD)
            .map_err(|_| "the passphrase is wrong or the seed file is damaged".to_string())?;
        let text = std::str::from_utf8(phrase.expose())
            .map_err(|_| bad("the sealed mnemonic is not text"))?;
        let mnemonic = Mnemonic::parse(text).map_err(|e| bad(&e.to_string()))?;
        Ok(Unlocked {
            sealing: key,
            mnemonic,
            insecure,
        })
    }
}

/// The public fingerprint of a seed: its BSC address at `m/44'/60'/0'/0/0`.
pub fn fingerprint(mnemonic: &Mnemonic) -> Result<String, String> {
    let keys = custody_core::keys::HdKeys::from_mnemonic(mnemonic).map_err(|e| e.to_string())?;
    let path = custody_core::ports::signer::HdPath {
        network: custody_core::Network::Bsc,
        account: 0,
        index: 0,
    };
    Ok(keys.address(&path).map_err(|e| e.to_string())?.0)
}
