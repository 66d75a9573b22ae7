//! A TRON full-node HTTP API test server: a TRON node cannot run on these machines, so the
//! TRON adapter and the deposit pipeline are tested against this scriptable chain instead.
//!
//! It answers on `http://127.0.0.1:<port>` with the JSON a java-tron node (or TronGrid) writes,
//! `visible` false (hex `41…` addresses): the shapes follow the samples kept in
//! `tests/fixtures/tron/`, taken from the TRON developer documentation. Served paths:
//! `wallet/getnowblock`, `wallet/getblockbynum`, `wallet/gettransactioninfobyblocknum`,
//! `wallet/gettransactioninfobyid`, `walletsolidity/getnowblock`, `wallet/getaccount`,
//! `wallet/getaccountresource`, `wallet/triggerconstantcontract` (`balanceOf(address)`),
//! `wallet/broadcasthex`, `wallet/getchainparameters`; anything else is a 404.
//!
//! Block 0, the genesis block, is always served (as a node prints it: no `number` and no
//! `timestamp`); its `blockID` names the test network, [`TEST_GENESIS_BLOCK_ID`] unless the
//! server was started with another ([`TronApi::start_on_network`]). A service pointed at the
//! server must be configured with that id (`[tron] genesis_block_id`), as it would be for a
//! testnet. Blocks between 0 and the first block are absent (`{}`).
//!
//! The chain is scripted from the test: append blocks holding TRX transfers, TRC20 transfers
//! (successful, `REVERT`, `OUT_OF_ENERGY`, any contract), replace blocks (a reorganization:
//! the block and every later one get new ids), set balances and resources, make the server
//! stop answering ([`Mode`]), pad the answers of a path with whitespace (an answer too large
//! for a client's limit, same JSON), and read back the requests it got (headers included) and
//! the transactions broadcast to it.
//!
//! Addresses are given in base58 (`T…`) or `41…` hex. The server shares no code with the
//! adapter: it decodes base58check with the `bs58` crate and writes everything else itself.
//!
//! The server runs on its own thread and tokio runtime, so both blocking tests (the e2e tests
//! of the `custody` binary) and async tests can use it; it stops when dropped.
//!
//! ```
//! use custody_e2e::tron_api::{BlockSpec, Mode, TronApi, TxSpec};
//!
//! const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
//! let deposit_address = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
//! let sender = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";
//! let api = TronApi::start(); // block 1
//! // Point the service at it: CUSTODY_TRON_API_URLS=<api.url()>
//! let deposit = TxSpec::trc20(USDT, sender, deposit_address, 5_000_000);
//! let block = api.append(BlockSpec::new().tx(deposit.clone()).trx(sender, deposit_address, 1));
//! api.append_empty(19); // confirmations
//! // The block is orphaned; the deposit is re-included one block later.
//! let fork = api.reorg(block.number, vec![BlockSpec::new(), BlockSpec::new().tx(deposit)]);
//! assert_eq!(fork[1].txids, vec![block.txids[0].clone()]);
//! api.set_mode(Mode::Down); // the node stops answering
//! ```

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// keccak-256("Transfer(address,address,uint256)").
pub const TRANSFER_TOPIC: &str = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
/// Block interval of the TRON network.
pub const BLOCK_INTERVAL_MS: i64 = 3_000;
/// Timestamp of the first block the server makes.
pub const FIRST_BLOCK_TIMESTAMP_MS: i64 = 1_760_000_000_000;
/// The `blockID` of block 0 of the test network the server runs by default: 8 zero bytes
/// (block number 0) then 24 bytes of SHA-256("custody tron api test server genesis"). Not
/// mainnet's, Nile's or Shasta's.
pub const TEST_GENESIS_BLOCK_ID: &str =
    "0000000000000000d541732b444a39550a6c85ff9673524384211bb9f373c16c";
/// A super representative's address, written as the witness of every block.
const WITNESS_HEX: &str = "41b2f713d57dbcec679d93a8849fa0cd0e4db594ba";
/// Requests kept for [`TronApi::requests`] (the oldest are dropped).
const REQUESTS_KEPT_MAX: usize = 10_000;

