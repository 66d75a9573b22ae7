//! From a block and its transaction infos to the [`ScannedBlock`] the core takes. Pure: no I/O,
//! so it is unit-tested on the documentation's sample responses and benchmarked alone.
//!
//! What is reported (the core decides what is a deposit):
//!
//! - **TRX**: every `TransferContract` with `amount > 0`, `succeeded` when the block lists the
//!   transaction with `ret[0].contractRet == "SUCCESS"`. Any other result is reported with
//!   `succeeded = false` (never dropped, so an operator can see it); `log_index` is `None`.
//!   TRX moved by a contract (internal transactions) is not reported.
//! - **TRC20**: every `Transfer(address,address,uint256)` log whose emitting contract is in the
//!   catalog, in a transaction whose `receipt.result` is `"SUCCESS"` (and whose info has no
//!   `"result": "FAILED"` and whose block entry has no other `contractRet`). `log_index` is the
//!   log's position in its transaction's `log` array: it does not depend on where the
//!   transaction sits in a block, so the same transfer keeps its identity when a
//!   reorganization moves it into another block.
//! - A failed contract call (`REVERT`, `OUT_OF_ENERGY`, ...) keeps no logs. When its top-level
//!   call is `transfer(to, amount)` or `transferFrom(from, to, amount)` on a catalog contract it
//!   is reported with `succeeded = false` and `log_index = Some(0)` (the index its `Transfer`
//!   log would have had); failed calls made through other contracts are invisible.
//! - Logs of contracts outside the catalog are never reported. A `Transfer` log whose topics
//!   are not two zero-padded addresses, or whose amount does not fit in 128 bits, and a TRX
//!   transfer whose addresses are not `41…` addresses (genesis block), are skipped with a
//!   warning: none of them can be credited either way.
//!
//! Addresses are returned in base58 (`TronAddress` Display), transaction hashes in lowercase hex.

use std::collections::HashMap;

use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::asset::{AssetCatalog, AssetKind};
use custody_core::chain::TxHash;
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};

use crate::abi;
use crate::api;

pub const CONTRACT_RESULT_SUCCESS: &str = "SUCCESS";
pub const CONTRACT_TYPE_TRANSFER: &str = "TransferContract";
pub const CONTRACT_TYPE_TRIGGER: &str = "TriggerSmartContract";
pub const CONTRACT_TYPE_CREATE: &str = "CreateSmartContract";

/// A scan failure: malformed data is permanent; data that disagrees with itself (a block and
/// transaction infos from two forks) is transient.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("malformed node answer: {0}")]
    Malformed(String),
    #[error("inconsistent node answers: {0}")]
    Inconsistent(String),
}

impl From<ScanError> for PortError {
    fn from(e: ScanError) -> Self {
        match e {
            ScanError::Malformed(_) => PortError::permanent("tron", e.to_string()),
            ScanError::Inconsistent(_) => PortError::transient("tron", e.to_string()),
        }
    }
}

fn malformed(what: impl Into<String>) -> ScanError {
    ScanError::Malformed(what.into())
}

/// The TRON part of the asset catalog: the native coin's code and the TRC20 contracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TronCatalog {
    native_code: String,
    tokens: HashMap<[u8; 20], String>,
}

impl TronCatalog {
    /// Reads the TRON assets of `catalog`; a contract that is not a TRON address is an error.
    pub fn from_assets(catalog: &AssetCatalog) -> Result<Self, String> {
        let mut native_code = None;
        let mut tokens = HashMap::new();
        for asset in catalog.of_network(Network::Tron) {
            match (asset.kind, &asset.contract) {
                (AssetKind::Native, _) => native_code = Some(asset.code.clone()),
                (_, Some(contract)) => {
                    let address = TronAddress::parse(contract).map_err(|e| {
                        format!("TRON asset {}: contract {contract:?}: {e}", asset.code)
                    })?;
                    tokens.insert(*address.as_bytes(), asset.code.clone());
                }
                (_, None) => return Err(format!("TRON asset {} has no contract", asset.code)),
            }
        }
        Ok(TronCatalog {
            native_code: native_code.unwrap_or_else(|| "TRX".into()),
            tokens,
        })
    }

