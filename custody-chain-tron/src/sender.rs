//! [`TronSender`]: the [`ChainSender`] port on TRON — price, build, assemble, broadcast and
//! look up TRX transfers, TRC20 `transfer` calls and Stake 2.0 energy delegations
//! (`DelegateResourceContract` / `UnDelegateResourceContract`, resource ENERGY) over the
//! full-node HTTP API.
//!
//! **Build.** A transaction references a block a few below the head (TaPoS) and expires a
//! configured lifetime after the head block's time:
//!
//! - `ref_block`: block `head − ref_block_depth` ([`TronSenderSettings::REF_BLOCK_DEPTH`], 20
//!   by default), read from the same endpoint as the head. A node accepts any of its last
//!   65,536 blocks as reference (java-tron `Manager.validateTapos` looks the two
//!   `ref_block_bytes` up in its recent-block store and compares `ref_block_hash`), so an older
//!   reference costs nothing; but a transaction whose reference block is orphaned by a fork can
//!   never be included (`TAPOS_ERROR` on every node of the surviving chain). Twenty blocks (one
//!   minute) is past mainnet's solidification depth (19 of the 27 super representatives), so
//!   the reference is irreversible and a short fork at the head cannot void the transaction.
//! - `expiration` = head block time + `tx_lifetime_ms` (60 s by default, java-tron's
//!   `trx.expiration.timeInMilliseconds` and TronWeb's default), `timestamp` = head block time.
//!   Like java-tron's own builder (`Wallet.setTransaction`), the head's time is used, not the
//!   reference block's, so the lifetime does not shrink with the depth. No clock is read: the
//!   transaction is a function of the request, the head (number, time) and the reference
//!   block's id, so the same request on the same chain facts gives the same txID.
//!
//! A node refuses a transaction once its head block's time reaches the expiration
//! (`Manager.validateCommon`: `expiration <= headBlockTime`), so no block after the first one
//! at or past [`UnsignedTx::expires_at_ms`] can include it.
//!
//! **Unsigned payload.** [`UnsignedTx::payload`] is the `raw_data` bytes; [`UnsignedTx::digest`]
//! their SHA-256, the txID (what [`crate::tx::sign`] signs). [`ChainSender::assemble`] reads the
//! payload back (refusing anything that is not exactly what this adapter writes), checks the
//! digest, checks that the signature (`r ‖ s ‖ v`, `v` the recovery id 0 or 1, as
//! [`crate::tx::sign`] writes it) recovers to the transaction's owner, and writes the
//! `protocol.Transaction` bytes `wallet/broadcasthex` takes. [`SignedTx::hash`] is the txID in
//! lowercase hex.
//!
//! **Broadcast.** `wallet/broadcasthex` to ONE endpoint whose genesis block was verified (see
//! [`TronClient::broadcast_hex`]); a failed or busy endpoint is tried last by the next call.
//! The node's answer (`api.Return.response_code`, java-tron `Wallet.broadcastTransaction`) is
//! classified by [`classify_broadcast`]:
//!
//! | node answer | outcome |
//! |---|---|
//! | `result: true` (`SUCCESS`) | `Accepted` |
//! | `DUP_TRANSACTION_ERROR` | `Accepted` |
//! | `TAPOS_ERROR`, `TRANSACTION_EXPIRATION_ERROR` | `Expired` |
//! | `SIGERROR`, `CONTRACT_VALIDATE_ERROR`, `CONTRACT_EXE_ERROR`, `BANDWITH_ERROR`, `TOO_BIG_TRANSACTION_ERROR`, `OTHER_ERROR` | `Rejected("<code>: <message>")` |
//! | `SERVER_BUSY`, `NO_CONNECTION`, `NOT_ENOUGH_EFFECTIVE_CONNECTION`, `BLOCK_UNSOLIDIFIED` | `Unknown` |
//! | any other code, `result: false` without a code | `Unknown` |
//! | no answer: timeout, connection error, HTTP error, an answer that does not parse, no endpoint of the configured network | `Unknown` |
//!
//! `DUP_TRANSACTION_ERROR` is keyed on the txID, which the signature does not enter: the node
//! has these very `raw_data` bytes (in its pool, in a block, or in its recently-seen cache).
//! That cache is filled before validation, so a node may also answer it for bytes it refused a
//! moment ago; `Accepted` is then wrong but harmless (the transaction is followed until it
//! expires unincluded). `TAPOS_ERROR` also comes from a node that does not have the reference
//! block yet (more than `ref_block_depth` blocks behind): `Expired` is only a hint; what was
//! sent is void only once a lookup at a head past its expiration does not find it.
//!
//! **Lookup.** All reads of one lookup go to one endpoint ([`TronClient`]'s pinned reads), in
//! this order: the head (`wallet/getnowblock`), `wallet/gettransactioninfobyid`, and
//! - with an info: the block it names (`wallet/getblockbynum`) must list the transaction, and
//!   the block's `ret[0].contractRet` and the info (`result`, `receipt.result`) must agree on
//!   the outcome; then `Included` with the block's id and `fee` (0 when absent). A TRX
//!   transfer's receipt has no `result` (`DEFAULT`, left out by proto3 JSON): success when the
//!   block says `SUCCESS` and the info has no `"result": "FAILED"`. A contract call succeeded
//!   when its `receipt.result` is `SUCCESS`; it failed when the block, the info's `FAILED` and
//!   the receipt all name the same failure (`REVERT`, `OUT_OF_ENERGY`, ...). Any disagreement
//!   (the block does not list it, the answers do not agree: a reorganization between the
//!   reads) is a transient error, never a verdict.
//! - without one: `wallet/gettransactionfrompending` → `Pending`; else
//!   `wallet/gettransactionbyid` (which java-tron answers from its store of block contents)
//!   knowing it means it is in a block whose info the node does not serve: a transient error;
//!   else `Unknown`, but only from an endpoint whose head is at least the newest head this
//!   sender has seen ([`ChainSender::head`], builds, lookups): a lagging endpoint's "not found"
//!   is a transient error, so that an expiration judged on one node's head is never confirmed
//!   by another node that has not reached that head yet.
//!
//! **Price.** TRX: the bandwidth of the signed transfer against the sender's staked then free
//! bandwidth (`wallet/getaccountresource`), burned at `getTransactionFee` otherwise; a
//! recipient `wallet/getaccount` does not know costs the account creation fees instead (the
//! core's planner, [`fees::plan`], applies every rule). `fee_limit` 0. TRC20: the node runs
//! the `transfer` as the sender
//! (`wallet/triggerconstantcontract`; `energy_used`, which includes the dynamic-energy penalty
//! and reflects whether the recipient already holds the token, about twice the energy when
//! not); a call that would fail is an error. `fee_limit` = energy × `getEnergyFee` plus
//! `energy_margin_percent`, at most `getMaxFeeLimit`. `expected_native` is what would be
//! burned with the sender's resources now; `max_native` = `fee_limit` + the bandwidth burned
//! in full (+ the account creation fees), what the sender must hold. An energy delegation
//! pays bandwidth only (`fee_limit` 0); its receiver must exist. [`FeeEstimate::plan`]
//! holds every figure of the plan, stored with the attempt it priced.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::chain::BlockHeader;
use custody_core::ports::sender::{
    BlockListing, BroadcastOutcome, BuildRequest, ChainSender, FeeBid, FeeEstimate, Inclusion,
    Payment, SignedTx, TxLookup, UnsignedTx,
};
use custody_core::ports::signer::RecoverableSignature;

