//! The JSON the TRON full-node HTTP API answers (java-tron's servlets, also served by TronGrid),
//! as far as this adapter reads it. Every request is sent with `visible` unset (false), so
//! addresses come back as hex.
//!
//! The node prints protobuf messages with proto3 JSON rules: a field at its default (0, empty,
//! the first enum value) is left out. Every field here is therefore optional or defaulted.
//!
//! Formats, as documented by the TRON developer documentation (tronprotocol.github.io
//! `documentation-en/api/http/...` and developers.tron.network `reference/...`):
//!
//! - Blocks (`wallet/getnowblock`, `wallet/getblockbynum`, `walletsolidity/getnowblock`):
//!   `{"blockID", "block_header": {"raw_data": {"number", "txTrieRoot", "witness_address",
//!   "parentHash", "version", "timestamp"}, "witness_signature"}, "transactions": [...]}`;
//!   `getblockbynum` "Returns {} if the block number does not exist". A block id's first 8
//!   bytes are the block number. Block 0 (the genesis block) is printed without `number` and
//!   `timestamp` (both 0, left out by proto3 JSON); its `blockID` names the network.
//! - Transactions: `{"ret": [{"contractRet": "SUCCESS"}], "signature": [...], "txID",
//!   "raw_data": {"contract": [{"parameter": {"value": {...}, "type_url"}, "type"}],
//!   "ref_block_bytes", "ref_block_hash", "expiration", "fee_limit", "timestamp"},
//!   "raw_data_hex"}`. A `TransferContract` value is `{"amount", "owner_address",
//!   "to_address"}`, a `TriggerSmartContract` value `{"data", "owner_address",
//!   "contract_address"}`; addresses are `41…` hex.
//! - `wallet/gettransactioninfobyblocknum`: "a JSON array ... each element has the same
//!   structure as /wallet/gettransactioninfobyid"; "An empty block (no transactions) returns
//!   []; num <= 0 returns {}". A `TransactionInfo` is `{"id", "fee", "blockNumber",
//!   "blockTimeStamp", "contractResult", "contract_address", "receipt": {..., "result"},
//!   "log": [{"address", "topics", "data"}], "result", "resMessage"}`. `log[].address` is "a hex
//!   format address without the prefix 0x41" (20 bytes); `result` "will not be displayed" on
//!   success and is `"FAILED"` otherwise; `receipt.result` is the contract result
//!   (`SUCCESS`, `REVERT`, `OUT_OF_ENERGY`, ...: `Transaction.Result.contractResult`).
//! - `wallet/gettransactioninfobyid` (`{"value": "<txID>"}`): one `TransactionInfo` as above;
//!   `{}` when the node does not have the transaction in a block. `fee` is everything the
//!   transaction burned in sun (left out when 0).
//! - `wallet/gettransactionbyid` (`{"value": "<txID>"}`): the transaction as in a block, `{}`
//!   when the node has it in no block (java-tron `Wallet.getTransactionById` reads the
//!   transaction store only; pending transactions are not there).
//!   `wallet/gettransactionfrompending` (same request): the transaction while it is in the
//!   node's pending pool, `{}` otherwise.
//! - `wallet/getaccount`: a `protocol.Account` (`{"address", "balance", ...}`, `balance` in sun);
//!   `{}` for an account that does not exist.
//! - `wallet/getaccountresource`: `{"freeNetUsed", "freeNetLimit", "NetUsed", "NetLimit",
//!   "EnergyUsed", "EnergyLimit", "TotalNetLimit", "TotalNetWeight", "TotalEnergyLimit",
//!   "TotalEnergyWeight", ...}`; "Returns {} if ... the account does not exist".
//!   `TotalEnergyLimit` is the network's daily energy, `TotalEnergyWeight` the whole TRX staked
//!   for energy network-wide: one staked TRX yields `TotalEnergyLimit / TotalEnergyWeight`
//!   energy (developers.tron.network "Resource Model").
//! - `wallet/getcandelegatedmaxsize` (`{"owner_address", "type": 1}`, 1 = energy): `{"max_size"}`,
//!   the sun of the owner's Stake 2.0 stake it may delegate now; `{}` when that is 0
//!   (developers.tron.network "getcandelegatedmaxsize"; tronpy issue #115).
//! - `wallet/triggerconstantcontract`: `{"result": {"result": true}, "energy_used",
//!   "energy_penalty", "constant_result": ["<64 hex>"], "transaction": {...}}`; when the node
//!   refuses the call `result` carries `code` and a hex `message`; when the call runs and
//!   fails (a revert) `result.result` stays true, `result.message` says why and
//!   `transaction.ret[0].ret` is `FAILED`. `energy_used` includes the penalty.
//! - `wallet/broadcasthex`: `{"result": true, "code": "SUCCESS", "txid", "message",
//!   "transaction"}`; on refusal `result` is absent or false and `code` names the reason
//!   (`SIGERROR`, `TAPOS_ERROR`, `DUP_TRANSACTION_ERROR`, `TRANSACTION_EXPIRATION_ERROR`, ...).
//! - `wallet/getchainparameters`: `{"chainParameter": [{"key", "value"}, ...]}`.
//! - Any servlet failure: `{"Error": "<class> : <message>"}` with status 200.

