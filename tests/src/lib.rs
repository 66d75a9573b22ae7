//! Harness for end-to-end tests: a data dir, the real `custody` binary, and a client that
//! signs requests with its own implementation of the contract's canonical string (it must not
//! share code with the server, or a shared bug would pass).

pub mod anvil;
pub mod dex;
pub mod profile;
pub mod receiver;
pub mod rpc_proxy;
pub mod tron_api;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Builds the binary once per test process (a no-op when it is up to date) and returns its path.
pub fn custody_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("CUSTODY_BIN") {
            return PathBuf::from(p);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root")
            .to_owned();
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "custody-cli", "--bin", "custody"])
            .current_dir(&root)
            .status()
            .expect("cargo build runs");
        assert!(status.success(), "building the custody binary failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"));
        target.join("debug").join("custody")
    })
    .clone()
}

pub fn now_s() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// RFC 6238 code at unix time `t`, written here independently of the server.
pub fn totp(secret_b32: &str, t: i64) -> String {
    let key = data_encoding::BASE32_NOPAD
        .decode(secret_b32.as_bytes())
        .unwrap();
    let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(&key).unwrap();
    mac.update(&(t / 30).to_be_bytes());
    let h = mac.finalize().into_bytes();
    let o = usize::from(h[19] & 0xf);
    let n = (u32::from(h[o] & 0x7f) << 24)
        | (u32::from(h[o + 1]) << 16)
        | (u32::from(h[o + 2]) << 8)
        | u32::from(h[o + 3]);
    format!("{:06}", n % 1_000_000)
}

/// A fresh data dir with the service initialized in it.
pub struct Custody {
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    pub addr: String,
    extra_env: Vec<(String, String)>,
}

/// A credential as `credentials create` printed it.
#[derive(Clone, Debug)]
pub struct Cred {
    pub api_key: String,
    pub secret: String,
    pub tenant: String,
    pub json: Value,
}

impl Custody {
    pub fn init() -> Self {
        Self::init_with(&["--insecure-dev-seed"], &[])
    }

