//! The nonces one process has seen, for a store that only this process writes (the embedded
//! SQLite file): reads' nonces are checked in memory and logged to the store in batches, and a
//! durable fence keeps the rule "a nonce accepted before a crash is refused after it" without a
//! write per read.
//!
//! The rule, and why it holds. A nonce is accepted in memory alone (the fast path) only when its
//! request's timestamp `ts` lies within `[fence_low, fence_high]` as last made durable: `ts` is
//! at most the durable `fence_high`, and at least `now - FAST_LAG_S` when `fence_low` was last
//! written (a flush of the log writes `fence_low` as its own start minus `FAST_LAG_S`, together
//! with every nonce accepted before that start). So when the process dies, every nonce it
//! accepted that the log does not hold has `ts` in the durable `[fence_low, fence_high]`; the
//! next process refuses every request signed in that band (`REPLAY_DETECTED`: it cannot be told
//! apart from a replay) and checks every other nonce against the nonces it read back from the
//! store at start (below). A signature covers the
//! timestamp, so a replay carries its original `ts` and meets the same rule. The band is a few
//! seconds wide and ends about a second after the crash: only requests signed around the crash
//! are refused, and a clean stop (every nonce logged) leaves no band.
//!
//! The band a flush writes starts at that flush's own time, which may be later than the time a
//! request read (it waited for that flush, or the clock stepped back): so the fast path also
//! needs `ts` at or above the highest low edge ever handed to a flush, judged under the same
//! lock as the take. And the last flush of a clean stop closes the set first: a request still
//! served after it goes to the store, so the clean mark never covers a nonce only in memory.
//!
//! Everything else goes to the store synchronously (the slow path): a timestamp outside the
//! band (a client whose clock lags or leads), anything signed before this process could know
//! the store's nonces (`ts <= fast_after`), and every request but a read (the caller passes
//! `store_only`): a mutation's nonce is written in its command's transaction or before it runs. Each path first claims the nonce here, so two paths can never
//! both accept one nonce within the process.
//!
//! Where accepted nonces are kept. A flush appends the reads' nonces to the store's nonce log
//! (`CredentialRepo::log_nonce`), and a mutation's command appends its own in its transaction:
//! appends, where a table keyed by the nonce writes a random page of its b-tree per nonce. The
//! log checks nothing: this set does. A new process reads back every nonce the store keeps and
//! has not seen expire, logged or written through the store's unique key
//! (`CredentialReads::visit_nonces`, [`NonceSet::remember`]), before it answers any request; so
//! the set holds every nonce used within its expiry, whatever timestamp a request that reuses
//! it carries. The one exception is the band of a crash: a nonce accepted in memory and not
//! logged yet is refused after the crash only with its own timestamp (the replayed request),
//! which the band covers; its owner, who holds the secret, could sign it again with a later
//! timestamp.
//!
//! The set keeps a keyed 128-bit hash per nonce (two SipHash keys drawn per process), not the
//! nonce, until the nonce's expiry: about 55 bytes per request of the last five minutes (1,000
//! requests/s: 17 MB; 30,000/s sustained: about 1 GB), the same horizon as the store's rows.

use std::collections::hash_map::RandomState;
use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Mutex;

use uuid::Uuid;

use crate::time::Timestamp;

/// How far behind our clock a timestamp may be and still take the fast path.
pub const FAST_LAG_S: i64 = 2;
/// How far ahead of our clock the fence is raised for a request (a client a little ahead).
pub const FAST_LEAD_S: i64 = 1;

/// The fence as the store keeps it: after an unclean stop, requests signed within
/// `[low_s, high_s]` are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonceFence {
    pub low_s: i64,
    pub high_s: i64,
    /// Every nonce accepted was logged before the process stopped: no band to refuse.
    pub clean: bool,
}

/// A nonce accepted on the fast path and not yet in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingNonce {
    pub credential: Uuid,
    pub nonce: String,
    pub expires_at: Timestamp,
}

