//! [`BscChain`]: the [`ChainSource`] of BSC. See the crate documentation for what a scan
//! returns and what it cannot see.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use custody_core::address::BscAddress;
use custody_core::asset::{Asset, AssetKind};
use custody_core::chain::TxHash;
use custody_core::error::PortError;
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
use custody_core::ports::{ChainSource, OnchainBalance};
use custody_core::{Amount, Network};
use serde_json::{json, Value};

use crate::codec::{self, TRANSFER_TOPIC};
use crate::rpc::{CallFailure, RpcClient, RpcError, RpcHealth, RpcSettings, PORT};
use crate::settings::{BscConfigError, BscSettings, Catalog};

/// The BSC adapter: reads blocks, transfers and balances through [`RpcClient`].
#[derive(Debug)]
pub struct BscChain {
    rpc: RpcClient,
    chain_id: u64,
    catalog: Catalog,
    /// Whether to ask `eth_getBlockReceipts`; turned off for good the first time a node says
    /// it does not have the method.
    block_receipts: AtomicBool,
}

/// A native value transfer found in the block body, waiting for its receipt status.
struct NativeCandidate {
    tx_index: u64,
    tx_hash: String,
    from: BscAddress,
    to: BscAddress,
    amount: Amount,
}

/// A `Transfer` log of a catalog token.
struct TokenCandidate {
    tx_index: u64,
    tx_hash: String,
    log_index: u32,
    asset_code: String,
    from: BscAddress,
    to: BscAddress,
    amount: Amount,
}

fn malformed(what: impl std::fmt::Display) -> PortError {
    PortError::permanent(PORT, format!("malformed answer: {what}"))
}

/// The block changed under the scan (a reorganization between two calls): try again later.
fn changed_under_scan(what: impl std::fmt::Display) -> PortError {
    PortError::transient(
        PORT,
        format!("block changed during the scan (reorganization?): {what}"),
    )
}

/// Receipt facts by transaction hash: succeeded, block-wide index of the first log.
type Statuses = HashMap<String, (bool, Option<u64>)>;

/// The error when the answer for one single item is over the response limit: nothing smaller
/// can be asked for, so it stays permanent until the limit is raised.
fn too_large_alone(f: CallFailure, item: &str) -> PortError {
    match f {
        CallFailure::TooLarge(e) => PortError::permanent(
            PORT,
            format!(
                "{item} alone is larger than the response limit (raise response_bytes_max): {}",
                e.message
            ),
        ),
        CallFailure::Failed(e) => e,
    }
}

/// A block answer: `None` for null (no such block), an error for anything but an object.
fn checked_block(block: Value) -> Result<Option<Value>, PortError> {
    if block.is_null() {
        return Ok(None);
    }
    if !block.is_object() {
        return Err(malformed("eth_getBlockByNumber: not an object"));
    }
    Ok(Some(block))
}

fn field<'a>(obj: &'a Value, name: &str, what: &str) -> Result<&'a Value, PortError> {
    obj.get(name)
        .ok_or_else(|| malformed(format!("{what} has no {name:?}")))
}

impl BscChain {
    /// Checks the settings and builds the adapter. Does no I/O: each endpoint's chain id is
    /// checked the first time it is used (a mismatch is a permanent error, logged at `error`).
    pub fn new(settings: BscSettings) -> Result<Self, BscConfigError> {
        let catalog = Catalog::from_assets(&settings.assets)?;
        let rpc = RpcClient::new(&RpcSettings {
            urls: settings.urls,
            expected_chain_id: Some(settings.chain_id),
            request_timeout_ms: settings.request_timeout_ms,
            response_bytes_max: settings.response_bytes_max,
            batch_max: settings.batch_max,
            allow_insecure_http: settings.allow_insecure_http,
        })?;
        Ok(BscChain {
            rpc,
            chain_id: settings.chain_id,
            catalog,
            block_receipts: AtomicBool::new(settings.use_block_receipts),
        })
    }

    /// Health of every configured endpoint, in configured order (for the admin `rpcs` list).
    pub fn health(&self) -> Vec<RpcHealth> {
        self.rpc.health()
    }

