//! Per-credential fixed-window rate limiting (decisions §5: 60 s windows).
//!
//! In memory on purpose: the limit protects this process, a restart resetting the windows is
//! harmless, and a store write per request only to count would cost an fsync for nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use uuid::Uuid;

use crate::time::Timestamp;

pub const WINDOW_S: i64 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until the window resets (for `Retry-After`), at least 1.
    pub reset_after_s: u64,
}

#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<Uuid, (i64, u32)>>,
}

impl RateLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one request of `credential` at `now` against `limit`.
    pub fn check(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision {
        let now_s = now.unix_seconds();
        let window = now_s.div_euclid(WINDOW_S);
        let reset_after_s = u64::try_from((window + 1) * WINDOW_S - now_s)
            .unwrap_or(1)
            .max(1);
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() > 100_000 {
            windows.retain(|_, (w, _)| *w == window);
        }
        let entry = windows.entry(credential).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        if entry.1 >= limit {
            return RateDecision {
                allowed: false,
                limit,
                remaining: 0,
                reset_after_s,
            };
        }
        entry.1 += 1;
        RateDecision {
            allowed: true,
            limit,
            remaining: limit - entry.1,
            reset_after_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_down_then_refuses_then_resets() {
        let rl = RateLimiter::new();
        let id = Uuid::nil();
        let t = Timestamp::from_unix_millis(120_000);
        assert_eq!(rl.check(id, 2, t).remaining, 1);
        assert_eq!(rl.check(id, 2, t).remaining, 0);
        let refused = rl.check(id, 2, t.plus_seconds(10));
        assert!(!refused.allowed);
        assert_eq!(refused.reset_after_s, 50);
        assert!(rl.check(id, 2, t.plus_seconds(60)).allowed);
    }
}