/// What the caller must do with a request's nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted; it is logged with the next flush.
    Accepted,
    /// Used before (or signed inside the band of a crash): `REPLAY_DETECTED`.
    Replay,
    /// Claimed here, and not used before (the set holds every nonce kept); it must be durable
    /// before the request goes on. A mutation appends it to the log in its own transaction;
    /// anything else writes it through the store's unique key in a write of its own (whose
    /// answer is final).
    Store,
    /// Not claimed: the fence must first be raised to `ts` (durably); then ask again.
    RaiseFence(i64),
}

struct Inner {
    seen: HashSet<u128>,
    /// Hashes with their expiry (unix s), oldest first, for pruning.
    expiries: VecDeque<(i64, u128)>,
    pending: Vec<PendingNonce>,
    durable_high: i64,
    /// Fast path only for `ts` above this: what the store's unique key holds from earlier
    /// processes.
    fast_after: i64,
    /// The band of the previous process's crash, refused outright.
    refused: Option<(i64, i64)>,
    /// The highest fence low edge handed to a flush. A nonce accepted in memory after that
    /// take is logged only by a later flush, so it must lie in the band of the fence the taken
    /// flush makes durable: whatever the caller's clock said (a `now` read before a wait, or
    /// a clock stepped back), nothing below this edge takes the fast path.
    band_low: i64,
    /// The last flush (a clean stop) took everything: from then on every nonce goes to the
    /// store, so the clean mark it writes cannot miss a nonce accepted after it.
    closed: bool,
}

pub struct NonceSet {
    keys: (RandomState, RandomState),
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for NonceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonceSet").finish_non_exhaustive()
    }
}

impl NonceSet {
    /// `previous` is the fence the store holds (none on a new store); `latest_expiry` the latest
    /// expiry among the nonces the store decided through its unique key (a nonce's timestamp is
    /// at most its expiry minus the window). Nothing signed at or before either takes the fast
    /// path (a margin: the nonces the store keeps are also read back with [`Self::remember`]).
    pub fn new(previous: Option<NonceFence>, latest_expiry: Option<Timestamp>, now_s: i64) -> Self {
        let from_store = latest_expiry.map_or(i64::MIN, |e| {
            e.unix_seconds() - super::TIMESTAMP_WINDOW_S - 1
        });
        let fast_after = from_store
            .max(previous.map_or(i64::MIN, |f| f.high_s))
            // Not before this process could have claimed anything itself.
            .max(now_s - FAST_LAG_S - 1);
        let refused = previous
            .filter(|f| !f.clean && f.low_s <= f.high_s)
            .map(|f| (f.low_s, f.high_s));
        NonceSet {
            keys: (RandomState::new(), RandomState::new()),
            inner: Mutex::new(Inner {
                seen: HashSet::new(),
                expiries: VecDeque::new(),
                pending: Vec::new(),
                durable_high: fast_after,
                fast_after,
                refused,
                band_low: i64::MIN,
                closed: false,
            }),
        }
    }

