//! Transaction encoding and signing for withdrawals and sweeps: the `raw_data` protobuf of a
//! TRX `TransferContract` and of a TRC20 `transfer(address,uint256)` through
//! `TriggerSmartContract`, its txID, and its signature through the [`Signer`] port.
//!
//! - `raw_data` is `protocol.Transaction.raw` (see [`crate::proto`] for the field numbers).
//! - txID = SHA-256 of the `raw_data` bytes (java-tron `TransactionCapsule.getTransactionId`;
//!   TronWeb `txPbToTxID`). The signature does not enter the txID, so a transaction has its id
//!   before it is signed and a rebroadcast keeps it.
//! - TaPoS: `ref_block_bytes` are bytes 6..8 of the reference block's number as a big-endian
//!   int64, and `ref_block_hash` bytes 8..16 of its block id (developers.tron.network,
//!   "Transaction": "ref_block_bytes ... the 6th to 8th (exclusive) bytes of the reference block
//!   height", "ref_block_hash ... the 8th to 16th (exclusive) bytes of the reference block
//!   hash"). The node refuses a transaction whose reference block is not on its chain
//!   (`TAPOS_ERROR`), so a transaction built on an orphaned block can never be included.
//! - `expiration` (ms) must be after the head block's time and at most 24 h later; `timestamp`
//!   (ms) is informative. Both are chosen by the caller ([`TxTiming`]), never read from a clock
//!   here, so a rebuilt transaction is byte-identical.
//! - The signature is the 65 bytes `r ‖ s ‖ v` of
//!   [`RecoverableSignature::to_rsv`](custody_core::ports::RecoverableSignature::to_rsv), with
//!   `v` the recovery id 0 or 1. java-tron accepts both this and the `27 + id` form TronWeb
//!   writes (`crypto/.../Rsv.fromSignature`: `if (v < 27) v += 27`); `r` and `s` are the same
//!   (RFC 6979, low s) — the oracle test checks both against TronWeb.

use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::chain::BlockHeader;
use custody_core::ports::signer::{HdPath, RecoverableSignature, Signer};
use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::abi;
use crate::proto;

/// What the node adds to a transaction's serialized size when it charges bandwidth: java-tron
/// `BandwidthProcessor.consume` adds `Constant.MAX_RESULT_SIZE_IN_TX` (64 bytes) per contract to
/// the size of the signed transaction without its `ret`.
pub const BANDWIDTH_RESULT_BYTES: u64 = 64;

/// Why a transaction cannot be built. Every case is permanent: the same input fails again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    #[error("the amount must be above zero")]
    AmountZero,
    #[error("a TRX amount is an int64 of sun: at most 9223372036854775807")]
    AmountTooLarge,
    #[error("the sender and the recipient are the same account")]
    SameAccount,
    #[error("a delegation is of 1 TRX (1000000 sun) of stake at least")]
    DelegationTooSmall,
    #[error("fee_limit must be between 1 and 9223372036854775807 sun")]
    FeeLimit,
    #[error("the expiration must be after the timestamp")]
    Expiration,
    #[error("a block id must be 64 hex digits, got {0:?}")]
    BlockId(String),
    #[error("signing path is for {0}, not TRON")]
    PathNetwork(Network),
    #[error("the signature does not recover to the transaction's owner {0}")]
    WrongKey(TronAddress),
    #[error("the signature is not a valid secp256k1 signature with recovery id 0 or 1")]
    BadSignature,
    #[error("not a transaction this adapter builds: {0}")]
    Unsupported(String),
}

impl From<TxError> for PortError {
    fn from(e: TxError) -> Self {
        PortError::permanent("tron", e.to_string())
    }
}

/// The TaPoS reference of a transaction: two bytes of a recent block's number and eight bytes
/// of its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefBlock {
    pub bytes: [u8; 2],
    pub hash: [u8; 8],
}

impl RefBlock {
    /// From a block's number and 32-byte id (`blockID`).
    pub fn from_block(number: u64, block_id: &[u8; 32]) -> Self {
        let n = number.to_be_bytes();
        let mut hash = [0u8; 8];
        hash.copy_from_slice(&block_id[8..16]);
        RefBlock {
            bytes: [n[6], n[7]],
            hash,
        }
    }

