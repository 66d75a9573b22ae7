//! `TronSender` (the `ChainSender` port) against the TRON HTTP API test server
//! (`custody_e2e::tron_api`), which checks what a node checks (signature, TaPoS, expiration,
//! duplicates, balances, bandwidth), keeps accepted transactions in a pool and executes them
//! into its next block: TRX and USDT payments from the hot wallet end to end, the broadcast
//! outcomes (duplicate, expired, refused, busy, lost answer), failed TRC20 transfers, pricing,
//! lookups from lagging endpoints, and endpoints of another network.

use custody_chain_tron::fees::{ActualResources, BandwidthSource, Operation};
use custody_chain_tron::{
    sign, trx_transfer, RefBlock, SignedTransaction, TronChain, TronSender, TronSenderSettings,
    TronSettings, TxTiming,
};
use custody_core::address::{address_of, TronAddress};
use custody_core::amount::Amount;
use custody_core::asset::AssetCatalog;
use custody_core::error::Retry;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::network::Network;
use custody_core::ports::chain::{ChainSource, ObservedTransfer};
use custody_core::ports::sender::{
    BroadcastOutcome, BuildRequest, ChainSender, FeeBid, FeeEstimate, Inclusion, Payment, SignedTx,
    TxLookup, UnsignedTx,
};
use custody_core::ports::signer::{HdPath, Signer};
use custody_e2e::tron_api::{
    BlockSpec, Mode, TronApi, TEST_GENESIS_BLOCK_ID, TRC20_REVERT_ENERGY, TRC20_TRANSFER_ENERGY,
    TRC20_TRANSFER_ENERGY_NEW_HOLDER,
};
use serde_json::json;
use sha2::{Digest, Sha256};

const ABANDON_12: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                          abandon abandon abandon about";
const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
/// Nile testnet's block 0.
const NILE_GENESIS: &str = "0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc";
/// m/44'/195'/0'/0/1 of the abandon mnemonic: a recipient.
const A1: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";
const TRX: u128 = 1_000_000;

/// The hot wallet path the service signs withdrawals with.
const HOT_PATH: HdPath = HdPath {
    network: Network::Tron,
    account: 2_147_483_647,
    index: 0,
};

/// Sun as the test server's balances hold them.
fn sun(units: u128) -> i64 {
    i64::try_from(units).unwrap()
}

fn signer() -> HdSigner {
    HdSigner::from_seed(&Mnemonic::parse(ABANDON_12).unwrap().to_seed()).unwrap()
}

/// The hot wallet's address, derived by the core and checked with `custody_core::address`.
fn hot(signer: &HdSigner) -> String {
    let (address, public_key) = signer.keys().address(&HOT_PATH).unwrap();
    assert_eq!(address_of(Network::Tron, &public_key), address);
    let parsed = TronAddress::parse(&address).unwrap();
    assert_eq!(parsed.to_string(), address);
    assert!(address.starts_with('T') && address.len() == 34, "{address}");
    address
}

fn settings(urls: &[&str]) -> TronSettings {
    let mut s = TronSettings::new(urls.iter().map(|u| u.to_string()).collect())
        .with_genesis_block_id(TEST_GENESIS_BLOCK_ID);
    s.request_timeout_ms = 2_000;
    s.connect_timeout_ms = 500;
    s
}

fn sender_on(urls: &[&str]) -> TronSender {
    let chain = TronChain::new(&settings(urls), &AssetCatalog::mainnet()).unwrap();
    TronSender::new(chain.client().clone(), TronSenderSettings::default()).unwrap()
}

fn chain_on(api: &TronApi) -> TronChain {
    TronChain::new(&settings(&[api.url()]), &AssetCatalog::mainnet()).unwrap()
}

/// A server with enough blocks for the default reference depth, and the hot wallet funded.
fn setup() -> (TronApi, TronSender, HdSigner, String) {
    let api = TronApi::start();
    api.append_empty(30);
    let signer = signer();
    let hot = hot(&signer);
    api.set_trx_balance(&hot, sun(100 * TRX));
    let sender = sender_on(&[api.url()]);
    (api, sender, signer, hot)
}

fn trx(to: &str, sun: u128) -> Payment {
    Payment::Native {
        to: to.into(),
        amount: Amount::from_units(sun),
    }
}

fn usdt(to: &str, units: u128) -> Payment {
    Payment::Token {
        contract: USDT.into(),
        to: to.into(),
        amount: Amount::from_units(units),
    }
}

fn request(from: &str, payment: Payment, bid: FeeBid) -> BuildRequest {
    BuildRequest {
        from: from.into(),
        payment,
        nonce: None,
        bid,
    }
}

/// Signs with the hot wallet key and assembles.
fn assemble(sender: &TronSender, signer: &HdSigner, unsigned: &UnsignedTx) -> SignedTx {
    let signature = signer.sign_digest(&HOT_PATH, &unsigned.digest).unwrap();
    sender.assemble(unsigned, &signature).unwrap()
}

async fn build_and_sign(
    sender: &TronSender,
    signer: &HdSigner,
    from: &str,
    payment: Payment,
    bid: FeeBid,
) -> (UnsignedTx, SignedTx) {
    let unsigned = sender.build(&request(from, payment, bid)).await.unwrap();
    let signed = assemble(sender, signer, &unsigned);
    (unsigned, signed)
}

fn included(lookup: TxLookup) -> Inclusion {
    match lookup {
        TxLookup::Included(i) => i,
        other => panic!("not included: {other:?}"),
    }
}

