//! Sending. What a chain adapter must do so that the core's outgoing-transaction engine can
//! pay on that chain: price a payment, build an unsigned transaction and the digest to sign,
//! assemble the signed bytes, broadcast them, and look a transaction up by hash. The engine
//! decides what to build, when to send, replace or rebuild, and when a payment is final; the
//! adapter moves bytes and classifies what the node answered.
//!
//! Signing is not here: the core signs the digest with the `Signer` port, so key material never
//! reaches an adapter.

use async_trait::async_trait;

use crate::amount::Amount;
use crate::error::PortError;
use crate::network::Network;
use crate::ports::signer::RecoverableSignature;
use crate::tron::resources::{ActualResources, ResourcePlan};

/// What an outgoing transaction does. Addresses are in the network's canonical text form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payment {
    /// The native coin (BNB, TRX) to `to`.
    Native { to: String, amount: Amount },
    /// A token transfer (`transfer(to, amount)` of a BEP20/TRC20 `contract`).
    Token {
        contract: String,
        to: String,
        amount: Amount,
    },
    /// EVM: a swap on a Uniswap-V2-compatible `router` of exactly `amount_in` of `path[0]` for
    /// at least `min_out` of the last token of `path`, paid to `to`, void after `deadline_s`
    /// (unix seconds). `native_in`: the native coin goes in as the call's value
    /// (`swapExactETHForTokens`, `path[0]` is the wrapped coin); `native_out`: the native coin
    /// comes out (`swapExactTokensForETH`); neither: `swapExactTokensForTokens`.
    Swap {
        router: String,
        path: Vec<String>,
        amount_in: Amount,
        min_out: Amount,
        native_in: bool,
        native_out: bool,
        to: String,
        deadline_s: u64,
    },
    /// EVM: `approve(spender, amount)` of `token` (lets a router take the hot wallet's tokens).
    Approve {
        token: String,
        spender: String,
        amount: Amount,
    },
    /// TRON (Stake 2.0): lends `receiver` the energy of `balance_sun` of the paying account's
    /// TRX staked for energy (`DelegateResourceContract`, resource ENERGY, unlocked), so that
    /// its contract calls burn no TRX for that energy. The stake stays the payer's.
    DelegateEnergy {
        receiver: String,
        balance_sun: Amount,
    },
    /// TRON (Stake 2.0): takes back the energy of `balance_sun` of stake delegated to
    /// `receiver` (`UnDelegateResourceContract`).
    UndelegateEnergy {
        receiver: String,
        balance_sun: Amount,
    },
}

/// What a payment takes out of the paying wallet besides the fee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spends<'a> {
    /// Of the native coin.
    pub native: Amount,
    /// Of one token (its contract).
    pub token: Option<(&'a str, Amount)>,
}

impl Payment {
    /// `amount` of `asset` to `to`: the native coin, or a transfer of the asset's token.
    pub fn transfer(asset: &crate::asset::Asset, to: &str, amount: Amount) -> Payment {
        match &asset.contract {
            None => Payment::Native {
                to: to.to_owned(),
                amount,
            },
            Some(contract) => Payment::Token {
                contract: contract.clone(),
                to: to.to_owned(),
                amount,
            },
        }
    }

    /// Who receives it (the spender of an approval, the receiver of delegated energy).
    pub fn recipient(&self) -> &str {
        match self {
            Payment::Native { to, .. } | Payment::Token { to, .. } | Payment::Swap { to, .. } => to,
            Payment::Approve { spender, .. } => spender,
            Payment::DelegateEnergy { receiver, .. }
            | Payment::UndelegateEnergy { receiver, .. } => receiver,
        }
    }

    /// What leaves the paying wallet, the fee aside.
    pub fn spends(&self) -> Spends<'_> {
        match self {
            Payment::Native { amount, .. } => Spends {
                native: *amount,
                token: None,
            },
            Payment::Token {
                contract, amount, ..
            } => Spends {
                native: Amount::ZERO,
                token: Some((contract, *amount)),
            },
            Payment::Swap {
                path,
                amount_in,
                native_in,
                ..
            } => {
                if *native_in {
                    Spends {
                        native: *amount_in,
                        token: None,
                    }
                } else {
                    Spends {
                        native: Amount::ZERO,
                        token: path.first().map(|t| (t.as_str(), *amount_in)),
                    }
                }
            }
            // A delegation lends the stake's energy; the stake (and every sun) stays the
            // payer's.
            Payment::Approve { .. }
            | Payment::DelegateEnergy { .. }
            | Payment::UndelegateEnergy { .. } => Spends {
                native: Amount::ZERO,
                token: None,
            },
        }
    }
}

