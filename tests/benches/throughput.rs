#![allow(clippy::float_arithmetic)] // rates, percentiles and ratios are reported as decimals
//! Benchmark (not a test): server CPU per request of signed requests against the release
//! `custody serve`, beside a bare hyper server answering the same signed requests and a naive
//! PostgreSQL row-locking transfer script driven by pgbench, all in one run on one machine.
//!
//! Run: `cargo bench -p custody-e2e --bench throughput`. Knobs (environment):
//! - `THROUGHPUT_SECONDS` (default 4): load time of each row;
//! - `THROUGHPUT_CLIENTS` (default `1,16,64`): connection counts;
//! - `THROUGHPUT_REFERENCE=0`: skip the bare hyper server and pgbench;
//! - `THROUGHPUT_LOG=info`: the server logs its line per request (to this process's stderr);
//! - `THROUGHPUT_PERF=DIR`: record each custody row with `perf record -g` into DIR;
//! - `THROUGHPUT_PERF_DWARF=1`: unwind with DWARF instead (a release build without frame
//!   pointers needs it for call stacks; build with `CARGO_PROFILE_RELEASE_DEBUG=1`);
//! - `CUSTODY_BIN`: a custody binary to measure instead of building the work tree's.
//!
//! For each route and connection count a fresh data dir is served by the release binary and
//! driven by an in-process signing client (hyper, HTTP/1.1 keep-alive, one connection per
//! client, each request with its own timestamp, nonce and signature). Server CPU is the
//! utime+stime of the server process (`/proc/<pid>/stat`) over the load, divided by the
//! requests it answered; storage bytes are the `write_bytes` of `/proc/<pid>/io` over the load,
//! divided likewise (steadier than CPU on a shared machine). The client runs on one thread of
//! the same 2 cores.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use custody_e2e::{now_s, Cred, Custody};
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use sha2::{Digest, Sha256};

/// The release binary, built here; `CUSTODY_BIN` names another one (a build kept for a before
/// and after comparison).
fn release_binary() -> std::path::PathBuf {
    if let Ok(bin) = std::env::var("CUSTODY_BIN") {
        return bin.into();
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = Command::new(cargo)
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

/// `perf record` options: frame-pointer stacks at 2 kHz, or DWARF stacks at a rate perf can
/// write out without losing samples.
fn perf_sampling() -> Vec<&'static str> {
    if env_or("THROUGHPUT_PERF_DWARF", "0") == "1" {
        vec!["-F", "700", "--call-graph", "dwarf,16384"]
    } else {
        vec!["-F", "2000", "-g"]
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Clock ticks per second of `/proc/<pid>/stat` times.
fn clock_ticks() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; the fields after it are fixed: utime is the 14th
    // field of the line, stime the 15th.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Bytes `pid` caused to be written to storage (`write_bytes` of `/proc/<pid>/io`): the WAL
/// frames, checkpoints and journals of the store. Unlike CPU time it barely moves with the
/// machine's load, so it compares builds across noisy runs.
fn storage_write_bytes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap()
}

/// One kind of request the load sends.
#[derive(Clone)]
struct RouteLoad {
    method: &'static str,
    path: String,
    body: Bytes,
    /// SHA-256 of the body, hex (element 6 of the canonical string).
    body_hex: String,
    idempotent: bool,
    expect: u16,
}

impl RouteLoad {
    fn new(method: &'static str, path: String, body: Vec<u8>, expect: u16) -> Self {
        RouteLoad {
            method,
            body_hex: hex::encode(Sha256::digest(&body)),
            path,
            body: Bytes::from(body),
            idempotent: method == "POST",
            expect,
        }
    }
}

#[derive(Default)]
struct Stats {
    answered: u64,
    unexpected: u64,
    latencies_us: Vec<u32>,
    seconds: f64,
    cpu_us_per_request: Option<f64>,
    write_bytes_per_request: Option<f64>,
}

impl Stats {
    fn rate(&self) -> f64 {
        self.answered as f64 / self.seconds
    }
    /// The latency (ms) at `permille` thousandths of the sorted latencies.
    fn percentile_ms(&self, permille: usize) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        let mut sorted = self.latencies_us.clone();
        sorted.sort_unstable();
        let i = (sorted.len() - 1) * permille / 1000;
        f64::from(sorted[i]) / 1000.0
    }
}

fn signed_request(cred: &Cred, load: &RouteLoad, nonce: &str, key: &str) -> Request<Full<Bytes>> {
    let ts = now_s().to_string();
    let idem = if load.idempotent { key } else { "" };
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        load.method, load.path, ts, nonce, idem, load.body_hex
    );
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(cred.secret.as_bytes()).unwrap();
    mac.update(canonical.as_bytes());
    let signature = hex::encode(mac.finalize().into_bytes());
    let mut builder = Request::builder()
        .method(load.method)
        .uri(&load.path)
        .header("host", "bench")
        .header("x-service-key", &cred.api_key)
        .header("x-service-timestamp", ts)
        .header("x-service-nonce", nonce)
        .header("x-service-signature", signature);
    if load.idempotent {
        builder = builder
            .header("idempotency-key", key)
            .header("content-type", "application/json");
    }
    builder.body(Full::new(load.body.clone())).unwrap()
}

