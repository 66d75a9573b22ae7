//! The path of one request: route, body limit, authentication, authorization, query rules,
//! handler, error mapping, log line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use custody_core::auth::{Credential, RateDecision, SignedParts};
use custody_core::error::{CoreError, ErrorCode, Refusal};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Incoming};
use hyper::{HeaderMap, Request, Response};
use uuid::Uuid;

use crate::authn::{self, authenticate, AuthFailure};
use crate::errors::sanitize;
use crate::fence::{CredentialFence, FenceState};
use crate::handlers;
use crate::input;
use crate::nonces::DeferredNonce;
use crate::reply::{finish, refusal_reply, Reply};
use crate::routes::{self, Access, Match, Route};
use crate::state::AppState;

pub const PREFIX: &str = "/v1";

/// Everything a handler gets about its request.
pub struct Call {
    pub trace_id: Uuid,
    pub method: String,
    /// Full path, with the `/v1` prefix.
    pub path: String,
    pub params: Vec<String>,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub credential: Option<Arc<Credential>>,
    /// The request's nonce, claimed, when the route's command writes it in its own transaction
    /// (`crate::idempotent` takes it); one not taken is written after the handler.
    pub nonce: Arc<std::sync::Mutex<Option<DeferredNonce>>>,
    /// The credential's check still due in the route's own transaction (`crate::fence`).
    pub fence: CredentialFence,
}

impl Call {
    /// The authenticated credential; handlers of authenticated routes only.
    pub fn credential(&self) -> &Credential {
        self.credential
            .as_ref()
            .expect("the route requires authentication")
    }

    /// The deferred nonce, for the command's transaction to write.
    pub fn take_nonce(&self) -> Option<DeferredNonce> {
        self.nonce.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

struct Outcome {
    reply: Reply,
    rate: Option<RateDecision>,
    route: &'static str,
    credential: Option<Uuid>,
    /// The command found its nonce used (`REPLAY_DETECTED` from its transaction).
    replayed: bool,
    /// The credential, read again from the store (`crate::fence`), no longer stands: the
    /// answer is its refusal, whatever the request's nonce turns out to be.
    credential_refused: bool,
}

pub async fn handle(state: Arc<AppState>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let trace_id = state.new_trace_id();
    let method = req.method().as_str().to_owned();
    let outcome = process(&state, req, trace_id, &method).await;
    let elapsed = started.elapsed();
    state.metrics.record_request(
        outcome.route,
        &method,
        outcome.reply.status,
        elapsed.as_secs_f64(),
    );
    tracing::info!(
        method = %method,
        route = outcome.route,
        status = outcome.reply.status,
        latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        trace_id = %trace_id,
        credential = outcome.credential.map(|c| c.to_string()).unwrap_or_default(),
        "request"
    );
    finish(outcome.reply, trace_id, outcome.rate.as_ref())
}

fn refused(r: Refusal, trace_id: Uuid, route: &'static str) -> Outcome {
    Outcome {
        reply: refusal_reply(&r, trace_id),
        rate: None,
        route,
        credential: None,
        replayed: false,
        credential_refused: false,
    }
}

/// Logs what a client must not see and answers the sanitized form.
fn core_error_reply(err: &CoreError, trace_id: Uuid, route: &'static str) -> Reply {
    match err {
        CoreError::Refused(_) => {}
        CoreError::Port(p) => {
            tracing::error!(trace_id = %trace_id, route, error = %p, "port failure")
        }
        CoreError::Invariant(m) => {
            tracing::error!(trace_id = %trace_id, route, invariant = %m, "invariant violated")
        }
    }
    let refusal = sanitize(err);
    refusal_reply(&refusal, trace_id)
}

async fn read_body(headers: &HeaderMap, body: Incoming, max: usize) -> Result<Bytes, Refusal> {
    let too_large = || {
        Refusal::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than {max} bytes"),
        )
    };
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Err(_) => Err(Refusal::new(
            ErrorCode::MalformedJson,
            "the request body could not be read",
        )),
    }
}

