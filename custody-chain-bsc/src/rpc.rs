//! A JSON-RPC 2.0 client over HTTP(S) with batching, a timeout per request, and failover across
//! an ordered list of endpoints, each with its own health record.
//!
//! Failure classes, decided once here (the only place wire errors are mapped):
//!
//! | what happened | class | next endpoint tried? |
//! |---|---|---|
//! | connect error, reset, timeout, HTTP 408/429/5xx | transient | yes |
//! | JSON-RPC rate-limit error (`-32005`, "limit exceeded", "too many requests"...) | transient | yes |
//! | HTTP 200 with a body that is not a JSON-RPC answer to what was sent | permanent | yes |
//! | other HTTP status (401, 403, 404...) | permanent | yes |
//! | endpoint on another chain (`eth_chainId` differs) | permanent | yes; the endpoint is never used again |
//! | answer larger than `response_bytes_max` | permanent, [`CallFailure::TooLarge`] | no: every endpoint would send the same bytes; not counted against the endpoint's health |
//! | any other JSON-RPC error object | given to the caller ([`RpcError`]) | no: the node answered |
//!
//! When every endpoint fails, the call fails as transient if at least one endpoint failed
//! transiently (it may come back), else as permanent.
//!
//! An answer over the size limit is the request's trait, not the endpoint's: callers that can
//! ask for less use [`RpcClient::try_batch`] (tells it apart) or [`RpcClient::batch_split`]
//! (sends a batch answered too large again in halves, down to single calls).
//!
//! Endpoint URLs often carry an API key in their path or query: health records, logs and error
//! messages show only `scheme://host:port` (plus `/…` and `?…` markers), and error texts are
//! scrubbed of the path and query.
//!
//! The order of the endpoints, their records and the URL rule are the core's
//! [`EndpointSet`] (shared with the TRON adapter); this client sends the bytes and checks
//! `eth_chainId`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use custody_core::chain::endpoints::{
    self, Backoff, EndpointSet, FailoverPolicy, Failures, HiddenMarks, Identity, Recorded,
    RedactedUrl, UrlParts,
};
use custody_core::chain::EndpointHealth;
use custody_core::error::{PortError, Retry};
use custody_core::Timestamp;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Serialize;
use serde_json::{json, Value};

/// The port name carried by every [`PortError`] of this crate.
pub const PORT: &str = "chain.bsc";

/// First wait before an endpoint that failed is tried ahead of the others again; doubles with
/// each consecutive failure up to [`RETRY_BACKOFF_MS_MAX`].
const RETRY_BACKOFF_MS_MIN: u64 = 500;
const RETRY_BACKOFF_MS_MAX: u64 = 30_000;
const BACKOFF: Backoff = Backoff::doubling(
    Duration::from_millis(RETRY_BACKOFF_MS_MIN),
    Duration::from_millis(RETRY_BACKOFF_MS_MAX),
);

/// Settings of one [`RpcClient`].
#[derive(Debug, Clone)]
pub struct RpcSettings {
    /// Endpoints in order of preference (`https://...`; `http://` only on loopback unless
    /// `allow_insecure_http`).
    pub urls: Vec<String>,
    /// Checked with `eth_chainId` the first time each endpoint is used; `None` skips the check.
    pub expected_chain_id: Option<u64>,
    /// Whole exchange with one endpoint: connect, send, and read the full answer.
    pub request_timeout_ms: u64,
    /// Largest answer body read; above it the attempt fails (permanent).
    pub response_bytes_max: usize,
    /// Most requests in one JSON-RPC batch; longer batches are split.
    pub batch_max: usize,
    /// Accept `http://` to hosts other than loopback. Plain HTTP across a network lets anyone
    /// on the path invent deposits: leave it off unless the link is otherwise protected.
    pub allow_insecure_http: bool,
}

/// Why an RPC URL was refused at construction (the rule every chain adapter applies). Texts
/// show the URL redacted.
pub use custody_core::chain::endpoints::UrlError;