use crate::abi;
use crate::api;
use crate::client::{self, CallError, Pinned, TronClient};
use crate::fees::{self, Operation, PlanInputs, ResourcePrices};
use crate::scan;
use crate::tx::{
    attach_signature, energy_delegation, trc20_transfer, trx_transfer, RefBlock, SignedTransaction,
    TxTiming, UnsignedTransaction,
};

/// The function a TRC20 payment calls.
pub const TRC20_TRANSFER_SELECTOR: &str = "transfer(address,uint256)";

/// Settings of a [`TronSender`]. Every limit is named with its unit last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TronSenderSettings {
    /// `expiration` = head block time + this.
    pub tx_lifetime_ms: i64,
    /// The reference block is this many blocks below the head (0: the head itself).
    pub ref_block_depth: u64,
    /// `fee_limit` = the node's energy estimate × the energy price, plus this percentage.
    pub energy_margin_percent: u64,
}

impl TronSenderSettings {
    /// TronWeb's and java-tron's default lifetime.
    pub const TX_LIFETIME_MS: i64 = 60_000;
    /// At least one block interval (3 s).
    pub const TX_LIFETIME_MS_MIN: i64 = 3_000;
    /// The node refuses an expiration more than 24 h after its head
    /// (`Constant.MAXIMUM_TIME_UNTIL_EXPIRATION`).
    pub const TX_LIFETIME_MS_MAX: i64 = 24 * 3_600 * 1_000;
    /// Past mainnet's solidification depth (19 blocks).
    pub const REF_BLOCK_DEPTH: u64 = 20;
    /// Well inside the 65,536 blocks a node keeps for TaPoS.
    pub const REF_BLOCK_DEPTH_MAX: u64 = 60_000;
    pub const ENERGY_MARGIN_PERCENT: u64 = 20;
    pub const ENERGY_MARGIN_PERCENT_MAX: u64 = 1_000;

    fn check(&self) -> Result<(), SenderSettingsError> {
        if !(Self::TX_LIFETIME_MS_MIN..=Self::TX_LIFETIME_MS_MAX).contains(&self.tx_lifetime_ms) {
            return Err(SenderSettingsError::TxLifetime(self.tx_lifetime_ms));
        }
        if self.ref_block_depth > Self::REF_BLOCK_DEPTH_MAX {
            return Err(SenderSettingsError::RefBlockDepth(self.ref_block_depth));
        }
        if self.energy_margin_percent > Self::ENERGY_MARGIN_PERCENT_MAX {
            return Err(SenderSettingsError::EnergyMargin(
                self.energy_margin_percent,
            ));
        }
        Ok(())
    }
}

impl Default for TronSenderSettings {
    fn default() -> Self {
        TronSenderSettings {
            tx_lifetime_ms: Self::TX_LIFETIME_MS,
            ref_block_depth: Self::REF_BLOCK_DEPTH,
            energy_margin_percent: Self::ENERGY_MARGIN_PERCENT,
        }
    }
}