    pub fn native_code(&self) -> &str {
        &self.native_code
    }

    /// The asset code of a catalog contract.
    pub fn token_code(&self, contract: &TronAddress) -> Option<&str> {
        self.tokens.get(contract.as_bytes()).map(String::as_str)
    }
}

/// A 32-byte hash in lowercase hex, checked.
fn hash_hex(s: &str, what: &str) -> Result<String, ScanError> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed(format!("{what} {s:?} is not 64 hex digits")));
    }
    Ok(s.to_ascii_lowercase())
}

/// The header of a block answer, checked: a block id is the block number (8 bytes, big-endian)
/// followed by 24 bytes of the header hash, and the parent id starts with the number before.
pub fn header_of(
    block_id: &str,
    header: Option<&api::BlockHeaderJson>,
) -> Result<BlockHeader, ScanError> {
    let raw = &header
        .ok_or_else(|| malformed("block without block_header"))?
        .raw_data;
    let number = u64::try_from(raw.number).map_err(|_| malformed("negative block number"))?;
    let hash = hash_hex(block_id, "blockID")?;
    if hash[..16] != format!("{number:016x}") {
        return Err(malformed(format!(
            "blockID {hash} does not start with block number {number}"
        )));
    }
    let parent_hash = hash_hex(&raw.parent_hash, "parentHash")?;
    if number > 0 && parent_hash[..16] != format!("{:016x}", number - 1) {
        return Err(malformed(format!(
            "parentHash {parent_hash} of block {number} is not an id of block {}",
            number - 1
        )));
    }
    Ok(BlockHeader {
        number,
        hash,
        parent_hash,
        timestamp_ms: raw.timestamp,
    })
}

/// Whether `tx` can emit logs (a contract call or creation): only these need their info.
fn is_call(tx: &api::Transaction) -> bool {
    tx.raw_data
        .contract
        .iter()
        .any(|c| c.kind == CONTRACT_TYPE_TRIGGER || c.kind == CONTRACT_TYPE_CREATE)
}

/// Whether the block has a transaction that can emit logs (a contract call or creation); a
/// block without one needs no transaction infos.
pub fn needs_infos(block: &api::Block) -> bool {
    block.transactions.iter().any(is_call)
}

/// The txIDs (lowercase hex) of the block's contract calls and creations: the transactions
/// whose infos [`scan_with_call_infos`] needs.
pub fn call_txids(block: &api::Block) -> Result<Vec<String>, ScanError> {
    block
        .transactions
        .iter()
        .filter(|tx| is_call(tx))
        .map(tx_hash)
        .collect()
}

/// `41…` hex (the node's form with `visible` false), or base58 when a proxy forces `visible`.
fn node_address(s: &str) -> Result<TronAddress, ScanError> {
    TronAddress::from_hex(s)
        .or_else(|_| TronAddress::parse(s))
        .map_err(|e| malformed(format!("address {s:?}: {e}")))
}

/// A log's emitting contract: 20 bytes of hex "without the prefix 0x41" (also accepted: with
/// it, or base58 as `visible: true` rewrites it).
fn log_address(s: &str) -> Option<TronAddress> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() == 40 {
        let mut bytes = [0u8; 20];
        hex::decode_to_slice(s, &mut bytes).ok()?;
        return Some(TronAddress::from_bytes(bytes));
    }
    TronAddress::from_hex(s)
        .or_else(|_| TronAddress::parse(s))
        .ok()
}

fn tx_hash(tx: &api::Transaction) -> Result<String, ScanError> {
    hash_hex(&tx.tx_id, "txID")
}

/// The block's own verdict on a transaction: `Some(true)` for `SUCCESS`, `Some(false)` for any
/// other result (an absent `contractRet` is `DEFAULT`), `None` when `ret` is empty.
fn block_verdict(tx: &api::Transaction) -> Option<bool> {
    tx.ret
        .first()
        .map(|r| r.contract_ret.as_deref() == Some(CONTRACT_RESULT_SUCCESS))
}