#[tokio::test]
async fn a_trx_payment_is_priced_built_signed_broadcast_and_included() {
    let (api, sender, signer, hot) = setup();
    api.set_trx_balance(A1, 1);
    assert_eq!(sender.network(), Network::Tron);
    assert_eq!(sender.confirmed_nonce(&hot).await.unwrap(), None);

    let payment = trx(A1, 12 * TRX);
    let price = sender.price(&hot, &payment).await.unwrap();
    assert_eq!(price.bid, FeeBid::FeeLimit { sun: 0 });

    let head = api.head();
    let (unsigned, signed) =
        build_and_sign(&sender, &signer, &hot, payment.clone(), price.bid).await;
    // The digest is the txID of the payload (raw_data); the expiration is the head's time
    // plus 60 s; the reference block is 20 below the head.
    assert_eq!(
        unsigned.digest,
        <[u8; 32]>::from(Sha256::digest(&unsigned.payload))
    );
    assert_eq!(unsigned.expires_at_ms, Some(head.timestamp_ms + 60_000));
    let reference = api.block(head.number - 20).unwrap();
    let n = (head.number - 20).to_be_bytes();
    let mut ref_fields = vec![0x0a, 0x02, n[6], n[7], 0x22, 0x08];
    ref_fields.extend_from_slice(&hex::decode(&reference.hash[16..32]).unwrap());
    assert!(unsigned.payload.starts_with(&ref_fields));
    // Deterministic: the same request on the same chain is the same transaction.
    let again = sender
        .build(&request(&hot, payment.clone(), price.bid))
        .await
        .unwrap();
    assert_eq!(again, unsigned);
    assert_eq!(signed.hash, hex::encode(unsigned.digest));
    // The bytes are those tx.rs signs (r ‖ s ‖ recovery id), and the ones TronWeb's oracle test
    // pins down.
    let bytes = SignedTransaction::txid_of_bytes(&signed.raw).unwrap();
    assert_eq!(bytes, unsigned.digest);
    assert!(*signed.raw.last().unwrap() <= 1);

    // Bandwidth: the signed size + 64, burned at 1000 sun (no free or staked bandwidth).
    let bandwidth = signed.raw.len() as u128 + 64;
    assert_eq!(price.expected_native.units(), bandwidth * 1_000);
    assert_eq!(price.max_native, price.expected_native);
    let plan = price.plan.expect("a TRON price carries its plan");
    assert_eq!(
        (
            plan.bandwidth_needed,
            plan.bandwidth_source,
            plan.activation_sun
        ),
        (
            u64::try_from(bandwidth).unwrap(),
            BandwidthSource::Burned,
            0
        )
    );
    assert_eq!(plan.total_burn_sun, plan.bandwidth_burn_sun);

    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    assert_eq!(api.pool(), vec![signed.hash.clone()]);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Pending
    );

    let block = api.produce_block();
    assert_eq!(block.txids, vec![signed.hash.clone()]);
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert_eq!(
        inclusion,
        Inclusion {
            block_number: block.number,
            block_hash: block.hash.clone(),
            succeeded: true,
            fee_native: price.expected_native,
            moves: Vec::new(),
            // The bandwidth burned, as planned.
            resources: Some(ActualResources {
                net_fee: sun(price.expected_native.units()) as u64,
                fee: sun(price.expected_native.units()) as u64,
                ..ActualResources::default()
            }),
            block_time_ms: None,
            head_number: None,
        }
    );
    // Upper case and 0x are read too.
    assert_eq!(
        included(
            sender
                .lookup(&format!("0x{}", signed.hash.to_uppercase()))
                .await
                .unwrap()
        ),
        inclusion
    );

    // The money moved on the server, and the sender reads the same balances.
    let fee = sun(price.expected_native.units());
    assert_eq!(api.trx_balance(&hot), Some(100_000_000 - 12_000_000 - fee));
    assert_eq!(api.trx_balance(A1), Some(12_000_001));
    assert_eq!(
        sender.balances(A1, None).await.unwrap(),
        (Amount::from_units(12_000_001), None)
    );
    // The deposit scanner sees the payment.
    let scanned = chain_on(&api)
        .scan_block(block.number)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        scanned.transfers,
        vec![ObservedTransfer {
            tx_hash: custody_core::chain::TxHash::parse(&signed.hash).unwrap(),
            log_index: None,
            asset_code: "TRX".into(),
            from: custody_core::chain::ChainAddress::parse(custody_core::Network::Tron, &hot)
                .unwrap(),
            to: custody_core::chain::ChainAddress::parse(custody_core::Network::Tron, A1).unwrap(),
            amount: Amount::from_units(12 * TRX),
            succeeded: true,
        }]
    );

    // Sending the same bytes again: the node has them (DUP_TRANSACTION_ERROR) → Accepted, and
    // nothing moves twice.
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    api.produce_block();
    assert_eq!(api.trx_balance(A1), Some(12_000_001));

    // The head.
    let (number, timestamp) = sender.head().await.unwrap();
    assert_eq!(
        (number, timestamp),
        (api.head().number, api.head().timestamp_ms)
    );
}

