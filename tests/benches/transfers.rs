#![allow(clippy::float_arithmetic)] // rates and ratios are reported as decimals
//! Benchmark (not a test): signed internal transfers per second through HTTP against the real
//! release binary, at 1, 16 and 64 concurrent clients, with group commit on (`batch_max =
//! 256`) and forced to one command per transaction (`batch_max = 1`), plus the disk's fsync
//! rate measured in the same run. Run: `cargo bench -p custody-e2e --bench transfers`.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

use custody_e2e::{canonical, fresh_nonce, now_s, sign, Cred, Custody};
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

/// fsync calls per second on the filesystem of `dir` (4 KiB write + fsync each).
fn fsync_rate(dir: &std::path::Path) -> f64 {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = [7u8; 4096];
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < Duration::from_secs(2) {
        f.write_all(&block).unwrap();
        f.sync_all().unwrap();
        n += 1;
    }
    let _ = std::fs::remove_file(path);
    f64::from(n) / start.elapsed().as_secs_f64()
}

/// One persistent HTTP/1.1 connection (keep-alive), so the clients' cost per request is the
/// request itself, not a TCP handshake: on 2 shared cores the client competes with the server.
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

    /// Sends a signed POST and returns the status.
    fn post(&mut self, cred: &Cred, path: &str, body: &[u8], key: &str) -> u16 {
        let (ts, nonce) = (now_s().to_string(), fresh_nonce());
        let sig = sign(
            &cred.secret,
            &canonical("POST", path, &ts, &nonce, key, body),
        );
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nX-Service-Key: {}\r\nX-Service-Timestamp: {ts}\r\n\
             X-Service-Nonce: {nonce}\r\nX-Service-Signature: {sig}\r\nIdempotency-Key: {key}\r\n\r\n",
            body.len(),
            cred.api_key
        );
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
        let mut body = vec![0u8; length];
        self.reader.read_exact(&mut body).unwrap();
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        status
    }
}

fn run(batch_max: u32, clients: usize) -> f64 {
    let mut c = Custody::init();
    c.edit_config("batch_max = 256", &format!("batch_max = {batch_max}"));
    // Every client thread connects from the same address: lift the per-peer cap.
    c.edit_config(
        "connections_per_peer_max = 128",
        "connections_per_peer_max = 1024",
    );
    let cred = c.credential("bench", &["--rate-limit", "100000000"]);
    c.start();
    let client = c.client(&cred);
    client.wallet("alice", "BSC");
    client.wallet("bob", "BSC");
    c.adjust(
        "bench",
        "alice",
        "BSC",
        "USDT",
        true,
        "1000000000000000000000000000000",
    );
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(SECONDS_PER_POINT);
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|t| {
            let (cred, addr, done) = (cred.clone(), c.addr.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let body = serde_json::to_vec(&json!({
                    "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
                    "asset": "USDT", "network": "BSC", "amount_units": "1"
                }))
                .unwrap();
                let mut i = 0u64;
                while Instant::now() < deadline {
                    conn.post(
                        &cred,
                        "/v1/internal-transfers",
                        &body,
                        &format!("bench-{t:04}-{i:08}"),
                    );
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
    let (ok, _, err) = c.cli(&["ledger", "reconcile"]);
    assert!(ok, "{err}");
    rate
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    std::env::set_var("CUSTODY_BIN", release_binary());
    let probe_dir = tempfile::tempdir().unwrap();
    let fsyncs = fsync_rate(probe_dir.path());
    println!("fsync rate of the disk: {fsyncs:.0} per second (4 KiB write + fsync)");
    println!();
    println!(
        "| clients | group commit (batch_max 256) | one command per commit (batch_max 1) | ratio |"
    );
    println!("|---:|---:|---:|---:|");
    for clients in [1usize, 16, 64] {
        let grouped = run(256, clients);
        let single = run(1, clients);
        println!(
            "| {clients} | {grouped:.0} /s | {single:.0} /s | {:.1}× |",
            grouped / single
        );
    }
}