/// How the server treats requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answers normally.
    Up,
    /// Closes every connection without answering (a dead node).
    Down,
    /// Answers every request with this HTTP status and a short text body.
    Status(u16),
    /// Accepts and never answers (the client's timeout fires).
    Hang,
}

/// `41…` hex of an address given in base58check (`T…`) or already in `41…` hex.
pub fn hex41(address: &str) -> String {
    if address.len() == 42 && address.starts_with("41") {
        return address.to_ascii_lowercase();
    }
    let bytes = bs58::decode(address)
        .with_check(None)
        .into_vec()
        .unwrap_or_else(|e| panic!("{address:?} is not a base58check address: {e}"));
    assert!(
        bytes.len() == 21 && bytes[0] == 0x41,
        "{address:?} is not a TRON address"
    );
    hex::encode(bytes)
}

/// The 20 account bytes of an address, as 40 hex digits (the form of log addresses).
fn hex20(address: &str) -> String {
    hex41(address)[2..].to_owned()
}

fn word_address(address: &str) -> String {
    format!("{:0>64}", hex20(address))
}

fn word_u128(value: u128) -> String {
    format!("{value:064x}")
}

static TX_SEQ: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone, PartialEq, Eq)]
enum TxKind {
    Trx {
        from: String,
        to: String,
        amount: i64,
    },
    Trc20 {
        token: String,
        from: String,
        to: String,
        amount: u128,
    },
}

/// One transaction of a block. Its txID is fixed when it is made, so the same `TxSpec` put in
/// a replacement block is the same transaction re-included after a reorganization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxSpec {
    pub txid: String,
    raw: Vec<u8>,
    kind: TxKind,
    /// `ret[0].contractRet` and, for contract calls, `receipt.result`.
    result: String,
}

impl TxSpec {
    fn new(kind: TxKind) -> Self {
        let seq = TX_SEQ.fetch_add(1, Ordering::Relaxed);
        // Not a real protobuf: the server only needs a raw_data whose SHA-256 is the txID.
        let raw = format!("custody-tron-api-test-tx:{seq}:{kind:?}").into_bytes();
        TxSpec {
            txid: hex::encode(Sha256::digest(&raw)),
            raw,
            kind,
            result: "SUCCESS".into(),
        }
    }

    /// A TRX transfer (`TransferContract`) of `amount` sun.
    pub fn trx(from: &str, to: &str, amount: i64) -> Self {
        TxSpec::new(TxKind::Trx {
            from: hex41(from),
            to: hex41(to),
            amount,
        })
    }

    /// A TRC20 `transfer(to, amount)` called on `token` by `from`, with its `Transfer` log.
    pub fn trc20(token: &str, from: &str, to: &str, amount: u128) -> Self {
        TxSpec::new(TxKind::Trc20 {
            token: hex41(token),
            from: hex41(from),
            to: hex41(to),
            amount,
        })
    }

    /// The same transaction with another result: `REVERT`, `OUT_OF_ENERGY`, ... A failed
    /// contract call keeps no logs, as on the real chain.
    pub fn with_result(mut self, result: &str) -> Self {
        self.result = result.into();
        self
    }

    fn succeeded(&self) -> bool {
        self.result == "SUCCESS"
    }

    fn transaction_json(&self, timestamp: i64, ref_block: &str) -> Value {
        let (contract, fee_limit) = match &self.kind {
            TxKind::Trx { from, to, amount } => (
                json!({
                    "parameter": {
                        "value": {"amount": amount, "owner_address": from, "to_address": to},
                        "type_url": "type.googleapis.com/protocol.TransferContract"
                    },
                    "type": "TransferContract"
                }),
                None,
            ),
            TxKind::Trc20 {
                token,
                from,
                to,
                amount,
            } => (
                json!({
                    "parameter": {
                        "value": {
                            "data": format!("a9059cbb{}{}", word_address(to), word_u128(*amount)),
                            "owner_address": from,
                            "contract_address": token
                        },
                        "type_url": "type.googleapis.com/protocol.TriggerSmartContract"
                    },
                    "type": "TriggerSmartContract"
                }),
                Some(30_000_000),
            ),
        };
        let mut raw_data = json!({
            "contract": [contract],
            "ref_block_bytes": &ref_block[12..16],
            "ref_block_hash": &ref_block[16..32],
            "expiration": timestamp + 60_000,
            "timestamp": timestamp - 1_500,
        });
        if let Some(f) = fee_limit {
            raw_data["fee_limit"] = json!(f);
        }
        json!({
            "ret": [{"contractRet": self.result}],
            "signature": [format!("{}{}00", self.txid, self.txid)],
            "txID": self.txid,
            "raw_data": raw_data,
            "raw_data_hex": hex::encode(&self.raw),
        })
    }

