//! A TRC20 sweep on the TRON API test server through `custody serve` (decisions §13): a USDT
//! deposit credited on an address that holds no TRX (its account does not even exist) is
//! swept to the hot wallet after a TRX treasury funding, and only once that funding is final;
//! the books follow the chain.

use custody_e2e::receiver::set_config;
use custody_e2e::tron_api::{BlockSpec, TronApi, TxSpec};
use custody_e2e::{Cred, Custody};
use serde_json::Value;

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const SENDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";
const SUN: i64 = 1_000_000;
const MAINNET_GENESIS: &str = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";

fn admin(custody: &Custody, ops: &Cred, resource: &str) -> Vec<Value> {
    let r = custody
        .client(ops)
        .get(&format!("/v1/admin/{resource}?limit=100"));
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()["data"].as_array().unwrap().clone()
}

#[test]
fn a_trc20_deposit_is_swept_after_a_final_trx_funding() {
    let api = TronApi::start();
    api.append_empty(30);
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_TRON_API_URLS", api.url())],
    );
    custody.edit_config(
        &format!("genesis_block_id = \"{MAINNET_GENESIS}\""),
        &format!("genesis_block_id = \"{}\"", api.genesis_block_id()),
    );
    let dir = custody.data_dir();
    set_config(&dir, "tron", "poll_interval_ms", "100");
    set_config(&dir, "tron", "start_block", &api.head().number.to_string());
    set_config(&dir, "tron.sending", "rebroadcast_after_ms", "1000");
    set_config(&dir, "tron.sending", "lease_ms", "3000");
    set_config(&dir, "sweeps", "interval_ms", "200");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("TRON");
    api.set_trx_balance(&hot, 1_000 * SUN);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let a = alice["address"].as_str().unwrap().to_owned();

    // 50 USDT arrive; the address has no TRX and no account.
    api.append(BlockSpec::new().tx(TxSpec::trc20(USDT, SENDER, &a, 50_000_000)));
    api.set_trc20_balance(USDT, &a, 50_000_000);
    assert_eq!(api.trx_balance(&a), None);
    api.append_empty(19);
    custody.wait_for(60, "credited", || {
        (client.deposits("?status=credited").len() == 1).then_some(())
    });

    let funding = custody.wait_for(60, "a TRX funding broadcast", || {
        admin(&custody, &ops, "treasury-fundings")
            .into_iter()
            .find(|f| f["address"] == a.as_str() && f["status"] == "broadcasted")
    });
    assert_eq!(funding["asset"], "TRX");
    let sweep = custody.wait_for(30, "a sweep waiting for its funding", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == a.as_str() && s["status"] == "funding")
    });
    assert_eq!(sweep["funding_id"], funding["id"]);
    assert_eq!(sweep["asset"], "USDT");
    // Included, not yet final: nothing leaves the address.
    api.produce_block();
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    let funded = api
        .trx_balance(&a)
        .expect("the funding created the account");
    assert!(funded > 0);
    assert_eq!(api.trc20_balance(USDT, &a), 50_000_000);
    assert!(
        api.pool().is_empty(),
        "no sweep before the funding is final"
    );
    api.append_empty(18);
    custody.wait_for(60, "the sweep sent", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "broadcasted")
    });
    api.produce_block();
    api.append_empty(18);
    let done = custody.wait_for(60, "the sweep confirmed", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "confirmed")
    });
    let funding = admin(&custody, &ops, "treasury-fundings")
        .into_iter()
        .find(|f| f["id"] == funding["id"])
        .unwrap();
    assert_eq!(funding["status"], "confirmed");
    assert!(
        done["block_number"].as_u64().unwrap() >= funding["block_number"].as_u64().unwrap() + 19,
        "the sweep was built only after the funding was final: {funding} {done}"
    );
    // TRON ids are bare hex (decisions §10).
    assert!(!done["tx_hash"].as_str().unwrap().starts_with("0x"));
    assert_eq!(api.trc20_balance(USDT, &a), 0);
    assert_eq!(api.trc20_balance(USDT, &hot), 50_000_000);
    assert_eq!(
        client.available(&alice, "USDT"),
        50_000_000,
        "users' balances never move"
    );
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}
