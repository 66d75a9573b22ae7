//! What executing a quote needs, for withdrawals and swaps alike.

use custody_core::error::{CoreResult, ErrorCode, Refusal};
use custody_core::ports::store::read;

use crate::dispatch::Call;
use crate::second_factor;
use crate::state::AppState;

/// Checks the second factors, unless the request retries one already executed under its
/// idempotency key: that one replays its stored answer (decisions §6), and its one-time code
/// was used by the first execution. Returns the guard the command must pass before it runs.
pub async fn second_factors_unless_replay(
    state: &AppState,
    call: &Call,
) -> CoreResult<FactorsGuard> {
    let credential = call.credential();
    // A missing or malformed key is refused before a one-time code is spent on the request.
    let raw = call.headers.get("idempotency-key");
    if raw.is_some_and(|v| v.to_str().is_err()) {
        return Err(Refusal::validation(
            "Idempotency-Key",
            "must contain only visible ASCII characters",
        )
        .into());
    }
    custody_core::auth::check_idempotency_key(raw.and_then(|v| v.to_str().ok()))?;
    let key = raw.and_then(|v| v.to_str().ok()).map(str::to_owned);
    let executed = match key {
        Some(key) => {
            let (t, now) = (credential.tenant.clone(), state.clock.now());
            read(state.store.as_ref(), move |tx| {
                Ok(tx.idempotency_record(&t, &key, now)?.is_some())
            })
            .await?
        }
        None => false,
    };
    if !executed {
        second_factor::check(state, credential, &call.headers).await?;
        return Ok(FactorsGuard { skipped: None });
    }
    let skipped = if credential.pin_hash.is_some() {
        Some(ErrorCode::PinRequired)
    } else if credential.totp_secret.is_some() {
        Some(ErrorCode::OtpRequired)
    } else {
        None
    };
    Ok(FactorsGuard { skipped })
}

/// What a command learns of the second factors: whether they were skipped because the
/// request looked like a replay.
#[derive(Debug, Clone, Copy)]
pub struct FactorsGuard {
    skipped: Option<ErrorCode>,
}

impl FactorsGuard {
    /// Called by a command that is about to execute (no stored answer was found for its key
    /// in its own transaction): if the factors were skipped for a replay whose record expired
    /// in between, nothing runs without them; the retry is checked in full. Not stored under
    /// the key (an authentication failure).
    pub fn executing(&self) -> Result<(), Refusal> {
        match self.skipped {
            None => Ok(()),
            Some(code) => Err(Refusal::new(
                code,
                "the second factors are required: the earlier request under this key has expired",
            )),
        }
    }
}
