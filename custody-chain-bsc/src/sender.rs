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
use alloy_sol_types::{SolCall, SolEvent};
use async_trait::async_trait;
use custody_core::address::{keccak256, BscAddress};
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::ports::sender::{
    BlockListing, BroadcastOutcome, BuildRequest, ChainSender, FeeBid, FeeEstimate, Inclusion,
    MoveKind, Payment, SignedTx, TokenMove, TxLookup, UnsignedTx, DESTINATION_REFUSES,
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

/// Gas of a BNB transfer to a contract when the node cannot estimate it because the hot wallet
/// holds less than the transfer (the payment waits for funds; it is priced again at signing).
pub const CONTRACT_NATIVE_GAS: u64 = 100_000;

/// Gas of a router swap when the node cannot estimate it (the hot wallet has not approved the
/// router yet, or holds the tokens only once an earlier payment lands): a Uniswap V2 swap
/// measures about 100,000–130,000 for one hop and 60,000 more per further hop; these bound it.
const SWAP_GAS_FIRST_HOP: u64 = 250_000;
const SWAP_GAS_PER_HOP: u64 = 100_000;
/// Gas of an ERC-20 `approve` when the node cannot estimate it.
const APPROVE_GAS: u64 = 60_000;
/// Gas of a BEP20 `transfer` when the node cannot estimate it (the hot wallet does not hold
/// the tokens yet: the payment waits for them, and must still be quoted and alerted on). A
/// transfer to a first-time holder measures about 52,000.
const TOKEN_TRANSFER_GAS: u64 = 100_000;

alloy_sol_types::sol! {
    function transfer(address to, uint256 amount) returns (bool);
    function approve(address spender, uint256 amount) returns (bool);
    function swapExactTokensForTokens(uint256 amountIn, uint256 amountOutMin, address[] path, address to, uint256 deadline) returns (uint256[] amounts);
    function swapExactETHForTokens(uint256 amountOutMin, address[] path, address to, uint256 deadline) payable returns (uint256[] amounts);
    function swapExactTokensForETH(uint256 amountIn, uint256 amountOutMin, address[] path, address to, uint256 deadline) returns (uint256[] amounts);
    event Transfer(address indexed from, address indexed to, uint256 value);
    event Deposit(address indexed dst, uint256 wad);
    event Withdrawal(address indexed src, uint256 wad);
}

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
    /// The sender: not part of the signed bytes (a node recovers it from the signature), kept
    /// so that `assemble` can check the signature recovers to it.
    from: [u8; 20],
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

/// The address whose key made `signature` of `digest`; `None` for a signature that is not a
/// valid secp256k1 one.
fn recovered_signer(digest: &[u8; 32], signature: &RecoverableSignature) -> Option<[u8; 20]> {
    use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
    let sig = Signature::from_scalars(signature.r, signature.s).ok()?;
    let recovery = RecoveryId::from_byte(signature.recovery_id)?;
    let key = VerifyingKey::recover_from_prehash(digest, &sig, recovery).ok()?;
    let point = key.to_encoded_point(false);
    let uncompressed: [u8; 65] = point.as_bytes().try_into().ok()?;
    Some(*BscAddress::from_uncompressed_public_key(&uncompressed).as_bytes())
}

fn parse_address(what: &str, s: &str) -> Result<BscAddress, PortError> {
    BscAddress::parse(s).map_err(|e| PortError::permanent(PORT, format!("{what} {s:?}: {e}")))
}

fn sol_address(a: &BscAddress) -> alloy_primitives::Address {
    alloy_primitives::Address::from(*a.as_bytes())
}

fn sol_uint(a: Amount) -> alloy_primitives::U256 {
    alloy_primitives::U256::from(a.units())
}

/// Calldata of `transfer(to, amount)`.
fn transfer_call(to: &BscAddress, amount: Amount) -> Vec<u8> {
    transferCall {
        to: sol_address(to),
        amount: sol_uint(amount),
    }
    .abi_encode()
}

/// A TRON-only payment (Stake 2.0 energy delegation): BSC has nothing like it.
fn tron_only(payment: &Payment) -> PortError {
    PortError::permanent(
        PORT,
        format!("{payment:?} is a TRON energy delegation; BSC has no resource delegation"),
    )
}

/// (to, value, data) of a payment.
fn call_of(payment: &Payment) -> Result<(BscAddress, u128, Vec<u8>), PortError> {
    match payment {
        Payment::DelegateEnergy { .. } | Payment::UndelegateEnergy { .. } => {
            Err(tron_only(payment))
        }
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
        Payment::Approve {
            token,
            spender,
            amount,
        } => Ok((
            parse_address("token", token)?,
            0,
            approveCall {
                spender: sol_address(&parse_address("spender", spender)?),
                amount: sol_uint(*amount),
            }
            .abi_encode(),
        )),
        Payment::Swap {
            router,
            path,
            amount_in,
            min_out,
            native_in,
            native_out,
            to,
            deadline_s,
        } => {
            if path.len() < 2 || (*native_in && *native_out) {
                return Err(PortError::permanent(
                    PORT,
                    format!("a swap needs two or more tokens and one native end at most: {path:?}"),
                ));
            }
            let path = path
                .iter()
                .map(|t| parse_address("path token", t).map(|a| sol_address(&a)))
                .collect::<Result<Vec<_>, _>>()?;
            let (to, deadline) = (
                sol_address(&parse_address("to", to)?),
                alloy_primitives::U256::from(*deadline_s),
            );
            let (amount_in_word, min_out_word) = (sol_uint(*amount_in), sol_uint(*min_out));
            let (value, data) = if *native_in {
                let call = swapExactETHForTokensCall {
                    amountOutMin: min_out_word,
                    path,
                    to,
                    deadline,
                };
                (amount_in.units(), call.abi_encode())
            } else if *native_out {
                let call = swapExactTokensForETHCall {
                    amountIn: amount_in_word,
                    amountOutMin: min_out_word,
                    path,
                    to,
                    deadline,
                };
                (0, call.abi_encode())
            } else {
                let call = swapExactTokensForTokensCall {
                    amountIn: amount_in_word,
                    amountOutMin: min_out_word,
                    path,
                    to,
                    deadline,
                };
                (0, call.abi_encode())
            };
            Ok((parse_address("router", router)?, value, data))
        }
    }
}

/// The token movements of a receipt's logs: ERC-20 `Transfer` (three topics: ERC-721's has
/// four and is skipped) and WETH9 `Deposit`/`Withdrawal`. A log of another shape, or an amount
/// beyond 128 bits, is not a movement the service can have caused and is skipped.
pub fn receipt_moves(logs: &[Value]) -> Vec<TokenMove> {
    let word = |v: &Value| codec::data(v).ok().filter(|w| w.len() == 32);
    let mut moves = Vec::new();
    for log in logs {
        let (Some(contract), Some(topics), Some(data)) = (
            log.get("address").and_then(|a| codec::address(a).ok()),
            log.get("topics").and_then(Value::as_array),
            log.get("data").and_then(word),
        ) else {
            continue;
        };
        let Some(topic0) = topics.first().and_then(word) else {
            continue;
        };
        let Ok(Some(amount)) = codec::word_u128_opt(&data) else {
            continue;
        };
        let topic_address = |i: usize| {
            topics
                .get(i)
                .and_then(word)
                .and_then(|w| codec::word_address(&w).ok())
        };
        let (kind, from, to) = if topic0 == Transfer::SIGNATURE_HASH.as_slice() && topics.len() == 3
        {
            let (Some(from), Some(to)) = (topic_address(1), topic_address(2)) else {
                continue;
            };
            (MoveKind::Transfer, from, to)
        } else if topic0 == Deposit::SIGNATURE_HASH.as_slice() && topics.len() == 2 {
            let Some(who) = topic_address(1) else {
                continue;
            };
            (MoveKind::Wrap, who, who)
        } else if topic0 == Withdrawal::SIGNATURE_HASH.as_slice() && topics.len() == 2 {
            let Some(who) = topic_address(1) else {
                continue;
            };
            (MoveKind::Unwrap, who, who)
        } else {
            continue;
        };
        moves.push(TokenMove {
            contract: contract.to_string(),
            kind,
            from: from.to_string(),
            to: to.to_string(),
            amount: Amount::from_units(amount),
        });
    }
    moves
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

/// What the node said of a call's gas.
enum Estimate {
    Gas(u64),
    /// The call would revert as things stand.
    Reverts,
    /// The sender holds less than the call's value or its gas: nothing is known of the call.
    SenderShort,
}

impl BscSender {
    /// The first block up to `final_block` whose state counts past `nonce` of `from` (the one
    /// that holds `from`'s transaction at `nonce`), `None` when `final_block` does not count
    /// past it. Searched down from `final_block` in doubling steps, then halved: a nonce taken
    /// recently (the usual case) costs a few calls, and only within the state a pruning node
    /// keeps.
    async fn block_taking_nonce(
        &self,
        from: &str,
        nonce: u64,
        final_block: u64,
    ) -> Result<Option<u64>, PortError> {
        let past = |count: u64| count > nonce;
        if !past(
            self.transaction_count(from, format!("{final_block:#x}"))
                .await?,
        ) {
            return Ok(None);
        }
        let (mut low, mut high) = (None, final_block);
        let mut step = 1u64;
        while low.is_none() {
            let probe = final_block.saturating_sub(step);
            if probe == high {
                // Block 0 counts past it: only a chain that starts with it.
                return Ok(Some(0));
            }
            if past(self.transaction_count(from, format!("{probe:#x}")).await?) {
                high = probe;
                step = step.saturating_mul(2);
            } else {
                low = Some(probe);
            }
        }
        let mut low = low.unwrap_or(0);
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if past(self.transaction_count(from, format!("{mid:#x}")).await?) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Ok(Some(high))
    }

    /// The hash of `from`'s transaction at `nonce` in block `number`, read from the block's
    /// own list with the endpoint's head in one request, when the block is at least `depth`
    /// blocks below that head; `None` otherwise.
    async fn transaction_in_block_at_nonce(
        &self,
        from: &str,
        nonce: u64,
        number: u64,
        depth: u64,
    ) -> Result<Option<String>, PortError> {
        let from = parse_address("from", from)?;
        let mut answers = self
            .chain
            .rpc()
            .batch(&[
                (
                    "eth_getBlockByNumber",
                    json!([format!("{number:#x}"), true]),
                ),
                ("eth_getBlockByNumber", json!(["latest", false])),
            ])
            .await?
            .into_iter();
        let mut next = || match answers.next() {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(e.into_port_error("eth_getBlockByNumber")),
            None => Err(malformed("no answer to eth_getBlockByNumber in the batch")),
        };
        let (block, head) = (next()?, next()?);
        if block.is_null() || head.is_null() {
            return Ok(None);
        }
        // The block asked for, not another one an endpoint answered with.
        if codec::quantity_u64(field(&block, "number")?).map_err(malformed)? != number {
            return Ok(None);
        }
        let head = codec::quantity_u64(field(&head, "number")?).map_err(malformed)?;
        if head.saturating_sub(number) < depth {
            return Ok(None);
        }
        let txs = field(&block, "transactions")?
            .as_array()
            .ok_or_else(|| malformed("a block's transactions are not a list"))?;
        for tx in txs {
            let sender = codec::address(field(tx, "from")?).map_err(malformed)?;
            let at = codec::quantity_u64(field(tx, "nonce")?).map_err(malformed)?;
            if sender == from && at == nonce {
                return Ok(Some(codec::hash(field(tx, "hash")?).map_err(malformed)?));
            }
        }
        Ok(None)
    }

    /// `eth_getTransactionCount` of `address` at block `tag`: its nonce after that block.
    async fn transaction_count(&self, address: &str, tag: String) -> Result<u64, PortError> {
        let address = parse_address("address", address)?;
        let v = self
            .chain
            .rpc()
            .call(
                "eth_getTransactionCount",
                json!([address.to_lowercase_hex(), tag]),
            )
            .await?;
        codec::quantity_u64(&v).map_err(malformed)
    }

    pub fn new(chain: Arc<BscChain>, settings: BscSenderSettings) -> Self {
        BscSender { chain, settings }
    }

    /// Whether `address` holds code (a contract, or an EIP-7702 delegated account).
    async fn has_code(&self, address: &BscAddress) -> Result<bool, PortError> {
        let v = self
            .chain
            .rpc()
            .call("eth_getCode", json!([address.to_lowercase_hex(), "latest"]))
            .await?;
        let code = v
            .as_str()
            .ok_or_else(|| malformed("eth_getCode is not a string"))?;
        Ok(!matches!(code, "0x" | "0x0" | ""))
    }

    /// The node's gas estimate of `payment` from `from`.
    async fn estimate_gas(
        &self,
        from: &BscAddress,
        payment: &Payment,
    ) -> Result<Estimate, PortError> {
        let (to, value, data) = call_of(payment)?;
        let answer = self
            .chain
            .rpc()
            .call_raw(
                "eth_estimateGas",
                json!([{
                    "from": from.to_lowercase_hex(),
                    "to": to.to_lowercase_hex(),
                    "value": format!("{value:#x}"),
                    "data": format!("0x{}", hex::encode(&data)),
                }]),
            )
            .await?;
        match answer {
            Ok(v) => Ok(Estimate::Gas(codec::quantity_u64(&v).map_err(malformed)?)),
            // The sender holds less than the call's value (a BNB→token swap larger than the hot
            // wallet's BNB) or its gas: the node cannot estimate it now, which says nothing of
            // the node's health. The caller bounds it; sending waits until the wallet is funded.
            // Checked first: nodes answer it with the code of a revert.
            Err(refusal)
                if refusal
                    .message
                    .to_ascii_lowercase()
                    .contains("insufficient funds") =>
            {
                tracing::debug!(error = %refusal.message, "gas estimate beyond the sender's funds");
                Ok(Estimate::SenderShort)
            }
            // The call would revert (no allowance, no tokens yet): the caller decides.
            Err(refusal) if refusal.is_permanent() => {
                tracing::debug!(error = %refusal.message, "gas estimate reverted");
                Ok(Estimate::Reverts)
            }
            Err(refusal) => Err(PortError::transient(
                PORT,
                format!("the node could not estimate gas: {}", refusal.message),
            )),
        }
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
        let margin = |gas: u64| {
            gas.saturating_mul(100 + self.settings.token_gas_margin_percent)
                .div_ceil(100)
        };
        let (expected_gas, limit) = match payment {
            Payment::DelegateEnergy { .. } | Payment::UndelegateEnergy { .. } => {
                return Err(tron_only(payment))
            }
            Payment::Native { to, .. } => {
                let to = parse_address("to", to)?;
                if self.has_code(&to).await? {
                    // A contract (a Safe, an exchange's deposit contract, an EIP-7702
                    // account): its code runs on receipt and 21,000 gas would fail and burn.
                    match self.estimate_gas(&from, payment).await? {
                        Estimate::Gas(gas) => (gas, margin(gas)),
                        Estimate::SenderShort => (CONTRACT_NATIVE_GAS, CONTRACT_NATIVE_GAS),
                        Estimate::Reverts => {
                            return Err(PortError::permanent(
                                DESTINATION_REFUSES,
                                format!(
                                "the contract at {to} refuses a BNB transfer (its code reverts)"
                            ),
                            ))
                        }
                    }
                } else {
                    (NATIVE_TRANSFER_GAS, NATIVE_TRANSFER_GAS)
                }
            }
            Payment::Token { .. } => match self.estimate_gas(&from, payment).await? {
                Estimate::Gas(estimate) => (estimate, margin(estimate)),
                Estimate::Reverts | Estimate::SenderShort => {
                    (TOKEN_TRANSFER_GAS, TOKEN_TRANSFER_GAS)
                }
            },
            Payment::Approve { .. } | Payment::Swap { .. } => {
                // Before the router is approved (or the tokens are in) the node's estimate
                // reverts: the bound of such a call stands in.
                let bound = match payment {
                    Payment::Swap { path, .. } => {
                        SWAP_GAS_FIRST_HOP.saturating_add(SWAP_GAS_PER_HOP.saturating_mul(
                            u64::try_from(path.len().saturating_sub(2)).unwrap_or(u64::MAX),
                        ))
                    }
                    _ => APPROVE_GAS,
                };
                match self.estimate_gas(&from, payment).await? {
                    Estimate::Gas(estimate) => (estimate, margin(estimate).max(bound)),
                    Estimate::Reverts | Estimate::SenderShort => (bound, bound),
                }
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
            plan: None,
        })
    }

    async fn confirmed_nonce(&self, address: &str) -> Result<Option<u64>, PortError> {
        self.transaction_count(address, "latest".to_owned())
            .await
            .map(Some)
    }

    async fn final_transaction_at_nonce(
        &self,
        from: &str,
        nonce: u64,
        confirmations: u32,
    ) -> Result<Option<String>, PortError> {
        let (head, _) = self.head().await?;
        let depth = u64::from(confirmations.max(1)) - 1;
        let Some(final_block) = head.checked_sub(depth) else {
            return Ok(None);
        };
        let Some(block) = self.block_taking_nonce(from, nonce, final_block).await? else {
            return Ok(None);
        };
        self.transaction_in_block_at_nonce(from, nonce, block, depth)
            .await
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
        let from = parse_address("from", &request.from)?;
        let (to, value, data) = call_of(&request.payment)?;
        let fields = Fields {
            from: *from.as_bytes(),
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
            reference_block: None,
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
        // A key of the wrong path would send from another account (spending its funds, or
        // refused by the node while our nonce waits): never assembled.
        if recovered_signer(&unsigned.digest, signature) != Some(fields.from) {
            return Err(PortError::permanent(
                PORT,
                format!(
                    "the signature does not recover to the sender {}",
                    BscAddress::from_bytes(fields.from)
                ),
            ));
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
        // One request, so one endpoint answers both: the receipt and the head it sees it under
        // (a load-balanced URL could otherwise mix a lagging backend's head with another's
        // receipt).
        let mut answers = self
            .chain
            .rpc()
            .batch(&[
                ("eth_getTransactionReceipt", json!([h])),
                ("eth_getBlockByNumber", json!(["latest", false])),
            ])
            .await?
            .into_iter();
        let mut next = |method: &str| match answers.next() {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(e.into_port_error(method)),
            None => Err(malformed(format!("no answer to {method} in the batch"))),
        };
        let receipt = next("eth_getTransactionReceipt")?;
        let head = next("eth_getBlockByNumber")?;
        if !receipt.is_null() {
            let of = codec::hash(field(&receipt, "transactionHash")?).map_err(malformed)?;
            if !of.eq_ignore_ascii_case(h.trim_start_matches("0x")) {
                return Err(PortError::transient(
                    PORT,
                    format!(
                        "asked for the receipt of {h}, the endpoint answered the one of 0x{of}"
                    ),
                ));
            }
            let block_number =
                codec::quantity_u64(field(&receipt, "blockNumber")?).map_err(malformed)?;
            let block_hash = codec::hash(field(&receipt, "blockHash")?).map_err(malformed)?;
            let head_number = if head.is_null() {
                return Err(malformed("no latest block"));
            } else {
                codec::quantity_u64(field(&head, "number")?).map_err(malformed)?
            };
            if block_number > head_number {
                return Err(PortError::transient(
                    PORT,
                    format!(
                        "the receipt of {h} is in block {block_number}, above the endpoint's own head {head_number}: asking again"
                    ),
                ));
            }
            let status = codec::quantity_u64(field(&receipt, "status")?).map_err(malformed)?;
            let gas_used = codec::quantity_u128_opt(field(&receipt, "gasUsed")?)
                .map_err(malformed)?
                .unwrap_or(0);
            let price = match receipt.get("effectiveGasPrice") {
                Some(p) if !p.is_null() => codec::quantity_u128_opt(p).map_err(malformed)?,
                _ => None,
            }
            .unwrap_or(0);
            // A receipt always carries its `logs` (empty when there are none); one without is
            // an endpoint's bad answer, not a transaction that moved nothing: read as nothing
            // moved, a swap's settlement would find no input or output and stop the service.
            // Asked again, a sound endpoint answers it.
            let logs = receipt
                .get("logs")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    PortError::transient(
                        PORT,
                        format!("the receipt of {h} has no logs array: asking again"),
                    )
                })?;
            // The receipt's block must be the chain's block at that height: a receipt from a
            // stale fork (or a lying endpoint) is no inclusion, and depth counted on it would
            // call final what the chain no longer holds. Its time also tells a reverted swap's
            // deadline from its price.
            let block = self
                .chain
                .rpc()
                .call(
                    "eth_getBlockByNumber",
                    json!([format!("{block_number:#x}"), false]),
                )
                .await?;
            if block.is_null() {
                return Err(PortError::transient(
                    PORT,
                    format!("block {block_number} of {h} is not known yet: asking again"),
                ));
            }
            let canonical = codec::hash(field(&block, "hash")?).map_err(malformed)?;
            if canonical != block_hash {
                return Err(PortError::transient(
                    PORT,
                    format!(
                        "the receipt of {h} names block 0x{block_hash} at {block_number}, the chain holds 0x{canonical} there: asking again"
                    ),
                ));
            }
            let block_time_ms = if status == 1 {
                None
            } else {
                let seconds =
                    codec::quantity_u64(field(&block, "timestamp")?).map_err(malformed)?;
                Some(i64::try_from(seconds.saturating_mul(1_000)).unwrap_or(i64::MAX))
            };
            return Ok(TxLookup::Included(Inclusion {
                block_number,
                block_hash,
                succeeded: status == 1,
                fee_native: Amount::from_units(gas_used.saturating_mul(price)),
                moves: receipt_moves(logs),
                resources: None,
                block_time_ms,
                head_number: Some(head_number),
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

    async fn block_time(&self, number: u64) -> Result<Option<i64>, PortError> {
        let block = self
            .chain
            .rpc()
            .call(
                "eth_getBlockByNumber",
                json!([format!("{number:#x}"), false]),
            )
            .await?;
        if block.is_null() {
            return Ok(None);
        }
        let seconds = codec::quantity_u64(field(&block, "timestamp")?).map_err(malformed)?;
        Ok(Some(
            i64::try_from(seconds.saturating_mul(1_000)).unwrap_or(i64::MAX),
        ))
    }

    /// Not used on BSC: one nonce keeps every attempt of a payment exclusive.
    async fn block_listing(&self, _number: u64) -> Result<Option<BlockListing>, PortError> {
        Err(PortError::permanent(
            PORT,
            "block listings prove TRON attempts absent; BSC attempts share a nonce",
        ))
    }

    /// Not used on BSC (see [`Self::block_listing`]).
    async fn inclusion_in_block(
        &self,
        _hash: &str,
        _number: u64,
    ) -> Result<Option<Inclusion>, PortError> {
        Err(PortError::permanent(
            PORT,
            "block listings prove TRON attempts absent; BSC attempts share a nonce",
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
            from: [0; 20],
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

    /// A sender over no endpoint: building and assembling need none.
    fn offline_sender() -> BscSender {
        let chain = BscChain::new(crate::BscSettings {
            urls: Vec::new(),
            chain_id: 56,
            assets: vec![custody_core::asset::Asset {
                network: Network::Bsc,
                code: "BNB".into(),
                kind: custody_core::asset::AssetKind::Native,
                decimals: 18,
                contract: None,
            }],
            ..crate::BscSettings::default()
        })
        .unwrap();
        BscSender::new(Arc::new(chain), BscSenderSettings::default())
    }

    #[tokio::test]
    async fn only_a_signature_that_recovers_to_the_sender_is_assembled() {
        use custody_core::keys::{HdSigner, Mnemonic};
        use custody_core::ports::signer::HdPath;
        use custody_core::ports::Signer;
        let signer = HdSigner::from_seed(
            &Mnemonic::parse(
                "abandon abandon abandon abandon abandon abandon abandon abandon abandon \
                 abandon abandon about",
            )
            .unwrap()
            .to_seed(),
        )
        .unwrap();
        let path = |index| HdPath {
            network: Network::Bsc,
            account: 0,
            index,
        };
        let from = signer.keys().address(&path(0)).unwrap().0;
        let sender = offline_sender();
        let unsigned = sender
            .build(&BuildRequest {
                from: from.clone(),
                payment: Payment::Native {
                    to: addr(0xbb),
                    amount: Amount::from_units(1),
                },
                nonce: Some(0),
                bid: FeeBid::Gas {
                    gas_limit: 21_000,
                    gas_price_wei: 1_000_000_000,
                },
            })
            .await
            .unwrap();
        let own = signer.sign_digest(&path(0), &unsigned.digest).unwrap();
        let signed = sender.assemble(&unsigned, &own).unwrap();
        assert_eq!(signed.hash, hex::encode(keccak256(&signed.raw)));
        // Another key of the same seed (a wrong path): refused, for good.
        let other = signer.sign_digest(&path(1), &unsigned.digest).unwrap();
        let e = sender.assemble(&unsigned, &other).unwrap_err();
        assert_eq!(e.retry, custody_core::error::Retry::Permanent, "{e}");
        assert!(e.message.contains("does not recover to the sender"), "{e}");
        // The sender's own signature with the other recovery id recovers another key.
        let flipped = RecoverableSignature {
            recovery_id: 1 - own.recovery_id,
            ..own
        };
        assert!(sender.assemble(&unsigned, &flipped).is_err());
        // Not a signature at all.
        let zero = RecoverableSignature {
            r: [0; 32],
            s: [0; 32],
            recovery_id: 0,
        };
        assert!(sender.assemble(&unsigned, &zero).is_err());
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
        assert_eq!(
            &data[..4],
            &[0xa9, 0x05, 0x9c, 0xbb],
            "transfer(address,uint256)"
        );
        assert_eq!(data[35], 0xff);
        assert_eq!(&data[66..], &[1, 2]);
    }

    fn addr(last: u8) -> String {
        format!("0x{}{last:02x}", "00".repeat(19))
    }

    #[test]
    fn swaps_and_approvals_call_the_router_and_the_token_with_their_selectors() {
        let swap = |native_in, native_out| Payment::Swap {
            router: addr(0xaa),
            path: vec![addr(1), addr(2)],
            amount_in: Amount::from_units(1_000),
            min_out: Amount::from_units(990),
            native_in,
            native_out,
            to: addr(0xbb),
            deadline_s: 1_900_000_000,
        };
        let (to, value, data) = call_of(&swap(false, false)).unwrap();
        assert_eq!(to.to_lowercase_hex(), addr(0xaa));
        assert_eq!((value, &data[..4]), (0, &[0x38, 0xed, 0x17, 0x39][..]));
        // amountIn, amountOutMin, offset of path, to, deadline, then the path.
        assert_eq!(data.len(), 4 + 32 * 8);
        assert_eq!(data[4 + 31], 0xe8, "1,000 = 0x3e8");
        let (_, value, data) = call_of(&swap(true, false)).unwrap();
        assert_eq!((value, &data[..4]), (1_000, &[0x7f, 0xf3, 0x6a, 0xb5][..]));
        let (_, value, data) = call_of(&swap(false, true)).unwrap();
        assert_eq!((value, &data[..4]), (0, &[0x18, 0xcb, 0xaf, 0xe5][..]));
        assert!(call_of(&swap(true, true)).is_err());
        let (to, _, data) = call_of(&Payment::Approve {
            token: addr(1),
            spender: addr(0xaa),
            amount: Amount::from_units(u128::MAX),
        })
        .unwrap();
        assert_eq!(to.to_lowercase_hex(), addr(1));
        assert_eq!(&data[..4], &[0x09, 0x5e, 0xa7, 0xb3]);
    }

    #[test]
    fn energy_delegations_are_refused_for_good() {
        for payment in [
            Payment::DelegateEnergy {
                receiver: addr(0xbb),
                balance_sun: Amount::from_units(1_000_000),
            },
            Payment::UndelegateEnergy {
                receiver: addr(0xbb),
                balance_sun: Amount::from_units(1_000_000),
            },
        ] {
            let e = call_of(&payment).unwrap_err();
            assert_eq!(e.retry, custody_core::error::Retry::Permanent, "{e}");
            assert!(e.message.contains("TRON energy delegation"), "{e}");
        }
    }

    #[test]
    fn receipt_logs_become_token_moves() {
        let word_of = |a: &str| format!("0x{:0>64}", a.trim_start_matches("0x"));
        let logs = serde_json::json!([
            { "address": addr(1), "topics": [
                "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                word_of(&addr(0xbb)), word_of(&addr(0xcc)) ],
              "data": format!("0x{:064x}", 500u64) },
            { "address": addr(2), "topics": [
                "0x7fcf532c15f0a6db0bd6d0e038bea71d30d808c7d98cb3bf7268a95bf5081b65",
                word_of(&addr(0xaa)) ],
              "data": format!("0x{:064x}", 7u64) },
            { "address": addr(2), "topics": [
                "0xe1fffcc4923d04b559f4d29a8bfc6cda04eb5b0d3c460751c2402c5c5cc9109c",
                word_of(&addr(0xaa)) ],
              "data": format!("0x{:064x}", 9u64) },
            // ERC-721 Transfer (four topics) and an unknown event: skipped.
            { "address": addr(3), "topics": [
                "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                word_of(&addr(0xbb)), word_of(&addr(0xcc)), word_of("01") ],
              "data": "0x" },
            { "address": addr(3), "topics": [word_of("05")], "data": format!("0x{:064x}", 1u64) },
        ]);
        let moves = receipt_moves(logs.as_array().unwrap());
        let show = |m: &TokenMove| {
            (
                m.contract.to_lowercase(),
                m.kind,
                m.from.to_lowercase(),
                m.to.to_lowercase(),
                m.amount.units(),
            )
        };
        assert_eq!(
            moves.iter().map(show).collect::<Vec<_>>(),
            [
                (addr(1), MoveKind::Transfer, addr(0xbb), addr(0xcc), 500),
                (addr(2), MoveKind::Unwrap, addr(0xaa), addr(0xaa), 7),
                (addr(2), MoveKind::Wrap, addr(0xaa), addr(0xaa), 9),
            ]
        );
    }
}