/// What the sender pays the network, and how it is bid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeeBid {
    /// EVM legacy (EIP-155) pricing: `gas_limit × gas_price_wei` at most.
    Gas { gas_limit: u64, gas_price_wei: u128 },
    /// TRON: the most the transaction may burn (`fee_limit`, in sun; 0 for a TRX transfer,
    /// which burns only bandwidth).
    FeeLimit { sun: u64 },
}

/// The `port` of a [`crate::error::PortError`] from [`ChainSender::price`] saying that the
/// destination itself refuses the payment (a contract whose code reverts on it): it can never
/// succeed as asked, so a quote answers it as a validation failure of the destination, not as
/// an unavailable chain, and nothing is sent.
pub const DESTINATION_REFUSES: &str = "destination";

/// A priced payment: what it is expected to cost in the native coin's smallest unit, and the
/// bid to build it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeeEstimate {
    /// Expected network cost in native units (wei, sun): what the quote charges for.
    pub expected_native: Amount,
    /// The most it may cost (gas limit × price, or the fee limit); the hot wallet must hold it.
    pub max_native: Amount,
    pub bid: FeeBid,
    /// TRON: the resource plan the figures come from (bandwidth, energy, activation), stored
    /// with the attempt so that it can be checked against what the chain charged. `None` on
    /// BSC, whose price is gas × price alone.
    pub plan: Option<ResourcePlan>,
}

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildRequest {
    /// The paying address (a hot wallet).
    pub from: String,
    pub payment: Payment,
    /// EVM: the nonce the store allocated to this transaction (kept across replacements).
    /// `None` on TRON.
    pub nonce: Option<u64>,
    pub bid: FeeBid,
}

/// An unsigned transaction: the digest the core signs and the adapter's own encoding of the
/// rest, which only the same adapter reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedTx {
    pub digest: [u8; 32],
    pub payload: Vec<u8>,
    /// TRON: the transaction is void once a block after this time is produced (ms since the
    /// epoch). `None` on EVM (a nonce never expires).
    pub expires_at_ms: Option<i64>,
    /// TRON: the number of the block the transaction references (TaPoS); only a later block
    /// can include it. `None` on EVM.
    pub reference_block: Option<u64>,
}

/// The exact bytes to broadcast and the hash they will be known by. Stored before anything is
/// sent, so every retry sends the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    /// Lowercase hex without `0x` (the store's form; responses format it per decisions §10).
    pub hash: String,
    pub raw: Vec<u8>,
}

/// What the node said to a broadcast. Only `Rejected` is a verdict on the transaction; every
/// other answer keeps it alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BroadcastOutcome {
    /// Accepted into the pool (or the node already had exactly these bytes).
    Accepted,
    /// EVM "nonce too low": a transaction with this nonce is already mined, ours or another.
    /// Look the attempts up before deciding anything.
    NonceUsed,
    /// EVM "replacement transaction underpriced": a pooled transaction with this nonce bids
    /// more. Keep following what was sent; bid higher on the next replacement.
    Underpriced,
    /// TRON TAPOS/EXPIRATION errors: these bytes can never be included; rebuild once the
    /// earlier attempts are known not to be.
    Expired,
    /// A permanent refusal with the node's reason (bad signature, contract validation, no
    /// balance): nothing was sent.
    Rejected(String),
    /// No answer (timeout, connection cut after sending): the bytes may or may not be in a
    /// pool. Never a failure: send the same bytes again and ask the chain.
    Unknown(String),
}

impl BroadcastOutcome {
    /// The node's reason of a refusal.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            BroadcastOutcome::Rejected(reason) => Some(reason),
            _ => None,
        }
    }
}