/// A JSON-RPC error object the node answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    fn from_value(v: &Value) -> Self {
        let code = v.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        RpcError {
            code,
            message: endpoints::scrub(&message, &[]),
        }
    }

    /// The request itself is wrong: retrying it anywhere gives the same answer.
    pub fn is_permanent(&self) -> bool {
        let m = self.message.to_ascii_lowercase();
        // -32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid
        // params; 3 is "execution reverted" with data.
        matches!(self.code, -32700 | -32600 | -32601 | -32602 | 3)
            || m.contains("revert")
            || m.contains("method not found")
            || m.contains("not supported")
            || m.contains("does not exist/is not available")
    }

    /// The call ran and reverted (code 3 carries the revert data; some nodes answer -32000
    /// "execution reverted"): an answer of the contract, not of the node.
    pub fn is_revert(&self) -> bool {
        self.code == 3 || self.message.to_ascii_lowercase().contains("revert")
    }

    /// The node has no such method (or does not offer it on this endpoint).
    pub fn is_method_not_found(&self) -> bool {
        let m = self.message.to_ascii_lowercase();
        self.code == -32601
            || m.contains("method not found")
            || m.contains("does not exist/is not available")
            || m.contains("not supported")
            || m.contains("unsupported method")
    }

    /// The endpoint refuses because of a quota: another endpoint may serve the request.
    pub fn is_rate_limit(&self) -> bool {
        let m = self.message.to_ascii_lowercase();
        matches!(self.code, -32005 | -32090 | 429)
            || m.contains("rate limit")
            || m.contains("limit exceeded")
            || m.contains("too many requests")
            || m.contains("request limit")
            || m.contains("exceeded the quota")
    }

    pub fn retry(&self) -> Retry {
        if self.is_permanent() {
            Retry::Permanent
        } else {
            Retry::Transient
        }
    }

    /// The port error for `method` failing with this answer.
    pub fn into_port_error(self, method: &str) -> PortError {
        PortError {
            port: PORT,
            retry: self.retry(),
            message: format!(
                "{method}: node answered error {}: {}",
                self.code, self.message
            ),
        }
    }
}

/// Health of one endpoint, for the admin `rpcs` listing. Serializes to JSON as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RpcHealth {
    /// `scheme://host:port`, with `/…` or `?…` where the configured URL had a path or query
    /// (which often hold an API key).
    pub url: String,
    /// The last exchange succeeded. `false` before the first one.
    pub healthy: bool,
    /// The endpoint reported the configured chain id (`false` until checked).
    pub chain_id_verified: bool,
    /// The last failure, scrubbed of secrets and truncated.
    pub last_error: Option<String>,
    /// Duration of the last exchange, successful or not.
    pub last_latency_ms: Option<u64>,
    pub consecutive_failures: u32,
    /// RFC 3339 UTC.
    pub last_success_at: Option<Timestamp>,
}

impl From<EndpointHealth> for RpcHealth {
    fn from(h: EndpointHealth) -> Self {
        RpcHealth {
            url: h.url,
            healthy: h.healthy,
            chain_id_verified: h.identity_verified,
            last_error: h.last_error,
            last_latency_ms: h.last_latency_ms,
            consecutive_failures: h.consecutive_failures,
            last_success_at: h.last_success_at,
        }
    }
}

/// One failed exchange with one endpoint.
#[derive(Debug, Clone)]
struct AttemptError {
    retry: Retry,
    message: String,
    /// The answer was cut at `response_bytes_max`.
    too_large: bool,
}

impl AttemptError {
    fn transient(message: impl Into<String>) -> Self {
        AttemptError {
            retry: Retry::Transient,
            message: message.into(),
            too_large: false,
        }
    }
    fn permanent(message: impl Into<String>) -> Self {
        AttemptError {
            retry: Retry::Permanent,
            message: message.into(),
            too_large: false,
        }
    }
}

/// Why a call or batch got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// The answer is larger than `response_bytes_max` (permanent for this request). No other
    /// endpoint was tried and the endpoint's health is untouched: ask for less.
    #[error("{0}")]
    TooLarge(PortError),
    /// Every endpoint failed; classified as in the module table.
    #[error("{0}")]
    Failed(PortError),
}

impl From<CallFailure> for PortError {
    fn from(f: CallFailure) -> Self {
        match f {
            CallFailure::TooLarge(e) | CallFailure::Failed(e) => e,
        }
    }
}

