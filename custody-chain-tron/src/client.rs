//! A client for the TRON full-node HTTP API (java-tron's `/wallet/*` and `/walletsolidity/*`
//! servlets; TronGrid serves the same API): a list of endpoints with failover and health,
//! an optional `TRON-PRO-API-KEY` header, timeouts, a response size limit, and every failure
//! classified as transient or permanent.
//!
//! Failover (reads): endpoints are tried in their configured order, skipping those that failed
//! within the last `cooldown_ms` (tried last, oldest failure first, when every endpoint is
//! cooling down). Any failure of one endpoint — connection, timeout, HTTP status, a node
//! `{"Error": ...}` or an answer that does not parse — moves on to the next. The error
//! returned after the last endpoint is transient if any endpoint failed in a way that may
//! pass (connection, timeout, 408/429/5xx), permanent otherwise.
//!
//! Writes (`wallet/broadcasthex`) go to one endpoint only (the first that is not cooling
//! down) and are never repeated here: the caller retries later. Rebroadcasting the same signed
//! transaction is harmless (same txID; the node answers `DUP_TRANSACTION_ERROR`).
//!
//! Network identity: before an endpoint is used for the first time, its block 0
//! (`wallet/getblockbynum` `{"num": 0}`) is read and its `blockID` compared with the configured
//! genesis block id ([`TronSettings::genesis_block_id`], mainnet's by default). An endpoint that
//! serves another network (Nile, Shasta, a private chain) is logged at `error` level, shows as
//! unhealthy with `genesis_verified: false`, and is never sent another request: reads fail over
//! to the next endpoint, and when none is left they fail as permanent. An endpoint whose check
//! could not be made (down, no block 0, a malformed answer) is not used either; the check is
//! tried again on its next turn.
//!
//! An answer larger than `response_bytes_max` is the request's trait, not the endpoint's: every
//! endpoint of the same network would send the same bytes. It is not failed over, it does not
//! count against the endpoint's health, and it reaches the caller as [`ReadError::TooLarge`]
//! from the `try_*` reads, so that the caller can ask for less (see
//! [`crate::chain::TronChain`]).
//!
//! The order of the endpoints, their records and the URL rule are the core's [`EndpointSet`]
//! (shared with the BSC adapter); this client sends the bytes and checks block 0.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use custody_core::address::TronAddress;
use custody_core::chain::endpoints::{
    self, Backoff, EndpointSet, FailoverPolicy, Failures, HiddenMarks, Identity, Recorded,
    RedactedUrl, UrlError, UrlParts,
};
use custody_core::error::{PortError, Retry};
use custody_core::time::Timestamp;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;

use crate::abi;
use crate::api;

/// The header TronGrid reads the API key from.
pub const API_KEY_HEADER: &str = "TRON-PRO-API-KEY";

/// `blockID` of block 0 of TRON mainnet. Checked with `wallet/getblockbynum` `{"num": 0}` on
/// TronGrid and published identically by independent sources (TRON's CAIP-2 namespace, chain
/// registries); its last four bytes, `2b6653dc`, are the chain id mainnet's EVM reports.
/// Nile's is `0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc`, Shasta's
/// `0000000000000000de1aa88295e1fcf982742f773e0419c5a9c134c994a9059e`.
pub const MAINNET_GENESIS_BLOCK_ID: &str =
    "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";

/// The owner of read-only contract calls: the all-zero address, which the documentation of
/// `triggerconstantcontract` allows ("For constant call you can use the all-zero address").
const ZERO_OWNER_HEX: &str = "410000000000000000000000000000000000000000";

/// Settings of the client. Every limit is named with its unit last.
#[derive(Clone)]
pub struct TronSettings {
    /// Base URLs in order of preference, e.g. `https://api.trongrid.io` (http or https).
    pub urls: Vec<String>,
    /// Sent as `TRON-PRO-API-KEY` on every request when set. Never logged or shown.
    pub api_key: Option<String>,
    /// One attempt on one endpoint, from sending the request to the last body byte.
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// Largest answer read (a full mainnet block with its transaction infos is a few MB).
    pub response_bytes_max: usize,
    /// How long an endpoint that failed is tried only after the others.
    pub cooldown_ms: u64,
    /// Accept `http://` endpoints off loopback. Off by default: whoever sits on a plain-HTTP
    /// path reads the API key and can invent blocks and deposits.
    pub allow_insecure_http: bool,
    /// The `blockID` of block 0 every endpoint must serve before it is used (64 hex digits; the
    /// first 16 are zeros, block 0's number). `None` skips the check (tests of other things
    /// only: an endpoint of another network would then be believed).
    pub genesis_block_id: Option<String>,
}

impl TronSettings {
    pub const REQUEST_TIMEOUT_MS: u64 = 10_000;
    pub const CONNECT_TIMEOUT_MS: u64 = 3_000;
    pub const RESPONSE_BYTES_MAX: usize = 32 * 1024 * 1024;
    pub const COOLDOWN_MS: u64 = 30_000;

    /// The given URLs with the default limits and no API key.
    pub fn new(urls: Vec<String>) -> Self {
        TronSettings {
            urls,
            api_key: None,
            request_timeout_ms: Self::REQUEST_TIMEOUT_MS,
            connect_timeout_ms: Self::CONNECT_TIMEOUT_MS,
            response_bytes_max: Self::RESPONSE_BYTES_MAX,
            cooldown_ms: Self::COOLDOWN_MS,
            allow_insecure_http: false,
            genesis_block_id: Some(MAINNET_GENESIS_BLOCK_ID.into()),
        }
    }

    /// The same settings for the network whose block 0 has id `genesis_block_id` (a testnet,
    /// a devnet, a test server).
    pub fn with_genesis_block_id(mut self, genesis_block_id: impl Into<String>) -> Self {
        self.genesis_block_id = Some(genesis_block_id.into());
        self
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }
}