#[tokio::test]
async fn a_usdt_payment_is_priced_from_the_nodes_energy_estimate_and_moves_tokens() {
    let (api, sender, signer, hot) = setup();
    api.set_trc20_balance(USDT, &hot, 50_000_000);

    // A1 never held USDT: about twice the energy of a transfer to a holder.
    let payment = usdt(A1, 20_000_000);
    let price = sender.price(&hot, &payment).await.unwrap();
    let energy = TRC20_TRANSFER_ENERGY_NEW_HOLDER as u128;
    let fee_limit = energy * 100 * 120 / 100;
    assert_eq!(
        price.bid,
        FeeBid::FeeLimit {
            sun: u64::try_from(fee_limit).unwrap()
        }
    );

    let (_, signed) = build_and_sign(&sender, &signer, &hot, payment, price.bid).await;
    let bandwidth = (signed.raw.len() as u128 + 64) * 1_000;
    assert_eq!(price.expected_native.units(), energy * 100 + bandwidth);
    assert_eq!(price.max_native.units(), fee_limit + bandwidth);
    let plan = price.plan.expect("a TRON price carries its plan");
    assert_eq!(
        plan.operation,
        Operation::Trc20Transfer {
            recipient_holds_token: false,
            estimated_energy: Some(u64::try_from(energy).unwrap())
        }
    );

    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    let block = api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert!(inclusion.succeeded);
    assert_eq!(inclusion.block_hash, block.hash);
    assert_eq!(inclusion.fee_native, price.expected_native);
    // The plan and what the chain charged agree, figure by figure.
    let actual = inclusion
        .resources
        .expect("a TRON inclusion carries its receipt");
    assert_eq!(actual.energy_usage_total, plan.energy_needed);
    assert_eq!(actual.energy_usage, plan.energy_from_account);
    assert_eq!(actual.energy_fee, plan.energy_burn_sun);
    assert_eq!(actual.net_fee, plan.bandwidth_burn_sun);
    assert_eq!(actual.fee, plan.total_burn_sun);

    assert_eq!(api.trc20_balance(USDT, &hot), 30_000_000);
    assert_eq!(api.trc20_balance(USDT, A1), 20_000_000);
    assert_eq!(
        api.trx_balance(&hot),
        Some(100_000_000 - sun(price.expected_native.units()))
    );
    assert_eq!(
        sender.balances(&hot, Some(USDT)).await.unwrap(),
        (
            Amount::from_units(100 * TRX - price.expected_native.units()),
            Some(Amount::from_units(30_000_000))
        )
    );
    // The deposit scanner sees the Transfer event.
    let scanned = chain_on(&api)
        .scan_block(block.number)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        scanned.transfers,
        vec![ObservedTransfer {
            tx_hash: custody_core::chain::TxHash::parse(&signed.hash).unwrap(),
            log_index: Some(0),
            asset_code: "USDT".into(),
            from: custody_core::chain::ChainAddress::parse(custody_core::Network::Tron, &hot)
                .unwrap(),
            to: custody_core::chain::ChainAddress::parse(custody_core::Network::Tron, A1).unwrap(),
            amount: Amount::from_units(20_000_000),
            succeeded: true,
        }]
    );

    // A1 holds USDT now: the next transfer needs about half the energy.
    let price = sender.price(&hot, &usdt(A1, 1)).await.unwrap();
    assert_eq!(
        price.bid,
        FeeBid::FeeLimit {
            sun: TRC20_TRANSFER_ENERGY as u64 * 120
        }
    );
    // Staked energy is used first: with 50,000 left only the rest is burned.
    api.set_account_resource(&hot, json!({"EnergyLimit": 60_000, "EnergyUsed": 10_000}));
    let staked = sender.price(&hot, &usdt(A1, 1)).await.unwrap();
    assert_eq!(
        staked.expected_native.units(),
        (TRC20_TRANSFER_ENERGY as u128 - 50_000) * 100 + bandwidth
    );
    assert_eq!(staked.max_native, price.max_native);
    let (_, signed) = build_and_sign(&sender, &signer, &hot, usdt(A1, 1), staked.bid).await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert_eq!(inclusion.fee_native, staked.expected_native);
    assert_eq!(
        api.account_resource(&hot)["EnergyUsed"],
        json!(10_000 + 50_000)
    );
}

/// A1's key: the receiver of delegated energy signs its own USDT transfer with it.
const A1_PATH: HdPath = HdPath {
    network: Network::Tron,
    account: 0,
    index: 1,
};

fn energy(receiver: &str, sun: u128, undelegate: bool) -> Payment {
    let balance_sun = Amount::from_units(sun);
    let receiver = receiver.to_owned();
    if undelegate {
        Payment::UndelegateEnergy {
            receiver,
            balance_sun,
        }
    } else {
        Payment::DelegateEnergy {
            receiver,
            balance_sun,
        }
    }
}

/// Prices, builds, signs with the hot wallet, broadcasts and includes an energy delegation.
async fn delegate(
    api: &TronApi,
    sender: &TronSender,
    signer: &HdSigner,
    hot: &str,
    payment: Payment,
) -> (FeeEstimate, Inclusion) {
    let price = sender.price(hot, &payment).await.unwrap();
    assert_eq!(price.bid, FeeBid::FeeLimit { sun: 0 }, "no code runs");
    let (_, signed) = build_and_sign(sender, signer, hot, payment, price.bid).await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    api.produce_block();
    (price, included(sender.lookup(&signed.hash).await.unwrap()))
}

