//! The adapter reads the node's answers as the documentation publishes them
//! (`tests/fixtures/tron/`, see its README), and the test server (`custody_e2e::tron_api`)
//! writes no field those answers do not have.

use std::path::PathBuf;

use custody_chain_tron::api;
use custody_chain_tron::fees::{self, AvailableResources, ResourcePrices};
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
        fees::available_resources(&r),
        AvailableResources {
            free_bandwidth: 159,
            staked_bandwidth: 0,
            energy: 0
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
    assert_eq!(fees::resource_prices(&params), ResourcePrices::MAINNET);

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

/// Transactions the server received signed and executed are written like the scripted ones:
/// the block's transactions, their infos (real fees and receipts), `gettransactionbyid` and
/// the pending pool's `gettransactionfrompending` stay within the documented fields.
#[test]
fn executed_broadcast_transactions_are_written_in_the_documented_shapes() {
    use custody_chain_tron::{sign, trc20_transfer, trx_transfer, RefBlock, TxTiming};
    use custody_core::address::TronAddress;
    use custody_core::keys::{HdSigner, Mnemonic};
    use custody_core::network::Network;
    use custody_core::ports::signer::HdPath;

    let api = TronApi::start_at(66_987_564);
    let head = api.head();
    let signer = HdSigner::from_seed(
        &Mnemonic::parse(
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon \
             abandon about",
        )
        .unwrap()
        .to_seed(),
    )
    .unwrap();
    let path = HdPath {
        network: Network::Tron,
        account: 0,
        index: 0,
    };
    api.set_trx_balance(A0, 100_000_000);
    api.set_trx_balance(A1, 1);
    api.set_trc20_balance(USDT, A0, 10);
    let mut id = [0u8; 32];
    hex::decode_to_slice(&head.hash, &mut id).unwrap();
    let reference = RefBlock::from_block(head.number, &id);
    let timing = TxTiming::new(head.timestamp_ms, 60_000);
    let (a0, a1) = (
        TronAddress::parse(A0).unwrap(),
        TronAddress::parse(A1).unwrap(),
    );
    let usdt = TronAddress::parse(USDT).unwrap();
    let txs = [
        trx_transfer(&a0, &a1, Amount::from_units(12_345_678), reference, timing).unwrap(),
        trc20_transfer(
            &a0,
            &usdt,
            &a1,
            Amount::from_units(7),
            30_000_000,
            reference,
            timing,
        )
        .unwrap(),
        trc20_transfer(
            &a0,
            &usdt,
            &a1,
            Amount::from_units(99),
            30_000_000,
            reference,
            timing,
        )
        .unwrap(),
    ];
    for tx in txs {
        let signed = sign(tx, &signer, &path).unwrap();
        let answer = post(
            api.url(),
            "/wallet/broadcasthex",
            &format!("{{\"transaction\": \"{}\"}}", signed.broadcast_hex()),
        );
        assert_eq!(answer["result"], serde_json::json!(true), "{answer}");
        assert_eq!(answer["txid"], serde_json::json!(signed.txid_hex()));
        keys_within(
            &answer,
            &serde_json::from_str(&fixture("broadcasthex.json")).unwrap(),
            "broadcast",
        );
        let pending = post(
            api.url(),
            "/wallet/gettransactionfrompending",
            &format!("{{\"value\": \"{}\"}}", signed.txid_hex()),
        );
        assert_eq!(pending["txID"], serde_json::json!(signed.txid_hex()));
        assert!(pending.get("ret").is_none());
    }
    let block = api.produce_block();
    assert_eq!(block.txids.len(), 3);
    let num = format!("{{\"num\": {}}}", block.number);
    let ours = post(api.url(), "/wallet/getblockbynum", &num);
    let doc: Value = serde_json::from_str(&fixture("getblockbynum.json")).unwrap();
    let our_txs = ours["transactions"].as_array().unwrap();
    for (o, d) in our_txs.iter().zip(doc["transactions"].as_array().unwrap()) {
        keys_within(o, d, "transaction");
        // The real raw_data: its SHA-256 is the txID.
        let raw = hex::decode(o["raw_data_hex"].as_str().unwrap()).unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(raw)),
            o["txID"].as_str().unwrap()
        );
        let by_id = post(
            api.url(),
            "/wallet/gettransactionbyid",
            &format!("{{\"value\": \"{}\"}}", o["txID"].as_str().unwrap()),
        );
        assert_eq!(&by_id, o);
    }
    assert_eq!(
        our_txs[2]["ret"][0]["contractRet"],
        serde_json::json!("REVERT")
    );
    let infos = post(api.url(), "/wallet/gettransactioninfobyblocknum", &num);
    let doc: Value = serde_json::from_str(&fixture("gettransactioninfobyblocknum.json")).unwrap();
    for (o, d) in infos
        .as_array()
        .unwrap()
        .iter()
        .zip(doc.as_array().unwrap())
    {
        keys_within(o, d, "info");
    }
    // The infos parse, and the scanner reads the block: one TRX and two USDT transfers, the
    // reverted one failed.
    let parsed: Vec<api::TransactionInfo> = serde_json::from_value(infos).unwrap();
    assert!(parsed.iter().all(|i| i.fee > 0));
    let block: api::Block = serde_json::from_value(ours).unwrap();
    let scanned = scan::scan(&block, &parsed, &catalog()).unwrap();
    let outcomes: Vec<_> = scanned
        .transfers
        .iter()
        .map(|t| (t.asset_code.as_str(), t.amount.units(), t.succeeded))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("TRX", 12_345_678, true),
            ("USDT", 7, true),
            ("USDT", 99, false)
        ]
    );
}
