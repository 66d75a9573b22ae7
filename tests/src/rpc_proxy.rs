//! A JSON-RPC proxy on loopback between `custody serve` and anvil that can misbehave on
//! `eth_sendRawTransaction`: cut the connection after forwarding (the answer is lost
//! but the node has the transaction), or hold the request before or after forwarding it
//! (a node that hangs, so that the test can `kill -9` the service at that point). And on every
//! call ([`NodeFault`]): a node that is down, slow, answers 5xx or truncated JSON, or serves
//! blocks whose parent hash is not their parent's.
//!
//! HTTP/1.1 with keep-alive on the client side; one upstream connection per request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What happens to an `eth_sendRawTransaction` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendFault {
    Pass,
    /// Forwarded to the node, then the client's connection is closed without an answer.
    CutAfterForward,
    /// Never forwarded: the request hangs until the fault changes or the proxy stops, then
    /// the connection is closed without an answer.
    HoldBeforeForward,
    /// Forwarded, then the answer is held like [`SendFault::HoldBeforeForward`].
    HoldAfterForward,
}

/// What happens to every call (after [`SendFault`] for sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFault {
    Healthy,
    /// The connection is closed before anything is read: a node that was killed.
    Down,
    /// Each answer comes this many milliseconds late.
    Slow(u64),
    /// HTTP 503 with a text body, nothing forwarded.
    ServerError,
    /// Forwarded; the answer's body is cut in half (framed with its new length).
    TruncatedJson,
    /// Forwarded; every block in an answer carries a `parentHash` that names no block.
    BrokenParentHash,
}

struct Shared {
    fault: Mutex<SendFault>,
    node_fault: Mutex<NodeFault>,
    calls: AtomicUsize,
    stopping: AtomicBool,
    sends_seen: AtomicUsize,
    sends_forwarded: AtomicUsize,
    upstream: String,
}

pub struct RpcProxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl RpcProxy {
    /// Proxies to `upstream_url` (`http://127.0.0.1:<port>`).
    pub fn start(upstream_url: &str) -> RpcProxy {
        let upstream = upstream_url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared {
            fault: Mutex::new(SendFault::Pass),
            node_fault: Mutex::new(NodeFault::Healthy),
            calls: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            sends_seen: AtomicUsize::new(0),
            sends_forwarded: AtomicUsize::new(0),
            upstream,
        });
        let s = Arc::clone(&shared);
        let acceptor = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = Arc::clone(&s);
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        RpcProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn set_send_fault(&self, fault: SendFault) {
        *self.shared.fault.lock().unwrap() = fault;
    }

    pub fn set_node_fault(&self, fault: NodeFault) {
        *self.shared.node_fault.lock().unwrap() = fault;
    }

    /// Calls received, whatever became of them.
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }

    /// `eth_sendRawTransaction` requests received.
    pub fn sends_seen(&self) -> usize {
        self.shared.sends_seen.load(Ordering::SeqCst)
    }

    /// `eth_sendRawTransaction` requests that reached the node.
    pub fn sends_forwarded(&self) -> usize {
        self.shared.sends_forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for RpcProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// One HTTP message: head (through the blank line) and body.
struct Message {
    head: Vec<u8>,
    body: Vec<u8>,
}

fn header_value(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

/// Reads one message; `None` at a clean end of the stream.
fn read_message(r: &mut BufReader<TcpStream>) -> Option<Message> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = r.read_until(b'\n', &mut line).ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&line);
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut body = Vec::new();
    if let Some(len) = header_value(&text, "content-length") {
        let len: usize = len.parse().ok()?;
        body.resize(len, 0);
        r.read_exact(&mut body).ok()?;
    } else if header_value(&text, "transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
        // Re-framed with a length below.
        let kept: Vec<&str> = text
            .split("\r\n")
            .filter(|l| !l.to_ascii_lowercase().starts_with("transfer-encoding") && !l.is_empty())
            .collect();
        head = format!(
            "{}\r\ncontent-length: {}\r\n\r\n",
            kept.join("\r\n"),
            body.len()
        )
        .into_bytes();
    }
    Some(Message { head, body })
}

