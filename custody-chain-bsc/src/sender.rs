//! Sending on BSC: the [`ChainSender`] port over the same JSON-RPC client as the scanner.
//!
//! Transactions are EIP-155 legacy transactions: the digest the core signs is
//! `keccak256(rlp([nonce, gasPrice, gas, to, value, data, chainId, 0, 0]))`, the signed bytes are
//! `rlp([nonce, gasPrice, gas, to, value, data, v, r, s])` with `v = recovery_id + 2·chainId +
//! 35`, and the hash is `keccak256` of those bytes. RLP is `alloy-rlp`'s.
//!
//! The node's answers to `eth_sendRawTransaction`:
//!
//! | answer | outcome |
//! |---|---|
//! | a hash | `Accepted` (another hash than ours: `Unknown`, logged) |
//! | "already known", "known transaction", "already imported" | `Accepted` (the same bytes are in a pool) |
//! | "nonce too low" | `NonceUsed` (mined already: ours, or another) |
//! | "replacement transaction underpriced", "replacement fee too low" | `Underpriced` |
//! | any other JSON-RPC error (insufficient funds, intrinsic gas too low, underpriced...) | `Rejected` with the node's message |
//! | timeout, connection error, HTTP error, every endpoint down | `Unknown`: never a verdict |

use std::sync::Arc;

use alloy_rlp::{Encodable, Header};
use async_trait::async_trait;
use custody_core::address::{keccak256, BscAddress};
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::ports::sender::{
    BroadcastOutcome, BuildRequest, ChainSender, FeeBid, FeeEstimate, Inclusion, Payment, SignedTx,
    TxLookup, UnsignedTx,
};
use custody_core::ports::signer::RecoverableSignature;
use custody_core::Network;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::codec;
use crate::BscChain;

const PORT: &str = "chain.bsc.sender";
/// Gas of a plain BNB transfer.
pub const NATIVE_TRANSFER_GAS: u64 = 21_000;
/// `transfer(address,uint256)`.
const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// Pricing rules, units last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BscSenderSettings {
    /// The node's `eth_gasPrice` is raised to at least this (BSC validators' minimum).
    pub gas_price_floor_wei: u128,
    /// And never bid above this.
    pub gas_price_cap_wei: u128,
    /// Added to the node's gas estimate of a token transfer for its gas limit.
    pub token_gas_margin_percent: u64,
}

impl Default for BscSenderSettings {
    fn default() -> Self {
        BscSenderSettings {
            gas_price_floor_wei: 50_000_000,
            gas_price_cap_wei: 50_000_000_000,
            token_gas_margin_percent: 20,
        }
    }
}

/// The BSC sender: shares the scanner's endpoints and their health.
pub struct BscSender {
    chain: Arc<BscChain>,
    settings: BscSenderSettings,
}

/// The unsigned fields, as [`UnsignedTx::payload`] (read back only by `assemble`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Fields {
    nonce: u64,
    gas_price: u128,
    gas: u64,
    to: [u8; 20],
    value: u128,
    #[serde(with = "hex_field")]
    data: Vec<u8>,
    chain_id: u64,
}