    fn info_json(&self, number: u64, timestamp: i64) -> Value {
        match &self.kind {
            TxKind::Trx { .. } => json!({
                "id": self.txid,
                "fee": 268_000,
                "blockNumber": number,
                "blockTimeStamp": timestamp,
                "contractResult": [""],
                "receipt": {"net_fee": 268_000}
            }),
            TxKind::Trc20 {
                token,
                from,
                to,
                amount,
            } => {
                if self.succeeded() {
                    json!({
                        "id": self.txid,
                        "fee": 345_000,
                        "blockNumber": number,
                        "blockTimeStamp": timestamp,
                        "contractResult": [word_u128(1)],
                        "contract_address": token,
                        "receipt": {
                            "energy_usage_total": 64_285,
                            "energy_fee": 6_428_500,
                            "net_fee": 345_000,
                            "result": "SUCCESS"
                        },
                        "log": [{
                            "address": &token[2..],
                            "topics": [TRANSFER_TOPIC, word_address(from), word_address(to)],
                            "data": word_u128(*amount)
                        }]
                    })
                } else {
                    json!({
                        "id": self.txid,
                        "fee": 1_234_000,
                        "blockNumber": number,
                        "blockTimeStamp": timestamp,
                        "contractResult": [""],
                        "contract_address": token,
                        "receipt": {
                            "energy_fee": 889_000,
                            "energy_usage_total": 8_890,
                            "net_fee": 345_000,
                            "result": self.result
                        },
                        "result": "FAILED",
                        "resMessage": hex::encode("REVERT opcode executed")
                    })
                }
            }
        }
    }
}

/// The transactions of one block, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockSpec {
    pub txs: Vec<TxSpec>,
}

impl BlockSpec {
    pub fn new() -> Self {
        BlockSpec::default()
    }

    pub fn tx(mut self, tx: TxSpec) -> Self {
        self.txs.push(tx);
        self
    }

    pub fn trx(self, from: &str, to: &str, amount: i64) -> Self {
        self.tx(TxSpec::trx(from, to, amount))
    }

    pub fn trc20(self, token: &str, from: &str, to: &str, amount: u128) -> Self {
        self.tx(TxSpec::trc20(token, from, to, amount))
    }

    /// A TRC20 transfer that failed with `result` (`REVERT`, `OUT_OF_ENERGY`, ...).
    pub fn trc20_failed(
        self,
        token: &str,
        from: &str,
        to: &str,
        amount: u128,
        result: &str,
    ) -> Self {
        self.tx(TxSpec::trc20(token, from, to, amount).with_result(result))
    }
}

/// What the server made of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    pub number: u64,
    /// `blockID`: 8 bytes of block number, then 24 bytes of hash; lowercase hex.
    pub hash: String,
    pub parent_hash: String,
    pub timestamp_ms: i64,
    pub txids: Vec<String>,
}

struct StoredBlock {
    info: BlockInfo,
    spec: BlockSpec,
    block_json: Bytes,
    infos_json: Bytes,
}

/// One request as the server got it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct State {
    genesis_block_id: String,
    first: u64,
    blocks: Vec<StoredBlock>,
    /// Changes every block id made after a reorganization.
    fork: u64,
    solid_lag: u64,
    trx_balances: HashMap<String, i64>,
    token_balances: HashMap<(String, String), u128>,
    resources: HashMap<String, Value>,
    chain_parameters: Vec<(String, i64)>,
    mode: Mode,
    requests: VecDeque<RecordedRequest>,
    broadcasts: Vec<String>,
    /// Whitespace bytes appended to every answer of a path.
    padding: HashMap<String, usize>,
    pending_replace: Option<PendingReplace>,
}