/// Drives `load` over `clients` keep-alive connections for `seconds`; `pid` is the server
/// whose CPU time is read around the load.
fn drive(
    addr: &str,
    cred: &Cred,
    load: &RouteLoad,
    clients: usize,
    seconds: f64,
    pid: u32,
    perf: Option<&str>,
) -> Stats {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = format!("{:08x}", rand_u32());
    rt.block_on(async {
        let mut senders = Vec::with_capacity(clients);
        for _ in 0..clients {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            senders.push(sender);
        }
        let recorder = perf.map(|out| {
            Command::new("perf")
                .args(["record", "-q", "-o", out])
                .args(perf_sampling())
                .arg("-p")
                .arg(pid.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        });
        if recorder.is_some() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let answered = Arc::new(AtomicU64::new(0));
        let ticks_before = cpu_ticks(pid);
        let written_before = storage_write_bytes(pid);
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(seconds);
        let tasks: Vec<_> = senders
            .into_iter()
            .enumerate()
            .map(|(c, mut sender)| {
                let (cred, load, run) = (cred.clone(), load.clone(), run.clone());
                let answered = Arc::clone(&answered);
                tokio::spawn(async move {
                    let mut latencies = Vec::with_capacity(65_536);
                    let mut unexpected = 0u64;
                    let mut i = 0u64;
                    while Instant::now() < deadline {
                        let nonce = format!("bench-{run}-{c:04}-{i:012}");
                        let req = signed_request(&cred, &load, &nonce, &nonce);
                        let t0 = Instant::now();
                        let resp: Response<_> = sender.send_request(req).await.unwrap();
                        let status = resp.status().as_u16();
                        let body = resp.into_body().collect().await.unwrap().to_bytes();
                        let us = t0.elapsed().as_micros();
                        latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
                        answered.fetch_add(1, Ordering::Relaxed);
                        if status != load.expect {
                            if unexpected == 0 {
                                eprintln!(
                                    "{} {}: {status} {}",
                                    load.method,
                                    load.path,
                                    String::from_utf8_lossy(&body)
                                );
                            }
                            unexpected += 1;
                        }
                        i += 1;
                    }
                    (latencies, unexpected)
                })
            })
            .collect();
        let mut stats = Stats::default();
        for t in tasks {
            let (latencies, unexpected) = t.await.unwrap();
            stats.latencies_us.extend(latencies);
            stats.unexpected += unexpected;
        }
        stats.seconds = started.elapsed().as_secs_f64();
        let ticks = cpu_ticks(pid) - ticks_before;
        stats.answered = answered.load(Ordering::Relaxed);
        stats.cpu_us_per_request =
            Some(ticks as f64 / clock_ticks() * 1e6 / stats.answered.max(1) as f64);
        stats.write_bytes_per_request =
            Some((storage_write_bytes(pid) - written_before) as f64 / stats.answered.max(1) as f64);
        if let Some(mut r) = recorder {
            let _ = Command::new("kill")
                .args(["-INT", &r.id().to_string()])
                .status();
            let _ = r.wait();
        }
        stats
    })
}

fn rand_u32() -> u32 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// A fresh data dir served by the release binary, with alice funded and bob's wallet made.
struct Served {
    custody: Custody,
    cred: Cred,
    alice_wallet: String,
}

fn serve_fresh() -> Served {
    // The server's log level (the e2e harness default is `warn`: no line per request).
    let log = env_or("THROUGHPUT_LOG", "warn");
    let mut c = Custody::init_with(&["--insecure-dev-seed"], &[("CUSTODY_LOG", log.as_str())]);
    // Every client connects from the same address: lift the per-peer cap.
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
    Served {
        alice_wallet: alice["id"].as_str().unwrap().to_owned(),
        custody: c,
        cred,
    }
}

fn transfer_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
        "asset": "USDT", "network": "BSC", "amount_units": "1"
    }))
    .unwrap()
}

