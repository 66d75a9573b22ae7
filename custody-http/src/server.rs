//! The hyper server: accept loop, per-connection limits and graceful shutdown (stop accepting,
//! let in-flight requests finish, then return).
//!
//! A connection holds one of `connections_max` slots from accept to close, so every way a client
//! can hold one is bounded: one peer holds at most `connections_per_peer_max` of them; a
//! connection without a complete request head for `idle_timeout_ms` (a new one, or a keep-alive
//! one between requests) is closed; the body has its own deadline (`dispatch`). A connection
//! over a cap is answered 503 with `Retry-After` rather than dropped, so its client learns why.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use custody_core::error::{ErrorCode, Refusal};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::dispatch::handle;
use crate::reply::{finish, refusal_reply};
use crate::state::AppState;

/// How long shutdown waits for in-flight requests before giving up on them.
pub const DRAIN_TIMEOUT_MS: u64 = 30_000;

/// Refused connections being answered at once. Each costs a task for up to
/// [`REFUSAL_TIMEOUT`]; past this many, a flood is closed unanswered rather than let grow.
const REFUSALS_MAX: usize = 256;
/// How long a refused client has to send its request head and read the 503.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);
/// A slot frees within the body deadline or the idle timeout; a second is a fair first wait.
const BUSY_RETRY_AFTER_S: u64 = 1;
/// Refusals are logged together at most this often: an attack must not flood the log.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Serves until `shutdown` resolves, then drains. Returns once every connection is closed or
/// the drain timeout passed.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(state.limits.connections_max));
    let peers = Arc::new(PeerSlots::new(state.limits.connections_per_peer_max));
    let refusals = Arc::new(Semaphore::new(REFUSALS_MAX));
    let mut refusal_log = RefusalLog::new();
    // hyper's header timer runs from the moment it waits for a request head, after the previous
    // response as well as on a new connection: it is the idle timeout of keep-alive.
    let idle_timeout = Duration::from_millis(state.limits.idle_timeout_ms);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let peer = peer_key(peer.ip());
                let admitted = match Arc::clone(&slots).try_acquire_owned() {
                    Err(_) => Err("the server has too many connections; retry shortly"),
                    Ok(permit) => match peers.take(peer) {
                        Some(slot) => Ok((permit, slot)),
                        None => Err("too many connections from this address; retry shortly"),
                    },
                };
                let held = match admitted {
                    Ok(held) => held,
                    Err(why) => {
                        refusal_log.note(peer, why);
                        refuse(stream, why, &state, &refusals);
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&state);
                let service = service_fn(move |req| {
                    let state = Arc::clone(&state);
                    async move { Ok::<_, Infallible>(handle(state, req).await) }
                });
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(idle_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _held = held;
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_millis(DRAIN_TIMEOUT_MS)) => {
            tracing::warn!("shutdown drain timed out; closing remaining connections");
        }
    }
    Ok(())
}

/// Answers a connection over a cap with a 503 and closes it, without holding a slot.
fn refuse(stream: TcpStream, message: &'static str, state: &AppState, refusals: &Arc<Semaphore>) {
    let Ok(permit) = Arc::clone(refusals).try_acquire_owned() else {
        return;
    };
    let trace_id = state.new_trace_id();
    tokio::spawn(async move {
        let _permit = permit;
        // The request is read (so the client is not reset before it reads the answer) but not
        // its body: the answer does not depend on it.
        let service = service_fn(move |_req: Request<Incoming>| async move {
            Ok::<_, Infallible>(busy(trace_id, message))
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(REFUSAL_TIMEOUT)
            .keep_alive(false)
            .serve_connection(TokioIo::new(stream), service);
        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, conn).await;
    });
}

fn busy(trace_id: Uuid, message: &str) -> Response<Full<Bytes>> {
    let refusal = Refusal::new(ErrorCode::Maintenance, message).retry_after(BUSY_RETRY_AFTER_S);
    let reply = refusal_reply(&refusal, trace_id).with_header("connection", "close");
    finish(reply, trace_id, None)
}

/// What a per-peer cap counts by: an IPv4 address (IPv4-mapped IPv6 included), or the /64 of
/// an IPv6 address, which one subscriber usually holds whole.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Open connections per peer.
struct PeerSlots {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its peer's count, given back when the connection ends.
struct PeerSlot {
    peers: Arc<PeerSlots>,
    peer: IpAddr,
}

impl PeerSlots {
    fn new(max: usize) -> Self {
        PeerSlots {
            max,
            open: Mutex::new(HashMap::new()),
        }
    }

    fn take(self: &Arc<Self>, peer: IpAddr) -> Option<PeerSlot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(peer).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            peer,
        })
    }

    #[cfg(test)]
    fn open(&self, peer: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&peer).copied().unwrap_or(0)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.peers.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

/// Counts refused connections between two log lines.
struct RefusalLog {
    refused: u64,
    next_at: Instant,
}

impl RefusalLog {
    fn new() -> Self {
        RefusalLog {
            refused: 0,
            next_at: Instant::now(),
        }
    }

    fn note(&mut self, peer: IpAddr, why: &str) {
        self.refused += 1;
        let now = Instant::now();
        if now >= self.next_at {
            tracing::warn!(
                refused = self.refused,
                last_peer = %peer,
                reason = why,
                "connections refused over a connection cap"
            );
            self.refused = 0;
            self.next_at = now + REFUSAL_LOG_EVERY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_counted_by_ipv4_address_or_ipv6_slash_64() {
        let key = |s: &str| peer_key(s.parse().unwrap());
        assert_eq!(key("192.0.2.7"), key("::ffff:192.0.2.7"));
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::2"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
    }

    #[test]
    fn a_peer_holds_at_most_its_cap_and_gets_slots_back() {
        let peers = Arc::new(PeerSlots::new(2));
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = peers.take(a).unwrap();
        let _second = peers.take(a).unwrap();
        assert!(peers.take(a).is_none(), "the third is over the cap");
        assert!(peers.take(b).is_some(), "another peer is not affected");
        drop(first);
        assert_eq!(peers.open(a), 1);
        assert!(peers.take(a).is_some());
    }
}
