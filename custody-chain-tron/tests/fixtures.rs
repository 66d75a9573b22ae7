//! The adapter reads the node's answers as the documentation publishes them
//! (`tests/fixtures/tron/`, see its README), and the test server (`custody_e2e::tron_api`)
//! writes no field those answers do not have.

use std::path::PathBuf;

use custody_chain_tron::api;
use custody_chain_tron::fees::{AvailableResources, ResourcePrices};
use custody_chain_tron::scan::{self, ScanError, TronCatalog};
use custody_core::amount::Amount;
use custody_core::asset::AssetCatalog;
use custody_core::ports::chain::ObservedTransfer;
use custody_e2e::tron_api::{BlockSpec, TronApi};
use serde_json::Value;
use sha2::{Digest, Sha256};

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
/// m/44'/195'/0'/0/0 and /1 of the abandon mnemonic.
const A0: &str = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
const A1: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tron")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn catalog() -> TronCatalog {
    TronCatalog::from_assets(&AssetCatalog::mainnet()).unwrap()
}

#[test]
fn the_documented_block_and_its_infos_give_the_trx_and_usdt_transfers() {
    let block: api::Block = serde_json::from_str(&fixture("getblockbynum.json")).unwrap();
    let infos: Vec<api::TransactionInfo> =
        serde_json::from_str(&fixture("gettransactioninfobyblocknum.json")).unwrap();
    assert!(scan::needs_infos(&block));
    let scanned = scan::scan(&block, &infos, &catalog()).unwrap();

    assert_eq!(scanned.header.number, 66_987_565);
    assert_eq!(
        scanned.header.hash,
        "0000000003fe262d52bfa4b2814f816fd2e57af5b98a33d60d8630a03a908e0e"
    );
    assert_eq!(
        scanned.header.parent_hash,
        "0000000003fe262c85cd6b02033f4c3e5c1efa35de256a17bd906dc61fb1aeed"
    );
    assert_eq!(scanned.header.timestamp_ms, 1_777_445_121_000);

    let addr =
        |a: &str| custody_core::chain::ChainAddress::parse(custody_core::Network::Tron, a).unwrap();
    let t = |tx: &str, log: Option<u32>, asset: &str, from: &str, to: &str, units, ok| {
        ObservedTransfer {
            tx_hash: custody_core::chain::TxHash::parse(tx).unwrap(),
            log_index: log,
            asset_code: asset.into(),
            from: addr(from),
            to: addr(to),
            amount: Amount::from_units(units),
            succeeded: ok,
        }
    };
    assert_eq!(
        scanned.transfers,
        vec![
            t(
                "f2886167f2cb6215be18690aa8c4f8484af97b2efe680c55bad9dc0200eaa455",
                None,
                "TRX",
                A0,
                A1,
                12_345_678,
                true
            ),
            t(
                "ad0d880beee8b7738143ca514d55e1935fdc7cea338b659b30f14b29da4057fc",
                Some(0),
                "USDT",
                A1,
                A0,
                250_000_000,
                true
            ),
            // The reverted call keeps no log: its intent comes from the call data.
            t(
                "f1db25accb6667020b2ad69d21a1fc133582752e768e7e98613c7525b3bf7318",
                Some(0),
                "USDT",
                A1,
                A0,
                999_000_000,
                false
            ),
        ]
    );

    // The fixture's transactions are genuine: txID = SHA-256(raw_data_hex).
    for tx in serde_json::from_str::<Value>(&fixture("getblockbynum.json")).unwrap()["transactions"]
        .as_array()
        .unwrap()
    {
        let raw = hex::decode(tx["raw_data_hex"].as_str().unwrap()).unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(raw)),
            tx["txID"].as_str().unwrap()
        );
    }
}

#[test]
fn without_the_token_in_the_catalog_only_trx_is_reported() {
    let block: api::Block = serde_json::from_str(&fixture("getblockbynum.json")).unwrap();
    let infos: Vec<api::TransactionInfo> =
        serde_json::from_str(&fixture("gettransactioninfobyblocknum.json")).unwrap();
    let trx_only: Vec<_> = AssetCatalog::mainnet()
        .all()
        .iter()
        .filter(|a| a.code != "USDT")
        .cloned()
        .collect();
    let catalog = TronCatalog::from_assets(&AssetCatalog::new(trx_only).unwrap()).unwrap();
    let scanned = scan::scan(&block, &infos, &catalog).unwrap();
    assert_eq!(scanned.transfers.len(), 1);
    assert_eq!(scanned.transfers[0].asset_code, "TRX");
}

#[test]
fn infos_of_another_block_are_an_inconsistency_not_a_result() {
    let block: api::Block = serde_json::from_str(&fixture("getblockbynum.json")).unwrap();
    // The documentation's infos of the same block number list other transactions (another
    // fork, as after a reorganization between the two calls).
    let other: Vec<api::TransactionInfo> =
        serde_json::from_str(&fixture("gettransactioninfobyblocknum_doc.json")).unwrap();
    assert!(matches!(
        scan::scan(&block, &other, &catalog()),
        Err(ScanError::Inconsistent(_))
    ));
    // No infos at all for a block with contract calls: also transient.
    assert!(matches!(
        scan::scan(&block, &[], &catalog()),
        Err(ScanError::Inconsistent(_))
    ));
}

