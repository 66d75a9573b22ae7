//! A local EVM node for tests: starts anvil (`--chain-id 56`, BSC's id) on a free loopback
//! port, drives it over JSON-RPC with a blocking client of its own, and kills it on drop.
//!
//! Everything goes through anvil's unlocked dev accounts (`eth_sendTransaction`), so nothing
//! is signed here. Helpers deploy an ERC-20 test token (OpenZeppelin's
//! `ERC20PresetMinterPauser`, bytecode from the npm package), mint, transfer, send native
//! value, send a transfer that reverts, mine, switch automine and reorganize the chain.
//!
//! Where things are found:
//! - the binary: `CUSTODY_ANVIL_BIN`, else `.cache/node/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil`
//!   under the repository root (what `scripts/install-anvil.sh` installs);
//! - the contracts: `CUSTODY_OZ_DIR` (the `@openzeppelin/contracts` folder), else
//!   `.cache/node/node_modules/@openzeppelin/contracts`.
//!
//! [`Anvil::start`] returns `None`, after printing why, only when `CUSTODY_ANVIL_BIN` is unset
//! and nothing is at the default path: the test then skips. `scripts/test.sh` always installs
//! anvil, and with `CI=true` a missing binary fails instead of skipping.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Chain id anvil is started with (BSC mainnet's).
pub const CHAIN_ID: u64 = 56;

/// Selectors of the ERC-20 functions used here.
const TRANSFER_SELECTOR: &str = "a9059cbb";
const MINT_SELECTOR: &str = "40c10f19";
const BALANCE_OF_SELECTOR: &str = "70a08231";

/// Gas given to transactions that must be mined even though they revert (no estimation).
pub const FIXED_GAS_LIMIT: u64 = 100_000;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the workspace")
        .to_owned()
}

fn node_modules() -> PathBuf {
    repo_root().join(".cache/node/node_modules")
}

/// Where the anvil binary is, or `None` when it is neither configured nor installed.
/// Panics when `CUSTODY_ANVIL_BIN` names a missing file.
pub fn anvil_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CUSTODY_ANVIL_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "CUSTODY_ANVIL_BIN={} does not exist (run scripts/install-anvil.sh)",
            p.display()
        );
        return Some(p);
    }
    let default = node_modules().join("@foundry-rs/anvil-linux-amd64/bin/anvil");
    default.is_file().then_some(default)
}

/// The `ERC20PresetMinterPauser` artifact (ABI and bytecode).
pub fn erc20_artifact_path() -> PathBuf {
    let dir = std::env::var_os("CUSTODY_OZ_DIR")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| node_modules().join("@openzeppelin/contracts"));
    dir.join("build/contracts/ERC20PresetMinterPauser.json")
}

/// Creation bytecode of the test token, without `0x`.
fn erc20_bytecode() -> String {
    let path = erc20_artifact_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}): run scripts/install-anvil.sh or set CUSTODY_OZ_DIR",
            path.display()
        )
    });
    let artifact: Value = serde_json::from_str(&text).expect("the artifact is JSON");
    artifact["bytecode"]
        .as_str()
        .expect("the artifact has a bytecode")
        .trim_start_matches("0x")
        .to_owned()
}

/// A loopback port nothing listens on right now (for "dead endpoint" tests too).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .expect("local address")
        .port()
}

/// A running anvil node; killed on drop.
pub struct Anvil {
    /// The process this handle started (killed on drop); `None` when attached to one that
    /// runs on its own ([`Anvil::attach`]).
    child: Option<Child>,
    port: u16,
    accounts: Vec<String>,
    /// The arguments it was started with, to start it again ([`Anvil::restart`]).
    args: Vec<String>,
}

impl Anvil {
    /// Starts anvil, or returns `None` (the caller skips) when it is not installed.
    pub fn start() -> Option<Anvil> {
        Self::start_with(&[])
    }

