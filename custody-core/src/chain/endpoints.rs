//! The endpoints of one network as one failover set, for every chain adapter: which endpoint to
//! try next, what each exchange did to an endpoint's record, the health the admin `rpcs`
//! listing shows, and which URLs are accepted and how they are shown.
//!
//! The adapters move the bytes (a JSON-RPC POST, a TRON HTTP call) and check the network an
//! endpoint serves (`eth_chainId`, block 0's id); this module decides with what they report
//! and the time they pass in. What differs between networks is a [`FailoverPolicy`], not code.
//!
//! Endpoint URLs often carry an API key in their path or query: what is shown (health, logs,
//! errors) is `scheme://host:port` with markers in place of the path and query, and every error
//! text kept is scrubbed of those fragments ([`RedactedUrl::scrub`]).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::chain::EndpointHealth;
use crate::error::{PortError, Retry};
use crate::time::Timestamp;

/// Longest error text kept in a health record or a failover message.
pub const ERROR_TEXT_CHARS_MAX: usize = 300;

/// An endpoint URL as the adapter's HTTP library read it. The library that connects is also
/// the one that says what the host is, so the loopback rule judges the host actually reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlParts<'a> {
    pub scheme: &'a str,
    /// `[user[:password]@]host[:port]`, as written.
    pub authority: &'a str,
    /// IPv6 addresses may come with their brackets.
    pub host: &'a str,
    /// Empty or starting with `/`.
    pub path: &'a str,
    pub query: Option<&'a str>,
}

/// Why an endpoint URL was refused. Texts show the URL redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("RPC URL {url} is not a valid absolute URL")]
    Invalid { url: String },
    #[error("RPC URL {url} must use https:// or http://")]
    Scheme { url: String },
    #[error(
        "RPC URL {url} carries user:password credentials, which are not supported (put an API \
         key in the path)"
    )]
    Credentials { url: String },
    #[error(
        "RPC URL {url} uses plain http:// to a host that is not loopback; use https:// (a node \
         reached over plain HTTP could be impersonated to fake deposits)"
    )]
    InsecureHttp { url: String },
}

impl UrlError {
    /// A URL the adapter's HTTP library could not read: only its scheme may be shown, since
    /// where the secret part starts is unknown.
    pub fn unparsed(url: &str) -> Self {
        let shown = match url.trim().split_once("://") {
            Some((scheme, _)) if scheme.len() <= 8 => format!("{scheme}://…"),
            _ => "…".into(),
        };
        UrlError::Invalid { url: shown }
    }
}

/// How a hidden path and query show in an endpoint's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HiddenMarks {
    /// `/…` for a path and `?…` for a query (the BSC health records).
    Each,
    /// One `/…` for either or both (the TRON health records and settings texts).
    One,
}

/// What of an endpoint URL may be shown, and the fragments to scrub out of error texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactedUrl {
    /// `scheme://host[:port]`, without user info.
    base: String,
    hides_path: bool,
    hides_query: bool,
    /// Longest first, so that a fragment containing another is replaced whole.
    secrets: Vec<String>,
}

impl RedactedUrl {
    /// Redacts any URL, accepted or not (for settings and error texts).
    pub fn of(parts: &UrlParts<'_>) -> Self {
        let (user_info, host_port) = match parts.authority.rsplit_once('@') {
            Some((user_info, host_port)) => (Some(user_info), host_port),
            None => (None, parts.authority),
        };
        let hides_path = !parts.path.is_empty() && parts.path != "/";
        let mut secrets: Vec<String> = [
            hides_path.then(|| parts.path.trim_start_matches('/')),
            parts.query,
            user_info,
        ]
        .into_iter()
        .flatten()
        .map(str::to_owned)
        .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        RedactedUrl {
            base: format!("{}://{host_port}", parts.scheme),
            hides_path,
            hides_query: parts.query.is_some(),
            secrets,
        }
    }

    /// The URL as logs, errors and operators see it.
    pub fn shown(&self, marks: HiddenMarks) -> String {
        let mut shown = self.base.clone();
        match marks {
            HiddenMarks::Each => {
                if self.hides_path {
                    shown.push_str("/…");
                }
                if self.hides_query {
                    shown.push_str("?…");
                }
            }
            HiddenMarks::One => {
                if self.hides_path || self.hides_query {
                    shown.push_str("/…");
                }
            }
        }
        shown
    }

