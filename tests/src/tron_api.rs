//! A TRON full-node HTTP API test server: a TRON node cannot run on these machines, so the
//! TRON adapter and the deposit pipeline are tested against this scriptable chain instead.
//!
//! It answers on `http://127.0.0.1:<port>` with the JSON a java-tron node (or TronGrid) writes,
//! `visible` false (hex `41…` addresses): the shapes follow the samples kept in
//! `tests/fixtures/tron/`, taken from the TRON developer documentation. Served paths:
//! `wallet/getnowblock`, `wallet/getblockbynum`, `wallet/gettransactioninfobyblocknum`,
//! `wallet/gettransactioninfobyid`, `wallet/gettransactionbyid` (transactions in blocks only,
//! as java-tron), `wallet/gettransactionfrompending`, `walletsolidity/getnowblock`,
//! `wallet/getaccount` (with Stake 2.0 `frozenV2`, `unfrozenV2` and delegated stake), `wallet/getaccountresource` (with the energy of staked and delegated
//! TRX, see below), `wallet/getcandelegatedmaxsize` (energy: the undelegated stake less the
//! share the owner's used energy holds; `{}` for 0), `wallet/triggerconstantcontract`
//! (`balanceOf(address)`, and `transfer(address,uint256)` run as its `owner_address`: the
//! energy it would use, or a revert), `wallet/broadcasthex`, `wallet/getchainparameters`;
//! anything else is a 404.
//!
//! **Sending.** `wallet/broadcasthex` decodes the protobuf `Transaction` and checks it as
//! java-tron does, in its order: a txID already in the pool or in a block →
//! `DUP_TRANSACTION_ERROR`; a reference block (`ref_block_bytes`, `ref_block_hash`) that is not
//! on the current chain → `TAPOS_ERROR`; an expiration at or before the head block's time (or
//! more than 24 h after it) → `TRANSACTION_EXPIRATION_ERROR`; a signature that does not
//! recover (secp256k1 over the txID, `v` 0/1 or 27/28) to the contract's owner → `SIGERROR`;
//! an unknown owner, a zero amount, a TRX balance short of amount plus account creation fee →
//! `CONTRACT_VALIDATE_ERROR`; not enough TRX for the bandwidth → `BANDWITH_ERROR`. It executes
//! TRX transfers, TRC20 `transfer(address,uint256)` calls and Stake 2.0 energy delegations
//! (`DelegateResourceContract` / `UnDelegateResourceContract` of ENERGY) only (`OTHER_ERROR`
//! otherwise).
//! An accepted transaction goes into a pool, and the next block made (by [`TronApi::append`],
//! [`TronApi::produce_block`], ...) includes the pool's transactions, executed in arrival
//! order on the server's state: TRX moves (a recipient without an account gets one), TRC20
//! balances move and the `Transfer` event is logged, so the deposit scanner sees them; a
//! TRC20 transfer above the sender's token balance is included as `REVERT` with its fee, one
//! whose energy burn exceeds `fee_limit` as `OUT_OF_ENERGY` with the whole `fee_limit`
//! burned. Fees follow java-tron's rules with the chain parameters: bandwidth (signed size +
//! 64) from staked, then free bandwidth (`wallet/getaccountresource`, whose `*Used` figures
//! grow), else burned at `getTransactionFee`; a new account costs `getCreateAccountFee`
//! instead of the bandwidth plus `getCreateNewAccountFeeInSystemContract`; energy
//! ([`TRC20_TRANSFER_ENERGY`], [`TRC20_TRANSFER_ENERGY_NEW_HOLDER`], [`TRC20_REVERT_ENERGY`])
//! from the account's energy, the rest burned at `getEnergyFee`. A pooled transaction that expires,
//! loses its reference block or is no longer valid is dropped ([`TronApi::evicted`]). A
//! reorganization does not undo what executed transactions did to the state, and the
//! transactions of dropped blocks do not return to the pool. Tests
//! can pause inclusion ([`TronApi::set_inclusion_paused`]), lose the answers of a path after
//! acting on the request ([`TronApi::lose_answers`]), make broadcasts answer a node-state code
//! such as `SERVER_BUSY` ([`TronApi::refuse_broadcasts`]), hide a transaction from the lookups
//! by id while its block lists it ([`TronApi::hide_from_lookups`]: a lagging backend behind a
//! load-balanced URL, or a lying endpoint), and read balances, resources and the pool back.
//!
//! **Energy from stake.** Tests give an account TRX staked for energy
//! ([`TronApi::set_energy_stake`], Stake 2.0 `frozenV2` ENERGY). Its `EnergyLimit` is the
//! energy of what it keeps of that stake plus what others delegate to it, by java-tron's
//! `EnergyProcessor.calculateGlobalEnergyLimitV2`: energy = stake (sun) / 10^6 ×
//! `TotalEnergyLimit` / `TotalEnergyWeight` (the network's daily energy over the TRX staked
//! for energy by everyone), computed here in integers, rounded down. The server uses
//! mainnet's `TotalEnergyLimit` of 180,000,000,000 and a `TotalEnergyWeight` of
//! 18,000,000,000 TRX ([`TOTAL_ENERGY_LIMIT`], [`TOTAL_ENERGY_WEIGHT`]): 10 energy per TRX
//! staked (mainnet's weight moves with staking; documented answers show 12.8 and 13.4
//! billion). An `EnergyLimit` set with [`TronApi::set_account_resource`] is added on top. A
//! delegation (java-tron `DelegateResourceActuator`) needs at least 1 TRX, an existing
//! receiver other than the owner, and that much of the owner's stake not already delegated
//! (`CONTRACT_VALIDATE_ERROR` otherwise); it moves that stake's energy to the receiver, and an
//! undelegation (at most what was delegated to that receiver) moves it back. Both pay only
//! bandwidth. An undelegation moves the receiver's used energy in proportion to the share of
//! its energy stake taken back (at most that stake's energy) to the owner, as java-tron's
//! `UnDelegateResourceActuator` does.
//!
//! Block 0, the genesis block, is always served (as a node prints it: no `number` and no
//! `timestamp`); its `blockID` names the test network, [`TEST_GENESIS_BLOCK_ID`] unless the
//! server was started with another ([`TronApi::start_on_network`]). A service pointed at the
//! server must be configured with that id (`[tron] genesis_block_id`), as it would be for a
//! testnet. Blocks between 0 and the first block are absent (`{}`).
//!
//! The chain is also scripted from the test: append blocks holding TRX transfers, TRC20
//! transfers (successful, `REVERT`, `OUT_OF_ENERGY`, any contract; these move no balances),
//! replace blocks (a reorganization:
//! the block and every later one get new ids), set balances and resources, make the server
//! stop answering ([`Mode`]), pad the answers of a path with whitespace (an answer too large
//! for a client's limit, same JSON), and read back the requests it got (headers included) and
//! the transactions broadcast to it.
//!
//! Addresses are given in base58 (`T…`) or `41…` hex. The server shares no code with the
//! adapter: it decodes base58check with the `bs58` crate, protobuf with its own reader,
//! recovers signatures with `k256` and `tiny-keccak`, and writes everything else itself.
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
/// Energy of a TRC20 `transfer` to an address that holds the token: a mainnet USDT transfer's,
/// the dynamic-energy penalty included (64,285: TronScan receipts as quoted by
/// docs.catfee.io, "How Much Energy and Bandwidth Does a USDT Transfer Consume?").
pub const TRC20_TRANSFER_ENERGY: i64 = 64_285;
/// Energy of a TRC20 `transfer` to an address whose balance is 0: a new storage slot, about
/// twice as much (130,285, same source). Both `triggerconstantcontract` and execution charge
/// it.
pub const TRC20_TRANSFER_ENERGY_NEW_HOLDER: i64 = 130_285;
/// Energy of a TRC20 `transfer` that reverts (the sender holds less than the amount).
pub const TRC20_REVERT_ENERGY: i64 = 8_890;

