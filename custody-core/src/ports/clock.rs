//! Time and randomness, injected so the core is deterministic under test.

use crate::time::Timestamp;

/// Wall-clock time.
///
/// MUST return UTC Unix time. MAY go backwards slightly (NTP); the core tolerates that: the
/// signature window is symmetric and rate-limit windows are keyed by the value returned.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// Cryptographically secure randomness (ids, nonces of our own, secrets, seeds).
///
/// MUST be a CSPRNG seeded from the operating system. MUST NOT fail silently: an adapter that
/// cannot read entropy panics rather than return predictable bytes.
pub trait Entropy: Send + Sync {
    fn fill(&self, buf: &mut [u8]);

    /// A new record id. The default is random (version 4); a production source may order ids
    /// by creation time (version 7: 48 bits of unix milliseconds, then 74 random bits), which
    /// keeps a store's id indexes appending at their end. Ids are never secrets: whoever holds
    /// one still needs the tenant's signed request to reach its record.
    fn new_id(&self) -> uuid::Uuid {
        let mut bytes = [0u8; 16];
        self.fill(&mut bytes);
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

/// A new record id from the given entropy source ([`Entropy::new_id`]).
pub fn new_uuid(entropy: &dyn Entropy) -> uuid::Uuid {
    entropy.new_id()
}
