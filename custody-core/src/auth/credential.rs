//! API credentials: who is calling, for which tenant, with which rights.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use crate::error::PortError;
use crate::secret::Secret;
use crate::time::Timestamp;
use crate::vault::{Sealed, Vault};

/// Rights of a credential (decisions §5). Admin rights are a separate flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    CatalogRead,
    WalletsRead,
    WalletsWrite,
    DepositsRead,
    WithdrawalsRead,
    WithdrawalsWrite,
    SwapsRead,
    SwapsWrite,
    TransfersWrite,
}

impl Scope {
    pub const ALL: [Scope; 9] = [
        Scope::CatalogRead,
        Scope::WalletsRead,
        Scope::WalletsWrite,
        Scope::DepositsRead,
        Scope::WithdrawalsRead,
        Scope::WithdrawalsWrite,
        Scope::SwapsRead,
        Scope::SwapsWrite,
        Scope::TransfersWrite,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::CatalogRead => "catalog:read",
            Scope::WalletsRead => "wallets:read",
            Scope::WalletsWrite => "wallets:write",
            Scope::DepositsRead => "deposits:read",
            Scope::WithdrawalsRead => "withdrawals:read",
            Scope::WithdrawalsWrite => "withdrawals:write",
            Scope::SwapsRead => "swaps:read",
            Scope::SwapsWrite => "swaps:write",
            Scope::TransfersWrite => "transfers:write",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|sc| sc.as_str() == s)
            .ok_or_else(|| format!("unknown scope {s:?}"))
    }
}

use crate::tenant::TenantId;
pub use crate::tenant::{valid_tenant_id, TENANT_CHARS_MAX};

