//! The two profiles of the reliability suite (docs/reliability.md): the short one runs with the
//! README's test command; `CUSTODY_RELIABILITY=long` runs the long one, on demand.

/// Whether the long profile was asked for.
pub fn long() -> bool {
    std::env::var("CUSTODY_RELIABILITY").is_ok_and(|v| v == "long")
}

/// `short` in the short profile, `long` in the long one.
pub fn pick<T>(short: T, long: T) -> T {
    if self::long() {
        long
    } else {
        short
    }
}

/// The seeded generator of the request mutators (the testkit's SplitMix64): a failure names its
/// seed, and `CUSTODY_RELIABILITY_SEED` replays it.
pub struct Rng(custody_testkit::Rng);

impl Rng {
    /// Seeded from `CUSTODY_RELIABILITY_SEED`, else from the clock; returns the seed used too.
    pub fn from_env() -> (Rng, u64) {
        let seed = std::env::var("CUSTODY_RELIABILITY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap();
                t.as_secs().rotate_left(32) ^ u64::from(t.subsec_nanos())
            });
        (Rng(custody_testkit::Rng::new(seed)), seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next_u64() % u64::try_from(n).unwrap()).unwrap()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}