#[tokio::test]
async fn delegated_energy_makes_the_receivers_usdt_transfer_burn_no_trx_for_energy() {
    let (api, sender, signer, hot) = setup();
    // The hot wallet stakes 20,000 TRX for energy: 200,000 energy at the server's 10 per TRX.
    api.set_energy_stake(&hot, sun(20_000 * TRX));
    assert_eq!(api.account_resource(&hot)["EnergyLimit"], json!(200_000));
    api.set_trx_balance(A1, sun(5 * TRX));
    api.set_trc20_balance(USDT, A1, 10_000_000);
    // HOLDER is given no USDT in this test: a new holder, 130,285 energy.
    let pay = usdt(HOLDER, 1_000_000);

    // Before: A1 has no energy, its transfer to a new holder burns 130,285 energy's worth.
    let before = sender.price(A1, &pay).await.unwrap().plan.unwrap();
    assert_eq!(
        (before.energy_from_account, before.energy_burn_sun),
        (0, 13_028_500)
    );

    // The hot wallet lends A1 the energy of 14,000 TRX: 140,000 energy. Only bandwidth is
    // paid, and no TRX leaves the stake.
    let (price, inclusion) = delegate(
        &api,
        &sender,
        &signer,
        &hot,
        energy(A1, 14_000 * TRX, false),
    )
    .await;
    let plan = price.plan.unwrap();
    assert_eq!(plan.operation, Operation::SystemContract);
    assert_eq!((plan.energy_needed, plan.activation_sun), (0, 0));
    assert!(inclusion.succeeded);
    assert_eq!(inclusion.fee_native, price.expected_native);
    assert_eq!(
        api.trx_balance(&hot),
        Some(sun(100 * TRX - price.expected_native.units()))
    );
    assert_eq!(api.delegated_energy(&hot, A1), sun(14_000 * TRX));
    assert_eq!(api.energy_stake(&hot), sun(6_000 * TRX));
    assert_eq!(api.account_resource(A1)["EnergyLimit"], json!(140_000));
    assert_eq!(api.account_resource(&hot)["EnergyLimit"], json!(60_000));
    // The deposit scanner reads the block and finds no transfer in a delegation.
    let scanned = chain_on(&api)
        .scan_block(inclusion.block_number)
        .await
        .unwrap()
        .unwrap();
    assert!(scanned.transfers.is_empty(), "{:?}", scanned.transfers);

    // After: the plan takes all the energy from the delegation, and the chain agrees.
    let after = sender.price(A1, &pay).await.unwrap();
    let plan = after.plan.unwrap();
    assert_eq!(
        (plan.energy_from_account, plan.energy_burn_sun),
        (130_285, 0)
    );
    let unsigned = sender
        .build(&request(A1, pay.clone(), after.bid))
        .await
        .unwrap();
    let signature = signer.sign_digest(&A1_PATH, &unsigned.digest).unwrap();
    let signed = sender.assemble(&unsigned, &signature).unwrap();
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert!(inclusion.succeeded);
    let actual = inclusion.resources.unwrap();
    assert_eq!(
        (
            actual.energy_usage,
            actual.energy_usage_total,
            actual.energy_fee
        ),
        (130_285, 130_285, 0)
    );
    assert_eq!(actual.fee, actual.net_fee, "only bandwidth was burned");
    assert_eq!(api.trc20_balance(USDT, HOLDER), 1_000_000);
    assert_eq!(api.trx_balance(A1), Some(sun(5 * TRX) - actual.fee as i64));

    // Taken back: the stake's energy is the hot wallet's again.
    delegate(&api, &sender, &signer, &hot, energy(A1, 14_000 * TRX, true)).await;
    assert_eq!(api.delegated_energy(&hot, A1), 0);
    assert_eq!(api.energy_stake(&hot), sun(20_000 * TRX));
    assert_eq!(api.account_resource(&hot)["EnergyLimit"], json!(200_000));
    assert_eq!(
        api.account_resource(A1)["EnergyLimit"]
            .as_i64()
            .unwrap_or(0),
        0
    );

    // More than the stake left is refused by the node; an unknown receiver before signing.
    let too_much = energy(A1, 20_001 * TRX, false);
    let price = sender.price(&hot, &too_much).await.unwrap();
    let (_, signed) = build_and_sign(&sender, &signer, &hot, too_much, price.bid).await;
    match sender.broadcast(&signed).await {
        BroadcastOutcome::Rejected(why) => assert!(why.contains("FreezeEnergyV2"), "{why}"),
        other => panic!("{other:?}"),
    }
    let (unknown, _) = signer
        .keys()
        .address(&HdPath {
            index: 2,
            ..A1_PATH
        })
        .unwrap();
    let e = sender
        .price(&hot, &energy(&unknown, 1_000 * TRX, false))
        .await
        .unwrap_err();
    assert_eq!(e.retry, Retry::Permanent, "{e}");
}

/// An address that already holds USDT in the test below.
const HOLDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";

#[tokio::test]
async fn a_usdt_transfer_to_a_new_holder_is_planned_and_charged_more_energy() {
    let (api, sender, signer, hot) = setup();
    api.set_trc20_balance(USDT, &hot, 50_000_000);
    api.set_trc20_balance(USDT, HOLDER, 1);
    let to_holder = sender.price(&hot, &usdt(HOLDER, 1_000)).await.unwrap();
    let to_new = sender.price(&hot, &usdt(A1, 1_000)).await.unwrap();
    let (holder, new) = (to_holder.plan.unwrap(), to_new.plan.unwrap());
    // The node's estimates are the documented USDT figures, and the plan records whether the
    // recipient held the token.
    assert_eq!((holder.energy_needed, new.energy_needed), (64_285, 130_285));
    assert!(matches!(
        holder.operation,
        Operation::Trc20Transfer {
            recipient_holds_token: true,
            ..
        }
    ));
    assert!(matches!(
        new.operation,
        Operation::Trc20Transfer {
            recipient_holds_token: false,
            ..
        }
    ));
    assert_eq!(new.energy_burn_sun - holder.energy_burn_sun, 66_000 * 100);
    assert!(to_new.expected_native > to_holder.expected_native);
    assert!(to_new.max_native > to_holder.max_native);

    // Executed, each is charged the energy its plan said.
    for (to, price, plan) in [(HOLDER, to_holder, holder), (A1, to_new, new)] {
        let (_, signed) = build_and_sign(&sender, &signer, &hot, usdt(to, 1_000), price.bid).await;
        assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
        api.produce_block();
        let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
        let actual = inclusion.resources.unwrap();
        assert_eq!(actual.energy_usage_total, plan.energy_needed, "to {to}");
        assert_eq!(actual.fee, plan.total_burn_sun, "to {to}");
    }
}

