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