/// Answers of a batch, in the order of its calls.
pub type Answers = Vec<Result<Value, RpcError>>;

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A JSON-RPC client over an ordered list of endpoints. Cheap to share behind an `Arc`; every
/// method takes `&self`.
pub struct RpcClient {
    /// Where to send, in the order of `endpoints`.
    uris: Vec<Uri>,
    endpoints: EndpointSet,
    http: HttpClient,
    expected_chain_id: Option<u64>,
    timeout: Duration,
    response_bytes_max: usize,
    batch_max: usize,
    next_id: AtomicU64,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("endpoints", &self.endpoints.shown_all())
            .field("expected_chain_id", &self.expected_chain_id)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RpcClient {
    /// Checks every URL and builds the client. Does no I/O: endpoints are contacted (and their
    /// chain id checked) on first use. An empty list is accepted: every call then fails as
    /// transient ("no endpoint configured"), so the service runs without the chain.
    pub fn new(settings: &RpcSettings) -> Result<Self, UrlError> {
        let (uris, urls) = settings
            .urls
            .iter()
            .map(|url| parse_endpoint(url, settings.allow_insecure_http))
            .collect::<Result<(Vec<_>, Vec<_>), _>>()?;
        let endpoints = EndpointSet::new(
            urls,
            FailoverPolicy {
                backoff: BACKOFF,
                // Healthy means answered: an endpoint not used yet is not vouched for.
                healthy_until_tried: false,
                marks: HiddenMarks::Each,
                identity: settings.expected_chain_id.map_or_else(
                    || "chain_id not checked".into(),
                    |id| format!("chain_id {id}"),
                ),
            },
        );
        let timeout = Duration::from_millis(settings.request_timeout_ms.max(1));

        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeout));
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .expect("the ring provider supports the default TLS versions")
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(16)
            .build(tls);