/// `TotalEnergyLimit`: mainnet's daily energy of the whole network (`getTotalEnergyLimit`).
pub const TOTAL_ENERGY_LIMIT: i64 = 180_000_000_000;
/// `TotalEnergyWeight`: TRX staked for energy by the whole network, chosen so that one TRX
/// staked yields 10 energy.
pub const TOTAL_ENERGY_WEIGHT: i64 = 18_000_000_000;
/// Sun per TRX.
const TRX_PRECISION: i64 = 1_000_000;

/// The energy `stake_sun` of TRX staked for energy yields a day (see the module documentation).
pub fn energy_of_stake(stake_sun: i64) -> i64 {
    let energy = i128::from(stake_sun) * i128::from(TOTAL_ENERGY_LIMIT)
        / (i128::from(TOTAL_ENERGY_WEIGHT) * i128::from(TRX_PRECISION));
    i64::try_from(energy).unwrap_or(i64::MAX)
}

fn transfer_energy(recipient_holds: bool) -> i64 {
    if recipient_holds {
        TRC20_TRANSFER_ENERGY
    } else {
        TRC20_TRANSFER_ENERGY_NEW_HOLDER
    }
}

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
    /// Stake 2.0 energy delegation (`undelegate`: taken back) of `balance` sun of stake.
    Delegation {
        from: String,
        to: String,
        balance: i64,
        undelegate: bool,
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
    /// A transaction the server received signed (`wallet/broadcasthex`): `raw` is its real
    /// `raw_data`, and these its other fields.
    signed: Option<Signed>,
    /// What executing it cost (broadcast transactions, once in a block).
    receipt: Option<Receipt>,
}

/// The fields of a broadcast transaction the JSON shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Signed {
    signature: Vec<u8>,
    ref_block_bytes: [u8; 2],
    ref_block_hash: [u8; 8],
    expiration: i64,
    timestamp: i64,
    fee_limit: i64,
    /// Bandwidth points it costs: its serialized size plus 64 (java-tron
    /// `BandwidthProcessor`: `MAX_RESULT_SIZE_IN_TX` per contract).
    bandwidth: i64,
}

