//! BNB withdrawals end to end: `custody serve` quoting from a real EVM node (anvil), holding
//! the total, paying from the hot wallet through the outgoing-transaction engine, and
//! following the transaction to its confirmation depth.

use custody_e2e::anvil::Anvil;
use custody_e2e::receiver::set_config;
use custody_e2e::{totp, Custody};
use serde_json::{json, Value};

const ETH: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000D5";

#[test]
fn a_bnb_withdrawal_is_quoted_reserved_sent_and_confirmed_once() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    set_config(&custody.data_dir(), "bsc", "poll_interval_ms", "100");
    set_config(
        &custody.data_dir(),
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin"]);
    // Fund the hot wallet on chain and the user on the ledger.
    let hot = custody.hot_wallet("BSC");
    let funder = anvil.account(0).to_owned();
    anvil.send_value(&funder, &hot, 5 * ETH);
    custody.start();
    let client = custody.client(&cred);
    client.wallet("alice", "BSC");
    custody.adjust("acme", "alice", "BSC", "BNB", true, &(2 * ETH).to_string());

    // Refusals of the quote.
    let bad = |dest: &str, code: &str| {
        let r = client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": dest, "amount_units": "1000" }),
            None,
        );
        assert_eq!((r.status, r.code()), (422, code.to_owned()), "{dest}");
    };
    bad(
        "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy",
        "CROSS_CHAIN_NOT_SUPPORTED",
    );
    bad("0x12345", "INVALID_ADDRESS");
    bad(
        "0x00000000000000000000000000000000000000d5D5",
        "INVALID_ADDRESS",
    );

    let quote = client.post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                 "destination_address": DESTINATION, "amount_units": (ETH / 10).to_string() }),
        None,
    );
    assert_eq!(quote.status, 201, "{:?}", quote.json());
    let q = quote.json();
    assert_eq!(q["amount_units"], (ETH / 10).to_string());
    let total: u128 = q["costs"]["total_debited_units"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let parts: u128 = [
        "network_cost_units",
        "markup_units",
        "service_fee_units",
        "spread_units",
    ]
    .iter()
    .map(|k| q["costs"][k].as_str().unwrap().parse::<u128>().unwrap())
    .sum();
    assert_eq!(total, ETH / 10 + parts);
    assert!(parts > 0, "the network cost is priced from the node");

    let body = json!({ "quote_id": q["id"] });
    let created = client.post("/v1/withdrawals", &body, Some("withdraw-0001"));
    assert_eq!(created.status, 201, "{:?}", created.json());
    let w = created.json();
    assert_eq!(w["status"], "reserved");
    assert_eq!(
        client.available(&client.wallet("alice", "BSC"), "BNB"),
        2 * ETH - total
    );
    // The same key replays; the quote cannot be used again.
    let replay = client.post("/v1/withdrawals", &body, Some("withdraw-0001"));
    assert_eq!(replay.status, 201);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.json(), w);
    let again = client.post("/v1/withdrawals", &body, Some("withdraw-0002"));
    assert_eq!(
        (again.status, again.code()),
        (409, "QUOTE_ALREADY_USED".to_owned())
    );

    let id = w["id"].as_str().unwrap().to_owned();
    let admin = custody.client(&ops);
    let sent = custody.wait_for(30, "broadcasted", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "broadcasted").then_some(v)
    });
    let hash = sent["tx_hash"].as_str().unwrap().to_owned();
    assert!(hash.starts_with("0x") && hash.len() == 66, "{hash}");
    anvil.mine(16);
    let done: Value = custody.wait_for(60, "confirmed", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "confirmed").then_some(v)
    });
    assert_eq!(anvil.balance(DESTINATION), ETH / 10, "paid exactly once");
    let receipt = anvil.mined(&hash);
    assert_eq!(receipt["status"], "0x1");
    let steps: Vec<_> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps, ["reserved", "broadcasted", "confirmed"]);
    assert!(
        done["actual_network_cost_units"]
            .as_str()
            .unwrap()
            .parse::<u128>()
            .unwrap()
            > 0
    );
    let wallet = client.wallet("alice", "BSC");
    let balance = client.ledger_balance(wallet["id"].as_str().unwrap(), "BNB");
    assert_eq!(balance["available_units"], (2 * ETH - total).to_string());
    assert_eq!(balance["reserved_units"], "0");
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");

    // The operator's views: every tenant's withdrawals, and the hot wallet after paying.
    let listed = admin.get("/v1/admin/withdrawals?limit=10");
    assert_eq!(listed.status, 200);
    let listed = listed.json();
    assert_eq!(listed["has_more"], false);
    let row = &listed["data"][0];
    assert_eq!(row["id"], id.as_str());
    assert_eq!(row["tenant"], "acme");
    assert_eq!(row["status"], "confirmed");
    assert_eq!(row["tx_hash"], hash.as_str());
    assert_eq!(
        client.get("/v1/admin/withdrawals").status,
        403,
        "a partner's credential is not an operator's"
    );
    let treasuries = admin.get("/v1/admin/treasuries").json();
    let bsc = treasuries["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["network"] == "BSC")
        .unwrap()
        .clone();
    assert_eq!(bsc["address"], hot.as_str());
    assert_eq!(bsc["next_nonce"], 1, "one transaction sent");
    let bnb = |rows: &Value| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|b| b["asset"] == "BNB")
            .unwrap()
            .clone()
    };
    let paid_fee: u128 = done["actual_network_cost_units"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        bnb(&bsc["balances"])["units"],
        (5 * ETH - ETH / 10 - paid_fee).to_string(),
        "read from the node"
    );
    assert_eq!(
        bnb(&bsc["pending_outgoing"])["units"],
        "0",
        "nothing on its way"
    );
    custody.stop();
}

