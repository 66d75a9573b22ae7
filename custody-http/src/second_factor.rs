//! The PIN/OTP check of an operation that requires one (decisions §5), for every handler that
//! does: admin controls today, withdrawals and swaps next. The rules live in
//! `custody_core::auth::second_factor`; this runs them against the store, with the Argon2
//! verifications off the async threads and bounded in number (each takes ~19 MiB).
//!
//! Call [`check`] once the body is validated (a request refused for its body must not cost an
//! attempt or a code) and before the operation runs.

use std::sync::Arc;

use custody_core::auth::second_factor::{self, Verdict};
use custody_core::auth::Credential;
use custody_core::error::{CoreResult, PortError};
use custody_core::ports::store::write;
use custody_core::ports::{Clock, Store};
use hyper::HeaderMap;
use tokio::sync::Semaphore;

use crate::state::AppState;

/// Bounds the PIN verifications running at once, across all credentials.
#[derive(Debug)]
pub struct SecondFactorChecks {
    verifications: Arc<Semaphore>,
}

impl SecondFactorChecks {
    pub fn new(verifications_max: usize) -> Self {
        SecondFactorChecks {
            verifications: Arc::new(Semaphore::new(verifications_max.max(1))),
        }
    }
}

impl Default for SecondFactorChecks {
    /// One verification per core, at most four: Argon2 is CPU- and memory-bound, so more at
    /// once only queue inside the machine and add memory.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        SecondFactorChecks::new(cores.clamp(1, 4))
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks the second factors `credential` requires, from `X-Service-Pin` / `X-Service-OTP`.
/// `Ok` means every factor passed and the TOTP step is consumed (committed); a refusal is the
/// one answer of a failed check (`PIN_REQUIRED`, `OTP_REQUIRED` for a missing header; the
/// credential's `INVALID_PIN` or `INVALID_OTP` for a wrong factor or a lockout; 429 while
/// five attempts are being verified).
pub async fn check(
    state: &AppState,
    credential: &Credential,
    headers: &HeaderMap,
) -> CoreResult<()> {
    check_with(
        Arc::clone(&state.store),
        Arc::clone(&state.clock),
        &state.second_factors,
        credential,
        header(headers, "x-service-pin"),
        header(headers, "x-service-otp"),
    )
    .await
}

/// [`check`] with its parts given: the store, the clock and the verification bound.
pub async fn check_with(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    checks: &SecondFactorChecks,
    credential: &Credential,
    pin: Option<&str>,
    otp: Option<&str>,
) -> CoreResult<()> {
    if !second_factor::required(credential) {
        return Ok(());
    }
    second_factor::check_presence(credential, pin, otp)?;
    let reserved_at = clock.now();
    let c = credential.clone();
    write(store.as_ref(), move |tx| {
        second_factor::reserve(tx, &c, reserved_at)
    })
    .await?;

    // The attempt is counted from here: it runs to its recorded outcome in a task of its own,
    // so a client that goes away cannot leave it in flight until the lease ends.
    let (c, pin, otp) = (
        credential.clone(),
        pin.map(str::to_owned),
        otp.map(str::to_owned),
    );
    let verifications = Arc::clone(&checks.verifications);
    let attempt = tokio::spawn(async move {
        let verdict = match verifications.acquire_owned().await {
            Ok(permit) => {
                let c = c.clone();
                let now = clock.now();
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    second_factor::verify(&c, pin.as_deref(), otp.as_deref(), now)
                })
                .await
                // A verification that could not run passed nothing.
                .unwrap_or(Verdict::Failed)
            }
            Err(_) => Verdict::Failed,
        };
        let (id, now) = (c.id, clock.now());
        write(store.as_ref(), move |tx| {
            Ok(second_factor::record(tx, id, verdict, now)?)
        })
        .await
    });
    let passed = attempt
        .await
        .map_err(|e| PortError::transient("auth", e.to_string()))??;
    if passed {
        Ok(())
    } else {
        Err(second_factor::failure(credential).into())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use custody_core::auth::second_factor::LOCKOUT_S;
    use custody_core::auth::{pin, totp};
    use custody_core::error::{CoreError, ErrorCode, Refusal};
    use custody_core::ports::store::read;
    use custody_core::secret::Secret;
    use custody_core::vault::SealingKey;
    use custody_core::Timestamp;
    use custody_store_sqlite::{SqliteStore, StoreOptions};
    use uuid::Uuid;

    use super::*;

    const TOTP_KEY: &[u8] = b"12345678901234567890";

    fn vault() -> custody_core::vault::Vault {
        custody_core::vault::Vault::new(SealingKey::from_bytes([4; 32]), Arc::new(TestEntropy))
    }

    struct TestClock(Mutex<Timestamp>);

    /// Sealing nonces for the store; this module does not depend on `system` (moving out).
    struct TestEntropy;

    impl custody_core::ports::Entropy for TestEntropy {
        fn fill(&self, buf: &mut [u8]) {
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, buf);
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> Timestamp {
            *self.0.lock().unwrap()
        }
    }

    impl TestClock {
        fn advance(&self, seconds: i64) {
            let mut t = self.0.lock().unwrap();
            *t = t.plus_seconds(seconds);
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        clock: Arc<TestClock>,
        checks: SecondFactorChecks,
    }

    impl Fixture {
        async fn new(credential: &Credential) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let store: Arc<dyn Store> = Arc::new(
                SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap(),
            );
            let c = credential.seal(&vault());
            write(store.as_ref(), move |tx| Ok(tx.insert_credential(&c)?))
                .await
                .unwrap();
            Fixture {
                _dir: dir,
                store,
                clock: Arc::new(TestClock(Mutex::new(Timestamp::from_unix_millis(
                    1_700_000_000_000,
                )))),
                checks: SecondFactorChecks::new(2),
            }
        }

        /// The credential as a request would see it now (TOTP step included).
        async fn current(&self, api_key: &str) -> Credential {
            let key = api_key.to_owned();
            read(self.store.as_ref(), move |tx| {
                Ok(custody_core::auth::load_credential(tx, &vault(), &key)?)
            })
            .await
            .unwrap()
            .unwrap()
        }

        async fn check(
            &self,
            c: &Credential,
            pin: Option<&str>,
            otp: Option<&str>,
        ) -> CoreResult<()> {
            let clock: Arc<dyn Clock> = Arc::clone(&self.clock) as Arc<dyn Clock>;
            check_with(Arc::clone(&self.store), clock, &self.checks, c, pin, otp).await
        }

        fn code(&self, offset_steps: i64) -> String {
            let step = self.clock.now().unix_seconds().div_euclid(totp::STEP_S);
            totp::code_at_step(TOTP_KEY, step + offset_steps, totp::DIGITS)
        }
    }

    fn credential(pin: Option<&str>, with_totp: bool) -> Credential {
        Credential {
            id: Uuid::new_v4(),
            api_key: format!("ck_{}", Uuid::new_v4().simple()),
            tenant: custody_core::TenantId::parse("ops").unwrap(),
            scopes: BTreeSet::new(),
            admin: true,
            rate_limit: 600,
            hmac_secret: Secret::new(b"s".to_vec()),
            pin_hash: pin.map(|p| Secret::new(pin::hash_pin(p, &[3; 16]).unwrap())),
            totp_secret: with_totp.then(|| Secret::new(TOTP_KEY.to_vec())),
            totp_last_step: None,
            created_at: Timestamp::from_unix_millis(0),
            revoked_at: None,
        }
    }

    fn refusal(r: CoreResult<()>) -> Refusal {
        match r {
            Err(CoreError::Refused(r)) => r,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_lockout_ends_after_fifteen_minutes() {
        let c = credential(Some("2468"), false);
        let f = Fixture::new(&c).await;
        for _ in 0..5 {
            let r = refusal(f.check(&c, Some("0000"), None).await);
            assert_eq!((r.code, r.retry_after_s), (ErrorCode::InvalidPin, None));
        }
        let r = refusal(f.check(&c, Some("2468"), None).await);
        assert_eq!(r.code, ErrorCode::InvalidPin, "locked, the right PIN too");
        assert_eq!(r.retry_after_s, Some(900));
        f.clock.advance(LOCKOUT_S - 1);
        assert_eq!(
            refusal(f.check(&c, Some("2468"), None).await).retry_after_s,
            Some(1)
        );
        f.clock.advance(1);
        f.check(&c, Some("2468"), None).await.unwrap();
    }

    #[tokio::test]
    async fn a_burst_gets_five_guesses_and_the_right_pin_in_the_middle_is_refused() {
        let c = credential(Some("2468"), false);
        let f = Arc::new(Fixture::new(&c).await);
        let spawn = |pin: String| {
            let (f, c) = (Arc::clone(&f), c.clone());
            tokio::spawn(async move { (pin.clone(), f.check(&c, Some(&pin), None).await) })
        };
        let mut tasks: Vec<_> = (0..30).map(|i| spawn(format!("{:04}", 1000 + i))).collect();
        // The right PIN comes once the first guesses hold every place.
        let id = c.id;
        loop {
            let a = write(f.store.as_ref(), move |tx| {
                Ok(tx.second_factor_attempts(id)?)
            })
            .await
            .unwrap();
            if a.failures + a.in_flight >= 5 {
                break;
            }
            tokio::task::yield_now().await;
        }
        tasks.push(spawn("2468".into()));
        tasks.extend((0..29).map(|i| spawn(format!("{:04}", 2000 + i))));
        let mut verified_failures = 0;
        for t in tasks {
            let (pin, outcome) = t.await.unwrap();
            let r = refusal(outcome);
            match (r.code, r.retry_after_s) {
                (ErrorCode::InvalidPin, None) => verified_failures += 1,
                (ErrorCode::InvalidPin | ErrorCode::RateLimited, Some(_)) => {}
                other => panic!("{pin}: {other:?}"),
            }
        }
        assert_eq!(verified_failures, 5);
        let r = refusal(f.check(&c, Some("2468"), None).await);
        assert_eq!(r.retry_after_s, Some(900));
    }

    #[tokio::test]
    async fn a_code_is_consumed_by_the_check_itself_and_accepted_once() {
        let c = credential(Some("2468"), true);
        let f = Fixture::new(&c).await;
        let code = f.code(0);
        // A wrong PIN with the right code: one answer, and the code is not used up.
        let r = refusal(f.check(&c, Some("0000"), Some(&code)).await);
        let wrong_code = if code == "000000" { "111111" } else { "000000" };
        let r2 = refusal(f.check(&c, Some("2468"), Some(wrong_code)).await);
        assert_eq!((r.code, &r.message), (r2.code, &r2.message));
        assert_eq!(r.code, ErrorCode::InvalidPin);

        f.check(&c, Some("2468"), Some(&code)).await.unwrap();
        // Committed before any operation runs: a refused operation cannot give it back.
        let stored = f.current(&c.api_key).await;
        assert_eq!(
            stored.totp_last_step,
            Some(f.clock.now().unix_seconds().div_euclid(totp::STEP_S))
        );
        let r = refusal(f.check(&stored, Some("2468"), Some(&code)).await);
        assert_eq!(r.code, ErrorCode::InvalidPin);
        // Even from a request that read the credential before the code was used.
        let r = refusal(f.check(&c, Some("2468"), Some(&code)).await);
        assert_eq!(r.code, ErrorCode::InvalidPin);
        // A missing factor is named and not counted.
        let r = refusal(f.check(&c, Some("2468"), None).await);
        assert_eq!(r.code, ErrorCode::OtpRequired);
        f.clock.advance(totp::STEP_S);
        f.check(&stored, Some("2468"), Some(&f.code(0)))
            .await
            .unwrap();
        let id = c.id;
        let a = write(f.store.as_ref(), move |tx| {
            Ok(tx.second_factor_attempts(id)?)
        })
        .await
        .unwrap();
        assert_eq!((a.failures, a.in_flight), (0, 0), "{a:?}");
    }

    #[tokio::test]
    async fn a_credential_without_second_factors_costs_nothing() {
        let c = credential(None, false);
        let f = Fixture::new(&c).await;
        f.check(&c, None, None).await.unwrap();
        let id = c.id;
        let a = write(f.store.as_ref(), move |tx| {
            Ok(tx.second_factor_attempts(id)?)
        })
        .await
        .unwrap();
        assert_eq!(a, Default::default());
    }
}
