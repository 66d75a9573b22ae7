//! What an attempt's outcome leads to: delivered, another try at a time, or the dead-letter
//! list. Exponential backoff with full jitter between `base_ms` and a ceiling that doubles per
//! failure up to `cap_ms` (decisions §9: 5 s to 1 h); a `Retry-After` inside that range is
//! honoured; the tenth failure dead-letters. Randomness comes in as a parameter.

use crate::ports::webhook::DeliveryOutcome;
use crate::time::Timestamp;

/// Attempts of one event before it goes to the dead-letter list (decisions §9).
pub const ATTEMPTS_MAX: u32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Shortest wait between two tries.
    pub base_ms: u64,
    /// Longest wait between two tries.
    pub cap_ms: u64,
    pub attempts_max: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base_ms: 5_000,
            cap_ms: 3_600_000,
            attempts_max: ATTEMPTS_MAX,
        }
    }
}

impl RetryPolicy {
    /// The policy with `base_ms <= cap_ms` and at least one attempt, or why not.
    pub fn new(base_ms: u64, cap_ms: u64, attempts_max: u32) -> Result<Self, String> {
        if base_ms == 0 || cap_ms < base_ms {
            return Err(format!(
                "retry timing: need 0 < retry_base_ms ({base_ms}) <= retry_cap_ms ({cap_ms})"
            ));
        }
        if attempts_max == 0 {
            return Err("retry timing: at least one attempt".into());
        }
        Ok(RetryPolicy {
            base_ms,
            cap_ms,
            attempts_max,
        })
    }

    /// The upper bound of the wait after the `failures`-th failure (1-based):
    /// `min(cap, base * 2^failures)`.
    pub fn ceiling_ms(&self, failures: u32) -> u64 {
        let factor = 1u64.checked_shl(failures.min(63)).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }

    /// The wait after the `failures`-th failure: uniform in `[base, ceiling]` drawn from
    /// `jitter` (full jitter), or the server's `Retry-After` clamped to `[base, cap]`.
    pub fn delay_ms(&self, failures: u32, retry_after_s: Option<u64>, jitter: u64) -> u64 {
        if let Some(s) = retry_after_s {
            return s.saturating_mul(1000).clamp(self.base_ms, self.cap_ms);
        }
        let ceiling = self.ceiling_ms(failures).max(self.base_ms);
        let span = ceiling - self.base_ms;
        self.base_ms + jitter % span.saturating_add(1)
    }
}

/// What to do with an event after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Delivered,
    RetryAt(Timestamp),
    DeadLetter,
}

/// Decides the event's next state after its `attempt`-th attempt (1-based, counted since it was
/// queued or replayed) ended with `outcome` at `now`.
pub fn next_step(
    policy: &RetryPolicy,
    attempt: u32,
    outcome: &DeliveryOutcome,
    now: Timestamp,
    jitter: u64,
) -> Step {
    match outcome {
        DeliveryOutcome::Delivered { .. } => Step::Delivered,
        DeliveryOutcome::Permanent { .. } => Step::DeadLetter,
        DeliveryOutcome::Retry { .. } if attempt >= policy.attempts_max => Step::DeadLetter,
        DeliveryOutcome::Retry { retry_after_s, .. } => {
            let delay = policy.delay_ms(attempt, *retry_after_s, jitter);
            Step::RetryAt(now.plus_millis(i64::try_from(delay).unwrap_or(i64::MAX)))
        }
    }
}

/// Reads `Retry-After`: delta-seconds, or an HTTP date (IMF-fixdate) turned into seconds from
/// `now`. Anything else is ignored.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok();
    }
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    let at = time::PrimitiveDateTime::parse(value, format)
        .ok()?
        .assume_utc()
        .unix_timestamp();
    Some(u64::try_from(at.saturating_sub(now.unix_seconds())).unwrap_or(0))
}

