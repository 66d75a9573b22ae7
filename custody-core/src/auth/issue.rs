//! Issuing, showing and revoking credentials: one set of rules for the CLI and for
//! `/v1/admin/credentials` (decisions §1, §15).
//!
//! The HMAC secret and the TOTP key exist in clear only in [`Issued`], which the caller shows
//! once; everything that is stored or listed afterwards ([`CredentialView`]) says only whether
//! a PIN or TOTP is set.

use std::collections::BTreeSet;

use serde::Serialize;
use uuid::Uuid;

use super::credential::{Credential, Scope, StoredCredential};
use super::pin;
use crate::admin::AuditRecord;
use crate::error::{CoreResult, Refusal};
use crate::ports::clock::new_uuid;
use crate::ports::store::WriteTx;
use crate::ports::Entropy;
use crate::secret::Secret;
use crate::tenant::TenantId;
use crate::time::Timestamp;

/// Requests per 60 s window when none is asked for (decisions §5).
pub const RATE_LIMIT_DEFAULT: u32 = 600;
/// A window larger than this is a typo, not a plan: the limiter would never refuse.
pub const RATE_LIMIT_MAX: u32 = 1_000_000_000;
pub const PIN_CHARS_MIN: usize = 4;
pub const PIN_CHARS_MAX: usize = 64;
/// 160 bits, the key size RFC 4226 recommends for HMAC-SHA1.
const TOTP_KEY_BYTES: usize = 20;
/// 256 bits of HMAC key, shown as 64 hex characters.
const HMAC_SECRET_BYTES: usize = 32;
const API_KEY_RANDOM_BYTES: usize = 16;

/// What an operator asks for; every field already checked (see the `check_*` functions).
pub struct NewCredential {
    pub tenant: TenantId,
    pub scopes: BTreeSet<Scope>,
    pub admin: bool,
    pub rate_limit: u32,
    pub pin: Option<Secret<String>>,
    pub totp: bool,
}

/// A credential just made, with the secrets its holder is shown once.
pub struct Issued {
    pub credential: Credential,
    /// The HMAC secret as the holder types it (its UTF-8 bytes are the key).
    pub hmac_secret: Secret<String>,
}

/// Scopes from their names; each problem names its position (`scopes[2]`). Duplicates are
/// refused rather than merged: a list that repeats a name was probably meant to say another.
pub fn check_scopes(names: &[String]) -> Result<BTreeSet<Scope>, Vec<(String, String)>> {
    let mut scopes = BTreeSet::new();
    let mut issues = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match name.parse::<Scope>() {
            Ok(s) if !scopes.insert(s) => {
                issues.push((format!("scopes[{i}]"), format!("{name:?} is listed twice")))
            }
            Ok(_) => {}
            Err(_) => issues.push((
                format!("scopes[{i}]"),
                format!(
                    "unknown scope {name:?}; known: {}",
                    Scope::ALL.map(|s| s.as_str()).join(", ")
                ),
            )),
        }
    }
    if issues.is_empty() {
        Ok(scopes)
    } else {
        Err(issues)
    }
}

pub fn check_rate_limit(n: u64) -> Result<u32, String> {
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=RATE_LIMIT_MAX).contains(n))
        .ok_or_else(|| format!("must be an integer from 1 to {RATE_LIMIT_MAX}"))
}

pub fn check_pin(pin: &str) -> Result<(), String> {
    let n = pin.chars().count();
    if !(PIN_CHARS_MIN..=PIN_CHARS_MAX).contains(&n) {
        return Err(format!(
            "must be {PIN_CHARS_MIN} to {PIN_CHARS_MAX} characters"
        ));
    }
    if pin.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain spaces or control characters".into());
    }
    Ok(())
}

fn random_hex(entropy: &dyn Entropy, bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    entropy.fill(&mut buf);
    let out = hex::encode(&buf);
    zeroize::Zeroize::zeroize(&mut buf);
    out
}

