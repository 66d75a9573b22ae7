//! An operator's way out for a payment that can never proceed (issue 31, F10), end to end on
//! anvil: a BNB withdrawal whose transaction sits in the node's pool is cancelled through
//! `POST /v1/admin/outgoing/{id}/cancel` (named by the withdrawal's id); the service voids its
//! nonce with a 0-value self-transfer that outbids it, the withdrawal fails and its hold is
//! released, the hot wallet pays only the void's gas, and the next withdrawal goes out at the
//! next nonce.

use custody_e2e::anvil::{hex_u64, Anvil};
use custody_e2e::receiver::set_config;
use custody_e2e::Custody;
use serde_json::{json, Value};

const ETH: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000D7";

fn units(v: &Value) -> u128 {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn a_stuck_withdrawal_is_cancelled_its_nonce_voided_and_its_hold_released() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "bsc.sending", "lease_ms", "3000");
    set_config(&dir, "bsc.sending", "rebroadcast_after_ms", "1000");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, 5 * ETH);
    custody.start();
    let client = custody.client(&cred);
    let admin = custody.client(&ops);
    let alice = client.wallet("alice", "BSC");
    custody.adjust("acme", "alice", "BSC", "BNB", true, &(2 * ETH).to_string());
    let withdraw = |key: &str| {
        let q = client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": DESTINATION, "amount_units": (ETH / 10).to_string() }),
            None,
        );
        assert_eq!(q.status, 201, "{:?}", q.json());
        let w = client.post(
            "/v1/withdrawals",
            &json!({ "quote_id": q.json()["id"] }),
            Some(key),
        );
        assert_eq!(w.status, 201, "{:?}", w.json());
        w.json()["id"].as_str().unwrap().to_owned()
    };
    let status_of = |id: &str| client.get(&format!("/v1/withdrawals/{id}")).json();

    // The node stops mining: the withdrawal's transaction waits in its pool.
    anvil.set_automine(false);
    let id = withdraw("stuck-withdrawal-1");
    custody.wait_for(30, "broadcasted", || {
        (status_of(&id)["status"] == "broadcasted").then_some(())
    });
    let hot_before = anvil.balance(&hot);
    let books_before = admin.ledger_books();

    let cancel = |target: &str| {
        admin.post(
            &format!("/v1/admin/outgoing/{target}/cancel"),
            &json!({ "reason": "stuck in the pool for hours" }),
            None,
        )
    };
    let r = cancel(&id);
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["cancel_requested"], true);
    assert_eq!(r.json()["purpose"], "withdrawal");
    assert_eq!(cancel(&id).status, 200, "asking again changes nothing");
    let unknown = cancel("00000000-0000-4000-8000-000000000000");
    assert_eq!(
        (unknown.status, unknown.code()),
        (404, "NOT_FOUND".to_owned())
    );

    // The void replaces it in the pool: a 0-value transfer of the hot wallet to itself at
    // nonce 0; mined and final, the withdrawal fails.
    custody.wait_for(30, "the void in the node's pool", || {
        let pool = anvil.rpc("txpool_content", json!([]));
        let pending = &pool["pending"];
        let at_zero = pending
            .as_object()?
            .iter()
            .find(|(from, _)| from.eq_ignore_ascii_case(&hot))?
            .1
            .get("0")?
            .clone();
        (at_zero["value"] == "0x0" && at_zero["to"].as_str()?.eq_ignore_ascii_case(&hot))
            .then_some(())
    });
    let failed = custody.wait_for(90, "the withdrawal failed", || {
        anvil.mine(1);
        let v = status_of(&id);
        (v["status"] == "failed").then_some(v)
    });
    assert!(failed["failure_reason"].as_str().is_some(), "{failed}");
    assert_eq!(anvil.balance(DESTINATION), 0, "nothing paid");
    assert_eq!(
        hex_u64(&anvil.rpc("eth_getTransactionCount", json!([hot, "latest"]))),
        1,
        "nonce 0 used by the void"
    );
    let void_fee = hot_before - anvil.balance(&hot);
    assert!(
        void_fee > 0 && void_fee < ETH / 100,
        "only the void's gas: {void_fee}"
    );
    for (asset, figures) in client.all_balances(&alice) {
        let held = if asset == "BNB" { 2 * ETH } else { 0 };
        assert_eq!(
            figures,
            [held, 0, 0],
            "alice's {asset}: the hold released in full"
        );
    }
    let books = admin.ledger_books();
    let fees = |b: &std::collections::BTreeMap<String, i128>| {
        b.get("system:network_fees:BSC:BNB").copied().unwrap_or(0)
    };
    assert_eq!(
        fees(&books_before) - fees(&books),
        i128::try_from(void_fee).unwrap(),
        "the void's gas is the house's expense"
    );
    let again = cancel(&id);
    assert_eq!(
        (again.status, again.code()),
        (422, "VALIDATION_FAILED".to_owned()),
        "already failed"
    );
    let (ok, _, err) = custody.cli(&["outgoing", "cancel", &id, "--reason", "again"]);
    assert!(
        !ok && err.contains("already failed"),
        "the CLI says the same: {err}"
    );

    // The next withdrawal goes out at the next nonce.
    anvil.set_automine(true);
    let next = withdraw("after-cancel-1");
    custody.wait_for(30, "broadcasted", || {
        (status_of(&next)["status"] == "broadcasted").then_some(())
    });
    anvil.mine(16);
    let done = custody.wait_for(60, "confirmed", || {
        anvil.mine(1);
        let v = status_of(&next);
        (v["status"] == "confirmed").then_some(v)
    });
    assert_eq!(anvil.balance(DESTINATION), ETH / 10);
    let receipt = anvil.mined(done["tx_hash"].as_str().unwrap());
    let tx = anvil.rpc("eth_getTransactionByHash", json!([done["tx_hash"]]));
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(hex_u64(&tx["nonce"]), 1);
    assert_eq!(
        client.available(&alice, "BNB"),
        2 * ETH - units(&done["costs"]["total_debited_units"])
    );
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}