/// Sorts a response status (decisions §9): 2xx delivered; 408, 425, 429 and 5xx worth
/// retrying, and so is a 3xx (redirects are never followed); every other status is permanent.
pub fn classify_response(
    status: u16,
    retry_after: Option<&str>,
    now: Timestamp,
    latency_ms: u64,
) -> DeliveryOutcome {
    match status {
        200..=299 => DeliveryOutcome::Delivered { status, latency_ms },
        408 | 425 | 429 | 500..=599 => DeliveryOutcome::Retry {
            status: Some(status),
            error: format!("HTTP {status}"),
            retry_after_s: retry_after.and_then(|v| parse_retry_after(v, now)),
            latency_ms,
        },
        // Not followed, and not a permanent rejection either: decisions §9 makes only 4xx
        // (other than 408, 425, 429) permanent, so a redirect counts as a failed attempt.
        300..=399 => DeliveryOutcome::Retry {
            status: Some(status),
            error: format!("HTTP {status}: redirects are not followed"),
            retry_after_s: None,
            latency_ms,
        },
        _ => DeliveryOutcome::Permanent {
            status: Some(status),
            error: format!("HTTP {status}"),
            latency_ms,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_unix_millis(1_700_000_000_000);

    fn retry(retry_after_s: Option<u64>) -> DeliveryOutcome {
        DeliveryOutcome::Retry {
            status: Some(503),
            error: "HTTP 503".into(),
            retry_after_s,
            latency_ms: 3,
        }
    }

    #[test]
    fn statuses_are_sorted_as_the_contract_says() {
        let kind = |s: u16| match classify_response(s, None, NOW, 1) {
            DeliveryOutcome::Delivered { .. } => 'd',
            DeliveryOutcome::Retry { .. } => 'r',
            DeliveryOutcome::Permanent { .. } => 'p',
        };
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(kind(s), 'd', "{s}");
        }
        for s in [
            301, 302, 303, 307, 308, 408, 425, 429, 500, 502, 503, 504, 599,
        ] {
            assert_eq!(kind(s), 'r', "{s}");
        }
        for s in [100, 400, 401, 403, 404, 405, 409, 410, 413, 422, 451, 600] {
            assert_eq!(kind(s), 'p', "{s}");
        }
    }

    #[test]
    fn backoff_doubles_with_full_jitter_between_base_and_cap() {
        let p = RetryPolicy::default();
        assert_eq!(p.ceiling_ms(1), 10_000);
        assert_eq!(p.ceiling_ms(2), 20_000);
        assert_eq!(p.ceiling_ms(9), 2_560_000);
        assert_eq!(p.ceiling_ms(10), 3_600_000);
        assert_eq!(p.ceiling_ms(400), 3_600_000);
        for failures in 1..=12 {
            assert_eq!(p.delay_ms(failures, None, 0), 5_000);
            let top = p.ceiling_ms(failures);
            assert_eq!(p.delay_ms(failures, None, top - 5_000), top);
            assert_eq!(p.delay_ms(failures, None, top - 5_000 + 1), 5_000);
            for jitter in [1u64, 7, 12_345, u64::MAX / 3, u64::MAX] {
                let d = p.delay_ms(failures, None, jitter);
                assert!((5_000..=top).contains(&d), "{failures} {jitter} {d}");
            }
        }
    }

    #[test]
    fn retry_after_is_honoured_inside_the_range() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay_ms(1, Some(30), 999), 30_000);
        assert_eq!(p.delay_ms(1, Some(1), 999), 5_000);
        assert_eq!(p.delay_ms(1, Some(86_400), 999), 3_600_000);
        assert_eq!(parse_retry_after("120", NOW), Some(120));
        assert_eq!(parse_retry_after(" 7 ", NOW), Some(7));
        // 2023-11-14T22:13:20Z is NOW; one minute later.
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 22:14:20 GMT", NOW),
            Some(60)
        );
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", NOW),
            Some(0)
        );
        assert_eq!(parse_retry_after("-5", NOW), None);
        assert_eq!(parse_retry_after("soon", NOW), None);
        match classify_response(429, Some("42"), NOW, 5) {
            DeliveryOutcome::Retry { retry_after_s, .. } => assert_eq!(retry_after_s, Some(42)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_tenth_failure_dead_letters() {
        let p = RetryPolicy::default();
        for attempt in 1..10 {
            match next_step(&p, attempt, &retry(None), NOW, 0) {
                Step::RetryAt(t) => assert_eq!(t, NOW.plus_millis(5_000)),
                other => panic!("attempt {attempt}: {other:?}"),
            }
        }
        assert_eq!(next_step(&p, 10, &retry(None), NOW, 0), Step::DeadLetter);
        assert_eq!(
            next_step(&p, 3, &retry(Some(60)), NOW, 0),
            Step::RetryAt(NOW.plus_seconds(60))
        );
        let permanent = DeliveryOutcome::Permanent {
            status: Some(410),
            error: "HTTP 410".into(),
            latency_ms: 1,
        };
        assert_eq!(next_step(&p, 1, &permanent, NOW, 0), Step::DeadLetter);
        let ok = DeliveryOutcome::Delivered {
            status: 204,
            latency_ms: 1,
        };
        assert_eq!(next_step(&p, 10, &ok, NOW, 0), Step::Delivered);
    }

    #[test]
    fn policies_are_validated() {
        assert!(RetryPolicy::new(0, 10, 10).is_err());
        assert!(RetryPolicy::new(10, 5, 10).is_err());
        assert!(RetryPolicy::new(10, 10, 0).is_err());
        assert_eq!(
            RetryPolicy::new(50, 200, 10)
                .unwrap()
                .delay_ms(3, None, 150),
            200
        );
    }
}