    fn key(&self, credential: Uuid, nonce: &str) -> u128 {
        let a = self.keys.0.hash_one((credential, nonce));
        let b = self.keys.1.hash_one((credential, nonce));
        (u128::from(a) << 64) | u128::from(b)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The request signed at `ts` with this nonce, received at `now_s`. `store_only`: never the
    /// fast path (a mutation, or anything but a read; its nonce is written in the store before
    /// it runs).
    pub fn check(
        &self,
        credential: Uuid,
        nonce: &str,
        ts: i64,
        expires_at: Timestamp,
        now_s: i64,
        store_only: bool,
    ) -> Verdict {
        let key = self.key(credential, nonce);
        let mut inner = self.lock();
        if inner.refused.is_some_and(|(lo, hi)| lo <= ts && ts <= hi) {
            return Verdict::Replay;
        }
        if inner.seen.contains(&key) {
            return Verdict::Replay;
        }
        let fast = !store_only
            && !inner.closed
            && ts > inner.fast_after
            && ts >= inner.band_low
            && ts >= now_s - FAST_LAG_S;
        if fast && ts > inner.durable_high {
            if ts <= now_s + FAST_LEAD_S {
                return Verdict::RaiseFence(ts);
            }
            // A clock far ahead must not drag the fence (and a crash's band) along with it.
            return self.claim(&mut inner, key, expires_at, Verdict::Store);
        }
        if fast {
            inner.pending.push(PendingNonce {
                credential,
                nonce: nonce.to_owned(),
                expires_at,
            });
            return self.claim(&mut inner, key, expires_at, Verdict::Accepted);
        }
        self.claim(&mut inner, key, expires_at, Verdict::Store)
    }

    fn claim(&self, inner: &mut Inner, key: u128, expires_at: Timestamp, v: Verdict) -> Verdict {
        inner.seen.insert(key);
        inner.expiries.push_back((expires_at.unix_seconds(), key));
        v
    }

    /// A nonce of the store's log, read at start-up before any request (earliest expiry first,
    /// so pruning meets them in order): used until its expiry.
    pub fn remember(&self, credential: Uuid, nonce: &str, expires_at: Timestamp) {
        let key = self.key(credential, nonce);
        let mut inner = self.lock();
        if inner.seen.insert(key) {
            inner.expiries.push_back((expires_at.unix_seconds(), key));
        }
    }

    /// The fence's high end as durable now.
    pub fn durable_high(&self) -> i64 {
        self.lock().durable_high
    }

    /// Takes the nonces to log: the flush writes them with the fence it returns, then calls
    /// [`NonceSet::made_durable`]. `wanted_high` is the highest timestamp a waiting request
    /// needs; the fence never goes below what is durable. `last`: the final flush of a clean
    /// stop; the set closes (every later nonce goes to the store) before it hands anything out.
    pub fn take_pending(
        &self,
        wanted_high: i64,
        now_s: i64,
        last: bool,
    ) -> (Vec<PendingNonce>, NonceFence) {
        let mut inner = self.lock();
        inner.closed |= last;
        let pending = std::mem::take(&mut inner.pending);
        let low_s = now_s - FAST_LAG_S;
        inner.band_low = inner.band_low.max(low_s);
        let fence = NonceFence {
            low_s,
            high_s: inner.durable_high.max(wanted_high.min(now_s + FAST_LEAD_S)),
            clean: false,
        };
        (pending, fence)
    }

    /// The flush that took `fence` committed: requests up to its high end may take the fast path.
    pub fn made_durable(&self, fence: NonceFence) {
        let mut inner = self.lock();
        inner.durable_high = inner.durable_high.max(fence.high_s);
    }

    /// A flush failed: its nonces go back to be logged by the next one.
    pub fn restore_pending(&self, mut nonces: Vec<PendingNonce>) {
        let mut inner = self.lock();
        nonces.append(&mut inner.pending);
        inner.pending = nonces;
    }

    pub fn has_pending(&self) -> bool {
        !self.lock().pending.is_empty()
    }

    /// Forgets nonces expired at `now_s` (the store's pruner removes their rows likewise); ends
    /// the refused band once no request signed in it can pass the window any more.
    pub fn prune(&self, now_s: i64) {
        let mut inner = self.lock();
        while let Some(&(expiry, key)) = inner.expiries.front() {
            if expiry >= now_s {
                break;
            }
            inner.expiries.pop_front();
            inner.seen.remove(&key);
        }
        if inner
            .refused
            .is_some_and(|(_, hi)| hi + super::TIMESTAMP_WINDOW_S < now_s)
        {
            inner.refused = None;
        }
    }

    pub fn len(&self) -> usize {
        self.lock().seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn exp(ts: i64) -> Timestamp {
        Timestamp::from_unix_millis(0).plus_seconds(ts + 301)
    }

    fn fresh() -> NonceSet {
        NonceSet::new(None, None, NOW - 10)
    }

    #[test]
    fn a_read_waits_for_the_fence_then_is_accepted_once() {
        let s = fresh();
        let c = Uuid::from_u128(1);
        assert_eq!(
            s.check(c, "nonce-0000000001", NOW, exp(NOW), NOW, false),
            Verdict::RaiseFence(NOW)
        );
        let (pending, fence) = s.take_pending(NOW, NOW, false);
        assert!(pending.is_empty());
        assert_eq!(fence.high_s, NOW);
        s.made_durable(fence);
        assert_eq!(
            s.check(c, "nonce-0000000001", NOW, exp(NOW), NOW, false),
            Verdict::Accepted
        );
        assert_eq!(
            s.check(c, "nonce-0000000001", NOW, exp(NOW), NOW, false),
            Verdict::Replay
        );
        assert_eq!(
            s.check(c, "nonce-0000000001", NOW, exp(NOW), NOW, true),
            Verdict::Replay,
            "a mutation cannot reuse a read's nonce"
        );
        let (pending, _) = s.take_pending(NOW, NOW, false);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].nonce, "nonce-0000000001");
    }

