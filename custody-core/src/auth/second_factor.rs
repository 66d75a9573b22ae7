//! The second factors of decisions §5 (PIN and TOTP), and the lockout after repeated failures.
//!
//! One check, for every operation that requires them (admin controls and reconcile today,
//! withdrawals and swaps next):
//!
//! 1. [`check_presence`]: the headers the credential requires are there (`PIN_REQUIRED`,
//!    `OTP_REQUIRED`); nothing is verified or counted yet.
//! 2. [`reserve`], in a write of its own: the attempt is counted before anything is verified,
//!    so parallel guesses cannot pass the lockout check together. In-flight attempts count
//!    against [`FAILURES_MAX`] with the failures; the store serializes the read-modify-write,
//!    so the limit holds across instances sharing it.
//! 3. [`verify`]: both factors, always both (Argon2 is slow: run it off the async threads and
//!    bound how many run at once). A failure of either is one answer ([`failure`]), so a right
//!    PIN with a wrong code is never confirmed.
//! 4. [`record`], in a write of its own, before the operation: the outcome, and for a success
//!    the TOTP step, so a code is accepted once whatever the operation does next.

use uuid::Uuid;

use super::{pin, totp, Credential, CredentialRepo};
use crate::error::{CoreError, ErrorCode, PortError, Refusal};
use crate::time::Timestamp;

/// Consecutive failures allowed before a lockout; also the most attempts in flight at once.
pub const FAILURES_MAX: u32 = 5;
/// How long a credential stays locked after [`FAILURES_MAX`] consecutive failures.
pub const LOCKOUT_S: i64 = 15 * 60;
/// How long a reservation counts if its outcome is never recorded (a crash between reserve and
/// record). Far above one verification, queueing for an Argon2 slot included.
pub const RESERVATION_LEASE_S: i64 = 120;
/// `Retry-After` when the attempts in flight fill the limit: one verification's time.
pub const BUSY_RETRY_AFTER_S: u64 = 1;

/// A credential's attempts, as stored (`CredentialRepo::second_factor_attempts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Failures since the last success (or since a lockout ended).
    pub failures: u32,
    /// End of the lockout, set when `failures` reaches [`FAILURES_MAX`].
    pub locked_until: Option<Timestamp>,
    /// Attempts reserved and not yet recorded.
    pub in_flight: u32,
    /// End of the newest reservation's lease; past it, reservations never recorded are dropped.
    pub in_flight_until: Option<Timestamp>,
}

/// Why an attempt may not be made now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Locked after repeated failures, for this many more seconds.
    Locked(u64),
    /// [`FAILURES_MAX`] attempts are failing or in flight; one of them must finish first.
    Busy,
}

impl Attempts {
    /// Counts one more attempt in flight, unless the credential is locked or the attempts
    /// already failing or in flight fill the limit.
    pub fn reserve(&mut self, now: Timestamp) -> Result<(), Wait> {
        if self.in_flight > 0 && self.in_flight_until.is_none_or(|until| until <= now) {
            self.in_flight = 0;
            self.in_flight_until = None;
        }
        if self.failures >= FAILURES_MAX {
            match self.locked_until {
                Some(until) if until > now => {
                    let left = (until.unix_millis() - now.unix_millis() + 999) / 1000;
                    return Err(Wait::Locked(u64::try_from(left).unwrap_or(1).max(1)));
                }
                // The lockout is over: a new series starts.
                _ => {
                    self.failures = 0;
                    self.locked_until = None;
                }
            }
        }
        if self.failures + self.in_flight >= FAILURES_MAX {
            return Err(Wait::Busy);
        }
        self.in_flight += 1;
        self.in_flight_until = Some(now.plus_seconds(RESERVATION_LEASE_S));
        Ok(())
    }

    /// Records the outcome of one reserved attempt. A success ends the series of failures;
    /// attempts still in flight are counted when they are recorded.
    pub fn record(&mut self, passed: bool, now: Timestamp) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            self.in_flight_until = None;
        }
        if passed {
            self.failures = 0;
            self.locked_until = None;
        } else {
            self.failures = self.failures.saturating_add(1);
            if self.failures >= FAILURES_MAX {
                self.locked_until = Some(now.plus_seconds(LOCKOUT_S));
            }
        }
    }
}

/// Whether the credential has any second factor to check.
pub fn required(credential: &Credential) -> bool {
    credential.pin_hash.is_some() || credential.totp_secret.is_some()
}

/// The headers the credential requires are present. Nothing is verified, so a missing factor
/// reveals nothing about the other, and it is not counted as an attempt.
pub fn check_presence(
    credential: &Credential,
    pin: Option<&str>,
    otp: Option<&str>,
) -> Result<(), Refusal> {
    if credential.pin_hash.is_some() && pin.is_none() {
        return Err(Refusal::new(
            ErrorCode::PinRequired,
            "X-Service-Pin is required for these credentials",
        ));
    }
    if credential.totp_secret.is_some() && otp.is_none() {
        return Err(Refusal::new(
            ErrorCode::OtpRequired,
            "X-Service-OTP is required for these credentials",
        ));
    }
    Ok(())
}

/// The code of every failed or refused check of `credential`: the PIN's when it has one, so
/// the answer never depends on which factor was wrong.
fn failure_code(credential: &Credential) -> ErrorCode {
    if credential.pin_hash.is_some() {
        ErrorCode::InvalidPin
    } else {
        ErrorCode::InvalidOtp
    }
}

