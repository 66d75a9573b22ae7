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

/// A deterministic generator (SplitMix64) for the seeded request mutators: a failure names its
/// seed, and `CUSTODY_RELIABILITY_SEED` replays it.
pub struct Rng(u64);

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
        (Rng(seed), seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next_u64() % u64::try_from(n).unwrap()).unwrap()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}