/// The bare reference: hyper alone, reading each request's body and answering a small JSON
/// object with the headers custody sends. It checks nothing.
fn bare_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let _ = req.into_body().collect().await;
                    let mut resp = Response::new(Full::new(Bytes::from_static(
                        br#"{"id":"0b5e1a52-5f5e-4a43-9b9e-8f3a4a3f0d11","external_user_id":"alice","network":"BSC","address":"0x0000000000000000000000000000000000000000","created_at":"2026-01-01T00:00:00.000Z"}"#,
                    )));
                    let h = resp.headers_mut();
                    h.insert("content-type", "application/json".parse().unwrap());
                    h.insert("cache-control", "no-store".parse().unwrap());
                    h.insert("x-content-type-options", "nosniff".parse().unwrap());
                    h.insert("x-trace-id", "0b5e1a52-5f5e-4a43-9b9e-8f3a4a3f0d11".parse().unwrap());
                    h.insert("x-ratelimit-limit", "100000000".parse().unwrap());
                    h.insert("x-ratelimit-remaining", "99999999".parse().unwrap());
                    Ok::<_, std::convert::Infallible>(resp)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

struct Bare {
    child: Child,
    addr: String,
}

impl Bare {
    fn start() -> Bare {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--bare-server")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Bare {
            child,
            addr: line.trim().to_owned(),
        }
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// pgbench against a database of its own: each transaction locks the two accounts with
/// `SELECT ... FOR UPDATE`, moves one unit and inserts a transfer row (synchronous commit).
struct Pg {
    db: String,
    script: tempfile::NamedTempFile,
}

const PG: [&str; 4] = ["-h", "127.0.0.1", "-U", "postgres"];

impl Pg {
    fn create() -> Option<Pg> {
        let db = format!("custody_bench_{}", std::process::id());
        let psql = |db: &str, sql: &str| {
            Command::new("psql")
                .args(PG)
                .args(["-q", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql])
                .stdout(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        if !psql("postgres", &format!("CREATE DATABASE {db}")) {
            eprintln!("PostgreSQL at 127.0.0.1:5432 is not reachable: pgbench rows skipped");
            return None;
        }
        assert!(psql(
            &db,
            "CREATE TABLE accounts (id int PRIMARY KEY, balance numeric NOT NULL);\
             CREATE TABLE transfers (id bigserial PRIMARY KEY, src int NOT NULL, dst int NOT NULL,\
               amount numeric NOT NULL, created_at timestamptz NOT NULL DEFAULT now());\
             INSERT INTO accounts VALUES (1, 1000000000000000000000000000000), (2, 0);"
        ));
        let mut script = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(
            &mut script,
            b"BEGIN;\n\
              SELECT balance FROM accounts WHERE id = 1 FOR UPDATE;\n\
              SELECT balance FROM accounts WHERE id = 2 FOR UPDATE;\n\
              UPDATE accounts SET balance = balance - 1 WHERE id = 1;\n\
              UPDATE accounts SET balance = balance + 1 WHERE id = 2;\n\
              INSERT INTO transfers (src, dst, amount) VALUES (1, 2, 1);\n\
              COMMIT;\n",
        )
        .unwrap();
        Some(Pg { db, script })
    }

    /// Transactions per second and mean latency (ms) at `clients`.
    fn run(&self, clients: usize, seconds: f64) -> (f64, f64) {
        let out = Command::new("pgbench")
            .args(PG)
            .args(["-n", "-M", "prepared", "-j", "2", "-c"])
            .arg(clients.to_string())
            .arg("-T")
            .arg(format!("{}", seconds.ceil()))
            .arg("-f")
            .arg(self.script.path())
            .arg(&self.db)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let find = |prefix: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(prefix))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse::<f64>().ok())
                .unwrap_or_else(|| {
                    panic!(
                        "pgbench said: {text} {}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                })
        };
        (find("tps = "), find("latency average = "))
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(PG)
            .args(["-q", "-d", "postgres", "-c"])
            .arg(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db))
            .stdout(Stdio::null())
            .status();
    }
}

fn row(what: &str, clients: usize, s: &Stats) {
    println!(
        "| {what} | {clients} | {:.0} | {:.2} | {:.2} | {} | {} | {} |",
        s.rate(),
        s.percentile_ms(500),
        s.percentile_ms(990),
        s.cpu_us_per_request
            .map_or("—".to_owned(), |c| format!("{c:.1}")),
        s.write_bytes_per_request
            .map_or("—".to_owned(), |b| format!("{b:.0}")),
        s.unexpected
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if args.iter().any(|a| a == "--bare-server") {
        bare_server();
        return;
    }
    std::env::set_var("CUSTODY_BIN", release_binary());
    let seconds: f64 = env_or("THROUGHPUT_SECONDS", "4").parse().unwrap();
    let clients: Vec<usize> = env_or("THROUGHPUT_CLIENTS", "1,16,64")
        .split(',')
        .map(|c| c.trim().parse().unwrap())
        .collect();
    let reference = env_or("THROUGHPUT_REFERENCE", "1") != "0";
    let perf = std::env::var("THROUGHPUT_PERF").ok();
    let bare = reference.then(Bare::start);
    let pg = if reference { Pg::create() } else { None };

    println!("| what | clients | requests/s | p50 ms | p99 ms | server CPU µs/request | storage bytes written/request | unexpected answers |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for &n in &clients {
        let served = serve_fresh();
        let pid = served.custody.pid().unwrap();
        let addr = served.custody.addr.clone();
        let wallet = format!("/v1/wallets/{}", served.alice_wallet);
        let loads = [
            (
                "custody POST /v1/internal-transfers",
                RouteLoad::new(
                    "POST",
                    "/v1/internal-transfers".into(),
                    transfer_body(),
                    201,
                ),
            ),
            (
                "custody GET /v1/wallets/{id}",
                RouteLoad::new("GET", wallet.clone(), Vec::new(), 200),
            ),
            (
                "custody GET /v1/wallets/{id}/balances",
                RouteLoad::new("GET", format!("{wallet}/balances"), Vec::new(), 200),
            ),
        ];
        let mut custody_rates = Vec::new();
        for (i, (what, load)) in loads.iter().enumerate() {
            let out = perf
                .as_ref()
                .map(|dir| format!("{dir}/custody-{i}-{n}.data"));
            let s = drive(&addr, &served.cred, load, n, seconds, pid, out.as_deref());
            row(what, n, &s);
            custody_rates.push(s.rate());
        }
        let (ok, _, err) = served.custody.cli(&["ledger", "reconcile"]);
        assert!(ok, "{err}");
        drop(served);
        if let Some(bare) = &bare {
            for (what, load) in [
                (
                    "bare hyper POST (same signed transfer)",
                    RouteLoad::new(
                        "POST",
                        "/v1/internal-transfers".into(),
                        transfer_body(),
                        200,
                    ),
                ),
                (
                    "bare hyper GET (same signed read)",
                    RouteLoad::new("GET", wallet.clone(), Vec::new(), 200),
                ),
            ] {
                let cred = Cred {
                    api_key: "bare".into(),
                    secret: "bare-secret".into(),
                    tenant: "bare".into(),
                    json: json!({}),
                };
                let s = drive(&bare.addr, &cred, &load, n, seconds, bare.child.id(), None);
                row(what, n, &s);
                if load.method == "GET" {
                    ratios.push((
                        n,
                        "GET /v1/wallets/{id} ÷ bare hyper GET",
                        custody_rates[1] / s.rate(),
                    ));
                }
            }
        }
        if let Some(pg) = &pg {
            let (tps, latency_ms) = pg.run(n, seconds);
            println!(
                "| pgbench naive row-locking transfer | {n} | {tps:.0} | {latency_ms:.2} (mean) | — | — | — | — |"
            );
            ratios.push((n, "transfers ÷ pgbench transfers", custody_rates[0] / tps));
        }
    }
    if !ratios.is_empty() {
        println!();
        println!("| clients | ratio | value |");
        println!("|---:|---|---:|");
        for (n, what, r) in ratios {
            println!("| {n} | {what} | {r:.2} |");
        }
    }
}