/// A [`TronApi::replace_after`] waiting for its request.
struct PendingReplace {
    path: String,
    remaining: usize,
    number: u64,
    spec: BlockSpec,
}

impl State {
    /// Block 0 as java-tron prints it: proto3 JSON leaves `number` and `timestamp` (both 0) out.
    fn genesis_json(&self) -> Value {
        json!({
            "blockID": self.genesis_block_id,
            "block_header": {
                "raw_data": {
                    "txTrieRoot": hex::encode(Sha256::digest(self.genesis_block_id.as_bytes())),
                    "witness_address": WITNESS_HEX,
                    "parentHash": hex::encode(Sha256::digest(b"custody tron api test server genesis parent"))
                }
            }
        })
    }

    /// The stored transaction `txid` and the number and timestamp of its block.
    fn find_tx(&self, txid: &str) -> Option<(&TxSpec, u64, i64)> {
        self.blocks.iter().find_map(|b| {
            b.spec
                .txs
                .iter()
                .find(|t| t.txid.eq_ignore_ascii_case(txid))
                .map(|t| (t, b.info.number, b.info.timestamp_ms))
        })
    }

    fn make_block(&self, number: u64, parent_hash: &str, spec: BlockSpec) -> StoredBlock {
        let steps = i64::try_from(number - self.first).expect("block count fits i64");
        let timestamp = FIRST_BLOCK_TIMESTAMP_MS + steps * BLOCK_INTERVAL_MS;
        let mut hasher = Sha256::new();
        hasher.update(parent_hash.as_bytes());
        hasher.update(number.to_be_bytes());
        hasher.update(self.fork.to_be_bytes());
        for tx in &spec.txs {
            hasher.update(tx.txid.as_bytes());
        }
        let digest = hasher.finalize();
        let hash = format!("{number:016x}{}", hex::encode(&digest[8..]));
        let transactions: Vec<Value> = spec
            .txs
            .iter()
            .map(|tx| tx.transaction_json(timestamp, parent_hash))
            .collect();
        let mut block = json!({
            "blockID": hash,
            "block_header": {
                "raw_data": {
                    "number": number,
                    "txTrieRoot": hex::encode(Sha256::digest(hash.as_bytes())),
                    "witness_address": WITNESS_HEX,
                    "parentHash": parent_hash,
                    "version": 32,
                    "timestamp": timestamp
                },
                "witness_signature": format!("{hash}{hash}00")
            }
        });
        // proto3 JSON leaves an empty repeated field out.
        if !transactions.is_empty() {
            block["transactions"] = Value::Array(transactions);
        }
        let infos: Vec<Value> = spec
            .txs
            .iter()
            .map(|tx| tx.info_json(number, timestamp))
            .collect();
        StoredBlock {
            info: BlockInfo {
                number,
                hash,
                parent_hash: parent_hash.to_owned(),
                timestamp_ms: timestamp,
                txids: spec.txs.iter().map(|t| t.txid.clone()).collect(),
            },
            spec,
            block_json: Bytes::from(block.to_string()),
            infos_json: Bytes::from(Value::Array(infos).to_string()),
        }
    }

    fn push(&mut self, spec: BlockSpec) -> BlockInfo {
        let (number, parent) = match self.blocks.last() {
            Some(last) => (last.info.number + 1, last.info.hash.clone()),
            None if self.first == 1 => (1, self.genesis_block_id.clone()),
            None => (
                self.first,
                format!(
                    "{:016x}{}",
                    self.first - 1,
                    hex::encode(&Sha256::digest(b"parent of the first block")[8..])
                ),
            ),
        };
        let block = self.make_block(number, &parent, spec);
        let info = block.info.clone();
        self.blocks.push(block);
        info
    }

