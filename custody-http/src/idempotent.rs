//! Running a mutation under its `Idempotency-Key` (decisions §6): claim the key in memory,
//! then one store job that replays, conflicts, or runs the command and stores its response
//! together with its effects.

use custody_core::error::{CoreResult, Refusal};
use custody_core::idempotency::{self, fingerprint, Outcome, StoredResponse};
use custody_core::ports::store::{write, WriteTx};
use custody_core::Timestamp;

use crate::dispatch::Call;
use crate::errors::status_for;
use crate::reply::{error_body, Reply};
use crate::state::AppState;

/// Runs `command` once per (tenant, key). `insufficient_balance_status` is the status this route
/// gives `INSUFFICIENT_BALANCE` (409 or 422, decisions §7).
pub async fn run<F>(
    state: &AppState,
    call: &Call,
    insufficient_balance_status: u16,
    command: F,
) -> CoreResult<Reply>
where
    F: FnMut(&mut dyn WriteTx, Timestamp) -> CoreResult<StoredResponse> + Send + 'static,
{
    run_with(state, call, insufficient_balance_status, false, command).await
}

/// [`run`] for a command whose success carries a secret shown once (a credential's HMAC
/// secret): the stored success body is sealed by the vault, bound to (tenant, key), so the
/// idempotency table holds no secret in clear; a replay opens it and answers the same bytes.
/// Refusals carry no secret and are stored as they are. The request body's fingerprint is
/// keyed by the vault, as the body may carry a secret too. Both the fingerprint and the sealing
/// are bound to the calling credential as well: another admin of the same tenant who learns the
/// key gets `IDEMPOTENCY_CONFLICT`, never the secret made for someone else.
pub async fn run_sealed<F>(state: &AppState, call: &Call, command: F) -> CoreResult<Reply>
where
    F: FnMut(&mut dyn WriteTx, Timestamp) -> CoreResult<StoredResponse> + Send + 'static,
{
    run_with(state, call, 409, true, command).await
}

fn sealing_aad(tenant: &str, key: &str, credential: uuid::Uuid) -> String {
    format!("idempotency:{tenant}:{key}:{credential}")
}

fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// How the command's transaction ended, when it did not fail.
enum Ran {
    Done(Outcome),
    /// The request's nonce was used already: nothing ran.
    Replay,
    /// The credentials changed since the request's cached credential was read: nothing ran.
    Stale,
}

async fn run_with<F>(
    state: &AppState,
    call: &Call,
    insufficient_balance_status: u16,
    seal: bool,
    mut command: F,
) -> CoreResult<Reply>
where
    F: FnMut(&mut dyn WriteTx, Timestamp) -> CoreResult<StoredResponse> + Send + 'static,
{
    if call
        .headers
        .get(&crate::authn::names::IDEMPOTENCY_KEY)
        .is_some_and(|v| v.to_str().is_err())
    {
        return Err(custody_core::error::Refusal::validation(
            "Idempotency-Key",
            "must contain only visible ASCII characters",
        )
        .into());
    }
    let key = custody_core::auth::check_idempotency_key(
        call.headers
            .get(&crate::authn::names::IDEMPOTENCY_KEY)
            .and_then(|v| v.to_str().ok()),
    )?
    .to_owned();
    let tenant = call.credential().tenant.clone();
    // A body that carries a secret (a new key's PIN) is fingerprinted through a keyed digest:
    // the stored fingerprint must not let a database copy test guesses of it.
    let fp = if seal {
        let bound = [call.credential().id.as_bytes().as_slice(), &call.body].concat();
        let digest = state.vault.keyed_digest("idempotency-body", &bound);
        fingerprint(&call.method, &call.path, &digest)
    } else {
        fingerprint(&call.method, &call.path, &call.body)
    };
    let _claim = state.inflight.enter(&tenant, &key, fp)?;
    let now = state.clock.now();
    let trace_id = call.trace_id;
    let aad = sealing_aad(&tenant, &key, call.credential().id);
    let vault = std::sync::Arc::clone(&state.vault);
    let sealer = seal.then(|| (std::sync::Arc::clone(&vault), aad.clone()));
    // The request's nonce, when its route defers it here: written first in the same
    // transaction, so a replay runs nothing and the request costs one store job.
    let nonce = call.take_nonce();
    let kept = nonce.clone();
    let replay = || {
        Refusal::new(
            custody_core::error::ErrorCode::ReplayDetected,
            "this nonce was already used",
        )
    };
    // A fenced route's credential is checked first, before the nonce and the command: a failed
    // check leaves nothing written (`crate::fence`).
    let fence = call.fence.expected();
    let outcome = write(state.store.as_ref(), move |tx| {
        if !crate::fence::holds(tx, fence)? {
            return Ok(Ran::Stale);
        }
        if let Some(n) = &nonce {
            if !n.record(tx)? {
                return Ok(Ran::Replay);
            }
        }
        idempotency::run_in_tx(
            tx,
            &tenant,
            &key,
            fp,
            now,
            |tx| {
                let mut r = command(tx, now)?;
                if let Some((vault, aad)) = &sealer {
                    if is_success(r.status) {
                        r.body = vault.seal(&r.body, aad).as_bytes().to_vec();
                    }
                }
                Ok(r)
            },
            |r: &Refusal| StoredResponse {
                status: status_for(r, insufficient_balance_status),
                body: error_body(r, trace_id),
            },
        )
        .map(Ran::Done)
    })
    .await;
    let outcome = match outcome {
        Ok(Ran::Done(outcome)) => call.fence.settle(Some(outcome))?,
        Ok(Ran::Replay) => {
            call.fence.settle(Some(()))?;
            return Err(replay().into());
        }
        Ok(Ran::Stale) => {
            // Nothing ran: the nonce goes back to the request, for the route's second run.
            *call.nonce.lock().unwrap_or_else(|p| p.into_inner()) = kept;
            return call.fence.settle(None);
        }
        Err(e) => {
            // The command's transaction rolled back, its nonce with it: the nonce is still
            // used (it was accepted), so it is written on its own.
            if let Some(n) = kept {
                if let Ok(false) = state.nonces.record_deferred(state.store.as_ref(), n).await {
                    return Err(replay().into());
                }
            }
            return Err(e);
        }
    };
    let (mut r, replayed) = match outcome {
        Outcome::Executed(r) => (r, false),
        Outcome::Replayed(r) => (r, true),
    };
    if seal && is_success(r.status) {
        let sealed = custody_core::vault::Sealed::from_stored(std::mem::take(&mut r.body));
        r.body = vault.open(&sealed, &aad)?.expose().clone();
    }
    let reply = Reply::raw_json(r.status, r.body);
    Ok(if replayed {
        reply.with_header("idempotent-replayed", "true")
    } else {
        reply
    })
}