async fn process(
    state: &AppState,
    req: Request<Incoming>,
    trace_id: Uuid,
    method: &str,
) -> Outcome {
    let path = req.uri().path().to_owned();
    let raw_query = req.uri().query().map(str::to_owned);
    if crate::console::owns(&path) {
        return Outcome {
            reply: crate::console::serve(method, &path),
            rate: None,
            route: "/console",
            credential: None,
            replayed: false,
            credential_refused: false,
        };
    }
    let Some(sub) = path.strip_prefix(PREFIX).filter(|s| s.starts_with('/')) else {
        return refused(Refusal::not_found("route"), trace_id, "unknown");
    };
    let is_admin_area = sub.starts_with("/admin/");
    let mut admin_allow: Option<Vec<&'static str>> = None;
    let (route, params): (Option<&'static Route>, Vec<String>) = match routes::find(method, sub) {
        Match::Found { route, params } => (Some(route), params),
        // In the admin area only admins learn which methods exist (checked after auth below).
        Match::WrongMethod { allow } if is_admin_area => {
            admin_allow = Some(allow);
            (None, Vec::new())
        }
        Match::WrongMethod { allow } => {
            let r = Refusal::new(
                ErrorCode::MethodNotAllowed,
                format!("{method} is not allowed here"),
            );
            let mut o = refused(r, trace_id, "unknown");
            o.reply = o.reply.with_header("allow", allow.join(", "));
            return o;
        }
        // The admin area is guarded as a whole: only an admin learns which of its paths exist.
        Match::NotFound if is_admin_area => (None, Vec::new()),
        Match::NotFound => return refused(Refusal::not_found("route"), trace_id, "unknown"),
    };
    let route_name = route.map_or("/admin/*", |r| r.template);

    let access = route.map_or(Access::Admin, |r| r.access);
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    // Before authentication anyone can hold a connection slot while a body trickles in: the
    // read gets a deadline, and a late body closes the connection.
    let deadline = Duration::from_millis(state.limits.body_read_timeout_ms);
    // A request without a body (every GET; hyper knows it from the head) has nothing to wait
    // for: no timer is armed for it.
    let read = if body.is_end_stream() {
        Ok(Bytes::new())
    } else {
        tokio::time::timeout(
            deadline,
            read_body(&headers, body, state.limits.body_bytes_max),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Refusal::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} ms",
                    deadline.as_millis()
                ),
            ))
        })
    };
    let body = match read {
        Ok(body) => body,
        Err(r) => {
            let timed_out = r.code == ErrorCode::RequestTimeout;
            let mut o = refused(r, trace_id, route_name);
            if timed_out {
                o.reply = o.reply.with_header("connection", "close");
            }
            if access != Access::Public {
                o.rate = authn::figures_of_named_key(state, &headers).await;
            }
            return o;
        }
    };

    let mut credential = None;
    let mut rate = None;
    let mut fence = CredentialFence::held();
    let nonce = Arc::new(std::sync::Mutex::new(None));
    if access != Access::Public {
        let parts = SignedParts {
            method,
            path: &path,
            body: &body,
        };
        let in_command = route.is_some_and(|r| r.id.nonce_in_command());
        let in_route = route.is_some_and(|r| r.id.fences_in_route());
        match authenticate(state, &headers, parts, in_command, in_route).await {
            Ok(a) => {
                credential = Some(a.credential);
                rate = Some(a.rate);
                fence = a.fence;
                *nonce.lock().unwrap_or_else(|p| p.into_inner()) = a.deferred;
            }
            Err(AuthFailure { error, rate }) => {
                let reply = core_error_reply(&error, trace_id, route_name);
                return Outcome {
                    reply,
                    rate,
                    route: route_name,
                    credential: None,
                    replayed: false,
                    credential_refused: false,
                };
            }
        }
    }
    let credential_id = credential.as_ref().map(|c| c.id);
    let replay_of = credential.clone();
    let mut outcome = authorized(
        state,
        Authorized {
            route,
            route_name,
            access,
            admin_allow,
            raw_query,
            params,
            trace_id,
            method,
            path,
            headers,
            body,
            credential,
            nonce: Arc::clone(&nonce),
            fence,
        },
    )
    .await;
    // A credential read again and refused on the way (`authn::reauthenticate_counted`) answers its own figures.
    if outcome.rate.is_none() {
        outcome.rate = rate;
    }
    outcome.credential = credential_id;
    let Some(credential) = replay_of else {
        return outcome;
    };
    // A replay found in the command's transaction: its window is given back, like any replay.
    if outcome.replayed {
        let failure = authn::replay(state, &credential, state.clock.now()).await;
        outcome.rate = failure.rate;
        return outcome;
    }
    // The route defers its nonce to its command, which did not run (a refusal before it):
    // the nonce is written now, and a replay is answered as one whatever the refusal was.
    let left = nonce.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(d) = left {
        match state.nonces.record_deferred(state.store.as_ref(), d).await {
            Ok(true) => {}
            Ok(false) if outcome.credential_refused => {}
            Ok(false) => {
                let failure = authn::replay(state, &credential, state.clock.now()).await;
                outcome.reply = core_error_reply(&failure.error, trace_id, route_name);
                outcome.rate = failure.rate;
            }
            Err(e) => outcome.reply = core_error_reply(&e, trace_id, route_name),
        }
    }
    outcome
}

