//! One conformance suite for the chain ports (`ChainSource`, `ChainSender`), run against every
//! chain adapter and the node it is tested on (BSC: anvil; TRON: the HTTP API test server).
//! What the engine, the scanner and the funds check rely on, whatever the network: a payment
//! priced, built, signed, assembled and sent is found by its hash, listed in its block with the
//! receipt the lookup gave, scanned as a transfer of the right asset and amount, and moves
//! exactly the amount and the fee it reports (every asset of the payer and the payee checked);
//! the same bytes sent twice pay once; heads and headers link; unknown hashes and blocks are
//! unknown, not errors.
//!
//! A runner implements [`ChainWorld`] over its adapter and test node, then calls [`run_all`]
//! (the adapters' `tests/conformance.rs`).

use async_trait::async_trait;
use custody_core::amount::Amount;
use custody_core::asset::Asset;
use custody_core::error::Retry;
use custody_core::ports::chain::{ChainSource, ObservedTransfer};
use custody_core::ports::sender::{
    BroadcastOutcome, BuildRequest, ChainSender, Inclusion, Payment, SignedTx, TxLookup,
};
use custody_core::ports::signer::{HdPath, Signer};

/// The adapter under test and the test node behind it.
#[async_trait]
pub trait ChainWorld: Send + Sync {
    fn source(&self) -> &dyn ChainSource;
    fn sender(&self) -> &dyn ChainSender;
    /// Keys of [`ChainWorld::payer`].
    fn signer(&self) -> &dyn Signer;
    /// An address holding plenty of the native coin and of [`ChainWorld::token`].
    fn payer(&self) -> (String, HdPath);
    /// The native coin, as the adapter's catalog has it.
    fn native(&self) -> Asset;
    /// A token of the adapter's catalog the payer holds.
    fn token(&self) -> Asset;
    /// An address nobody has used, a different one for each `i`.
    fn fresh_address(&self, i: u32) -> String;
    /// Makes the next block, including what the node holds in its pool.
    async fn mine(&self);
    /// Whether the sender reads blocks by number (`block_listing`, `inclusion_in_block`): TRON's
    /// proof that expired attempts are in no block. A network whose attempts share a nonce
    /// (BSC) refuses both as permanent errors instead.
    fn lists_blocks(&self) -> bool;
}

/// Every case, one after another (each uses fresh addresses of its own).
pub async fn run_all(world: &dyn ChainWorld) {
    heads_and_headers_link(world).await;
    unknown_hashes_and_future_blocks_are_unknown(world).await;
    a_native_payment_moves_its_amount_and_fee_once_and_is_found_everywhere(world).await;
    a_token_payment_moves_its_amount_and_fee_once_and_is_found_everywhere(world).await;
    the_same_bytes_sent_twice_pay_once(world).await;
    endpoints_report_their_health(world).await;
}

/// Head numbers grow with blocks, and each header names its parent.
pub async fn heads_and_headers_link(world: &dyn ChainWorld) {
    world.mine().await;
    let before = world.source().head_number().await.expect("head");
    world.mine().await;
    let head = world.source().head_number().await.expect("head");
    assert!(head > before, "head {head} after {before}");
    let (sender_head, head_time_ms) = world.sender().head().await.expect("sender head");
    assert!(
        sender_head >= head,
        "the sender's head {sender_head} behind {head}"
    );
    let top = header(world, head).await;
    let parent = header(world, head - 1).await;
    assert_eq!(
        top.parent_hash, parent.hash,
        "block {head} names its parent"
    );
    assert!(top.timestamp_ms >= parent.timestamp_ms);
    assert!(head_time_ms >= parent.timestamp_ms);
    let scanned = world
        .source()
        .scan_block(head)
        .await
        .expect("scan")
        .expect("the head is there");
    assert_eq!(scanned.header, top, "scan and header agree");
    if world.lists_blocks() {
        let listing = world
            .sender()
            .block_listing(head)
            .await
            .expect("listing")
            .expect("the head is listed");
        assert_eq!(listing.header.hash, top.hash);
    } else {
        let refused = world.sender().block_listing(head).await;
        assert!(
            refused.as_ref().is_err_and(|e| e.retry == Retry::Permanent),
            "{refused:?}"
        );
        let refused = world
            .sender()
            .inclusion_in_block(&"5".repeat(64), head)
            .await;
        assert!(
            refused.as_ref().is_err_and(|e| e.retry == Retry::Permanent),
            "{refused:?}"
        );
    }
}

/// A hash no node has seen, and blocks past the head, are unknown: not errors, not guesses.
pub async fn unknown_hashes_and_future_blocks_are_unknown(world: &dyn ChainWorld) {
    let nobody = "5".repeat(64);
    assert_eq!(
        world.sender().lookup(&nobody).await.expect("lookup"),
        TxLookup::Unknown
    );
    let far = world.source().head_number().await.expect("head") + 1_000;
    assert_eq!(world.source().header(far).await.expect("header"), None);
    assert_eq!(world.source().scan_block(far).await.expect("scan"), None);
    if world.lists_blocks() {
        let listing = world.sender().block_listing(far).await.expect("listing");
        assert_eq!(listing, None);
    }
    assert_eq!(world.sender().block_time(far).await.expect("time"), None);
}