    /// The path, query and user info of the URL: what [`Self::scrub`] replaces.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// `text` made safe for a health record, a log line or an error (see [`scrub`]).
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, &self.secrets)
    }
}

/// Whether an endpoint URL may be used: `https://`, or `http://` to loopback (or anywhere when
/// `allow_insecure_http`, for a link protected otherwise), and no user info (HTTP clients do
/// not send it, and it would be a secret in the configuration).
pub fn check_url(parts: &UrlParts<'_>, allow_insecure_http: bool) -> Result<RedactedUrl, UrlError> {
    let redacted = RedactedUrl::of(parts);
    let url = redacted.base.clone();
    if parts.authority.contains('@') {
        return Err(UrlError::Credentials { url });
    }
    match parts.scheme {
        "https" => Ok(redacted),
        "http" if allow_insecure_http || is_loopback(parts.host) => Ok(redacted),
        "http" => Err(UrlError::InsecureHttp { url }),
        _ => Err(UrlError::Scheme { url }),
    }
}

/// Whether `host` names this machine, where plain HTTP cannot be read or altered on the way.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Makes a text safe for a health record or a log line: every `secrets` fragment replaced by
/// `…`, control characters made spaces (a node's text cannot forge a log line), at most
/// [`ERROR_TEXT_CHARS_MAX`] characters.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    // A one-character fragment would blank out ordinary text.
    for s in secrets.iter().filter(|s| s.len() >= 2) {
        out = out.replace(s.as_str(), "…");
    }
    let mut clean: String = out
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(ERROR_TEXT_CHARS_MAX)
        .collect();
    if out.chars().count() > ERROR_TEXT_CHARS_MAX {
        clean.push('…');
    }
    clean
}

/// How long an endpoint that failed waits before it is tried ahead of the others again:
/// `first` after one failure, doubling with each consecutive failure, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn doubling(first: Duration, max: Duration) -> Self {
        Backoff { first, max }
    }

    /// The same wait after any number of failures.
    pub const fn constant(wait: Duration) -> Self {
        Backoff {
            first: wait,
            max: wait,
        }
    }

    /// The wait after `consecutive_failures` failures in a row (none after none).
    pub fn after(&self, consecutive_failures: u32) -> Duration {
        if consecutive_failures == 0 {
            return Duration::ZERO;
        }
        // 2^16 times any sensible first wait is past any sensible cap.
        let doublings = (consecutive_failures - 1).min(16);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// What differs between the networks' endpoint sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverPolicy {
    pub backoff: Backoff,
    /// An endpoint never tried shows as healthy (nothing is known against it) rather than
    /// waiting for its first success.
    pub healthy_until_tried: bool,
    /// How the shown URLs mark a hidden path and query.
    pub marks: HiddenMarks,
    /// What proves the network, as the health records name it: `chain_id 56`,
    /// `genesis <block id>`.
    pub identity: String,
}

/// What is known of the network an endpoint serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Identity {
    #[default]
    Unchecked,
    Verified,
    /// It serves another network (`actual` names it): it is never tried again.
    Refused {
        actual: String,
    },
}

/// What recording one exchange changed, for the adapter's log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// The exchange succeeded after `after_failures` failures in a row (0: all was well).
    Succeeded { after_failures: u32 },
    /// The `consecutive_failures`-th failure in a row; `error` is the text kept, scrubbed.
    Failed {
        consecutive_failures: u32,
        error: String,
    },
}

#[derive(Debug, Clone, Default)]
struct Record {
    identity: Identity,
    consecutive_failures: u32,
    requests: u64,
    failures: u64,
    last_error: Option<String>,
    last_latency_ms: Option<u64>,
    last_success_at: Option<Timestamp>,
    last_failure_at: Option<Timestamp>,
    head_block: Option<u64>,
}

impl Record {
    /// Until when the endpoint is tried only after the others; `None` when it is not waiting.
    fn backoff_until(&self, backoff: &Backoff) -> Option<Timestamp> {
        if self.consecutive_failures == 0 {
            return None;
        }
        let wait = backoff.after(self.consecutive_failures);
        Some(self.last_failure_at?.plus_millis(millis_i64(wait)))
    }

    fn is_refused(&self) -> bool {
        matches!(self.identity, Identity::Refused { .. })
    }
}