    /// Contacts every endpoint once so that [`BscChain::health`] is fresh for all of them.
    pub async fn probe_all(&self) {
        self.rpc.probe_all().await;
    }

    /// The JSON-RPC client, for other BSC adapters (a DEX router) sharing its endpoints.
    pub fn rpc(&self) -> &RpcClient {
        &self.rpc
    }

    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    async fn block_by_number(&self, number: u64, full: bool) -> Result<Option<Value>, PortError> {
        let block = self
            .rpc
            .call(
                "eth_getBlockByNumber",
                json!([codec::quantity_hex(number), full]),
            )
            .await?;
        checked_block(block)
    }

    /// Block `number` with its transaction objects. When the whole block is over the response
    /// limit, its transaction hashes are read instead, then the transactions by hash in
    /// batches split to fit, each checked to be in this block.
    async fn full_block(&self, number: u64) -> Result<Option<Value>, PortError> {
        let call = (
            "eth_getBlockByNumber",
            json!([codec::quantity_hex(number), true]),
        );
        let block = match self.rpc.try_batch(&[call]).await {
            Ok(mut answers) => {
                let answer = answers.pop().unwrap_or(Ok(Value::Null));
                return checked_block(
                    answer.map_err(|e| e.into_port_error("eth_getBlockByNumber"))?,
                );
            }
            Err(CallFailure::Failed(e)) => return Err(e),
            Err(CallFailure::TooLarge(e)) => {
                tracing::warn!(
                    block = number,
                    error = %e.message,
                    "BSC block over the response limit: reading its transactions by hash"
                );
                self.block_by_number(number, false).await?
            }
        };
        let Some(mut block) = block else {
            return Ok(None);
        };
        let block_hash = codec::hash(field(&block, "hash", "block")?).map_err(malformed)?;
        let hashes = field(&block, "transactions", "block")?
            .as_array()
            .ok_or_else(|| malformed("block transactions is not a list"))?
            .iter()
            .map(|h| codec::hash(h).map_err(malformed))
            .collect::<Result<Vec<_>, _>>()?;
        let calls: Vec<(&str, Value)> = hashes
            .iter()
            .map(|h| ("eth_getTransactionByHash", json!([format!("0x{h}")])))
            .collect();
        let answers = self
            .rpc
            .batch_split(&calls)
            .await
            .map_err(|f| too_large_alone(f, "a transaction"))?;
        let mut txs = Vec::with_capacity(hashes.len());
        for (h, answer) in hashes.iter().zip(answers) {
            let tx = answer.map_err(|e| e.into_port_error("eth_getTransactionByHash"))?;
            let in_block = tx
                .get("blockHash")
                .filter(|b| !b.is_null())
                .map(|b| codec::hash(b).map_err(malformed))
                .transpose()?;
            if in_block.as_deref() != Some(block_hash.as_str()) {
                return Err(changed_under_scan(format!(
                    "transaction 0x{h} is no longer in block 0x{block_hash}"
                )));
            }
            txs.push(tx);
        }
        block["transactions"] = Value::Array(txs);
        Ok(Some(block))
    }

    async fn scan(&self, number: u64) -> Result<Option<ScannedBlock>, PortError> {
        let Some(block) = self.full_block(number).await? else {
            return Ok(None);
        };
        let header = parse_header(&block, number)?;
        let txs = field(&block, "transactions", "block")?
            .as_array()
            .ok_or_else(|| malformed("block transactions is not a list"))?;
        if txs.is_empty() {
            return Ok(Some(ScannedBlock {
                header,
                transfers: Vec::new(),
            }));
        }
        let natives = txs
            .iter()
            .filter_map(|tx| native_candidate(tx).transpose())
            .collect::<Result<Vec<_>, _>>()?;

        let (tokens, mut statuses) = match self.logs_and_receipts(&header.hash, &natives).await? {
            Some(found) => found,
            None => self.logs_and_receipts_in_parts(txs, &header.hash).await?,
        };

        // Status of every transaction that carries a candidate.
        let needed: HashSet<&str> = natives
            .iter()
            .map(|n| n.tx_hash.as_str())
            .chain(tokens.iter().map(|t| t.tx_hash.as_str()))
            .collect();
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|h| !statuses.contains_key(*h))
            .collect();
        if !missing.is_empty() {
            statuses.extend(self.receipts(&missing, &header.hash, false).await?.0);
        }