    fn reorg(&mut self, number: u64, specs: Vec<BlockSpec>) -> Vec<BlockInfo> {
        assert!(number > self.first, "the first block cannot be replaced");
        let keep = usize::try_from(number - self.first).unwrap();
        assert!(
            keep <= self.blocks.len(),
            "block {number} is beyond the head"
        );
        self.blocks.truncate(keep);
        self.fork += 1;
        specs.into_iter().map(|s| self.push(s)).collect()
    }

    fn replace(&mut self, number: u64, spec: BlockSpec) -> BlockInfo {
        let from = usize::try_from(number - self.first).unwrap() + 1;
        let mut specs = vec![spec];
        specs.extend(self.blocks[from..].iter().map(|b| b.spec.clone()));
        self.reorg(number, specs).remove(0)
    }

    fn block(&self, number: u64) -> Option<&StoredBlock> {
        let i = usize::try_from(number.checked_sub(self.first)?).ok()?;
        self.blocks.get(i)
    }

    fn record(&mut self, request: RecordedRequest) {
        let due = match &mut self.pending_replace {
            Some(p) if p.path == request.path => {
                p.remaining -= 1;
                p.remaining == 0
            }
            _ => false,
        };
        if due {
            let p = self.pending_replace.take().expect("pending");
            self.replace(p.number, p.spec);
        }
        if self.requests.len() == REQUESTS_KEPT_MAX {
            self.requests.pop_front();
        }
        self.requests.push_back(request);
    }
}