mod hex_field {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        hex::decode(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// An RLP integer from big-endian bytes: leading zeros dropped (zero is the empty string).
fn trimmed(word: &[u8]) -> &[u8] {
    let first = word.iter().position(|&b| b != 0).unwrap_or(word.len());
    &word[first..]
}

fn rlp_list(items: &[&dyn Encodable]) -> Vec<u8> {
    let payload_length = items.iter().map(|i| i.length()).sum();
    let mut out = Vec::with_capacity(payload_length + 9);
    Header {
        list: true,
        payload_length,
    }
    .encode(&mut out);
    for item in items {
        item.encode(&mut out);
    }
    out
}

impl Fields {
    fn signing_bytes(&self) -> Vec<u8> {
        let (to, data) = (&self.to[..], &self.data[..]);
        rlp_list(&[
            &self.nonce,
            &self.gas_price,
            &self.gas,
            &to,
            &self.value,
            &data,
            &self.chain_id,
            &0u8,
            &0u8,
        ])
    }

    fn signed_bytes(&self, sig: &RecoverableSignature) -> Vec<u8> {
        let v = u64::from(sig.recovery_id) + self.chain_id * 2 + 35;
        let (to, data) = (&self.to[..], &self.data[..]);
        let (r, s) = (trimmed(&sig.r), trimmed(&sig.s));
        rlp_list(&[
            &self.nonce,
            &self.gas_price,
            &self.gas,
            &to,
            &self.value,
            &data,
            &v,
            &r,
            &s,
        ])
    }
}

fn parse_address(what: &str, s: &str) -> Result<BscAddress, PortError> {
    BscAddress::parse(s).map_err(|e| PortError::permanent(PORT, format!("{what} {s:?}: {e}")))
}

/// Calldata of `transfer(to, amount)`.
fn transfer_call(to: &BscAddress, amount: Amount) -> Vec<u8> {
    let mut data = Vec::with_capacity(68);
    data.extend_from_slice(&TRANSFER_SELECTOR);
    data.extend_from_slice(&[0u8; 12]);
    data.extend_from_slice(to.as_bytes());
    data.extend_from_slice(&[0u8; 16]);
    data.extend_from_slice(&amount.units().to_be_bytes());
    data
}

/// (to, value, data) of a payment.
fn call_of(payment: &Payment) -> Result<(BscAddress, u128, Vec<u8>), PortError> {
    match payment {
        Payment::Native { to, amount } => {
            Ok((parse_address("to", to)?, amount.units(), Vec::new()))
        }
        Payment::Token {
            contract,
            to,
            amount,
        } => Ok((
            parse_address("contract", contract)?,
            0,
            transfer_call(&parse_address("to", to)?, *amount),
        )),
    }
}

fn malformed(what: impl std::fmt::Display) -> PortError {
    PortError::permanent(PORT, format!("malformed answer: {what}"))
}

fn field<'a>(v: &'a Value, name: &str) -> Result<&'a Value, PortError> {
    v.get(name)
        .ok_or_else(|| malformed(format!("no {name:?} in {v}")))
}

/// The outcome of an `eth_sendRawTransaction` error message.
pub fn classify_refusal(message: &str) -> BroadcastOutcome {
    let m = message.to_ascii_lowercase();
    if m.contains("already known")
        || m.contains("known transaction")
        || m.contains("already imported")
    {
        BroadcastOutcome::Accepted
    } else if m.contains("nonce too low") {
        BroadcastOutcome::NonceUsed
    } else if m.contains("replacement transaction underpriced")
        || m.contains("replacement fee too low")
    {
        BroadcastOutcome::Underpriced
    } else {
        BroadcastOutcome::Rejected(message.to_owned())
    }
}

impl BscSender {
    pub fn new(chain: Arc<BscChain>, settings: BscSenderSettings) -> Self {
        BscSender { chain, settings }
    }

    async fn gas_price(&self) -> Result<u128, PortError> {
        let v = self.chain.rpc().call("eth_gasPrice", json!([])).await?;
        let node = codec::quantity_u128_opt(&v)
            .map_err(malformed)?
            .ok_or_else(|| malformed("eth_gasPrice is not a quantity"))?;
        Ok(node
            .max(self.settings.gas_price_floor_wei)
            .min(self.settings.gas_price_cap_wei))
    }
}

#[async_trait]
impl ChainSender for BscSender {
    fn network(&self) -> Network {
        Network::Bsc
    }

    async fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError> {
        let from = parse_address("from", from)?;
        let price = self.gas_price().await?;
        let (expected_gas, limit) = match payment {
            Payment::Native { .. } => (NATIVE_TRANSFER_GAS, NATIVE_TRANSFER_GAS),
            Payment::Token { .. } => {
                let (to, _, data) = call_of(payment)?;
                let v = self
                    .chain
                    .rpc()
                    .call(
                        "eth_estimateGas",
                        json!([{
                            "from": from.to_lowercase_hex(),
                            "to": to.to_lowercase_hex(),
                            "data": format!("0x{}", hex::encode(&data)),
                        }]),
                    )
                    .await?;
                let estimate = codec::quantity_u64(&v).map_err(malformed)?;
                let limit = estimate
                    .saturating_mul(100 + self.settings.token_gas_margin_percent)
                    .div_ceil(100);
                (estimate, limit)
            }
        };
        let cost = |gas: u64| {
            u128::from(gas)
                .checked_mul(price)
                .map(Amount::from_units)
                .ok_or_else(|| PortError::permanent(PORT, "gas cost overflows"))
        };
        Ok(FeeEstimate {
            expected_native: cost(expected_gas)?,
            max_native: cost(limit)?,
            bid: FeeBid::Gas {
                gas_limit: limit,
                gas_price_wei: price,
            },
        })
    }

