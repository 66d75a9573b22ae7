//! The same deposit pipeline on TRON: `custody serve` scanning a TRON HTTP API test server
//! that answers in the real node's JSON format.

use custody_e2e::tron_api::{BlockSpec, TronApi, TxSpec};
use custody_e2e::{Cred, Custody};

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const UNLISTED: &str = "TXLAQ63Xg1NAzckPwKHvzw7CSEmLMEqcdj";
const SENDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";

/// `[tron] genesis_block_id` as `custody init` writes it: mainnet's.
const MAINNET_GENESIS: &str = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";

/// A test server and a service scanning it, configured for the server's network.
fn setup() -> (TronApi, Custody, Cred) {
    let (api, custody, cred) = setup_on_mainnet();
    custody.edit_config(
        &format!("genesis_block_id = \"{MAINNET_GENESIS}\""),
        &format!("genesis_block_id = \"{}\"", api.genesis_block_id()),
    );
    (api, custody, cred)
}

/// A test server and a service left configured for mainnet (the default).
fn setup_on_mainnet() -> (TronApi, Custody, Cred) {
    let api = TronApi::start();
    api.append_empty(3);
    let custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_TRON_API_URLS", api.url())],
    );
    custody.edit_config(
        "poll_interval_ms = 3000",
        &format!(
            "poll_interval_ms = 100\nstart_block = {}",
            api.head().number
        ),
    );
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    (api, custody, cred)
}

#[test]
fn trx_and_usdt_are_credited_after_nineteen_confirmations_and_failures_never() {
    let (api, mut custody, cred) = setup();
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let bob = client.wallet("bob", "TRON");
    let (a, b) = (
        alice["address"].as_str().unwrap(),
        bob["address"].as_str().unwrap(),
    );
    let trx = TxSpec::trx(SENDER, a, 5_000_000);
    let usdt = TxSpec::trc20(USDT, SENDER, b, 7_250_000);
    api.append(
        BlockSpec::new()
            .tx(trx.clone())
            .tx(usdt.clone())
            .tx(TxSpec::trc20(USDT, SENDER, a, 1_000).with_result("REVERT"))
            .tx(TxSpec::trc20(USDT, SENDER, a, 2_000).with_result("OUT_OF_ENERGY"))
            .tx(TxSpec::trc20(UNLISTED, SENDER, a, 3_000))
            .tx(TxSpec::trx(SENDER, a, 4_000).with_result("REVERT")),
    );
    let seen = custody.wait_for(30, "two deposits", || {
        let d = client.deposits("");
        (d.len() == 2).then_some(d)
    });
    let d_trx = seen.iter().find(|d| d["asset"] == "TRX").unwrap();
    assert_eq!(d_trx["tx_hash"], trx.txid.as_str());
    assert_eq!(d_trx["amount_units"], "5000000");
    assert_eq!(d_trx["address"], a);
    assert_eq!(d_trx["required_confirmations"], 19);
    let d_usdt = seen.iter().find(|d| d["asset"] == "USDT").unwrap();
    assert_eq!(d_usdt["tx_hash"], usdt.txid.as_str());
    assert_eq!(d_usdt["amount_units"], "7250000");
    assert_eq!(d_usdt["external_user_id"], "bob");

    api.append_empty(17);
    custody.wait_for(30, "18 confirmations", || {
        client
            .deposits("")
            .iter()
            .all(|d| d["confirmations"] == 18)
            .then_some(())
    });
    assert_eq!(client.available(&alice, "TRX"), 0, "18 is not enough");
    api.append_empty(1);
    custody.wait_for(30, "credited", || {
        client
            .deposits("?status=credited")
            .len()
            .eq(&2)
            .then_some(())
    });
    assert_eq!(client.available(&alice, "TRX"), 5_000_000);
    assert_eq!(client.available(&bob, "USDT"), 7_250_000);
    assert_eq!(
        client.available(&alice, "USDT"),
        0,
        "REVERT, OUT_OF_ENERGY and unlisted tokens never count"
    );
}