        let status = |hash: &str| -> Result<(bool, Option<u64>), PortError> {
            statuses
                .get(hash)
                .copied()
                .ok_or_else(|| changed_under_scan(format!("no receipt for 0x{hash}")))
        };
        let mut ordered: Vec<((u64, Option<u32>), ObservedTransfer)> =
            Vec::with_capacity(natives.len() + tokens.len());
        for n in natives {
            let (succeeded, _) = status(&n.tx_hash)?;
            ordered.push((
                (n.tx_index, None),
                ObservedTransfer {
                    tx_hash: TxHash::parse(&n.tx_hash).map_err(malformed)?,
                    log_index: None,
                    asset_code: self.catalog.native_code.clone(),
                    from: n.from.into(),
                    to: n.to.into(),
                    amount: n.amount,
                    succeeded,
                },
            ));
        }
        for t in tokens {
            let (succeeded, first_log) = status(&t.tx_hash)?;
            // Reported as the log's position in its transaction, not in the block: a transfer
            // re-mined in another block after a reorganization keeps its identity.
            let position = first_log
                .and_then(|first| u64::from(t.log_index).checked_sub(first))
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| {
                    changed_under_scan(format!(
                        "log {} of 0x{} is not among its receipt's logs",
                        t.log_index, t.tx_hash
                    ))
                })?;
            ordered.push((
                (t.tx_index, Some(t.log_index)),
                ObservedTransfer {
                    tx_hash: TxHash::parse(&t.tx_hash).map_err(malformed)?,
                    log_index: Some(position),
                    asset_code: t.asset_code,
                    from: t.from.into(),
                    to: t.to.into(),
                    amount: t.amount,
                    succeeded,
                },
            ));
        }
        ordered.sort_by_key(|(key, _)| *key);
        let transfers: Vec<ObservedTransfer> = ordered.into_iter().map(|(_, t)| t).collect();
        tracing::debug!(
            block = number,
            hash = %header.hash,
            transactions = txs.len(),
            transfers = transfers.len(),
            "scanned BSC block"
        );
        Ok(Some(ScannedBlock { header, transfers }))
    }

    /// The `eth_getLogs` call for the catalog's `Transfer` logs of block `block_hash`.
    fn logs_call(&self, block_hash: &str) -> (&'static str, Value) {
        (
            "eth_getLogs",
            json!([{
                "blockHash": format!("0x{block_hash}"),
                "address": self.catalog.log_filter,
                "topics": [TRANSFER_TOPIC],
            }]),
        )
    }

    /// The token candidates of an `eth_getLogs` answer for block `block_hash`.
    fn logs_answer(
        &self,
        answer: Result<Value, RpcError>,
        block_hash: &str,
    ) -> Result<Vec<TokenCandidate>, PortError> {
        let logs = answer.map_err(|e| {
            if e.message.to_ascii_lowercase().contains("unknown block")
                || e.message.to_ascii_lowercase().contains("not found")
            {
                changed_under_scan(format!("eth_getLogs: {}", e.message))
            } else {
                e.into_port_error("eth_getLogs")
            }
        })?;
        self.token_candidates(&logs, block_hash)
    }

    /// The usual way, one request: the catalog's `Transfer` logs and the block's receipts
    /// (`eth_getBlockReceipts`, or the native candidates' receipts). `None` when the answer is
    /// over the response limit: then [`Self::logs_and_receipts_in_parts`].
    async fn logs_and_receipts(
        &self,
        block_hash: &str,
        natives: &[NativeCandidate],
    ) -> Result<Option<(Vec<TokenCandidate>, Statuses)>, PortError> {
        let use_block_receipts = self.block_receipts.load(Ordering::Relaxed);
        let mut calls: Vec<(&str, Value)> = Vec::new();
        let logs_at = if self.catalog.log_filter.is_empty() {
            None
        } else {
            calls.push(self.logs_call(block_hash));
            Some(calls.len() - 1)
        };
        let receipts_from = calls.len();
        if use_block_receipts {
            calls.push(("eth_getBlockReceipts", json!([format!("0x{block_hash}")])));
        } else {
            for n in natives {
                calls.push((
                    "eth_getTransactionReceipt",
                    json!([format!("0x{}", n.tx_hash)]),
                ));
            }
        }
        let mut answers = match self.rpc.try_batch(&calls).await {
            Ok(answers) => answers,
            Err(CallFailure::TooLarge(e)) => {
                tracing::warn!(
                    block = %block_hash,
                    error = %e.message,
                    "BSC logs and receipts over the response limit: reading them in parts"
                );
                return Ok(None);
            }
            Err(CallFailure::Failed(e)) => return Err(e),
        };

        let tokens = match logs_at {
            Some(i) => {
                let answer = std::mem::replace(&mut answers[i], Ok(Value::Null));
                self.logs_answer(answer, block_hash)?
            }
            None => Vec::new(),
        };
        let mut statuses = Statuses::new();
        if use_block_receipts {
            match std::mem::replace(&mut answers[receipts_from], Ok(Value::Null)) {
                Ok(Value::Null) => {
                    return Err(changed_under_scan("eth_getBlockReceipts: unknown block"))
                }
                Ok(receipts) => {
                    let list = receipts
                        .as_array()
                        .ok_or_else(|| malformed("eth_getBlockReceipts: not a list"))?;
                    for r in list {
                        let (hash, ok, first_log) = receipt_status(r, block_hash)?;
                        statuses.insert(hash, (ok, first_log));
                    }
                }
                Err(e) if e.is_method_not_found() => {
                    tracing::warn!(
                        error = %e.message,
                        "the BSC node has no eth_getBlockReceipts: using eth_getTransactionReceipt"
                    );
                    self.block_receipts.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e.into_port_error("eth_getBlockReceipts")),
            }
        } else {
            for (n, answer) in natives.iter().zip(&answers[receipts_from..]) {
                let r = answer
                    .clone()
                    .map_err(|e| e.into_port_error("eth_getTransactionReceipt"))?;
                if r.is_null() {
                    return Err(changed_under_scan(format!(
                        "no receipt for 0x{}",
                        n.tx_hash
                    )));
                }
                let (hash, ok, first_log) = receipt_status(&r, block_hash)?;
                statuses.insert(hash, (ok, first_log));
            }
        }
        Ok(Some((tokens, statuses)))
    }

    /// When logs and receipts together are over the response limit: the logs alone (catalog
    /// `Transfer` logs only, usually small), the receipts being read afterwards for the
    /// candidates only, in batches split to fit. When even the logs are over the limit, the
    /// receipts of every transaction of the block, from which the logs are taken.
    async fn logs_and_receipts_in_parts(
        &self,
        txs: &[Value],
        block_hash: &str,
    ) -> Result<(Vec<TokenCandidate>, Statuses), PortError> {
        if self.catalog.log_filter.is_empty() {
            return Ok((Vec::new(), Statuses::new()));
        }
        match self.rpc.batch_split(&[self.logs_call(block_hash)]).await {
            Ok(mut answers) => {
                let answer = answers.pop().unwrap_or(Ok(Value::Null));
                Ok((self.logs_answer(answer, block_hash)?, Statuses::new()))
            }
            Err(CallFailure::Failed(e)) => Err(e),
            Err(CallFailure::TooLarge(e)) => {
                tracing::warn!(
                    block = %block_hash,
                    error = %e.message,
                    "BSC logs over the response limit: reading every receipt of the block"
                );
                let hashes = txs
                    .iter()
                    .map(|tx| codec::hash(field(tx, "hash", "transaction")?).map_err(malformed))
                    .collect::<Result<Vec<_>, _>>()?;
                let hashes: Vec<&str> = hashes.iter().map(String::as_str).collect();
                let (statuses, logs) = self.receipts(&hashes, block_hash, true).await?;
                let tokens = self.token_candidates(&Value::Array(logs), block_hash)?;
                Ok((tokens, statuses))
            }
        }
    }

    /// Receipt status of each of `hashes`, checked to belong to block `block_hash`, in batches
    /// split to fit the response limit; with `keep_logs`, every log of those receipts too.
    async fn receipts(
        &self,
        hashes: &[&str],
        block_hash: &str,
        keep_logs: bool,
    ) -> Result<(Statuses, Vec<Value>), PortError> {
        let calls: Vec<(&str, Value)> = hashes
            .iter()
            .map(|h| ("eth_getTransactionReceipt", json!([format!("0x{h}")])))
            .collect();
        let answers = self
            .rpc
            .batch_split(&calls)
            .await
            .map_err(|f| too_large_alone(f, "a transaction receipt"))?;
        let mut statuses = Statuses::with_capacity(hashes.len());
        let mut logs = Vec::new();
        for (h, answer) in hashes.iter().zip(answers) {
            let mut r = answer.map_err(|e| e.into_port_error("eth_getTransactionReceipt"))?;
            if r.is_null() {
                return Err(changed_under_scan(format!("no receipt for 0x{h}")));
            }
            let (hash, ok, first_log) = receipt_status(&r, block_hash)?;
            statuses.insert(hash, (ok, first_log));
            if keep_logs {
                if let Some(Value::Array(l)) = r.get_mut("logs").map(Value::take) {
                    logs.extend(l);
                }
            }
        }
        Ok((statuses, logs))
    }

    /// The catalog `Transfer` logs of `logs` (the answer of `eth_getLogs` for `block_hash`).
    fn token_candidates(
        &self,
        logs: &Value,
        block_hash: &str,
    ) -> Result<Vec<TokenCandidate>, PortError> {
        let list = logs
            .as_array()
            .ok_or_else(|| malformed("eth_getLogs: not a list"))?;
        let mut out = Vec::with_capacity(list.len());
        for log in list {
            if log.get("removed").and_then(Value::as_bool) == Some(true) {
                return Err(changed_under_scan("eth_getLogs returned a removed log"));
            }
            let log_block = codec::hash(field(log, "blockHash", "log")?).map_err(malformed)?;
            if log_block != block_hash {
                return Err(changed_under_scan(format!(
                    "a log of block 0x{log_block} answered for 0x{block_hash}"
                )));
            }
            let contract = codec::address(field(log, "address", "log")?).map_err(malformed)?;
            let Some(asset_code) = self.catalog.tokens.get(&contract) else {
                // The node ignored the address filter: only catalog contracts are reported.
                continue;
            };
            let topics = field(log, "topics", "log")?
                .as_array()
                .ok_or_else(|| malformed("log topics is not a list"))?;
            let topic0 = topics.first().and_then(Value::as_str).unwrap_or("");
            if !topic0.eq_ignore_ascii_case(TRANSFER_TOPIC) {
                continue;
            }
            let tx_hash = codec::hash(field(log, "transactionHash", "log")?).map_err(malformed)?;
            let tx_index =
                codec::quantity_u64(field(log, "transactionIndex", "log")?).map_err(malformed)?;
            let log_index = codec::quantity_u64(field(log, "logIndex", "log")?)
                .map_err(malformed)
                .and_then(|i| {
                    u32::try_from(i).map_err(|_| malformed(format!("log index {i} above u32")))
                })?;
            let data = codec::data(field(log, "data", "log")?).map_err(malformed)?;
            let shape_error = |why: String| {
                malformed(format!(
                    "{asset_code} Transfer log 0x{tx_hash}#{log_index} has an unexpected shape: {why}"
                ))
            };
            // Standard: from and to indexed. Some old tokens index nothing and put all three
            // words in the data.
            let (from, to, value) = match (topics.len(), data.len()) {
                (3, 32) => {
                    let word =
                        |i: usize| codec::data(&topics[i]).map_err(|e| shape_error(e.to_string()));
                    (
                        codec::word_address(&word(1)?).map_err(shape_error)?,
                        codec::word_address(&word(2)?).map_err(shape_error)?,
                        codec::word_u128_opt(&data).map_err(shape_error)?,
                    )
                }
                (1, 96) => (
                    codec::word_address(&data[..32]).map_err(shape_error)?,
                    codec::word_address(&data[32..64]).map_err(shape_error)?,
                    codec::word_u128_opt(&data[64..]).map_err(shape_error)?,
                ),
                (t, d) => return Err(shape_error(format!("{t} topics and {d} data bytes"))),
            };
            let Some(value) = value else {
                tracing::error!(
                    asset = %asset_code,
                    tx = %tx_hash,
                    log_index,
                    "BEP20 transfer above 2^128 units ignored: no ledger can hold it"
                );
                continue;
            };
            if value == 0 {
                continue;
            }
            out.push(TokenCandidate {
                tx_index,
                tx_hash,
                log_index,
                asset_code: asset_code.clone(),
                from,
                to,
                amount: Amount::from_units(value),
            });
        }
        Ok(out)
    }
}