    /// From a header as [`ChainSource::header`](custody_core::ports::ChainSource::header)
    /// returns it (hash in lowercase hex). Use a recent, preferably solidified, block.
    pub fn from_header(header: &BlockHeader) -> Result<Self, TxError> {
        let mut id = [0u8; 32];
        hex::decode_to_slice(&header.hash, &mut id)
            .map_err(|_| TxError::BlockId(header.hash.clone()))?;
        Ok(RefBlock::from_block(header.number, &id))
    }
}

/// `timestamp` and `expiration` of a transaction, in Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxTiming {
    pub timestamp_ms: i64,
    pub expiration_ms: i64,
}

impl TxTiming {
    /// `expiration = timestamp + lifetime_ms`. TronWeb's default lifetime is 60 s; the node
    /// accepts up to 24 h after its head block.
    pub fn new(timestamp_ms: i64, lifetime_ms: i64) -> Self {
        TxTiming {
            timestamp_ms,
            expiration_ms: timestamp_ms.saturating_add(lifetime_ms),
        }
    }
}

/// A built, unsigned transaction: its owner, `raw_data` bytes and txID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedTransaction {
    owner: TronAddress,
    raw_data: Vec<u8>,
    txid: [u8; 32],
}

impl UnsignedTransaction {
    fn from_raw(owner: TronAddress, raw: &proto::TransactionRaw) -> Self {
        let raw_data = raw.encode_to_vec();
        let txid: [u8; 32] = Sha256::digest(&raw_data).into();
        UnsignedTransaction {
            owner,
            raw_data,
            txid,
        }
    }

    /// The account that must sign.
    pub fn owner(&self) -> &TronAddress {
        &self.owner
    }

    /// The serialized `raw_data` (`protocol.Transaction.raw`).
    pub fn raw_data(&self) -> &[u8] {
        &self.raw_data
    }

    /// `raw_data_hex` as the node and TronWeb write it: lowercase hex.
    pub fn raw_data_hex(&self) -> String {
        hex::encode(&self.raw_data)
    }

    /// SHA-256 of `raw_data`: the digest that is signed.
    pub fn txid(&self) -> &[u8; 32] {
        &self.txid
    }

    /// The transaction hash as the chain and this service write it: lowercase hex.
    pub fn txid_hex(&self) -> String {
        hex::encode(self.txid)
    }