/// The test server. Dropping it stops it.
pub struct TronApi {
    url: String,
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TronApi {
    /// A chain of one empty block, number 1.
    pub fn start() -> TronApi {
        TronApi::start_at(1)
    }

    /// A chain of one empty block, number `first` (at least 1).
    pub fn start_at(first: u64) -> TronApi {
        TronApi::start_on_network(first, TEST_GENESIS_BLOCK_ID)
    }

    /// [`TronApi::start_at`] on the network whose block 0 has id `genesis_block_id` (64 hex
    /// digits, the first 16 zeros): mainnet's, a testnet's, or any other.
    pub fn start_on_network(first: u64, genesis_block_id: &str) -> TronApi {
        assert!(first >= 1, "the first block must have a parent");
        assert!(
            genesis_block_id.len() == 64
                && genesis_block_id.starts_with("0000000000000000")
                && genesis_block_id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{genesis_block_id:?} is not a block 0 id"
        );
        let mut state = State {
            genesis_block_id: genesis_block_id.to_ascii_lowercase(),
            first,
            blocks: Vec::new(),
            fork: 0,
            solid_lag: 19,
            trx_balances: HashMap::new(),
            token_balances: HashMap::new(),
            resources: HashMap::new(),
            chain_parameters: vec![
                ("getMaintenanceTimeInterval".into(), 21_600_000),
                ("getAccountUpgradeCost".into(), 9_999_000_000),
                ("getCreateAccountFee".into(), 100_000),
                ("getTransactionFee".into(), 1_000),
                ("getAssetIssueFee".into(), 1_024_000_000),
                ("getCreateNewAccountFeeInSystemContract".into(), 1_000_000),
                ("getEnergyFee".into(), 100),
                ("getMaxFeeLimit".into(), 15_000_000_000),
            ],
            mode: Mode::Up,
            requests: VecDeque::new(),
            broadcasts: Vec::new(),
            padding: HashMap::new(),
            pending_replace: None,
        };
        state.push(BlockSpec::new());
        let state = Arc::new(Mutex::new(state));

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let shared = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("tron-api".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    loop {
                        tokio::select! {
                            _ = &mut rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                if lock(&shared).mode == Mode::Down {
                                    drop(stream);
                                    continue;
                                }
                                let _ = stream.set_nodelay(true);
                                let state = Arc::clone(&shared);
                                tokio::spawn(async move {
                                    let service = service_fn(move |req| {
                                        handle(Arc::clone(&state), req)
                                    });
                                    let _ = hyper::server::conn::http1::Builder::new()
                                        .serve_connection(TokioIo::new(stream), service)
                                        .await;
                                });
                            }
                        }
                    }
                });
            })
            .expect("spawn the server thread");
        TronApi {
            url: format!("http://{addr}"),
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `blockID` of block 0 (lowercase hex): what `[tron] genesis_block_id` must be set to.
    pub fn genesis_block_id(&self) -> String {
        self.state().genesis_block_id.clone()
    }

    /// Appends `bytes` spaces to every successful answer for `path` (e.g.
    /// `/wallet/gettransactioninfobyblocknum`): the same JSON, larger than a client's limit.
    /// 0 stops the padding.
    pub fn pad_answers(&self, path: &str, bytes: usize) {
        let mut state = self.state();
        if bytes == 0 {
            state.padding.remove(path);
        } else {
            state.padding.insert(path.to_owned(), bytes);
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Appends a block on top of the head.
    pub fn append(&self, spec: BlockSpec) -> BlockInfo {
        self.state().push(spec)
    }

    /// Appends `count` empty blocks; returns the new head.
    pub fn append_empty(&self, count: usize) -> BlockInfo {
        let mut state = self.state();
        let mut last = state.blocks.last().expect("a block").info.clone();
        for _ in 0..count {
            last = state.push(BlockSpec::new());
        }
        last
    }

    /// A reorganization: blocks `number` and up are dropped and `specs` take their place (the
    /// chain may end shorter or longer). Every new block has a new id, even with the same
    /// transactions.
    pub fn reorg(&self, number: u64, specs: Vec<BlockSpec>) -> Vec<BlockInfo> {
        self.state().reorg(number, specs)
    }

    /// Replaces block `number` with `spec`; the later blocks keep their transactions but get
    /// new ids (their parent changed). Returns the new block.
    pub fn replace(&self, number: u64, spec: BlockSpec) -> BlockInfo {
        self.state().replace(number, spec)
    }

    /// [`TronApi::replace`] run by the server itself when it receives its `after`-th request
    /// for `path` from now on, before answering it: a reorganization in the middle of a
    /// client's reads.
    pub fn replace_after(&self, path: &str, after: usize, number: u64, spec: BlockSpec) {
        assert!(after >= 1, "after counts requests from 1");
        self.state().pending_replace = Some(PendingReplace {
            path: path.to_owned(),
            remaining: after,
            number,
            spec,
        });
    }

    pub fn head(&self) -> BlockInfo {
        self.state().blocks.last().expect("a block").info.clone()
    }

    pub fn block(&self, number: u64) -> Option<BlockInfo> {
        self.state().block(number).map(|b| b.info.clone())
    }

    /// `walletsolidity/getnowblock` answers the block `lag` below the head (19 by default).
    pub fn set_solid_lag(&self, lag: u64) {
        self.state().solid_lag = lag;
    }

    /// The TRX balance `wallet/getaccount` reports (the account then exists).
    pub fn set_trx_balance(&self, address: &str, sun: i64) {
        self.state().trx_balances.insert(hex41(address), sun);
    }

    /// What `balanceOf(holder)` on `token` returns (0 when never set).
    pub fn set_trc20_balance(&self, token: &str, holder: &str, units: u128) {
        self.state()
            .token_balances
            .insert((hex41(token), hex41(holder)), units);
    }

    /// The `wallet/getaccountresource` answer for `address` (`{}` when never set).
    pub fn set_account_resource(&self, address: &str, resource: Value) {
        self.state().resources.insert(hex41(address), resource);
    }

    pub fn set_chain_parameter(&self, key: &str, value: i64) {
        let mut state = self.state();
        match state.chain_parameters.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => state.chain_parameters.push((key.into(), value)),
        }
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state().mode = mode;
    }

    /// The requests received so far (the last 10 000).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state().requests.iter().cloned().collect()
    }

    /// How many requests for `path` (e.g. `/wallet/getblockbynum`) were received.
    pub fn request_count(&self, path: &str) -> usize {
        self.state()
            .requests
            .iter()
            .filter(|r| r.path == path)
            .count()
    }

    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }

    /// The `transaction` hex of every `wallet/broadcasthex` request, in order.
    pub fn broadcasts(&self) -> Vec<String> {
        self.state().broadcasts.clone()
    }
}