#[test]
fn a_retried_withdrawal_replays_without_reusing_its_one_time_code() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    let cred = custody.credential(
        "acme",
        &["--rate-limit", "100000", "--pin", "2468", "--totp"],
    );
    custody.start();
    let client = custody.client(&cred);
    client.wallet("alice", "BSC");
    custody.adjust("acme", "alice", "BSC", "BNB", true, &ETH.to_string());
    let quote = client.post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                 "destination_address": DESTINATION, "amount_units": (ETH / 100).to_string() }),
        None,
    );
    assert_eq!(quote.status, 201, "{:?}", quote.json());
    let q = quote.json();
    let code = totp(
        cred.json["totp_secret"].as_str().unwrap(),
        custody_e2e::now_s(),
    );
    let send = |otp: Option<&str>| {
        let bytes = serde_json::to_vec(&json!({ "quote_id": q["id"] })).unwrap();
        let mut s = client.signed("POST", "/v1/withdrawals", &bytes, Some("withdraw-totp-1"));
        s.extra_headers
            .push(("X-Service-Pin".into(), "2468".into()));
        if let Some(o) = otp {
            s.extra_headers.push(("X-Service-OTP".into(), o.into()));
        }
        client.send(&s)
    };
    // Without the code: refused, nothing executed, the key stays free.
    assert_eq!(send(None).code(), "OTP_REQUIRED");
    // Without an Idempotency-Key: refused before the code is looked at, so it stays usable.
    let bytes = serde_json::to_vec(&json!({ "quote_id": q["id"] })).unwrap();
    let mut keyless = client.signed("POST", "/v1/withdrawals", &bytes, None);
    keyless
        .extra_headers
        .push(("X-Service-Pin".into(), "2468".into()));
    keyless
        .extra_headers
        .push(("X-Service-OTP".into(), code.clone()));
    let refused = client.send(&keyless);
    assert_eq!(refused.status, 422, "{:?}", refused.json());
    let first = send(Some(&code));
    assert_eq!(first.status, 201, "{:?}", first.json());
    // The answer was lost: the client retries exactly, code and all.
    let retry = send(Some(&code));
    assert_eq!(retry.status, 201, "{:?}", retry.json());
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(retry.json(), first.json());
    custody.stop();
}

