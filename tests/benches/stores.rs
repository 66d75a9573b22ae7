#![allow(clippy::float_arithmetic)] // rates are reported as decimals
//! Benchmark (not a test): the same signed requests against the embedded SQLite store and the
//! shared PostgreSQL store, side by side, through HTTP against the real release binary, at 1,
//! 16 and 64 concurrent clients on keep-alive connections:
//! - transfers: `POST /v1/internal-transfers` of 1 unit, each with its own nonce and
//!   idempotency key (a nonce write, then an idempotent ledger transfer), all from one sender to
//!   one recipient (every transfer updates the same two balances: the worst case for
//!   PostgreSQL's SERIALIZABLE transactions, which re-run the loser of each conflict);
//! - transfers from 16 senders: the same, client `t` sending from sender `t % 16`;
//! - signed reads: `GET /v1/wallets/{id}/balances` (a nonce write, then a read).
//!
//! PostgreSQL is the local server (`CUSTODY_TEST_DATABASE_URL`, else 127.0.0.1:5432), each
//! point in a fresh schema. Run: `cargo bench -p custody-e2e --bench stores`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use custody_e2e::{canonical, fresh_nonce, now_s, sign, Cred, Custody};
use custody_store_postgres::testing::TestSchema;
use serde_json::json;

const SECONDS_PER_POINT: u64 = 4;

fn release_binary() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = std::process::Command::new(cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "custody-cli",
            "--bin",
            "custody",
        ])
        .current_dir(&root)
        .status()
        .unwrap()
        .success();
    assert!(ok, "release build failed");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    target.join("release").join("custody")
}

/// One persistent HTTP/1.1 connection, so a request costs the request, not a handshake.
struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str) -> Conn {
        let writer = TcpStream::connect(addr).unwrap();
        writer.set_nodelay(true).unwrap();
        let reader = BufReader::new(writer.try_clone().unwrap());
        Conn { writer, reader }
    }

    /// Sends a signed request and checks its status.
    fn send(&mut self, cred: &Cred, method: &str, path: &str, body: &[u8], key: &str) {
        let (ts, nonce) = (now_s().to_string(), fresh_nonce());
        let sig = sign(
            &cred.secret,
            &canonical(method, path, &ts, &nonce, key, body),
        );
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nX-Service-Key: {}\r\nX-Service-Timestamp: {ts}\r\n\
             X-Service-Nonce: {nonce}\r\nX-Service-Signature: {sig}\r\n",
            body.len(),
            cred.api_key
        );
        if !key.is_empty() {
            head.push_str(&format!("Idempotency-Key: {key}\r\n"));
        }
        head.push_str("\r\n");
        self.writer.write_all(head.as_bytes()).unwrap();
        self.writer.write_all(body).unwrap();
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).unwrap();
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut answer = vec![0u8; length];
        self.reader.read_exact(&mut answer).unwrap();
        assert!(
            status == 200 || status == 201,
            "{status}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Work {
    Transfers,
    SpreadTransfers,
    SignedReads,
}

const SENDERS: usize = 16;

/// Requests per second of `work` from `clients` threads on a fresh service over `database`
/// (`None`: the data dir's SQLite file).
fn run(database: Option<&str>, work: Work, clients: usize) -> f64 {
    let env: Vec<(&str, &str)> = database
        .map(|url| vec![("CUSTODY_DATABASE_URL", url)])
        .unwrap_or_default();
    let mut c = Custody::init_with(&["--insecure-dev-seed"], &env);
    // Every client thread connects from the same address: lift the per-peer cap.
    c.edit_config(
        "connections_per_peer_max = 128",
        "connections_per_peer_max = 1024",
    );
    let cred = c.credential("bench", &["--rate-limit", "100000000"]);
    c.start();
    let client = c.client(&cred);
    let alice = client.wallet("alice", "BSC");
    client.wallet("bob", "BSC");
    c.adjust(
        "bench",
        "alice",
        "BSC",
        "USDT",
        true,
        "1000000000000000000000000000000",
    );
    if work == Work::SpreadTransfers {
        for k in 0..SENDERS {
            client.wallet(&format!("sender-{k}"), "BSC");
            client.wallet(&format!("recipient-{k}"), "BSC");
            c.adjust(
                "bench",
                &format!("sender-{k}"),
                "BSC",
                "USDT",
                true,
                "1000000000000000000000000000000",
            );
        }
    }
    let balances = format!("/v1/wallets/{}/balances", alice["id"].as_str().unwrap());
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(SECONDS_PER_POINT);
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|t| {
            let (cred, addr, done) = (cred.clone(), c.addr.clone(), Arc::clone(&done));
            let balances = balances.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let (from, to) = match work {
                    Work::SpreadTransfers => (
                        format!("sender-{}", t % SENDERS),
                        format!("recipient-{}", t % SENDERS),
                    ),
                    _ => ("alice".to_owned(), "bob".to_owned()),
                };
                let body = serde_json::to_vec(&json!({
                    "sender_external_user_id": from, "recipient_external_user_id": to,
                    "asset": "USDT", "network": "BSC", "amount_units": "1"
                }))
                .unwrap();
                let mut i = 0u64;
                while Instant::now() < deadline {
                    match work {
                        Work::Transfers | Work::SpreadTransfers => conn.send(
                            &cred,
                            "POST",
                            "/v1/internal-transfers",
                            &body,
                            &format!("bench-{t:04}-{i:08}"),
                        ),
                        Work::SignedReads => conn.send(&cred, "GET", &balances, b"", ""),
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let rate = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    c.stop();
    if work != Work::SignedReads {
        let (ok, _, err) = c.cli(&["ledger", "reconcile"]);
        assert!(ok, "{err}");
    }
    rate
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    std::env::set_var("CUSTODY_BIN", release_binary());
    println!("| requests | clients | SQLite | PostgreSQL | PostgreSQL / SQLite |");
    println!("|---|---:|---:|---:|---:|");
    for (work, name) in [
        (Work::Transfers, "transfers, one sender"),
        (Work::SpreadTransfers, "transfers, 16 senders"),
        (Work::SignedReads, "signed reads"),
    ] {
        for clients in [1usize, 16, 64] {
            if work == Work::SpreadTransfers && clients == 1 {
                continue;
            }
            let sqlite = run(None, work, clients);
            let schema = TestSchema::new();
            let postgres = run(Some(&schema.url()), work, clients);
            drop(schema);
            println!(
                "| {name} | {clients} | {sqlite:.0} /s | {postgres:.0} /s | {:.2}× |",
                postgres / sqlite
            );
        }
    }
}