impl Drop for TronApi {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn json_response(body: Bytes) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap()
}

fn value_response(v: &Value) -> Response<Full<Bytes>> {
    json_response(Bytes::from(v.to_string()))
}

fn node_error(message: &str) -> Response<Full<Bytes>> {
    value_response(&json!({ "Error": message }))
}

/// A number field of a request body (a JSON number or a decimal string).
fn num_field(body: &Value, name: &str) -> Option<i64> {
    match &body[name] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).into_owned();
    let mode = {
        let mut s = lock(&state);
        s.record(RecordedRequest {
            method,
            path: path.clone(),
            headers,
            body: text.clone(),
        });
        s.mode
    };
    match mode {
        Mode::Up => {}
        Mode::Down => {
            // An error from the service makes hyper close the connection without an answer.
            return Err(std::io::Error::other("the test node is down"));
        }
        Mode::Status(code) => {
            return Ok(Response::builder()
                .status(code)
                .body(Full::new(Bytes::from(format!(
                    "status {code} from the test node"
                ))))
                .unwrap());
        }
        Mode::Hang => {
            tokio::time::sleep(Duration::from_secs(3_600)).await;
        }
    }
    let body: Value = if text.trim().is_empty() {
        json!({})
    } else {
        match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                return Ok(node_error(&format!(
                    "class com.alibaba.fastjson.JSONException : {e}"
                )))
            }
        }
    };
    let response = route(&state, &path, &body);
    let padding = lock(&state).padding.get(&path).copied();
    match padding {
        Some(bytes) if response.status() == StatusCode::OK => {
            let (parts, body) = response.into_parts();
            let mut padded = body
                .collect()
                .await
                .map(|b| b.to_bytes().to_vec())
                .unwrap_or_default();
            padded.resize(padded.len() + bytes, b' ');
            Ok(Response::from_parts(parts, Full::new(Bytes::from(padded))))
        }
        _ => Ok(response),
    }
}

fn route(state: &Mutex<State>, path: &str, body: &Value) -> Response<Full<Bytes>> {
    let s = lock(state);
    match path {
        "/wallet/getnowblock" => json_response(s.blocks.last().unwrap().block_json.clone()),
        "/walletsolidity/getnowblock" => {
            let head = s.blocks.last().unwrap().info.number;
            let solid = head.saturating_sub(s.solid_lag).max(s.first);
            json_response(s.block(solid).unwrap().block_json.clone())
        }
        "/wallet/getblockbynum" => {
            let Some(num) = num_field(body, "num") else {
                return node_error("class java.lang.NumberFormatException : num");
            };
            if num == 0 {
                return value_response(&s.genesis_json());
            }
            match u64::try_from(num).ok().and_then(|n| s.block(n)) {
                Some(b) => json_response(b.block_json.clone()),
                None => value_response(&json!({})),
            }
        }
        "/wallet/gettransactioninfobyid" => {
            let txid = body["value"].as_str().unwrap_or_default();
            match s.find_tx(txid) {
                Some((tx, number, timestamp)) => value_response(&tx.info_json(number, timestamp)),
                None => value_response(&json!({})),
            }
        }
        "/wallet/gettransactioninfobyblocknum" => {
            let Some(num) = num_field(body, "num") else {
                return node_error("class java.lang.NumberFormatException : num");
            };
            if num <= 0 {
                return value_response(&json!({}));
            }
            match u64::try_from(num).ok().and_then(|n| s.block(n)) {
                Some(b) => json_response(b.infos_json.clone()),
                None => json_response(Bytes::from_static(b"[]")),
            }
        }
        "/wallet/getaccount" => {
            let address = hex41(body["address"].as_str().unwrap_or_default());
            match s.trx_balances.get(&address) {
                Some(balance) => {
                    let mut account = json!({
                        "address": address,
                        "create_time": FIRST_BLOCK_TIMESTAMP_MS,
                        "net_window_size": 28_800_000,
                        "account_resource": {"energy_window_size": 28_800_000}
                    });
                    if *balance != 0 {
                        account["balance"] = json!(balance);
                    }
                    value_response(&account)
                }
                None => value_response(&json!({})),
            }
        }
        "/wallet/getaccountresource" => {
            let address = hex41(body["address"].as_str().unwrap_or_default());
            value_response(s.resources.get(&address).unwrap_or(&json!({})))
        }
        "/wallet/getchainparameters" => {
            let params: Vec<Value> = s
                .chain_parameters
                .iter()
                .map(|(k, v)| {
                    if *v == 0 {
                        json!({ "key": k })
                    } else {
                        json!({ "key": k, "value": v })
                    }
                })
                .collect();
            value_response(&json!({ "chainParameter": params }))
        }
        "/wallet/triggerconstantcontract" => constant_call(&s, body),
        "/wallet/broadcasthex" => {
            drop(s);
            broadcast(state, body)
        }
        _ => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"Not Found")))
            .unwrap(),
    }
}