    #[test]
    fn mutations_lagging_and_leading_clocks_go_to_the_store_claimed() {
        let s = fresh();
        s.made_durable(NonceFence {
            low_s: NOW - 2,
            high_s: NOW,
            clean: false,
        });
        let c = Uuid::from_u128(1);
        assert_eq!(
            s.check(c, "m-00000000000001", NOW, exp(NOW), NOW, true),
            Verdict::Store
        );
        assert_eq!(
            s.check(c, "l-00000000000001", NOW - 60, exp(NOW), NOW, false),
            Verdict::Store
        );
        assert_eq!(
            s.check(c, "f-00000000000001", NOW + 60, exp(NOW + 60), NOW, false),
            Verdict::Store
        );
        assert_eq!(
            s.take_pending(NOW, NOW, false).0.len(),
            0,
            "the store path logs nothing here"
        );
        for n in ["m-00000000000001", "l-00000000000001", "f-00000000000001"] {
            assert_eq!(s.check(c, n, NOW, exp(NOW), NOW, false), Verdict::Replay);
        }
        // A clock far ahead does not raise the fence.
        assert_eq!(
            s.take_pending(NOW + 60, NOW, false).1.high_s,
            NOW + FAST_LEAD_S
        );
    }

    #[test]
    fn after_a_crash_the_band_is_refused_and_older_nonces_go_to_the_store() {
        let fence = NonceFence {
            low_s: NOW - 3,
            high_s: NOW + 1,
            clean: false,
        };
        let s = NonceSet::new(Some(fence), Some(exp(NOW - 100)), NOW + 1);
        let c = Uuid::from_u128(9);
        assert_eq!(
            s.check(c, "band-00000000001", NOW, exp(NOW), NOW + 1, false),
            Verdict::Replay
        );
        assert_eq!(
            s.check(c, "band-00000000002", NOW + 1, exp(NOW + 1), NOW + 1, false),
            Verdict::Replay
        );
        assert_eq!(
            s.check(c, "old-000000000001", NOW - 4, exp(NOW - 4), NOW + 1, false),
            Verdict::Store
        );
        assert_eq!(
            s.check(c, "new-000000000001", NOW + 2, exp(NOW + 2), NOW + 2, false),
            Verdict::RaiseFence(NOW + 2)
        );
        // A clean stop leaves no band.
        let clean = NonceSet::new(
            Some(NonceFence {
                clean: true,
                ..fence
            }),
            None,
            NOW + 1,
        );
        assert_eq!(
            clean.check(c, "band-00000000001", NOW, exp(NOW), NOW + 1, false),
            Verdict::Store
        );
    }

    #[test]
    fn nothing_signed_before_the_store_s_latest_nonce_is_fast() {
        let s = NonceSet::new(None, Some(exp(NOW + 5)), NOW);
        let c = Uuid::from_u128(3);
        assert_eq!(
            s.check(c, "n-00000000000001", NOW + 1, exp(NOW + 1), NOW, false),
            Verdict::Store
        );
    }