impl fmt::Debug for TronSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TronSettings")
            .field(
                "urls",
                &self.urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>(),
            )
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("response_bytes_max", &self.response_bytes_max)
            .field("cooldown_ms", &self.cooldown_ms)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("genesis_block_id", &self.genesis_block_id)
            .finish()
    }
}

/// Why the settings cannot make a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("TRON endpoint {0:?} is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("TRON endpoint {0:?} is plain http off loopback; use https (or allow_insecure_http)")]
    InsecureHttp(String),
    #[error("the TRON API key is not a valid header value")]
    BadApiKey,
    #[error(
        "the TRON genesis block id {0:?} is not a block 0 id: 64 hex digits, the first 16 zeros"
    )]
    BadGenesis(String),
    #[error("TLS setup failed: {0}")]
    Tls(String),
    #[error("{0}")]
    Catalog(String),
}

/// TronGrid answers throttling with 403 and a text like "exceeds the frequency limit": that is
/// the endpoint's state, worth another try, not a refusal of the request.
fn is_throttling(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    ["frequency", "rate limit", "too many", "exceed"]
        .iter()
        .any(|w| text.contains(w))
}

/// The parts of a URL the HTTP client reads, `None` when it is not an absolute URL.
fn url_parts(uri: &Uri) -> Option<UrlParts<'_>> {
    Some(UrlParts {
        scheme: uri.scheme_str()?,
        authority: uri.authority()?.as_str(),
        host: uri.host()?,
        path: uri.path(),
        query: uri.query(),
    })
}

/// `scheme://host[:port]`, plus `/…` when the URL has a path or query: providers put access
/// tokens in paths and user info, and this text is logged and shown to admins.
pub fn redact_url(url: &str) -> String {
    match url.parse::<Uri>() {
        Ok(uri) => url_parts(&uri).map_or_else(
            || String::from("<invalid url>"),
            |parts| RedactedUrl::of(&parts).shown(HiddenMarks::One),
        ),
        Err(_) => String::from("<invalid url>"),
    }
}

/// Reads and checks one configured URL (the rule every chain adapter applies): what of it may
/// be shown.
fn parse_endpoint(url: &str, allow_insecure_http: bool) -> Result<RedactedUrl, SettingsError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| SettingsError::BadUrl(redact_url(url)))?;
    let parts = url_parts(&uri).ok_or_else(|| SettingsError::BadUrl(redact_url(url)))?;
    endpoints::check_url(&parts, allow_insecure_http).map_err(|e| match e {
        UrlError::InsecureHttp { .. } => SettingsError::InsecureHttp(redact_url(url)),
        UrlError::Invalid { .. } | UrlError::Scheme { .. } | UrlError::Credentials { .. } => {
            SettingsError::BadUrl(redact_url(url))
        }
    })
}

/// Health of one endpoint, as the admin `rpcs` listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointHealth {
    /// The URL without path, query or user info (see [`redact_url`]).
    pub url: String,
    /// The last attempt succeeded (or none was made yet).
    pub healthy: bool,
    pub consecutive_failures: u32,
    pub requests: u64,
    pub failures: u64,
    pub last_error: Option<String>,
    pub last_success_at: Option<Timestamp>,
    pub last_failure_at: Option<Timestamp>,
    pub last_latency_ms: Option<u64>,
    /// The newest block this endpoint reported as its head.
    pub head_block: Option<u64>,
    /// The endpoint served the configured genesis block id (`false` until checked, and for
    /// good when it serves another network).
    pub genesis_verified: bool,
}

impl From<custody_core::chain::EndpointHealth> for EndpointHealth {
    fn from(h: custody_core::chain::EndpointHealth) -> Self {
        EndpointHealth {
            url: h.url,
            healthy: h.healthy,
            consecutive_failures: h.consecutive_failures,
            requests: h.requests.unwrap_or_default(),
            failures: h.failures.unwrap_or_default(),
            last_error: h.last_error,
            last_success_at: h.last_success_at,
            last_failure_at: h.last_failure_at,
            last_latency_ms: h.last_latency_ms,
            head_block: h.head_block,
            genesis_verified: h.identity_verified,
        }
    }
}

/// The transport side of one endpoint; its record is in [`Inner::set`] at the same index.
struct Endpoint {
    /// Without a trailing slash.
    base: String,
    /// Held while the genesis check runs, so that concurrent first uses make one check.
    network_check: tokio::sync::Mutex<()>,
}

/// A failed attempt on one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct CallError {
    retry: Retry,
    message: String,
    /// The answer was cut at `response_bytes_max`: not the endpoint's failure.
    too_large: bool,
    /// The HTTP status of an answer that was not 2xx.
    status: Option<u16>,
}

impl CallError {
    pub(crate) fn transient(message: impl Into<String>) -> Self {
        CallError {
            retry: Retry::Transient,
            message: message.into(),
            too_large: false,
            status: None,
        }
    }
    pub(crate) fn permanent(message: impl Into<String>) -> Self {
        CallError {
            retry: Retry::Permanent,
            message: message.into(),
            too_large: false,
            status: None,
        }
    }
    fn too_large(limit: usize) -> Self {
        CallError {
            retry: Retry::Permanent,
            message: format!("answer larger than {limit} bytes (response_bytes_max)"),
            too_large: true,
            status: None,
        }
    }

    #[cfg(test)]
    pub(crate) fn retry(&self) -> Retry {
        self.retry
    }

    /// The endpoint answered 404 or 405: it does not serve the path (a provider that leaves
    /// an optional API out).
    pub(crate) fn is_not_served(&self) -> bool {
        matches!(self.status, Some(404 | 405))
    }
}

