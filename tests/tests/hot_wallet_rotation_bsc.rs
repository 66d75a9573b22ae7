//! Rotating the BSC hot wallet away from a compromised seed end to end on anvil (issue 31, F4):
//! a new seed imported, `custody treasury rotate` gives the network a hot wallet under it and
//! drains the old one into it (the token first, then the BNB), paying only the drain's fees;
//! after the restart a withdrawal goes out from the new hot wallet, a deposit is swept into
//! it, and the books moved only by network fees where the drain is concerned.

use custody_e2e::anvil::Anvil;
use custody_e2e::dex::{Dex, USDT};
use custody_e2e::receiver::set_config;
use custody_e2e::{Cred, Custody};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;
/// A BIP39 test vector (trezor/python-mnemonic `vectors.json`), not the service's seed.
const NEW_MNEMONIC: &str =
    "letter advice cage absurd amount doctor acoustic avoid letter advice cage above";
const DESTINATION: &str = "0x00000000000000000000000000000000000000D9";

use custody_e2e::admin_rows as admin;

use custody_e2e::private_file as temp_file;

fn units(v: &Value) -> u128 {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn a_rotated_hot_wallet_is_drained_into_the_new_one_which_then_pays_and_receives() {
    let Some(anvil) = Anvil::start() else { return };
    let dex = Dex::deploy(&anvil);
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", &anvil.url())],
    );
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "bsc.sending", "rebroadcast_after_ms", "1000");
    set_config(&dir, "sweeps", "interval_ms", "200");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let old_hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &old_hot, 5 * E18);
    dex.deal(USDT, &old_hot, 300 * E18);
    custody.start();
    let client = custody.client(&cred);
    client.wallet("alice", "BSC");
    custody.stop();

    // Refused before any new seed: there is nowhere safer to go.
    let (ok, _, err) = custody.cli(&["treasury", "rotate", "--network", "BSC", "--reason", "r"]);
    assert!(!ok, "{err}");
    let seed = temp_file(NEW_MNEMONIC);
    let (ok, _, err) = custody.cli(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--network",
        "BSC",
        "--reason",
        "seed compromised",
        "--mnemonic-file",
        seed.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let _ = std::fs::remove_file(&seed);
    let books_before = {
        custody.start();
        let b = custody.client(&ops).ledger_books();
        custody.stop();
        b
    };
    let rotated = custody.cli_ok(&[
        "treasury",
        "rotate",
        "--network",
        "BSC",
        "--reason",
        "seed compromised",
    ]);
    let shown = custody.cli_ok(&["treasury", "show"]);
    let bsc: Vec<&Value> = shown["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["network"] == "BSC")
        .collect();
    assert_eq!(bsc.len(), 2, "{shown}");
    let new_hot = bsc
        .iter()
        .find(|r| r["status"] == "active")
        .unwrap_or_else(|| panic!("{shown} after {rotated}"))["address"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_hot, old_hot);
    assert!(bsc
        .iter()
        .any(|r| r["status"] == "retired" && r["address"] == old_hot.as_str()));

    // The restarted service drains the old hot wallet into the new one.
    custody.start();
    let drains = custody.wait_for(120, "the drain confirmed", || {
        anvil.mine(1);
        let fundings: Vec<Value> = admin(&custody, &ops, "treasury-fundings")
            .into_iter()
            .filter(|f| f["kind"] == "hot_wallet_drain")
            .collect();
        (fundings.len() == 2 && fundings.iter().all(|f| f["status"] == "confirmed"))
            .then_some(fundings)
    });
    let fee_of = |asset: &str| {
        drains
            .iter()
            .find(|f| f["asset"] == asset)
            .map(|f| units(&f["network_cost_units"]))
            .unwrap()
    };
    let drain_fees = drains
        .iter()
        .map(|f| units(&f["network_cost_units"]))
        .sum::<u128>();
    assert!(fee_of("BNB") > 0 && fee_of("USDT") > 0);
    assert_eq!(anvil.token_balance(USDT, &old_hot), 0);
    assert_eq!(anvil.token_balance(USDT, &new_hot), 300 * E18);
    let drained_bnb = drains
        .iter()
        .find(|f| f["asset"] == "BNB")
        .map(|f| units(&f["amount_units"]))
        .unwrap();
    assert_eq!(anvil.balance(&new_hot), drained_bnb);
    assert_eq!(
        anvil.balance(&old_hot) + anvil.balance(&new_hot) + drain_fees,
        5 * E18,
        "the BNB moved whole but for the drain's fees"
    );
    assert!(anvil.balance(&old_hot) < E18 / 100, "little left behind");
    // Only network fees moved the books (and the treasury that paid them).
    let books = custody.client(&ops).ledger_books();
    let fees_key = "system:network_fees:BSC:BNB";
    for (k, v) in &books {
        let before = books_before.get(k).copied().unwrap_or(0);
        if k == fees_key {
            assert_eq!(before - v, i128::try_from(drain_fees).unwrap());
        } else if k == "system:treasury:BSC:BNB" {
            assert_eq!(v - before, i128::try_from(drain_fees).unwrap());
        } else {
            assert_eq!(*v, before, "{k}");
        }
    }

    // A withdrawal goes out from the new hot wallet.
    custody.adjust("acme", "alice", "BSC", "BNB", true, &E18.to_string());
    let q = client_of(&custody, &cred).post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                 "destination_address": DESTINATION, "amount_units": (E18 / 10).to_string() }),
        None,
    );
    assert_eq!(q.status, 201, "{:?}", q.json());
    let w = client_of(&custody, &cred).post(
        "/v1/withdrawals",
        &json!({ "quote_id": q.json()["id"] }),
        Some("after-rotation-1"),
    );
    assert_eq!(w.status, 201, "{:?}", w.json());
    let wid = w.json()["id"].as_str().unwrap().to_owned();
    let done = custody.wait_for(60, "the withdrawal confirmed", || {
        anvil.mine(1);
        let v = client_of(&custody, &cred)
            .get(&format!("/v1/withdrawals/{wid}"))
            .json();
        (v["status"] == "confirmed").then_some(v)
    });
    let tx = anvil.rpc("eth_getTransactionByHash", json!([done["tx_hash"]]));
    assert!(tx["from"].as_str().unwrap().eq_ignore_ascii_case(&new_hot));
    assert_eq!(anvil.balance(DESTINATION), E18 / 10);

    // A deposit is swept into the new hot wallet.
    let alice = client_of(&custody, &cred).wallet("alice", "BSC");
    let address = alice["address"].as_str().unwrap().to_owned();
    anvil.send_value(anvil.account(1), &address, 2 * E18);
    let swept = custody.wait_for(90, "the deposit swept", || {
        anvil.mine(1);
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == address.as_str() && s["status"] == "confirmed")
    });
    assert!(
        swept["to_address"]
            .as_str()
            .or(swept["to"].as_str())
            .unwrap_or_default()
            .eq_ignore_ascii_case(&new_hot),
        "{swept}"
    );

    // Money that reaches the retired wallet later (a sweep planned before the rotation, a
    // payer with an old address) is drained by `custody treasury drain`, beside the service.
    // Mined before the balances are read: anvil answers before it seals the block.
    anvil.mined(&anvil.send_value(anvil.account(2), &old_hot, E18));
    let (old_before, new_before) = (anvil.balance(&old_hot), anvil.balance(&new_hot));
    let books_before = custody.client(&ops).ledger_books();
    let drained = custody.cli_ok(&[
        "treasury",
        "drain",
        "--network",
        "BSC",
        "--reason",
        "late arrivals",
    ]);
    let planned = &drained["retired"][0]["drain"];
    assert_eq!(planned.as_array().map(Vec::len), Some(1), "{drained}");
    assert_eq!(planned[0]["asset"], "BNB", "{drained}");
    let late_id = planned[0]["id"].as_str().unwrap().to_owned();
    let late = custody.wait_for(90, "the late drain confirmed", || {
        anvil.mine(1);
        admin(&custody, &ops, "treasury-fundings")
            .into_iter()
            .find(|f| f["id"] == late_id.as_str() && f["status"] == "confirmed")
    });
    let (amount, fee) = (
        units(&late["amount_units"]),
        units(&late["network_cost_units"]),
    );
    assert!(amount > E18 * 9 / 10, "{late}");
    assert_eq!(anvil.balance(&new_hot), new_before + amount);
    assert_eq!(anvil.balance(&old_hot), old_before - amount - fee);
    let books = custody.client(&ops).ledger_books();
    for (k, v) in &books {
        let before = books_before.get(k).copied().unwrap_or(0);
        match k.as_str() {
            "system:network_fees:BSC:BNB" => {
                assert_eq!(before - v, i128::try_from(fee).unwrap())
            }
            "system:treasury:BSC:BNB" => assert_eq!(v - before, i128::try_from(fee).unwrap()),
            _ => assert_eq!(*v, before, "{k}"),
        }
    }
    let audit = admin(&custody, &ops, "audit");
    assert!(
        audit.iter().any(|a| a["action"] == "treasury.drain"),
        "audited"
    );
    // Nothing left to move: nothing planned, and why.
    let again = custody.cli_ok(&["treasury", "drain", "--network", "BSC", "--reason", "again"]);
    assert_eq!(again["retired"][0]["drain"], json!([]), "{again}");
    assert!(!again["retired"][0]["left"].as_array().unwrap().is_empty());

    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}

fn client_of(custody: &Custody, cred: &Cred) -> custody_e2e::Client {
    custody.client(cred)
}
