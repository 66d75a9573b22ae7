//! The authentication pipeline of one request: header format, credential, signature, window,
//! rate limit, then the nonce (the only step that writes; `crate::nonces` says where). See
//! `custody_core::auth` for why the order matters. A request refused before it counts (bad
//! format or signature, a replay) is answered with its credential's window figures, uncounted,
//! when the key names one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use custody_core::auth::{self, AuthHeaders, Credential, RateDecision, SignedParts};
use custody_core::error::{CoreError, CoreResult, ErrorCode, Refusal};
use custody_core::ports::store::read_quick;
use hyper::HeaderMap;

use crate::fence::CredentialFence;
use crate::nonces::{DeferredNonce, NonceCheck, SignedNonce};
use crate::state::AppState;

/// Credentials kept beyond this many are dropped all at once (a flood of unknown keys cannot
/// grow the cache: only keys that exist are kept).
const CACHED_CREDENTIALS_MAX: usize = 4_096;

/// Opened credentials by api key, each with the store's `credentials_version` it was read at.
/// A request uses its entry only while the version is unchanged, so a credential revoked or
/// changed by any process (`custody credentials revoke`) is read again on the next request.
#[derive(Default)]
pub struct CredentialCache {
    entries: Mutex<HashMap<String, (u64, Arc<Credential>)>>,
}

impl CredentialCache {
    fn get(&self, api_key: &str, version: u64) -> Option<Arc<Credential>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(api_key)
            .filter(|(v, _)| *v == version)
            .map(|(_, c)| Arc::clone(c))
    }

    /// The entry of `api_key` whatever the store's version is now, with the version it was
    /// read at (for a route that checks it in its own transaction, `crate::fence`).
    fn get_unchecked(&self, api_key: &str) -> Option<(u64, Arc<Credential>)> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(api_key).map(|(v, c)| (*v, Arc::clone(c)))
    }

    fn put(&self, api_key: String, version: u64, credential: Arc<Credential>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CACHED_CREDENTIALS_MAX {
            entries.clear();
        }
        entries.insert(api_key, (version, credential));
    }
}

/// The credential named by `api_key`, its secrets opened: from the cache while the store's
/// credentials version is unchanged, else read (and cached) again.
async fn credential(state: &AppState, api_key: &str) -> CoreResult<Option<Arc<Credential>>> {
    // Read before the credential, so an entry is never newer than the version it is kept with.
    let version = state.store.credentials_version().await?;
    if let Some(v) = version {
        if let Some(c) = state.credentials.get(api_key, v) {
            return Ok(Some(c));
        }
    }
    let key = api_key.to_owned();
    let vault = Arc::clone(&state.vault);
    let loaded = read_quick(state.store.as_ref(), move |tx| {
        Ok(auth::load_credential(tx, &vault, &key)?)
    })
    .await?
    .map(Arc::new);
    if let (Some(v), Some(c)) = (version, &loaded) {
        state.credentials.put(api_key.to_owned(), v, Arc::clone(c));
    }
    Ok(loaded)
}

/// The request headers authentication reads, parsed once: a look-up by `&str` parses and checks
/// the name again each time (nine look-ups per signed request).
pub(crate) mod names {
    use hyper::header::HeaderName;

    pub static SERVICE_KEY: HeaderName = HeaderName::from_static("x-service-key");
    pub static SERVICE_TIMESTAMP: HeaderName = HeaderName::from_static("x-service-timestamp");
    pub static SERVICE_NONCE: HeaderName = HeaderName::from_static("x-service-nonce");
    pub static SERVICE_SIGNATURE: HeaderName = HeaderName::from_static("x-service-signature");
    pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
}

fn header<'a>(headers: &'a HeaderMap, name: &hyper::header::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub struct Authenticated {
    pub credential: Arc<Credential>,
    pub rate: RateDecision,
    /// The nonce, claimed, for the route's command to write in its own transaction.
    pub deferred: Option<DeferredNonce>,
    /// Whether the credential is still to be checked in the route's transaction.
    pub fence: CredentialFence,
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
    let api_key = header(headers, &names::SERVICE_KEY)?;
    let credential = credential(state, api_key).await.ok()??;
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
        &names::SERVICE_KEY,
        &names::SERVICE_TIMESTAMP,
        &names::SERVICE_NONCE,
        &names::SERVICE_SIGNATURE,
    ] {
        if headers.get(name).is_some_and(|v| v.to_str().is_err()) {
            return Err(Refusal::new(
                ErrorCode::AuthenticationFailed,
                format!("{name} must contain only visible ASCII characters"),
            ));
        }
    }
    auth::check_headers(&AuthHeaders {
        api_key: header(headers, &names::SERVICE_KEY),
        timestamp: header(headers, &names::SERVICE_TIMESTAMP),
        nonce: header(headers, &names::SERVICE_NONCE),
        signature: header(headers, &names::SERVICE_SIGNATURE),
        idempotency_key: header(headers, &names::IDEMPOTENCY_KEY),
    })
}

/// The credential of a request, checked against the store's credentials version, or refused.
async fn current_credential(state: &AppState, api_key: &str) -> CoreResult<Arc<Credential>> {
    // Cached only while the store's credentials version stands: a revoked or re-keyed
    // credential takes effect on the next request.
    credential(state, api_key).await?.ok_or_else(|| {
        Refusal::new(
            ErrorCode::AuthenticationFailed,
            "the credentials are not valid",
        )
        .into()
    })
}