fn info_succeeded(info: &api::TransactionInfo) -> bool {
    let receipt_ok = info
        .receipt
        .as_ref()
        .and_then(|r| r.result.as_deref())
        .is_some_and(|r| r == CONTRACT_RESULT_SUCCESS);
    let result_ok = info.result.as_deref().is_none_or(|r| r != "FAILED");
    receipt_ok && result_ok
}

/// The `Transfer` logs of catalog contracts in `info`, as (log index, contract, from, to,
/// amount).
fn catalog_transfer_logs<'c>(
    info: &api::TransactionInfo,
    catalog: &'c TronCatalog,
    tx: &str,
) -> Vec<(u32, &'c str, TronAddress, TronAddress, u128)> {
    let mut out = Vec::new();
    for (index, log) in info.log.iter().enumerate() {
        let Some(contract) = log_address(&log.address) else {
            continue;
        };
        let Some(code) = catalog.token_code(&contract) else {
            continue;
        };
        if log.topics.len() != 3 || abi::hex_word(&log.topics[0]) != Some(abi::TOPIC_TRANSFER) {
            continue;
        }
        let decoded = (|| {
            let from = abi::word_address(&abi::hex_word(&log.topics[1])?)?;
            let to = abi::word_address(&abi::hex_word(&log.topics[2])?)?;
            let amount = abi::word_u128(&abi::hex_word(&log.data)?)?;
            Some((from, to, amount))
        })();
        let Ok(index) = u32::try_from(index) else {
            break;
        };
        match decoded {
            Some((from, to, amount)) => out.push((index, code, from, to, amount)),
            None => tracing::warn!(
                tx,
                log_index = index,
                asset = code,
                "skipping a Transfer log of a catalog token that does not decode"
            ),
        }
    }
    out
}

/// The transfers of `block`. `infos` is the `gettransactioninfobyblocknum` answer for the same
/// block; it may be empty only when [`needs_infos`] is false.
pub fn scan(
    block: &api::Block,
    infos: &[api::TransactionInfo],
    catalog: &TronCatalog,
) -> Result<ScannedBlock, ScanError> {
    scan_inner(block, infos, catalog, Cover::Block)
}

/// The transfers of `block` from the infos of its contract calls only, as
/// `gettransactioninfobyid` gives them one by one (when the whole block's infos are too large
/// to read at once). `infos` must be exactly those of [`call_txids`], each of this block's
/// number; anything else is [`ScanError::Inconsistent`] (a reorganization under the reads).
pub fn scan_with_call_infos(
    block: &api::Block,
    infos: &[api::TransactionInfo],
    catalog: &TronCatalog,
) -> Result<ScannedBlock, ScanError> {
    scan_inner(block, infos, catalog, Cover::Calls)
}

/// What the infos given to a scan cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    /// Every transaction of the block (`gettransactioninfobyblocknum`).
    Block,
    /// The contract calls only, read one by one.
    Calls,
}