        Ok(RpcClient {
            uris,
            endpoints,
            http: client,
            expected_chain_id: settings.expected_chain_id,
            timeout,
            response_bytes_max: settings.response_bytes_max.max(1024),
            batch_max: settings.batch_max.max(1),
            next_id: AtomicU64::new(1),
        })
    }

    /// The health record of every endpoint, in configured order.
    pub fn health(&self) -> Vec<RpcHealth> {
        self.endpoint_health()
            .into_iter()
            .map(RpcHealth::from)
            .collect()
    }

    /// [`RpcClient::health`] in the shape every network's admin `rpcs` listing shows.
    pub fn endpoint_health(&self) -> Vec<EndpointHealth> {
        self.endpoints.health()
    }

    /// Sends `eth_blockNumber` to every endpoint (not only the preferred one) so that
    /// [`RpcClient::health`] reflects all of them. Never fails; results land in the records.
    pub async fn probe_all(&self) {
        for i in 0..self.endpoints.len() {
            let body = self.request_body("eth_blockNumber", json!([]));
            let _ = self.attempt(i, &body, 1).await;
        }
    }

    /// One call. A JSON-RPC error answer becomes a [`PortError`] classified by
    /// [`RpcError::retry`].
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, PortError> {
        match self.call_raw(method, params).await? {
            Ok(v) => Ok(v),
            Err(e) => Err(e.into_port_error(method)),
        }
    }

    /// One call; a JSON-RPC error answer is given back as is, for callers that act on it.
    pub async fn call_raw(
        &self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, RpcError>, PortError> {
        Ok(self.try_call_raw(method, params).await?)
    }

    async fn try_call_raw(
        &self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, RpcError>, CallFailure> {
        let body = self.request_body(method, params);
        let mut answers = self.send_with_failover(&body, 1, method).await?;
        Ok(answers.pop().unwrap_or_else(|| {
            Err(RpcError {
                code: 0,
                message: "empty answer".into(),
            })
        }))
    }

    /// Several calls in JSON-RPC batches of at most `batch_max`; answers in the order of
    /// `calls`, each the result or the node's error object for that call.
    pub async fn batch(&self, calls: &[(&str, Value)]) -> Result<Answers, PortError> {
        Ok(self.try_batch(calls).await?)
    }

    /// [`RpcClient::batch`], telling an answer over `response_bytes_max` apart
    /// ([`CallFailure::TooLarge`]) so that the caller can ask for less.
    pub async fn try_batch(&self, calls: &[(&str, Value)]) -> Result<Answers, CallFailure> {
        let mut out = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(self.batch_max) {
            out.extend(self.send_chunk(chunk).await?);
        }
        Ok(out)
    }

    /// [`RpcClient::batch`] where a batch answered over `response_bytes_max` is sent again in
    /// two halves, and so on down to single calls: at most `2n − 1` requests for `n` calls.
    /// Fails with [`CallFailure::TooLarge`] only when the answer to one single call is over
    /// the limit.
    pub async fn batch_split(&self, calls: &[(&str, Value)]) -> Result<Answers, CallFailure> {
        let mut out: Vec<Option<Result<Value, RpcError>>> = vec![None; calls.len()];
        // A stack of ranges of `calls`, the first to send on top.
        let mut pending: Vec<std::ops::Range<usize>> = (0..calls.len())
            .step_by(self.batch_max)
            .map(|start| start..(start + self.batch_max).min(calls.len()))
            .rev()
            .collect();
        while let Some(range) = pending.pop() {
            match self.send_chunk(&calls[range.clone()]).await {
                Ok(answers) => {
                    for (slot, answer) in out[range].iter_mut().zip(answers) {
                        *slot = Some(answer);
                    }
                }
                Err(CallFailure::TooLarge(e)) if range.len() > 1 => {
                    tracing::debug!(calls = range.len(), error = %e.message, "batch answer too large: splitting it");
                    let middle = range.start + range.len() / 2;
                    pending.push(middle..range.end);
                    pending.push(range.start..middle);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every range was answered"))
            .collect())
    }

    /// One request: a single call as an object, several as a batch array.
    async fn send_chunk(&self, chunk: &[(&str, Value)]) -> Result<Answers, CallFailure> {
        if let [(method, params)] = chunk {
            return Ok(vec![self.try_call_raw(method, params.clone()).await?]);
        }
        let items: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(i, (method, params))| {
                json!({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
            })
            .collect();
        let body = serde_json::to_vec(&Value::Array(items)).expect("JSON values serialize");
        let label = format!(
            "batch of {} ({}...)",
            chunk.len(),
            chunk.first().map_or("", |c| c.0)
        );
        self.send_with_failover(&body, chunk.len(), &label).await
    }

    fn request_body(&self, method: &str, params: Value) -> Vec<u8> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .expect("JSON values serialize")
    }

    async fn send_with_failover(
        &self,
        body: &[u8],
        expected: usize,
        label: &str,
    ) -> Result<Answers, CallFailure> {
        if self.endpoints.is_empty() {
            return Err(CallFailure::Failed(PortError::transient(
                PORT,
                format!("{label}: no BSC RPC endpoint is configured"),
            )));
        }
        let order = self.endpoints.order(now_timestamp());
        if order.is_empty() {
            return Err(CallFailure::Failed(PortError::permanent(
                PORT,
                format!(
                    "{label}: every BSC RPC endpoint serves another chain than the configured \
                     chain id {}",
                    self.expected_chain_id.unwrap_or_default()
                ),
            )));
        }
        let mut failures = Failures::default();
        for i in order {
            match self.attempt(i, body, expected).await {
                Ok(answers) => return Ok(answers),
                Err(e) if e.too_large => {
                    let shown = self.endpoints.shown(i);
                    let text = self.endpoints.scrub(i, &e.message);
                    tracing::warn!(endpoint = %shown, request = label, error = %text, "BSC RPC answer over the size limit");
                    return Err(CallFailure::TooLarge(PortError::permanent(
                        PORT,
                        format!("{label}: {shown}: {text}"),
                    )));
                }
                Err(e) => failures.push(e.retry, self.endpoints.labelled(i, &e.message)),
            }
        }
        Err(CallFailure::Failed(failures.into_port_error(
            PORT,
            &format!("{label}: every BSC RPC endpoint failed: "),
        )))
    }

    /// One exchange with endpoint `i` (after its chain id check, the first time), recorded in
    /// its health.
    async fn attempt(
        &self,
        i: usize,
        body: &[u8],
        expected: usize,
    ) -> Result<Vec<Result<Value, RpcError>>, AttemptError> {
        if let Some(chain_id) = self.expected_chain_id {
            if self.endpoints.identity(i) == Identity::Unchecked {
                self.check_chain_id(i, chain_id).await?;
            }
        }
        let started = Instant::now();
        let result = self.exchange(&self.uris[i], body, expected).await;
        let latency = started.elapsed();
        // An answer too large is the request's trait: the endpoint did answer.
        self.record(i, latency, result.as_ref().err().filter(|e| !e.too_large));
        result
    }

    async fn check_chain_id(&self, i: usize, expected: u64) -> Result<(), AttemptError> {
        let body = self.request_body("eth_chainId", json!([]));
        let started = Instant::now();
        let result = self
            .exchange(&self.uris[i], &body, 1)
            .await
            .and_then(|mut a| match a.pop() {
                Some(Ok(v)) => crate::codec::quantity_u64(&v).map_err(|e| {
                    AttemptError::permanent(format!("eth_chainId answered a malformed value: {e}"))
                }),
                Some(Err(e)) => Err(AttemptError {
                    retry: if e.is_rate_limit() {
                        Retry::Transient
                    } else {
                        e.retry()
                    },
                    message: format!("eth_chainId: node answered error {}: {}", e.code, e.message),
                    too_large: false,
                }),
                None => Err(AttemptError::permanent("eth_chainId: empty answer")),
            });
        let latency = started.elapsed();
        match result {
            Ok(actual) if actual == expected => {
                self.endpoints.set_identity(i, Identity::Verified);
                tracing::info!(endpoint = %self.endpoints.shown(i), chain_id = actual, "BSC RPC endpoint chain id verified");
                Ok(())
            }
            Ok(actual) => {
                let e = AttemptError::permanent(format!(
                    "chain id mismatch: configured {expected}, the endpoint serves {actual}; it \
                     will not be used"
                ));
                tracing::error!(
                    endpoint = %self.endpoints.shown(i),
                    configured = expected,
                    actual,
                    "BSC RPC endpoint serves another chain: check [bsc] urls and chain_id"
                );
                self.record(i, latency, Some(&e));
                self.endpoints.set_identity(
                    i,
                    Identity::Refused {
                        actual: actual.to_string(),
                    },
                );
                Err(e)
            }
            Err(e) => {
                // An oversized answer to eth_chainId is the endpoint's failure.
                let e = AttemptError {
                    too_large: false,
                    ..e
                };
                self.record(i, latency, Some(&e));
                Err(e)
            }
        }
    }

    fn record(&self, i: usize, latency: Duration, error: Option<&AttemptError>) {
        let outcome = error.map_or(Ok(()), |e| Err(e.message.as_str()));
        let recorded = self.endpoints.record(i, outcome, latency, now_timestamp());
        let shown = self.endpoints.shown(i);
        match (error, recorded) {
            (
                Some(e),
                Recorded::Failed {
                    consecutive_failures,
                    error: text,
                },
            ) => tracing::warn!(
                endpoint = %shown,
                consecutive_failures,
                retry = ?e.retry,
                error = %text,
                "BSC RPC endpoint failed"
            ),
            (_, Recorded::Succeeded { after_failures }) if after_failures > 0 => {
                tracing::info!(endpoint = %shown, after_failures, "BSC RPC endpoint recovered");
            }
            _ => {}
        }
    }

    /// POSTs `body` and reads the answers, all within the request timeout.
    async fn exchange(
        &self,
        uri: &Uri,
        body: &[u8],
        expected: usize,
    ) -> Result<Vec<Result<Value, RpcError>>, AttemptError> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(uri.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| AttemptError::permanent(format!("cannot build the request: {e}")))?;

        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| {
                AttemptError::transient(format!("connection failed: {}", error_chain(&e)))
            })?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), self.response_bytes_max)
                .collect()
                .await
                .map_err(|e| {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        AttemptError {
                            too_large: true,
                            ..AttemptError::permanent(format!(
                                "answer larger than {} bytes (response_bytes_max)",
                                self.response_bytes_max
                            ))
                        }
                    } else {
                        AttemptError::transient(format!("reading the answer failed: {e}"))
                    }
                })?
                .to_bytes();
            Ok::<_, AttemptError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                AttemptError::transient(format!(
                    "no complete answer within {} ms",
                    self.timeout.as_millis()
                ))
            })??;

        if status != StatusCode::OK {
            let message = format!("HTTP status {}", status.as_u16());
            return Err(
                if status == StatusCode::TOO_MANY_REQUESTS
                    || status == StatusCode::REQUEST_TIMEOUT
                    || status.is_server_error()
                {
                    AttemptError::transient(message)
                } else {
                    AttemptError::permanent(message)
                },
            );
        }
        let answers = parse_answers(&bytes, body, expected)?;
        // A quota refusal is the endpoint's state, not the request's: let another serve it.
        if let Some(limit) = answers
            .iter()
            .filter_map(|a| a.as_ref().err())
            .find(|e| e.is_rate_limit())
        {
            return Err(AttemptError::transient(format!(
                "rate limited: {} {}",
                limit.code, limit.message
            )));
        }
        Ok(answers)
    }
}

