//! Per-credential fixed-window rate limiting (decisions §5: 60 s windows).
//!
//! [`RateLimit`] is what the HTTP layer asks. [`RateLimiter`] counts in memory: right for the
//! embedded store, where one process serves (a restart resetting the windows is harmless, and a
//! store write per request only to count would cost an fsync for nothing). Several instances on
//! a shared store count in the database instead (decisions §16: the limit holds across
//! instances), with a counter of their own (`custody-store-postgres`'s `PgRateLimiter`).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use uuid::Uuid;

use crate::time::Timestamp;

pub const WINDOW_S: i64 = 60;

/// A quote asks the chain for several figures (the gas price, the destination's code, a gas
/// estimate, the router's price): each costs this many ordinary requests of a credential's
/// budget, so the quotes of a window are at most its rate limit divided by this.
pub const QUOTE_COST: u32 = 5;

/// Quotes a credential may always ask for in a window, however low its rate limit.
pub const QUOTES_PER_WINDOW_MIN: u32 = 10;

/// How many quotes (withdrawal and swap quotes together) a credential with `rate_limit`
/// requests per window may ask for in one window.
pub fn quote_budget(rate_limit: u32) -> u32 {
    (rate_limit / QUOTE_COST).max(QUOTES_PER_WINDOW_MIN)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until the window resets (for `Retry-After`), at least 1.
    pub reset_after_s: u64,
}

/// The window of `now`: its number and the seconds until it ends (at least 1).
pub fn window_of(now: Timestamp) -> (i64, u64) {
    let now_s = now.unix_seconds();
    let window = now_s.div_euclid(WINDOW_S);
    let reset_after_s = u64::try_from((window + 1) * WINDOW_S - now_s)
        .unwrap_or(1)
        .max(1);
    (window, reset_after_s)
}

/// A credential's rate limit, wherever its windows are counted.
#[async_trait]
pub trait RateLimit: Send + Sync {
    /// The current figures of `credential`'s window without counting a request.
    async fn peek(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision;
    /// Counts one request of `credential` at `now` against `limit`.
    async fn check(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision;
    /// Gives back a request `check` counted at `now` that was not the credential's own.
    async fn refund(&self, credential: Uuid, now: Timestamp);
}

#[async_trait]
impl RateLimit for RateLimiter {
    async fn peek(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision {
        RateLimiter::peek(self, credential, limit, now)
    }

    async fn check(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision {
        RateLimiter::check(self, credential, limit, now)
    }

    async fn refund(&self, credential: Uuid, now: Timestamp) {
        RateLimiter::refund(self, credential, now);
    }
}

#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<Uuid, (i64, u32)>>,
}

impl RateLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current figures of `credential`'s window without counting a request (for answers to
    /// requests that were refused before they counted).
    pub fn peek(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision {
        let now_s = now.unix_seconds();
        let window = now_s.div_euclid(WINDOW_S);
        let reset_after_s = u64::try_from((window + 1) * WINDOW_S - now_s)
            .unwrap_or(1)
            .max(1);
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let used = windows
            .get(&credential)
            .filter(|(w, _)| *w == window)
            .map_or(0, |(_, n)| *n);
        RateDecision {
            allowed: used < limit,
            limit,
            remaining: limit.saturating_sub(used),
            reset_after_s,
        }
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

    /// Gives back a request that `check` counted at `now` and that turned out not to be the
    /// credential's own (a replayed nonce): whoever replays a captured request must not use up
    /// its owner's window. Nothing to give back once that window has passed.
    pub fn refund(&self, credential: Uuid, now: Timestamp) {
        let window = now.unix_seconds().div_euclid(WINDOW_S);
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = windows.get_mut(&credential) {
            if entry.0 == window {
                entry.1 = entry.1.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_cost_a_fifth_of_the_rate_limit_with_a_floor() {
        assert_eq!(quote_budget(600), 120);
        assert_eq!(quote_budget(100_000), 20_000);
        assert_eq!(quote_budget(20), QUOTES_PER_WINDOW_MIN);
        assert_eq!(quote_budget(0), QUOTES_PER_WINDOW_MIN);
    }

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

    #[test]
    fn a_refund_gives_back_one_request_of_the_same_window_only() {
        let rl = RateLimiter::new();
        let id = Uuid::nil();
        let t = Timestamp::from_unix_millis(120_000);
        rl.check(id, 3, t);
        rl.check(id, 3, t);
        rl.refund(id, t.plus_seconds(5));
        assert_eq!(rl.peek(id, 3, t).remaining, 2);
        rl.refund(id, t);
        rl.refund(id, t);
        assert_eq!(rl.peek(id, 3, t).remaining, 3, "never below zero used");
        rl.check(id, 3, t);
        rl.refund(id, t.plus_seconds(60));
        assert_eq!(
            rl.peek(id, 3, t).remaining,
            2,
            "a refund in the next window leaves this one alone"
        );
        rl.refund(Uuid::max(), t);
    }
}