    async fn confirmed_nonce(&self, address: &str) -> Result<Option<u64>, PortError> {
        let address = parse_address("address", address)?;
        let v = self
            .chain
            .rpc()
            .call(
                "eth_getTransactionCount",
                json!([address.to_lowercase_hex(), "latest"]),
            )
            .await?;
        Ok(Some(codec::quantity_u64(&v).map_err(malformed)?))
    }

    async fn build(&self, request: &BuildRequest) -> Result<UnsignedTx, PortError> {
        let nonce = request
            .nonce
            .ok_or_else(|| PortError::permanent(PORT, "a BSC transaction needs its nonce"))?;
        let FeeBid::Gas {
            gas_limit,
            gas_price_wei,
        } = request.bid
        else {
            return Err(PortError::permanent(PORT, "a BSC transaction bids gas"));
        };
        parse_address("from", &request.from)?;
        let (to, value, data) = call_of(&request.payment)?;
        let fields = Fields {
            nonce,
            gas_price: gas_price_wei,
            gas: gas_limit,
            to: *to.as_bytes(),
            value,
            data,
            chain_id: self.chain.chain_id(),
        };
        Ok(UnsignedTx {
            digest: keccak256(&fields.signing_bytes()),
            payload: serde_json::to_vec(&fields).expect("fields serialize"),
            expires_at_ms: None,
        })
    }

    fn assemble(
        &self,
        unsigned: &UnsignedTx,
        signature: &RecoverableSignature,
    ) -> Result<SignedTx, PortError> {
        let fields: Fields = serde_json::from_slice(&unsigned.payload)
            .map_err(|e| PortError::permanent(PORT, format!("not a BSC payload: {e}")))?;
        if keccak256(&fields.signing_bytes()) != unsigned.digest {
            return Err(PortError::permanent(
                PORT,
                "the digest is not the payload's",
            ));
        }
        if signature.recovery_id > 1 {
            return Err(PortError::permanent(PORT, "recovery id out of range"));
        }
        let raw = fields.signed_bytes(signature);
        Ok(SignedTx {
            hash: hex::encode(keccak256(&raw)),
            raw,
        })
    }

    async fn broadcast(&self, signed: &SignedTx) -> BroadcastOutcome {
        let raw = format!("0x{}", hex::encode(&signed.raw));
        match self
            .chain
            .rpc()
            .call_raw("eth_sendRawTransaction", json!([raw]))
            .await
        {
            Ok(Ok(answer)) => match codec::hash(&answer) {
                Ok(hash) if hash == signed.hash => BroadcastOutcome::Accepted,
                Ok(other) => {
                    tracing::error!(ours = %signed.hash, node = %other, "the node names another hash");
                    BroadcastOutcome::Unknown(format!("the node answered hash {other}"))
                }
                Err(e) => BroadcastOutcome::Unknown(format!("unreadable answer: {e}")),
            },
            Ok(Err(refusal)) => classify_refusal(&refusal.message),
            Err(e) => BroadcastOutcome::Unknown(e.message),
        }
    }

    async fn lookup(&self, hash: &str) -> Result<TxLookup, PortError> {
        let h = format!("0x{}", hash.trim_start_matches("0x"));
        let receipt = self
            .chain
            .rpc()
            .call("eth_getTransactionReceipt", json!([h]))
            .await?;
        if !receipt.is_null() {
            let block_number =
                codec::quantity_u64(field(&receipt, "blockNumber")?).map_err(malformed)?;
            let block_hash = codec::hash(field(&receipt, "blockHash")?).map_err(malformed)?;
            let status = codec::quantity_u64(field(&receipt, "status")?).map_err(malformed)?;
            let gas_used = codec::quantity_u128_opt(field(&receipt, "gasUsed")?)
                .map_err(malformed)?
                .unwrap_or(0);
            let price = match receipt.get("effectiveGasPrice") {
                Some(p) if !p.is_null() => codec::quantity_u128_opt(p).map_err(malformed)?,
                _ => None,
            }
            .unwrap_or(0);
            return Ok(TxLookup::Included(Inclusion {
                block_number,
                block_hash,
                succeeded: status == 1,
                fee_native: Amount::from_units(gas_used.saturating_mul(price)),
            }));
        }
        let tx = self
            .chain
            .rpc()
            .call("eth_getTransactionByHash", json!([h]))
            .await?;
        Ok(if tx.is_null() {
            TxLookup::Unknown
        } else {
            TxLookup::Pending
        })
    }