/// Makes the credential: fresh id, api key, HMAC secret, TOTP key, and the PIN hashed
/// (Argon2id, about 19 MiB and tens of milliseconds: call it off async threads).
pub fn issue(
    request: NewCredential,
    entropy: &dyn Entropy,
    now: Timestamp,
) -> Result<Issued, String> {
    let pin_hash = match &request.pin {
        Some(p) => {
            check_pin(p.expose())?;
            let mut salt = [0u8; 16];
            entropy.fill(&mut salt);
            Some(Secret::new(pin::hash_pin(p.expose(), &salt)?))
        }
        None => None,
    };
    let totp_secret = request.totp.then(|| {
        let mut key = vec![0u8; TOTP_KEY_BYTES];
        entropy.fill(&mut key);
        Secret::new(key)
    });
    let hmac_secret = Secret::new(random_hex(entropy, HMAC_SECRET_BYTES));
    let credential = Credential {
        id: new_uuid(entropy),
        api_key: format!("ck_{}", random_hex(entropy, API_KEY_RANDOM_BYTES)),
        tenant: request.tenant,
        scopes: request.scopes,
        admin: request.admin,
        rate_limit: request.rate_limit,
        hmac_secret: Secret::new(hmac_secret.expose().as_bytes().to_vec()),
        pin_hash,
        totp_secret,
        totp_last_step: None,
        created_at: now,
        revoked_at: None,
    };
    Ok(Issued {
        credential,
        hmac_secret,
    })
}

/// The TOTP key as authenticator apps take it typed in: RFC 4648 base32 without padding.
pub fn totp_base32(key: &[u8]) -> String {
    data_encoding::BASE32_NOPAD.encode(key)
}

/// The `otpauth://` URI authenticator apps read from a QR code (Google Authenticator's
/// key-uri format), with the parameters of decisions §5 spelled out.
pub fn totp_uri(api_key: &str, key: &[u8]) -> String {
    format!(
        "otpauth://totp/custody:{api_key}?secret={}&issuer=custody&algorithm=SHA1&digits=6&period=30",
        totp_base32(key)
    )
}

impl Issued {
    /// The one answer that carries the secrets (the CLI prints it, the API returns it).
    pub fn shown_once(&self) -> serde_json::Value {
        let c = &self.credential;
        let mut out = serde_json::to_value(CredentialView::of_credential(c))
            .expect("a credential view serializes");
        out["hmac_secret"] = serde_json::json!(self.hmac_secret.expose());
        if let Some(key) = &c.totp_secret {
            out["totp_secret"] = serde_json::json!(totp_base32(key.expose()));
            out["totp_uri"] = serde_json::json!(totp_uri(&c.api_key, key.expose()));
        }
        out
    }
}

/// A credential as listings show it: what it may do, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredentialView {
    pub id: Uuid,
    pub api_key: String,
    pub tenant: String,
    pub scopes: Vec<&'static str>,
    pub admin: bool,
    pub rate_limit: u32,
    /// Whether `X-Service-Pin` is required where decisions §5 asks for it.
    pub pin: bool,
    pub totp: bool,
    /// `active` or `revoked`.
    pub status: &'static str,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

impl CredentialView {
    #[allow(clippy::too_many_arguments)]
    fn build(
        id: Uuid,
        api_key: &str,
        tenant: &TenantId,
        scopes: &BTreeSet<Scope>,
        admin: bool,
        rate_limit: u32,
        pin: bool,
        totp: bool,
        created_at: Timestamp,
        revoked_at: Option<Timestamp>,
    ) -> Self {
        CredentialView {
            id,
            api_key: api_key.to_owned(),
            tenant: tenant.as_str().to_owned(),
            scopes: scopes.iter().map(|s| s.as_str()).collect(),
            admin,
            rate_limit,
            pin,
            totp,
            status: if revoked_at.is_some() {
                "revoked"
            } else {
                "active"
            },
            created_at,
            updated_at: revoked_at.unwrap_or(created_at),
            revoked_at,
        }
    }

    pub fn of(c: &StoredCredential) -> Self {
        Self::build(
            c.id,
            &c.api_key,
            &c.tenant,
            &c.scopes,
            c.admin,
            c.rate_limit,
            c.pin_hash.is_some(),
            c.totp_secret.is_some(),
            c.created_at,
            c.revoked_at,
        )
    }

    pub fn of_credential(c: &Credential) -> Self {
        Self::build(
            c.id,
            &c.api_key,
            &c.tenant,
            &c.scopes,
            c.admin,
            c.rate_limit,
            c.pin_hash.is_some(),
            c.totp_secret.is_some(),
            c.created_at,
            c.revoked_at,
        )
    }
}

