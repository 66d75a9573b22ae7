//! A webhook receiver for end-to-end tests: a std `TcpListener` on loopback answering each
//! request as the test scripts it, recording what arrived. Signatures are checked with this
//! crate's own HMAC (interface §6, receiver side), never with the server's code.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The status answered, once answered (`None`: still held, or the peer went away).
    pub answered: Option<u16>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn event_id(&self) -> &str {
        self.header("x-service-event-id").unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }

    /// Whether the signature headers verify with `secret` (interface §6).
    pub fn verifies_with(&self, secret: &str) -> bool {
        match (
            self.header("x-service-timestamp"),
            self.header("x-service-event-id"),
            self.header("x-service-signature"),
        ) {
            (Some(ts), Some(id), Some(sig)) => verify_signature(secret, ts, id, &self.body, sig),
            _ => false,
        }
    }
}

/// `sha256=` + lowercase hex HMAC-SHA256(secret, timestamp "." event_id "." body), compared in
/// constant time as a receiver must.
pub fn verify_signature(secret: &str, ts: &str, event_id: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(given) = hex::decode(hex_sig) else {
        return false;
    };
    if hex_sig.len() != 64 || hex_sig.bytes().any(|b| b.is_ascii_uppercase()) {
        return false;
    }
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(ts.as_bytes());
    mac.update(b".");
    mac.update(event_id.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// How to answer one request.
#[derive(Debug, Clone)]
pub enum Answer {
    Status(u16),
    /// A status with extra headers (`Location`, `Retry-After`...).
    WithHeaders(u16, Vec<(String, String)>),
    /// Hold the request without answering until the flag is set, then close.
    Hold(Arc<AtomicBool>),
}

type Script = dyn Fn(usize, &Received) -> Answer + Send + Sync;

struct Shared {
    requests: Mutex<Vec<Received>>,
    arrived: Condvar,
    script: Box<Script>,
}

/// A receiver listening on `127.0.0.1`; `url(path)` is its address.
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

fn read_request(stream: &TcpStream) -> Option<Received> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        path,
        headers,
        body,
        answered: None,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200..=299 => "OK",
        300..=399 => "Redirect",
        400..=499 => "Client Error",
        _ => "Server Error",
    }
}

fn serve_one(shared: &Shared, mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(request) = read_request(&stream) else {
        return;
    };
    let (index, answer) = {
        let mut requests = shared.requests.lock().unwrap();
        let index = requests.len();
        let answer = (shared.script)(index, &request);
        requests.push(request);
        shared.arrived.notify_all();
        (index, answer)
    };
    let (status, extra) = match answer {
        Answer::Status(s) => (s, Vec::new()),
        Answer::WithHeaders(s, h) => (s, h),
        Answer::Hold(release) => {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !release.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            return;
        }
    };
    // A body the service must read at most a little of, and never show anyone.
    let body = "RECEIVER-PRIVATE-RESPONSE-BODY";
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).is_ok() && stream.write_all(body.as_bytes()).is_ok() {
        let _ = stream.flush();
        shared.requests.lock().unwrap()[index].answered = Some(status);
        shared.arrived.notify_all();
    }
}

impl Receiver {
    /// Starts a receiver that answers the `n`-th request (0-based, all paths together) with
    /// `script(n, &request)`.
    pub fn start(script: impl Fn(usize, &Received) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            script: Box::new(script),
        });
        let accept = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&accept);
                std::thread::spawn(move || serve_one(&shared, stream));
            }
        });
        Receiver { addr, shared }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Waits until `done(requests)` holds; panics after `timeout`.
    pub fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        let mut requests = self.shared.requests.lock().unwrap();
        loop {
            if done(&requests) {
                return requests.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting for {what}; received {:#?}",
                *requests
            );
            requests = self
                .shared
                .arrived
                .wait_timeout(requests, left.min(Duration::from_millis(100)))
                .unwrap()
                .0;
        }
    }
}

/// Sets `key = value` (value written as TOML) in `[section]` of the data dir's `custody.toml`,
/// adding the section or key when missing. For settings that must be in place before `start()`.
pub fn set_config(data_dir: &Path, section: &str, key: &str, value: &str) {
    let path = data_dir.join("custody.toml");
    let text = std::fs::read_to_string(&path).expect("custody.toml");
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let header = format!("[{section}]");
    let start = match lines.iter().position(|l| l.trim() == header) {
        Some(i) => i,
        None => {
            lines.push(String::new());
            lines.push(header);
            lines.len() - 1
        }
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |i| start + 1 + i);
    let entry = format!("{key} = {value}");
    match lines[start + 1..end]
        .iter()
        .position(|l| l.split('=').next().map(str::trim) == Some(key))
    {
        Some(i) => lines[start + 1 + i] = entry,
        None => lines.insert(start + 1, entry),
    }
    std::fs::write(&path, lines.join("\n") + "\n").expect("write custody.toml");
}

/// Removes `[section]` and its keys from `custody.toml` (a data dir from before it existed).
pub fn remove_config_section(data_dir: &Path, section: &str) {
    let path = data_dir.join("custody.toml");
    let text = std::fs::read_to_string(&path).expect("custody.toml");
    let header = format!("[{section}]");
    let mut out = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.trim_start().starts_with('[') {
            skipping = line.trim() == header;
        }
        if !skipping {
            out.push(line);
        }
    }
    std::fs::write(&path, out.join("\n") + "\n").expect("write custody.toml");
}