#[test]
fn a_withdrawal_the_hot_wallet_cannot_fund_waits_reserved_with_an_alert_then_goes_out() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    set_config(&custody.data_dir(), "bsc", "poll_interval_ms", "100");
    set_config(
        &custody.data_dir(),
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin"]);
    let hot = custody.hot_wallet("BSC");
    custody.start();
    let client = custody.client(&cred);
    let admin = custody.client(&ops);
    client.wallet("alice", "BSC");
    custody.adjust("acme", "alice", "BSC", "BNB", true, &ETH.to_string());
    let q = client
        .post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": DESTINATION, "amount_units": (ETH / 10).to_string() }),
            None,
        )
        .json();
    let w = client
        .post(
            "/v1/withdrawals",
            &json!({ "quote_id": q["id"] }),
            Some("short-0001"),
        )
        .json();
    let id = w["id"].as_str().unwrap().to_owned();

    // The hot wallet holds nothing: an alert, and the withdrawal stays reserved.
    let alert = custody.wait_for(30, "a hot_wallet_insufficient alert", || {
        let alerts = admin.get("/v1/admin/alerts?limit=50").json();
        alerts["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["kind"] == "hot_wallet_insufficient")
            .cloned()
    });
    assert_eq!(alert["reference_id"], id.as_str(), "{alert}");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let waiting = client.get(&format!("/v1/withdrawals/{id}")).json();
    assert_eq!(waiting["status"], "reserved");
    assert!(waiting["tx_hash"].is_null());
    assert_eq!(anvil.balance(DESTINATION), 0);

    // Funded: it goes out by itself and is paid once.
    let funder = anvil.account(0).to_owned();
    anvil.send_value(&funder, &hot, ETH);
    custody.wait_for(60, "broadcasted", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "broadcasted").then_some(())
    });
    anvil.mine(16);
    custody.wait_for(60, "confirmed", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "confirmed").then_some(())
    });
    assert_eq!(anvil.balance(DESTINATION), ETH / 10);
    let alerts = admin.get("/v1/admin/alerts?limit=50").json();
    let raised = alerts["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "hot_wallet_insufficient")
        .count();
    assert_eq!(raised, 1, "one alert for the wait");
    custody.stop();
}

/// BNB to a contract (a Safe, an exchange's deposit contract): quoted and sent with the node's
/// gas estimate, since 21,000 gas would fail on chain and burn the house's gas; a contract that
/// reverts on BNB is refused at the quote (422), and nothing is reserved or sent.
#[test]
fn a_bnb_withdrawal_to_a_contract_is_priced_by_its_code_and_a_refusing_one_is_refused() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    set_config(&custody.data_dir(), "bsc", "poll_interval_ms", "100");
    set_config(
        &custody.data_dir(),
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    let funder = anvil.account(0).to_owned();
    anvil.send_value(&funder, &hot, 5 * ETH);
    // A receiver that stores what it is sent (CALLVALUE PUSH1 0 SSTORE STOP), and a token
    // contract, which has no payable fallback.
    let receiver = "0x00000000000000000000000000000000000000C1";
    anvil.rpc("anvil_setCode", json!([receiver, "0x3460005500"]));
    let token = anvil.deploy_token(&funder, "Token", "TKN");
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "BSC");
    custody.adjust("acme", "alice", "BSC", "BNB", true, &(2 * ETH).to_string());
    let quote = |dest: &str| {
        client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": dest, "amount_units": (ETH / 10).to_string() }),
            None,
        )
    };
    let refused = quote(&token);
    assert_eq!(
        (refused.status, refused.code()),
        (422, "VALIDATION_FAILED".to_owned()),
        "{:?}",
        refused.json()
    );
    assert_eq!(refused.json()["details"][0]["field"], "destination");
    let units = |v: &Value| v.as_str().unwrap().parse::<u128>().unwrap();
    let plain = quote(DESTINATION).json();
    let q = quote(receiver);
    assert_eq!(q.status, 201, "{:?}", q.json());
    let q = q.json();
    assert!(
        units(&q["costs"]["network_cost_units"]) > 2 * units(&plain["costs"]["network_cost_units"]),
        "priced from the node's estimate of the contract's code: {q} against {plain}"
    );
    let total = units(&q["costs"]["total_debited_units"]);
    let created = client.post(
        "/v1/withdrawals",
        &json!({ "quote_id": q["id"] }),
        Some("withdraw-contract-1"),
    );
    assert_eq!(created.status, 201, "{:?}", created.json());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    custody.wait_for(30, "broadcasted", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "broadcasted").then_some(v)
    });
    anvil.mine(16);
    let done: Value = custody.wait_for(60, "confirmed", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "confirmed").then_some(v)
    });
    assert_eq!(
        anvil.receipt(done["tx_hash"].as_str().unwrap()).unwrap()["status"],
        "0x1"
    );
    // Every party, every asset.
    assert_eq!(anvil.balance(receiver), ETH / 10, "paid exactly once");
    assert_eq!(anvil.token_balance(&token, receiver), 0);
    let fee = units(&done["actual_network_cost_units"]);
    assert!(fee > 21_000, "more than a plain transfer's gas was used");
    assert_eq!(anvil.balance(&hot), 5 * ETH - ETH / 10 - fee);
    for (asset, figures) in client.all_balances(&alice) {
        let held = if asset == "BNB" { 2 * ETH - total } else { 0 };
        assert_eq!(figures, [held, 0, 0], "alice's {asset}");
    }
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}