    /// `raw_data` bytes read back (an [`UnsignedTransaction`] stored as its `raw_data`): one
    /// `TransferContract`, `TriggerSmartContract`, `DelegateResourceContract` or
    /// `UnDelegateResourceContract`, whose `owner_address` is the account that must sign.
    ///
    /// The bytes must be exactly what this module writes for the decoded message (the
    /// canonical protobuf encoding: fields in tag order, no unknown fields, no defaults
    /// written): a node recomputes the txID from the message it parsed, so any other byte
    /// string would be known on chain under another hash than the one computed here.
    pub fn from_raw_data(raw_data: &[u8]) -> Result<Self, TxError> {
        let unsupported = |why: &str| TxError::Unsupported(why.to_owned());
        let raw = proto::TransactionRaw::decode(raw_data)
            .map_err(|e| TxError::Unsupported(format!("raw_data does not decode: {e}")))?;
        if raw.encode_to_vec() != raw_data {
            return Err(unsupported(
                "raw_data is not in canonical protobuf encoding",
            ));
        }
        let [contract] = raw.contract.as_slice() else {
            return Err(unsupported("raw_data must hold exactly one contract"));
        };
        let any = contract
            .parameter
            .as_ref()
            .ok_or_else(|| unsupported("the contract has no parameter"))?;
        let owner = match (contract.r#type, any.type_url.as_str()) {
            (proto::CONTRACT_TYPE_TRANSFER, proto::TYPE_URL_TRANSFER) => {
                proto::TransferContract::decode(any.value.as_slice())
                    .map_err(|e| TxError::Unsupported(format!("TransferContract: {e}")))?
                    .owner_address
            }
            (
                proto::CONTRACT_TYPE_TRIGGER_SMART_CONTRACT,
                proto::TYPE_URL_TRIGGER_SMART_CONTRACT,
            ) => {
                proto::TriggerSmartContract::decode(any.value.as_slice())
                    .map_err(|e| TxError::Unsupported(format!("TriggerSmartContract: {e}")))?
                    .owner_address
            }
            (proto::CONTRACT_TYPE_DELEGATE_RESOURCE, proto::TYPE_URL_DELEGATE_RESOURCE) => {
                proto::DelegateResourceContract::decode(any.value.as_slice())
                    .map_err(|e| TxError::Unsupported(format!("DelegateResourceContract: {e}")))?
                    .owner_address
            }
            (proto::CONTRACT_TYPE_UNDELEGATE_RESOURCE, proto::TYPE_URL_UNDELEGATE_RESOURCE) => {
                proto::UnDelegateResourceContract::decode(any.value.as_slice())
                    .map_err(|e| TxError::Unsupported(format!("UnDelegateResourceContract: {e}")))?
                    .owner_address
            }
            (kind, url) => {
                return Err(TxError::Unsupported(format!(
                    "contract type {kind} ({url}) is not a TRX transfer, a contract call or \
                     an energy delegation"
                )))
            }
        };
        let owner = match owner.as_slice() {
            [0x41, account @ ..] if account.len() == 20 => {
                let mut bytes = [0u8; 20];
                bytes.copy_from_slice(account);
                TronAddress::from_bytes(bytes)
            }
            _ => return Err(unsupported("owner_address is not 0x41 and 20 bytes")),
        };
        Ok(UnsignedTransaction::from_raw(owner, &raw))
    }

    /// `expiration` of the transaction (ms), read from its `raw_data`.
    pub fn expiration_ms(&self) -> i64 {
        proto::TransactionRaw::decode(self.raw_data.as_slice()).map_or(0, |r| r.expiration)
    }

    /// The bandwidth points the node will charge for this transaction once signed with one
    /// signature (always 65 bytes): [`SignedTransaction::bandwidth_bytes`] before signing.
    pub fn bandwidth_bytes(&self) -> u64 {
        SignedTransaction {
            unsigned: self.clone(),
            signature: [0u8; 65],
        }
        .bandwidth_bytes()
    }
}

/// A signed transaction, ready for `wallet/broadcasthex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTransaction {
    unsigned: UnsignedTransaction,
    signature: [u8; 65],
}

impl SignedTransaction {
    pub fn unsigned(&self) -> &UnsignedTransaction {
        &self.unsigned
    }

    pub fn txid_hex(&self) -> String {
        self.unsigned.txid_hex()
    }

    /// `r ‖ s ‖ v` with `v` the recovery id (0 or 1).
    pub fn signature(&self) -> &[u8; 65] {
        &self.signature
    }

    /// The complete `protocol.Transaction` (raw_data and one signature), serialized.
    pub fn to_bytes(&self) -> Vec<u8> {
        // raw_data is already serialized: write field 1 and field 2 around the stored bytes so
        // the signed bytes are exactly the hashed ones.
        let mut out = Vec::with_capacity(self.unsigned.raw_data.len() + 80);
        prost::encoding::bytes::encode(1, &self.unsigned.raw_data, &mut out);
        prost::encoding::bytes::encode(2, &self.signature.to_vec(), &mut out);
        out
    }

    /// The hex the `transaction` field of `wallet/broadcasthex` takes.
    pub fn broadcast_hex(&self) -> String {
        hex::encode(self.to_bytes())
    }

    /// The bandwidth points the node charges for this transaction: its serialized size plus
    /// [`BANDWIDTH_RESULT_BYTES`].
    pub fn bandwidth_bytes(&self) -> u64 {
        u64::try_from(self.to_bytes().len())
            .unwrap_or(u64::MAX)
            .saturating_add(BANDWIDTH_RESULT_BYTES)
    }