    async fn head(&self) -> Result<(u64, i64), PortError> {
        let block = self
            .chain
            .rpc()
            .call("eth_getBlockByNumber", json!(["latest", false]))
            .await?;
        if block.is_null() {
            return Err(malformed("no latest block"));
        }
        let number = codec::quantity_u64(field(&block, "number")?).map_err(malformed)?;
        let seconds = codec::quantity_u64(field(&block, "timestamp")?).map_err(malformed)?;
        Ok((
            number,
            i64::try_from(seconds.saturating_mul(1_000)).unwrap_or(i64::MAX),
        ))
    }

    async fn balances(
        &self,
        address: &str,
        token_contract: Option<&str>,
    ) -> Result<(Amount, Option<Amount>), PortError> {
        let owner = parse_address("address", address)?;
        let native = self
            .chain
            .rpc()
            .call(
                "eth_getBalance",
                json!([owner.to_lowercase_hex(), "latest"]),
            )
            .await?;
        let native = codec::quantity_u128_opt(&native)
            .map_err(malformed)?
            .unwrap_or(0);
        let token = match token_contract {
            None => None,
            Some(contract) => {
                let contract = parse_address("contract", contract)?;
                let v = self
                    .chain
                    .rpc()
                    .call(
                        "eth_call",
                        json!([{
                            "to": contract.to_lowercase_hex(),
                            "data": codec::balance_of_call(&owner),
                        }, "latest"]),
                    )
                    .await?;
                let word = codec::data(&v).map_err(malformed)?;
                Some(Amount::from_units(
                    codec::word_u128_opt(&word)
                        .map_err(malformed)?
                        .ok_or_else(|| malformed("a balance over 128 bits"))?,
                ))
            }
        };
        Ok((Amount::from_units(native), token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eip155_example_signs_the_published_hash() {
        // EIP-155's example: nonce 9, 20 gwei, 21000 gas, to 0x3535…35, 1 ether, chain id 1.
        let f = Fields {
            nonce: 9,
            gas_price: 20_000_000_000,
            gas: 21_000,
            to: [0x35; 20],
            value: 1_000_000_000_000_000_000,
            data: Vec::new(),
            chain_id: 1,
        };
        assert_eq!(
            hex::encode(f.signing_bytes()),
            "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080018080"
        );
        assert_eq!(
            hex::encode(keccak256(&f.signing_bytes())),
            "daf5a779ae972f972197303d7b574746c7ef83eadac0f2791ad23db92e4c8e53"
        );
    }

    #[test]
    fn node_answers_are_classified() {
        assert_eq!(
            classify_refusal("already known"),
            BroadcastOutcome::Accepted
        );
        assert_eq!(
            classify_refusal("nonce too low: next nonce 5, tx nonce 4"),
            BroadcastOutcome::NonceUsed
        );
        assert_eq!(
            classify_refusal("replacement transaction underpriced"),
            BroadcastOutcome::Underpriced
        );
        assert!(matches!(
            classify_refusal("insufficient funds for gas * price + value"),
            BroadcastOutcome::Rejected(_)
        ));
    }

    #[test]
    fn transfer_calldata_is_the_abi_encoding() {
        let to = BscAddress::parse("0x00000000000000000000000000000000000000ff").unwrap();
        let data = transfer_call(&to, Amount::from_units(258));
        assert_eq!(data.len(), 68);
        assert_eq!(&data[..4], &TRANSFER_SELECTOR);
        assert_eq!(data[35], 0xff);
        assert_eq!(&data[66..], &[1, 2]);
    }
}
