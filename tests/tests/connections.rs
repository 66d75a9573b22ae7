//! Connection limits over loopback: slow bodies, idle connections and greedy peers cannot take
//! the API away from everyone else. Several peers are played from 127.0.0.0/8 addresses.

use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use custody_e2e::{connect_from, read_until_closed, try_raw_request_from, Custody, Resp};

const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const OTHER_PEER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Opens a connection from `from` that announces a 64 KiB body and never sends it.
fn slow_body(from: Ipv4Addr, addr: &str, extra_headers: &str) -> TcpStream {
    let mut s = connect_from(from, addr).expect("connects");
    s.write_all(
        format!(
            "POST /v1/wallets HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: 65536\r\n{extra_headers}\r\n"
        )
        .as_bytes(),
    )
    .expect("headers sent");
    s
}

fn health_from(from: Ipv4Addr, addr: &str) -> Option<Resp> {
    try_raw_request_from(from, addr, "GET", "/v1/health", &[], b"")
}

fn assert_busy(r: &Resp) {
    assert_eq!(
        (r.status, r.code().as_str()),
        (503, "MAINTENANCE"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry >= 1);
    assert!(r.json()["trace_id"].is_string());
}

#[test]
fn slow_bodies_from_one_peer_leave_the_api_to_everyone_else() {
    let mut c = Custody::init();
    // Fewer slots than the default keep the test light; the per-peer cap and the body deadline
    // are the defaults.
    c.edit_config("connections_max = 1024", "connections_max = 200");
    c.start();

    let started = Instant::now();
    let mut slow: Vec<TcpStream> = (0..210).map(|_| slow_body(ATTACKER, &c.addr, "")).collect();
    let mut beyond_every_cap = slow.split_off(200);

    let r = health_from(OTHER_PEER, &c.addr).expect("another peer is still served");
    assert_eq!(r.status, 200);

    // The greedy peer is told why, rather than dropped.
    assert_busy(&health_from(ATTACKER, &c.addr).expect("an answer, not a dropped connection"));
    for s in &mut beyond_every_cap {
        assert_busy(&read_until_closed(s, Duration::from_secs(5)).expect("an answer"));
    }

    // The body that never comes is given up after the default deadline, with a 408.
    let r = read_until_closed(&mut slow[0], Duration::from_secs(30)).expect("an answer");
    assert_eq!(
        (r.status, r.code().as_str()),
        (408, "REQUEST_TIMEOUT"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.header("connection"), Some("close"));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(25),
        "{waited:?}"
    );
    // Every slot of the greedy peer freed itself the same way: it is served again.
    c.wait_for(10, "the peer's slots to free", || {
        health_from(ATTACKER, &c.addr).filter(|r| r.status == 200)
    });
}

#[test]
fn deadlines_and_the_peer_cap_follow_the_config() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    for (from, to) in [
        (
            "connections_per_peer_max = 128",
            "connections_per_peer_max = 3",
        ),
        (
            "body_read_timeout_ms = 10000",
            "body_read_timeout_ms = 1500",
        ),
        ("idle_timeout_ms = 10000", "idle_timeout_ms = 1000"),
    ] {
        c.edit_config(from, to);
    }
    c.start();

    // A body that stops half-way: 408 once the deadline passed; a known key sees its window.
    let started = Instant::now();
    let mut s = slow_body(
        Ipv4Addr::new(127, 0, 0, 4),
        &c.addr,
        &format!("X-Service-Key: {}\r\n", cred.api_key),
    );
    s.write_all(b"{\"external_user_id\":").unwrap();
    let r = read_until_closed(&mut s, Duration::from_secs(10)).expect("an answer");
    assert_eq!((r.status, r.code().as_str()), (408, "REQUEST_TIMEOUT"));
    assert_eq!(r.header("x-ratelimit-limit"), Some("600"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("600"));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1400) && waited < Duration::from_secs(6),
        "{waited:?}"
    );

    // A GET that announces a body has the same deadline: only a request without a body (every
    // ordinary GET) skips the timer.
    let mut s = connect_from(Ipv4Addr::new(127, 0, 0, 7), &c.addr).unwrap();
    s.write_all(
        format!(
            "GET /v1/wallets/00000000-0000-0000-0000-000000000000 HTTP/1.1\r\nHost: {}\r\n\
             Content-Length: 64\r\n\r\n{{",
            c.addr
        )
        .as_bytes(),
    )
    .unwrap();
    let r = read_until_closed(&mut s, Duration::from_secs(10)).expect("an answer");
    assert_eq!((r.status, r.code().as_str()), (408, "REQUEST_TIMEOUT"));

    // An idle keep-alive connection is closed after idle_timeout_ms: the one response comes
    // at once, the close about a second later.
    let mut s = connect_from(Ipv4Addr::new(127, 0, 0, 5), &c.addr).unwrap();
    let asked = Instant::now();
    s.write_all(format!("GET /v1/health HTTP/1.1\r\nHost: {}\r\n\r\n", c.addr).as_bytes())
        .unwrap();
    let r = read_until_closed(&mut s, Duration::from_secs(10)).expect("one whole response");
    assert_eq!(r.status, 200);
    let idle = asked.elapsed();
    assert!(
        idle >= Duration::from_millis(800) && idle < Duration::from_secs(5),
        "closed after {idle:?}"
    );

    // Three connections of one peer are allowed, the fourth is refused with a 503.
    let peer = Ipv4Addr::new(127, 0, 0, 6);
    let held: Vec<TcpStream> = (0..3).map(|_| slow_body(peer, &c.addr, "")).collect();
    std::thread::sleep(Duration::from_millis(200));
    assert_busy(&health_from(peer, &c.addr).expect("an answer"));
    assert_eq!(health_from(OTHER_PEER, &c.addr).unwrap().status, 200);
    drop(held);
    c.wait_for(5, "the peer's slots to free", || {
        health_from(peer, &c.addr).filter(|r| r.status == 200)
    });
}
