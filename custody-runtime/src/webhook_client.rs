//! The `WebhookSink` adapter: one HTTPS POST per attempt, with the SSRF rules applied to the
//! address actually connected to.
//!
//! A hyper-util client over a guarded connector: the connector reads the host of the canonical
//! URL with the core's parser, resolves a name with `tokio::net::lookup_host`, refuses the
//! connection if ANY resolved address is not allowed, and connects to one of the addresses it
//! checked (never a second resolution). TLS (rustls, Mozilla roots) wraps that stream with the
//! original host name as SNI, and the client sends `Host` for the original name. Redirects are
//! never followed, the whole attempt has one timeout, and at most `RESPONSE_BYTES_MAX` of the
//! response body is read and dropped: it is never stored or shown.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use custody_core::ports::webhook::{DeliveryOutcome, WebhookRequest, WebhookSink};
use custody_core::ports::Clock;
use custody_core::webhook::{
    classify_response, parse_endpoint_url, parse_host, AddressPolicy, ForbiddenAddress, Host,
    UrlError,
};
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

/// Most response body bytes read (then dropped).
pub const RESPONSE_BYTES_MAX: usize = 4 * 1024;
/// Longest error text kept for an attempt.
const ERROR_CHARS_MAX: usize = 200;

/// Why a connection was not made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Never worth retrying: the host or one of its addresses is not allowed.
    #[error("{0}")]
    Forbidden(ForbiddenAddress),
    #[error("{0}")]
    Url(UrlError),
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
}

impl ConnectError {
    /// True when retrying later cannot help.
    pub fn is_permanent(&self) -> bool {
        matches!(self, ConnectError::Forbidden(_) | ConnectError::Url(_))
    }
}

/// Resolves `host` (as it appears in a URL: a name, an IPv4 address in any notation, or
/// `[v6]`) and checks every address against `policy`. IP literals are not resolved.
pub async fn resolve_checked(
    host: &str,
    port: u16,
    policy: AddressPolicy,
) -> Result<Vec<SocketAddr>, ConnectError> {
    match parse_host(host).map_err(ConnectError::Url)? {
        Host::Ip(ip) => {
            policy.check(ip).map_err(ConnectError::Forbidden)?;
            Ok(vec![SocketAddr::new(ip, port)])
        }
        Host::Domain(name) => {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(|e| ConnectError::Resolve {
                    host: name.clone(),
                    reason: e.to_string(),
                })?
                .collect();
            if addrs.is_empty() {
                return Err(ConnectError::Resolve {
                    host: name,
                    reason: "no address".into(),
                });
            }
            for addr in &addrs {
                policy.check(addr.ip()).map_err(ConnectError::Forbidden)?;
            }
            Ok(addrs)
        }
    }
}

/// The TCP connector under TLS: resolves, checks, connects to a checked address.
#[derive(Debug, Clone, Copy)]
pub struct GuardedConnector {
    policy: AddressPolicy,
}

impl GuardedConnector {
    pub fn new(policy: AddressPolicy) -> Self {
        GuardedConnector { policy }
    }
}

impl tower_service::Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let policy = self.policy;
        Box::pin(async move {
            let host = uri.host().ok_or(ConnectError::Url(UrlError::NoHost))?;
            let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
                Some("http") => 80,
                _ => 443,
            });
            let addrs = resolve_checked(host, port, policy).await?;
            let mut last = None;
            for addr in addrs {
                match TcpStream::connect(addr).await {
                    Ok(stream) => {
                        let _ = stream.set_nodelay(true);
                        return Ok(TokioIo::new(stream));
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(ConnectError::Connect(last.unwrap_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no address")
            })))
        })
    }
}

type HttpClient = Client<HttpsConnector<GuardedConnector>, Full<Bytes>>;

/// Settings of the delivery client.
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings {
    pub policy: AddressPolicy,
    /// The whole attempt: connect, TLS, request, response head (decisions §9: 10 s).
    pub timeout_ms: u64,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            policy: AddressPolicy::default(),
            timeout_ms: 10_000,
        }
    }
}

/// The webhook sink of the assembled service.
pub struct HttpWebhookSink {
    client: HttpClient,
    settings: ClientSettings,
    clock: std::sync::Arc<dyn Clock>,
}