/// Why `credential` may not call a route of `access`, if it may not.
fn forbidden(credential: &Credential, access: Access) -> Option<Refusal> {
    let allowed = match access {
        Access::Public => true,
        Access::Admin => credential.admin,
        Access::Scope(scope) => credential.has_scope(scope),
    };
    (!allowed).then(|| {
        Refusal::new(
            ErrorCode::Forbidden,
            "these credentials may not call this route",
        )
    })
}

/// What the rest of a request's path needs once its caller is authenticated.
struct Authorized<'a> {
    route: Option<&'static Route>,
    route_name: &'static str,
    access: Access,
    admin_allow: Option<Vec<&'static str>>,
    raw_query: Option<String>,
    params: Vec<String>,
    trace_id: Uuid,
    method: &'a str,
    path: String,
    headers: HeaderMap,
    body: Bytes,
    credential: Option<Arc<Credential>>,
    nonce: Arc<std::sync::Mutex<Option<DeferredNonce>>>,
    fence: CredentialFence,
}

/// Authorization, query rules and the handler.
async fn authorized(state: &AppState, a: Authorized<'_>) -> Outcome {
    let Authorized {
        route,
        route_name,
        access,
        admin_allow,
        raw_query,
        params,
        trace_id,
        method,
        path,
        headers,
        body,
        mut credential,
        nonce,
        fence,
    } = a;
    let outcome = |reply: Reply| Outcome {
        reply,
        rate: None,
        route: route_name,
        credential: None,
        replayed: false,
        credential_refused: false,
    };
    // A refusal on the way to the route (scope, path, query) is answered on a credential read
    // from the store, not on a cached one still unchecked (`crate::fence`).
    let refused_early = fence.expected().is_some()
        && (credential
            .as_deref()
            .is_some_and(|c| forbidden(c, access).is_some())
            || route.is_none()
            || route.is_some_and(|r| input::query(raw_query.as_deref(), r.query).is_err()));
    if refused_early {
        let before = Arc::clone(credential.as_ref().expect("a fence has a credential"));
        let parts = SignedParts {
            method,
            path: &path,
            body: &body,
        };
        match authn::reauthenticate_counted(state, &headers, parts, &before, &fence).await {
            Ok(current) => credential = Some(current),
            Err(AuthFailure { error, rate }) => {
                return Outcome {
                    rate,
                    credential_refused: true,
                    ..outcome(core_error_reply(&error, trace_id, route_name))
                }
            }
        }
    }

    if let Some(refusal) = credential.as_deref().and_then(|c| forbidden(c, access)) {
        return outcome(refusal_reply(&refusal, trace_id));
    }
    let Some(route) = route else {
        if let Some(allow) = admin_allow {
            let r = Refusal::new(
                ErrorCode::MethodNotAllowed,
                format!("{method} is not allowed here"),
            );
            return outcome(refusal_reply(&r, trace_id).with_header("allow", allow.join(", ")));
        }
        return outcome(refusal_reply(&Refusal::not_found("route"), trace_id));
    };
    let query = match input::query(raw_query.as_deref(), route.query) {
        Ok(q) => q,
        Err(r) => return outcome(refusal_reply(&r, trace_id)),
    };

    let mut call = Call {
        trace_id,
        method: method.to_owned(),
        path,
        params,
        query,
        headers,
        body,
        credential,
        nonce,
        fence,
    };
    let mut result = handlers::dispatch(state, route, &call).await;
    // The route's credential came from the cache unchecked and its transaction did not hold
    // (`crate::fence`): it is read from the store before anything is answered. A route that
    // found it changed had no effect, and runs again on the credential as it stands now.
    let fence_state = call.fence.state();
    if fence_state != FenceState::Held {
        let before = Arc::clone(call.credential.as_ref().expect("a fence has a credential"));
        let parts = SignedParts {
            method,
            path: &call.path,
            body: &call.body,
        };
        match authn::reauthenticate_counted(state, &call.headers, parts, &before, &call.fence).await
        {
            Err(AuthFailure { error, rate }) => {
                return Outcome {
                    rate,
                    credential_refused: true,
                    ..outcome(core_error_reply(&error, trace_id, route_name))
                }
            }
            Ok(current) => {
                if let Some(refusal) = forbidden(&current, access) {
                    return outcome(refusal_reply(&refusal, trace_id));
                }
                call.credential = Some(current);
                if fence_state == FenceState::Stale {
                    result = handlers::dispatch(state, route, &call).await;
                }
            }
        }
    }
    match result {
        Ok(reply) => outcome(reply),
        Err(CoreError::Refused(r)) if r.code == ErrorCode::ReplayDetected => Outcome {
            replayed: true,
            ..outcome(refusal_reply(&r, trace_id))
        },
        Err(err) => outcome(core_error_reply(&err, trace_id, route_name)),
    }
}