#[test]
fn a_block_id_that_does_not_carry_its_number_is_malformed() {
    let mut block: Value = serde_json::from_str(&fixture("getblockbynum.json")).unwrap();
    block["block_header"]["raw_data"]["number"] = 66_987_566.into();
    let block: api::Block = serde_json::from_value(block).unwrap();
    assert!(matches!(
        scan::header_of(&block.block_id, block.block_header.as_ref()),
        Err(ScanError::Malformed(_))
    ));
}

#[test]
fn the_other_documented_answers_parse() {
    let empty: api::Block = serde_json::from_str(&fixture("empty.json")).unwrap();
    assert!(empty.block_header.is_none());

    let account: api::Account = serde_json::from_str(&fixture("getaccount.json")).unwrap();
    assert_eq!(account.balance, 1_793_227_200);
    assert!(account.address.is_some());
    let unknown: api::Account = serde_json::from_str(&fixture("empty.json")).unwrap();
    assert!(unknown.address.is_none());

    let r: api::AccountResource =
        serde_json::from_str(&fixture("getaccountresource.json")).unwrap();
    assert_eq!(
        AvailableResources::from_account_resource(&r),
        AvailableResources {
            free_bandwidth: 159,
            staked_bandwidth: 0,
            staked_energy: 0
        }
    );

    let call: api::ConstantCall =
        serde_json::from_str(&fixture("triggerconstantcontract.json")).unwrap();
    assert!(call.result.result);
    assert_eq!(call.constant_result.len(), 1);

    let ok: api::Broadcast = serde_json::from_str(&fixture("broadcasthex.json")).unwrap();
    assert!(ok.result);
    let refused: api::Broadcast =
        serde_json::from_str(&fixture("broadcasthex_error.json")).unwrap();
    assert!(!refused.result);
    assert_eq!(
        refused.code.as_deref(),
        Some("TRANSACTION_EXPIRATION_ERROR")
    );

    let params: api::ChainParameters =
        serde_json::from_str(&fixture("getchainparameters.json")).unwrap();
    assert_eq!(
        ResourcePrices::from_chain_parameters(&params),
        ResourcePrices::MAINNET
    );

    let error: api::Block = serde_json::from_str(&fixture("node_error.json")).unwrap();
    assert!(error.error.unwrap().contains("NumberFormatException"));
}

/// Every key of `ours` (recursively; arrays by their first element) exists in `doc`.
fn keys_within(ours: &Value, doc: &Value, at: &str) {
    match (ours, doc) {
        (Value::Object(o), Value::Object(d)) => {
            for (k, v) in o {
                let Some(dv) = d.get(k) else {
                    panic!("the test server writes {at}.{k}, which the documented answer lacks");
                };
                keys_within(v, dv, &format!("{at}.{k}"));
            }
        }
        (Value::Array(o), Value::Array(d)) => {
            if let (Some(o), Some(d)) = (o.first(), d.first()) {
                keys_within(o, d, &format!("{at}[]"));
            }
        }
        (o, d) => assert_eq!(
            std::mem::discriminant(o),
            std::mem::discriminant(d),
            "{at}: {o} and {d} are not of one JSON type"
        ),
    }
}

fn post(url: &str, path: &str, body: &str) -> Value {
    let addr = url.trim_start_matches("http://");
    let resp = custody_e2e::raw_request(addr, "POST", path, &[], body.as_bytes());
    assert_eq!(resp.status, 200);
    resp.json()
}

#[test]
fn the_test_server_writes_the_documented_shapes() {
    let api = TronApi::start_at(66_987_564);
    let block = api.append(
        BlockSpec::new()
            .trx(A0, A1, 12_345_678)
            .trc20(USDT, A1, A0, 250_000_000)
            .trc20_failed(USDT, A1, A0, 999_000_000, "REVERT"),
    );
    let num = format!("{{\"num\": {}}}", block.number);
    let ours = post(api.url(), "/wallet/getblockbynum", &num);
    let doc: Value = serde_json::from_str(&fixture("getblockbynum.json")).unwrap();
    keys_within(&ours["block_header"], &doc["block_header"], "block_header");
    let (our_txs, doc_txs) = (
        ours["transactions"].as_array().unwrap(),
        doc["transactions"].as_array().unwrap(),
    );
    for (o, d) in our_txs.iter().zip(doc_txs) {
        keys_within(o, d, "transaction");
    }

    let ours = post(api.url(), "/wallet/gettransactioninfobyblocknum", &num);
    let doc: Value = serde_json::from_str(&fixture("gettransactioninfobyblocknum.json")).unwrap();
    for (o, d) in ours.as_array().unwrap().iter().zip(doc.as_array().unwrap()) {
        keys_within(o, d, "info");
    }

    api.set_trx_balance(A0, 5);
    let ours = post(
        api.url(),
        "/wallet/getaccount",
        &format!("{{\"address\": \"{}\"}}", custody_e2e::tron_api::hex41(A0)),
    );
    keys_within(
        &ours,
        &serde_json::from_str(&fixture("getaccount.json")).unwrap(),
        "account",
    );
    let unknown = post(
        api.url(),
        "/wallet/getaccount",
        &format!("{{\"address\": \"{}\"}}", custody_e2e::tron_api::hex41(A1)),
    );
    assert_eq!(unknown, serde_json::json!({}));
    assert_eq!(
        post(api.url(), "/wallet/getblockbynum", "{\"num\": 99999999}"),
        serde_json::json!({})
    );
}