/// The endpoints of one network in configured order, each with its record. Shared by every
/// request of the adapter: every method takes `&self`, and times are passed in.
///
/// Backoff runs on the wall clock the adapter passes in: it only orders the endpoints (one in
/// backoff is still tried, last), so a clock step can at worst reorder a few attempts.
#[derive(Debug)]
pub struct EndpointSet {
    urls: Vec<RedactedUrl>,
    /// The shown form of each URL, made once.
    shown: Vec<String>,
    records: Mutex<Vec<Record>>,
    policy: FailoverPolicy,
}

impl EndpointSet {
    /// The endpoints in order of preference, none of them tried yet.
    pub fn new(urls: Vec<RedactedUrl>, policy: FailoverPolicy) -> Self {
        let shown = urls.iter().map(|u| u.shown(policy.marks)).collect();
        let records = Mutex::new(vec![Record::default(); urls.len()]);
        EndpointSet {
            urls,
            shown,
            records,
            policy,
        }
    }

    fn records(&self) -> MutexGuard<'_, Vec<Record>> {
        // The records are plain counters: a panic while holding the lock leaves them usable.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn len(&self) -> usize {
        self.urls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    /// Endpoint `index`'s URL, redacted.
    pub fn url(&self, index: usize) -> &RedactedUrl {
        &self.urls[index]
    }

    /// Endpoint `index` as logs, errors and operators see it.
    pub fn shown(&self, index: usize) -> &str {
        &self.shown[index]
    }

    /// Every endpoint as shown, in configured order.
    pub fn shown_all(&self) -> &[String] {
        &self.shown
    }

    /// `text` scrubbed of endpoint `index`'s secrets.
    pub fn scrub(&self, index: usize, text: &str) -> String {
        self.urls[index].scrub(text)
    }

    /// `endpoint: text`, scrubbed: one endpoint's part of an error message.
    pub fn labelled(&self, index: usize, text: &str) -> String {
        format!("{}: {}", self.shown[index], self.scrub(index, text))
    }

    /// The order in which to try the endpoints at `now`: those not in backoff in configured
    /// order, then those in backoff, the one whose backoff ends first first; endpoints of
    /// another network never.
    pub fn order(&self, now: Timestamp) -> Vec<usize> {
        attempt_order(&self.records(), &self.policy.backoff, now)
    }

    /// Records one exchange with endpoint `index` that ended at `now` after `latency`: `Err`
    /// carries the failure's text (scrubbed here before it is kept).
    pub fn record(
        &self,
        index: usize,
        outcome: Result<(), &str>,
        latency: Duration,
        now: Timestamp,
    ) -> Recorded {
        let mut records = self.records();
        let record = &mut records[index];
        record.requests = record.requests.saturating_add(1);
        record.last_latency_ms = Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
        match outcome {
            Ok(()) => {
                let after_failures = record.consecutive_failures;
                record.consecutive_failures = 0;
                record.last_success_at = Some(now);
                Recorded::Succeeded { after_failures }
            }
            Err(message) => {
                let error = self.scrub(index, message);
                record.consecutive_failures = record.consecutive_failures.saturating_add(1);
                record.failures = record.failures.saturating_add(1);
                record.last_error = Some(error.clone());
                record.last_failure_at = Some(now);
                Recorded::Failed {
                    consecutive_failures: record.consecutive_failures,
                    error,
                }
            }
        }
    }

    /// What is known of the network endpoint `index` serves.
    pub fn identity(&self, index: usize) -> Identity {
        self.records()[index].identity.clone()
    }

    pub fn set_identity(&self, index: usize, identity: Identity) {
        self.records()[index].identity = identity;
    }

    /// Endpoint `index` reported block `number` as its head (kept when it is the newest).
    pub fn note_head(&self, index: usize, number: u64) {
        let mut records = self.records();
        let head = &mut records[index].head_block;
        *head = Some(head.map_or(number, |h| h.max(number)));
    }

    /// The health of every endpoint, in configured order.
    pub fn health(&self) -> Vec<EndpointHealth> {
        self.records()
            .iter()
            .zip(&self.shown)
            .map(|(r, url)| self.health_of(r, url))
            .collect()
    }

