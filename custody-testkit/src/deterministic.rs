//! Randomness and time that a test controls: the same run gives the same ids and times.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use custody_core::ports::{Clock, Entropy};
use custody_core::time::Timestamp;

/// Distinct, repeatable bytes: every `fill` differs from the one before. Enough for ids and
/// nonces in tests; never for keys.
#[derive(Debug)]
pub struct CountingEntropy(AtomicU64);

impl CountingEntropy {
    pub fn new(seed: u64) -> Self {
        CountingEntropy(AtomicU64::new(seed))
    }
}

impl Default for CountingEntropy {
    fn default() -> Self {
        CountingEntropy::new(1)
    }
}

impl Entropy for CountingEntropy {
    fn fill(&self, buf: &mut [u8]) {
        let n = self.0.fetch_add(1, Ordering::Relaxed).to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = n[i % 8] ^ u8::try_from(i % 251).unwrap_or(0);
        }
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(now: Timestamp) -> Self {
        ManualClock(AtomicI64::new(now.unix_millis()))
    }

    pub fn set(&self, now: Timestamp) {
        self.0.store(now.unix_millis(), Ordering::SeqCst);
    }

    pub fn advance_millis(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_entropy_never_repeats_and_the_clock_moves_when_told() {
        let e = CountingEntropy::default();
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        e.fill(&mut a);
        e.fill(&mut b);
        assert_ne!(a, b);
        let c = ManualClock::new(Timestamp::from_unix_millis(5));
        c.advance_millis(10);
        assert_eq!(c.now(), Timestamp::from_unix_millis(15));
        c.set(Timestamp::from_unix_millis(1));
        assert_eq!(c.now(), Timestamp::from_unix_millis(1));
    }
}