    /// A request that waited for the fence re-checks with the time it read before waiting
    /// (or a clock stepped back): the flush it waited for wrote a band starting above its
    /// timestamp, so accepting it in memory would lose it in a crash before the next flush.
    #[test]
    fn nothing_below_a_taken_band_is_accepted_in_memory_whatever_the_clock_says() {
        let s = NonceSet::new(None, None, NOW - 100);
        let (_, fence) = s.take_pending(NOW - 3, NOW - 3, false);
        s.made_durable(fence);
        let c = Uuid::from_u128(4);
        // Received at NOW (stale by the time it re-checks), signed at NOW - 2.
        assert_eq!(
            s.check(c, "late-00000000001", NOW - 2, exp(NOW - 2), NOW, false),
            Verdict::RaiseFence(NOW - 2)
        );
        // The flush it woke runs a second later: its band is [NOW - 1, NOW + 1].
        let (_, fence) = s.take_pending(NOW + 1, NOW + 1, false);
        assert_eq!((fence.low_s, fence.high_s), (NOW - 1, NOW + 1));
        s.made_durable(fence);
        assert_eq!(
            s.check(c, "late-00000000001", NOW - 2, exp(NOW - 2), NOW, false),
            Verdict::Store,
            "signed below the durable band: the store must hold it before the answer"
        );
        // Crash before the next flush: the restarted process sends it to the store, which
        // holds it, so its replay is refused there.
        let after = NonceSet::new(Some(fence), Some(exp(NOW - 2)), NOW + 2);
        assert_eq!(
            after.check(c, "late-00000000001", NOW - 2, exp(NOW - 2), NOW + 2, false),
            Verdict::Store
        );
        // A clock stepped back below the band changes nothing either.
        assert_eq!(
            s.check(c, "step-00000000001", NOW - 2, exp(NOW - 2), NOW - 2, false),
            Verdict::Store
        );
        assert!(!s.has_pending());
    }

    #[test]
    fn the_last_take_closes_the_set_so_the_clean_mark_misses_nothing() {
        let s = fresh();
        let c = Uuid::from_u128(5);
        let (_, fence) = s.take_pending(NOW, NOW, false);
        s.made_durable(fence);
        assert_eq!(
            s.check(c, "read-00000000001", NOW, exp(NOW), NOW, false),
            Verdict::Accepted
        );
        let (pending, _) = s.take_pending(NOW, NOW, true);
        assert_eq!(pending.len(), 1);
        // A request still being served after the final take goes to the store.
        assert_eq!(
            s.check(c, "read-00000000002", NOW, exp(NOW), NOW, false),
            Verdict::Store
        );
        assert!(!s.has_pending());
    }

    #[test]
    fn expired_nonces_are_forgotten() {
        let s = fresh();
        let c = Uuid::from_u128(2);
        s.check(c, "old-000000000001", NOW - 60, exp(NOW - 60), NOW, false);
        assert_eq!(s.len(), 1);
        s.prune(NOW + 300);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn remembered_nonces_are_replays_on_every_path_until_they_expire() {
        let s = NonceSet::new(None, None, NOW);
        let c = Uuid::from_u128(4);
        s.remember(c, "logged-000000001", exp(NOW - 100));
        s.remember(c, "logged-000000002", exp(NOW));
        s.remember(c, "logged-000000002", exp(NOW));
        assert_eq!(s.len(), 2, "a nonce logged twice is one");
        s.made_durable(NonceFence {
            low_s: NOW - 2,
            high_s: NOW + 1,
            clean: false,
        });
        for store_only in [false, true] {
            assert_eq!(
                s.check(c, "logged-000000002", NOW, exp(NOW), NOW, store_only),
                Verdict::Replay
            );
        }
        assert_eq!(
            s.check(
                Uuid::from_u128(5),
                "logged-000000002",
                NOW,
                exp(NOW),
                NOW,
                false
            ),
            Verdict::Accepted,
            "another credential's nonce"
        );
        s.prune(exp(NOW - 100).unix_seconds() + 1);
        assert_eq!(
            s.check(c, "logged-000000001", NOW, exp(NOW), NOW, true),
            Verdict::Store,
            "expired and forgotten (the timestamp window refuses its request before this)"
        );
        assert_eq!(
            s.check(c, "logged-000000002", NOW, exp(NOW), NOW, true),
            Verdict::Replay
        );
    }
}