pub async fn a_native_payment_moves_its_amount_and_fee_once_and_is_found_everywhere(
    world: &dyn ChainWorld,
) {
    let to = world.fresh_address(1);
    let amount = one_hundredth(&world.native());
    let payment = Payment::Native {
        to: to.clone(),
        amount,
    };
    let paid = pay(world, payment, &to).await;
    let received = paid.transfer_to(&to);
    assert_eq!(received.asset_code, world.native().code);
    assert_eq!(received.amount, amount);
    assert_eq!(received.log_index, None, "native value has no log");
    // The payer lost the amount and the fee it was told, no more; its token did not move.
    assert_eq!(
        paid.payer_after.native.units() + amount.units() + paid.inclusion.fee_native.units(),
        paid.payer_before.native.units(),
    );
    assert_eq!(paid.payer_after.token, paid.payer_before.token);
    assert_eq!(paid.payee_after.native, amount);
    assert_eq!(paid.payee_after.token, Amount::ZERO);
}

pub async fn a_token_payment_moves_its_amount_and_fee_once_and_is_found_everywhere(
    world: &dyn ChainWorld,
) {
    let to = world.fresh_address(2);
    let token = world.token();
    let amount = one_hundredth(&token);
    let payment = Payment::Token {
        contract: token.contract.clone().expect("a token has a contract"),
        to: to.clone(),
        amount,
    };
    let paid = pay(world, payment, &to).await;
    let received = paid.transfer_to(&to);
    assert_eq!(received.asset_code, token.code);
    assert_eq!(received.amount, amount);
    assert!(received.log_index.is_some(), "a token transfer is a log");
    assert_eq!(
        paid.payer_after.native.units() + paid.inclusion.fee_native.units(),
        paid.payer_before.native.units(),
        "the payer paid the fee in the native coin"
    );
    assert_eq!(
        paid.payer_after.token.units() + amount.units(),
        paid.payer_before.token.units()
    );
    assert_eq!(paid.payee_after.token, amount);
    assert_eq!(
        paid.payee_after.native,
        Amount::ZERO,
        "the payee got no native coin"
    );
}

/// A lost answer is answered by sending the same bytes again: that must never pay twice.
pub async fn the_same_bytes_sent_twice_pay_once(world: &dyn ChainWorld) {
    let to = world.fresh_address(3);
    let amount = one_hundredth(&world.native());
    let payment = Payment::Native {
        to: to.clone(),
        amount,
    };
    let signed = sign(world, payment).await;
    assert_eq!(
        world.sender().broadcast(&signed).await,
        BroadcastOutcome::Accepted
    );
    let again = world.sender().broadcast(&signed).await;
    assert!(
        !matches!(again, BroadcastOutcome::Rejected(_)),
        "the same bytes again are not refused as new money: {again:?}"
    );
    world.mine().await;
    let _ = world.sender().broadcast(&signed).await;
    world.mine().await;
    included(world, &signed.hash).await;
    assert_eq!(holdings(world, &to).await.native, amount, "paid once");
}

pub async fn endpoints_report_their_health(world: &dyn ChainWorld) {
    world.source().head_number().await.expect("head");
    let health = world.source().endpoint_health();
    assert!(!health.is_empty(), "every endpoint is listed");
    assert!(health[0].healthy, "{:?}", health[0]);
    assert!(health[0].last_success_at.is_some());
}

/// What an address holds of the native coin and of the world's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holdings {
    native: Amount,
    token: Amount,
}

async fn holdings(world: &dyn ChainWorld, address: &str) -> Holdings {
    let contract = world.token().contract;
    let (native, token) = world
        .sender()
        .balances(address, contract.as_deref())
        .await
        .expect("balances");
    let token = token.expect("a token balance when a contract is named");
    // The scanner's view of the same balances must agree with the sender's.
    let source_native = world
        .source()
        .balance(address, &world.native())
        .await
        .expect("native balance");
    let source_token = world
        .source()
        .balance(address, &world.token())
        .await
        .expect("token balance");
    assert_eq!(
        source_native.units, native,
        "{address}: native, source vs sender"
    );
    assert_eq!(
        source_token.units, token,
        "{address}: token, source vs sender"
    );
    Holdings { native, token }
}

struct Paid {
    inclusion: Inclusion,
    transfers: Vec<ObservedTransfer>,
    payer_before: Holdings,
    payer_after: Holdings,
    payee_after: Holdings,
}