/// Why settings cannot make a [`TronSender`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SenderSettingsError {
    #[error(
        "tx_lifetime_ms {0} is outside {min}..={max}",
        min = TronSenderSettings::TX_LIFETIME_MS_MIN,
        max = TronSenderSettings::TX_LIFETIME_MS_MAX
    )]
    TxLifetime(i64),
    #[error(
        "ref_block_depth {0} is above {max}",
        max = TronSenderSettings::REF_BLOCK_DEPTH_MAX
    )]
    RefBlockDepth(u64),
    #[error(
        "energy_margin_percent {0} is above {max}",
        max = TronSenderSettings::ENERGY_MARGIN_PERCENT_MAX
    )]
    EnergyMargin(u64),
}

/// The [`ChainSender`] port on TRON. Cheap to clone (the client and the newest head seen are
/// shared).
#[derive(Clone)]
pub struct TronSender {
    client: TronClient,
    settings: TronSenderSettings,
    /// The highest block number any read of this sender has seen as a head.
    newest_head: Arc<AtomicU64>,
}

impl fmt::Debug for TronSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TronSender")
            .field("client", &self.client)
            .field("settings", &self.settings)
            .field("newest_head", &self.newest_head.load(Ordering::Relaxed))
            .finish()
    }
}

/// What a payment does, with parsed addresses.
enum Transfer {
    Trx {
        to: TronAddress,
        amount: Amount,
    },
    Trc20 {
        token: TronAddress,
        to: TronAddress,
        amount: Amount,
    },
    /// Stake 2.0 energy lent to `receiver` (`undelegate`: taken back).
    Energy {
        receiver: TronAddress,
        balance: Amount,
        undelegate: bool,
    },
}

fn address(what: &str, address: &str) -> Result<TronAddress, PortError> {
    TronAddress::parse(address)
        .map_err(|e| PortError::permanent("tron", format!("{what} {address:?}: {e}")))
}

impl Transfer {
    fn of(payment: &Payment) -> Result<Self, PortError> {
        Ok(match payment {
            Payment::Native { to, amount } => Transfer::Trx {
                to: address("recipient", to)?,
                amount: *amount,
            },
            Payment::Token {
                contract,
                to,
                amount,
            } => Transfer::Trc20 {
                token: address("token contract", contract)?,
                to: address("recipient", to)?,
                amount: *amount,
            },
            Payment::DelegateEnergy {
                receiver,
                balance_sun,
            } => Transfer::Energy {
                receiver: address("receiver", receiver)?,
                balance: *balance_sun,
                undelegate: false,
            },
            Payment::UndelegateEnergy {
                receiver,
                balance_sun,
            } => Transfer::Energy {
                receiver: address("receiver", receiver)?,
                balance: *balance_sun,
                undelegate: true,
            },
            Payment::Swap { .. } | Payment::Approve { .. } => {
                return Err(PortError::permanent(
                    "tron",
                    "swaps and approvals are BSC payments; TRON pays TRX and TRC20 transfers \
                     and delegates energy",
                ))
            }
        })
    }

    /// The transaction on `reference` at `timing`.
    fn build(
        &self,
        from: &TronAddress,
        fee_limit_sun: u64,
        reference: RefBlock,
        timing: TxTiming,
    ) -> Result<UnsignedTransaction, PortError> {
        Ok(match self {
            Transfer::Trx { to, amount } => {
                if fee_limit_sun != 0 {
                    return Err(PortError::permanent(
                        "tron",
                        format!("a TRX transfer is built with fee_limit 0, not {fee_limit_sun}"),
                    ));
                }
                trx_transfer(from, to, *amount, reference, timing)?
            }
            Transfer::Trc20 { token, to, amount } => {
                trc20_transfer(from, token, to, *amount, fee_limit_sun, reference, timing)?
            }
            Transfer::Energy {
                receiver,
                balance,
                undelegate,
            } => {
                if fee_limit_sun != 0 {
                    return Err(PortError::permanent(
                        "tron",
                        format!(
                            "an energy delegation is built with fee_limit 0, not {fee_limit_sun}"
                        ),
                    ));
                }
                energy_delegation(from, receiver, *balance, *undelegate, reference, timing)?
            }
        })
    }
}

/// A reference block and timing with the sizes of real ones, for the size of a transaction
/// before it is built: `ref_block_bytes` and `ref_block_hash` always have 2 and 8 bytes, and
/// `timestamp` and `expiration` are 6-byte varints for any time between 2^35 ms (1971) and
/// 2^42 ms (2109).
fn size_reference(lifetime_ms: i64) -> (RefBlock, TxTiming) {
    (
        RefBlock {
            bytes: [0xff; 2],
            hash: [0xff; 8],
        },
        TxTiming::new(1_760_000_000_000, lifetime_ms),
    )
}

/// `getMaxFeeLimit` of the chain parameters, when the node lists it.
fn max_fee_limit_sun(params: &api::ChainParameters) -> Option<u64> {
    params
        .chain_parameter
        .iter()
        .find(|p| p.key == "getMaxFeeLimit")
        .and_then(|p| u64::try_from(p.value).ok())
}

fn header(head: &api::BlockHead) -> Result<BlockHeader, CallError> {
    scan::header_of(&head.block_id, head.block_header.as_ref())
        .map_err(|e| CallError::permanent(e.to_string()))
}

/// A txID as the store writes it: 64 hex digits, lowercase.
fn txid_hex(hash: &str) -> Result<String, PortError> {
    let hash = hash.strip_prefix("0x").unwrap_or(hash);
    if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hash.to_ascii_lowercase())
    } else {
        Err(PortError::permanent(
            "tron",
            format!("{hash:?} is not a transaction id (64 hex digits)"),
        ))
    }
}