/// As an attempt's history and its stored answer read: `accepted`, `nonce_used`,
/// `underpriced`, `expired`, `rejected: REASON`, `unknown: WHAT`.
impl std::fmt::Display for BroadcastOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BroadcastOutcome::Accepted => f.write_str("accepted"),
            BroadcastOutcome::NonceUsed => f.write_str("nonce_used"),
            BroadcastOutcome::Underpriced => f.write_str("underpriced"),
            BroadcastOutcome::Expired => f.write_str("expired"),
            BroadcastOutcome::Rejected(r) => write!(f, "rejected: {r}"),
            BroadcastOutcome::Unknown(r) => write!(f, "unknown: {r}"),
        }
    }
}

impl BroadcastOutcome {
    /// The answer a stored text names ([`std::fmt::Display`]'s form). Text in no known form
    /// reads as `Unknown`: it says nothing about where the bytes are.
    pub fn from_stored(text: &str) -> Self {
        match text {
            "accepted" => BroadcastOutcome::Accepted,
            "nonce_used" => BroadcastOutcome::NonceUsed,
            "underpriced" => BroadcastOutcome::Underpriced,
            "expired" => BroadcastOutcome::Expired,
            _ => {
                if let Some(r) = text.strip_prefix("rejected: ") {
                    BroadcastOutcome::Rejected(r.to_owned())
                } else if let Some(r) = text.strip_prefix("unknown: ") {
                    BroadcastOutcome::Unknown(r.to_owned())
                } else {
                    BroadcastOutcome::Unknown(text.to_owned())
                }
            }
        }
    }
}

/// Where a transaction is, by hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxLookup {
    /// The node does not know it (never received, dropped, or not yet propagated).
    Unknown,
    /// In the node's pool, not in a block.
    Pending,
    Included(Inclusion),
}

/// TRON: what a block lists, read by number: its header and the id of every transaction in it
/// (its contents, not an answer to a lookup by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockListing {
    pub header: crate::ports::chain::BlockHeader,
    /// Lowercase hex without `0x`.
    pub txids: Vec<String>,
}

/// A transaction in a block, with its receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inclusion {
    pub block_number: u64,
    /// Lowercase hex without `0x`.
    pub block_hash: String,
    /// EVM receipt status 1 / TRON `SUCCESS`. A failed transaction still pays its fee.
    pub succeeded: bool,
    /// What it actually cost in native units (gas used × price, TRON fee burned).
    pub fee_native: Amount,
    /// EVM: the token movements its receipt logged (ERC-20 `Transfer`, and the wrapped
    /// coin's `Deposit`/`Withdrawal`), in log order: what a swap actually took and gave.
    pub moves: Vec<TokenMove>,
    /// TRON: the bandwidth and energy it used and what it burned for each (its info's
    /// `receipt` and `fee`). `None` on EVM.
    pub resources: Option<ActualResources>,
    /// The block's timestamp (Unix ms) when the adapter read it: BSC reads it for a failed
    /// receipt, where it tells a swap whose deadline passed from one whose price moved.
    pub block_time_ms: Option<i64>,
    /// The head of the endpoint that answered the receipt, read with it (BSC, one batch): the
    /// engine counts the depth from the lower of this and the head it read on its own.
    pub head_number: Option<u64>,
}

/// One token movement read from a receipt's logs. Addresses in the network's canonical form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenMove {
    /// The token contract that logged it.
    pub contract: String,
    pub kind: MoveKind,
    /// `Transfer`: sender; `Deposit` (wrapping): who wrapped; `Withdrawal`: who unwrapped.
    pub from: String,
    /// `Transfer`: recipient; wrapping and unwrapping: the same as `from`.
    pub to: String,
    pub amount: Amount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveKind {
    Transfer,
    /// WETH9-style `Deposit(dst, wad)`: native coin wrapped.
    Wrap,
    /// WETH9-style `Withdrawal(src, wad)`: wrapped coin turned back into the native coin.
    Unwrap,
}

/// Sending on one network.
///
/// An implementation:
/// - MUST classify every answer as in [`BroadcastOutcome`]: a timeout or a cut connection is
///   `Unknown`, never `Rejected`; a node's "already known" for the same bytes is `Accepted`.
/// - MUST NOT sign, and MUST build deterministically from the request (same request and same
///   chain facts → same digest), so a crash between signing and storing loses nothing.
/// - MUST make `assemble` pure (no I/O): the signed bytes and hash are stored before the first
///   broadcast.
/// - MAY fail over between endpoints for `price`, `build`, `lookup` and `broadcast` (sending the
///   same signed bytes twice is harmless).
#[async_trait]
pub trait ChainSender: Send + Sync {
    fn network(&self) -> Network;