#[tokio::test]
async fn a_failed_trc20_transfer_is_included_as_failed_with_its_fee() {
    let (api, sender, signer, hot) = setup();
    api.set_trc20_balance(USDT, &hot, 1_000);

    // The node's run of the transfer reverts (the wallet is short): priced at the bound.
    let priced = sender.price(&hot, &usdt(A1, 5_000)).await.unwrap();
    assert_eq!(priced.plan.unwrap().energy_needed, 130_285);

    // Sent anyway: the node accepts it (contract execution is not validation) and the block
    // holds it as REVERT, with the energy and bandwidth it burned.
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        usdt(A1, 5_000),
        FeeBid::FeeLimit { sun: 30_000_000 },
    )
    .await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    let block = api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    let fee = TRC20_REVERT_ENERGY as u128 * 100 + (signed.raw.len() as u128 + 64) * 1_000;
    assert_eq!(
        inclusion,
        Inclusion {
            block_number: block.number,
            block_hash: block.hash.clone(),
            succeeded: false,
            fee_native: Amount::from_units(fee),
            moves: Vec::new(),
            // What the receipt says the revert used and burned.
            resources: Some(ActualResources {
                energy_usage_total: TRC20_REVERT_ENERGY as u64,
                energy_fee: TRC20_REVERT_ENERGY as u64 * 100,
                net_fee: (signed.raw.len() as u64 + 64) * 1_000,
                fee: u64::try_from(fee).unwrap(),
                ..ActualResources::default()
            }),
            block_time_ms: None,
            head_number: None,
        }
    );
    assert_eq!(api.trc20_balance(USDT, &hot), 1_000);
    assert_eq!(api.trc20_balance(USDT, A1), 0);
    assert_eq!(api.trx_balance(&hot), Some(100_000_000 - sun(fee)));
    // The scanner reports it as a failed transfer, never as a deposit.
    let scanned = chain_on(&api)
        .scan_block(block.number)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(scanned.transfers.len(), 1);
    assert!(!scanned.transfers[0].succeeded);

    // A fee_limit too small for the energy: OUT_OF_ENERGY, the whole fee_limit burned.
    api.set_trc20_balance(USDT, &hot, 1_000_000);
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        usdt(A1, 5_000),
        FeeBid::FeeLimit { sun: 1_000_000 },
    )
    .await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert!(!inclusion.succeeded);
    assert_eq!(
        inclusion.fee_native.units(),
        1_000_000 + (signed.raw.len() as u128 + 64) * 1_000
    );
    assert_eq!(api.trc20_balance(USDT, A1), 0);
}

#[tokio::test]
async fn a_transaction_that_expired_unincluded_is_expired_on_broadcast_and_unknown_on_lookup() {
    let (api, sender, signer, hot) = setup();
    api.set_trx_balance(A1, 1);
    api.set_inclusion_paused(true);
    let (unsigned, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    let expires = unsigned.expires_at_ms.unwrap();
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Pending
    );

    // Blocks go by without it until the head reaches the expiration.
    while api.head().timestamp_ms < expires {
        api.produce_block();
        if api.head().timestamp_ms < expires {
            assert_eq!(
                sender.lookup(&signed.hash).await.unwrap(),
                TxLookup::Pending
            );
        }
    }
    assert!(api.pool().is_empty());
    assert_eq!(api.evicted()[0].0, signed.hash);
    assert!(api.evicted()[0]
        .1
        .starts_with("TRANSACTION_EXPIRATION_ERROR"));

    let (_, head_time) = sender.head().await.unwrap();
    assert!(head_time >= expires);
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Expired);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Unknown
    );
    api.set_inclusion_paused(false);
    api.produce_block();
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Unknown
    );
    assert_eq!(api.trx_balance(A1), Some(1));
}