/// The outcome of a transaction in a block, from the block's `ret` and the transaction's
/// info, which must agree (see the module documentation); `Err` (transient) when they do not.
fn outcome(tx: &api::Transaction, info: &api::TransactionInfo) -> Result<bool, CallError> {
    let is_call = tx
        .raw_data
        .contract
        .first()
        .is_some_and(|c| c.kind == "TriggerSmartContract");
    let block = tx.ret.first().and_then(|r| r.contract_ret.as_deref());
    let receipt = info.receipt.as_ref().and_then(|r| r.result.as_deref());
    let failed_info = info.result.as_deref() == Some("FAILED");
    let success = block == Some(scan::CONTRACT_RESULT_SUCCESS)
        && !failed_info
        && match receipt {
            Some(r) => r == scan::CONTRACT_RESULT_SUCCESS,
            // A system contract's receipt has no result (DEFAULT).
            None => !is_call,
        };
    let failure = is_call
        && failed_info
        && matches!(
            (block, receipt),
            (Some(b), Some(r)) if b == r && b != scan::CONTRACT_RESULT_SUCCESS && b != "DEFAULT"
        );
    match (success, failure) {
        (true, false) => Ok(true),
        (false, true) => Ok(false),
        _ => Err(CallError::transient(format!(
            "the node's answers on transaction {} do not agree: block result {block:?}, info \
             result {:?}, receipt result {receipt:?}",
            info.id, info.result
        ))),
    }
}

/// The header of `block`, which must be block `number`.
fn checked_header(block: &api::Block, number: u64) -> Result<BlockHeader, CallError> {
    let block_header = header(&api::BlockHead {
        block_id: block.block_id.clone(),
        block_header: block.block_header.clone(),
        error: None,
    })?;
    if block_header.number != number {
        return Err(CallError::permanent(format!(
            "asked for block {number}, got block {}",
            block_header.number
        )));
    }
    Ok(block_header)
}

/// The inclusion of `tx` in the block of `block_header`, with its `info` (see the module
/// documentation for how the two must agree).
fn inclusion_of(
    tx: &api::Transaction,
    info: &api::TransactionInfo,
    block_header: &BlockHeader,
) -> Result<Inclusion, CallError> {
    let succeeded = outcome(tx, info)?;
    let fee = u128::try_from(info.fee).map_err(|_| {
        CallError::permanent(format!("the info of {} has fee {}", tx.tx_id, info.fee))
    })?;
    Ok(Inclusion {
        block_number: block_header.number,
        block_hash: block_header.hash.clone(),
        succeeded,
        fee_native: Amount::from_units(fee),
        // Only swaps read moves from a receipt, and swaps are BSC's.
        moves: Vec::new(),
        resources: Some(fees::actual_resources(info)),
        block_time_ms: None,
        head_number: None,
    })
}

/// Classifies a `wallet/broadcasthex` answer for the transaction `hash` (see the table in the
/// module documentation).
pub fn classify_broadcast(answer: &client::BroadcastOutcome, hash: &str) -> BroadcastOutcome {
    let reason = || {
        if answer.message.is_empty() {
            answer.code.clone()
        } else {
            format!("{}: {}", answer.code, answer.message)
        }
    };
    if answer.accepted || answer.code == "DUP_TRANSACTION_ERROR" {
        return match &answer.txid {
            Some(txid) if !txid.eq_ignore_ascii_case(hash) => {
                // The node parsed other bytes than the ones hashed here: it knows the
                // transaction under another id, which no lookup by `hash` will find.
                tracing::error!(
                    expected = hash,
                    node_txid = %txid,
                    "TRON node reports another txID for a broadcast transaction"
                );
                BroadcastOutcome::Unknown(format!(
                    "{}, but the node reports txID {txid}, not {hash}",
                    reason()
                ))
            }
            _ => BroadcastOutcome::Accepted,
        };
    }
    match answer.code.as_str() {
        "TAPOS_ERROR" | "TRANSACTION_EXPIRATION_ERROR" => BroadcastOutcome::Expired,
        "SIGERROR"
        | "CONTRACT_VALIDATE_ERROR"
        | "CONTRACT_EXE_ERROR"
        | "BANDWITH_ERROR"
        | "TOO_BIG_TRANSACTION_ERROR"
        | "OTHER_ERROR" => BroadcastOutcome::Rejected(reason()),
        code if client::is_node_state_code(code) => BroadcastOutcome::Unknown(reason()),
        "" => BroadcastOutcome::Unknown(format!(
            "the node did not accept the transaction and gave no code: {}",
            answer.message
        )),
        _ => BroadcastOutcome::Unknown(format!("unknown answer {}", reason())),
    }
}

impl TronSender {
    /// A sender over `client` (share the [`TronChain`](crate::TronChain)'s:
    /// `chain.client().clone()`, so that both see the same endpoint health).
    pub fn new(
        client: TronClient,
        settings: TronSenderSettings,
    ) -> Result<Self, SenderSettingsError> {
        settings.check()?;
        Ok(TronSender {
            client,
            settings,
            newest_head: Arc::new(AtomicU64::new(0)),
        })
    }

    pub fn client(&self) -> &TronClient {
        &self.client
    }

    pub fn settings(&self) -> &TronSenderSettings {
        &self.settings
    }

    /// The highest head block number seen so far (0 before any).
    pub fn newest_head(&self) -> u64 {
        self.newest_head.load(Ordering::Relaxed)
    }