    /// Prices `payment` from `from` now: gas limit (21,000 for native on EVM, estimated for a
    /// token) × the node's gas price within the configured floor and cap; on TRON the
    /// bandwidth and energy against `from`'s free and staked resources, and the activation
    /// fee for a new account.
    async fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError>;

    /// The next nonce of `address` counting only mined transactions (EVM), for seeding the
    /// store's nonce allocator; `Ok(None)` where the chain has no nonces.
    async fn confirmed_nonce(&self, address: &str) -> Result<Option<u64>, PortError>;

    /// EVM: the hash of `from`'s transaction at `nonce`, read from the list of transactions of
    /// the block that holds it, once that block is at least `confirmations` deep on the
    /// endpoint that answers (its head read in the same request): positive proof of what took
    /// the nonce. `Ok(None)` when no transaction at `nonce` is that deep yet (or the endpoint's
    /// answers disagree), and where the chain has no nonces.
    async fn final_transaction_at_nonce(
        &self,
        from: &str,
        nonce: u64,
        confirmations: u32,
    ) -> Result<Option<String>, PortError>;

    /// Builds the unsigned transaction (TRON: with a recent block as reference and an
    /// expiration).
    async fn build(&self, request: &BuildRequest) -> Result<UnsignedTx, PortError>;

    /// The signed transaction from an unsigned one and the signature of its digest.
    fn assemble(
        &self,
        unsigned: &UnsignedTx,
        signature: &RecoverableSignature,
    ) -> Result<SignedTx, PortError>;

    async fn broadcast(&self, signed: &SignedTx) -> BroadcastOutcome;

    async fn lookup(&self, hash: &str) -> Result<TxLookup, PortError>;

    /// The newest block's number and timestamp (ms), to judge confirmations and expirations.
    async fn head(&self) -> Result<(u64, i64), PortError>;

    /// The timestamp (ms) of the block at `number` on the node's chain, `None` when it has
    /// none: the engine judges a TRON expiration on the block at confirmation depth, which no
    /// shallower reorganization can replace.
    async fn block_time(&self, number: u64) -> Result<Option<i64>, PortError>;

    /// TRON: block `number` as its contents list it, `None` when the node has no such block.
    /// The engine proves from these, not from lookups by id, that no attempt of a payment is
    /// in a block before it signs another one. EVM: not used (a nonce keeps attempts
    /// exclusive); an implementation may refuse it.
    async fn block_listing(&self, number: u64) -> Result<Option<BlockListing>, PortError>;

    /// TRON: the inclusion of `hash` in block `number`, read from the block's contents and its
    /// transaction infos (not from a lookup by id), `None` when the block does not list it.
    /// EVM: not used; an implementation may refuse it.
    async fn inclusion_in_block(
        &self,
        hash: &str,
        number: u64,
    ) -> Result<Option<Inclusion>, PortError>;

    /// The native balance of `address` and, for a token, its token balance: (native, token).
    async fn balances(
        &self,
        address: &str,
        token_contract: Option<&str>,
    ) -> Result<(Amount, Option<Amount>), PortError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_energy_delegation_spends_nothing_and_reads_back() {
        for payment in [
            Payment::DelegateEnergy {
                receiver: "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK".into(),
                balance_sun: Amount::from_units(14_000_000_000),
            },
            Payment::UndelegateEnergy {
                receiver: "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK".into(),
                balance_sun: Amount::from_units(14_000_000_000),
            },
        ] {
            assert_eq!(
                payment.spends(),
                Spends {
                    native: Amount::ZERO,
                    token: None
                }
            );
            assert_eq!(payment.recipient(), "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK");
            let text = serde_json::to_string(&payment).unwrap();
            assert_eq!(serde_json::from_str::<Payment>(&text).unwrap(), payment);
        }
        let text = serde_json::to_string(&Payment::DelegateEnergy {
            receiver: "T".into(),
            balance_sun: Amount::from_units(1),
        })
        .unwrap();
        assert!(text.contains(r#""kind":"delegate_energy""#), "{text}");
    }
}