    /// The txID of serialized `protocol.Transaction` bytes as [`Self::to_bytes`] writes them
    /// (`raw_data` then one signature), or `None` when the bytes are not that.
    pub fn txid_of_bytes(bytes: &[u8]) -> Option<[u8; 32]> {
        let tx = proto::Transaction::decode(bytes).ok()?;
        let raw = tx.raw_data.as_ref()?.encode_to_vec();
        if tx.signature.len() != 1 || tx.encode_to_vec() != bytes {
            return None;
        }
        Some(Sha256::digest(&raw).into())
    }
}

fn raw_with(
    contract: proto::Contract,
    ref_block: RefBlock,
    timing: TxTiming,
    fee_limit: i64,
) -> Result<proto::TransactionRaw, TxError> {
    if timing.expiration_ms <= timing.timestamp_ms {
        return Err(TxError::Expiration);
    }
    Ok(proto::TransactionRaw {
        ref_block_bytes: ref_block.bytes.to_vec(),
        ref_block_num: 0,
        ref_block_hash: ref_block.hash.to_vec(),
        expiration: timing.expiration_ms,
        data: Vec::new(),
        contract: vec![contract],
        timestamp: timing.timestamp_ms,
        fee_limit,
    })
}

/// A TRX transfer of `amount` sun from `owner` to `to` (`TransferContract`).
pub fn trx_transfer(
    owner: &TronAddress,
    to: &TronAddress,
    amount: Amount,
    ref_block: RefBlock,
    timing: TxTiming,
) -> Result<UnsignedTransaction, TxError> {
    if amount.is_zero() {
        return Err(TxError::AmountZero);
    }
    let amount = i64::try_from(amount.units()).map_err(|_| TxError::AmountTooLarge)?;
    if owner == to {
        return Err(TxError::SameAccount);
    }
    let parameter = proto::TransferContract {
        owner_address: owner.to_versioned_bytes().to_vec(),
        to_address: to.to_versioned_bytes().to_vec(),
        amount,
    };
    let contract = proto::Contract {
        r#type: proto::CONTRACT_TYPE_TRANSFER,
        parameter: Some(proto::Any {
            type_url: proto::TYPE_URL_TRANSFER.into(),
            value: parameter.encode_to_vec(),
        }),
        permission_id: 0,
    };
    let raw = raw_with(contract, ref_block, timing, 0)?;
    Ok(UnsignedTransaction::from_raw(*owner, &raw))
}

/// A TRC20 `transfer(to, amount)` on `token` from `owner` (`TriggerSmartContract`, no TRX
/// attached), burning at most `fee_limit_sun` for energy.
pub fn trc20_transfer(
    owner: &TronAddress,
    token: &TronAddress,
    to: &TronAddress,
    amount: Amount,
    fee_limit_sun: u64,
    ref_block: RefBlock,
    timing: TxTiming,
) -> Result<UnsignedTransaction, TxError> {
    if amount.is_zero() {
        return Err(TxError::AmountZero);
    }
    let fee_limit = i64::try_from(fee_limit_sun).map_err(|_| TxError::FeeLimit)?;
    if fee_limit == 0 {
        return Err(TxError::FeeLimit);
    }
    let parameter = proto::TriggerSmartContract {
        owner_address: owner.to_versioned_bytes().to_vec(),
        contract_address: token.to_versioned_bytes().to_vec(),
        call_value: 0,
        data: abi::transfer_call_data(to, amount.units()),
        call_token_value: 0,
        token_id: 0,
    };
    let contract = proto::Contract {
        r#type: proto::CONTRACT_TYPE_TRIGGER_SMART_CONTRACT,
        parameter: Some(proto::Any {
            type_url: proto::TYPE_URL_TRIGGER_SMART_CONTRACT.into(),
            value: parameter.encode_to_vec(),
        }),
        permission_id: 0,
    };
    let raw = raw_with(contract, ref_block, timing, fee_limit)?;
    Ok(UnsignedTransaction::from_raw(*owner, &raw))
}