    fn health_of(&self, r: &Record, url: &str) -> EndpointHealth {
        let known_good = r.last_success_at.is_some() || self.policy.healthy_until_tried;
        EndpointHealth {
            url: url.to_owned(),
            healthy: r.consecutive_failures == 0 && known_good && !r.is_refused(),
            identity_verified: r.identity == Identity::Verified,
            identity: self.policy.identity.clone(),
            consecutive_failures: r.consecutive_failures,
            requests: Some(r.requests),
            failures: Some(r.failures),
            last_error: r.last_error.clone(),
            last_latency_ms: r.last_latency_ms,
            last_success_at: r.last_success_at,
            last_failure_at: r.last_failure_at,
            head_block: r.head_block,
        }
    }
}

fn attempt_order(records: &[Record], backoff: &Backoff, now: Timestamp) -> Vec<usize> {
    let mut ready = Vec::with_capacity(records.len());
    let mut waiting: Vec<(Timestamp, usize)> = Vec::new();
    for (i, r) in records.iter().enumerate().filter(|(_, r)| !r.is_refused()) {
        match r.backoff_until(backoff) {
            Some(until) if now < until => waiting.push((until, i)),
            _ => ready.push(i),
        }
    }
    // Ties keep configured order: the index is the second key.
    waiting.sort_unstable();
    ready.extend(waiting.into_iter().map(|(_, i)| i));
    ready
}

