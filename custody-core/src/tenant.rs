//! Tenant ids as they cross the ports: a validated newtype, so a store query or a record can
//! only be keyed by a tenant id that passed the same rule as the operator's `--tenant`.

use std::fmt;
use std::ops::Deref;

use serde::Serialize;

use crate::error::PortError;

/// Largest tenant id, in characters.
pub const TENANT_CHARS_MAX: usize = 64;

/// Tenant ids are short, stable identifiers chosen by the operator: 1 to 64 of
/// `A-Z a-z 0-9 - _ .`.
pub fn valid_tenant_id(tenant: &str) -> bool {
    (1..=TENANT_CHARS_MAX).contains(&tenant.len())
        && tenant
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// A valid tenant id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TenantId(String);

impl TenantId {
    /// Checks `s` against [`valid_tenant_id`].
    pub fn parse(s: &str) -> Result<Self, String> {
        if valid_tenant_id(s) {
            Ok(TenantId(s.to_owned()))
        } else {
            Err(format!(
                "a tenant id is 1 to {TENANT_CHARS_MAX} of A-Z a-z 0-9 - _ . (got {s:?})"
            ))
        }
    }

    /// A tenant id read back from the store; one that is not valid means the record is
    /// damaged (a permanent port error).
    pub fn from_stored(s: String) -> Result<Self, PortError> {
        if valid_tenant_id(&s) {
            Ok(TenantId(s))
        } else {
            Err(PortError::permanent(
                "store",
                format!("bad stored tenant id {s:?}"),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for TenantId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for TenantId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for TenantId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<&TenantId> for TenantId {
    fn eq(&self, other: &&TenantId) -> bool {
        self == *other
    }
}

impl From<TenantId> for String {
    fn from(t: TenantId) -> String {
        t.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_ids_are_made() {
        assert_eq!(
            TenantId::parse("acme-1.eu_2").unwrap().as_str(),
            "acme-1.eu_2"
        );
        for bad in ["", "a b", "ümlaut", "x/y", &"a".repeat(65)] {
            assert!(TenantId::parse(bad).is_err(), "{bad:?}");
        }
        assert!(TenantId::from_stored("bad id".into()).is_err());
    }
}