#[tokio::test]
async fn a_transaction_on_an_orphaned_reference_block_is_expired() {
    let api = TronApi::start();
    api.append_empty(30);
    let signer = signer();
    let hot = hot(&signer);
    api.set_trx_balance(&hot, sun(100 * TRX));
    // Referencing the head itself: a fork at the head voids the transaction.
    let chain = TronChain::new(&settings(&[api.url()]), &AssetCatalog::mainnet()).unwrap();
    let shallow = TronSender::new(
        chain.client().clone(),
        TronSenderSettings {
            ref_block_depth: 0,
            ..TronSenderSettings::default()
        },
    )
    .unwrap();
    let head = api.head();
    let (_, signed) = build_and_sign(
        &shallow,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    api.reorg(head.number, vec![BlockSpec::new(), BlockSpec::new()]);
    assert_eq!(shallow.broadcast(&signed).await, BroadcastOutcome::Expired);
    assert!(api.pool().is_empty());
}

#[tokio::test]
async fn a_lost_answer_is_unknown_and_a_lookup_finds_the_transaction() {
    let (api, sender, signer, hot) = setup();
    api.set_trx_balance(A1, 1);
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, 3 * TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    api.lose_answers("/wallet/broadcasthex", 1);
    let outcome = sender.broadcast(&signed).await;
    assert!(
        matches!(outcome, BroadcastOutcome::Unknown(_)),
        "{outcome:?}"
    );
    // The node took it nevertheless.
    assert_eq!(api.pool(), vec![signed.hash.clone()]);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Pending
    );
    // Sending the same bytes again is harmless.
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    let block = api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert_eq!(inclusion.block_number, block.number);
    assert!(inclusion.succeeded);
    assert_eq!(api.trx_balance(A1), Some(3_000_001));

    // No answer at all, an HTTP error, a hanging node: Unknown, never Rejected.
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    for mode in [Mode::Down, Mode::Status(503), Mode::Status(404), Mode::Hang] {
        api.set_mode(mode);
        let outcome = sender.broadcast(&signed).await;
        assert!(
            matches!(outcome, BroadcastOutcome::Unknown(_)),
            "{mode:?}: {outcome:?}"
        );
    }
    api.set_mode(Mode::Up);
    assert!(!api.pool().contains(&signed.hash));
    // A lookup while the node is down is an error, not a verdict.
    api.set_mode(Mode::Down);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap_err().retry,
        Retry::Transient
    );
    api.set_mode(Mode::Up);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Unknown
    );
}

