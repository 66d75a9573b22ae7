//! Endpoint identity: each endpoint's block 0 is compared with the configured genesis block id
//! before the endpoint is used, and an endpoint of another network is never used (no read, no
//! broadcast), whatever it answers.

use custody_chain_tron::{
    sign, trx_transfer, RefBlock, SettingsError, TronChain, TronClient, TronSettings, TxTiming,
    MAINNET_GENESIS_BLOCK_ID,
};
use custody_core::address::TronAddress;
use custody_core::amount::Amount;
use custody_core::asset::AssetCatalog;
use custody_core::error::Retry;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::network::Network;
use custody_core::ports::chain::ChainSource;
use custody_core::ports::signer::HdPath;
use custody_e2e::tron_api::{BlockSpec, Mode, TronApi, TEST_GENESIS_BLOCK_ID};

/// Nile testnet's block 0 (`wallet/getblockbynum {"num": 0}` on nile.trongrid.io).
const NILE_GENESIS: &str = "0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc";
const A0: &str = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
const A1: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";

fn settings(urls: &[&str], genesis: &str) -> TronSettings {
    let mut s = TronSettings::new(urls.iter().map(|u| u.to_string()).collect())
        .with_genesis_block_id(genesis);
    s.request_timeout_ms = 2_000;
    s.connect_timeout_ms = 500;
    // An endpoint that failed is tried again at once: a refused one must stay refused anyway.
    s.cooldown_ms = 0;
    s
}

fn chain(s: &TronSettings) -> TronChain {
    TronChain::new(s, &AssetCatalog::mainnet()).unwrap()
}

/// Only the genesis check ever reached `api`.
fn only_the_genesis_check(api: &TronApi) {
    let requests = api.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].path, "/wallet/getblockbynum");
    assert_eq!(requests[0].body, r#"{"num":0}"#);
}

async fn signed_transfer(c: &TronChain) -> custody_chain_tron::SignedTransaction {
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
        Amount::from_units(1_000),
        RefBlock::from_header(&head).unwrap(),
        TxTiming::new(head.timestamp_ms, 60_000),
    )
    .unwrap();
    let path = HdPath {
        network: Network::Tron,
        account: 0,
        index: 0,
    };
    sign(tx, &signer, &path).unwrap()
}

#[tokio::test]
async fn an_endpoint_of_another_network_is_never_used_and_reads_fail_over() {
    // First in the list: a Nile node, with a "deposit" that exists only on the testnet.
    let nile = TronApi::start_on_network(1, NILE_GENESIS);
    nile.append(BlockSpec::new().trx(A1, A0, 5_000_000_000));
    nile.append_empty(30);
    let ours = TronApi::start();
    let block = ours.append(BlockSpec::new().trx(A1, A0, 7));
    ours.append_empty(2);

    let c = chain(&settings(&[nile.url(), ours.url()], TEST_GENESIS_BLOCK_ID));
    assert_eq!(c.head_number().await.unwrap(), ours.head().number);
    let scanned = c.scan_block(2).await.unwrap().unwrap();
    assert_eq!(scanned.header.hash, block.hash);
    assert_eq!(scanned.transfers.len(), 1);
    assert_eq!(scanned.transfers[0].amount.units(), 7);
    assert_eq!(
        c.header(1).await.unwrap().unwrap().hash,
        ours.block(1).unwrap().hash
    );
    let trx = AssetCatalog::mainnet()
        .get(Network::Tron, "TRX")
        .unwrap()
        .clone();
    ours.set_trx_balance(A0, 42);
    assert_eq!(c.balance(A0, &trx).await.unwrap().units.units(), 42);
    // A signed transaction goes to the verified endpoint, never to the other network's.
    ours.set_trx_balance(A0, 10_000_000);
    let tx = signed_transfer(&c).await;
    assert!(c.broadcast(&tx).await.unwrap().accepted);
    assert_eq!(ours.broadcasts().len(), 1);
    assert!(nile.broadcasts().is_empty());

    only_the_genesis_check(&nile);
    let health = c.health();
    assert!(!health[0].healthy && !health[0].genesis_verified);
    let error = health[0].last_error.as_deref().unwrap();
    assert!(error.contains("genesis block mismatch"), "{error}");
    assert!(error.contains(NILE_GENESIS), "{error}");
    assert!(health[1].healthy && health[1].genesis_verified);
    let listed = serde_json::to_value(&health).unwrap();
    assert_eq!(listed[0]["genesis_verified"], serde_json::json!(false));
    assert_eq!(listed[1]["genesis_verified"], serde_json::json!(true));

    // The verified endpoint goes down: the refused one is still never asked.
    ours.set_mode(Mode::Down);
    let e = c.head_number().await.unwrap_err();
    assert_eq!(e.retry, Retry::Transient, "{e}");
    only_the_genesis_check(&nile);
}

