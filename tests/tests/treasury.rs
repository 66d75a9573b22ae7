//! `custody treasury show`: the hot wallets of decisions §11, derived from the seed at the
//! account index no tenant gets, with their on-chain balances.

use custody_e2e::anvil::Anvil;
use custody_e2e::receiver::set_config;
use custody_e2e::{oracle_address, Custody, TEST_MNEMONIC};

const HOT_ACCOUNT: u32 = 2_147_483_647;

#[test]
fn the_hot_wallets_are_shown_with_their_balances() {
    let Some(anvil) = Anvil::start() else { return };
    let custody = Custody::init_with_test_mnemonic();
    set_config(
        &custody.data_dir(),
        "bsc",
        "urls",
        &format!("[\"{}\"]", anvil.url()),
    );
    let bsc = oracle_address(TEST_MNEMONIC, "BSC", HOT_ACCOUNT, 0);
    let tron = oracle_address(TEST_MNEMONIC, "TRON", HOT_ACCOUNT, 0);
    let funder = anvil.account(0).to_owned();
    anvil.send_value(&funder, &bsc, 7_000_000_000_000_000_000);

    let shown = custody.cli_ok(&["treasury", "show"]);
    let rows = shown["data"].as_array().unwrap();
    let row = |network: &str| {
        rows.iter()
            .find(|r| r["network"] == network)
            .unwrap()
            .clone()
    };
    let b = row("BSC");
    assert_eq!(b["address"], bsc.as_str());
    assert_eq!(b["derivation_path"], "m/44'/60'/2147483647'/0/0");
    let bnb = b["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["asset"] == "BNB")
        .unwrap()
        .clone();
    assert_eq!(bnb["units"], "7000000000000000000");
    assert!(bnb["block_number"].as_u64().unwrap() > 0);
    assert!(b["next_nonce"].is_null(), "nothing sent yet");

    let t = row("TRON");
    assert_eq!(t["address"], tron.as_str());
    assert_eq!(t["derivation_path"], "m/44'/195'/2147483647'/0/0");
    for balance in t["balances"].as_array().unwrap() {
        assert!(balance["units"].is_null());
        assert!(balance["error"]
            .as_str()
            .unwrap()
            .contains("no [tron] endpoint"));
    }
}

/// TRX the hot wallet staked (Stake 2.0: for energy to lend to sweeps, delegated or
/// unstaking) is the house's: the TREASURY reconciliation counts it with the liquid balance,
/// and the treasury view shows it apart as staked. Read from the TRON test server's
/// `getaccount` (`frozenV2`, `account_resource.delegated_frozenV2_balance_for_energy`,
/// `unfrozenV2`).
#[test]
fn staked_trx_of_the_hot_wallet_counts_in_the_treasury() {
    use custody_e2e::tron_api::{BlockSpec, TronApi, TxSpec};
    use serde_json::json;
    const SUN: i64 = 1_000_000;
    const SENDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";
    const MAINNET_GENESIS: &str =
        "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";
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
    set_config(&dir, "reconciliation", "ledger_every_ms", "0");
    set_config(&dir, "reconciliation", "treasury_every_ms", "0");
    set_config(&dir, "reconciliation", "claim_interval_ms", "100");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("TRON");
    custody.start();
    let client = custody.client(&cred);
    let admin = custody.client(&ops);
    let a = client.wallet("alice", "TRON")["address"]
        .as_str()
        .unwrap()
        .to_owned();
    api.append(BlockSpec::new().tx(TxSpec::trx(SENDER, &a, 1_000 * SUN)));
    api.set_trx_balance(&a, 1_000 * SUN);
    api.append_empty(19);
    custody.wait_for(60, "the deposit credited", || {
        (client.deposits("?status=credited").len() == 1).then_some(())
    });
    // The 1,000 TRX owed to alice moved to the hot wallet, which staked most of it: 100 TRX
    // liquid, 800 staked for energy (300 of it delegated to the deposit address), 100
    // unstaking.
    api.set_trx_balance(&a, 0);
    api.set_trx_balance(&hot, 100 * SUN);
    api.set_energy_stake(&hot, 800 * SUN);
    api.set_unstaking(&hot, 100 * SUN);
    api.set_delegation(&hot, &a, 300 * SUN);

    let r = admin.post("/v1/admin/reconcile", &json!({ "scope": "TREASURY" }), None);
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let run = custody.wait_for(30, "the TREASURY run", || {
        let list = admin.get("/v1/admin/reconciliations").json();
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["id"] == id.as_str())
            .filter(|row| row["status"] == "completed" || row["status"] == "failed")
            .cloned()
    });
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["balanced"], true, "staked TRX is no shortfall: {run}");

    let rows = admin.get("/v1/admin/treasuries").json();
    let tron = rows["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["network"] == "TRON")
        .unwrap()
        .clone();
    let trx = tron["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["asset"] == "TRX")
        .unwrap()
        .clone();
    assert_eq!(trx["units"], (1_000 * SUN).to_string(), "{trx}");
    assert_eq!(trx["staked_units"], (900 * SUN).to_string(), "{trx}");
    custody.stop();
}