/// Why a read failed, for the reads whose caller can act on an answer that is too large.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The answer is larger than `response_bytes_max` (permanent for this request: any
    /// endpoint would send the same bytes). No other endpoint was tried and the endpoint's
    /// health is untouched; ask for less.
    #[error("{0}")]
    TooLarge(PortError),
    /// Any other failure, after every endpoint was tried.
    #[error("{0}")]
    Failed(PortError),
}

impl From<ReadError> for PortError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::TooLarge(e) | ReadError::Failed(e) => e,
        }
    }
}

/// The API key as a header value marked sensitive (hyper leaves it out of `Debug` and out of
/// HPACK tables).
struct ApiKey(HeaderValue);

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

struct Inner {
    endpoints: Vec<Endpoint>,
    set: EndpointSet,
    http: HttpClient,
    api_key: Option<ApiKey>,
    request_timeout: Duration,
    response_bytes_max: usize,
    /// Lowercase hex; `None`: endpoints are not checked.
    genesis_block_id: Option<String>,
}

/// The TRON HTTP API client. Cheap to clone (shared connection pool and health).
#[derive(Clone)]
pub struct TronClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for TronClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TronClient")
            .field("endpoints", &self.inner.set.shown_all())
            .finish_non_exhaustive()
    }
}

fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_unix_millis(ms)
}

/// A node answer that is an object with an `Error` member is a failure of the call.
fn node_error(error: &Option<String>) -> Result<(), CallError> {
    match error {
        Some(e) => Err(CallError::permanent(format!("node error: {e}"))),
        None => Ok(()),
    }
}

fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, CallError> {
    serde_json::from_slice(body)
        .map_err(|e| CallError::permanent(format!("answer does not parse: {e}")))
}

/// `wallet/getnowblock`: a block with its header.
fn parse_now_block(b: &[u8]) -> Result<api::BlockHead, CallError> {
    let head: api::BlockHead = parse_json(b)?;
    node_error(&head.error)?;
    if head.block_header.is_none() {
        return Err(CallError::permanent("head block without block_header"));
    }
    Ok(head)
}

/// `wallet/getblockbynum` without the transactions: `None` for `{}`.
fn parse_block_head(b: &[u8]) -> Result<Option<api::BlockHead>, CallError> {
    let head: api::BlockHead = parse_json(b)?;
    node_error(&head.error)?;
    Ok(head.block_header.is_some().then_some(head))
}

/// `wallet/getblockbynum` with the transactions: `None` for `{}`.
fn parse_block(b: &[u8]) -> Result<Option<api::Block>, CallError> {
    let block: api::Block = parse_json(b)?;
    node_error(&block.error)?;
    Ok(block.block_header.is_some().then_some(block))
}

/// `wallet/gettransactioninfobyid`: `None` for `{}`.
fn parse_transaction_info(b: &[u8]) -> Result<Option<api::TransactionInfo>, CallError> {
    let info: api::TransactionInfoAnswer = parse_json(b)?;
    node_error(&info.error)?;
    Ok((!info.info.id.is_empty()).then_some(info.info))
}

/// `wallet/gettransactionbyid` and `wallet/gettransactionfrompending`: `None` for `{}`.
fn parse_transaction(b: &[u8]) -> Result<Option<api::Transaction>, CallError> {
    let tx: api::TransactionAnswer = parse_json(b)?;
    node_error(&tx.error)?;
    Ok((!tx.tx.tx_id.is_empty()).then_some(tx.tx))
}

/// A genesis block id in lowercase hex (an optional `0x` dropped) when `id` is one: 64 hex
/// digits whose first 16, block 0's number, are zeros.
pub fn parse_genesis_block_id(id: &str) -> Option<String> {
    let id = id.trim();
    let id = id.strip_prefix("0x").unwrap_or(id);
    (id.len() == 64
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && id.bytes().take(16).all(|b| b == b'0'))
    .then(|| id.to_ascii_lowercase())
}

/// `wallet/broadcasthex` codes (`api.Return.response_code`) that describe the node's state,
/// not the transaction: java-tron `Wallet.broadcastTransaction` answers them before it looks
/// at the transaction (`BLOCK_UNSOLIDIFIED`: the node's solidified block lags too far;
/// `NO_CONNECTION`, `NOT_ENOUGH_EFFECTIVE_CONNECTION`: too few peers; `SERVER_BUSY`: its
/// pending pool is full).
pub const NODE_STATE_CODES: [&str; 4] = [
    "SERVER_BUSY",
    "NO_CONNECTION",
    "NOT_ENOUGH_EFFECTIVE_CONNECTION",
    "BLOCK_UNSOLIDIFIED",
];

/// Whether `code` is one of [`NODE_STATE_CODES`].
pub fn is_node_state_code(code: &str) -> bool {
    NODE_STATE_CODES.contains(&code)
}

/// The outcome of `wallet/broadcasthex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BroadcastOutcome {
    /// The node accepted the transaction into its pool.
    pub accepted: bool,
    /// `SUCCESS`, `SIGERROR`, `TAPOS_ERROR`, `DUP_TRANSACTION_ERROR`, ... (`api.Return`).
    pub code: String,
    /// Readable failure reason.
    pub message: String,
    pub txid: Option<String>,
}

/// One endpoint of a [`TronClient`], for a group of reads that must all come from the same
/// node (see [`TronClient::pinned`]). Each read is one attempt, recorded in the endpoint's
/// health like any other; nothing is retried here.
#[derive(Clone)]
pub(crate) struct Pinned {
    client: TronClient,
    index: usize,
}