    /// Like [`Anvil::start`] with extra command-line arguments (`--block-time 1`...).
    pub fn start_with(extra_args: &[&str]) -> Option<Anvil> {
        let Some(bin) = anvil_bin() else {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !ci,
                "anvil is not installed and CI is set: scripts/test.sh must run \
                 scripts/install-anvil.sh first"
            );
            eprintln!(
                "SKIPPED: anvil not found (CUSTODY_ANVIL_BIN is unset and nothing is at the \
                 default path): run scripts/install-anvil.sh to run this test"
            );
            return None;
        };
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new(&bin)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--chain-id", &CHAIN_ID.to_string(), "--silent"])
                .args(extra_args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(status) = child.try_wait().expect("wait on anvil") {
                    let mut err = String::new();
                    if let Some(mut s) = child.stderr.take() {
                        let _ = s.read_to_string(&mut err);
                    }
                    // Most likely the port was taken in between: try another.
                    last_error = format!("anvil exited with {status}: {err}");
                    break;
                }
                if let Ok(v) = rpc_at(port, "eth_chainId", json!([])) {
                    assert_eq!(v, json!(format!("{CHAIN_ID:#x}")));
                    let mut anvil = Anvil {
                        child: Some(child),
                        port,
                        accounts: Vec::new(),
                        args: extra_args.iter().map(|a| (*a).to_owned()).collect(),
                    };
                    let accounts = anvil.rpc("eth_accounts", json!([]));
                    anvil.accounts = serde_json::from_value(accounts).expect("account list");
                    return Some(anvil);
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("anvil did not answer on port {port} within 20 s");
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        panic!("anvil did not start: {last_error}");
    }

    /// A handle on an anvil already running on `port` (started by another process); dropping
    /// it leaves that node running.
    pub fn attach(port: u16) -> Anvil {
        let accounts = rpc_at(port, "eth_accounts", json!([]))
            .unwrap_or_else(|e| panic!("no anvil answers on port {port}: {e}"));
        Anvil {
            child: None,
            port,
            accounts: serde_json::from_value(accounts).expect("account list"),
            args: Vec::new(),
        }
    }

    /// A node that keeps its chain across [`Anvil::restart`] (in `state`, written on exit).
    pub fn start_persistent(state: &Path) -> Option<Anvil> {
        let state = state.to_str().expect("a UTF-8 path");
        Self::start_with(&["--dump-state", state])
    }

    /// Stops the node (SIGTERM: it writes its chain), keeps it down for `down_for`, and starts
    /// it again on the same port with the same chain. Needs [`Anvil::start_persistent`].
    pub fn restart(&mut self, down_for: Duration) {
        let state = self
            .args
            .iter()
            .position(|a| a == "--dump-state")
            .map(|i| self.args[i + 1].clone())
            .expect("a node started with Anvil::start_persistent");
        let mut child = self.child.take().expect("a node this handle started");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let _ = child.wait();
        std::thread::sleep(down_for);
        let bin = anvil_bin().expect("anvil");
        let child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--chain-id", &CHAIN_ID.to_string(), "--silent"])
            .args(["--load-state", &state])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while rpc_at(self.port, "eth_chainId", json!([])).is_err() {
            assert!(Instant::now() < deadline, "anvil did not come back");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The unlocked dev accounts (lowercase `0x` hex), each funded with 10,000 ETH.
    pub fn accounts(&self) -> &[String] {
        &self.accounts
    }

    pub fn account(&self, i: usize) -> &str {
        &self.accounts[i]
    }

    /// One JSON-RPC call that must succeed.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params)
            .unwrap_or_else(|e| panic!("anvil {method} failed: {e}"))
    }

    /// One JSON-RPC call; `Err` holds the error object (or the transport failure as text).
    pub fn try_rpc(&self, method: &str, params: Value) -> Result<Value, Value> {
        rpc_at(self.port, method, params)
    }

    pub fn block_number(&self) -> u64 {
        hex_u64(&self.rpc("eth_blockNumber", json!([])))
    }

    /// `eth_getBlockByNumber(n, false)` (null when there is no such block).
    pub fn block(&self, number: u64) -> Value {
        self.rpc(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), false]),
        )
    }

    /// Hash (`0x` lowercase) of block `number`.
    pub fn block_hash(&self, number: u64) -> String {
        self.block(number)["hash"]
            .as_str()
            .expect("block exists")
            .to_owned()
    }

    /// `evm_setAutomine`: off, transactions wait in the pool until [`Anvil::mine`].
    pub fn set_automine(&self, on: bool) {
        self.rpc("evm_setAutomine", json!([on]));
    }

    /// `anvil_mine`: `blocks` new blocks (the first takes every pending transaction).
    pub fn mine(&self, blocks: u64) {
        self.rpc("anvil_mine", json!([format!("{blocks:#x}")]));
    }

    /// `anvil_reorg`: replaces the last `depth` blocks with `depth` new ones; each
    /// `(tx request, offset)` goes into the new block at `offset` (0 = the first replaced
    /// height). The head height stays the same.
    pub fn reorg(&self, depth: u64, txs: &[(Value, u64)]) {
        let pairs: Vec<Value> = txs.iter().map(|(tx, at)| json!([tx, at])).collect();
        self.rpc("anvil_reorg", json!([depth, pairs]));
    }

    /// `eth_sendTransaction`; returns the transaction hash (`0x` lowercase).
    pub fn send(&self, tx: Value) -> String {
        self.rpc("eth_sendTransaction", json!([tx]))
            .as_str()
            .expect("a transaction hash")
            .to_owned()
    }

    /// The receipt, or `None` while the transaction is not mined.
    pub fn receipt(&self, tx_hash: &str) -> Option<Value> {
        let r = self.rpc("eth_getTransactionReceipt", json!([tx_hash]));
        (!r.is_null()).then_some(r)
    }

    /// The receipt of a transaction that is mined or about to be (automine on: anvil answers
    /// `eth_sendTransaction` before the block is sealed, so this waits up to 10 s).
    pub fn mined(&self, tx_hash: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(r) = self.receipt(tx_hash) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{tx_hash} is not mined after 10 s (automine off?)"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Native balance in wei.
    pub fn balance(&self, address: &str) -> u128 {
        hex_u128(&self.rpc("eth_getBalance", json!([address, "latest"])))
    }

    /// Sends `wei` from a dev account to `to`; returns the hash.
    pub fn send_value(&self, from: &str, to: &str, wei: u128) -> String {
        self.send(value_tx(from, to, wei))
    }

    /// Deploys an `ERC20PresetMinterPauser` (18 decimals; `from` may mint); returns its
    /// address (`0x` lowercase). Needs automine on.
    pub fn deploy_token(&self, from: &str, name: &str, symbol: &str) -> String {
        let data = format!(
            "0x{}{}",
            erc20_bytecode(),
            abi_encode_two_strings(name, symbol)
        );
        let hash = self.send(json!({"from": from, "data": data, "gas": "0x4c4b40"}));
        let receipt = self.mined(&hash);
        assert_eq!(receipt["status"], json!("0x1"), "token deployment reverted");
        receipt["contractAddress"]
            .as_str()
            .expect("a contract address")
            .to_owned()
    }

    /// `mint(to, amount)` sent by `minter` (the deployer).
    pub fn mint(&self, token: &str, minter: &str, to: &str, amount: u128) -> String {
        self.send(json!({
            "from": minter,
            "to": token,
            "data": format!("0x{MINT_SELECTOR}{}{}", address_word(to), uint_word(amount)),
        }))
    }

    /// `transfer(to, amount)` sent by `from`.
    pub fn token_transfer(&self, token: &str, from: &str, to: &str, amount: u128) -> String {
        self.send(token_transfer_tx(token, from, to, amount))
    }

    /// A `transfer` that reverts (more than `from` holds) yet is mined with status 0: the gas
    /// limit is fixed, so no estimation refuses it first.
    pub fn token_transfer_reverting(&self, token: &str, from: &str, to: &str) -> String {
        let mut tx = token_transfer_tx(token, from, to, u128::MAX);
        tx["gas"] = json!(format!("{FIXED_GAS_LIMIT:#x}"));
        self.send(tx)
    }

    /// `balanceOf(owner)` of `token` at the head.
    pub fn token_balance(&self, token: &str, owner: &str) -> u128 {
        let data = format!("0x{BALANCE_OF_SELECTOR}{}", address_word(owner));
        let v = self.rpc("eth_call", json!([{"to": token, "data": data}, "latest"]));
        hex_u128(&v)
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A native value transfer request (for [`Anvil::send`] or [`Anvil::reorg`]).
pub fn value_tx(from: &str, to: &str, wei: u128) -> Value {
    json!({"from": from, "to": to, "value": format!("{wei:#x}")})
}

/// A token `transfer(to, amount)` request (for [`Anvil::send`] or [`Anvil::reorg`]).
pub fn token_transfer_tx(token: &str, from: &str, to: &str, amount: u128) -> Value {
    json!({
        "from": from,
        "to": token,
        "data": format!("0x{TRANSFER_SELECTOR}{}{}", address_word(to), uint_word(amount)),
    })
}

/// An address as a 32-byte ABI word (64 hex digits).
fn address_word(address: &str) -> String {
    let body = address.trim_start_matches("0x").to_ascii_lowercase();
    assert_eq!(body.len(), 40, "address {address}");
    format!("{body:0>64}")
}

fn uint_word(v: u128) -> String {
    format!("{v:064x}")
}

/// ABI encoding of `(string, string)` constructor arguments.
fn abi_encode_two_strings(a: &str, b: &str) -> String {
    let tail = |s: &str| {
        let mut bytes = s.as_bytes().to_vec();
        let padded = bytes.len().div_ceil(32) * 32;
        bytes.resize(padded, 0);
        (
            uint_word(s.len() as u128) + &hex::encode(&bytes),
            32 + padded,
        )
    };
    let (tail_a, len_a) = tail(a);
    let (tail_b, _) = tail(b);
    let offset_a = 64u128;
    let offset_b = offset_a + len_a as u128;
    format!(
        "{}{}{tail_a}{tail_b}",
        uint_word(offset_a),
        uint_word(offset_b)
    )
}

pub fn hex_u64(v: &Value) -> u64 {
    let s = v.as_str().expect("a hex quantity");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("a hex quantity")
}

pub fn hex_u128(v: &Value) -> u128 {
    let s = v.as_str().expect("a hex quantity");
    let body = s.trim_start_matches("0x").trim_start_matches('0');
    if body.is_empty() {
        return 0;
    }
    u128::from_str_radix(body, 16).expect("a quantity within 128 bits")
}

/// One blocking JSON-RPC call over a fresh HTTP/1.1 connection.
fn rpc_at(port: u16, method: &str, params: Value) -> Result<Value, Value> {
    let body = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 1, "method": method, "params": params,
    }))
    .expect("JSON serializes");
    let answer = post(port, &body).map_err(|e| json!(format!("transport: {e}")))?;
    let v: Value = serde_json::from_slice(&answer).map_err(|e| {
        json!(format!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&answer)
        ))
    })?;
    match v.get("error") {
        Some(err) if !err.is_null() => Err(err.clone()),
        _ => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
    }
}