    fn saw_head(&self, number: u64) {
        self.newest_head.fetch_max(number, Ordering::Relaxed);
    }

    /// The head and the reference block `ref_block_depth` below it, from one endpoint.
    async fn head_and_reference(&self) -> Result<(BlockHeader, BlockHeader), PortError> {
        let depth = self.settings.ref_block_depth;
        let (head, reference) = self
            .client
            .pinned("reference block", |p: Pinned| async move {
                let head = header(&p.now_block().await?)?;
                let number = head.number.saturating_sub(depth).max(1).min(head.number);
                if number == head.number {
                    return Ok((head.clone(), head));
                }
                let block = p.block_head_by_num(number).await?.ok_or_else(|| {
                    CallError::transient(format!(
                        "the node does not serve block {number}, {depth} below its head"
                    ))
                })?;
                let reference = header(&block)?;
                if reference.number != number {
                    return Err(CallError::permanent(format!(
                        "asked for block {number}, got block {}",
                        reference.number
                    )));
                }
                Ok((head, reference))
            })
            .await?;
        self.saw_head(head.number);
        Ok((head, reference))
    }

    /// The price of `operation` (`bytes` of bandwidth) from `from`'s resources now: the core's
    /// plan, whose figures the estimate and its bid are.
    async fn plan(
        &self,
        from: &TronAddress,
        operation: Operation,
        bytes: u64,
        prices: ResourcePrices,
    ) -> Result<FeeEstimate, PortError> {
        let available = self.client.available_resources(from).await?;
        let plan = fees::plan(&PlanInputs {
            operation,
            bandwidth_bytes: bytes,
            available,
            prices,
            energy_margin_percent: self.settings.energy_margin_percent,
        });
        Ok(FeeEstimate {
            expected_native: Amount::from_units(plan.total_burn_sun.into()),
            max_native: Amount::from_units(plan.max_burn_sun.into()),
            bid: FeeBid::FeeLimit {
                sun: plan.fee_limit_sun,
            },
            plan: Some(plan),
        })
    }

    /// The bandwidth points of `transfer` once signed, built on a reference of real size.
    fn bandwidth_bytes(
        &self,
        from: &TronAddress,
        transfer: &Transfer,
        fee_limit_sun: u64,
    ) -> Result<u64, PortError> {
        let (reference, timing) = size_reference(self.settings.tx_lifetime_ms);
        Ok(transfer
            .build(from, fee_limit_sun, reference, timing)?
            .bandwidth_bytes())
    }

    async fn price_trx(
        &self,
        from: &TronAddress,
        to: &TronAddress,
        transfer: &Transfer,
    ) -> Result<FeeEstimate, PortError> {
        let bytes = self.bandwidth_bytes(from, transfer, 0)?;
        let recipient_exists = self.client.account(to).await?.is_some();
        let prices = self.client.resource_prices().await?;
        self.plan(
            from,
            Operation::TrxTransfer { recipient_exists },
            bytes,
            prices,
        )
        .await
    }

    /// A delegation pays bandwidth only. java-tron refuses one to an account that does not
    /// exist: refused here before anything is signed.
    async fn price_delegation(
        &self,
        from: &TronAddress,
        receiver: &TronAddress,
        transfer: &Transfer,
    ) -> Result<FeeEstimate, PortError> {
        let bytes = self.bandwidth_bytes(from, transfer, 0)?;
        if self.client.account(receiver).await?.is_none() {
            return Err(PortError::permanent(
                "tron",
                format!("energy cannot be delegated to {receiver}: the chain has no such account"),
            ));
        }
        let prices = self.client.resource_prices().await?;
        self.plan(from, Operation::SystemContract, bytes, prices)
            .await
    }

    async fn price_trc20(
        &self,
        from: &TronAddress,
        (token, to, amount): (&TronAddress, &TronAddress, &Amount),
        transfer: &Transfer,
    ) -> Result<FeeEstimate, PortError> {
        if amount.is_zero() {
            return Err(PortError::permanent(
                "tron",
                "the amount must be above zero",
            ));
        }
        let mut parameter = Vec::with_capacity(64);
        parameter.extend_from_slice(&abi::address_word(to));
        parameter.extend_from_slice(&abi::uint_word(amount.units()));
        let call = self
            .client
            .simulate_call(from, token, TRC20_TRANSFER_SELECTOR, &parameter)
            .await?;
        let energy = if let Some(why) = call.failure() {
            // A sender short of the token cannot be run; it is priced at the documented energy
            // of a transfer to a new holder (the most it takes), so a withdrawal the hot wallet
            // cannot cover yet is still quoted, then waits for funds with an alert. Any other
            // failure (a frozen recipient, a paused token) is the transfer's own.
            if self.client.trc20_balance(token, from).await? >= amount.units() {
                return Err(PortError::permanent(
                    "tron",
                    format!(
                        "the node's run of transfer({to}, {}) on {token} from {from} failed \
                         ({why}) though {from} holds the amount",
                        amount.units()
                    ),
                ));
            }
            custody_core::tron::resources::TRC20_TRANSFER_ENERGY_NEW_HOLDER
        } else {
            u64::try_from(call.energy_used)
                .ok()
                .filter(|e| *e > 0)
                .ok_or_else(|| {
                    PortError::permanent(
                        "tron",
                        format!(
                            "the node's run of the transfer reports energy_used {}",
                            call.energy_used
                        ),
                    )
                })?
        };
        // Whether the recipient holds the token is recorded in the plan; the node's run
        // already priced a new holder's storage slot into `energy`.
        let recipient_holds_token = self.client.trc20_balance(token, to).await? > 0;
        let params = self.client.chain_parameters().await?;
        let prices = fees::resource_prices(&params);
        let fee_limit = fees::fee_limit_sun(energy, &prices, self.settings.energy_margin_percent);
        if let Some(max) = max_fee_limit_sun(&params) {
            if fee_limit > max {
                return Err(PortError::permanent(
                    "tron",
                    format!(
                        "the transfer needs {energy} energy, a fee_limit of {fee_limit} sun: \
                         above the chain's getMaxFeeLimit {max}"
                    ),
                ));
            }
        }
        let bytes = self.bandwidth_bytes(from, transfer, fee_limit)?;
        self.plan(
            from,
            Operation::Trc20Transfer {
                recipient_holds_token,
                estimated_energy: Some(energy),
            },
            bytes,
            prices,
        )
        .await
    }