/// Authenticates a request. `nonce_in_command`: the route's command writes the nonce in its own
/// transaction (it comes back claimed in [`Authenticated::deferred`]). `fence_in_route`: the
/// route checks the credentials version in its own first transaction (`crate::fence`), so a
/// cached credential is taken without reading the version here.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    parts: SignedParts<'_>,
    nonce_in_command: bool,
    fence_in_route: bool,
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
    let now = state.clock.now();
    // A cached entry that does not pass is never the reason for a refusal: the credential may
    // have been re-keyed since, so it is read again first.
    let cached = fence_in_route
        .then(|| state.credentials.get_unchecked(checked.api_key))
        .flatten()
        .filter(|(_, c)| auth::check_signature_and_window(c, &checked, &parts, now).is_ok());
    let (credential, fence) = match cached {
        Some((version, c)) => (c, CredentialFence::pending(version, now)),
        None => (
            current_credential(state, checked.api_key).await?,
            CredentialFence::held(),
        ),
    };
    // A cached entry taken passed already; a credential read from the store is checked now.
    let verdict = match fence.expected() {
        Some(_) => Ok(()),
        None => auth::check_signature_and_window(&credential, &checked, &parts, now),
    };
    if let Err(r) = verdict {
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
        let failure = AuthFailure {
            error: refusal.into(),
            rate: Some(rate),
        };
        return Err(confirmed(state, headers, parts, &credential, &fence, failure, false).await);
    }

    let expires = auth::nonce_expiry(&checked, now);
    // Only a read may be accepted in memory: every other request, whether or not its command
    // writes the nonce, has it in the store before it runs.
    let read = parts.method == "GET";
    let checked_nonce = state
        .nonces
        .check(
            state.store.as_ref(),
            SignedNonce {
                credential: credential.id,
                nonce: checked.nonce,
                ts: checked.timestamp_s,
                expires_at: expires,
            },
            state.clock.as_ref(),
            read,
            nonce_in_command,
        )
        .await;
    let checked_nonce = match checked_nonce {
        Ok(c) => c,
        Err(error) => {
            let failure = AuthFailure {
                error,
                rate: Some(rate),
            };
            return Err(confirmed(state, headers, parts, &credential, &fence, failure, true).await);
        }
    };
    let deferred = match checked_nonce {
        NonceCheck::Fresh => None,
        NonceCheck::Deferred(d) => Some(d),
        NonceCheck::Replay => {
            let failure = replay(state, &credential, now).await;
            return Err(
                confirmed(state, headers, parts, &credential, &fence, failure, false).await,
            );
        }
    };
    Ok(Authenticated {
        credential,
        rate,
        deferred,
        fence,
    })
}

/// A refusal of a request whose credential came from the cache unchecked (`crate::fence`): the
/// credential is read from the store first, and one that no longer stands is refused as such,
/// never with the refusal its stale copy earned. `counted`: the request was counted in its
/// window (and is given back if refused so).
async fn confirmed(
    state: &AppState,
    headers: &HeaderMap,
    parts: SignedParts<'_>,
    credential: &Credential,
    fence: &CredentialFence,
    failure: AuthFailure,
    counted: bool,
) -> AuthFailure {
    if fence.expected().is_none() {
        return failure;
    }
    if counted {
        return match reauthenticate_counted(state, headers, parts, credential, fence).await {
            Ok(_) => failure,
            Err(refused) => refused,
        };
    }
    match reauthenticate(state, headers, parts, credential, fence).await {
        Ok(_) => failure,
        Err(error) => AuthFailure {
            error,
            rate: failure.rate,
        },
    }
}

/// [`reauthenticate`] for a request counted in its window. Passed, the fence holds from then
/// on; refused, the request is given back to the window, and the refusal carries the window's
/// figures uncounted.
pub async fn reauthenticate_counted(
    state: &AppState,
    headers: &HeaderMap,
    parts: SignedParts<'_>,
    before: &Credential,
    fence: &CredentialFence,
) -> Result<Arc<Credential>, AuthFailure> {
    match reauthenticate(state, headers, parts, before, fence).await {
        Ok(current) => {
            fence.hold();
            Ok(current)
        }
        Err(error) => {
            let at = fence
                .authenticated_at()
                .unwrap_or_else(|| state.clock.now());
            state.limiter.refund(before.id, at).await;
            let rate = state.limiter.peek(before.id, before.rate_limit, at).await;
            Err(AuthFailure {
                error,
                rate: Some(rate),
            })
        }
    }
}

/// Authenticates a request again, from the store, after its route found that credentials
/// changed since its cached credential was read (`crate::fence`): the credential as it stands
/// now, if the request's signature and window (judged when it was first authenticated) still
/// pass with it. Neither counted in the rate window nor checked for a replay again: the request
/// did both once already.
async fn reauthenticate(
    state: &AppState,
    headers: &HeaderMap,
    parts: SignedParts<'_>,
    before: &Credential,
    fence: &CredentialFence,
) -> CoreResult<Arc<Credential>> {
    let now = fence
        .authenticated_at()
        .unwrap_or_else(|| state.clock.now());
    let checked = check_format(headers)?;
    let current = current_credential(state, checked.api_key).await?;
    if current.id != before.id {
        return Err(Refusal::new(
            ErrorCode::AuthenticationFailed,
            "the credentials are not valid",
        )
        .into());
    }
    auth::check_signature_and_window(&current, &checked, &parts, now)?;
    Ok(current)
}

/// `REPLAY_DETECTED`, with the request taken back out of its credential's window: whoever
/// replays a captured request must not use up its owner's window.
pub async fn replay(
    state: &AppState,
    credential: &Credential,
    now: custody_core::Timestamp,
) -> AuthFailure {
    state.limiter.refund(credential.id, now).await;
    let refusal = Refusal::new(ErrorCode::ReplayDetected, "this nonce was already used");
    AuthFailure {
        error: refusal.into(),
        rate: Some(
            state
                .limiter
                .peek(credential.id, credential.rate_limit, now)
                .await,
        ),
    }
}
