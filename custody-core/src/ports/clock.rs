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
}

/// A random (version 4) UUID from the given entropy source.
pub fn new_uuid(entropy: &dyn Entropy) -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    entropy.fill(&mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}