fn forward(upstream: &str, request: &Message) -> Option<Message> {
    let mut up = TcpStream::connect(upstream).ok()?;
    up.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    up.write_all(&request.head).ok()?;
    up.write_all(&request.body).ok()?;
    read_message(&mut BufReader::new(up))
}

fn hold(s: &Shared, while_fault: SendFault) {
    while *s.fault.lock().unwrap() == while_fault && !s.stopping.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Rewrites the answer as `fault` says; `None` closes the connection without an answer.
fn disturb(fault: NodeFault, answer: Message) -> Option<Message> {
    let reframe = |head: &[u8], body: Vec<u8>| {
        let text = String::from_utf8_lossy(head);
        let kept: Vec<&str> = text
            .split("\r\n")
            .filter(|l| !l.to_ascii_lowercase().starts_with("content-length") && !l.is_empty())
            .collect();
        Message {
            head: format!(
                "{}\r\ncontent-length: {}\r\n\r\n",
                kept.join("\r\n"),
                body.len()
            )
            .into_bytes(),
            body,
        }
    };
    match fault {
        NodeFault::TruncatedJson => {
            let half = answer.body[..answer.body.len() / 2].to_vec();
            Some(reframe(&answer.head, half))
        }
        NodeFault::BrokenParentHash => {
            let text = String::from_utf8_lossy(&answer.body).into_owned();
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            // EVM (`0x` + 64 hex) and TRON (64 hex) spell it alike but for the prefix.
            while let Some(at) = rest.find("\"parentHash\":\"") {
                let start = at + "\"parentHash\":\"".len();
                let len = rest[start..].find('"').unwrap_or(0);
                let value = &rest[start..start + len];
                out.push_str(&rest[..start]);
                let digits = value.strip_prefix("0x").unwrap_or(value).len();
                out.push_str(&value[..len - digits]);
                out.push_str(&"de".repeat(digits / 2));
                out.push_str(&"d".repeat(digits % 2));
                rest = &rest[start + len..];
            }
            out.push_str(rest);
            Some(reframe(&answer.head, out.into_bytes()))
        }
        _ => Some(answer),
    }
}

fn serve(conn: TcpStream, s: &Shared) {
    let Ok(reader) = conn.try_clone() else { return };
    let mut reader = BufReader::new(reader);
    let mut writer = conn;
    while let Some(request) = read_message(&mut reader) {
        s.calls.fetch_add(1, Ordering::SeqCst);
        let node_fault = *s.node_fault.lock().unwrap();
        match node_fault {
            NodeFault::Down => break,
            NodeFault::ServerError => {
                let body = "upstream unavailable";
                let answer = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if writer.write_all(answer.as_bytes()).is_err() {
                    break;
                }
                continue;
            }
            NodeFault::Slow(ms) => std::thread::sleep(Duration::from_millis(ms)),
            _ => {}
        }
        let is_send = String::from_utf8_lossy(&request.body).contains("eth_sendRawTransaction");
        let fault = if is_send {
            s.sends_seen.fetch_add(1, Ordering::SeqCst);
            *s.fault.lock().unwrap()
        } else {
            SendFault::Pass
        };
        if fault == SendFault::HoldBeforeForward {
            hold(s, fault);
            break;
        }
        let answer = forward(&s.upstream, &request);
        if is_send {
            s.sends_forwarded.fetch_add(1, Ordering::SeqCst);
        }
        match fault {
            SendFault::CutAfterForward => break,
            SendFault::HoldAfterForward => {
                hold(s, fault);
                break;
            }
            _ => {}
        }
        let Some(answer) = answer.and_then(|a| disturb(node_fault, a)) else {
            break;
        };
        if writer.write_all(&answer.head).is_err() || writer.write_all(&answer.body).is_err() {
            break;
        }
    }
    let _ = writer.shutdown(Shutdown::Both);
}