/// `wallet/gettransactioninfobyblocknum`: `[]` for an empty block; `{}` (which the node answers
/// for `num <= 0`) is read as none.
fn parse_transaction_infos(b: &[u8]) -> Result<Vec<api::TransactionInfo>, CallError> {
    let first = b.iter().find(|c| !c.is_ascii_whitespace());
    match first {
        Some(b'[') => parse_json::<Vec<api::TransactionInfo>>(b),
        Some(b'{') => {
            let e: api::EmptyOrError = parse_json(b)?;
            node_error(&e.error)?;
            Ok(Vec::new())
        }
        _ => Err(CallError::permanent(
            "answer is neither an array nor an object",
        )),
    }
}

impl Pinned {
    async fn read<T>(
        &self,
        path: &str,
        body: serde_json::Value,
        parse: impl Fn(&[u8]) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let body = Bytes::from(body.to_string());
        self.client.read_at(self.index, path, &body, &parse).await
    }

    /// The endpoint as logs and admins see it.
    pub(crate) fn shown(&self) -> &str {
        self.client.inner.set.shown(self.index)
    }

    /// `wallet/getnowblock`.
    pub(crate) async fn now_block(&self) -> Result<api::BlockHead, CallError> {
        let head = self
            .read("/wallet/getnowblock", json!({}), parse_now_block)
            .await?;
        self.client.note_head(self.index, &head);
        Ok(head)
    }

    /// `wallet/getblockbynum` without the transactions; `None` for `{}`.
    pub(crate) async fn block_head_by_num(
        &self,
        number: u64,
    ) -> Result<Option<api::BlockHead>, CallError> {
        self.read(
            "/wallet/getblockbynum",
            json!({ "num": number }),
            parse_block_head,
        )
        .await
    }

    /// `wallet/getblockbynum` with the transactions; `None` for `{}`.
    pub(crate) async fn block_by_num(&self, number: u64) -> Result<Option<api::Block>, CallError> {
        self.read(
            "/wallet/getblockbynum",
            json!({ "num": number }),
            parse_block,
        )
        .await
    }

    /// `wallet/gettransactioninfobyid`; `None` for `{}` (unknown, or not in a block yet).
    pub(crate) async fn transaction_info_by_id(
        &self,
        txid: &str,
    ) -> Result<Option<api::TransactionInfo>, CallError> {
        self.read(
            "/wallet/gettransactioninfobyid",
            json!({ "value": txid }),
            parse_transaction_info,
        )
        .await
    }

    /// `wallet/gettransactionbyid`: the transaction when it is in a block of the node's chain
    /// (java-tron reads its transaction store, which holds block contents only); `None` for
    /// `{}`.
    pub(crate) async fn transaction_by_id(
        &self,
        txid: &str,
    ) -> Result<Option<api::Transaction>, CallError> {
        self.read(
            "/wallet/gettransactionbyid",
            json!({ "value": txid }),
            parse_transaction,
        )
        .await
    }

    /// `wallet/gettransactioninfobyblocknum`: the infos of block `number`'s transactions.
    pub(crate) async fn transaction_infos_by_block_num(
        &self,
        number: u64,
    ) -> Result<Vec<api::TransactionInfo>, CallError> {
        self.read(
            "/wallet/gettransactioninfobyblocknum",
            json!({ "num": number }),
            parse_transaction_infos,
        )
        .await
    }

    /// `wallet/gettransactionfrompending`: the transaction when it is in the node's pending
    /// pool; `None` for `{}` (not pending: never received, dropped, or already in a block).
    pub(crate) async fn transaction_from_pending(
        &self,
        txid: &str,
    ) -> Result<Option<api::Transaction>, CallError> {
        self.read(
            "/wallet/gettransactionfrompending",
            json!({ "value": txid }),
            parse_transaction,
        )
        .await
    }
}

impl TronClient {
    /// The genesis block id endpoints are checked against (lowercase hex), if any.
    pub fn genesis_block_id(&self) -> Option<&str> {
        self.inner.genesis_block_id.as_deref()
    }

