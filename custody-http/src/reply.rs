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

/// Turns a reply into a hyper response with the headers every response carries.
pub fn finish(reply: Reply, trace_id: Uuid, rate: Option<&RateDecision>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(reply.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(&trace_id.to_string()) {
        headers.insert("x-trace-id", v);
    }
    if let Some(rate) = rate {
        headers.insert("x-ratelimit-limit", HeaderValue::from(rate.limit));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(rate.remaining));
    }
    for (name, value) in reply.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
    response
}