    /// `hash` in block `number` on one endpoint, from the block's contents and its infos.
    async fn inclusion_on(
        &self,
        p: Pinned,
        hash: &str,
        number: u64,
    ) -> Result<Option<Inclusion>, CallError> {
        let block = p.block_by_num(number).await?.ok_or_else(|| {
            CallError::transient(format!("the node does not serve block {number}"))
        })?;
        let block_header = checked_header(&block, number)?;
        let Some(tx) = block
            .transactions
            .iter()
            .find(|t| t.tx_id.eq_ignore_ascii_case(hash))
        else {
            return Ok(None);
        };
        let infos = p.transaction_infos_by_block_num(number).await?;
        let info = infos
            .iter()
            .find(|i| i.id.eq_ignore_ascii_case(hash))
            .ok_or_else(|| {
                CallError::transient(format!(
                    "block {number} lists {hash} but its infos do not (transaction history off, \
                     or a block being applied)"
                ))
            })?;
        Ok(Some(inclusion_of(tx, info, &block_header)?))
    }

    /// Where `hash` is on one endpoint (see the module documentation).
    async fn lookup_on(&self, p: Pinned, hash: &str) -> Result<TxLookup, CallError> {
        let head = header(&p.now_block().await?)?;
        self.saw_head(head.number);
        if let Some(info) = p.transaction_info_by_id(hash).await? {
            let number = u64::try_from(info.block_number)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    CallError::transient(format!(
                        "the info of {hash} names block {}",
                        info.block_number
                    ))
                })?;
            let block = p.block_by_num(number).await?.ok_or_else(|| {
                CallError::transient(format!(
                    "the info of {hash} names block {number}, which the node does not serve"
                ))
            })?;
            let block_header = checked_header(&block, number)?;
            let tx = block
                .transactions
                .iter()
                .find(|t| t.tx_id.eq_ignore_ascii_case(hash))
                .ok_or_else(|| {
                    CallError::transient(format!(
                        "the info of {hash} names block {number}, which does not list it \
                         (reorganization between the reads?)"
                    ))
                })?;
            return Ok(TxLookup::Included(inclusion_of(tx, &info, &block_header)?));
        }
        match p.transaction_from_pending(hash).await {
            Ok(Some(_)) => return Ok(TxLookup::Pending),
            Ok(None) => {}
            // A provider that does not serve the pending pool: a pending transaction then
            // reads as unknown, which only makes the caller send the same bytes again.
            Err(e) if e.is_not_served() => {
                tracing::debug!(
                    endpoint = p.shown(),
                    "gettransactionfrompending is not served"
                );
            }
            Err(e) => return Err(e),
        }
        if p.transaction_by_id(hash).await?.is_some() {
            return Err(CallError::transient(format!(
                "the node has {hash} in a block but no info for it (transaction history off, or \
                 a block being applied)"
            )));
        }
        let newest = self.newest_head();
        if head.number < newest {
            return Err(CallError::transient(format!(
                "the endpoint does not know {hash} but its head {} is behind block {newest}",
                head.number
            )));
        }
        Ok(TxLookup::Unknown)
    }
}

#[async_trait]
impl ChainSender for TronSender {
    fn network(&self) -> Network {
        Network::Tron
    }

    async fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError> {
        let from = address("sender", from)?;
        let transfer = Transfer::of(payment)?;
        match &transfer {
            Transfer::Trx { to, .. } => self.price_trx(&from, to, &transfer).await,
            Transfer::Trc20 { token, to, amount } => {
                self.price_trc20(&from, (token, to, amount), &transfer)
                    .await
            }
            Transfer::Energy { receiver, .. } => {
                self.price_delegation(&from, receiver, &transfer).await
            }
        }
    }

    async fn confirmed_nonce(&self, _address: &str) -> Result<Option<u64>, PortError> {
        Ok(None)
    }

    async fn final_transaction_at_nonce(
        &self,
        _from: &str,
        _nonce: u64,
        _confirmations: u32,
    ) -> Result<Option<String>, PortError> {
        Ok(None)
    }