    pub fn init_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::init_in(tempfile::tempdir().expect("temp dir"), args, env)
    }

    /// Like [`Custody::init_with`], with the data dir under `dir` (a small file system, to fill).
    pub fn init_in(dir: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Self {
        let c = Custody {
            dir,
            child: None,
            addr: String::new(),
            extra_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let mut all = vec!["init"];
        all.extend_from_slice(args);
        c.cli_ok(&all);
        c
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A second instance of the same service: a copy of this data dir (same seed and config,
    /// so the same database when it is a shared PostgreSQL one), not started.
    pub fn sibling(&self) -> Custody {
        let dir = tempfile::tempdir().expect("temp dir");
        let status = Command::new("cp")
            .arg("-a")
            .arg(self.data_dir())
            .arg(dir.path().join("data"))
            .status()
            .expect("cp runs");
        assert!(status.success(), "copying the data dir failed");
        Custody {
            dir,
            child: None,
            addr: String::new(),
            extra_env: self.extra_env.clone(),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(custody_bin());
        cmd.arg("--data-dir").arg(self.data_dir());
        cmd.env_remove("CUSTODY_DATA_DIR")
            .env_remove("CUSTODY_PASSPHRASE")
            .env("CUSTODY_LOG", "warn");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs a CLI command; returns (exit success, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let out = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("custody runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs a CLI command that must succeed and print one JSON object.
    pub fn cli_ok(&self, args: &[&str]) -> Value {
        let (ok, stdout, stderr) = self.cli(args);
        assert!(ok, "custody {args:?} failed: {stderr}");
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("stdout of {args:?} is not JSON ({e}): {stdout}"))
    }

    /// The address of `network`'s hot wallet, as `custody treasury show` prints it.
    pub fn hot_wallet(&self, network: &str) -> String {
        let shown = self.cli_ok(&["treasury", "show"]);
        shown["data"]
            .as_array()
            .expect("treasury rows")
            .iter()
            .find(|r| r["network"] == network)
            .unwrap_or_else(|| panic!("no {network} hot wallet in {shown}"))["address"]
            .as_str()
            .expect("an address")
            .to_owned()
    }

    pub fn credential(&self, tenant: &str, extra: &[&str]) -> Cred {
        let mut args = vec!["credentials", "create", "--tenant", tenant];
        args.extend_from_slice(extra);
        let json = self.cli_ok(&args);
        Cred {
            api_key: json["api_key"].as_str().unwrap().into(),
            secret: json["hmac_secret"].as_str().unwrap().into(),
            tenant: tenant.into(),
            json,
        }
    }

    /// Starts `custody serve` on a free loopback port and waits until it answers.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let mut child = self
            .command()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("custody serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("serve prints its address");
        let v: Value = serde_json::from_str(line.trim())
            .unwrap_or_else(|e| panic!("serve printed {line:?}: {e}"));
        let url = v["listening"].as_str().expect("listening url");
        self.addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .to_owned();
        self.child = Some(child);
        let health = raw_request(&self.addr, "GET", "/v1/health", &[], b"");
        assert_eq!(health.status, 200);
    }

    /// The process id of the running `custody serve` (for its CPU time in `/proc/<pid>/stat`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn client(&self, cred: &Cred) -> Client {
        Client {
            addr: self.addr.clone(),
            cred: cred.clone(),
        }
    }
}

impl Drop for Custody {
    fn drop(&mut self) {
        self.kill9();
    }
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The error code of an error body.
    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or("").to_owned()
    }
}

/// One HTTP/1.1 request on a new connection; reads the whole response.
pub fn raw_request(
    addr: &str,
    method: &str,
    target: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Resp {
    try_raw_request(addr, method, target, headers, body).expect("the server answers")
}

/// Like [`raw_request`], but `None` when the connection fails or no whole response comes back
/// (a server killed mid-request).
pub fn try_raw_request(
    addr: &str,
    method: &str,
    target: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Option<Resp> {
    let stream = TcpStream::connect(addr).ok()?;
    exchange(stream, addr, method, target, headers, body)
}

/// A connection to `addr` from the loopback address `from` (any of 127.0.0.0/8 reaches the
/// server), so one test can speak as several peers.
pub fn connect_from(from: std::net::Ipv4Addr, addr: &str) -> std::io::Result<TcpStream> {
    let target: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&std::net::SocketAddr::from((from, 0)).into())?;
    socket.connect(&target.into())?;
    Ok(socket.into())
}

/// Like [`try_raw_request`], from the loopback address `from`.
pub fn try_raw_request_from(
    from: std::net::Ipv4Addr,
    addr: &str,
    method: &str,
    target: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Option<Resp> {
    let stream = connect_from(from, addr).ok()?;
    exchange(stream, addr, method, target, headers, body)
}

/// Reads until the server closes `stream` (at most `timeout`) and parses what came back.
pub fn read_until_closed(stream: &mut TcpStream, timeout: Duration) -> Option<Resp> {
    stream.set_read_timeout(Some(timeout)).ok()?;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse_response(&raw)
}

/// Sends one request with `Connection: close` on `stream` and reads the whole response.
fn exchange(
    mut stream: TcpStream,
    addr: &str,
    method: &str,
    target: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Option<Resp> {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).ok()?;
    // A server may answer (413) before reading a large body; a failed write is then expected.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Option<Resp> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    let body = raw[split + 4..].to_vec();
    let declared = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n != body.len()) {
        return None;
    }
    Some(Resp {
        status,
        headers,
        body,
    })
}

/// The contract's canonical string, written from interface §5 independently of the server.
pub fn canonical(
    method: &str,
    path: &str,
    ts: &str,
    nonce: &str,
    idem: &str,
    body: &[u8],
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(body);
    let body_hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    [method, path, ts, nonce, idem, &body_hex].join("\n")
}

pub fn sign(secret: &str, canonical: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(canonical.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

static NONCE_SEQ: AtomicU64 = AtomicU64::new(0);

pub fn fresh_nonce() -> String {
    format!(
        "{}-{:08}",
        uuid::Uuid::new_v4().simple(),
        NONCE_SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// How to build one signed request; tests change one field to break it.
#[derive(Clone, Debug)]
pub struct Signed {
    pub method: String,
    /// Path with query, as sent.
    pub target: String,
    pub body: Vec<u8>,
    pub idempotency_key: Option<String>,
    pub timestamp: String,
    pub nonce: String,
    pub extra_headers: Vec<(String, String)>,
}

pub struct Client {
    pub addr: String,
    pub cred: Cred,
}

impl Client {
    pub fn signed(&self, method: &str, target: &str, body: &[u8], idem: Option<&str>) -> Signed {
        Signed {
            method: method.into(),
            target: target.into(),
            body: body.to_vec(),
            idempotency_key: idem.map(String::from),
            timestamp: now_s().to_string(),
            nonce: fresh_nonce(),
            extra_headers: Vec::new(),
        }
    }

    /// Signs `s` with `secret` over `signed_body` (normally `s.body`) and sends it.
    pub fn send_with(
        &self,
        s: &Signed,
        secret: &str,
        signed_body: &[u8],
        signed_path: Option<&str>,
    ) -> Resp {
        let path = signed_path.unwrap_or_else(|| s.target.split('?').next().unwrap());
        let idem = s.idempotency_key.clone().unwrap_or_default();
        let sig = sign(
            secret,
            &canonical(&s.method, path, &s.timestamp, &s.nonce, &idem, signed_body),
        );
        let mut headers = vec![
            ("X-Service-Key", self.cred.api_key.clone()),
            ("X-Service-Timestamp", s.timestamp.clone()),
            ("X-Service-Nonce", s.nonce.clone()),
            ("X-Service-Signature", sig),
        ];
        if let Some(k) = &s.idempotency_key {
            headers.push(("Idempotency-Key", k.clone()));
        }
        let extra: Vec<(&str, String)> = s
            .extra_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        headers.extend(extra);
        raw_request(&self.addr, &s.method, &s.target, &headers, &s.body)
    }

    pub fn send(&self, s: &Signed) -> Resp {
        self.send_with(s, &self.cred.secret, &s.body, None)
    }

    /// Sends `s` signed; `None` if the server went away mid-request.
    pub fn try_send(&self, s: &Signed) -> Option<Resp> {
        let path = s.target.split('?').next().unwrap();
        let idem = s.idempotency_key.clone().unwrap_or_default();
        let sig = sign(
            &self.cred.secret,
            &canonical(&s.method, path, &s.timestamp, &s.nonce, &idem, &s.body),
        );
        let mut headers = vec![
            ("X-Service-Key", self.cred.api_key.clone()),
            ("X-Service-Timestamp", s.timestamp.clone()),
            ("X-Service-Nonce", s.nonce.clone()),
            ("X-Service-Signature", sig),
        ];
        if let Some(k) = &s.idempotency_key {
            headers.push(("Idempotency-Key", k.clone()));
        }
        try_raw_request(&self.addr, &s.method, &s.target, &headers, &s.body)
    }

    pub fn get(&self, target: &str) -> Resp {
        self.send(&self.signed("GET", target, b"", None))
    }

    pub fn post(&self, target: &str, body: &Value, idem: Option<&str>) -> Resp {
        let bytes = serde_json::to_vec(body).unwrap();
        self.send(&self.signed("POST", target, &bytes, idem))
    }
}

/// A fixed mnemonic (a BIP39 test vector) so tests can derive expected addresses independently.
pub const TEST_MNEMONIC: &str =
    "legal winner thank year wave sausage worth useful legal winner thank yellow";

impl Custody {
    /// A data dir whose seed is [`TEST_MNEMONIC`].
    pub fn init_with_test_mnemonic() -> Self {
        let file = std::env::temp_dir().join(format!("custody-mnemonic-{}", uuid::Uuid::new_v4()));
        std::fs::write(&file, TEST_MNEMONIC).unwrap();
        let c = Self::init_with(
            &[
                "--insecure-dev-seed",
                "--mnemonic-file",
                file.to_str().unwrap(),
            ],
            &[],
        );
        let _ = std::fs::remove_file(file);
        c
    }

    /// Credits (or debits) a user's ledger balance through `custody ledger adjust`.
    pub fn adjust(
        &self,
        tenant: &str,
        user: &str,
        network: &str,
        asset: &str,
        credit: bool,
        units: &str,
    ) -> Value {
        self.cli_ok(&[
            "ledger",
            "adjust",
            "--tenant",
            tenant,
            "--external-user-id",
            user,
            "--network",
            network,
            "--asset",
            asset,
            if credit { "--credit" } else { "--debit" },
            "--amount-units",
            units,
            "--reason",
            "test funding",
        ])
    }
}

impl Client {
    /// Creates (or fetches) the wallet of `user` on `network` with a fresh idempotency key.
    pub fn wallet(&self, user: &str, network: &str) -> Value {
        let key = format!("wallet-{}", uuid::Uuid::new_v4());
        let r = self.post(
            "/v1/wallets",
            &serde_json::json!({ "external_user_id": user, "network": network }),
            Some(&key),
        );
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        r.json()
    }

    /// `GET /v1/deposits{query}`'s data.
    pub fn deposits(&self, query: &str) -> Vec<Value> {
        let r = self.get(&format!("/v1/deposits{query}"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()["data"].as_array().unwrap().clone()
    }

    /// The available ledger balance of one asset of a wallet, as a number.
    pub fn available(&self, wallet: &Value, asset: &str) -> u128 {
        self.ledger_balance(wallet["id"].as_str().unwrap(), asset)["available_units"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Every asset of a wallet: asset → [available, reserved, pending] ledger units.
    pub fn all_balances(&self, wallet: &Value) -> std::collections::BTreeMap<String, [u128; 3]> {
        let id = wallet["id"].as_str().unwrap();
        let r = self.get(&format!("/v1/wallets/{id}/balances"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let units = |v: &Value| v.as_str().unwrap().parse::<u128>().unwrap();
        r.json()["balances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let l = &b["ledger"];
                (
                    b["asset"].as_str().unwrap().to_owned(),
                    [
                        units(&l["available_units"]),
                        units(&l["reserved_units"]),
                        units(&l["pending_units"]),
                    ],
                )
            })
            .collect()
    }

    /// Every ledger account that any posted entry touched, with its posted credits minus its
    /// posted debits, from `/v1/admin/transactions` (an admin client; one page of 100).
    pub fn ledger_books(&self) -> std::collections::BTreeMap<String, i128> {
        let r = self.get("/v1/admin/transactions?limit=100");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let page = r.json();
        assert_eq!(
            page["has_more"], false,
            "more than one page of transactions"
        );
        let mut books = std::collections::BTreeMap::new();
        for t in page["data"].as_array().unwrap() {
            for e in t["entries"].as_array().unwrap() {
                if !matches!(e["phase"].as_str(), Some("posted" | "pending_posted")) {
                    continue;
                }
                let amount: i128 = e["amount_units"].as_str().unwrap().parse().unwrap();
                let signed = if e["direction"] == "credit" {
                    amount
                } else {
                    -amount
                };
                *books
                    .entry(e["account"].as_str().unwrap().to_owned())
                    .or_insert(0) += signed;
            }
        }
        books
    }

    /// The ledger figures of one asset of a wallet.
    pub fn ledger_balance(&self, wallet_id: &str, asset: &str) -> Value {
        let r = self.get(&format!("/v1/wallets/{wallet_id}/balances"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()["balances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["asset"] == asset)
            .unwrap_or_else(|| panic!("no {asset} balance"))["ledger"]
            .clone()
    }
}

/// Derives the address of a BIP44 path with bip-utils (Python), an implementation independent
/// of ours. Needs `scripts/install-pytools.sh` (the test command runs it).
pub fn oracle_address(mnemonic: &str, network: &str, account: u32, index: u32) -> String {
    let python = std::env::var("CUSTODY_PYTHON").unwrap_or_else(|_| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_owned();
        root.join(".cache/py/bin/python").display().to_string()
    });
    let coin = if network == "BSC" { "ETHEREUM" } else { "TRON" };
    let script = format!(
        "from bip_utils import Bip39SeedGenerator, Bip44, Bip44Coins, Bip44Changes\n\
         seed = Bip39SeedGenerator({mnemonic:?}).Generate()\n\
         a = Bip44.FromSeed(seed, Bip44Coins.{coin}).Purpose().Coin().Account({account}).Change(Bip44Changes.CHAIN_EXT).AddressIndex({index})\n\
         print(a.PublicKey().ToAddress())\n"
    );
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .output()
        .unwrap_or_else(|e| panic!("{python} (run scripts/install-pytools.sh): {e}"));
    assert!(
        out.status.success(),
        "bip-utils failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl Custody {
    /// Replaces `from` by `to` in `custody.toml` (which must contain `from` once).
    pub fn edit_config(&self, from: &str, to: &str) {
        let path = self.data_dir().join("custody.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.matches(from).count(),
            1,
            "{from:?} once in custody.toml"
        );
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }

    /// Polls `check` every 100 ms until it returns `Some`, for at most `secs` seconds.
    pub fn wait_for<T>(&self, secs: u64, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = check() {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The `data` rows of `GET /v1/admin/{resource}?limit=100`, asked with the admin credential
/// `ops` (asserts a 200).
pub fn admin_rows(custody: &Custody, ops: &Cred, resource: &str) -> Vec<Value> {
    let r = custody
        .client(ops)
        .get(&format!("/v1/admin/{resource}?limit=100"));
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()["data"].as_array().unwrap().clone()
}

/// A new file holding `text` that only its owner may read, as a mnemonic file must be.
pub fn private_file(text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("custody-mnemonic-{}", uuid::Uuid::new_v4()));
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}