#[tokio::test]
async fn refusals_are_rejected_with_the_nodes_reason_and_busy_nodes_are_unknown() {
    let (api, sender, signer, hot) = setup();
    api.set_trx_balance(A1, 1);

    // More than the balance: CONTRACT_VALIDATE_ERROR.
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, 200 * TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    match sender.broadcast(&signed).await {
        BroadcastOutcome::Rejected(reason) => {
            assert!(reason.starts_with("CONTRACT_VALIDATE_ERROR: "), "{reason}");
            assert!(reason.contains("balance is not sufficient"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Enough for the amount but not for the bandwidth: BANDWITH_ERROR.
    api.set_trx_balance(&hot, sun(200 * TRX));
    let (_, exact) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, 200 * TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    assert!(matches!(
        sender.broadcast(&exact).await,
        BroadcastOutcome::Rejected(r) if r.starts_with("BANDWITH_ERROR")
    ));

    // Another key's signature over the same raw_data: SIGERROR (assemble refuses it, so the
    // bytes are made by hand; same txID, since the signature is not hashed).
    let other_key = HdPath {
        index: 1,
        ..HOT_PATH
    };
    let digest: [u8; 32] = hex::decode(&signed.hash).unwrap().try_into().unwrap();
    let wrong = signer.sign_digest(&other_key, &digest).unwrap().to_rsv();
    let mut forged = signed.raw.clone();
    let at = forged.len() - 65;
    forged[at..].copy_from_slice(&wrong);
    let forged = SignedTx {
        hash: signed.hash.clone(),
        raw: forged,
    };
    assert!(matches!(
        sender.broadcast(&forged).await,
        BroadcastOutcome::Rejected(r) if r.starts_with("SIGERROR")
    ));
    // Bytes that are not the transaction they are stored as are never sent.
    let sent = api.broadcasts().len();
    let mismatched = SignedTx {
        hash: "00".repeat(32),
        raw: signed.raw.clone(),
    };
    assert!(matches!(
        sender.broadcast(&mismatched).await,
        BroadcastOutcome::Rejected(r) if r.starts_with("not sent")
    ));
    assert_eq!(api.broadcasts().len(), sent);
    assert!(api.pool().is_empty());

    // A node that cannot take transactions now: Unknown, and the endpoint is tried last.
    let (_, good) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    for code in [
        "SERVER_BUSY",
        "BLOCK_UNSOLIDIFIED",
        "NO_CONNECTION",
        "NOT_ENOUGH_EFFECTIVE_CONNECTION",
    ] {
        api.refuse_broadcasts(Some(code));
        match sender.broadcast(&good).await {
            BroadcastOutcome::Unknown(why) => assert!(why.starts_with(code), "{why}"),
            other => panic!("{code}: {other:?}"),
        }
    }
    assert!(!sender.client().health()[0].healthy);
    api.refuse_broadcasts(None);
    assert_eq!(sender.broadcast(&good).await, BroadcastOutcome::Accepted);
}

#[tokio::test]
async fn a_busy_endpoint_is_left_for_the_next_one_on_the_next_broadcast() {
    let busy = TronApi::start();
    busy.append_empty(30);
    let other = TronApi::start();
    other.append_empty(30);
    let signer = signer();
    let hot = hot(&signer);
    for api in [&busy, &other] {
        api.set_trx_balance(&hot, sun(100 * TRX));
        api.set_trx_balance(A1, 1);
    }
    let sender = sender_on(&[busy.url(), other.url()]);
    // Both servers make the same blocks: a transaction built on one is valid on the other.
    assert_eq!(busy.head(), other.head());
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    busy.refuse_broadcasts(Some("SERVER_BUSY"));
    assert!(matches!(
        sender.broadcast(&signed).await,
        BroadcastOutcome::Unknown(_)
    ));
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    assert_eq!(other.pool(), vec![signed.hash.clone()]);
    assert!(busy.pool().is_empty());
}

#[tokio::test]
async fn pricing_a_transfer_to_a_new_account_includes_the_activation_fee() {
    let (api, sender, signer, hot) = setup();
    let fresh = TronAddress::from_bytes([0x5a; 20]).to_string();
    assert_eq!(sender.balances(&fresh, None).await.unwrap().0, Amount::ZERO);

    // No bandwidth: 0.1 TRX (getCreateAccountFee, instead of the bandwidth) + 1 TRX
    // (getCreateNewAccountFeeInSystemContract).
    let price = sender.price(&hot, &trx(&fresh, TRX)).await.unwrap();
    assert_eq!(price.expected_native.units(), 1_100_000);
    assert_eq!(price.max_native.units(), 1_100_000);
    // Free bandwidth does not pay for a new account.
    api.set_account_resource(&hot, json!({"freeNetLimit": 600}));
    let price = sender.price(&hot, &trx(&fresh, TRX)).await.unwrap();
    assert_eq!(price.expected_native.units(), 1_100_000);
    // Staked bandwidth does, for the 0.1 TRX part.
    api.set_account_resource(&hot, json!({"NetLimit": 5_000}));
    let price = sender.price(&hot, &trx(&fresh, TRX)).await.unwrap();
    assert_eq!(price.expected_native.units(), 1_000_000);
    assert_eq!(price.max_native.units(), 1_100_000);
    // The chain's prices are read, not assumed.
    api.set_chain_parameter("getCreateNewAccountFeeInSystemContract", 2_000_000);
    api.set_account_resource(&hot, json!({}));
    let price = sender.price(&hot, &trx(&fresh, TRX)).await.unwrap();
    assert_eq!(price.expected_native.units(), 2_100_000);
    // An account that exists: bandwidth only, free when there is enough.
    api.set_account_resource(&hot, json!({"freeNetLimit": 600}));
    let existing = sender.price(&hot, &trx(A1, TRX)).await;
    // (A1 does not exist yet either.)
    assert_eq!(existing.unwrap().expected_native.units(), 2_100_000);
    api.set_trx_balance(A1, 1);
    let price = sender.price(&hot, &trx(A1, TRX)).await.unwrap();
    assert_eq!(price.expected_native, Amount::ZERO);
    assert!(price.max_native.units() > 200_000);

    // Paying the new account costs what the price said, and creates it.
    api.set_account_resource(&hot, json!({}));
    let price = sender.price(&hot, &trx(&fresh, 2 * TRX)).await.unwrap();
    let (_, signed) = build_and_sign(&sender, &signer, &hot, trx(&fresh, 2 * TRX), price.bid).await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    api.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert_eq!(inclusion.fee_native, price.expected_native);
    assert_eq!(inclusion.fee_native.units(), 2_100_000);
    assert_eq!(api.trx_balance(&fresh), Some(2_000_000));
    // Now it exists: bandwidth only.
    let price = sender.price(&hot, &trx(&fresh, TRX)).await.unwrap();
    assert_eq!(
        price.expected_native.units(),
        (signed.raw.len() as u128 + 64) * 1_000
    );
}

#[tokio::test]
async fn an_endpoint_of_another_network_never_receives_the_broadcast() {
    let nile = TronApi::start_on_network(1, NILE_GENESIS);
    nile.append_empty(30);
    let ours = TronApi::start();
    ours.append_empty(30);
    let signer = signer();
    let hot = hot(&signer);
    for api in [&nile, &ours] {
        api.set_trx_balance(&hot, sun(100 * TRX));
    }
    let sender = sender_on(&[nile.url(), ours.url()]);
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    assert_eq!(ours.broadcasts().len(), 2);
    assert!(nile.broadcasts().is_empty());
    // Nile only ever got the genesis check.
    let requests = nile.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].body, r#"{"num":0}"#);

    // With no endpoint of the configured network, nothing is sent and nothing is concluded.
    let lone = sender_on(&[nile.url()]);
    let outcome = lone.broadcast(&signed).await;
    assert!(
        matches!(outcome, BroadcastOutcome::Unknown(_)),
        "{outcome:?}"
    );
    assert!(nile.broadcasts().is_empty());
    assert_eq!(
        lone.lookup(&signed.hash).await.unwrap_err().retry,
        Retry::Permanent
    );
}

#[tokio::test]
async fn a_lagging_endpoint_never_answers_unknown() {
    let ahead = TronApi::start();
    ahead.append_empty(40);
    let behind = TronApi::start();
    behind.append_empty(30);
    let signer = signer();
    let hot = hot(&signer);
    let sender = sender_on(&[ahead.url(), behind.url()]);
    let (number, _) = sender.head().await.unwrap();
    assert_eq!(number, ahead.head().number);
    assert_eq!(sender.newest_head(), number);

    // A transaction the endpoint ahead has in a block and the one behind does not know yet.
    ahead.set_trx_balance(&hot, sun(100 * TRX));
    let (_, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    assert_eq!(sender.broadcast(&signed).await, BroadcastOutcome::Accepted);
    let block = ahead.produce_block();
    let inclusion = included(sender.lookup(&signed.hash).await.unwrap());
    assert_eq!(inclusion.block_hash, block.hash);

    // The endpoint ahead goes down: the one behind does not know the transaction, but its
    // "not found" is not an answer until it has reached the newest head seen.
    ahead.set_mode(Mode::Down);
    let e = sender.lookup(&signed.hash).await.unwrap_err();
    assert_eq!(e.retry, Retry::Transient, "{e}");
    assert!(e.message.contains("behind"), "{e}");
    behind.append_empty(20);
    assert_eq!(
        sender.lookup(&signed.hash).await.unwrap(),
        TxLookup::Unknown
    );
}

#[tokio::test]
async fn assemble_is_pure_and_refuses_what_does_not_match() {
    let (api, sender, signer, hot) = setup();
    let (unsigned, signed) = build_and_sign(
        &sender,
        &signer,
        &hot,
        trx(A1, TRX),
        FeeBid::FeeLimit { sun: 0 },
    )
    .await;
    // No request reaches the node while assembling.
    api.set_mode(Mode::Down);
    let signature = signer.sign_digest(&HOT_PATH, &unsigned.digest).unwrap();
    assert_eq!(sender.assemble(&unsigned, &signature).unwrap(), signed);

    // Byte for byte what tx.rs signs (its own sign() through the Signer port).
    let raw = custody_chain_tron::UnsignedTransaction::from_raw_data(&unsigned.payload).unwrap();
    let by_tx_rs = sign(raw, &signer, &HOT_PATH).unwrap();
    assert_eq!(by_tx_rs.to_bytes(), signed.raw);
    assert_eq!(by_tx_rs.txid_hex(), signed.hash);

    // Another key, another digest, a changed payload or expiration: refused.
    let other = signer
        .sign_digest(
            &HdPath {
                index: 1,
                ..HOT_PATH
            },
            &unsigned.digest,
        )
        .unwrap();
    assert!(sender.assemble(&unsigned, &other).is_err());
    let mut wrong_digest = unsigned.clone();
    wrong_digest.digest[0] ^= 1;
    assert!(sender.assemble(&wrong_digest, &signature).is_err());
    let mut wrong_payload = unsigned.clone();
    let last = wrong_payload.payload.len() - 1;
    wrong_payload.payload[last] ^= 1;
    assert!(sender.assemble(&wrong_payload, &signature).is_err());
    let mut wrong_expiry = unsigned.clone();
    wrong_expiry.expires_at_ms = Some(1);
    assert!(sender.assemble(&wrong_expiry, &signature).is_err());
    api.set_mode(Mode::Up);

    // Requests that are not TRON's, or not consistent, are refused before any read.
    let gas = FeeBid::Gas {
        gas_limit: 21_000,
        gas_price_wei: 1,
    };
    for bad in [
        request(&hot, trx(A1, TRX), gas),
        request(&hot, trx(A1, TRX), FeeBid::FeeLimit { sun: 5 }),
        request(&hot, usdt(A1, 1), FeeBid::FeeLimit { sun: 0 }),
        request(&hot, trx(A1, 0), FeeBid::FeeLimit { sun: 0 }),
        request(&hot, trx(&hot, 1), FeeBid::FeeLimit { sun: 0 }),
        request(
            "0x0000000000000000000000000000000000000000",
            trx(A1, 1),
            FeeBid::FeeLimit { sun: 0 },
        ),
        BuildRequest {
            nonce: Some(7),
            ..request(&hot, trx(A1, TRX), FeeBid::FeeLimit { sun: 0 })
        },
    ] {
        let e = sender.build(&bad).await.unwrap_err();
        assert_eq!(e.retry, Retry::Permanent, "{bad:?}: {e}");
    }
    assert!(sender.lookup("not a hash").await.is_err());
}

#[tokio::test]
async fn the_reference_block_and_timing_are_the_nodes() {
    // The bytes of a transfer built by the sender are those tx.rs builds from the same
    // reference block and timing (TronWeb's oracle test pins tx.rs down).
    let (api, sender, _signer, hot) = setup();
    let head = api.head();
    let reference = api.block(head.number - 20).unwrap();
    let unsigned = sender
        .build(&request(
            &hot,
            trx(A1, 7 * TRX),
            FeeBid::FeeLimit { sun: 0 },
        ))
        .await
        .unwrap();
    let mut id = [0u8; 32];
    hex::decode_to_slice(&reference.hash, &mut id).unwrap();
    let expected = trx_transfer(
        &TronAddress::parse(&hot).unwrap(),
        &TronAddress::parse(A1).unwrap(),
        Amount::from_units(7 * TRX),
        RefBlock::from_block(reference.number, &id),
        TxTiming::new(head.timestamp_ms, 60_000),
    )
    .unwrap();
    assert_eq!(unsigned.payload, expected.raw_data());
    assert_eq!(&unsigned.digest, expected.txid());
}

#[tokio::test]
async fn a_usdt_transfer_the_sender_cannot_cover_yet_is_priced_at_the_new_holder_bound() {
    let (api, sender, _signer, hot) = setup();
    // The hot wallet holds less USDT than the transfer: the node cannot run it.
    api.set_trc20_balance(USDT, &hot, 10);
    api.set_trc20_balance(USDT, HOLDER, 1);
    let short = sender.price(&hot, &usdt(HOLDER, 1_000)).await.unwrap();
    let plan = short.plan.unwrap();
    assert_eq!(
        plan.energy_needed, 130_285,
        "the most a USDT transfer takes"
    );
    // Covered, the same transfer is priced from the node's run.
    api.set_trc20_balance(USDT, &hot, 5_000);
    let covered = sender.price(&hot, &usdt(HOLDER, 1_000)).await.unwrap();
    assert_eq!(covered.plan.unwrap().energy_needed, 64_285);
    assert!(short.max_native > covered.max_native);
}
