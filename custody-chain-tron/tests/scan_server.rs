//! `TronChain` against the TRON HTTP API test server (`custody_e2e::tron_api`): scanning,
//! reorganizations, balances, broadcast, fee inputs, failover, health and the API key header.

use custody_chain_tron::fees;
use custody_chain_tron::{
    sign, trx_transfer, RefBlock, TronChain, TronSettings, TxTiming, API_KEY_HEADER,
};
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::asset::AssetCatalog;
use custody_core::error::Retry;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::network::Network;
use custody_core::ports::chain::{ChainSource, ObservedTransfer};
use custody_core::ports::signer::HdPath;
use custody_e2e::tron_api::{BlockSpec, Mode, TronApi, TxSpec, TEST_GENESIS_BLOCK_ID};
use serde_json::json;

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
/// m/44'/195'/0'/0/0, /1 and /2 of the abandon mnemonic.
const A0: &str = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
const A1: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";

fn other_token() -> String {
    TronAddress::from_bytes([0x77; 20]).to_string()
}

/// The test servers' network (`TronApi::start` serves [`TEST_GENESIS_BLOCK_ID`] as block 0).
fn settings(urls: &[&str]) -> TronSettings {
    let mut s = TronSettings::new(urls.iter().map(|u| u.to_string()).collect())
        .with_genesis_block_id(TEST_GENESIS_BLOCK_ID);
    s.request_timeout_ms = 2_000;
    s.connect_timeout_ms = 500;
    s
}

fn chain(api: &TronApi) -> TronChain {
    TronChain::new(&settings(&[api.url()]), &AssetCatalog::mainnet()).unwrap()
}

fn usdt(api: &TronApi) -> custody_core::asset::Asset {
    let _ = api;
    AssetCatalog::mainnet()
        .get(Network::Tron, "USDT")
        .unwrap()
        .clone()
}

fn th(hash: &str) -> custody_core::chain::TxHash {
    custody_core::chain::TxHash::parse(hash).expect("a hash")
}

fn ta(address: &str) -> custody_core::chain::ChainAddress {
    custody_core::chain::ChainAddress::parse(custody_core::Network::Tron, address)
        .expect("an address")
}

#[tokio::test]
async fn trx_and_usdt_transfers_are_found_with_amounts_addresses_and_log_index() {
    let api = TronApi::start_at(70_000_000);
    let block = api.append(
        BlockSpec::new()
            .trx(A0, A1, 1_500_000)
            .trc20(USDT, A1, A0, 25_000_000)
            .trx(A1, A0, 7),
    );
    let c = chain(&api);
    assert_eq!(c.network(), Network::Tron);
    assert_eq!(c.head_number().await.unwrap(), 70_000_001);

    let scanned = c.scan_block(block.number).await.unwrap().unwrap();
    assert_eq!(scanned.header.number, block.number);
    assert_eq!(scanned.header.hash, block.hash);
    assert_eq!(
        scanned.header.parent_hash,
        api.block(70_000_000).unwrap().hash
    );
    assert_eq!(scanned.header.timestamp_ms, block.timestamp_ms);
    assert_eq!(
        scanned.transfers,
        vec![
            ObservedTransfer {
                tx_hash: th(&block.txids[0]),
                log_index: None,
                asset_code: "TRX".into(),
                from: ta(A0),
                to: ta(A1),
                amount: Amount::from_units(1_500_000),
                succeeded: true,
            },
            ObservedTransfer {
                tx_hash: th(&block.txids[1]),
                log_index: Some(0),
                asset_code: "USDT".into(),
                from: ta(A1),
                to: ta(A0),
                amount: Amount::from_units(25_000_000),
                succeeded: true,
            },
            ObservedTransfer {
                tx_hash: th(&block.txids[2]),
                log_index: None,
                asset_code: "TRX".into(),
                from: ta(A1),
                to: ta(A0),
                amount: Amount::from_units(7),
                succeeded: true,
            },
        ]
    );
    // Lowercase hex hashes.
    assert!(scanned
        .transfers
        .iter()
        .all(|t| t.tx_hash.to_hex() == t.tx_hash.to_hex().to_ascii_lowercase()));

    let header = c.header(block.number).await.unwrap().unwrap();
    assert_eq!(header, scanned.header);
    // An empty block is scanned without asking for transaction infos.
    api.clear_requests();
    let empty = c.scan_block(70_000_000).await.unwrap().unwrap();
    assert!(empty.transfers.is_empty());
    assert_eq!(api.request_count("/wallet/gettransactioninfobyblocknum"), 0);
}