use serde::Deserialize;

/// `blockID` and `block_header` only: the `transactions` array is skipped without being built.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct BlockHead {
    #[serde(rename = "blockID", default)]
    pub block_id: String,
    #[serde(default)]
    pub block_header: Option<BlockHeaderJson>,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

/// A block with its transactions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Block {
    #[serde(rename = "blockID", default)]
    pub block_id: String,
    #[serde(default)]
    pub block_header: Option<BlockHeaderJson>,
    #[serde(default)]
    pub transactions: Vec<Transaction>,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct BlockHeaderJson {
    #[serde(default)]
    pub raw_data: BlockHeaderRaw,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct BlockHeaderRaw {
    #[serde(default)]
    pub number: i64,
    #[serde(rename = "parentHash", default)]
    pub parent_hash: String,
    #[serde(default)]
    pub timestamp: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Transaction {
    #[serde(rename = "txID", default)]
    pub tx_id: String,
    #[serde(default)]
    pub ret: Vec<TransactionRet>,
    #[serde(default)]
    pub raw_data: TransactionRaw,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TransactionRet {
    /// Absent means `DEFAULT` (proto3 leaves the first enum value out).
    #[serde(rename = "contractRet", default)]
    pub contract_ret: Option<String>,
    /// `Transaction.Result.ret` (`SUCESS`, left out, or `FAILED`): set by a node's
    /// simulation of a call (`triggerconstantcontract`) that failed.
    #[serde(default)]
    pub ret: Option<String>,
}

/// `wallet/gettransactionbyid` and `wallet/gettransactionfrompending`: a [`Transaction`], or
/// `{}` when the node has none.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TransactionAnswer {
    #[serde(flatten)]
    pub tx: Transaction,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TransactionRaw {
    #[serde(default)]
    pub contract: Vec<Contract>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Contract {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub parameter: ContractParameter,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContractParameter {
    #[serde(default)]
    pub value: ContractValue,
}

/// The fields of `TransferContract` and `TriggerSmartContract` values; the other contract
/// types' fields are skipped.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContractValue {
    #[serde(default)]
    pub owner_address: Option<String>,
    #[serde(default)]
    pub to_address: Option<String>,
    #[serde(default)]
    pub amount: Option<i64>,
    #[serde(default)]
    pub contract_address: Option<String>,
    #[serde(default)]
    pub data: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TransactionInfo {
    #[serde(default)]
    pub id: String,
    /// Everything the transaction burned, in sun (bandwidth, energy, account creation);
    /// absent when nothing was burned.
    #[serde(default)]
    pub fee: i64,
    #[serde(rename = "blockNumber", default)]
    pub block_number: i64,
    #[serde(default)]
    pub receipt: Option<Receipt>,
    #[serde(default)]
    pub log: Vec<Log>,
    /// Absent on success, `"FAILED"` otherwise.
    #[serde(default)]
    pub result: Option<String>,
}

/// `wallet/gettransactioninfobyid`: a [`TransactionInfo`], or `{}` when the node has none.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TransactionInfoAnswer {
    #[serde(flatten)]
    pub info: TransactionInfo,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

/// `TransactionInfo.receipt` (`ResourceReceipt`, Tron.proto): proto3 JSON leaves zeros out.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Receipt {
    #[serde(default)]
    pub result: Option<String>,
    /// Energy taken from the account's own or delegated energy.
    #[serde(default)]
    pub energy_usage: i64,
    /// Sun burned for energy.
    #[serde(default)]
    pub energy_fee: i64,
    /// All the energy the execution used.
    #[serde(default)]
    pub energy_usage_total: i64,
    /// Bandwidth taken from staked or free bandwidth.
    #[serde(default)]
    pub net_usage: i64,
    /// Sun burned for bandwidth (or the create-account fee).
    #[serde(default)]
    pub net_fee: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Log {
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub topics: Vec<String>,
    #[serde(default)]
    pub data: String,
}

/// `{}` (or an error) where an array was expected.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EmptyOrError {
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Account {
    #[serde(default)]
    pub address: Option<String>,
    #[serde(default)]
    pub balance: i64,
    /// Stake 2.0: TRX staked per resource (`type` BANDWIDTH is the default and left out),
    /// less what is delegated.
    #[serde(rename = "frozenV2", default)]
    pub frozen_v2: Vec<FrozenV2>,
    /// Stake 2.0: TRX unstaked and waiting for its withdrawal.
    #[serde(rename = "unfrozenV2", default)]
    pub unfrozen_v2: Vec<UnfrozenV2>,
    /// Stake 2.0: staked TRX whose bandwidth is delegated to others.
    #[serde(rename = "delegated_frozenV2_balance_for_bandwidth", default)]
    pub delegated_bandwidth: i64,
    #[serde(default)]
    pub account_resource: Option<AccountResourceOfAccount>,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FrozenV2 {
    #[serde(default)]
    pub amount: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct UnfrozenV2 {
    #[serde(default)]
    pub unfreeze_amount: i64,
}

/// `getaccount`'s `account_resource`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AccountResourceOfAccount {
    /// Stake 2.0: staked TRX whose energy is delegated to others.
    #[serde(rename = "delegated_frozenV2_balance_for_energy", default)]
    pub delegated_energy: i64,
}

impl Account {
    /// Every sun of the account's Stake 2.0 TRX: staked for any resource, its part delegated
    /// to others, and what is unstaking. It is the owner's still (unstaking gives it back),
    /// only not spendable now. `None` when a figure is negative or the sum overflows.
    pub fn staked_sun(&self) -> Option<u128> {
        let mut figures = self
            .frozen_v2
            .iter()
            .map(|f| f.amount)
            .chain(self.unfrozen_v2.iter().map(|u| u.unfreeze_amount))
            .chain([self.delegated_bandwidth])
            .chain(self.account_resource.iter().map(|r| r.delegated_energy));
        figures.try_fold(0u128, |sum, v| sum.checked_add(u128::try_from(v).ok()?))
    }
}

/// `wallet/getaccountresource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AccountResource {
    #[serde(rename = "freeNetUsed", default)]
    pub free_net_used: i64,
    #[serde(rename = "freeNetLimit", default)]
    pub free_net_limit: i64,
    #[serde(rename = "NetUsed", default)]
    pub net_used: i64,
    #[serde(rename = "NetLimit", default)]
    pub net_limit: i64,
    #[serde(rename = "EnergyUsed", default)]
    pub energy_used: i64,
    #[serde(rename = "EnergyLimit", default)]
    pub energy_limit: i64,
    #[serde(rename = "TotalEnergyLimit", default)]
    pub total_energy_limit: i64,
    #[serde(rename = "TotalEnergyWeight", default)]
    pub total_energy_weight: i64,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

/// `wallet/getcandelegatedmaxsize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CanDelegatedMaxSize {
    #[serde(default)]
    pub max_size: i64,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConstantCall {
    #[serde(default)]
    pub result: ReturnJson,
    /// Energy the call used, the dynamic-energy penalty included.
    #[serde(default)]
    pub energy_used: i64,
    #[serde(default)]
    pub energy_penalty: i64,
    #[serde(default)]
    pub constant_result: Vec<String>,
    /// The transaction the node ran; its `ret[0].ret` is `FAILED` when the call failed.
    #[serde(default)]
    pub transaction: Option<Transaction>,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

impl ConstantCall {
    /// The node ran the call and it failed (reverted, ran out of energy, ...): java-tron
    /// `Wallet.triggerConstantContract` then sets the transaction's `ret` to `FAILED` and puts
    /// the reason (`REVERT opcode executed`, or the runtime error) in `result.message`, while
    /// `result.result` stays true. `Some(reason)` then.
    pub fn failure(&self) -> Option<String> {
        let failed = self
            .transaction
            .as_ref()
            .is_some_and(|t| t.ret.iter().any(|r| r.ret.as_deref() == Some("FAILED")));
        let message = readable_message(self.result.message.as_deref().unwrap_or(""));
        (failed || !message.is_empty()).then(|| {
            if message.is_empty() {
                "the call failed".to_owned()
            } else {
                message
            }
        })
    }
}

/// `api.Return`: `{"result": true}` or `{"code": "...", "message": "<hex>"}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReturnJson {
    #[serde(default)]
    pub result: bool,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Broadcast {
    #[serde(default)]
    pub result: bool,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub txid: Option<String>,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChainParameters {
    #[serde(rename = "chainParameter", default)]
    pub chain_parameter: Vec<ChainParameter>,
    #[serde(rename = "Error", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChainParameter {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: i64,
}

/// A node message that may be hex-encoded UTF-8 (broadcast and constant-call messages are
/// printed as hex by some node versions and as text by others): the decoded text when it is
/// hex of valid UTF-8, the input otherwise.
pub fn readable_message(message: &str) -> String {
    if !message.is_empty() && message.len() % 2 == 0 {
        if let Ok(bytes) = hex::decode(message) {
            if let Ok(text) = String::from_utf8(bytes) {
                return text;
            }
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod stake_tests {
    use super::*;

    #[test]
    fn every_stake_2_0_figure_of_getaccount_counts_as_staked() {
        // java-tron's getaccount: BANDWIDTH (the default type) printed without `type`.
        let account: Account = serde_json::from_str(
            r#"{"address": "41aa", "balance": 7,
                "frozenV2": [{"amount": 10}, {"type": "ENERGY", "amount": 200}, {"type": "TRON_POWER"}],
                "unfrozenV2": [{"type": "ENERGY", "unfreeze_amount": 3000, "unfreeze_expire_time": 1}],
                "delegated_frozenV2_balance_for_bandwidth": 40000,
                "account_resource": {"energy_window_size": 28800000,
                                     "delegated_frozenV2_balance_for_energy": 500000,
                                     "acquired_delegated_frozenV2_balance_for_energy": 9}}"#,
        )
        .unwrap();
        assert_eq!(account.staked_sun(), Some(543_210));
        let plain: Account = serde_json::from_str(r#"{"address": "41aa", "balance": 7}"#).unwrap();
        assert_eq!(plain.staked_sun(), Some(0));
        let negative: Account =
            serde_json::from_str(r#"{"address": "41aa", "frozenV2": [{"amount": -1}]}"#).unwrap();
        assert_eq!(negative.staked_sun(), None);
    }
}