#[tokio::test]
async fn a_lone_endpoint_of_another_network_is_a_permanent_error() {
    let nile = TronApi::start_on_network(1, NILE_GENESIS);
    nile.append(BlockSpec::new().trx(A1, A0, 5_000_000_000));
    let c = chain(&settings(&[nile.url()], TEST_GENESIS_BLOCK_ID));
    let e = c.head_number().await.unwrap_err();
    assert_eq!((e.port, e.retry), ("tron", Retry::Permanent), "{e}");
    assert!(e.message.contains("genesis block mismatch"), "{e}");
    for _ in 0..3 {
        let e = c.scan_block(2).await.unwrap_err();
        assert_eq!(e.retry, Retry::Permanent, "{e}");
        assert!(e.message.contains("another network"), "{e}");
    }
    assert_eq!(c.header(2).await.unwrap_err().retry, Retry::Permanent);
    let e = c.client().broadcast_hex("0a00").await.unwrap_err();
    assert_eq!(e.retry, Retry::Permanent, "{e}");
    assert!(nile.broadcasts().is_empty());
    only_the_genesis_check(&nile);
}

#[tokio::test]
async fn mainnet_is_expected_by_default() {
    assert_eq!(
        MAINNET_GENESIS_BLOCK_ID,
        "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc"
    );
    let test_net = TronApi::start();
    let defaults = TronSettings::new(vec![test_net.url().into()]);
    assert_eq!(
        defaults.genesis_block_id.as_deref(),
        Some(MAINNET_GENESIS_BLOCK_ID)
    );
    let e = chain(&defaults).head_number().await.unwrap_err();
    assert_eq!(e.retry, Retry::Permanent, "{e}");
    only_the_genesis_check(&test_net);

    let mainnet = TronApi::start_on_network(1, MAINNET_GENESIS_BLOCK_ID);
    mainnet.append_empty(4);
    let c = chain(&TronSettings::new(vec![mainnet.url().into()]));
    assert_eq!(c.head_number().await.unwrap(), 5);
    assert!(c.health()[0].genesis_verified);
}

#[tokio::test]
async fn an_endpoint_that_cannot_be_checked_is_not_used_until_it_can() {
    let api = TronApi::start();
    api.append_empty(2);
    let c = chain(&settings(&[api.url()], TEST_GENESIS_BLOCK_ID));
    for (mode, retry) in [
        (Mode::Down, Retry::Transient),
        (Mode::Status(503), Retry::Transient),
        (Mode::Status(404), Retry::Permanent),
    ] {
        api.set_mode(mode);
        let e = c.head_number().await.unwrap_err();
        assert_eq!(e.retry, retry, "{mode:?}: {e}");
        assert!(!c.health()[0].genesis_verified);
    }
    // Every request so far was a genesis check.
    assert!(api
        .requests()
        .iter()
        .all(|r| r.path == "/wallet/getblockbynum" && r.body == r#"{"num":0}"#));
    api.set_mode(Mode::Up);
    assert_eq!(c.head_number().await.unwrap(), 3);
    assert!(c.health()[0].genesis_verified && c.health()[0].healthy);
    // Checked once: later reads go straight to the question.
    api.clear_requests();
    c.head_number().await.unwrap();
    assert_eq!(api.request_count("/wallet/getblockbynum"), 0);
}

#[tokio::test]
async fn concurrent_first_uses_make_one_check() {
    let api = TronApi::start();
    let c = chain(&settings(&[api.url()], TEST_GENESIS_BLOCK_ID));
    let reads: Vec<_> = (0..8u64)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.header(1).await })
        })
        .collect();
    for r in reads {
        assert!(r.await.unwrap().unwrap().is_some());
    }
    let checks = api
        .requests()
        .iter()
        .filter(|r| r.body == r#"{"num":0}"#)
        .count();
    assert_eq!(checks, 1);
}

#[test]
fn the_genesis_setting_must_be_a_block_0_id() {
    for bad in [
        "",
        "nile",
        // The first 8 bytes are the block number: this is block 1.
        "00000000000000011ebf88508a03865c71d452e25f4d51194196a1d22b6653dc",
        "1ebf88508a03865c71d452e25f4d51194196a1d22b6653dc",
    ] {
        let s = TronSettings::new(vec![]).with_genesis_block_id(bad);
        assert!(
            matches!(TronClient::new(&s), Err(SettingsError::BadGenesis(_))),
            "{bad:?}"
        );
    }
    let upper = format!("0x{}", NILE_GENESIS.to_ascii_uppercase());
    assert!(TronClient::new(&TronSettings::new(vec![]).with_genesis_block_id(upper)).is_ok());
}