/// What a broadcast transaction cost when the server executed it, in sun, energy and bandwidth
/// points (`TransactionInfo.receipt` and `fee`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Receipt {
    /// Everything burned: `net_fee + energy_fee + account creation`.
    fee: i64,
    /// Bandwidth taken from the account's staked or free bandwidth (nothing burned for it).
    net_usage: i64,
    /// TRX burned for bandwidth, or `getCreateAccountFee` when the transfer created an account.
    net_fee: i64,
    /// Energy taken from the account's staked energy.
    energy_usage: i64,
    energy_fee: i64,
    energy_usage_total: i64,
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
            signed: None,
            receipt: None,
        }
    }

    /// The parties of the transaction as `41…` hex: (owner, recipient).
    fn parties(&self) -> (&str, &str) {
        match &self.kind {
            TxKind::Trx { from, to, .. }
            | TxKind::Trc20 { from, to, .. }
            | TxKind::Delegation { from, to, .. } => (from, to),
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
            TxKind::Delegation {
                from,
                to,
                balance,
                undelegate,
            } => {
                let kind = if *undelegate {
                    "UnDelegateResourceContract"
                } else {
                    "DelegateResourceContract"
                };
                (
                    json!({
                        "parameter": {
                            "value": {
                                "owner_address": from,
                                "receiver_address": to,
                                "balance": balance,
                                "resource": "ENERGY"
                            },
                            "type_url": format!("type.googleapis.com/protocol.{kind}")
                        },
                        "type": kind
                    }),
                    None,
                )
            }
        };
        let (mut raw_data, signature) = match &self.signed {
            Some(signed) => {
                let mut raw_data = json!({
                    "contract": [contract],
                    "ref_block_bytes": hex::encode(signed.ref_block_bytes),
                    "ref_block_hash": hex::encode(signed.ref_block_hash),
                    "expiration": signed.expiration,
                    "timestamp": signed.timestamp,
                });
                if signed.fee_limit != 0 {
                    raw_data["fee_limit"] = json!(signed.fee_limit);
                }
                (raw_data, hex::encode(&signed.signature))
            }
            None => {
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
                (raw_data, format!("{}{}00", self.txid, self.txid))
            }
        };
        if raw_data.get("timestamp") == Some(&json!(0)) {
            raw_data
                .as_object_mut()
                .expect("an object")
                .remove("timestamp");
        }
        json!({
            "ret": [{"contractRet": self.result}],
            "signature": [signature],
            "txID": self.txid,
            "raw_data": raw_data,
            "raw_data_hex": hex::encode(&self.raw),
        })
    }

    /// The transaction as `wallet/gettransactionfrompending` prints it: no `ret` yet.
    fn pending_json(&self) -> Value {
        let mut tx = self.transaction_json(0, &"0".repeat(64));
        tx.as_object_mut().expect("an object").remove("ret");
        tx
    }

    /// The info of a broadcast transaction the server executed: the receipt's real figures,
    /// proto3 JSON (zeros left out).
    fn executed_info_json(&self, receipt: &Receipt, number: u64, timestamp: i64) -> Value {
        let mut r = serde_json::Map::new();
        for (key, value) in [
            ("energy_usage", receipt.energy_usage),
            ("energy_fee", receipt.energy_fee),
            ("energy_usage_total", receipt.energy_usage_total),
            ("net_usage", receipt.net_usage),
            ("net_fee", receipt.net_fee),
        ] {
            if value != 0 {
                r.insert(key.into(), json!(value));
            }
        }
        let mut info = json!({
            "id": self.txid,
            "blockNumber": number,
            "blockTimeStamp": timestamp,
            "contractResult": [""],
        });
        if receipt.fee != 0 {
            info["fee"] = json!(receipt.fee);
        }
        if let TxKind::Trc20 {
            token,
            from,
            to,
            amount,
        } = &self.kind
        {
            r.insert("result".into(), json!(self.result));
            info["contract_address"] = json!(token);
            if self.succeeded() {
                info["contractResult"] = json!([word_u128(1)]);
                info["log"] = json!([{
                    "address": &token[2..],
                    "topics": [TRANSFER_TOPIC, word_address(from), word_address(to)],
                    "data": word_u128(*amount)
                }]);
            } else {
                info["result"] = json!("FAILED");
                let message = if self.result == "REVERT" {
                    "REVERT opcode executed".to_owned()
                } else {
                    format!("Not enough energy for '{}' operation executing", "SSTORE")
                };
                info["resMessage"] = json!(hex::encode(message));
            }
        }
        info["receipt"] = Value::Object(r);
        info
    }

    fn info_json(&self, number: u64, timestamp: i64) -> Value {
        if let Some(receipt) = &self.receipt {
            return self.executed_info_json(receipt, number, timestamp);
        }
        match &self.kind {
            TxKind::Trx { .. } | TxKind::Delegation { .. } => json!({
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
    /// Sun staked for energy (Stake 2.0) and not delegated, per account.
    energy_stakes: HashMap<String, i64>,
    /// Sun of stake whose energy (owner, receiver) delegated.
    delegations: HashMap<(String, String), i64>,
    /// Sun unstaked (Stake 2.0 `unfrozenV2`) and not withdrawn yet, per account.
    unstaking: HashMap<String, i64>,
    chain_parameters: Vec<(String, i64)>,
    mode: Mode,
    requests: VecDeque<RecordedRequest>,
    broadcasts: Vec<String>,
    /// Whitespace bytes appended to every answer of a path.
    padding: HashMap<String, usize>,
    pending_replace: Option<PendingReplace>,
    /// Broadcast transactions the server accepted and no block holds yet, in arrival order.
    pool: Vec<TxSpec>,
    /// Blocks are made without the pool's transactions.
    inclusion_paused: bool,
    /// Requests of a path whose answer is lost: the server acts on the request, then closes
    /// the connection without answering.
    lost_answers: HashMap<String, usize>,
    /// Pool transactions dropped without a block, and why.
    evicted: Vec<(String, String)>,
    /// Every broadcast is answered with this code (a node in this state) before any check.
    broadcast_refusal: Option<String>,
    /// Transaction ids (lowercase) the lookups by id answer `{}` for.
    hidden_from_lookups: std::collections::HashSet<String>,
}

/// A refusal of `wallet/broadcasthex`: `api.Return.response_code` and message.
type Refusal = (&'static str, String);

/// How a broadcast transaction pays for its bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NetSource {
    Staked,
    Free,
    Burned,
}

/// What executing a transaction now would do.
#[derive(Debug, Clone, Copy)]
struct Plan {
    receipt: Receipt,
    net_source: NetSource,
    /// TRX moved from the owner to the recipient.
    trx_amount: i64,
    /// TRC20 units moved from the owner to the recipient (a successful transfer only).
    token_amount: u128,
    /// Sun of stake whose energy moves from the owner to the recipient (negative: back).
    delegated: i64,
    /// `SUCCESS`, `REVERT`, `OUT_OF_ENERGY`.
    result: &'static str,
}

/// The `api.Return` JSON of a refused broadcast (`message` as UTF-8 text, as
/// `BroadcastHexServlet` writes it).
fn refusal(code: &str, message: &str, txid: &str) -> Value {
    json!({
        "result": false,
        "code": code,
        "message": message,
        "transaction": "{}",
        "txid": txid
    })
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

    /// The pooled (accepted, not yet in a block) transaction `txid`.
    fn find_pooled(&self, txid: &str) -> Option<&TxSpec> {
        self.pool.iter().find(|t| t.txid.eq_ignore_ascii_case(txid))
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

    fn chain_parameter(&self, key: &str) -> i64 {
        self.chain_parameters
            .iter()
            .find(|(k, _)| k == key)
            .map_or(0, |(_, v)| *v)
    }

    /// A number of the `wallet/getaccountresource` answer set for `address` (0 when absent).
    fn resource(&self, address: &str, key: &str) -> i64 {
        self.resources
            .get(address)
            .and_then(|r| r.get(key))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    fn add_resource_use(&mut self, address: &str, key: &str, used: i64) {
        if used == 0 {
            return;
        }
        let entry = self
            .resources
            .entry(address.to_owned())
            .or_insert_with(|| json!({}));
        let now = entry.get(key).and_then(Value::as_i64).unwrap_or(0);
        entry[key] = json!(now + used);
    }

    fn head_time(&self) -> i64 {
        self.blocks.last().expect("a block").info.timestamp_ms
    }

    /// Whether `ref_block_bytes`/`ref_block_hash` name a block of the current chain (java-tron
    /// `Manager.validateTapos`: bytes 6..8 of the number, bytes 8..16 of the id).
    fn tapos_ok(&self, bytes: [u8; 2], hash: [u8; 8]) -> bool {
        let genesis = (0u64, self.genesis_block_id.as_str());
        self.blocks
            .iter()
            .map(|b| (b.info.number, b.info.hash.as_str()))
            .chain(std::iter::once(genesis))
            .any(|(number, id)| {
                number.to_be_bytes()[6..8] == bytes && id[16..32] == hex::encode(hash)
            })
    }

    /// The checks of java-tron `Manager.validateTapos` and `validateCommon` against the head.
    fn check_reference_and_expiration(&self, signed: &Signed) -> Result<(), Refusal> {
        if !self.tapos_ok(signed.ref_block_bytes, signed.ref_block_hash) {
            return Err(("TAPOS_ERROR", "Tapos check error".into()));
        }
        let head = self.head_time();
        if signed.expiration <= head || signed.expiration > head + 86_400_000 {
            return Err(("TRANSACTION_EXPIRATION_ERROR", "transaction expired".into()));
        }
        Ok(())
    }

    /// Bandwidth of `owner` for `bytes` points: staked, then free, else burned.
    fn bandwidth(&self, owner: &str, bytes: i64) -> (NetSource, i64) {
        let staked = self.resource(owner, "NetLimit") - self.resource(owner, "NetUsed");
        let free = self.resource(owner, "freeNetLimit") - self.resource(owner, "freeNetUsed");
        if staked >= bytes {
            (NetSource::Staked, 0)
        } else if free >= bytes {
            (NetSource::Free, 0)
        } else {
            (
                NetSource::Burned,
                bytes * self.chain_parameter("getTransactionFee"),
            )
        }
    }

    /// Stake 2.0 energy of `address`: its own undelegated stake and what is delegated to it,
    /// plus an `EnergyLimit` a test set directly.
    fn energy_limit(&self, address: &str) -> i64 {
        let acquired: i64 = self
            .delegations
            .iter()
            .filter(|((_, to), _)| to == address)
            .map(|(_, sun)| *sun)
            .sum();
        let own = self.energy_stakes.get(address).copied().unwrap_or(0);
        self.resource(address, "EnergyLimit") + energy_of_stake(own + acquired)
    }

    /// The Stake 2.0 fields of `wallet/getaccount` as java-tron prints them: `frozenV2` with
    /// one entry per resource (BANDWIDTH, the default type, printed without `type`; a zero
    /// amount left out), the energy stake delegated to others and acquired from them in
    /// `account_resource`, and `unfrozenV2` for TRX unstaking.
    fn stake_json(&self, address: &str, account: &mut Value) {
        let own = self.energy_stakes.get(address).copied().unwrap_or(0);
        let energy = if own == 0 {
            json!({"type": "ENERGY"})
        } else {
            json!({"type": "ENERGY", "amount": own})
        };
        account["frozenV2"] = json!([{}, energy, {"type": "TRON_POWER"}]);
        let lent: i64 = self
            .delegations
            .iter()
            .filter(|((from, _), _)| from == address)
            .map(|(_, sun)| *sun)
            .sum();
        let acquired: i64 = self
            .delegations
            .iter()
            .filter(|((_, to), _)| to == address)
            .map(|(_, sun)| *sun)
            .sum();
        if lent != 0 {
            account["account_resource"]["delegated_frozenV2_balance_for_energy"] = json!(lent);
        }
        if acquired != 0 {
            account["account_resource"]["acquired_delegated_frozenV2_balance_for_energy"] =
                json!(acquired);
        }
        if let Some(&sun) = self.unstaking.get(address) {
            account["unfrozenV2"] = json!([{
                "type": "ENERGY",
                "unfreeze_amount": sun,
                "unfreeze_expire_time": self.head_time() + 14 * 86_400_000
            }]);
        }
    }

    /// `wallet/getcandelegatedmaxsize` of energy: the stake `owner` keeps undelegated, less
    /// the share its own used energy holds (java-tron `Wallet.getCanDelegatedMaxSize`: the
    /// used energy's worth of stake at the network's ratio, rounded up, stays).
    fn delegatable_energy_stake(&self, owner: &str) -> i64 {
        let own = self.energy_stakes.get(owner).copied().unwrap_or(0);
        let used = i128::from(self.resource(owner, "EnergyUsed").max(0));
        let limit = i128::from(TOTAL_ENERGY_LIMIT);
        let held = (used * i128::from(TOTAL_ENERGY_WEIGHT) * i128::from(TRX_PRECISION) + limit - 1)
            / limit;
        i64::try_from((i128::from(own) - held).max(0)).unwrap_or(0)
    }

    /// The `wallet/getaccountresource` answer: what a test set, with `EnergyLimit` counting
    /// staked and delegated energy and the network totals it is computed from. `{}` for an
    /// account with nothing (as a node answers for an unknown account).
    fn account_resource_json(&self, address: &str) -> Value {
        let mut answer = self
            .resources
            .get(address)
            .cloned()
            .unwrap_or_else(|| json!({}));
        let energy = self.energy_limit(address);
        if energy != self.resource(address, "EnergyLimit") {
            answer["EnergyLimit"] = json!(energy);
        }
        if answer.as_object().is_some_and(|o| !o.is_empty()) {
            answer["TotalEnergyLimit"] = json!(TOTAL_ENERGY_LIMIT);
            answer["TotalEnergyWeight"] = json!(TOTAL_ENERGY_WEIGHT);
        }
        answer
    }

    /// A delegation (or undelegation) of `stake` sun of energy stake from `owner` (with its
    /// TRX `balance`) to `to`: java-tron `DelegateResourceActuator` and
    /// `UnDelegateResourceActuator` validation, then bandwidth as any transaction.
    fn plan_delegation(
        &self,
        (owner, balance): (&str, i64),
        to: &str,
        stake: i64,
        undelegate: bool,
        bytes: i64,
    ) -> Result<Plan, Refusal> {
        let invalid = |why: String| {
            Err((
                "CONTRACT_VALIDATE_ERROR",
                format!("contract validate error : {why}"),
            ))
        };
        if undelegate {
            if stake <= 0 {
                return invalid("unDelegateBalance must be more than 0TRX".into());
            }
            let Some(&delegated) = self.delegations.get(&(owner.to_owned(), to.to_owned())) else {
                return invalid("delegated Resource does not exist".into());
            };
            if delegated < stake {
                return invalid(format!(
                    "insufficient delegatedFrozenBalance(Energy), request={stake}, \
                     unDelegateBalance={delegated}"
                ));
            }
        } else {
            if stake < TRX_PRECISION {
                return invalid("delegateBalance must be greater than or equal to 1 TRX".into());
            }
            if self.energy_stakes.get(owner).copied().unwrap_or(0) < stake {
                return invalid(
                    "delegateBalance must be less than or equal to available FreezeEnergyV2 \
                     balance"
                        .into(),
                );
            }
        }
        if owner == to {
            return invalid("receiverAddress must not be the same as ownerAddress".into());
        }
        if !self.trx_balances.contains_key(to) {
            return invalid(format!("Account[{to}] not exists"));
        }
        let (net_source, net_fee) = self.bandwidth(owner, bytes);
        if balance < net_fee {
            return Err(("BANDWITH_ERROR", "AccountResourceInsufficient error".into()));
        }
        Ok(Plan {
            receipt: Receipt {
                fee: net_fee,
                net_usage: if net_source == NetSource::Burned {
                    0
                } else {
                    bytes
                },
                net_fee,
                ..Receipt::default()
            },
            net_source,
            trx_amount: 0,
            token_amount: 0,
            delegated: if undelegate { -stake } else { stake },
            result: "SUCCESS",
        })
    }

    /// What `tx` would do now, or why the node refuses it (contract validation, bandwidth).
    /// The rules of java-tron's `TransferActuator`, `BandwidthProcessor` and `VMActuator`, for
    /// the two kinds of transactions the server executes.
    fn plan(&self, tx: &TxSpec) -> Result<Plan, Refusal> {
        let signed = tx.signed.as_ref().expect("a broadcast transaction");
        let bytes = signed.bandwidth;
        let (owner, to) = tx.parties();
        let Some(&balance) = self.trx_balances.get(owner) else {
            return Err((
                "CONTRACT_VALIDATE_ERROR",
                format!("contract validate error : Validate TransferContract error, no OwnerAccount {owner}."),
            ));
        };
        match &tx.kind {
            TxKind::Trx { amount, .. } => {
                if *amount <= 0 {
                    return Err((
                        "CONTRACT_VALIDATE_ERROR",
                        "contract validate error : Amount must be greater than 0.".into(),
                    ));
                }
                if owner == to {
                    return Err((
                        "CONTRACT_VALIDATE_ERROR",
                        "contract validate error : Cannot transfer TRX to yourself.".into(),
                    ));
                }
                let creates = !self.trx_balances.contains_key(to);
                let system_fee = if creates {
                    self.chain_parameter("getCreateNewAccountFeeInSystemContract")
                } else {
                    0
                };
                if balance < amount.saturating_add(system_fee) {
                    return Err((
                        "CONTRACT_VALIDATE_ERROR",
                        "contract validate error : Validate TransferContract error, balance is not sufficient.".into(),
                    ));
                }
                let (net_source, net_fee) = if creates {
                    let staked = self.resource(owner, "NetLimit") - self.resource(owner, "NetUsed");
                    if staked >= bytes {
                        (NetSource::Staked, 0)
                    } else {
                        (
                            NetSource::Burned,
                            self.chain_parameter("getCreateAccountFee"),
                        )
                    }
                } else {
                    self.bandwidth(owner, bytes)
                };
                let fee = net_fee + system_fee;
                if balance < amount.saturating_add(fee) {
                    return Err(("BANDWITH_ERROR", "AccountResourceInsufficient error".into()));
                }
                Ok(Plan {
                    receipt: Receipt {
                        fee,
                        net_usage: if net_source == NetSource::Burned {
                            0
                        } else {
                            bytes
                        },
                        net_fee,
                        ..Receipt::default()
                    },
                    net_source,
                    trx_amount: *amount,
                    token_amount: 0,
                    delegated: 0,
                    result: "SUCCESS",
                })
            }
            TxKind::Delegation {
                balance: stake,
                undelegate,
                ..
            } => self.plan_delegation((owner, balance), to, *stake, *undelegate, bytes),
            TxKind::Trc20 { token, amount, .. } => {
                let max = self.chain_parameter("getMaxFeeLimit");
                if signed.fee_limit < 0 || signed.fee_limit > max {
                    return Err((
                        "CONTRACT_VALIDATE_ERROR",
                        format!("contract validate error : feeLimit must be >= 0 and <= {max}"),
                    ));
                }
                let (net_source, net_fee) = self.bandwidth(owner, bytes);
                if balance < net_fee {
                    return Err(("BANDWITH_ERROR", "AccountResourceInsufficient error".into()));
                }
                let held = |holder: &str| {
                    self.token_balances
                        .get(&(token.clone(), holder.to_owned()))
                        .copied()
                        .unwrap_or(0)
                };
                let (mut result, energy) = if held(owner) >= *amount {
                    ("SUCCESS", transfer_energy(held(to) > 0))
                } else {
                    ("REVERT", TRC20_REVERT_ENERGY)
                };
                let staked = (self.energy_limit(owner) - self.resource(owner, "EnergyUsed")).max(0);
                let from_stake = energy.min(staked);
                let price = self.chain_parameter("getEnergyFee");
                let mut energy_fee = (energy - from_stake) * price;
                // The burn is bounded by fee_limit and by what the account holds after paying
                // for bandwidth: beyond that the call runs out of energy and burns it all.
                let can_burn = signed.fee_limit.min(balance - net_fee);
                let mut energy_total = energy;
                if energy_fee > can_burn {
                    result = "OUT_OF_ENERGY";
                    energy_fee = can_burn;
                    energy_total = from_stake + if price > 0 { can_burn / price } else { 0 };
                }
                Ok(Plan {
                    receipt: Receipt {
                        fee: net_fee + energy_fee,
                        net_usage: if net_source == NetSource::Burned {
                            0
                        } else {
                            bytes
                        },
                        net_fee,
                        energy_usage: from_stake,
                        energy_fee,
                        energy_usage_total: energy_total,
                    },
                    net_source,
                    trx_amount: 0,
                    token_amount: if result == "SUCCESS" { *amount } else { 0 },
                    delegated: 0,
                    result,
                })
            }
        }
    }

    /// Executes `tx` on the balances and resources: the transaction as it goes into a block.
    fn apply(&mut self, mut tx: TxSpec, plan: Plan) -> TxSpec {
        let (owner, to) = {
            let (o, t) = tx.parties();
            (o.to_owned(), t.to_owned())
        };
        let receipt = plan.receipt;
        *self.trx_balances.get_mut(&owner).expect("the owner exists") -=
            plan.trx_amount + receipt.fee;
        if let TxKind::Trx { .. } = tx.kind {
            *self.trx_balances.entry(to.clone()).or_insert(0) += plan.trx_amount;
        }
        if let TxKind::Trc20 { token, .. } = &tx.kind {
            if plan.token_amount > 0 {
                let token = token.clone();
                *self
                    .token_balances
                    .entry((token.clone(), owner.clone()))
                    .or_insert(0) -= plan.token_amount;
                *self.token_balances.entry((token, to.clone())).or_insert(0) += plan.token_amount;
            }
        }
        if plan.delegated < 0 {
            self.transfer_energy_usage(&owner, &to, -plan.delegated);
        }
        if plan.delegated != 0 {
            *self.energy_stakes.entry(owner.clone()).or_insert(0) -= plan.delegated;
            let lent = self
                .delegations
                .entry((owner.clone(), to.clone()))
                .or_insert(0);
            *lent += plan.delegated;
            if *lent == 0 {
                self.delegations.remove(&(owner.clone(), to.clone()));
            }
        }
        let used_key = match plan.net_source {
            NetSource::Staked => Some("NetUsed"),
            NetSource::Free => Some("freeNetUsed"),
            NetSource::Burned => None,
        };
        if let Some(key) = used_key {
            self.add_resource_use(&owner, key, receipt.net_usage);
        }
        self.add_resource_use(&owner, "EnergyUsed", receipt.energy_usage);
        tx.result = plan.result.to_owned();
        tx.receipt = Some(receipt);
        tx
    }

    /// java-tron `UnDelegateResourceActuator`: an undelegation of `stake` sun takes the
    /// receiver's used energy in proportion to the stake's share of all the receiver's energy
    /// stake (its own and what it acquired), at most the energy that stake yields, and moves it
    /// to the owner (`unDelegateIncrease`). Computed before the delegation shrinks.
    fn transfer_energy_usage(&mut self, owner: &str, receiver: &str, stake: i64) {
        let acquired: i64 = self
            .delegations
            .iter()
            .filter(|((_, to), _)| to == receiver)
            .map(|(_, sun)| *sun)
            .sum();
        let all = self.energy_stakes.get(receiver).copied().unwrap_or(0) + acquired;
        let used = self.resource(receiver, "EnergyUsed");
        if all <= 0 || used <= 0 {
            return;
        }
        let share = i128::from(used) * i128::from(stake) / i128::from(all);
        let moved = i64::try_from(share)
            .unwrap_or(i64::MAX)
            .min(energy_of_stake(stake));
        self.add_resource_use(receiver, "EnergyUsed", -moved);
        self.add_resource_use(owner, "EnergyUsed", moved);
    }

    /// The pool's transactions that go into a block on top of the current head, executed in
    /// arrival order; the others that can no longer be included (expired, reference block
    /// gone, no longer valid) are dropped.
    fn take_pool(&mut self) -> Vec<TxSpec> {
        if self.inclusion_paused {
            return Vec::new();
        }
        let mut included = Vec::new();
        for tx in std::mem::take(&mut self.pool) {
            let signed = tx.signed.clone().expect("a broadcast transaction");
            let checked = self
                .check_reference_and_expiration(&signed)
                .and_then(|()| self.plan(&tx));
            match checked {
                Ok(plan) => included.push(self.apply(tx, plan)),
                Err((code, message)) => self.evicted.push((tx.txid, format!("{code}: {message}"))),
            }
        }
        included
    }

    /// Drops the pool's transactions the new head made void (expired, reference block gone).
    fn evict_void(&mut self) {
        for tx in std::mem::take(&mut self.pool) {
            let signed = tx.signed.clone().expect("a broadcast transaction");
            match self.check_reference_and_expiration(&signed) {
                Ok(()) => self.pool.push(tx),
                Err((code, message)) => self.evicted.push((tx.txid, format!("{code}: {message}"))),
            }
        }
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
        let mut spec = spec;
        if !self.blocks.is_empty() {
            spec.txs.extend(self.take_pool());
        }
        let block = self.make_block(number, &parent, spec);
        let info = block.info.clone();
        self.blocks.push(block);
        self.evict_void();
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
            energy_stakes: HashMap::new(),
            delegations: HashMap::new(),
            unstaking: HashMap::new(),
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
            pool: Vec::new(),
            inclusion_paused: false,
            lost_answers: HashMap::new(),
            evicted: Vec::new(),
            broadcast_refusal: None,
            hidden_from_lookups: std::collections::HashSet::new(),
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

    /// Produces the next block: the pool's transactions go into it (unless inclusion is
    /// paused), executed in arrival order. Same as `append(BlockSpec::new())`.
    pub fn produce_block(&self) -> BlockInfo {
        self.append(BlockSpec::new())
    }

    /// `gettransactioninfobyid`, `gettransactionbyid` and `gettransactionfrompending` answer
    /// `{}` for `txid` from now on, as a lagging or lying endpoint would; blocks
    /// (`getblockbynum`) and their infos (`gettransactioninfobyblocknum`) still list it.
    pub fn hide_from_lookups(&self, txid: &str) {
        self.state()
            .hidden_from_lookups
            .insert(txid.to_ascii_lowercase());
    }

    /// While paused, blocks are made without the pool's transactions; the pool keeps them
    /// until they expire (a node that never gets the transaction to a block producer).
    pub fn set_inclusion_paused(&self, paused: bool) {
        self.state().inclusion_paused = paused;
    }

    /// The next `count` requests for `path` (e.g. `/wallet/broadcasthex`) are acted on, then
    /// their answer is lost: the connection is closed without one.
    pub fn lose_answers(&self, path: &str, count: usize) {
        self.state().lost_answers.insert(path.to_owned(), count);
    }

    /// Every broadcast is refused with `code` (`SERVER_BUSY`, `BLOCK_UNSOLIDIFIED`, ...: the
    /// node's state), before the transaction is looked at; `None` ends it.
    pub fn refuse_broadcasts(&self, code: Option<&str>) {
        self.state().broadcast_refusal = code.map(str::to_owned);
    }

    /// The txIDs of the accepted broadcast transactions no block holds yet, in arrival order.
    pub fn pool(&self) -> Vec<String> {
        self.state().pool.iter().map(|t| t.txid.clone()).collect()
    }

    /// The broadcast transactions dropped from the pool without a block, with the reason.
    pub fn evicted(&self) -> Vec<(String, String)> {
        self.state().evicted.clone()
    }

    /// The TRX balance of `address` in sun, `None` for an account the chain does not know.
    pub fn trx_balance(&self, address: &str) -> Option<i64> {
        self.state().trx_balances.get(&hex41(address)).copied()
    }

    /// `balanceOf(holder)` on `token`.
    pub fn trc20_balance(&self, token: &str, holder: &str) -> u128 {
        self.state()
            .token_balances
            .get(&(hex41(token), hex41(holder)))
            .copied()
            .unwrap_or(0)
    }

    /// The `wallet/getaccountresource` answer for `address` as it stands (`{}` when unknown):
    /// broadcast transactions add to its `freeNetUsed`, `NetUsed` and `EnergyUsed`; its
    /// `EnergyLimit` counts staked and delegated energy.
    pub fn account_resource(&self, address: &str) -> Value {
        self.state().account_resource_json(&hex41(address))
    }

    /// `address` has `sun` staked for energy (Stake 2.0), none of it delegated.
    pub fn set_energy_stake(&self, address: &str, sun: i64) {
        self.state().energy_stakes.insert(hex41(address), sun);
    }

    /// `from` delegates the energy of `sun` of its stake to `to` (taken from its energy stake).
    pub fn set_delegation(&self, from: &str, to: &str, sun: i64) {
        let mut s = self.state();
        let (owner, receiver) = (hex41(from), hex41(to));
        *s.energy_stakes.entry(owner.clone()).or_insert(0) -= sun;
        s.delegations.insert((owner, receiver), sun);
    }

    /// `address` has `sun` unstaked and waiting for its withdrawal (Stake 2.0 `unfrozenV2`).
    pub fn set_unstaking(&self, address: &str, sun: i64) {
        self.state().unstaking.insert(hex41(address), sun);
    }

    /// What `address` keeps of its energy stake (sun), delegations taken out.
    pub fn energy_stake(&self, address: &str) -> i64 {
        self.state()
            .energy_stakes
            .get(&hex41(address))
            .copied()
            .unwrap_or(0)
    }

    /// Sun of stake whose energy `from` delegates to `to`.
    pub fn delegated_energy(&self, from: &str, to: &str) -> i64 {
        self.state()
            .delegations
            .get(&(hex41(from), hex41(to)))
            .copied()
            .unwrap_or(0)
    }

    /// Someone else (an operator by hand) takes back what `from` delegates to `to`: the stake
    /// is `from`'s again, and an undelegation of it is refused from now on.
    pub fn take_back_delegation(&self, from: &str, to: &str) {
        let mut s = self.state();
        let (owner, receiver) = (hex41(from), hex41(to));
        if let Some(sun) = s.delegations.remove(&(owner.clone(), receiver)) {
            *s.energy_stakes.entry(owner).or_insert(0) += sun;
        }
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
    let lost = {
        let mut s = lock(&state);
        match s.lost_answers.get_mut(&path) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    };
    if lost {
        // Acted on; the answer never leaves.
        return Err(std::io::Error::other("the test node lost its answer"));
    }
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
        "/wallet/gettransactioninfobyid"
        | "/wallet/gettransactionbyid"
        | "/wallet/gettransactionfrompending"
            if s.hidden_from_lookups.contains(
                &body["value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
            ) =>
        {
            value_response(&json!({}))
        }
        "/wallet/gettransactioninfobyid" => {
            let txid = body["value"].as_str().unwrap_or_default();
            match s.find_tx(txid) {
                Some((tx, number, timestamp)) => value_response(&tx.info_json(number, timestamp)),
                None => value_response(&json!({})),
            }
        }
        "/wallet/gettransactionbyid" => {
            let txid = body["value"].as_str().unwrap_or_default();
            match s.find_tx(txid) {
                Some((tx, number, timestamp)) => {
                    let parent = s
                        .block(number)
                        .map(|b| b.info.parent_hash.clone())
                        .unwrap_or_default();
                    value_response(&tx.transaction_json(timestamp, &parent))
                }
                None => value_response(&json!({})),
            }
        }
        "/wallet/gettransactionfrompending" => {
            let txid = body["value"].as_str().unwrap_or_default();
            match s.find_pooled(txid) {
                Some(tx) => value_response(&tx.pending_json()),
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
                    s.stake_json(&address, &mut account);
                    value_response(&account)
                }
                None => value_response(&json!({})),
            }
        }
        "/wallet/getaccountresource" => {
            let address = hex41(body["address"].as_str().unwrap_or_default());
            value_response(&s.account_resource_json(&address))
        }
        "/wallet/getcandelegatedmaxsize" => {
            let owner = hex41(body["owner_address"].as_str().unwrap_or_default());
            if body["type"].as_i64() != Some(1) {
                // Bandwidth stake is not modelled: nothing to delegate.
                return value_response(&json!({}));
            }
            match s.delegatable_energy_stake(&owner) {
                0 => value_response(&json!({})),
                max => value_response(&json!({ "max_size": max })),
            }
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

/// `transfer(to, amount)` run as `owner` without a transaction: what the node predicts.
fn simulated_transfer(s: &State, body: &Value, contract: &str, parameter: &str) -> Value {
    let owner = hex41(body["owner_address"].as_str().unwrap_or_default());
    let to = format!("41{}", &parameter[24..64]);
    let amount = u128::from_str_radix(&parameter[96..128], 16).unwrap_or(u128::MAX);
    let high_zero = parameter[64..96].bytes().all(|b| b == b'0');
    let held = |holder: &str| {
        s.token_balances
            .get(&(contract.to_owned(), holder.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    let transaction = |ret: Value| {
        json!({
            "ret": [ret],
            "visible": false,
            "txID": hex::encode(Sha256::digest(format!("{owner}{parameter}").as_bytes())),
            "raw_data": {
                "contract": [{
                    "parameter": {
                        "value": {
                            "data": format!("a9059cbb{parameter}"),
                            "owner_address": owner,
                            "contract_address": contract
                        },
                        "type_url": "type.googleapis.com/protocol.TriggerSmartContract"
                    },
                    "type": "TriggerSmartContract"
                }]
            }
        })
    };
    if high_zero && held(&owner) >= amount {
        json!({
            "result": {"result": true},
            "energy_used": transfer_energy(held(&to) > 0),
            "constant_result": [word_u128(1)],
            "transaction": transaction(json!({}))
        })
    } else {
        // java-tron `Wallet.triggerConstantContract`: the call ran and reverted; the API call
        // itself succeeded.
        json!({
            "result": {"result": true, "message": hex::encode("REVERT opcode executed")},
            "energy_used": TRC20_REVERT_ENERGY,
            "constant_result": [""],
            "transaction": transaction(json!({"ret": "FAILED"}))
        })
    }
}

fn constant_call(s: &State, body: &Value) -> Response<Full<Bytes>> {
    let contract = hex41(body["contract_address"].as_str().unwrap_or_default());
    let selector = body["function_selector"].as_str().unwrap_or_default();
    let parameter = body["parameter"].as_str().unwrap_or_default();
    if selector == "transfer(address,uint256)"
        && parameter.len() == 128
        && parameter.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return value_response(&simulated_transfer(s, body, &contract, parameter));
    }
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

/// A protobuf field value: varint (wire type 0) or length-delimited (wire type 2), the only
/// two the messages read here use.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// The fields of a protobuf message, in order; `None` when it does not parse.
fn fields(bytes: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let value = match key & 7 {
            0 => Field::Varint(varint(bytes, &mut at)?),
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
                let value = bytes.get(at..at.checked_add(len)?)?;
                at += len;
                Field::Bytes(value)
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

fn bytes_field<'a>(fields: &[(u64, Field<'a>)], number: u64) -> Option<&'a [u8]> {
    fields.iter().rev().find_map(|(n, f)| match f {
        Field::Bytes(b) if *n == number => Some(*b),
        _ => None,
    })
}

/// An int64 field (two's complement in a varint); 0 when absent.
fn int_field(fields: &[(u64, Field<'_>)], number: u64) -> i64 {
    fields
        .iter()
        .rev()
        .find_map(|(n, f)| match f {
            Field::Varint(v) if *n == number => Some(i64::from_ne_bytes(v.to_ne_bytes())),
            _ => None,
        })
        .unwrap_or(0)
}

/// A `41…` address field as hex.
fn address_field(fields: &[(u64, Field<'_>)], number: u64) -> Option<String> {
    let bytes = bytes_field(fields, number)?;
    (bytes.len() == 21 && bytes[0] == 0x41).then(|| hex::encode(bytes))
}

/// A decoded `protocol.Transaction` the server can execute, or why not (`OTHER_ERROR`: the
/// server only knows TRX transfers, TRC20 `transfer` calls and energy delegations).
fn decode_transaction(tx: &[u8]) -> Result<TxSpec, Refusal> {
    let other = |why: &str| ("OTHER_ERROR", format!("other error : {why}"));
    let top = fields(tx).ok_or_else(|| other("the transaction does not parse"))?;
    let raw = bytes_field(&top, 1).ok_or_else(|| other("no raw_data"))?;
    let signatures: Vec<&[u8]> = top
        .iter()
        .filter_map(|(n, f)| match f {
            Field::Bytes(b) if *n == 2 => Some(*b),
            _ => None,
        })
        .collect();
    let raw_fields = fields(raw).ok_or_else(|| other("raw_data does not parse"))?;
    let contracts: Vec<&[u8]> = raw_fields
        .iter()
        .filter_map(|(n, f)| match f {
            Field::Bytes(b) if *n == 11 => Some(*b),
            _ => None,
        })
        .collect();
    let [contract] = contracts.as_slice() else {
        return Err(other(
            "the test server executes transactions of one contract",
        ));
    };
    let contract = fields(contract).ok_or_else(|| other("contract does not parse"))?;
    let kind = int_field(&contract, 1);
    let any = fields(bytes_field(&contract, 2).ok_or_else(|| other("no parameter"))?)
        .ok_or_else(|| other("parameter does not parse"))?;
    let type_url = String::from_utf8_lossy(bytes_field(&any, 1).unwrap_or_default()).into_owned();
    let value = fields(bytes_field(&any, 2).unwrap_or_default())
        .ok_or_else(|| other("contract value does not parse"))?;
    let owner = address_field(&value, 1).ok_or_else(|| other("no owner_address"))?;
    let kind = match (kind, type_url.as_str()) {
        (1, "type.googleapis.com/protocol.TransferContract") => TxKind::Trx {
            from: owner,
            to: address_field(&value, 2).ok_or_else(|| other("no to_address"))?,
            amount: int_field(&value, 3),
        },
        (31, "type.googleapis.com/protocol.TriggerSmartContract") => {
            let data = bytes_field(&value, 4).unwrap_or_default();
            if int_field(&value, 3) != 0
                || data.len() != 68
                || data[..4] != [0xa9, 0x05, 0x9c, 0xbb]
            {
                return Err(other(
                    "the test server executes TRC20 transfer(address,uint256) calls only",
                ));
            }
            let word = |i: usize| hex::encode(&data[4 + 32 * i..4 + 32 * (i + 1)]);
            let (to, amount) = (word(0), word(1));
            if !to[..24].bytes().all(|b| b == b'0') || !amount[..32].bytes().all(|b| b == b'0') {
                return Err(other("transfer arguments out of range"));
            }
            TxKind::Trc20 {
                token: address_field(&value, 2).ok_or_else(|| other("no contract_address"))?,
                from: owner,
                to: format!("41{}", &to[24..]),
                amount: u128::from_str_radix(&amount[32..], 16).expect("hex"),
            }
        }
        (57, "type.googleapis.com/protocol.DelegateResourceContract")
        | (58, "type.googleapis.com/protocol.UnDelegateResourceContract") => {
            // balance_contract.proto: owner_address = 1, resource = 2, balance = 3,
            // receiver_address = 4 (lock = 5, lock_period = 6: delegations only).
            if int_field(&value, 2) != 1 {
                return Err(other("the test server delegates ENERGY (resource 1) only"));
            }
            if kind == 57 && (int_field(&value, 5) != 0 || int_field(&value, 6) != 0) {
                return Err(other("the test server makes unlocked delegations only"));
            }
            TxKind::Delegation {
                from: owner,
                to: address_field(&value, 4).ok_or_else(|| other("no receiver_address"))?,
                balance: int_field(&value, 3),
                undelegate: kind == 58,
            }
        }
        (kind, url) => return Err(other(&format!("contract type {kind} ({url})"))),
    };
    let [signature] = signatures.as_slice() else {
        return Err((
            "SIGERROR",
            format!("Validate signature error: {} signatures", signatures.len()),
        ));
    };
    if signature.len() != 65 {
        return Err((
            "SIGERROR",
            format!(
                "Validate signature error: Signature size is {}",
                signature.len()
            ),
        ));
    }
    let fixed = |number: u64, len: usize| {
        bytes_field(&raw_fields, number)
            .filter(|b| b.len() == len)
            .ok_or_else(|| other("bad ref_block_bytes or ref_block_hash"))
    };
    let mut ref_block_bytes = [0u8; 2];
    ref_block_bytes.copy_from_slice(fixed(1, 2)?);
    let mut ref_block_hash = [0u8; 8];
    ref_block_hash.copy_from_slice(fixed(4, 8)?);
    Ok(TxSpec {
        txid: hex::encode(Sha256::digest(raw)),
        raw: raw.to_vec(),
        kind,
        result: "SUCCESS".into(),
        signed: Some(Signed {
            signature: signature.to_vec(),
            ref_block_bytes,
            ref_block_hash,
            expiration: int_field(&raw_fields, 8),
            timestamp: int_field(&raw_fields, 14),
            fee_limit: int_field(&raw_fields, 18),
            bandwidth: i64::try_from(tx.len()).expect("small") + 64,
        }),
        receipt: None,
    })
}

/// The `41…` hex address of the key that made `signature` (`r ‖ s ‖ v`, `v` the recovery id
/// or 27 + it, as java-tron accepts) over `txid`.
fn signer_of(txid: &[u8], signature: &[u8]) -> Option<String> {
    use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
    use tiny_keccak::{Hasher, Keccak};
    let v = signature[64];
    let v = if v >= 27 { v - 27 } else { v };
    let sig = Signature::from_slice(&signature[..64]).ok()?;
    let key = VerifyingKey::recover_from_prehash(txid, &sig, RecoveryId::from_byte(v)?).ok()?;
    let point = key.to_encoded_point(false);
    let mut hash = [0u8; 32];
    let mut keccak = Keccak::v256();
    keccak.update(&point.as_bytes()[1..]);
    keccak.finalize(&mut hash);
    Some(format!("41{}", hex::encode(&hash[12..])))
}

/// `wallet/broadcasthex`, checked in the order of java-tron `Wallet.broadcastTransaction` and
/// `Manager.processTransaction`: duplicate, TaPoS, expiration, signature, then the contract
/// (owner, balance) and bandwidth. An accepted transaction goes into the pool.
fn broadcast(state: &Mutex<State>, body: &Value) -> Response<Full<Bytes>> {
    let hex_tx = body["transaction"].as_str().unwrap_or_default();
    let Some(tx_bytes) = hex::decode(hex_tx).ok().filter(|b| fields(b).is_some()) else {
        return node_error(
            "class org.tron.core.exception.BadItemException : the transaction does not parse",
        );
    };
    let mut s = lock(state);
    s.broadcasts.push(hex_tx.to_owned());
    let txid = raw_data_txid(&tx_bytes);
    if let Some(code) = s.broadcast_refusal.clone() {
        let message = match code.as_str() {
            "SERVER_BUSY" => "Server busy.",
            "BLOCK_UNSOLIDIFIED" => "Block unsolidified.",
            "NO_CONNECTION" => "No connection.",
            _ => "refused by the test server",
        };
        return value_response(&refusal(&code, message, &txid));
    }
    let tx = match decode_transaction(&tx_bytes) {
        Ok(tx) => tx,
        Err((code, message)) => return value_response(&refusal(code, &message, &txid)),
    };
    if s.find_pooled(&txid).is_some() || s.find_tx(&txid).is_some() {
        return value_response(&refusal("DUP_TRANSACTION_ERROR", "dup transaction", &txid));
    }
    let signed = tx.signed.clone().expect("decoded signed");
    if let Err((code, message)) = s.check_reference_and_expiration(&signed) {
        return value_response(&refusal(code, &message, &txid));
    }
    let owner = tx.parties().0.to_owned();
    let digest = hex::decode(&txid).expect("hex");
    if signer_of(&digest, &signed.signature).as_deref() != Some(owner.as_str()) {
        return value_response(&refusal(
            "SIGERROR",
            &format!("validate signature error : the signature does not recover to {owner}"),
            &txid,
        ));
    }
    if let Err((code, message)) = s.plan(&tx) {
        return value_response(&refusal(code, &message, &txid));
    }
    s.pool.push(tx);
    value_response(&json!({
        "result": true,
        "code": "SUCCESS",
        "message": "",
        "transaction": "{}",
        "txid": txid
    }))
}

/// The txID of serialized transaction bytes (SHA-256 of field 1), or "" when there is none.
fn raw_data_txid(tx: &[u8]) -> String {
    fields(tx)
        .and_then(|f| bytes_field(&f, 1).map(|raw| hex::encode(Sha256::digest(raw))))
        .unwrap_or_default()
}