/// The header fields the core needs, checked to be block `number`.
fn parse_header(block: &Value, number: u64) -> Result<BlockHeader, PortError> {
    let got = codec::quantity_u64(field(block, "number", "block")?).map_err(malformed)?;
    if got != number {
        return Err(malformed(format!("asked for block {number}, got {got}")));
    }
    let hash = codec::hash(field(block, "hash", "block")?).map_err(malformed)?;
    let parent_hash = codec::hash(field(block, "parentHash", "block")?).map_err(malformed)?;
    // BSC nodes since BEP-520 (sub-second blocks) add `milliTimestamp`; others have seconds.
    let timestamp_ms = match block.get("milliTimestamp").filter(|v| !v.is_null()) {
        Some(ms) => codec::quantity_u64(ms).map_err(malformed)?,
        None => codec::quantity_u64(field(block, "timestamp", "block")?)
            .map_err(malformed)?
            .checked_mul(1000)
            .ok_or_else(|| malformed("timestamp overflows"))?,
    };
    let timestamp_ms =
        i64::try_from(timestamp_ms).map_err(|_| malformed("timestamp above i64 milliseconds"))?;
    Ok(BlockHeader {
        number,
        hash,
        parent_hash,
        timestamp_ms,
    })
}

/// A native transfer candidate: a transaction with a recipient and a value above zero.
fn native_candidate(tx: &Value) -> Result<Option<NativeCandidate>, PortError> {
    if !tx.is_object() {
        return Err(malformed(
            "eth_getBlockByNumber(full) returned transaction hashes, not objects",
        ));
    }
    let to = match tx.get("to") {
        None | Some(Value::Null) => return Ok(None), // contract creation
        Some(to) => codec::address(to).map_err(malformed)?,
    };
    let tx_hash = codec::hash(field(tx, "hash", "transaction")?).map_err(malformed)?;
    let Some(value) =
        codec::quantity_u128_opt(field(tx, "value", "transaction")?).map_err(malformed)?
    else {
        tracing::error!(tx = %tx_hash, "native value above 2^128 wei ignored");
        return Ok(None);
    };
    if value == 0 {
        return Ok(None);
    }
    Ok(Some(NativeCandidate {
        tx_index: codec::quantity_u64(field(tx, "transactionIndex", "transaction")?)
            .map_err(malformed)?,
        tx_hash,
        from: codec::address(field(tx, "from", "transaction")?).map_err(malformed)?,
        to,
        amount: Amount::from_units(value),
    }))
}