    /// Builds the client; no request is sent.
    pub fn new(settings: &TronSettings) -> Result<Self, SettingsError> {
        let mut endpoints = Vec::with_capacity(settings.urls.len());
        let mut urls = Vec::with_capacity(settings.urls.len());
        for url in &settings.urls {
            urls.push(parse_endpoint(url, settings.allow_insecure_http)?);
            endpoints.push(Endpoint {
                base: url.trim_end_matches('/').to_owned(),
                network_check: tokio::sync::Mutex::new(()),
            });
        }
        let genesis_block_id = match &settings.genesis_block_id {
            Some(id) => Some(
                parse_genesis_block_id(id).ok_or_else(|| SettingsError::BadGenesis(id.clone()))?,
            ),
            None => None,
        };
        let api_key = match &settings.api_key {
            Some(k) => {
                let mut value = HeaderValue::from_str(k).map_err(|_| SettingsError::BadApiKey)?;
                value.set_sensitive(true);
                Some(ApiKey(value))
            }
            None => None,
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_millis(settings.connect_timeout_ms)));
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| SettingsError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let http = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https);
        let set = EndpointSet::new(
            urls,
            FailoverPolicy {
                // A failed endpoint waits out the whole cooldown at once.
                backoff: Backoff::constant(Duration::from_millis(settings.cooldown_ms)),
                // Healthy means nothing is known against it: an endpoint not used yet is.
                healthy_until_tried: true,
                marks: HiddenMarks::One,
                identity: genesis_block_id.as_deref().map_or_else(
                    || "genesis not checked".to_owned(),
                    |g| format!("genesis {g}"),
                ),
            },
        );
        Ok(TronClient {
            inner: Arc::new(Inner {
                endpoints,
                set,
                http,
                api_key,
                request_timeout: Duration::from_millis(settings.request_timeout_ms),
                response_bytes_max: settings.response_bytes_max,
                genesis_block_id,
            }),
        })
    }

    /// One entry per configured endpoint, in configured order.
    pub fn health(&self) -> Vec<EndpointHealth> {
        self.endpoint_health()
            .into_iter()
            .map(EndpointHealth::from)
            .collect()
    }

    /// [`Self::health`] in the shape every network's admin `rpcs` listing shows.
    pub fn endpoint_health(&self) -> Vec<custody_core::chain::EndpointHealth> {
        self.inner.set.health()
    }

    /// Endpoint indexes in the order to try them; endpoints of another network never.
    fn order(&self) -> Vec<usize> {
        self.inner.set.order(now())
    }

    /// One POST of `body` to `path` on endpoint `index`: the body bytes of a 2xx answer.
    async fn attempt(&self, index: usize, path: &str, body: &Bytes) -> Result<Bytes, CallError> {
        let endpoint = &self.inner.endpoints[index];
        let uri = format!("{}{path}", endpoint.base);
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(CONTENT_TYPE, "application/json");
        if let Some(key) = &self.inner.api_key {
            request = request.header(API_KEY_HEADER, key.0.clone());
        }
        let request = request
            .body(Full::new(body.clone()))
            .map_err(|e| CallError::permanent(format!("request: {e}")))?;
        let limit = self.inner.response_bytes_max;
        let exchange = async {
            let response = self.inner.http.request(request).await.map_err(|e| {
                // The error chain names the cause (refused, reset, DNS); it holds no secret.
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    text.push_str(": ");
                    text.push_str(&s.to_string());
                    source = s.source();
                }
                CallError::transient(format!("connection: {text}"))
            })?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), limit)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        CallError::too_large(limit)
                    } else {
                        CallError::transient(format!("reading the answer: {e}"))
                    }
                })?
                .to_bytes();
            if !status.is_success() {
                let retry = status == StatusCode::REQUEST_TIMEOUT
                    || status == StatusCode::TOO_MANY_REQUESTS
                    || status.is_server_error()
                    || (status == StatusCode::FORBIDDEN && is_throttling(&bytes));
                let message = format!("HTTP {}", status.as_u16());
                let e = if retry {
                    CallError::transient(message)
                } else {
                    CallError::permanent(message)
                };
                return Err(CallError {
                    status: Some(status.as_u16()),
                    ..e
                });
            }
            Ok(bytes)
        };
        match tokio::time::timeout(self.inner.request_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(CallError::transient(format!(
                "no answer within {} ms",
                self.inner.request_timeout.as_millis()
            ))),
        }
    }

    fn record(&self, index: usize, started: Instant, outcome: Result<(), &CallError>) {
        let message = outcome.map_err(|e| e.message.as_str());
        let recorded = self
            .inner
            .set
            .record(index, message, started.elapsed(), now());
        if let (Err(e), Recorded::Failed { error, .. }) = (outcome, recorded) {
            tracing::warn!(
                endpoint = %self.inner.set.shown(index),
                retry = ?e.retry,
                error = %error,
                "TRON API call failed"
            );
        }
    }

    /// Records the head block endpoint `index` reported, for its health.
    fn note_head(&self, index: usize, head: &api::BlockHead) {
        if let Some(h) = &head.block_header {
            if let Ok(n) = u64::try_from(h.raw_data.number) {
                self.inner.set.note_head(index, n);
            }
        }
    }

    /// Makes sure endpoint `index` serves the configured network, reading its block 0 the
    /// first time (recorded in its health like any request). `Err` when it does not, or when
    /// the check cannot be made now.
    async fn ensure_network(&self, index: usize) -> Result<(), CallError> {
        let Some(expected) = &self.inner.genesis_block_id else {
            return Ok(());
        };
        let known = || match self.inner.set.identity(index) {
            Identity::Verified => Some(Ok(())),
            Identity::Refused { actual } => Some(Err(CallError::permanent(format!(
                "the endpoint serves another network (genesis block {actual})"
            )))),
            Identity::Unchecked => None,
        };
        if let Some(known) = known() {
            return known;
        }
        let _checking = self.inner.endpoints[index].network_check.lock().await;
        // Another caller may have made the check while this one waited.
        if let Some(known) = known() {
            return known;
        }
        let shown = self.inner.set.shown(index);
        let started = Instant::now();
        let body = Bytes::from(json!({ "num": 0 }).to_string());
        let checked = match self.attempt(index, "/wallet/getblockbynum", &body).await {
            Ok(bytes) => parse_json::<api::BlockHead>(&bytes).and_then(|b| {
                node_error(&b.error)?;
                if b.block_id.is_empty() {
                    return Err(CallError::permanent(
                        "genesis check: the endpoint does not serve block 0, so the network it \
                         serves cannot be verified; it will not be used",
                    ));
                }
                parse_genesis_block_id(&b.block_id).ok_or_else(|| {
                    CallError::permanent(format!(
                        "genesis check: block 0 has a malformed blockID {:?}",
                        b.block_id
                    ))
                })
            }),
            // Too large for block 0 is the endpoint's doing.
            Err(e) => Err(CallError {
                too_large: false,
                ..e
            }),
        };
        match checked {
            Ok(actual) if actual == *expected => {
                self.inner.set.set_identity(index, Identity::Verified);
                self.record(index, started, Ok(()));
                tracing::info!(endpoint = %shown, "TRON endpoint genesis block verified");
                Ok(())
            }
            Ok(actual) => {
                let e = CallError::permanent(format!(
                    "genesis block mismatch: configured {expected}, the endpoint serves \
                     {actual} (another network); it will not be used"
                ));
                self.inner.set.set_identity(
                    index,
                    Identity::Refused {
                        actual: actual.clone(),
                    },
                );
                self.record(index, started, Err(&e));
                tracing::error!(
                    endpoint = %shown,
                    configured = %expected,
                    actual = %actual,
                    "TRON endpoint serves another network: check [tron] urls and genesis_block_id"
                );
                Err(e)
            }
            Err(e) => {
                self.record(index, started, Err(&e));
                Err(e)
            }
        }
    }

    /// The error of a read when no endpoint may be tried.
    fn no_endpoint(&self, path: &str) -> PortError {
        if self.inner.endpoints.is_empty() {
            PortError::transient("tron", "no TRON endpoint is configured")
        } else {
            PortError::permanent(
                "tron",
                format!(
                    "{path}: every TRON endpoint serves another network than the configured \
                     genesis block {}",
                    self.inner.genesis_block_id.as_deref().unwrap_or("")
                ),
            )
        }
    }

    /// One read on endpoint `index` (its network checked first): `parse` turns a 2xx body into
    /// the answer; its failure counts as a failure of the endpoint, an answer over
    /// `response_bytes_max` does not.
    async fn read_at<T>(
        &self,
        index: usize,
        path: &str,
        body: &Bytes,
        parse: &impl Fn(&[u8]) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        self.ensure_network(index).await?;
        let started = Instant::now();
        let result = match self.attempt(index, path, body).await {
            Ok(bytes) => parse(&bytes),
            Err(e) => Err(e),
        };
        match &result {
            // The endpoint answered; the request asked for too much.
            Err(e) if e.too_large => self.record(index, started, Ok(())),
            Err(e) => self.record(index, started, Err(e)),
            Ok(_) => self.record(index, started, Ok(())),
        }
        result
    }

    /// Runs `attempt` on each endpoint in turn (see [`Self::order`]) until one succeeds. An
    /// answer over `response_bytes_max` ends the read at once ([`ReadError::TooLarge`]).
    async fn with_failover<T, F, Fut>(
        &self,
        path: &str,
        attempt: F,
    ) -> Result<(usize, T), ReadError>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
    {
        let order = self.order();
        if order.is_empty() {
            return Err(ReadError::Failed(self.no_endpoint(path)));
        }
        let mut failures = Failures::default();
        for index in order {
            match attempt(index).await {
                Ok(value) => return Ok((index, value)),
                Err(e) if e.too_large => {
                    let shown = self.inner.set.shown(index);
                    tracing::warn!(endpoint = %shown, path, error = %e.message, "TRON answer over the size limit");
                    return Err(ReadError::TooLarge(PortError::permanent(
                        "tron",
                        format!("{path}: {}", self.inner.set.labelled(index, &e.message)),
                    )));
                }
                Err(e) => failures.push(e.retry, self.inner.set.labelled(index, &e.message)),
            }
        }
        Err(ReadError::Failed(
            failures.into_port_error("tron", &format!("{path}: ")),
        ))
    }

    /// A read with failover: `parse` turns a 2xx body into the answer; its failure counts as
    /// a failure of the endpoint. An answer over `response_bytes_max` ends the read at once
    /// ([`ReadError::TooLarge`]).
    async fn try_read<T>(
        &self,
        path: &str,
        body: serde_json::Value,
        parse: impl Fn(&[u8]) -> Result<T, CallError>,
    ) -> Result<(usize, T), ReadError> {
        let body = Bytes::from(body.to_string());
        self.with_failover(path, |index| self.read_at(index, path, &body, &parse))
            .await
    }

    /// Reads that must describe ONE node's view of the chain (a head and a block below it, a
    /// transaction's info and the block it names): `reads` gets a [`Pinned`] endpoint and
    /// makes all its reads there; when any of them fails (or `reads` itself returns an error,
    /// e.g. for answers that contradict each other), the whole group is tried again on the
    /// next endpoint. Errors are classified as for the other reads; `what` names the group in
    /// them.
    pub(crate) async fn pinned<T, F, Fut>(&self, what: &str, reads: F) -> Result<T, PortError>
    where
        F: Fn(Pinned) -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
    {
        let (_, value) = self
            .with_failover(what, |index| {
                reads(Pinned {
                    client: self.clone(),
                    index,
                })
            })
            .await?;
        Ok(value)
    }

    /// [`Self::try_read`] for callers that cannot ask for less.
    async fn read<T>(
        &self,
        path: &str,
        body: serde_json::Value,
        parse: impl Fn(&[u8]) -> Result<T, CallError>,
    ) -> Result<(usize, T), PortError> {
        Ok(self.try_read(path, body, parse).await?)
    }

    /// The head block's id and header (`wallet/getnowblock`; its transactions are skipped).
    pub async fn now_block(&self) -> Result<api::BlockHead, PortError> {
        let (index, head) = self
            .read("/wallet/getnowblock", json!({}), parse_now_block)
            .await?;
        self.note_head(index, &head);
        Ok(head)
    }

    /// The newest solidified (irreversible) block (`walletsolidity/getnowblock`).
    pub async fn solid_block(&self) -> Result<api::BlockHead, PortError> {
        let (_, head) = self
            .read("/walletsolidity/getnowblock", json!({}), |b| {
                let head: api::BlockHead = parse_json(b)?;
                node_error(&head.error)?;
                if head.block_header.is_none() {
                    return Err(CallError::permanent("solid block without block_header"));
                }
                Ok(head)
            })
            .await?;
        Ok(head)
    }

    /// Block `number` without its transactions, `None` when the node has none (`{}`).
    pub async fn block_head_by_num(
        &self,
        number: u64,
    ) -> Result<Option<api::BlockHead>, PortError> {
        let (_, block) = self
            .read(
                "/wallet/getblockbynum",
                json!({ "num": number }),
                parse_block_head,
            )
            .await?;
        Ok(block)
    }

    /// Block `number` with its transactions, `None` when the node has none (`{}`).
    pub async fn block_by_num(&self, number: u64) -> Result<Option<api::Block>, PortError> {
        let (_, block) = self
            .read(
                "/wallet/getblockbynum",
                json!({ "num": number }),
                parse_block,
            )
            .await?;
        Ok(block)
    }

    /// The transaction infos of block `number` (`wallet/gettransactioninfobyblocknum`): `[]`
    /// for an empty block; `{}` (which the node answers for `num <= 0`) is read as none.
    pub async fn transaction_infos_by_block_num(
        &self,
        number: u64,
    ) -> Result<Vec<api::TransactionInfo>, PortError> {
        Ok(self.try_transaction_infos_by_block_num(number).await?)
    }

    /// [`Self::transaction_infos_by_block_num`], telling an answer over `response_bytes_max`
    /// apart ([`ReadError::TooLarge`]) so that the caller can read the infos one by one.
    pub async fn try_transaction_infos_by_block_num(
        &self,
        number: u64,
    ) -> Result<Vec<api::TransactionInfo>, ReadError> {
        let (_, infos) = self
            .try_read(
                "/wallet/gettransactioninfobyblocknum",
                json!({ "num": number }),
                parse_transaction_infos,
            )
            .await?;
        Ok(infos)
    }

    /// The info of one transaction (`wallet/gettransactioninfobyid`), `None` when the node has
    /// none (`{}`: unknown, or not in a block yet). `txid` is 64 hex digits.
    pub async fn transaction_info_by_id(
        &self,
        txid: &str,
    ) -> Result<Option<api::TransactionInfo>, ReadError> {
        let (_, info) = self
            .try_read(
                "/wallet/gettransactioninfobyid",
                json!({ "value": txid }),
                parse_transaction_info,
            )
            .await?;
        Ok(info)
    }

    /// `wallet/getaccount`: `None` for an account the chain does not know (`{}`).
    pub async fn account(&self, address: &TronAddress) -> Result<Option<api::Account>, PortError> {
        let (_, account) = self
            .read(
                "/wallet/getaccount",
                json!({ "address": address.to_hex41() }),
                |b| {
                    let account: api::Account = parse_json(b)?;
                    node_error(&account.error)?;
                    Ok(account)
                },
            )
            .await?;
        Ok(account.address.is_some().then_some(account))
    }

    /// `wallet/getaccountresource`: all zeros for an account the chain does not know.
    pub async fn account_resource(
        &self,
        address: &TronAddress,
    ) -> Result<api::AccountResource, PortError> {
        let (_, resource) = self
            .read(
                "/wallet/getaccountresource",
                json!({ "address": address.to_hex41() }),
                |b| {
                    let r: api::AccountResource = parse_json(b)?;
                    node_error(&r.error)?;
                    Ok(r)
                },
            )
            .await?;
        Ok(resource)
    }

    /// `wallet/getcandelegatedmaxsize` of energy (type 1): the sun of `owner`'s stake it may
    /// delegate now; 0 for `{}`.
    pub async fn can_delegate_energy_sun(&self, owner: &TronAddress) -> Result<i64, PortError> {
        let (_, answer) = self
            .read(
                "/wallet/getcandelegatedmaxsize",
                json!({ "owner_address": owner.to_hex41(), "type": 1 }),
                |b| {
                    let r: api::CanDelegatedMaxSize = parse_json(b)?;
                    node_error(&r.error)?;
                    Ok(r)
                },
            )
            .await?;
        Ok(answer.max_size)
    }

    /// `wallet/getchainparameters`.
    pub async fn chain_parameters(&self) -> Result<api::ChainParameters, PortError> {
        let (_, params) = self
            .read("/wallet/getchainparameters", json!({}), |b| {
                let p: api::ChainParameters = parse_json(b)?;
                node_error(&p.error)?;
                Ok(p)
            })
            .await?;
        Ok(params)
    }

    /// A read-only contract call (`wallet/triggerconstantcontract`) from the all-zero owner.
    /// The node's refusal (`result.code`) is a permanent error.
    pub async fn trigger_constant(
        &self,
        contract: &TronAddress,
        function_selector: &str,
        parameter: &[u8],
    ) -> Result<api::ConstantCall, PortError> {
        self.trigger_constant_as(ZERO_OWNER_HEX, contract, function_selector, parameter)
            .await
    }

    /// A contract call run by the node without a transaction (`wallet/triggerconstantcontract`)
    /// as if `owner` sent it: how the node predicts whether a transaction would succeed and
    /// the energy it would use (`energy_used`, penalty included). A call that reverts is an
    /// answer (see [`api::ConstantCall::failure`]); the node's refusal (`result.code`) is a
    /// permanent error.
    pub async fn simulate_call(
        &self,
        owner: &TronAddress,
        contract: &TronAddress,
        function_selector: &str,
        parameter: &[u8],
    ) -> Result<api::ConstantCall, PortError> {
        self.trigger_constant_as(&owner.to_hex41(), contract, function_selector, parameter)
            .await
    }

    async fn trigger_constant_as(
        &self,
        owner_hex41: &str,
        contract: &TronAddress,
        function_selector: &str,
        parameter: &[u8],
    ) -> Result<api::ConstantCall, PortError> {
        let body = json!({
            "owner_address": owner_hex41,
            "contract_address": contract.to_hex41(),
            "function_selector": function_selector,
            "parameter": hex::encode(parameter),
        });
        let (_, call) = self
            .read("/wallet/triggerconstantcontract", body, |b| {
                let call: api::ConstantCall = parse_json(b)?;
                node_error(&call.error)?;
                if !call.result.result {
                    return Err(CallError::permanent(format!(
                        "contract call refused: {} {}",
                        call.result.code.as_deref().unwrap_or("(no code)"),
                        api::readable_message(call.result.message.as_deref().unwrap_or(""))
                    )));
                }
                Ok(call)
            })
            .await?;
        Ok(call)
    }

    /// `balanceOf(holder)` of a TRC20 token. A result above 128 bits is a permanent error.
    pub async fn trc20_balance(
        &self,
        token: &TronAddress,
        holder: &TronAddress,
    ) -> Result<u128, PortError> {
        let call = self
            .trigger_constant(
                token,
                "balanceOf(address)",
                &abi::balance_of_parameter(holder),
            )
            .await?;
        let word = call
            .constant_result
            .first()
            .and_then(|r| abi::hex_word(r))
            .ok_or_else(|| {
                PortError::permanent("tron", "balanceOf returned no 32-byte constant_result")
            })?;
        abi::word_u128(&word)
            .ok_or_else(|| PortError::permanent("tron", "balanceOf returned more than 128 bits"))
    }

    /// Sends a signed transaction (`wallet/broadcasthex`) to ONE endpoint. A refusal by the
    /// node is an `Ok` outcome with `accepted == false`; only a failure to get an answer is an
    /// error (transient when it may pass).
    pub async fn broadcast_hex(
        &self,
        transaction_hex: &str,
    ) -> Result<BroadcastOutcome, PortError> {
        // The first endpoint in order that serves the configured network (checked now when it
        // never was): a signed transaction never goes to an endpoint of another network.
        let mut index = None;
        let mut failures = Failures::default();
        for i in self.order() {
            match self.ensure_network(i).await {
                Ok(()) => {
                    index = Some(i);
                    break;
                }
                Err(e) => failures.push(e.retry, self.inner.set.labelled(i, &e.message)),
            }
        }
        let Some(index) = index else {
            if failures.is_empty() {
                return Err(self.no_endpoint("/wallet/broadcasthex"));
            }
            return Err(failures.into_port_error(
                "tron",
                "broadcasthex: no endpoint serves the configured network: ",
            ));
        };
        let body = Bytes::from(json!({ "transaction": transaction_hex }).to_string());
        let started = Instant::now();
        let result = match self.attempt(index, "/wallet/broadcasthex", &body).await {
            Ok(bytes) => parse_json::<api::Broadcast>(&bytes).and_then(|b| {
                node_error(&b.error)?;
                Ok(b)
            }),
            Err(e) => Err(e),
        };
        match &result {
            // The node answered that it cannot take transactions now: its state, not the
            // transaction's. Recorded as the endpoint's failure so that the next broadcast
            // goes to another endpoint first.
            Ok(b) if !b.result && is_node_state_code(b.code.as_deref().unwrap_or("")) => {
                let e = CallError::transient(format!(
                    "broadcasthex: the node answered {}",
                    b.code.as_deref().unwrap_or("")
                ));
                self.record(index, started, Err(&e));
            }
            _ => self.record(index, started, result.as_ref().map(|_| ())),
        }
        let answer = result.map_err(|e| {
            let message = format!("broadcasthex: {}", e.message);
            match e.retry {
                Retry::Transient => PortError::transient("tron", message),
                Retry::Permanent => PortError::permanent("tron", message),
            }
        })?;
        Ok(BroadcastOutcome {
            accepted: answer.result,
            code: answer
                .code
                .unwrap_or_else(|| if answer.result { "SUCCESS" } else { "" }.into()),
            message: api::readable_message(answer.message.as_deref().unwrap_or("")),
            txid: answer.txid,
        })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn throttling_403_is_recognized() {
        assert!(is_throttling(
            br#"{"Error":"request rate exceeds the frequency limit"}"#
        ));
        assert!(!is_throttling(b"{\"Error\":\"ApiKey not exists\"}"));
    }

    #[test]
    fn plain_http_is_for_loopback_unless_allowed() {
        let remote = TronSettings::new(vec!["http://tron.example.com".into()]);
        assert!(matches!(
            TronClient::new(&remote),
            Err(SettingsError::InsecureHttp(_))
        ));
        for local in [
            "http://127.0.0.1:8090",
            "http://localhost:8090",
            "http://[::1]:8090",
        ] {
            assert!(
                TronClient::new(&TronSettings::new(vec![local.into()])).is_ok(),
                "{local}"
            );
        }
        let mut allowed = remote.clone();
        allowed.allow_insecure_http = true;
        assert!(TronClient::new(&allowed).is_ok());
        assert!(
            TronClient::new(&TronSettings::new(vec!["https://api.trongrid.io".into()])).is_ok()
        );
    }

    use super::*;

    #[test]
    fn urls_are_redacted_for_logs_and_admins() {
        assert_eq!(
            redact_url("https://api.trongrid.io"),
            "https://api.trongrid.io"
        );
        assert_eq!(
            redact_url("https://api.trongrid.io/"),
            "https://api.trongrid.io"
        );
        assert_eq!(
            redact_url("https://user:pw@x.quiknode.pro:8443/SECRET-TOKEN/"),
            "https://x.quiknode.pro:8443/…"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/?key=k"),
            "http://127.0.0.1:9/…"
        );
        assert_eq!(redact_url("not a url"), "<invalid url>");
    }

    #[test]
    fn settings_are_checked_and_debug_hides_secrets() {
        let s = TronSettings::new(vec!["https://h.example/TOKEN".into()]).with_api_key("k-123");
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("TOKEN") && !shown.contains("k-123"),
            "{shown}"
        );
        assert!(matches!(
            TronClient::new(&TronSettings::new(vec!["ftp://h".into()])),
            Err(SettingsError::BadUrl(_))
        ));
        assert!(matches!(
            TronClient::new(&TronSettings::new(vec!["https://h".into()]).with_api_key("a\nb")),
            Err(SettingsError::BadApiKey)
        ));
    }
}
