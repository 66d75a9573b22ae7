//! What executing a quote needs, for withdrawals and swaps alike.

use custody_core::error::CoreResult;
use custody_core::ports::store::read;

use crate::dispatch::Call;
use crate::second_factor;
use crate::state::AppState;

/// Checks the second factors, unless the request retries one already executed under its
/// idempotency key: that one replays its stored answer (decisions §6), and its one-time code
/// was used by the first execution.
pub async fn second_factors_unless_replay(state: &AppState, call: &Call) -> CoreResult<()> {
    let credential = call.credential();
    let key = call
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
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
    }
    Ok(())
}
