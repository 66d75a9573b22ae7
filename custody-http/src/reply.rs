//! Building responses: JSON bodies, the trace id on every response, rate-limit headers on
//! authenticated ones, and the sanitized error shape.

use bytes::Bytes;
use custody_core::auth::RateDecision;
use custody_core::error::Refusal;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Response;
use serde::Serialize;
use uuid::Uuid;

use crate::errors::status_of;

/// A response before the common headers are added.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub fn json<T: Serialize>(status: u16, value: &T) -> Reply {
        Reply {
            status,
            body: serde_json::to_vec(value).expect("response values always serialize"),
            headers: Vec::new(),
        }
    }

    pub fn raw_json(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            status,
            body,
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'static str,
    message: &'a str,
    trace_id: Uuid,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    details: &'a [custody_core::error::FieldIssue],
}

/// The error body of decisions §7 for `refusal`.
pub fn error_body(refusal: &Refusal, trace_id: Uuid) -> Vec<u8> {
    serde_json::to_vec(&ErrorBody {
        code: refusal.code.as_str(),
        message: &refusal.message,
        trace_id,
        details: &refusal.details,
    })
    .expect("error bodies always serialize")
}

pub fn error_reply(refusal: &Refusal, status: u16, trace_id: Uuid) -> Reply {
    let mut reply = Reply::raw_json(status, error_body(refusal, trace_id));
    if let Some(s) = refusal.retry_after_s {
        reply = reply.with_header("retry-after", s.to_string());
    }
    reply
}

pub fn refusal_reply(refusal: &Refusal, trace_id: Uuid) -> Reply {
    error_reply(refusal, status_of(refusal.code), trace_id)
}

/// Headers of ours that `hyper::header` has no constant for.
const X_CONTENT_TYPE_OPTIONS: HeaderName = HeaderName::from_static("x-content-type-options");
const X_TRACE_ID: HeaderName = HeaderName::from_static("x-trace-id");
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// Turns a reply into a hyper response with the headers every response carries.
pub fn finish(reply: Reply, trace_id: Uuid, rate: Option<&RateDecision>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(reply.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    // Sized once for every header below (a map grows by rehashing all it holds).
    headers.reserve(6 + reply.headers.len());
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let mut id = Uuid::encode_buffer();
    let id = trace_id.hyphenated().encode_lower(&mut id);
    if let Ok(v) = HeaderValue::from_str(id) {
        headers.insert(X_TRACE_ID, v);
    }
    if let Some(rate) = rate {
        headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(rate.limit));
        headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(rate.remaining));
    }
    for (name, value) in reply.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
    response
}