/// (transaction hash, succeeded) of a receipt, checked to belong to block `block_hash`.
/// What a receipt tells the scan: the transaction hash, whether it succeeded, and the block-wide
/// index of its first log (to turn a log's block index into its position in the transaction).
type ReceiptFacts = (String, bool, Option<u64>);

fn receipt_status(receipt: &Value, block_hash: &str) -> Result<ReceiptFacts, PortError> {
    let hash = codec::hash(field(receipt, "transactionHash", "receipt")?).map_err(malformed)?;
    let in_block = codec::hash(field(receipt, "blockHash", "receipt")?).map_err(malformed)?;
    if in_block != block_hash {
        return Err(changed_under_scan(format!(
            "the receipt of 0x{hash} is in block 0x{in_block}, not 0x{block_hash}"
        )));
    }
    let status = codec::quantity_u64(field(receipt, "status", "receipt")?).map_err(malformed)?;
    let first_log = match receipt
        .get("logs")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
    {
        Some(log) => {
            Some(codec::quantity_u64(field(log, "logIndex", "receipt log")?).map_err(malformed)?)
        }
        None => None,
    };
    match status {
        0 => Ok((hash, false, first_log)),
        1 => Ok((hash, true, first_log)),
        other => Err(malformed(format!("receipt status {other}"))),
    }
}