#[test]
fn a_replaced_block_orphans_its_deposit_and_a_restart_resumes_without_loss() {
    let (api, mut custody, cred) = setup();
    custody.start();
    let client = custody.client(&cred);
    let carol = client.wallet("carol", "TRON");
    let c = carol["address"].as_str().unwrap().to_owned();

    let block = api.append(BlockSpec::new().trx(SENDER, &c, 1_111));
    custody.wait_for(30, "detected", || client.deposits("").into_iter().next());
    api.replace(block.number, BlockSpec::new());
    let orphan = custody.wait_for(30, "orphaned", || {
        client.deposits("?status=orphaned").into_iter().next()
    });
    let steps: Vec<_> = orphan["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps.first().map(String::as_str), Some("detected"));
    assert_eq!(steps.last().map(String::as_str), Some("orphaned"));
    assert!(orphan["block_number"].is_null());

    // Kill the server, let the chain move on with more deposits, restart.
    custody.kill9();
    for i in 1..=5 {
        api.append(BlockSpec::new().trx(SENDER, &c, i * 100));
    }
    api.append_empty(20);
    custody.start();
    let client = custody.client(&cred);
    custody.wait_for(60, "five credited", || {
        client
            .deposits("?status=credited")
            .len()
            .eq(&5)
            .then_some(())
    });
    assert_eq!(
        client.available(&carol, "TRX"),
        1_500,
        "each once; the orphan never"
    );
    assert_eq!(client.deposits("").len(), 6);
}

#[test]
fn an_endpoint_of_another_network_is_never_used() {
    // The service expects mainnet; the test server is another network (its own block 0).
    let (api, mut custody, cred) = setup_on_mainnet();
    assert_ne!(api.genesis_block_id(), MAINNET_GENESIS);
    let ops = custody.credential("ops", &["--admin"]);
    custody.start();
    let client = custody.client(&cred);
    let admin = custody.client(&ops);
    let dave = client.wallet("dave", "TRON");
    let d = dave["address"].as_str().unwrap().to_owned();
    api.append(BlockSpec::new().trx(SENDER, &d, 9_000_000));
    api.append_empty(25);

    let endpoint = custody.wait_for(30, "the endpoint refused", || {
        let rpcs = admin.get("/v1/admin/rpcs").json();
        let tron = rpcs["data"]
            .as_array()?
            .iter()
            .find(|n| n["network"] == "TRON")?
            .clone();
        let e = tron["endpoints"][0].clone();
        e["last_error"]
            .as_str()
            .is_some_and(|m| m.contains("genesis block mismatch"))
            .then_some(e)
    });
    assert_eq!(endpoint["healthy"], false);
    assert_eq!(endpoint["identity_verified"], false);
    assert!(endpoint["identity"]
        .as_str()
        .unwrap()
        .starts_with("genesis "));
    // Scanner ticks come and go (100 ms): still nothing read but block 0, nothing detected.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let requests = api.requests();
    assert_eq!(requests.len(), 1, "only the genesis check: {requests:?}");
    assert_eq!(requests[0].path, "/wallet/getblockbynum");
    assert_eq!(requests[0].body, r#"{"num":0}"#);
    assert!(client.deposits("").is_empty());
    assert_eq!(client.available(&dave, "TRX"), 0);
}

/// BSC and TRON endpoints show the same health record in the admin listing and the dashboard.
#[test]
fn endpoint_health_has_one_shape_for_both_networks() {
    let Some(anvil) = custody_e2e::anvil::Anvil::start() else {
        return;
    };
    let api = TronApi::start();
    api.append_empty(3);
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[
            ("CUSTODY_TRON_API_URLS", api.url()),
            ("CUSTODY_BSC_RPC_URLS", anvil.url().as_str()),
        ],
    );
    custody.edit_config(
        &format!("genesis_block_id = \"{MAINNET_GENESIS}\""),
        &format!("genesis_block_id = \"{}\"", api.genesis_block_id()),
    );
    custody.edit_config("poll_interval_ms = 3000", "poll_interval_ms = 100");
    custody.edit_config("poll_interval_ms = 1000", "poll_interval_ms = 100");
    let ops = custody.credential("ops", &["--admin"]);
    custody.start();
    let admin = custody.client(&ops);
    let rows = custody.wait_for(30, "both endpoints checked", || {
        let data = admin.get("/v1/admin/rpcs").json()["data"]
            .as_array()?
            .clone();
        let verified = data.len() == 2
            && data
                .iter()
                .all(|n| n["endpoints"][0]["identity_verified"] == true);
        verified.then_some(data)
    });
    let keys = |row: &serde_json::Value| {
        let mut k: Vec<String> = row["endpoints"][0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(&rows[0]), keys(&rows[1]));
    let identity = |network: &str| {
        rows.iter().find(|r| r["network"] == network).unwrap()["endpoints"][0]["identity"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(identity("BSC"), "chain_id 56");
    assert_eq!(
        identity("TRON"),
        format!("genesis {}", api.genesis_block_id())
    );
    let dash = admin.get("/v1/admin/dashboard").json();
    for chain in dash["chains"].as_array().unwrap() {
        assert_eq!(
            keys(&serde_json::json!({ "endpoints": chain["rpc_health"] })),
            keys(&rows[0])
        );
    }
    custody.stop();
}