fn millis_i64(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The failures of one request across the endpoints it was tried on, for the error the caller
/// gets when none answered.
#[derive(Debug, Default)]
pub struct Failures {
    any_transient: bool,
    lines: Vec<String>,
}

impl Failures {
    /// One endpoint's failure; `line` names the endpoint (see [`EndpointSet::labelled`]).
    pub fn push(&mut self, retry: Retry, line: String) {
        self.any_transient |= retry == Retry::Transient;
        self.lines.push(line);
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// `context` followed by every failure: transient when at least one endpoint failed in a
    /// way that may pass (it may come back), permanent otherwise.
    pub fn into_port_error(self, port: &'static str, context: &str) -> PortError {
        let message = format!("{context}{}", self.lines.join("; "));
        if self.any_transient {
            PortError::transient(port, message)
        } else {
            PortError::permanent(port, message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parts<'a>(
        scheme: &'a str,
        authority: &'a str,
        path: &'a str,
        query: Option<&'a str>,
    ) -> UrlParts<'a> {
        let host_port = authority.rsplit('@').next().unwrap_or("");
        let host = match host_port.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host_port,
        };
        UrlParts {
            scheme,
            authority,
            host,
            path,
            query,
        }
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(1_800_000_000_000 + ms)
    }

    fn policy(backoff: Backoff) -> FailoverPolicy {
        FailoverPolicy {
            backoff,
            healthy_until_tried: false,
            marks: HiddenMarks::Each,
            identity: "chain_id 56".into(),
        }
    }

    fn set(n: usize, policy: FailoverPolicy) -> EndpointSet {
        let urls = (0..n)
            .map(|i| {
                let authority = format!("node{i}.example:443");
                RedactedUrl::of(&parts("https", &authority, "/KEY", None))
            })
            .collect();
        EndpointSet::new(urls, policy)
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn urls_are_checked_and_redacted() {
        let u = check_url(
            &parts(
                "https",
                "bsc.example.com",
                "/v1/SECRETKEY",
                Some("apikey=XYZ"),
            ),
            false,
        )
        .unwrap();
        assert_eq!(u.shown(HiddenMarks::Each), "https://bsc.example.com/…?…");
        assert_eq!(u.shown(HiddenMarks::One), "https://bsc.example.com/…");
        assert_eq!(
            u.scrub("failed at v1/SECRETKEY with apikey=XYZ\n"),
            "failed at … with … "
        );
        let bare = RedactedUrl::of(&parts("http", "127.0.0.1:9", "/", Some("key=k")));
        assert_eq!(bare.shown(HiddenMarks::Each), "http://127.0.0.1:9?…");
        assert_eq!(bare.shown(HiddenMarks::One), "http://127.0.0.1:9/…");
        let plain = RedactedUrl::of(&parts("http", "localhost:8545", "/", None));
        assert_eq!(plain.shown(HiddenMarks::Each), "http://localhost:8545");

        for (parts, allowed) in [
            (parts("http", "127.0.0.1:8545", "", None), true),
            (parts("http", "[::1]:8545", "", None), true),
            (parts("http", "LOCALHOST:8545", "", None), true),
            (parts("http", "10.0.0.5:8545", "", None), false),
            (parts("http", "localhost.example.com", "", None), false),
        ] {
            assert_eq!(check_url(&parts, false).is_ok(), allowed, "{parts:?}");
            assert!(check_url(&parts, true).is_ok(), "{parts:?}");
        }
        let refused = |p: UrlParts<'_>| check_url(&p, true).unwrap_err();
        assert_eq!(
            refused(parts("ftp", "host", "/x", None)),
            UrlError::Scheme {
                url: "ftp://host".into()
            }
        );
        let credentials = refused(parts("https", "user:s3cret@host", "/x", None));
        assert_eq!(
            credentials,
            UrlError::Credentials {
                url: "https://host".into()
            }
        );
        assert!(!credentials.to_string().contains("s3cret"));
        assert_eq!(
            UrlError::unparsed("https://exa mple/KEY"),
            UrlError::Invalid {
                url: "https://…".into()
            }
        );
        assert_eq!(
            UrlError::unparsed("not a url"),
            UrlError::Invalid { url: "…".into() }
        );
    }

    #[test]
    fn scrubbed_texts_are_one_bounded_line() {
        let long = "x".repeat(ERROR_TEXT_CHARS_MAX + 5);
        let out = scrub(&long, &[]);
        assert_eq!(out.chars().count(), ERROR_TEXT_CHARS_MAX + 1);
        assert!(out.ends_with('…'));
        assert_eq!(scrub("a\r\nb", &[]), "a  b");
        // One-character fragments (a query `a`) are not blanked out of every word.
        assert_eq!(scrub("a path", &["a".into()]), "a path");
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff::doubling(Duration::from_millis(500), Duration::from_secs(30));
        assert_eq!(b.after(0), Duration::ZERO);
        assert_eq!(b.after(1), Duration::from_millis(500));
        assert_eq!(b.after(2), Duration::from_millis(1000));
        assert_eq!(b.after(7), Duration::from_secs(30));
        assert_eq!(b.after(u32::MAX), Duration::from_secs(30));
        let c = Backoff::constant(Duration::from_secs(30));
        assert_eq!(c.after(1), c.after(40));
        let huge = Backoff::constant(Duration::MAX);
        assert_eq!(huge.after(40), Duration::MAX);
    }

    #[test]
    fn a_failed_endpoint_waits_behind_the_others_until_its_backoff_ends() {
        let s = set(3, policy(Backoff::doubling(SECOND, 8 * SECOND)));
        assert_eq!(s.order(at(0)), [0, 1, 2]);
        s.record(0, Err("down"), SECOND, at(0));
        assert_eq!(s.order(at(999)), [1, 2, 0]);
        assert_eq!(s.order(at(1000)), [0, 1, 2]);
        // A second failure doubles the wait.
        s.record(0, Err("down"), SECOND, at(1000));
        assert_eq!(s.order(at(2999)), [1, 2, 0]);
        assert_eq!(s.order(at(3000)), [0, 1, 2]);
        // One success clears it.
        s.record(0, Ok(()), SECOND, at(3000));
        s.record(1, Err("down"), SECOND, at(3000));
        assert_eq!(s.order(at(3001)), [0, 2, 1]);
    }

    #[test]
    fn among_endpoints_in_backoff_the_first_to_rest_comes_first() {
        let s = set(3, policy(Backoff::constant(10 * SECOND)));
        s.record(0, Err("down"), SECOND, at(500));
        s.record(2, Err("down"), SECOND, at(100));
        s.record(1, Err("down"), SECOND, at(300));
        assert_eq!(s.order(at(600)), [2, 1, 0]);
    }

    #[test]
    fn an_endpoint_of_another_network_is_never_tried() {
        let s = set(2, policy(Backoff::constant(SECOND)));
        s.set_identity(0, Identity::Verified);
        s.set_identity(
            1,
            Identity::Refused {
                actual: "97".into(),
            },
        );
        assert_eq!(s.order(at(0)), [0]);
        let h = s.health();
        assert!(h[0].identity_verified && !h[1].identity_verified);
        assert!(!h[1].healthy);
    }

    #[test]
    fn exchanges_are_recorded_for_the_health_listing() {
        let s = set(1, policy(Backoff::constant(SECOND)));
        let h = &s.health()[0];
        assert_eq!(h.url, "https://node0.example:443/…");
        assert_eq!(h.identity, "chain_id 56");
        assert!(!h.healthy && h.last_success_at.is_none());

        assert_eq!(
            s.record(0, Err("connection refused at /KEY\n"), SECOND, at(1)),
            Recorded::Failed {
                consecutive_failures: 1,
                error: "connection refused at /… ".into()
            }
        );
        assert_eq!(
            s.record(0, Err("timeout"), 2 * SECOND, at(2)),
            Recorded::Failed {
                consecutive_failures: 2,
                error: "timeout".into()
            }
        );
        assert_eq!(
            s.record(0, Ok(()), Duration::from_millis(12), at(3)),
            Recorded::Succeeded { after_failures: 2 }
        );
        s.note_head(0, 9);
        s.note_head(0, 7);
        let h = &s.health()[0];
        assert!(h.healthy);
        assert_eq!(h.consecutive_failures, 0);
        assert_eq!((h.requests, h.failures), (Some(3), Some(2)));
        assert_eq!(h.last_error.as_deref(), Some("timeout"));
        assert_eq!(h.last_latency_ms, Some(12));
        assert_eq!(h.last_success_at, Some(at(3)));
        assert_eq!(h.last_failure_at, Some(at(2)));
        assert_eq!(h.head_block, Some(9));
    }

    #[test]
    fn an_untried_endpoint_is_healthy_only_where_the_policy_says() {
        let mut p = policy(Backoff::constant(SECOND));
        p.healthy_until_tried = true;
        let s = set(1, p);
        assert!(s.health()[0].healthy);
        s.record(0, Err("down"), SECOND, at(0));
        assert!(!s.health()[0].healthy);
    }

    #[test]
    fn failures_are_transient_when_any_endpoint_may_come_back() {
        let mut f = Failures::default();
        assert!(f.is_empty());
        f.push(Retry::Permanent, "a: HTTP status 404".into());
        f.push(Retry::Transient, "b: timeout".into());
        let e = f.into_port_error("chain.bsc", "eth_call: every endpoint failed: ");
        assert_eq!(e.retry, Retry::Transient);
        assert_eq!(
            e.message,
            "eth_call: every endpoint failed: a: HTTP status 404; b: timeout"
        );
        let mut f = Failures::default();
        f.push(Retry::Permanent, "a: 404".into());
        assert_eq!(f.into_port_error("tron", "").retry, Retry::Permanent);
    }

    /// One endpoint's history: `None` a success, `Some(true)` a failure, `Some(false)` a
    /// refusal of its network, each at the given millisecond.
    fn history() -> impl Strategy<Value = Vec<(usize, Option<bool>, i64)>> {
        prop::collection::vec(
            (0usize..6, prop::option::of(any::<bool>()), 0i64..5_000),
            0..30,
        )
    }

    proptest! {
        #[test]
        fn the_order_lists_each_usable_endpoint_once_and_rested_ones_first(
            n in 0usize..6,
            events in history(),
            now in 0i64..60_000,
            first_ms in 0u64..5_000,
        ) {
            let backoff = Backoff::doubling(Duration::from_millis(first_ms), 4 * SECOND);
            let s = set(n, policy(backoff));
            let mut time = 0;
            for (i, event, step) in events.into_iter().filter(|(i, ..)| *i < n) {
                time += step;
                match event {
                    None => { s.record(i, Ok(()), SECOND, at(time)); }
                    Some(true) => { s.record(i, Err("down"), SECOND, at(time)); }
                    Some(false) => s.set_identity(i, Identity::Refused { actual: "x".into() }),
                }
            }
            let order = s.order(at(now));
            let records = s.records().clone();
            let usable: Vec<usize> = (0..n).filter(|i| !records[*i].is_refused()).collect();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(&sorted, &usable, "every usable endpoint exactly once");

            let waiting = |i: usize| records[i]
                .backoff_until(&backoff)
                .is_some_and(|until| at(now) < until);
            let first_waiting = order.iter().position(|i| waiting(*i)).unwrap_or(order.len());
            prop_assert!(order[first_waiting..].iter().all(|i| waiting(*i)),
                "no endpoint in backoff before a rested one: {:?}", order);
            prop_assert!(order[..first_waiting].windows(2).all(|w| w[0] < w[1]),
                "rested endpoints in configured order: {:?}", order);
        }
    }
}