fn post(port: u16, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status_ok = head.starts_with("http/1.1 200");
    let payload = &raw[split + 4..];
    let payload = if head.contains("transfer-encoding: chunked") {
        dechunk(payload)?
    } else {
        payload.to_vec()
    };
    if !status_ok {
        return Err(std::io::Error::other(format!(
            "{}: {}",
            head.lines().next().unwrap_or(""),
            String::from_utf8_lossy(&payload)
        )));
    }
    Ok(payload)
}

fn dechunk(mut data: &[u8]) -> std::io::Result<Vec<u8>> {
    let bad = || std::io::Error::other("bad chunked encoding");
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
        let size_text = std::str::from_utf8(&data[..line_end]).map_err(|_| bad())?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad())?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(bad());
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructor_arguments_are_abi_encoded() {
        let enc = abi_encode_two_strings("Test", "TST");
        assert_eq!(enc.len(), 64 * 6);
        assert_eq!(&enc[..64], &uint_word(64));
        assert_eq!(&enc[64..128], &uint_word(128));
        assert_eq!(&enc[128..192], &uint_word(4));
        assert!(enc[192..256].starts_with("54657374"));
        assert_eq!(&enc[256..320], &uint_word(3));
        assert!(enc[320..].starts_with("545354"));
    }

    #[test]
    fn chunked_bodies_are_decoded() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
    }
}