fn constant_call(s: &State, body: &Value) -> Response<Full<Bytes>> {
    let contract = hex41(body["contract_address"].as_str().unwrap_or_default());
    let selector = body["function_selector"].as_str().unwrap_or_default();
    let parameter = body["parameter"].as_str().unwrap_or_default();
    if selector != "balanceOf(address)" || parameter.len() != 64 {
        return value_response(&json!({
            "result": {
                "code": "CONTRACT_EXE_ERROR",
                "message": hex::encode("REVERT opcode executed")
            },
            "energy_used": 300
        }));
    }
    let holder = format!("41{}", &parameter[24..]);
    let balance = s
        .token_balances
        .get(&(contract.clone(), holder))
        .copied()
        .unwrap_or(0);
    value_response(&json!({
        "result": {"result": true},
        "energy_used": 935,
        "constant_result": [word_u128(balance)],
        "transaction": {
            "ret": [{}],
            "visible": false,
            "txID": hex::encode(Sha256::digest(parameter.as_bytes())),
            "raw_data": {
                "contract": [{
                    "parameter": {
                        "value": {
                            "data": format!("70a08231{parameter}"),
                            "owner_address": body["owner_address"],
                            "contract_address": contract
                        },
                        "type_url": "type.googleapis.com/protocol.TriggerSmartContract"
                    },
                    "type": "TriggerSmartContract"
                }]
            }
        }
    }))
}

/// Reads a protobuf varint.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The `raw_data` bytes (field 1) of a serialized `protocol.Transaction`.
fn raw_data_of(tx: &[u8]) -> Option<&[u8]> {
    let mut at = 0;
    while at < tx.len() {
        let key = varint(tx, &mut at)?;
        match key & 7 {
            0 => {
                varint(tx, &mut at)?;
            }
            2 => {
                let len = usize::try_from(varint(tx, &mut at)?).ok()?;
                let bytes = tx.get(at..at.checked_add(len)?)?;
                at += len;
                if key >> 3 == 1 {
                    return Some(bytes);
                }
            }
            _ => return None,
        }
    }
    None
}

fn broadcast(state: &Mutex<State>, body: &Value) -> Response<Full<Bytes>> {
    let hex_tx = body["transaction"].as_str().unwrap_or_default();
    let Some(raw) = hex::decode(hex_tx)
        .ok()
        .and_then(|tx| raw_data_of(&tx).map(<[u8]>::to_vec))
    else {
        return node_error(
            "class org.tron.core.exception.BadItemException : the transaction does not parse",
        );
    };
    let txid = hex::encode(Sha256::digest(&raw));
    let mut s = lock(state);
    let duplicate = s.broadcasts.iter().any(|b| b == hex_tx);
    s.broadcasts.push(hex_tx.to_owned());
    if duplicate {
        return value_response(&json!({
            "result": false,
            "code": "DUP_TRANSACTION_ERROR",
            "message": hex::encode("dup transaction"),
            "txid": txid
        }));
    }
    value_response(&json!({
        "result": true,
        "code": "SUCCESS",
        "message": "",
        "transaction": "{}",
        "txid": txid
    }))
}