#[tokio::test]
async fn reverted_and_out_of_energy_transfers_are_reported_failed() {
    let api = TronApi::start();
    let block = api.append(
        BlockSpec::new()
            .trc20_failed(USDT, A0, A1, 40_000_000, "REVERT")
            .trc20_failed(USDT, A1, A0, 41_000_000, "OUT_OF_ENERGY")
            .trc20(USDT, A0, A1, 1),
    );
    let scanned = chain(&api).scan_block(block.number).await.unwrap().unwrap();
    let got: Vec<_> = scanned
        .transfers
        .iter()
        .map(|t| {
            (
                t.tx_hash.to_hex(),
                t.log_index,
                t.amount.units(),
                t.succeeded,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (block.txids[0].clone(), Some(0), 40_000_000, false),
            (block.txids[1].clone(), Some(0), 41_000_000, false),
            (block.txids[2].clone(), Some(0), 1, true),
        ]
    );
    assert_eq!(scanned.transfers[0].from.as_str(), A0);
    assert_eq!(scanned.transfers[0].to.as_str(), A1);
}

#[tokio::test]
async fn transfers_of_contracts_outside_the_catalog_are_not_returned() {
    let api = TronApi::start();
    let block = api.append(
        BlockSpec::new()
            .trc20(&other_token(), A0, A1, 1_000)
            .trc20_failed(&other_token(), A0, A1, 1_000, "REVERT")
            .trc20(USDT, A0, A1, 2_000),
    );
    let scanned = chain(&api).scan_block(block.number).await.unwrap().unwrap();
    assert_eq!(scanned.transfers.len(), 1);
    assert_eq!(scanned.transfers[0].tx_hash.to_hex(), block.txids[2]);
    assert_eq!(scanned.transfers[0].asset_code, "USDT");
}

#[tokio::test]
async fn a_replaced_block_shows_a_new_hash_and_missing_blocks_are_none() {
    let api = TronApi::start();
    let deposit = TxSpec::trc20(USDT, A1, A0, 3_000_000);
    let old = api.append(BlockSpec::new().tx(deposit.clone()));
    let next = api.append(BlockSpec::new());
    let c = chain(&api);
    let before = c.scan_block(old.number).await.unwrap().unwrap();
    assert_eq!(before.header.hash, old.hash);

    // Reorganization: block `old.number` is replaced; the deposit is re-included in it.
    let new = api.replace(
        old.number,
        BlockSpec::new().trx(A1, A0, 9).tx(deposit.clone()),
    );
    assert_ne!(new.hash, old.hash);
    let after = c.scan_block(old.number).await.unwrap().unwrap();
    assert_eq!(after.header.hash, new.hash);
    assert_eq!(after.header.parent_hash, old.parent_hash);
    // The same transfer, same identity (tx hash, log index), in the new block.
    let moved = after
        .transfers
        .iter()
        .find(|t| t.asset_code == "USDT")
        .unwrap();
    assert_eq!(
        (&moved.tx_hash, moved.log_index),
        (&before.transfers[0].tx_hash, before.transfers[0].log_index)
    );
    // The later block keeps its place but now links to the new hash.
    let next_after = c.header(next.number).await.unwrap().unwrap();
    assert_ne!(next_after.hash, next.hash);
    assert_eq!(next_after.parent_hash, new.hash);

    // A shorter fork: the head goes back and later numbers no longer exist.
    api.reorg(old.number, vec![BlockSpec::new()]);
    assert_eq!(c.head_number().await.unwrap(), old.number);
    assert_eq!(c.header(old.number + 1).await.unwrap(), None);
    assert_eq!(c.scan_block(old.number + 1).await.unwrap(), None);
    assert_eq!(c.scan_block(10_000).await.unwrap(), None);
}

#[tokio::test]
async fn the_solid_head_trails_the_head() {
    let api = TronApi::start();
    api.append_empty(30);
    let c = chain(&api);
    assert_eq!(c.head_number().await.unwrap(), 31);
    assert_eq!(c.solid_head_number().await.unwrap(), 12);
    api.set_solid_lag(0);
    assert_eq!(c.solid_head_number().await.unwrap(), 31);
}

#[tokio::test]
async fn balances_of_trx_and_usdt() {
    let api = TronApi::start();
    api.append_empty(4);
    api.set_trx_balance(A0, 123_456_789);
    api.set_trc20_balance(USDT, A0, u128::from(u64::MAX) * 3);
    let c = chain(&api);
    let trx = AssetCatalog::mainnet()
        .native(Network::Tron)
        .unwrap()
        .clone();

    let b = c.balance(A0, &trx).await.unwrap();
    assert_eq!(b.units, Amount::from_units(123_456_789));
    assert_eq!(b.block_number, 5);
    let b = c.balance(A0, &usdt(&api)).await.unwrap();
    assert_eq!(b.units, Amount::from_units(u128::from(u64::MAX) * 3));

    // An account the chain does not know holds nothing.
    assert_eq!(c.balance(A1, &trx).await.unwrap().units, Amount::ZERO);
    assert_eq!(
        c.balance(A1, &usdt(&api)).await.unwrap().units,
        Amount::ZERO
    );

    // Bad input is permanent.
    let e = c
        .balance("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", &trx)
        .await
        .unwrap_err();
    assert_eq!(e.retry, Retry::Permanent);
    let bnb = AssetCatalog::mainnet()
        .native(Network::Bsc)
        .unwrap()
        .clone();
    assert_eq!(
        c.balance(A0, &bnb).await.unwrap_err().retry,
        Retry::Permanent
    );
}

#[tokio::test]
async fn a_signed_transaction_is_broadcast_once_and_a_duplicate_is_refused() {
    let api = TronApi::start();
    let c = chain(&api);
    let signer = HdSigner::from_seed(
        &Mnemonic::parse(
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon \
             abandon about",
        )
        .unwrap()
        .to_seed(),
    )
    .unwrap();
    let head = c.head_header().await.unwrap();
    let tx = trx_transfer(
        &TronAddress::parse(A0).unwrap(),
        &TronAddress::parse(A1).unwrap(),
        Amount::from_units(5_000_000),
        RefBlock::from_header(&head).unwrap(),
        TxTiming::new(head.timestamp_ms, 60_000),
    )
    .unwrap();
    let path = HdPath {
        network: Network::Tron,
        account: 0,
        index: 0,
    };
    let signed = sign(tx, &signer, &path).unwrap();
    // The server checks the sender can pay (5 TRX, plus 1.1 TRX to create A1's account).
    api.set_trx_balance(A0, 10_000_000);
    let outcome = c.broadcast(&signed).await.unwrap();
    assert!(outcome.accepted);
    assert_eq!(outcome.code, "SUCCESS");
    assert_eq!(outcome.txid.as_deref(), Some(signed.txid_hex().as_str()));
    assert_eq!(api.broadcasts(), vec![signed.broadcast_hex()]);

    let again = c.broadcast(&signed).await.unwrap();
    assert!(!again.accepted);
    assert_eq!(again.code, "DUP_TRANSACTION_ERROR");
    assert_eq!(again.message, "dup transaction");
}

#[tokio::test]
async fn fee_inputs_come_from_the_node() {
    let api = TronApi::start();
    api.set_account_resource(
        A0,
        json!({"freeNetUsed": 100, "freeNetLimit": 600, "EnergyLimit": 70_000,
               "EnergyUsed": 20_000, "TotalNetLimit": 43_200_000_000_i64}),
    );
    api.set_chain_parameter("getEnergyFee", 210);
    api.set_trc20_balance(USDT, A1, 1);
    let client = chain(&api).client().clone();
    let (a0, a1) = (
        TronAddress::parse(A0).unwrap(),
        TronAddress::parse(A1).unwrap(),
    );
    let token = TronAddress::parse(USDT).unwrap();

    // A1 holds USDT: the documented 64,285 energy; 50k staked left, the rest burned at 210
    // sun.
    let inputs = client.trc20_plan_inputs(&a0, &token, &a1).await.unwrap();
    assert_eq!(
        inputs.operation.energy(),
        fees::TRC20_TRANSFER_ENERGY_HOLDER
    );
    assert_eq!(inputs.available.energy, 50_000);
    assert_eq!(inputs.prices.energy_sun, 210);
    let p = fees::plan(&inputs);
    assert_eq!(p.energy_burn_sun, 14_285 * 210);
    assert_eq!(p.bandwidth_burn_sun, 0, "345 of 500 free points left");

    // A0 holds none: the documented 130,285.
    let inputs = client.trc20_plan_inputs(&a1, &token, &a0).await.unwrap();
    assert_eq!(
        inputs.operation.energy(),
        fees::TRC20_TRANSFER_ENERGY_NEW_HOLDER
    );
    assert_eq!(fees::plan(&inputs).total_burn_sun, 130_285 * 210 + 345_000);

    // TRX to an address the chain does not know creates it.
    let inputs = client.trx_plan_inputs(&a0, &a1).await.unwrap();
    assert_eq!(
        inputs.operation,
        fees::Operation::TrxTransfer {
            recipient_exists: false
        }
    );
    assert_eq!(fees::plan(&inputs).total_burn_sun, 1_100_000);
    api.set_trx_balance(A1, 1);
    let inputs = client.trx_plan_inputs(&a0, &a1).await.unwrap();
    assert_eq!(
        inputs.operation,
        fees::Operation::TrxTransfer {
            recipient_exists: true
        }
    );
    assert_eq!(fees::plan(&inputs).total_burn_sun, 0);
}

#[tokio::test]
async fn reads_fail_over_to_the_next_endpoint_and_health_shows_it() {
    let first = TronApi::start();
    let second = TronApi::start();
    second.append_empty(5);
    let c = TronChain::new(
        &settings(&[first.url(), &format!("{}/", second.url())]),
        &AssetCatalog::mainnet(),
    )
    .unwrap();

    assert_eq!(
        c.head_number().await.unwrap(),
        1,
        "the first endpoint is preferred"
    );

    first.set_mode(Mode::Down);
    assert_eq!(c.head_number().await.unwrap(), 6);
    let health = c.health();
    assert_eq!(health.len(), 2);
    assert_eq!(health[0].url, first.url());
    assert!(!health[0].healthy);
    assert_eq!(health[0].consecutive_failures, 1);
    assert!(health[0]
        .last_error
        .as_deref()
        .unwrap()
        .contains("connection"));
    assert!(health[1].healthy);
    assert_eq!(health[1].head_block, Some(6));

    // While the first endpoint cools down, it is not asked first.
    first.clear_requests();
    first.set_mode(Mode::Up);
    assert_eq!(c.head_number().await.unwrap(), 6);
    assert_eq!(first.request_count("/wallet/getnowblock"), 0);

    // The admin listing is JSON.
    let listed = serde_json::to_value(c.health()).unwrap();
    assert_eq!(listed[1]["healthy"], json!(true));
    assert_eq!(listed[0]["consecutive_failures"], json!(1));
    assert!(listed[0]["last_failure_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
}

#[tokio::test]
async fn failures_are_transient_or_permanent() {
    let api = TronApi::start();
    let mut s = settings(&[api.url()]);
    s.request_timeout_ms = 300;
    s.cooldown_ms = 0;
    let c = TronChain::new(&s, &AssetCatalog::mainnet()).unwrap();

    for (mode, retry) in [
        (Mode::Down, Retry::Transient),
        (Mode::Hang, Retry::Transient),
        (Mode::Status(503), Retry::Transient),
        (Mode::Status(429), Retry::Transient),
        (Mode::Status(404), Retry::Permanent),
        (Mode::Status(401), Retry::Permanent),
    ] {
        api.set_mode(mode);
        let e = c.head_number().await.unwrap_err();
        assert_eq!((e.port, e.retry), ("tron", retry), "{mode:?}: {e}");
    }
    api.set_mode(Mode::Up);
    assert_eq!(c.head_number().await.unwrap(), 1);
    assert!(c.health()[0].healthy);

    // Nothing listens: transient.
    let dead = {
        let gone = TronApi::start();
        gone.url().to_owned()
    };
    let c = TronChain::new(&settings(&[&dead]), &AssetCatalog::mainnet()).unwrap();
    assert_eq!(c.head_number().await.unwrap_err().retry, Retry::Transient);
    // No endpoint at all: transient (the configuration may gain one; the core retries).
    let none = TronChain::new(&settings(&[]), &AssetCatalog::mainnet()).unwrap();
    assert_eq!(
        none.head_number().await.unwrap_err().retry,
        Retry::Transient
    );
}

#[tokio::test]
async fn the_api_key_header_is_sent_when_configured() {
    let api = TronApi::start();
    let with_key = TronChain::new(
        &settings(&[api.url()]).with_api_key("0b0e-test-key"),
        &AssetCatalog::mainnet(),
    )
    .unwrap();
    with_key.head_number().await.unwrap();
    with_key.scan_block(1).await.unwrap();
    let requests = api.requests();
    // The genesis check (block 0) before the first use, then the two reads.
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body, r#"{"num":0}"#);
    for r in &requests {
        assert_eq!(
            r.header(API_KEY_HEADER),
            Some("0b0e-test-key"),
            "{}",
            r.path
        );
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.method, "POST");
    }
    assert_eq!(requests[2].body, r#"{"num":1}"#);

    api.clear_requests();
    chain(&api).head_number().await.unwrap();
    assert_eq!(api.requests()[0].header(API_KEY_HEADER), None);
    // The key is not shown anywhere.
    assert!(!format!("{with_key:?} {:?}", with_key.health()).contains("0b0e-test-key"));
}