#[async_trait]
impl ChainSource for BscChain {
    fn endpoint_health(&self) -> Vec<custody_core::chain::EndpointHealth> {
        self.rpc
            .endpoint_health()
            .into_iter()
            // The BSC rows of the listing have never carried the request counters, the time
            // of the last failure or a head: kept so for what reads them.
            .map(|h| custody_core::chain::EndpointHealth {
                requests: None,
                failures: None,
                last_failure_at: None,
                head_block: None,
                ..h
            })
            .collect()
    }

    fn network(&self) -> Network {
        Network::Bsc
    }

    async fn head_number(&self) -> Result<u64, PortError> {
        let v = self.rpc.call("eth_blockNumber", json!([])).await?;
        codec::quantity_u64(&v).map_err(malformed)
    }

    async fn header(&self, number: u64) -> Result<Option<BlockHeader>, PortError> {
        match self.block_by_number(number, false).await? {
            Some(block) => parse_header(&block, number).map(Some),
            None => Ok(None),
        }
    }

    async fn scan_block(&self, number: u64) -> Result<Option<ScannedBlock>, PortError> {
        self.scan(number).await
    }

    async fn balance(&self, address: &str, asset: &Asset) -> Result<OnchainBalance, PortError> {
        if asset.network != Network::Bsc {
            return Err(PortError::permanent(
                PORT,
                format!(
                    "balance: {} {} is not a BSC asset",
                    asset.network, asset.code
                ),
            ));
        }
        let owner = BscAddress::parse(address).map_err(|e| {
            PortError::permanent(
                PORT,
                format!("balance: {address:?} is not a BSC address: {e}"),
            )
        })?;
        let block_number = self.head_number().await?;
        let at = codec::quantity_hex(block_number);
        let units = match (asset.kind, &asset.contract) {
            (AssetKind::Native, _) => {
                let v = self
                    .rpc
                    .call("eth_getBalance", json!([owner.to_lowercase_hex(), at]))
                    .await?;
                codec::quantity_u128_opt(&v).map_err(malformed)?
            }
            (AssetKind::Bep20, Some(contract)) => {
                let contract = BscAddress::parse(contract).map_err(|e| {
                    PortError::permanent(PORT, format!("balance: {} contract: {e}", asset.code))
                })?;
                let call = json!({
                    "to": contract.to_lowercase_hex(),
                    "data": codec::balance_of_call(&owner),
                });
                let v = self.rpc.call("eth_call", json!([call, at])).await?;
                let word = codec::data(&v).map_err(malformed)?;
                if word.is_empty() {
                    return Err(PortError::permanent(
                        PORT,
                        format!(
                            "balance: {} contract {contract} answered nothing (no code at that \
                             address on this chain?)",
                            asset.code
                        ),
                    ));
                }
                codec::word_u128_opt(&word).map_err(malformed)?
            }
            _ => {
                return Err(PortError::permanent(
                    PORT,
                    format!("balance: {} is not a native or BEP20 asset", asset.code),
                ))
            }
        };
        let units = units.ok_or_else(|| {
            PortError::permanent(
                PORT,
                format!("balance of {owner} in {} is above 2^128 units", asset.code),
            )
        })?;
        Ok(OnchainBalance {
            units: Amount::from_units(units),
            staked_units: Amount::ZERO,
            block_number,
        })
    }
}