impl Paid {
    fn transfer_to(&self, to: &str) -> &ObservedTransfer {
        let found: Vec<_> = self
            .transfers
            .iter()
            .filter(|t| t.to.as_str().eq_ignore_ascii_case(to))
            .collect();
        assert_eq!(found.len(), 1, "one transfer to {to}: {:?}", self.transfers);
        assert!(found[0].succeeded);
        found[0]
    }
}

/// Pays `payment` to `to` from the payer, through every step the broadcaster takes, and checks
/// what every port says about it.
async fn pay(world: &dyn ChainWorld, payment: Payment, to: &str) -> Paid {
    let (payer, _) = world.payer();
    let payer_before = holdings(world, &payer).await;
    let payee_before = holdings(world, to).await;
    assert_eq!(
        payee_before,
        Holdings {
            native: Amount::ZERO,
            token: Amount::ZERO
        },
        "{to} is fresh"
    );
    let nonce_before = world.sender().confirmed_nonce(&payer).await.expect("nonce");
    let signed = sign(world, payment).await;
    assert_eq!(
        world.sender().broadcast(&signed).await,
        BroadcastOutcome::Accepted
    );
    world.mine().await;
    let inclusion = included(world, &signed.hash).await;
    assert!(inclusion.succeeded);
    let block = inclusion.block_number;
    if world.lists_blocks() {
        let listing = world
            .sender()
            .block_listing(block)
            .await
            .expect("listing")
            .expect("its block is listed");
        assert!(
            listing.txids.iter().any(|id| id == &signed.hash),
            "block {block} lists {}",
            signed.hash
        );
        assert_eq!(listing.header.hash, inclusion.block_hash);
        let from_block = world
            .sender()
            .inclusion_in_block(&signed.hash, block)
            .await
            .expect("inclusion in block")
            .expect("found in its block");
        assert_eq!(from_block.block_hash, inclusion.block_hash);
        assert_eq!(from_block.fee_native, inclusion.fee_native);
        assert_eq!(from_block.succeeded, inclusion.succeeded);
    }
    let scanned = world
        .source()
        .scan_block(block)
        .await
        .expect("scan")
        .expect("its block is there");
    assert_eq!(scanned.header.hash, inclusion.block_hash);
    let transfers: Vec<_> = scanned
        .transfers
        .into_iter()
        .filter(|t| t.tx_hash.to_hex() == signed.hash)
        .collect();
    match nonce_before {
        Some(before) => {
            let after = world.sender().confirmed_nonce(&payer).await.expect("nonce");
            assert_eq!(after, Some(before + 1), "one nonce spent");
            // What a cancel reads: the payer's transaction at that nonce, once final.
            let holder = world
                .sender()
                .final_transaction_at_nonce(&payer, before, 1)
                .await
                .expect("the transaction at a nonce");
            assert_eq!(holder.as_deref(), Some(signed.hash.as_str()));
        }
        None => {
            let holder = world
                .sender()
                .final_transaction_at_nonce(&payer, 0, 1)
                .await
                .expect("no nonces, no answer");
            assert_eq!(holder, None, "a network without nonces names no holder");
        }
    }
    Paid {
        inclusion,
        transfers,
        payer_before,
        payer_after: holdings(world, &payer).await,
        payee_after: holdings(world, to).await,
    }
}

/// Prices, builds, signs and assembles `payment` from the payer.
async fn sign(world: &dyn ChainWorld, payment: Payment) -> SignedTx {
    let (payer, path) = world.payer();
    let estimate = world
        .sender()
        .price(&payer, &payment)
        .await
        .expect("priced");
    assert!(estimate.max_native >= estimate.expected_native);
    let nonce = world.sender().confirmed_nonce(&payer).await.expect("nonce");
    let unsigned = world
        .sender()
        .build(&BuildRequest {
            from: payer,
            payment,
            nonce,
            bid: estimate.bid,
        })
        .await
        .expect("built");
    let signature = world
        .signer()
        .sign_digest(&path, &unsigned.digest)
        .expect("signed");
    let signed = world
        .sender()
        .assemble(&unsigned, &signature)
        .expect("assembled");
    assert_eq!(signed.hash.len(), 64, "lowercase hex without 0x");
    assert_eq!(signed.hash, signed.hash.to_ascii_lowercase());
    signed
}

async fn included(world: &dyn ChainWorld, hash: &str) -> Inclusion {
    match world.sender().lookup(hash).await.expect("lookup") {
        TxLookup::Included(inclusion) => inclusion,
        other => panic!("{hash} is in a block after mining: {other:?}"),
    }
}

async fn header(world: &dyn ChainWorld, number: u64) -> custody_core::ports::chain::BlockHeader {
    world
        .source()
        .header(number)
        .await
        .expect("header")
        .unwrap_or_else(|| panic!("block {number} is there"))
}

/// 1/100 of a whole unit of `asset`.
fn one_hundredth(asset: &Asset) -> Amount {
    Amount::from_units(10u128.pow(u32::from(asset.decimals).saturating_sub(2)))
}
