//! The few protobuf messages of the TRON protocol this adapter writes, hand-declared for `prost`
//! (no `protoc`, no build script).
//!
//! Field numbers and types are copied from java-tron's protocol definitions
//! (github.com/tronprotocol/java-tron, `protocol/src/main/protos/`):
//!
//! - `core/Tron.proto`: `Transaction { raw raw_data = 1; repeated bytes signature = 2; }`,
//!   `Transaction.raw { bytes ref_block_bytes = 1; bytes ref_block_hash = 4;
//!   int64 expiration = 8; repeated Contract contract = 11; int64 timestamp = 14;
//!   int64 fee_limit = 18; }` (the fields we never set: `ref_block_num = 3`, `auths = 9`,
//!   `data = 10`, `scripts = 12`), and `Transaction.Contract { ContractType type = 1;
//!   google.protobuf.Any parameter = 2; int32 Permission_id = 5; }` with
//!   `TransferContract = 1`, `TriggerSmartContract = 31`.
//! - `core/contract/balance_contract.proto`: `TransferContract { bytes owner_address = 1;
//!   bytes to_address = 2; int64 amount = 3; }`.
//! - `core/contract/smart_contract.proto`: `TriggerSmartContract { bytes owner_address = 1;
//!   bytes contract_address = 2; int64 call_value = 3; bytes data = 4;
//!   int64 call_token_value = 5; int64 token_id = 6; }`.
//! - `core/contract/balance_contract.proto` (Stake 2.0): `DelegateResourceContract {
//!   bytes owner_address = 1; ResourceCode resource = 2; int64 balance = 3;
//!   bytes receiver_address = 4; bool lock = 5; int64 lock_period = 6; }` and
//!   `UnDelegateResourceContract { bytes owner_address = 1; ResourceCode resource = 2;
//!   int64 balance = 3; bytes receiver_address = 4; }`, with `DelegateResourceContract = 57`
//!   and `UnDelegateResourceContract = 58` in `Transaction.Contract.ContractType`, and
//!   `core/contract/common.proto`: `enum ResourceCode { BANDWIDTH = 0; ENERGY = 1;
//!   TRON_POWER = 2; }` (an enum is written as a varint, like an int32). Checked against
//!   java-tron's master of May 2025.
//! - `google/protobuf/any.proto`: `Any { string type_url = 1; bytes value = 2; }`, with the
//!   type URL `type.googleapis.com/protocol.<Message>` (package `protocol`).
//!
//! Addresses inside these messages are the 21 bytes `0x41 ‖ account`. prost writes fields in
//! tag order and skips proto3 defaults (0, empty), exactly like the Java and JavaScript
//! protobuf runtimes, so the bytes (and so the txID) are the same as TronWeb's and the node's.

/// `Transaction.Contract.ContractType` values used here (Tron.proto).
pub const CONTRACT_TYPE_TRANSFER: i32 = 1;
pub const CONTRACT_TYPE_TRIGGER_SMART_CONTRACT: i32 = 31;

pub const CONTRACT_TYPE_DELEGATE_RESOURCE: i32 = 57;
pub const CONTRACT_TYPE_UNDELEGATE_RESOURCE: i32 = 58;

/// `ResourceCode.ENERGY` (common.proto).
pub const RESOURCE_CODE_ENERGY: i32 = 1;

pub const TYPE_URL_TRANSFER: &str = "type.googleapis.com/protocol.TransferContract";
pub const TYPE_URL_DELEGATE_RESOURCE: &str =
    "type.googleapis.com/protocol.DelegateResourceContract";
pub const TYPE_URL_UNDELEGATE_RESOURCE: &str =
    "type.googleapis.com/protocol.UnDelegateResourceContract";
pub const TYPE_URL_TRIGGER_SMART_CONTRACT: &str =
    "type.googleapis.com/protocol.TriggerSmartContract";

/// `protocol.Transaction`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Transaction {
    #[prost(message, optional, tag = "1")]
    pub raw_data: Option<TransactionRaw>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub signature: Vec<Vec<u8>>,
}

/// `protocol.Transaction.raw`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TransactionRaw {
    #[prost(bytes = "vec", tag = "1")]
    pub ref_block_bytes: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub ref_block_num: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub ref_block_hash: Vec<u8>,
    #[prost(int64, tag = "8")]
    pub expiration: i64,
    #[prost(bytes = "vec", tag = "10")]
    pub data: Vec<u8>,
    #[prost(message, repeated, tag = "11")]
    pub contract: Vec<Contract>,
    #[prost(int64, tag = "14")]
    pub timestamp: i64,
    #[prost(int64, tag = "18")]
    pub fee_limit: i64,
}

/// `protocol.Transaction.Contract`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Contract {
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(message, optional, tag = "2")]
    pub parameter: Option<Any>,
    #[prost(int32, tag = "5")]
    pub permission_id: i32,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `protocol.TransferContract` (balance_contract.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TransferContract {
    #[prost(bytes = "vec", tag = "1")]
    pub owner_address: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub to_address: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub amount: i64,
}

/// `protocol.TriggerSmartContract` (smart_contract.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TriggerSmartContract {
    #[prost(bytes = "vec", tag = "1")]
    pub owner_address: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub contract_address: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub call_value: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub data: Vec<u8>,
    #[prost(int64, tag = "5")]
    pub call_token_value: i64,
    #[prost(int64, tag = "6")]
    pub token_id: i64,
}

/// `protocol.DelegateResourceContract` (balance_contract.proto, Stake 2.0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DelegateResourceContract {
    #[prost(bytes = "vec", tag = "1")]
    pub owner_address: Vec<u8>,
    /// `ResourceCode`.
    #[prost(int32, tag = "2")]
    pub resource: i32,
    /// Sun of the owner's stake whose resource is delegated.
    #[prost(int64, tag = "3")]
    pub balance: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub receiver_address: Vec<u8>,
    #[prost(bool, tag = "5")]
    pub lock: bool,
    #[prost(int64, tag = "6")]
    pub lock_period: i64,
}

/// `protocol.UnDelegateResourceContract` (balance_contract.proto, Stake 2.0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnDelegateResourceContract {
    #[prost(bytes = "vec", tag = "1")]
    pub owner_address: Vec<u8>,
    /// `ResourceCode`.
    #[prost(int32, tag = "2")]
    pub resource: i32,
    #[prost(int64, tag = "3")]
    pub balance: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub receiver_address: Vec<u8>,
}