/// Matches the answers to the request(s) in `sent` by id. `expected` is 1 for a single call
/// (sent as an object) and the number of calls for a batch (sent as an array).
fn parse_answers(
    bytes: &[u8],
    sent: &[u8],
    expected: usize,
) -> Result<Vec<Result<Value, RpcError>>, AttemptError> {
    let malformed =
        |why: &str| AttemptError::permanent(format!("malformed JSON-RPC answer: {why}"));
    let answer: Value =
        serde_json::from_slice(bytes).map_err(|_| malformed("the body is not JSON"))?;
    let sent: Value = serde_json::from_slice(sent).map_err(|_| malformed("request not JSON"))?;

    let one = |item: &Value| -> Result<Result<Value, RpcError>, AttemptError> {
        if let Some(err) = item.get("error").filter(|e| !e.is_null()) {
            return Ok(Err(RpcError::from_value(err)));
        }
        match item.get("result") {
            Some(result) => Ok(Ok(result.clone())),
            None => Err(malformed("an answer has neither result nor error")),
        }
    };

    match (&sent, &answer) {
        (Value::Object(_), Value::Object(_)) => {
            if answer.get("error").is_none() && answer.get("id") != sent.get("id") {
                return Err(malformed("the answer id does not match the request"));
            }
            Ok(vec![one(&answer)?])
        }
        (Value::Array(requests), Value::Array(items)) => {
            let mut out: Vec<Option<Result<Value, RpcError>>> = vec![None; expected];
            for item in items {
                let id = item
                    .get("id")
                    .and_then(Value::as_u64)
                    .and_then(|id| usize::try_from(id).ok())
                    .filter(|id| *id < requests.len());
                match id {
                    Some(id) if out[id].is_none() => out[id] = Some(one(item)?),
                    Some(_) => return Err(malformed("two answers carry the same id")),
                    None => {
                        // An error without a usable id applies to the whole batch.
                        if let Some(err) = item.get("error").filter(|e| !e.is_null()) {
                            let e = RpcError::from_value(err);
                            return Ok(vec![Err(e); expected]);
                        }
                        return Err(malformed("an answer has an unknown id"));
                    }
                }
            }
            out.into_iter()
                .map(|a| a.ok_or_else(|| malformed("a request of the batch got no answer")))
                .collect()
        }
        // Some nodes answer a whole batch with one error object (batch too large, not allowed).
        (Value::Array(_), Value::Object(_)) => match answer.get("error").filter(|e| !e.is_null()) {
            Some(err) => Ok(vec![Err(RpcError::from_value(err)); expected]),
            None => Err(malformed("a batch was answered with a single result")),
        },
        _ => Err(malformed("the answer is neither an object nor an array")),
    }
}