/// Stores a credential issued by `actor`, with its audit record, in the caller's transaction.
/// The audit record names what the credential may do, never a secret.
pub fn record_issued(
    tx: &mut dyn WriteTx,
    audit_id: Uuid,
    actor: &str,
    stored: &StoredCredential,
    now: Timestamp,
) -> CoreResult<()> {
    tx.insert_credential(stored)?;
    let view = CredentialView::of(stored);
    tx.append_audit(&AuditRecord {
        id: audit_id,
        actor: actor.to_owned(),
        action: "credential.create".into(),
        target: stored.api_key.clone(),
        old_value: None,
        new_value: Some(serde_json::json!({
            "id": view.id,
            "tenant": view.tenant,
            "scopes": view.scopes,
            "admin": view.admin,
            "rate_limit": view.rate_limit,
            "pin": view.pin,
            "totp": view.totp,
        })),
        reason: "credential issued".into(),
        created_at: now,
    })?;
    Ok(())
}

/// Checks the reason of a revocation before anything else is (second factors included):
/// trimmed, 1 to 500 characters. Returns the trimmed reason.
pub fn check_revoke_reason(reason: &str) -> Result<&str, Refusal> {
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().count() > 500 {
        return Err(Refusal::validation("reason", "must be 1 to 500 characters"));
    }
    Ok(reason)
}

/// How an operator names the credential to revoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialRef {
    ApiKey(String),
    Id(Uuid),
}

/// What the audit trail records when an operator gives no reason.
pub const REVOKE_REASON_DEFAULT: &str = "revoked by an operator";

/// Revokes the credential named by `which`, with its audit record, in the caller's
/// transaction. Its next request is refused (authentication reads the credential on every
/// request). Revoking a revoked credential changes nothing and writes no second record (a
/// retried request is not a second decision); an unknown key is a 404.
pub fn revoke(
    tx: &mut dyn WriteTx,
    audit_id: Uuid,
    actor: &str,
    which: &CredentialRef,
    reason: &str,
    now: Timestamp,
) -> CoreResult<CredentialView> {
    let reason = check_revoke_reason(reason)?;
    let found = match which {
        CredentialRef::ApiKey(key) => tx.credential_by_api_key(key)?,
        // Credentials are few (an operator makes each): no index by id is needed.
        CredentialRef::Id(id) => tx.list_credentials()?.into_iter().find(|c| c.id == *id),
    };
    let Some(stored) = found else {
        return Err(Refusal::not_found("credential").into());
    };
    let api_key = stored.api_key.clone();
    let api_key = api_key.as_str();
    if stored.revoked_at.is_some() {
        return Ok(CredentialView::of(&stored));
    }
    if !tx.revoke_credential(api_key, now)? {
        return Err(crate::error::CoreError::Invariant(
            "an active credential could not be revoked in the same transaction".into(),
        ));
    }
    tx.append_audit(&AuditRecord {
        id: audit_id,
        actor: actor.to_owned(),
        action: "credential.revoke".into(),
        target: api_key.to_owned(),
        old_value: Some(serde_json::json!({ "status": "active" })),
        new_value: Some(serde_json::json!({ "status": "revoked", "revoked_at": now })),
        reason: reason.to_owned(),
        created_at: now,
    })?;
    Ok(CredentialView::of(&StoredCredential {
        revoked_at: Some(now),
        ..stored
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_name_each_bad_entry_by_position() {
        let names: Vec<String> = ["wallets:read", "nope", "wallets:read"]
            .map(String::from)
            .to_vec();
        let issues = check_scopes(&names).unwrap_err();
        assert_eq!(
            issues.iter().map(|i| i.0.as_str()).collect::<Vec<_>>(),
            ["scopes[1]", "scopes[2]"]
        );
        assert_eq!(
            check_rate_limit(0).unwrap_err(),
            check_rate_limit(u64::from(RATE_LIMIT_MAX) + 1).unwrap_err()
        );
        assert_eq!(check_rate_limit(600), Ok(600));
        assert!(
            check_pin("12 4").is_err() && check_pin("123").is_err() && check_pin("1234").is_ok()
        );
    }
}