/// A Stake 2.0 energy delegation: `owner` lends the energy of `balance` sun of its stake for
/// energy to `receiver` (`DelegateResourceContract`, resource ENERGY, unlocked, so it can be
/// taken back at any time), or takes it back (`undelegate`: `UnDelegateResourceContract`).
/// The stake stays the owner's; a system contract, so no `fee_limit`. java-tron refuses a
/// delegation below 1 TRX (`DelegateResourceActuator`).
pub fn energy_delegation(
    owner: &TronAddress,
    receiver: &TronAddress,
    balance: Amount,
    undelegate: bool,
    ref_block: RefBlock,
    timing: TxTiming,
) -> Result<UnsignedTransaction, TxError> {
    if balance.is_zero() {
        return Err(TxError::AmountZero);
    }
    let balance = i64::try_from(balance.units()).map_err(|_| TxError::AmountTooLarge)?;
    if !undelegate && balance < 1_000_000 {
        return Err(TxError::DelegationTooSmall);
    }
    if owner == receiver {
        return Err(TxError::SameAccount);
    }
    let owner_address = owner.to_versioned_bytes().to_vec();
    let receiver_address = receiver.to_versioned_bytes().to_vec();
    let (kind, type_url, value) = if undelegate {
        (
            proto::CONTRACT_TYPE_UNDELEGATE_RESOURCE,
            proto::TYPE_URL_UNDELEGATE_RESOURCE,
            proto::UnDelegateResourceContract {
                owner_address,
                resource: proto::RESOURCE_CODE_ENERGY,
                balance,
                receiver_address,
            }
            .encode_to_vec(),
        )
    } else {
        (
            proto::CONTRACT_TYPE_DELEGATE_RESOURCE,
            proto::TYPE_URL_DELEGATE_RESOURCE,
            proto::DelegateResourceContract {
                owner_address,
                resource: proto::RESOURCE_CODE_ENERGY,
                balance,
                receiver_address,
                lock: false,
                lock_period: 0,
            }
            .encode_to_vec(),
        )
    };
    let contract = proto::Contract {
        r#type: kind,
        parameter: Some(proto::Any {
            type_url: type_url.into(),
            value,
        }),
        permission_id: 0,
    };
    let raw = raw_with(contract, ref_block, timing, 0)?;
    Ok(UnsignedTransaction::from_raw(*owner, &raw))
}

/// Signs the txID with the key at `path` through the [`Signer`] port and checks that the
/// signature recovers to the transaction's owner, so a wrong path can never produce a
/// transaction that the node would refuse (or, worse, that spends from another account).
pub fn sign(
    tx: UnsignedTransaction,
    signer: &dyn Signer,
    path: &HdPath,
) -> Result<SignedTransaction, PortError> {
    if path.network != Network::Tron {
        return Err(TxError::PathNetwork(path.network).into());
    }
    let sig = signer.sign_digest(path, tx.txid())?;
    Ok(attach_signature(tx, &sig)?)
}

/// The signed transaction from `tx` and a signature of its txID made elsewhere (the core's
/// [`Signer`]), checked to recover to the transaction's owner: `r ‖ s ‖ v` with `v` the
/// recovery id, exactly what [`sign`] writes. No I/O.
pub fn attach_signature(
    tx: UnsignedTransaction,
    sig: &RecoverableSignature,
) -> Result<SignedTransaction, TxError> {
    if sig.recovery_id > 1 {
        return Err(TxError::BadSignature);
    }
    let signature = Signature::from_scalars(sig.r, sig.s).map_err(|_| TxError::BadSignature)?;
    let recovery = RecoveryId::from_byte(sig.recovery_id).ok_or(TxError::BadSignature)?;
    let key = VerifyingKey::recover_from_prehash(tx.txid(), &signature, recovery)
        .map_err(|_| TxError::WrongKey(tx.owner))?;
    let point = key.to_encoded_point(false);
    let mut uncompressed = [0u8; 65];
    uncompressed.copy_from_slice(point.as_bytes());
    if TronAddress::from_uncompressed_public_key(&uncompressed) != tx.owner {
        return Err(TxError::WrongKey(tx.owner));
    }
    Ok(SignedTransaction {
        unsigned: tx,
        signature: sig.to_rsv(),
    })
}

#[cfg(test)]
mod tests {
    use custody_core::keys::{HdSigner, Mnemonic};

    use super::*;