    async fn build(&self, request: &BuildRequest) -> Result<UnsignedTx, PortError> {
        let fee_limit = match request.bid {
            FeeBid::FeeLimit { sun } => sun,
            FeeBid::Gas { .. } => {
                return Err(PortError::permanent(
                    "tron",
                    "a TRON transaction is bid with a fee limit, not gas",
                ))
            }
        };
        if let Some(nonce) = request.nonce {
            return Err(PortError::permanent(
                "tron",
                format!("TRON has no nonces; the request carries nonce {nonce}"),
            ));
        }
        let from = address("sender", &request.from)?;
        let transfer = Transfer::of(&request.payment)?;
        // Checked before any read: the same refusal with or without a node.
        let (size_ref, size_timing) = size_reference(self.settings.tx_lifetime_ms);
        transfer.build(&from, fee_limit, size_ref, size_timing)?;

        let (head, reference) = self.head_and_reference().await?;
        let timing = TxTiming::new(head.timestamp_ms, self.settings.tx_lifetime_ms);
        let tx = transfer.build(&from, fee_limit, RefBlock::from_header(&reference)?, timing)?;
        Ok(UnsignedTx {
            digest: *tx.txid(),
            payload: tx.raw_data().to_vec(),
            expires_at_ms: Some(timing.expiration_ms),
            reference_block: Some(reference.number),
        })
    }

    fn assemble(
        &self,
        unsigned: &UnsignedTx,
        signature: &RecoverableSignature,
    ) -> Result<SignedTx, PortError> {
        let tx = UnsignedTransaction::from_raw_data(&unsigned.payload)?;
        if tx.txid() != &unsigned.digest {
            return Err(PortError::permanent(
                "tron",
                format!(
                    "the digest {} is not the txID {} of the payload",
                    hex::encode(unsigned.digest),
                    tx.txid_hex()
                ),
            ));
        }
        if unsigned
            .expires_at_ms
            .is_some_and(|at| at != tx.expiration_ms())
        {
            return Err(PortError::permanent(
                "tron",
                "expires_at_ms is not the payload's expiration",
            ));
        }
        let signed = attach_signature(tx, signature)?;
        Ok(SignedTx {
            hash: signed.txid_hex(),
            raw: signed.to_bytes(),
        })
    }

    async fn broadcast(&self, signed: &SignedTx) -> BroadcastOutcome {
        match SignedTransaction::txid_of_bytes(&signed.raw) {
            Some(txid) if hex::encode(txid).eq_ignore_ascii_case(&signed.hash) => {}
            other => {
                tracing::error!(
                    hash = %signed.hash,
                    bytes_txid = ?other.map(hex::encode),
                    "refusing to broadcast TRON bytes that are not the transaction they are stored as"
                );
                return BroadcastOutcome::Rejected(format!(
                    "not sent: the bytes are not a signed transaction with txID {}",
                    signed.hash
                ));
            }
        }
        let outcome = match self.client.broadcast_hex(&hex::encode(&signed.raw)).await {
            Ok(answer) => classify_broadcast(&answer, &signed.hash),
            Err(e) => BroadcastOutcome::Unknown(e.to_string()),
        };
        match &outcome {
            BroadcastOutcome::Accepted => {
                tracing::info!(txid = %signed.hash, "TRON transaction accepted by the node");
            }
            other => {
                tracing::warn!(txid = %signed.hash, outcome = ?other, "TRON broadcast not accepted");
            }
        }
        outcome
    }

    async fn lookup(&self, hash: &str) -> Result<TxLookup, PortError> {
        let hash = txid_hex(hash)?;
        self.client
            .pinned("transaction lookup", |p: Pinned| self.lookup_on(p, &hash))
            .await
    }

    async fn head(&self) -> Result<(u64, i64), PortError> {
        let head = self.client.now_block().await?;
        let header = scan::header_of(&head.block_id, head.block_header.as_ref())?;
        self.saw_head(header.number);
        Ok((header.number, header.timestamp_ms))
    }

    async fn block_time(&self, number: u64) -> Result<Option<i64>, PortError> {
        let Some(block) = self.client.block_head_by_num(number).await? else {
            return Ok(None);
        };
        let header = scan::header_of(&block.block_id, block.block_header.as_ref())?;
        if header.number != number {
            return Err(PortError::permanent(
                "tron",
                format!("asked for block {number}, got block {}", header.number),
            ));
        }
        Ok(Some(header.timestamp_ms))
    }

    async fn block_listing(&self, number: u64) -> Result<Option<BlockListing>, PortError> {
        let Some(block) = self.client.block_by_num(number).await? else {
            return Ok(None);
        };
        let header = scan::header_of(&block.block_id, block.block_header.as_ref())?;
        if header.number != number {
            return Err(PortError::permanent(
                "tron",
                format!("asked for block {number}, got block {}", header.number),
            ));
        }
        let txids = block
            .transactions
            .iter()
            .map(|t| txid_hex(&t.tx_id))
            .collect::<Result<_, _>>()?;
        Ok(Some(BlockListing { header, txids }))
    }

    async fn inclusion_in_block(
        &self,
        hash: &str,
        number: u64,
    ) -> Result<Option<Inclusion>, PortError> {
        let hash = txid_hex(hash)?;
        self.client
            .pinned("transaction in a block", |p: Pinned| {
                self.inclusion_on(p, &hash, number)
            })
            .await
    }

