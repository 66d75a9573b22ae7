//! The authentication pipeline of one request: header format, credential, signature, window,
//! rate limit, then the nonce (the only step that writes). See `custody_core::auth` for why
//! the order matters. A request refused before it counts (bad format or signature, a replay)
//! is answered with its credential's window figures, uncounted, when the key names one.

use custody_core::auth::{self, AuthHeaders, Credential, RateDecision, SignedParts};
use custody_core::error::{CoreError, ErrorCode, Refusal};
use custody_core::ports::store::{read, write};
use hyper::HeaderMap;

use crate::state::AppState;

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub struct Authenticated {
    pub credential: Credential,
    pub rate: RateDecision,
}

/// Why authentication stopped, with the rate decision when the caller was identified.
pub struct AuthFailure {
    pub error: CoreError,
    pub rate: Option<RateDecision>,
}

impl From<CoreError> for AuthFailure {
    fn from(error: CoreError) -> Self {
        AuthFailure { error, rate: None }
    }
}

impl From<Refusal> for AuthFailure {
    fn from(r: Refusal) -> Self {
        AuthFailure {
            error: r.into(),
            rate: None,
        }
    }
}

/// The figures of the window of the credential named by `X-Service-Key`, without counting,
/// for refusals that come before the request could be authenticated (header format, 413, 408):
/// every answer of an authenticated route carries them (decisions §5). `None` when there is no
/// such credential.
pub async fn figures_of_named_key(state: &AppState, headers: &HeaderMap) -> Option<RateDecision> {
    let api_key = header(headers, "x-service-key")?.to_owned();
    let credential = read(state.store.as_ref(), move |tx| {
        Ok(tx.credential_by_api_key(&api_key)?)
    })
    .await
    .ok()??;
    Some(
        state
            .limiter
            .peek(credential.id, credential.rate_limit, state.clock.now())
            .await,
    )
}

/// Format checks that need no secret and read nothing.
fn check_format(headers: &HeaderMap) -> Result<auth::CheckedHeaders<'_>, Refusal> {
    for name in [
        "x-service-key",
        "x-service-timestamp",
        "x-service-nonce",
        "x-service-signature",
    ] {
        if headers.get(name).is_some_and(|v| v.to_str().is_err()) {
            return Err(Refusal::new(
                ErrorCode::AuthenticationFailed,
                format!("{name} must contain only visible ASCII characters"),
            ));
        }
    }
    auth::check_headers(&AuthHeaders {
        api_key: header(headers, "x-service-key"),
        timestamp: header(headers, "x-service-timestamp"),
        nonce: header(headers, "x-service-nonce"),
        signature: header(headers, "x-service-signature"),
        idempotency_key: header(headers, "idempotency-key"),
    })
}

pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    parts: SignedParts<'_>,
) -> Result<Authenticated, AuthFailure> {
    let checked = match check_format(headers) {
        Ok(c) => c,
        Err(r) => {
            return Err(AuthFailure {
                error: r.into(),
                rate: figures_of_named_key(state, headers).await,
            })
        }
    };
    let api_key = checked.api_key.to_owned();
    let vault = std::sync::Arc::clone(&state.vault);
    // Opened here, per request: a revoked or re-keyed credential takes effect at once.
    let credential = read(state.store.as_ref(), move |tx| {
        Ok(auth::load_credential(tx, &vault, &api_key)?)
    })
    .await?
    .ok_or_else(|| {
        Refusal::new(
            ErrorCode::AuthenticationFailed,
            "the credentials are not valid",
        )
    })?;
    let now = state.clock.now();
    if let Err(r) = auth::check_signature_and_window(&credential, &checked, &parts, now) {
        // The credential is known: its window's figures go out, but this request is not counted.
        let rate = state
            .limiter
            .peek(credential.id, credential.rate_limit, now)
            .await;
        return Err(AuthFailure {
            error: r.into(),
            rate: Some(rate),
        });
    }

    // Counted before the nonce is written, so a credential over its limit costs no write.
    let rate = state
        .limiter
        .check(credential.id, credential.rate_limit, now)
        .await;
    if !rate.allowed {
        let refusal = Refusal::new(
            ErrorCode::RateLimited,
            "the rate limit of these credentials is reached",
        )
        .retry_after(rate.reset_after_s);
        return Err(AuthFailure {
            error: refusal.into(),
            rate: Some(rate),
        });
    }

    let (id, nonce, expires) = (
        credential.id,
        checked.nonce.to_owned(),
        auth::nonce_expiry(&checked, now),
    );
    let fresh = write(state.store.as_ref(), move |tx| {
        Ok(tx.use_nonce(id, &nonce, expires)?)
    })
    .await
    .map_err(|e| AuthFailure {
        error: e,
        rate: Some(rate),
    })?;
    if !fresh {
        // Whoever replays a captured request must not use up its owner's window.
        state.limiter.refund(credential.id, now).await;
        let refusal = Refusal::new(ErrorCode::ReplayDetected, "this nonce was already used");
        return Err(AuthFailure {
            error: refusal.into(),
            rate: Some(
                state
                    .limiter
                    .peek(credential.id, credential.rate_limit, now)
                    .await,
            ),
        });
    }
    Ok(Authenticated { credential, rate })
}