fn now_timestamp() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_unix_millis(ms)
}

/// The error and its sources, joined: hyper's top-level texts ("client error (Connect)") say
/// little without them.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Reads and checks one configured URL: the `Uri` to send to and what of it may be shown.
fn parse_endpoint(url: &str, allow_insecure_http: bool) -> Result<(Uri, RedactedUrl), UrlError> {
    let uri: Uri = url.trim().parse().map_err(|_| UrlError::unparsed(url))?;
    let parts = UrlParts {
        scheme: uri.scheme_str().ok_or_else(|| UrlError::unparsed(url))?,
        authority: uri
            .authority()
            .ok_or_else(|| UrlError::unparsed(url))?
            .as_str(),
        host: uri.host().ok_or_else(|| UrlError::unparsed(url))?,
        path: uri.path(),
        query: uri.query(),
    };
    let redacted = endpoints::check_url(&parts, allow_insecure_http)?;
    Ok((uri, redacted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(urls: &[&str]) -> RpcSettings {
        RpcSettings {
            urls: urls.iter().map(|s| s.to_string()).collect(),
            expected_chain_id: Some(56),
            request_timeout_ms: 1000,
            response_bytes_max: 1 << 20,
            batch_max: 100,
            allow_insecure_http: false,
        }
    }

    #[test]
    fn urls_are_checked_and_redacted() {
        let c = RpcClient::new(&settings(&[
            "https://bsc.example.com/v1/SECRETKEY?apikey=XYZ",
            "http://127.0.0.1:8545",
            "http://localhost:8545/",
        ]))
        .unwrap();
        let h = c.health();
        assert_eq!(h[0].url, "https://bsc.example.com/…?…");
        assert_eq!(h[1].url, "http://127.0.0.1:8545");
        assert_eq!(h[2].url, "http://localhost:8545");
        assert!(!h[0].healthy && h[0].last_success_at.is_none());
        assert!(c
            .endpoints
            .url(0)
            .secrets()
            .iter()
            .any(|s| s == "v1/SECRETKEY"));
        assert_eq!(
            c.endpoints
                .scrub(0, "failed at v1/SECRETKEY with apikey=XYZ\n"),
            "failed at … with … "
        );

        for (url, want) in [
            ("http://10.0.0.5:8545", "InsecureHttp"),
            ("ftp://host/x", "Scheme"),
            ("https://user:s3cret@host/x", "Credentials"),
            ("not a url", "Invalid"),
            ("/relative", "Invalid"),
        ] {
            let err = RpcClient::new(&settings(&[url])).unwrap_err();
            assert!(format!("{err:?}").starts_with(want), "{url}: {err:?}");
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
        let mut s = settings(&["http://10.0.0.5:8545"]);
        s.allow_insecure_http = true;
        assert!(RpcClient::new(&s).is_ok());
    }

    #[test]
    fn node_errors_are_classified() {
        let e = |code, message: &str| RpcError {
            code,
            message: message.into(),
        };
        assert_eq!(e(-32601, "Method not found").retry(), Retry::Permanent);
        assert!(e(-32601, "Method not found").is_method_not_found());
        assert!(e(
            -32000,
            "the method eth_getBlockReceipts does not exist/is not available"
        )
        .is_method_not_found());
        assert_eq!(e(-32602, "invalid params").retry(), Retry::Permanent);
        assert_eq!(e(3, "execution reverted").retry(), Retry::Permanent);
        assert_eq!(e(-32000, "unknown block").retry(), Retry::Transient);
        assert_eq!(e(-32000, "header not found").retry(), Retry::Transient);
        assert_eq!(e(-32603, "internal error").retry(), Retry::Transient);
        assert!(e(-32005, "limit exceeded").is_rate_limit());
        assert!(e(-32000, "Too Many Requests").is_rate_limit());
        assert!(!e(-32000, "intrinsic gas too low").is_rate_limit());
        assert_eq!(
            e(-32005, "query limit exceeded")
                .into_port_error("eth_getLogs")
                .retry,
            Retry::Transient
        );
    }

    #[test]
    fn answers_are_matched_by_id() {
        let single = br#"{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}"#;
        let ok = parse_answers(br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#, single, 1).unwrap();
        assert_eq!(ok, vec![Ok(json!("0x10"))]);
        assert!(parse_answers(br#"{"jsonrpc":"2.0","id":8,"result":"0x10"}"#, single, 1).is_err());
        assert!(parse_answers(b"<html>bad gateway</html>", single, 1).is_err());
        let err = parse_answers(
            br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}"#,
            single,
            1,
        )
        .unwrap();
        assert_eq!(err[0].as_ref().unwrap_err().code, -32601);

        let batch = br#"[{"jsonrpc":"2.0","id":0,"method":"a","params":[]},{"jsonrpc":"2.0","id":1,"method":"b","params":[]}]"#;
        let out = parse_answers(
            br#"[{"jsonrpc":"2.0","id":1,"result":"b"},{"jsonrpc":"2.0","id":0,"result":"a"}]"#,
            batch,
            2,
        )
        .unwrap();
        assert_eq!(out, vec![Ok(json!("a")), Ok(json!("b"))]);
        assert!(parse_answers(br#"[{"jsonrpc":"2.0","id":0,"result":"a"}]"#, batch, 2).is_err());
        assert!(parse_answers(
            br#"[{"jsonrpc":"2.0","id":0,"result":"a"},{"jsonrpc":"2.0","id":0,"result":"a"}]"#,
            batch,
            2
        )
        .is_err());
        let whole = parse_answers(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"batch limit exceeded"}}"#,
            batch,
            2,
        )
        .unwrap();
        assert!(whole
            .iter()
            .all(|a| a.as_ref().unwrap_err().is_rate_limit()));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(BACKOFF.after(1), Duration::from_millis(500));
        assert_eq!(BACKOFF.after(2), Duration::from_millis(1000));
        assert_eq!(
            BACKOFF.after(40),
            Duration::from_millis(RETRY_BACKOFF_MS_MAX)
        );
    }
}