fn scan_inner(
    block: &api::Block,
    infos: &[api::TransactionInfo],
    catalog: &TronCatalog,
    cover: Cover,
) -> Result<ScannedBlock, ScanError> {
    let header = header_of(&block.block_id, block.block_header.as_ref())?;

    let mut by_id: HashMap<String, &api::TransactionInfo> = HashMap::with_capacity(infos.len());
    for info in infos {
        let id = hash_hex(&info.id, "transaction info id")?;
        let of_block = u64::try_from(info.block_number) == Ok(header.number);
        // A block's own list may leave the number out (proto3 zero); one read by id may not.
        let unnumbered_ok = cover == Cover::Block && info.block_number == 0;
        if !of_block && !unnumbered_ok {
            return Err(ScanError::Inconsistent(format!(
                "transaction info {id} is of block {}, not {}",
                info.block_number, header.number
            )));
        }
        by_id.insert(id, info);
    }
    if cover == Cover::Calls {
        let calls = call_txids(block)?;
        let same = calls.len() == by_id.len() && calls.iter().all(|id| by_id.contains_key(id));
        if !same {
            return Err(ScanError::Inconsistent(format!(
                "block {} ({}) has {} contract calls but {} of their infos were read: a \
                 reorganization may be under way",
                header.number,
                header.hash,
                calls.len(),
                by_id.len()
            )));
        }
    } else if !infos.is_empty() {
        // Both answers must describe the same block: after a reorganization between the two
        // calls, the transaction sets differ.
        let same = infos.len() == block.transactions.len()
            && block
                .transactions
                .iter()
                .all(|tx| by_id.contains_key(&tx.tx_id.to_ascii_lowercase()));
        if !same {
            return Err(ScanError::Inconsistent(format!(
                "block {} ({}) lists {} transactions but its transaction infos {}: a \
                 reorganization may be under way",
                header.number,
                header.hash,
                block.transactions.len(),
                infos.len()
            )));
        }
    }

    let mut transfers = Vec::new();
    for tx in &block.transactions {
        for contract in &tx.raw_data.contract {
            match contract.kind.as_str() {
                CONTRACT_TYPE_TRANSFER => {
                    let value = &contract.parameter.value;
                    let amount = value.amount.unwrap_or(0);
                    if amount <= 0 {
                        continue;
                    }
                    let from = node_address(value.owner_address.as_deref().unwrap_or(""));
                    let to = node_address(value.to_address.as_deref().unwrap_or(""));
                    let (Ok(from), Ok(to)) = (from, to) else {
                        // Only the genesis block has such transfers; none can be ours.
                        tracing::warn!(
                            tx = %tx.tx_id,
                            "skipping a TRX transfer whose addresses are not TRON addresses"
                        );
                        continue;
                    };
                    transfers.push(ObservedTransfer {
                        tx_hash: typed_hash(&tx_hash(tx)?)?,
                        log_index: None,
                        asset_code: catalog.native_code().to_owned(),
                        from: from.into(),
                        to: to.into(),
                        amount: Amount::from_units(u128::from(amount.unsigned_abs())),
                        succeeded: block_verdict(tx) == Some(true),
                    });
                }
                CONTRACT_TYPE_TRIGGER | CONTRACT_TYPE_CREATE => {
                    let hash = tx_hash(tx)?;
                    let info = by_id.get(&hash).ok_or_else(|| {
                        ScanError::Inconsistent(format!(
                            "no transaction info for contract call {hash} in block {}",
                            header.number
                        ))
                    })?;
                    let succeeded = info_succeeded(info) && block_verdict(tx) != Some(false);
                    let logs = catalog_transfer_logs(info, catalog, &hash);
                    let typed = typed_hash(&hash)?;
                    if !logs.is_empty() {
                        for (log_index, code, from, to, amount) in logs {
                            transfers.push(ObservedTransfer {
                                tx_hash: typed,
                                log_index: Some(log_index),
                                asset_code: code.to_owned(),
                                from: from.into(),
                                to: to.into(),
                                amount: Amount::from_units(amount),
                                succeeded,
                            });
                        }
                    } else if !succeeded && contract.kind == CONTRACT_TYPE_TRIGGER {
                        if let Some(t) = failed_call(&contract.parameter.value, catalog, typed)? {
                            transfers.push(t);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(ScannedBlock { header, transfers })
}

/// A transaction id as the port carries it.
fn typed_hash(hash: &str) -> Result<TxHash, ScanError> {
    TxHash::parse(hash).map_err(ScanError::Inconsistent)
}

/// The transfer a failed top-level `transfer`/`transferFrom` call on a catalog token intended.
fn failed_call(
    value: &api::ContractValue,
    catalog: &TronCatalog,
    tx_hash: TxHash,
) -> Result<Option<ObservedTransfer>, ScanError> {
    let Some(contract) = value.contract_address.as_deref() else {
        return Ok(None);
    };
    let contract = node_address(contract)?;
    let Some(code) = catalog.token_code(&contract) else {
        return Ok(None);
    };
    let Some(data) = value.data.as_deref().and_then(|d| hex::decode(d).ok()) else {
        return Ok(None);
    };
    let Some(call) = abi::decode_transfer_call(&data) else {
        return Ok(None);
    };
    let from = match call.from {
        Some(from) => from,
        None => node_address(value.owner_address.as_deref().unwrap_or(""))?,
    };
    if call.amount == 0 {
        return Ok(None);
    }
    Ok(Some(ObservedTransfer {
        tx_hash,
        log_index: Some(0),
        asset_code: code.to_owned(),
        from: from.into(),
        to: call.to.into(),
        amount: Amount::from_units(call.amount),
        succeeded: false,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    const USDT_HEX: &str = "41a614f803b6fd780986a42c78ec9c7f77e6ded13c";
    const FROM_HEX: &str = "41c8599111f29c1e1e061265b4af93ea1f274ad78a";
    const TO_HEX: &str = "41b6e708a39781c96bd399c7657780ff9fe9f052a8";

    fn catalog() -> TronCatalog {
        TronCatalog::from_assets(&AssetCatalog::mainnet()).unwrap()
    }

    fn word(hex41: &str) -> String {
        format!("{:0>64}", &hex41[2..])
    }

    fn txid(i: u8) -> String {
        hex::encode([i; 32])
    }

    fn block(txs: Vec<Value>) -> api::Block {
        serde_json::from_value(json!({
            "blockID": format!("{:016x}{}", 10u64, "ab".repeat(24)),
            "block_header": {"raw_data": {
                "number": 10, "timestamp": 30_000,
                "parentHash": format!("{:016x}{}", 9u64, "cd".repeat(24))
            }},
            "transactions": txs
        }))
        .unwrap()
    }

    fn trx(i: u8, amount: i64, ret: Value) -> Value {
        json!({"ret": ret, "txID": txid(i), "raw_data": {"contract": [{
            "parameter": {"value": {"amount": amount, "owner_address": FROM_HEX,
                                    "to_address": TO_HEX}},
            "type": "TransferContract"}]}})
    }

    fn call(i: u8, data: &str, ret: &str) -> Value {
        json!({"ret": [{"contractRet": ret}], "txID": txid(i), "raw_data": {"contract": [{
            "parameter": {"value": {"data": data, "owner_address": FROM_HEX,
                                    "contract_address": USDT_HEX}},
            "type": "TriggerSmartContract"}]}})
    }

    fn info(i: u8, receipt: &str, logs: Value) -> api::TransactionInfo {
        let mut v = json!({"id": txid(i), "blockNumber": 10,
                           "receipt": {"result": receipt}, "log": logs});
        if receipt != "SUCCESS" {
            v["result"] = json!("FAILED");
        }
        serde_json::from_value(v).unwrap()
    }

    fn transfer_log(address: &str, topics: Vec<String>, data: &str) -> Value {
        json!({"address": address, "topics": topics, "data": data})
    }

    fn topics() -> Vec<String> {
        vec![
            hex::encode(abi::TOPIC_TRANSFER),
            word(FROM_HEX),
            word(TO_HEX),
        ]
    }

    #[test]
    fn trx_results_and_amounts() {
        let b = block(vec![
            trx(1, 5, json!([{"contractRet": "SUCCESS"}])),
            trx(2, 6, json!([{}])),
            trx(3, 0, json!([{"contractRet": "SUCCESS"}])),
            trx(4, 7, json!([])),
        ]);
        assert!(!needs_infos(&b));
        let s = scan(&b, &[], &catalog()).unwrap();
        let got: Vec<_> = s
            .transfers
            .iter()
            .map(|t| (t.amount.units(), t.succeeded, t.log_index))
            .collect();
        // The zero transfer is left out; DEFAULT and a missing ret are not successes.
        assert_eq!(
            got,
            vec![(5, true, None), (6, false, None), (7, false, None)]
        );
        assert_eq!(
            s.transfers[0].from.as_str(),
            "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"
        );
        assert_eq!(s.transfers[0].tx_hash.to_hex(), txid(1));
    }

    #[test]
    fn logs_are_read_in_every_address_form_and_odd_ones_are_skipped() {
        let amount = format!("{:064x}", 77u128);
        let too_big = format!("1{}", "0".repeat(63));
        let mut dirty = topics();
        dirty[1] = format!("ff{}", &dirty[1][2..]);
        let mut approval = topics();
        approval[0] = "8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925".into();
        let logs = json!([
            transfer_log(&USDT_HEX[2..], topics(), &amount),
            transfer_log(USDT_HEX, topics(), &amount),
            transfer_log("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", topics(), &amount),
            transfer_log(&USDT_HEX[2..], dirty, &amount),
            transfer_log(&USDT_HEX[2..], approval, &amount),
            transfer_log(&USDT_HEX[2..], topics()[..2].to_vec(), &amount),
            transfer_log(&USDT_HEX[2..], topics(), &too_big),
            transfer_log(&"77".repeat(20), topics(), &amount),
        ]);
        let b = block(vec![call(1, "00", "SUCCESS")]);
        let s = scan(&b, &[info(1, "SUCCESS", logs)], &catalog()).unwrap();
        let indexes: Vec<_> = s.transfers.iter().map(|t| t.log_index).collect();
        assert_eq!(indexes, vec![Some(0), Some(1), Some(2)]);
        assert!(s
            .transfers
            .iter()
            .all(|t| t.succeeded && t.amount.units() == 77));
    }

    #[test]
    fn a_failed_call_is_reported_from_its_call_data() {
        let to = TronAddress::from_hex(TO_HEX).unwrap();
        let other = TronAddress::from_bytes([3; 20]);
        let transfer = hex::encode(abi::transfer_call_data(&to, 9));
        let mut transfer_from = abi::SELECTOR_TRANSFER_FROM.to_vec();
        transfer_from.extend_from_slice(&abi::address_word(&other));
        transfer_from.extend_from_slice(&abi::address_word(&to));
        transfer_from.extend_from_slice(&abi::uint_word(4));
        let approve = format!("095ea7b3{}{}", word(TO_HEX), "00".repeat(32));
        let b = block(vec![
            call(1, &transfer, "REVERT"),
            call(2, &hex::encode(&transfer_from), "OUT_OF_ENERGY"),
            call(3, &approve, "REVERT"),
            // The block says SUCCESS but the info says FAILED: not a success.
            call(4, &transfer, "SUCCESS"),
        ]);
        let infos = vec![
            info(1, "REVERT", json!([])),
            info(2, "OUT_OF_ENERGY", json!([])),
            info(3, "REVERT", json!([])),
            info(4, "REVERT", json!([])),
        ];
        let s = scan(&b, &infos, &catalog()).unwrap();
        let got: Vec<_> = s
            .transfers
            .iter()
            .map(|t| {
                (
                    t.tx_hash.to_hex(),
                    t.from.as_str().to_owned(),
                    t.amount.units(),
                    t.succeeded,
                )
            })
            .collect();
        let from = TronAddress::from_hex(FROM_HEX).unwrap().to_string();
        assert_eq!(
            got,
            vec![
                (txid(1), from.clone(), 9, false),
                (txid(2), other.to_string(), 4, false),
                (txid(4), from, 9, false),
            ]
        );
        assert!(s.transfers.iter().all(|t| t.log_index == Some(0)));
    }

    #[test]
    fn infos_must_match_the_block() {
        let b = block(vec![call(1, "00", "SUCCESS")]);
        let mut wrong_block = info(1, "SUCCESS", json!([]));
        wrong_block.block_number = 11;
        assert!(matches!(
            scan(&b, &[wrong_block], &catalog()),
            Err(ScanError::Inconsistent(_))
        ));
        let extra = vec![info(1, "SUCCESS", json!([])), info(2, "SUCCESS", json!([]))];
        assert!(matches!(
            scan(&b, &extra, &catalog()),
            Err(ScanError::Inconsistent(_))
        ));
        let e: PortError = ScanError::Inconsistent("x".into()).into();
        assert_eq!(e.retry, custody_core::error::Retry::Transient);
        let e: PortError = ScanError::Malformed("x".into()).into();
        assert_eq!(e.retry, custody_core::error::Retry::Permanent);
    }

    #[test]
    fn infos_read_one_by_one_must_be_exactly_the_calls_of_the_block() {
        let amount = format!("{:064x}", 5u128);
        let logs = json!([transfer_log(&USDT_HEX[2..], topics(), &amount)]);
        let b = block(vec![
            trx(1, 5, json!([{"contractRet": "SUCCESS"}])),
            call(2, "00", "SUCCESS"),
            call(3, "00", "SUCCESS"),
        ]);
        assert_eq!(call_txids(&b).unwrap(), vec![txid(2), txid(3)]);
        let infos = vec![
            info(2, "SUCCESS", logs.clone()),
            info(3, "SUCCESS", json!([])),
        ];
        // The same transfers as from the whole block's infos (which include the TRX one's).
        let mut all = infos.clone();
        all.insert(0, info(1, "SUCCESS", json!([])));
        let whole = scan(&b, &all, &catalog()).unwrap();
        assert_eq!(scan_with_call_infos(&b, &infos, &catalog()).unwrap(), whole);
        assert_eq!(whole.transfers.len(), 2);

        let inconsistent = |infos: Vec<api::TransactionInfo>| {
            matches!(
                scan_with_call_infos(&b, &infos, &catalog()),
                Err(ScanError::Inconsistent(_))
            )
        };
        // A call without its info, an info of no call of the block, an info of another block,
        // an info without a block number.
        assert!(inconsistent(vec![info(2, "SUCCESS", logs.clone())]));
        assert!(inconsistent(vec![
            info(2, "SUCCESS", logs.clone()),
            info(3, "SUCCESS", json!([])),
            info(4, "SUCCESS", json!([])),
        ]));
        let mut elsewhere = info(3, "SUCCESS", json!([]));
        elsewhere.block_number = 11;
        assert!(inconsistent(vec![
            info(2, "SUCCESS", logs.clone()),
            elsewhere
        ]));
        let mut unnumbered = info(3, "SUCCESS", json!([]));
        unnumbered.block_number = 0;
        assert!(inconsistent(vec![info(2, "SUCCESS", logs), unnumbered]));
    }

    #[test]
    fn headers_are_checked() {
        let ok = block(vec![]);
        let h = header_of(&ok.block_id, ok.block_header.as_ref()).unwrap();
        assert_eq!((h.number, h.timestamp_ms), (10, 30_000));
        assert!(header_of(&ok.block_id, None).is_err());
        assert!(header_of("00", ok.block_header.as_ref()).is_err());
        let upper = ok.block_id.to_ascii_uppercase();
        assert_eq!(
            header_of(&upper, ok.block_header.as_ref()).unwrap().hash,
            ok.block_id
        );
        let mut bad_parent = ok.block_header.clone().unwrap();
        bad_parent.raw_data.parent_hash = format!("{:016x}{}", 8u64, "cd".repeat(24));
        assert!(header_of(&ok.block_id, Some(&bad_parent)).is_err());
    }

    #[test]
    fn the_catalog_must_name_tron_contracts() {
        let mut assets = AssetCatalog::mainnet().all().to_vec();
        let usdt = assets
            .iter_mut()
            .find(|a| a.network == Network::Tron && a.code == "USDT");
        usdt.unwrap().contract = Some("0x55d398326f99059fF775485246999027B3197955".into());
        let catalog = AssetCatalog::new(assets).unwrap();
        assert!(TronCatalog::from_assets(&catalog).is_err());
        let c = TronCatalog::from_assets(&AssetCatalog::mainnet()).unwrap();
        assert_eq!(c.native_code(), "TRX");
        assert_eq!(
            c.token_code(&TronAddress::from_hex(USDT_HEX).unwrap()),
            Some("USDT")
        );
    }
}