/// A credential with its secrets decrypted (the store decrypts on read).
#[derive(Debug, Clone)]
pub struct Credential {
    pub id: Uuid,
    pub api_key: String,
    pub tenant: TenantId,
    pub scopes: BTreeSet<Scope>,
    pub admin: bool,
    /// Requests allowed per 60 s window.
    pub rate_limit: u32,
    /// The HMAC key: the UTF-8 bytes of the secret string shown once at creation.
    pub hmac_secret: Secret<Vec<u8>>,
    /// Argon2id PHC string of the PIN.
    pub pin_hash: Option<Secret<String>>,
    /// Raw TOTP key (RFC 6238).
    pub totp_secret: Option<Secret<Vec<u8>>>,
    /// Last TOTP time step accepted, so a code is accepted once.
    pub totp_last_step: Option<i64>,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

impl Credential {
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// A credential as the store keeps it: its HMAC and TOTP secrets sealed by the core.
#[derive(Debug, Clone)]
pub struct StoredCredential {
    pub id: Uuid,
    pub api_key: String,
    pub tenant: TenantId,
    pub scopes: BTreeSet<Scope>,
    pub admin: bool,
    pub rate_limit: u32,
    pub hmac_secret: Sealed,
    pub pin_hash: Option<Secret<String>>,
    pub totp_secret: Option<Sealed>,
    pub totp_last_step: Option<i64>,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

fn aad(id: &Uuid, field: &str) -> String {
    format!("credential:{id}:{field}")
}

impl Credential {
    /// The stored form, its secrets sealed and bound to this credential's id.
    pub fn seal(&self, vault: &Vault) -> StoredCredential {
        StoredCredential {
            id: self.id,
            api_key: self.api_key.clone(),
            tenant: self.tenant.clone(),
            scopes: self.scopes.clone(),
            admin: self.admin,
            rate_limit: self.rate_limit,
            hmac_secret: vault.seal(self.hmac_secret.expose(), &aad(&self.id, "hmac")),
            pin_hash: self.pin_hash.clone(),
            totp_secret: self
                .totp_secret
                .as_ref()
                .map(|s| vault.seal(s.expose(), &aad(&self.id, "totp"))),
            totp_last_step: self.totp_last_step,
            created_at: self.created_at,
            revoked_at: self.revoked_at,
        }
    }
}

impl StoredCredential {
    /// The credential with its secrets opened; a wrong key is a permanent port error.
    pub fn open(self, vault: &Vault) -> Result<Credential, PortError> {
        let hmac_secret = vault.open(&self.hmac_secret, &aad(&self.id, "hmac"))?;
        let totp_secret = match &self.totp_secret {
            Some(sealed) => Some(vault.open(sealed, &aad(&self.id, "totp"))?),
            None => None,
        };
        Ok(Credential {
            id: self.id,
            api_key: self.api_key,
            tenant: self.tenant,
            scopes: self.scopes,
            admin: self.admin,
            rate_limit: self.rate_limit,
            hmac_secret,
            pin_hash: self.pin_hash,
            totp_secret,
            totp_last_step: self.totp_last_step,
            created_at: self.created_at,
            revoked_at: self.revoked_at,
        })
    }
}

/// The credential with api key `api_key`, its secrets opened.
pub fn load_credential(
    repo: &mut dyn CredentialReads,
    vault: &Vault,
    api_key: &str,
) -> Result<Option<Credential>, PortError> {
    repo.credential_by_api_key(api_key)?
        .map(|stored| stored.open(vault))
        .transpose()
}

/// Persistence of credentials and used nonces. Secrets arrive sealed and leave sealed: the
/// store never sees them in clear.
pub trait CredentialRepo: CredentialReads {
    /// Stores a new credential. Fails if the api key exists.
    fn insert_credential(&mut self, credential: &StoredCredential) -> Result<(), PortError>;
    /// Marks the credential revoked; `Ok(false)` if there is no such active credential.
    fn revoke_credential(&mut self, api_key: &str, at: Timestamp) -> Result<bool, PortError>;
    /// Records `nonce` as used by `credential`; `Ok(false)` when it was used already. The
    /// uniqueness MUST be enforced by the store (a constraint), not by a prior read.
    fn use_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError>;
    /// Appends `nonce` to the nonce log of a store that one process alone writes
    /// (`super::nonce_set`): that process's nonce set has claimed it already, so the store checks
    /// nothing and only keeps it, cheaply (an append, not an insert on a random page of a key's
    /// b-tree), until its expiry; [`CredentialReads::visit_nonces`] gives it back at the next
    /// start. `Ok(true)` once kept. A store several processes share records it as
    /// [`Self::use_nonce`] does and answers `Ok(false)` when it was used already, so a caller
    /// wired to the log by mistake still refuses the replay.
    fn log_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError>;
    /// Appends a batch of claimed nonces to the log, each as [`Self::log_nonce`] does (what a
    /// shared store's `Ok(false)` would say is not asked here: only the log loop of a store one
    /// process writes calls it). A store may write them with fewer statements.
    fn log_nonces(&mut self, nonces: &[super::nonce_set::PendingNonce]) -> Result<(), PortError> {
        for n in nonces {
            self.log_nonce(n.credential, &n.nonce, n.expires_at)?;
        }
        Ok(())
    }
    /// Forgets nonces, used and logged, whose expiry has passed: at most `limit` of each kind,
    /// the earliest to expire first; returns how many in all. The caller runs it again while it
    /// forgets `limit` or more (as [`crate::idempotency::IdempotencyRepo::prune_idempotency`]).
    fn prune_nonces(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError>;
    /// Replaces the nonce fence (`super::nonce_set`): written with each batch of logged nonces,
    /// in the same transaction.
    fn put_nonce_fence(&mut self, fence: &super::nonce_set::NonceFence) -> Result<(), PortError>;
    /// Records the TOTP step just accepted; `Ok(false)` if a step at or after it was already
    /// recorded (the code was used).
    fn advance_totp_step(&mut self, credential: Uuid, step: i64) -> Result<bool, PortError>;
    /// The PIN/OTP attempts of `credential` (all zero when none were recorded). Read and put
    /// back by one write job (`second_factor::reserve`, `record`): the store MUST make that
    /// read-modify-write atomic against every other writer (one writer, or a row lock).
    fn second_factor_attempts(
        &mut self,
        credential: Uuid,
    ) -> Result<super::second_factor::Attempts, PortError>;
    fn put_second_factor_attempts(
        &mut self,
        credential: Uuid,
        attempts: &super::second_factor::Attempts,
    ) -> Result<(), PortError>;
}

pub trait CredentialReads {
    fn credential_by_api_key(
        &mut self,
        api_key: &str,
    ) -> Result<Option<StoredCredential>, PortError>;
    /// Every credential, oldest first (secrets sealed: a listing never needs them).
    fn list_credentials(&mut self) -> Result<Vec<StoredCredential>, PortError>;
    /// The nonce fence last written; `None` on a store that never had one.
    fn nonce_fence(&mut self) -> Result<Option<super::nonce_set::NonceFence>, PortError>;
    /// The latest expiry among the nonces [`CredentialRepo::use_nonce`] recorded; `None` when none is
    /// kept.
    fn latest_nonce_expiry(&mut self) -> Result<Option<Timestamp>, PortError>;
    /// Hands every nonce kept, used or logged, whose expiry is at or after `now` to `visit`,
    /// earliest expiry first (a nonce kept twice may come twice); returns how many. Read once
    /// at start-up by a process that alone writes the store, to fill its nonce set.
    fn visit_nonces(
        &mut self,
        now: Timestamp,
        visit: &mut dyn FnMut(Uuid, &str, Timestamp),
    ) -> Result<u64, PortError>;
    /// [`crate::ports::store::Store::credentials_version`] as this transaction sees it, so that a
    /// request authenticated from a cached credential can check, in its own transaction, that
    /// no credential changed since (one read transaction per request instead of two). `None`
    /// (the default): this store keeps no such number.
    fn credentials_version(&mut self) -> Result<Option<u64>, PortError> {
        Ok(None)
    }
}