/// The one answer to a failed check, whichever factor failed.
pub fn failure(credential: &Credential) -> Refusal {
    let message = match (&credential.pin_hash, &credential.totp_secret) {
        (Some(_), Some(_)) => "the PIN or the one-time code is not valid (a code is accepted once)",
        (Some(_), None) => "the PIN is not valid",
        _ => "the one-time code is not valid (a code is accepted once)",
    };
    Refusal::new(failure_code(credential), message)
}

/// The answer when an attempt may not be made now.
pub fn refusal_for(credential: &Credential, wait: Wait) -> Refusal {
    match wait {
        Wait::Locked(left) => Refusal::new(
            failure_code(credential),
            "too many failed attempts: these credentials are locked for a while",
        )
        .retry_after(left),
        Wait::Busy => Refusal::new(
            ErrorCode::RateLimited,
            "too many PIN/OTP checks of these credentials at once; retry shortly",
        )
        .retry_after(BUSY_RETRY_AFTER_S),
    }
}

/// Reserves an attempt for `credential` in the caller's write transaction.
pub fn reserve(
    repo: &mut dyn CredentialRepo,
    credential: &Credential,
    now: Timestamp,
) -> Result<(), CoreError> {
    let mut attempts = repo.second_factor_attempts(credential.id)?;
    attempts
        .reserve(now)
        .map_err(|wait| refusal_for(credential, wait))?;
    repo.put_second_factor_attempts(credential.id, &attempts)?;
    Ok(())
}

/// The outcome of [`verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Both factors are right; the TOTP step to consume, if the credential has TOTP.
    Passed {
        totp_step: Option<i64>,
    },
    Failed,
}

/// Verifies every factor the credential has, all of them whatever the first gives. Slow
/// (Argon2): call it off the async threads. `check_presence` must have passed.
pub fn verify(
    credential: &Credential,
    pin: Option<&str>,
    otp: Option<&str>,
    now: Timestamp,
) -> Verdict {
    let pin_ok = match &credential.pin_hash {
        Some(hash) => pin.is_some_and(|p| pin::verify_pin(p, hash.expose())),
        None => true,
    };
    let (otp_ok, totp_step) = match &credential.totp_secret {
        Some(key) => {
            let step = otp
                .and_then(|code| totp::matching_step(key.expose(), code, now.unix_seconds()))
                .filter(|&step| credential.totp_last_step.is_none_or(|last| step > last));
            (step.is_some(), step)
        }
        None => (true, None),
    };
    if pin_ok && otp_ok {
        Verdict::Passed { totp_step }
    } else {
        Verdict::Failed
    }
}

/// Records the outcome of a reserved attempt in the caller's write transaction, consuming the
/// TOTP step of a success (a code another request consumed first makes it a failure). Returns
/// whether the check passed: a refusal is the caller's to answer, after this write committed.
pub fn record(
    repo: &mut dyn CredentialRepo,
    credential: Uuid,
    verdict: Verdict,
    now: Timestamp,
) -> Result<bool, PortError> {
    let passed = match verdict {
        Verdict::Passed {
            totp_step: Some(step),
        } => repo.advance_totp_step(credential, step)?,
        Verdict::Passed { totp_step: None } => true,
        Verdict::Failed => false,
    };
    let mut attempts = repo.second_factor_attempts(credential)?;
    attempts.record(passed, now);
    repo.put_second_factor_attempts(credential, &attempts)?;
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_unix_millis(1_000_000_000).plus_seconds(s)
    }

    #[test]
    fn five_failures_lock_until_the_lockout_ends() {
        let mut a = Attempts::default();
        for _ in 0..4 {
            a.reserve(t(0)).unwrap();
            a.record(false, t(0));
        }
        a.reserve(t(0)).unwrap();
        a.record(false, t(1));
        assert_eq!(a.reserve(t(1)), Err(Wait::Locked(900)));
        assert_eq!(a.reserve(t(900)), Err(Wait::Locked(1)));
        assert_eq!(a.reserve(t(901)), Ok(()), "the lockout ended: a new series");
        assert_eq!(a.failures, 0);
        a.record(false, t(901));
        assert_eq!(a.failures, 1);
    }

    #[test]
    fn in_flight_attempts_count_against_the_limit() {
        let mut a = Attempts::default();
        for _ in 0..5 {
            a.reserve(t(0)).unwrap();
        }
        assert_eq!(a.reserve(t(0)), Err(Wait::Busy), "five are being verified");
        a.record(true, t(0));
        assert_eq!(a.reserve(t(0)), Ok(()), "a success frees its place");
        for _ in 0..5 {
            a.record(false, t(0));
        }
        assert_eq!(
            a.failures, 5,
            "failures recorded after a success still count"
        );
        assert!(matches!(a.reserve(t(0)), Err(Wait::Locked(_))));
        assert_eq!(a.in_flight, 0);
    }

    #[test]
    fn a_success_ends_the_series_and_lost_reservations_expire() {
        let mut a = Attempts::default();
        for _ in 0..3 {
            a.reserve(t(0)).unwrap();
            a.record(false, t(0));
        }
        a.reserve(t(0)).unwrap();
        a.record(true, t(0));
        assert_eq!(a, Attempts::default());
        // Two reservations whose outcome never comes (a crash): they hold places for the lease.
        a.reserve(t(0)).unwrap();
        a.reserve(t(0)).unwrap();
        a.failures = 3;
        assert_eq!(a.reserve(t(RESERVATION_LEASE_S - 1)), Err(Wait::Busy));
        assert_eq!(a.reserve(t(RESERVATION_LEASE_S)), Ok(()));
        assert_eq!(a.in_flight, 1);
    }
}