    async fn balances(
        &self,
        address_text: &str,
        token_contract: Option<&str>,
    ) -> Result<(Amount, Option<Amount>), PortError> {
        let holder = address("address", address_text)?;
        let balance = self.client.account(&holder).await?.map_or(0, |a| a.balance);
        let native = u128::try_from(balance)
            .map_err(|_| PortError::permanent("tron", format!("negative TRX balance {balance}")))?;
        let token = match token_contract {
            Some(contract) => {
                let token = address("token contract", contract)?;
                Some(Amount::from_units(
                    self.client.trc20_balance(&token, &holder).await?,
                ))
            }
            None => None,
        };
        Ok((Amount::from_units(native), token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(accepted: bool, code: &str, message: &str) -> client::BroadcastOutcome {
        client::BroadcastOutcome {
            accepted,
            code: code.into(),
            message: message.into(),
            txid: None,
        }
    }

    #[test]
    fn broadcast_answers_are_classified_as_the_table_says() {
        let h = "ab".repeat(32);
        let c = |a, code, m| classify_broadcast(&answer(a, code, m), &h);
        assert_eq!(c(true, "SUCCESS", ""), BroadcastOutcome::Accepted);
        assert_eq!(
            c(false, "DUP_TRANSACTION_ERROR", "dup transaction"),
            BroadcastOutcome::Accepted
        );
        for code in ["TAPOS_ERROR", "TRANSACTION_EXPIRATION_ERROR"] {
            assert_eq!(c(false, code, "x"), BroadcastOutcome::Expired, "{code}");
        }
        for code in [
            "SIGERROR",
            "CONTRACT_VALIDATE_ERROR",
            "CONTRACT_EXE_ERROR",
            "BANDWITH_ERROR",
            "TOO_BIG_TRANSACTION_ERROR",
            "OTHER_ERROR",
        ] {
            assert_eq!(
                c(false, code, "balance is not sufficient"),
                BroadcastOutcome::Rejected(format!("{code}: balance is not sufficient")),
                "{code}"
            );
        }
        assert_eq!(
            c(false, "SIGERROR", ""),
            BroadcastOutcome::Rejected("SIGERROR".into())
        );
        for code in [
            "SERVER_BUSY",
            "NO_CONNECTION",
            "NOT_ENOUGH_EFFECTIVE_CONNECTION",
            "BLOCK_UNSOLIDIFIED",
            "",
            "SOMETHING_NEW",
        ] {
            assert!(
                matches!(c(false, code, "m"), BroadcastOutcome::Unknown(_)),
                "{code}"
            );
        }
        // Accepted under another txID: not something a lookup will find.
        let mut other = answer(true, "SUCCESS", "");
        other.txid = Some("cd".repeat(32));
        assert!(matches!(
            classify_broadcast(&other, &h),
            BroadcastOutcome::Unknown(_)
        ));
        other.txid = Some(h.to_ascii_uppercase());
        assert_eq!(classify_broadcast(&other, &h), BroadcastOutcome::Accepted);
    }

    fn tx(kind: &str, ret: Option<&str>) -> api::Transaction {
        serde_json::from_value(serde_json::json!({
            "txID": "ab".repeat(32),
            "ret": [match ret { Some(r) => serde_json::json!({"contractRet": r}), None => serde_json::json!({}) }],
            "raw_data": {"contract": [{"type": kind, "parameter": {"value": {}}}]}
        }))
        .unwrap()
    }

    fn info(receipt: Option<&str>, failed: bool) -> api::TransactionInfo {
        let mut v = serde_json::json!({"id": "ab".repeat(32), "blockNumber": 5, "receipt": {}});
        if let Some(r) = receipt {
            v["receipt"]["result"] = r.into();
        }
        if failed {
            v["result"] = "FAILED".into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn outcomes_need_the_block_and_the_info_to_agree() {
        let trx = "TransferContract";
        let call = "TriggerSmartContract";
        // A TRX transfer's receipt has no result: success.
        assert!(outcome(&tx(trx, Some("SUCCESS")), &info(None, false)).unwrap());
        assert!(outcome(&tx(call, Some("SUCCESS")), &info(Some("SUCCESS"), false)).unwrap());
        assert!(!outcome(&tx(call, Some("REVERT")), &info(Some("REVERT"), true)).unwrap());
        assert!(!outcome(
            &tx(call, Some("OUT_OF_ENERGY")),
            &info(Some("OUT_OF_ENERGY"), true)
        )
        .unwrap());
        for (t, i) in [
            // No verdict from the block.
            (tx(trx, None), info(None, false)),
            (tx(call, None), info(Some("SUCCESS"), false)),
            // The block and the info disagree.
            (tx(call, Some("SUCCESS")), info(Some("REVERT"), true)),
            (tx(call, Some("REVERT")), info(Some("SUCCESS"), false)),
            (tx(call, Some("REVERT")), info(Some("OUT_OF_ENERGY"), true)),
            (tx(call, Some("SUCCESS")), info(Some("SUCCESS"), true)),
            // A contract call without a receipt result, a failed TRX transfer.
            (tx(call, Some("SUCCESS")), info(None, false)),
            (tx(trx, Some("REVERT")), info(None, true)),
        ] {
            let e = outcome(&t, &i).unwrap_err();
            assert_eq!(e.retry(), custody_core::error::Retry::Transient);
        }
    }

    #[test]
    fn settings_are_checked() {
        let ok = TronSenderSettings::default();
        assert_eq!(ok.tx_lifetime_ms, 60_000);
        assert!(ok.check().is_ok());
        for bad in [
            TronSenderSettings {
                tx_lifetime_ms: 0,
                ..ok
            },
            TronSenderSettings {
                tx_lifetime_ms: 86_400_001,
                ..ok
            },
            TronSenderSettings {
                ref_block_depth: 65_536,
                ..ok
            },
            TronSenderSettings {
                energy_margin_percent: 1_001,
                ..ok
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