    const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                              abandon abandon abandon about";

    fn signer() -> HdSigner {
        HdSigner::from_seed(&Mnemonic::parse(ABANDON_12).unwrap().to_seed()).unwrap()
    }

    fn path(index: u32) -> HdPath {
        HdPath {
            network: Network::Tron,
            account: 0,
            index,
        }
    }

    fn owner(signer: &HdSigner, index: u32) -> TronAddress {
        TronAddress::parse(&signer.keys().address(&path(index)).unwrap().0).unwrap()
    }

    fn reference() -> (RefBlock, TxTiming) {
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&70_000_123u64.to_be_bytes());
        id[8..].fill(0xab);
        (
            RefBlock::from_block(70_000_123, &id),
            TxTiming::new(1_760_000_000_000, 60_000),
        )
    }

    #[test]
    fn ref_block_takes_bytes_6_to_8_of_the_number_and_8_to_16_of_the_id() {
        let (r, _) = reference();
        let n = 70_000_123u64.to_be_bytes();
        assert_eq!(r.bytes, [n[6], n[7]]);
        assert_eq!(r.hash, [0xab; 8]);
        let header = BlockHeader {
            number: 70_000_123,
            hash: format!("{}{}", hex::encode(n), "ab".repeat(24)),
            parent_hash: String::new(),
            timestamp_ms: 0,
        };
        assert_eq!(RefBlock::from_header(&header).unwrap(), r);
        let bad = BlockHeader {
            hash: "zz".into(),
            ..header
        };
        assert!(RefBlock::from_header(&bad).is_err());
    }

    #[test]
    fn txid_is_sha256_of_raw_data_and_the_raw_data_decodes() {
        let s = signer();
        let (r, t) = reference();
        let from = owner(&s, 0);
        let to = owner(&s, 1);
        let tx = trx_transfer(&from, &to, Amount::from_units(1_234_567), r, t).unwrap();
        let digest: [u8; 32] = Sha256::digest(tx.raw_data()).into();
        assert_eq!(&digest, tx.txid());
        let raw = proto::TransactionRaw::decode(tx.raw_data()).unwrap();
        assert_eq!(raw.expiration, t.expiration_ms);
        assert_eq!(raw.fee_limit, 0);
        let any = raw.contract[0].parameter.clone().unwrap();
        assert_eq!(any.type_url, proto::TYPE_URL_TRANSFER);
        let transfer = proto::TransferContract::decode(&any.value[..]).unwrap();
        assert_eq!(transfer.amount, 1_234_567);
        assert_eq!(transfer.to_address, to.to_versioned_bytes());

        let token = TronAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").unwrap();
        let tx =
            trc20_transfer(&from, &token, &to, Amount::from_units(5), 30_000_000, r, t).unwrap();
        let raw = proto::TransactionRaw::decode(tx.raw_data()).unwrap();
        assert_eq!(raw.fee_limit, 30_000_000);
        let any = raw.contract[0].parameter.clone().unwrap();
        let call = proto::TriggerSmartContract::decode(&any.value[..]).unwrap();
        assert_eq!(call.contract_address, token.to_versioned_bytes());
        assert_eq!(
            abi::decode_transfer_call(&call.data).unwrap(),
            abi::DecodedCall {
                from: None,
                to,
                amount: 5
            }
        );
    }

    #[test]
    fn refuses_bad_inputs() {
        let s = signer();
        let (r, t) = reference();
        let a = owner(&s, 0);
        let b = owner(&s, 1);
        assert_eq!(
            trx_transfer(&a, &b, Amount::ZERO, r, t),
            Err(TxError::AmountZero)
        );
        assert_eq!(
            trx_transfer(&a, &b, Amount::from_units(1 << 63), r, t),
            Err(TxError::AmountTooLarge)
        );
        assert_eq!(
            trx_transfer(&a, &a, Amount::from_units(1), r, t),
            Err(TxError::SameAccount)
        );
        assert_eq!(
            trc20_transfer(&a, &b, &b, Amount::from_units(1), 0, r, t),
            Err(TxError::FeeLimit)
        );
        assert_eq!(
            trc20_transfer(&a, &b, &b, Amount::from_units(1), u64::MAX, r, t),
            Err(TxError::FeeLimit)
        );
        let backwards = TxTiming {
            timestamp_ms: 10,
            expiration_ms: 10,
        };
        assert_eq!(
            trx_transfer(&a, &b, Amount::from_units(1), r, backwards),
            Err(TxError::Expiration)
        );
    }

    #[test]
    fn signs_deterministically_and_checks_the_owner() {
        let s = signer();
        let (r, t) = reference();
        let from = owner(&s, 0);
        let to = owner(&s, 1);
        let tx = trx_transfer(&from, &to, Amount::from_units(1), r, t).unwrap();
        let signed = sign(tx.clone(), &s, &path(0)).unwrap();
        assert!(signed.signature()[64] <= 1);
        assert_eq!(sign(tx.clone(), &s, &path(0)).unwrap(), signed);
        let decoded = proto::Transaction::decode(&signed.to_bytes()[..]).unwrap();
        assert_eq!(
            decoded.raw_data.unwrap().encode_to_vec(),
            tx.raw_data().to_vec()
        );
        assert_eq!(decoded.signature, vec![signed.signature().to_vec()]);
        assert_eq!(
            signed.bandwidth_bytes(),
            u64::try_from(signed.to_bytes().len()).unwrap() + 64
        );

        // The key of another index does not own the transaction.
        let e = sign(tx.clone(), &s, &path(1)).unwrap_err();
        assert!(e.message.contains("does not recover"), "{e}");
        // A BSC path is refused before anything is signed.
        let bsc = HdPath {
            network: Network::Bsc,
            ..path(0)
        };
        assert!(sign(tx, &s, &bsc).is_err());
    }

    #[test]
    fn raw_data_reads_back_and_signatures_attach_without_a_signer() {
        let s = signer();
        let (r, t) = reference();
        let from = owner(&s, 0);
        let to = owner(&s, 1);
        let token = TronAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").unwrap();
        for tx in [
            trx_transfer(&from, &to, Amount::from_units(1_234_567), r, t).unwrap(),
            trc20_transfer(&from, &token, &to, Amount::from_units(5), 30_000_000, r, t).unwrap(),
        ] {
            let back = UnsignedTransaction::from_raw_data(tx.raw_data()).unwrap();
            assert_eq!(back, tx);
            assert_eq!(back.owner(), &from);
            assert_eq!(back.expiration_ms(), t.expiration_ms);

            let by_signer = sign(tx.clone(), &s, &path(0)).unwrap();
            let sig = s.sign_digest(&path(0), tx.txid()).unwrap();
            assert_eq!(attach_signature(back, &sig).unwrap(), by_signer);
            assert_eq!(tx.bandwidth_bytes(), by_signer.bandwidth_bytes());
            assert_eq!(
                SignedTransaction::txid_of_bytes(&by_signer.to_bytes()),
                Some(*tx.txid())
            );

            // Another key's signature, a bad recovery id, a malformed scalar: refused.
            let other = s.sign_digest(&path(1), tx.txid()).unwrap();
            assert!(matches!(
                attach_signature(tx.clone(), &other),
                Err(TxError::WrongKey(_))
            ));
            let flipped = RecoverableSignature {
                recovery_id: 1 - sig.recovery_id,
                ..sig
            };
            assert!(attach_signature(tx.clone(), &flipped).is_err());
            for recovery_id in [2, 27] {
                let bad = RecoverableSignature { recovery_id, ..sig };
                assert_eq!(
                    attach_signature(tx.clone(), &bad),
                    Err(TxError::BadSignature)
                );
            }
            let zero = RecoverableSignature { r: [0; 32], ..sig };
            assert_eq!(
                attach_signature(tx.clone(), &zero),
                Err(TxError::BadSignature)
            );
        }
    }

    #[test]
    fn energy_delegations_are_written_with_java_trons_field_numbers() {
        let s = signer();
        let (r, t) = reference();
        let (from, to) = (owner(&s, 0), owner(&s, 1));
        let tx = energy_delegation(&from, &to, Amount::from_units(2_000_000), false, r, t).unwrap();
        let raw = proto::TransactionRaw::decode(tx.raw_data()).unwrap();
        assert_eq!(raw.fee_limit, 0);
        let contract = &raw.contract[0];
        assert_eq!(contract.r#type, 57);
        let any = contract.parameter.clone().unwrap();
        assert_eq!(
            any.type_url,
            "type.googleapis.com/protocol.DelegateResourceContract"
        );
        // owner_address = 1 (bytes), resource = 2 (ENERGY = 1), balance = 3 (varint),
        // receiver_address = 4 (bytes); lock and lock_period left at their defaults.
        let mut expected = vec![0x0a, 21];
        expected.extend_from_slice(&from.to_versioned_bytes());
        expected.extend_from_slice(&[0x10, 0x01, 0x18, 0x80, 0x89, 0x7a, 0x22, 21]);
        expected.extend_from_slice(&to.to_versioned_bytes());
        assert_eq!(any.value, expected);

        let back =
            energy_delegation(&from, &to, Amount::from_units(2_000_000), true, r, t).unwrap();
        let raw = proto::TransactionRaw::decode(back.raw_data()).unwrap();
        assert_eq!(raw.contract[0].r#type, 58);
        let any = raw.contract[0].parameter.clone().unwrap();
        assert_eq!(
            any.type_url,
            "type.googleapis.com/protocol.UnDelegateResourceContract"
        );
        assert_eq!(any.value, expected, "the same four fields");

        for tx in [tx, back] {
            let read = UnsignedTransaction::from_raw_data(tx.raw_data()).unwrap();
            assert_eq!(read.owner(), &from);
            let signed = sign(read, &s, &path(0)).unwrap();
            assert_eq!(signed.unsigned(), &tx);
        }
        let small = energy_delegation(&from, &to, Amount::from_units(999_999), false, r, t);
        assert_eq!(small, Err(TxError::DelegationTooSmall));
        // Taking back less than 1 TRX is allowed; nothing, or to oneself, is not.
        assert!(energy_delegation(&from, &to, Amount::from_units(1), true, r, t).is_ok());
        let zero = energy_delegation(&from, &to, Amount::ZERO, true, r, t);
        assert_eq!(zero, Err(TxError::AmountZero));
        let own = energy_delegation(&from, &from, Amount::from_units(2_000_000), false, r, t);
        assert_eq!(own, Err(TxError::SameAccount));
    }

    #[test]
    fn raw_data_that_is_not_ours_is_refused() {
        let s = signer();
        let (r, t) = reference();
        let tx = trx_transfer(&owner(&s, 0), &owner(&s, 1), Amount::from_units(9), r, t).unwrap();
        // A default field written explicitly (ref_block_num = 0): same message, other bytes.
        let mut padded = vec![0x18, 0x00];
        padded.extend_from_slice(tx.raw_data());
        assert!(proto::TransactionRaw::decode(padded.as_slice()).is_ok());
        assert!(matches!(
            UnsignedTransaction::from_raw_data(&padded),
            Err(TxError::Unsupported(_))
        ));
        // An unknown field (auths = 9) is dropped by the decoder: refused too.
        let mut unknown = tx.raw_data().to_vec();
        unknown.extend_from_slice(&[0x4a, 0x00]);
        assert!(UnsignedTransaction::from_raw_data(&unknown).is_err());
        assert!(UnsignedTransaction::from_raw_data(b"garbage").is_err());
        // Two contracts, or none.
        let mut raw = proto::TransactionRaw::decode(tx.raw_data()).unwrap();
        raw.contract.push(raw.contract[0].clone());
        assert!(UnsignedTransaction::from_raw_data(&raw.encode_to_vec()).is_err());
        raw.contract.clear();
        assert!(UnsignedTransaction::from_raw_data(&raw.encode_to_vec()).is_err());
        // A signed transaction with trailing bytes has no txID here.
        let signed = sign(tx, &s, &path(0)).unwrap();
        let mut bytes = signed.to_bytes();
        bytes.push(0);
        assert_eq!(SignedTransaction::txid_of_bytes(&bytes), None);
    }
}