impl std::fmt::Debug for HttpWebhookSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpWebhookSink")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > ERROR_CHARS_MAX {
        let mut end = ERROR_CHARS_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The innermost useful description of a client error, and whether it is permanent.
fn describe(err: &(dyn std::error::Error + 'static)) -> (String, bool) {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut text = err.to_string();
    while let Some(e) = current {
        if let Some(c) = e.downcast_ref::<ConnectError>() {
            return (c.to_string(), c.is_permanent());
        }
        text = e.to_string();
        current = e.source();
    }
    (text, false)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl HttpWebhookSink {
    pub fn new(settings: ClientSettings, clock: std::sync::Arc<dyn Clock>) -> Result<Self, String> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| format!("TLS setup: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(GuardedConnector::new(settings.policy));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(64)
            .build(https);
        Ok(HttpWebhookSink {
            client,
            settings,
            clock,
        })
    }

    fn build(
        &self,
        request: &WebhookRequest,
        uri: Uri,
    ) -> Result<hyper::Request<Full<Bytes>>, String> {
        let mut builder = hyper::Request::post(uri)
            .header(hyper::header::USER_AGENT, "custody-webhooks/1")
            .header(hyper::header::CONTENT_LENGTH, request.body.len());
        for (name, value) in &request.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
            builder = builder.header(name, value);
        }
        builder
            .body(Full::new(Bytes::from(request.body.clone())))
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl WebhookSink for HttpWebhookSink {
    async fn send(&self, request: WebhookRequest) -> DeliveryOutcome {
        let started = Instant::now();
        let permanent = |error: String| DeliveryOutcome::Permanent {
            status: None,
            error: truncate(error),
            latency_ms: millis(started.elapsed()),
        };
        // The policy may have changed since registration (the loopback switch turned off).
        let url = match parse_endpoint_url(&request.url, self.settings.policy) {
            Ok(url) => url,
            Err(e) => return permanent(e.to_string()),
        };
        let uri: Uri = match url.to_string().parse() {
            Ok(uri) => uri,
            Err(e) => return permanent(format!("bad URL: {e}")),
        };
        let req = match self.build(&request, uri) {
            Ok(req) => req,
            Err(e) => return permanent(format!("bad request: {e}")),
        };
        let deadline = started + Duration::from_millis(self.settings.timeout_ms);
        let response =
            match tokio::time::timeout_at(deadline.into(), self.client.request(req)).await {
                Err(_) => {
                    return DeliveryOutcome::Retry {
                        status: None,
                        error: format!("timed out after {} ms", self.settings.timeout_ms),
                        retry_after_s: None,
                        latency_ms: millis(started.elapsed()),
                    }
                }
                Ok(Err(e)) => {
                    let (error, is_permanent) = describe(&e);
                    let latency_ms = millis(started.elapsed());
                    return if is_permanent {
                        DeliveryOutcome::Permanent {
                            status: None,
                            error: truncate(error),
                            latency_ms,
                        }
                    } else {
                        DeliveryOutcome::Retry {
                            status: None,
                            error: truncate(error),
                            retry_after_s: None,
                            latency_ms,
                        }
                    };
                }
                Ok(Ok(response)) => response,
            };
        let latency_ms = millis(started.elapsed());
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Read a little of the body within the time left, then drop it: a connection whose body
        // was read to the end can be reused. Its content is never kept.
        let mut body = response.into_body();
        let mut read = 0usize;
        let drain = async {
            while read <= RESPONSE_BYTES_MAX {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            read += data.len();
                        }
                    }
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout_at(deadline.into(), drain).await;
        classify_response(status, retry_after.as_deref(), self.clock.now(), latency_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The wall clock: the sink only measures latencies with it.
    struct SystemClock;

    impl custody_core::ports::Clock for SystemClock {
        fn now(&self) -> custody_core::Timestamp {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0);
            custody_core::Timestamp::from_unix_millis(ms)
        }
    }

    fn request(url: &str) -> WebhookRequest {
        WebhookRequest {
            url: url.into(),
            headers: vec![("X-Service-Event-Id".into(), "e".into())],
            body: b"{}".to_vec(),
        }
    }

    fn sink(allow_loopback: bool, timeout_ms: u64) -> HttpWebhookSink {
        HttpWebhookSink::new(
            ClientSettings {
                policy: AddressPolicy {
                    allow_insecure_loopback: allow_loopback,
                },
                timeout_ms,
            },
            Arc::new(SystemClock),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn names_are_resolved_and_every_address_checked() {
        let strict = AddressPolicy::default();
        // localhost resolves to loopback: refused at delivery as at registration.
        let err = resolve_checked("localhost", 443, strict).await.unwrap_err();
        assert!(err.is_permanent(), "{err}");
        for literal in [
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "[::ffff:127.0.0.1]",
            "[::1]",
        ] {
            let err = resolve_checked(literal, 443, strict).await.unwrap_err();
            assert!(
                matches!(err, ConnectError::Forbidden(_)),
                "{literal}: {err}"
            );
        }
        let ok = resolve_checked(
            "127.1",
            8080,
            AddressPolicy {
                allow_insecure_loopback: true,
            },
        )
        .await
        .unwrap();
        assert_eq!(ok, vec!["127.0.0.1:8080".parse().unwrap()]);
        let public = resolve_checked("8.8.8.8", 443, strict).await.unwrap();
        assert_eq!(public, vec!["8.8.8.8:443".parse().unwrap()]);
    }

    #[tokio::test]
    async fn forbidden_destinations_are_permanent_and_never_contacted() {
        let s = sink(false, 2_000);
        for url in [
            "http://127.0.0.1:9/hook",
            "https://127.0.0.1:9/hook",
            "https://10.0.0.1/hook",
            "https://localhost/hook",
        ] {
            match s.send(request(url)).await {
                DeliveryOutcome::Permanent { status: None, .. } => {}
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    /// A raw HTTP/1.1 server: answers by path, hands back each request head it read.
    async fn scripted_server() -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut len = 0;
                    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf[len..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => len += n,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf[..len]).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    let answer = match path.as_str() {
                        "/ok" => "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string(),
                        "/busy" => "HTTP/1.1 429 Too Many\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n".to_string(),
                        "/moved" => "HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n".to_string(),
                        // A large body: only a prefix is read, and the answer still counts.
                        _ => format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n{}",
                            "x".repeat(1_000_000)
                        ),
                    };
                    let _ = tx.send(head);
                    let _ = sock.write_all(answer.as_bytes()).await;
                });
            }
        });
        (addr, rx)
    }

    #[tokio::test]
    async fn answers_are_classified_and_the_host_header_is_the_url_s() {
        let (addr, mut heads) = scripted_server().await;
        let s = sink(true, 5_000);
        let send = |path: &str| s.send(request(&format!("http://127.1:{}{path}", addr.port())));
        assert!(matches!(
            send("/ok").await,
            DeliveryOutcome::Delivered { status: 202, .. }
        ));
        let head = heads.recv().await.unwrap();
        assert!(head.starts_with("POST /ok HTTP/1.1\r\n"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains(&format!("\r\nhost: 127.0.0.1:{}\r\n", addr.port())),
            "{head}"
        );
        assert!(lower.contains("\r\nx-service-event-id: e\r\n"), "{head}");
        assert!(lower.contains("\r\ncontent-length: 2\r\n"), "{head}");
        match send("/busy").await {
            DeliveryOutcome::Retry {
                status: Some(429),
                retry_after_s: Some(30),
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            send("/moved").await,
            DeliveryOutcome::Retry {
                status: Some(301),
                ..
            }
        ));
        assert!(matches!(
            send("/large").await,
            DeliveryOutcome::Delivered { status: 200, .. }
        ));
    }

    #[tokio::test]
    async fn connection_errors_and_timeouts_are_retried() {
        // A port that was free a moment ago: connection refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let s = sink(true, 2_000);
        match s.send(request(&format!("http://127.0.0.1:{port}/h"))).await {
            DeliveryOutcome::Retry { status: None, .. } => {}
            other => panic!("{other:?}"),
        }
        // A listener that accepts and never answers: the attempt times out.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = silent.accept().await {
                held.push(sock);
            }
        });
        let s = sink(true, 300);
        let t = Instant::now();
        match s.send(request(&format!("http://{addr}/h"))).await {
            DeliveryOutcome::Retry {
                status: None,
                error,
                ..
            } => {
                assert!(error.contains("timed out"), "{error}")
            }
            other => panic!("{other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(3));
        hold.abort();
    }
}
