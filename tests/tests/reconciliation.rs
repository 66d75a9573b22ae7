//! Reconciliation through `custody serve` on anvil: `POST /v1/admin/reconcile` for both
//! scopes, results in `/v1/admin/reconciliations`; a TREASURY shortfall made on purpose (funds
//! moved away on the node) raises a critical alert and stops BNB withdrawals until an operator
//! turns the automatic control off (audited).

use custody_e2e::anvil::Anvil;
use custody_e2e::receiver::set_config;
use custody_e2e::{Client, Custody};
use serde_json::{json, Value};

const ETH: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000D5";

/// Schedules a run of `scope` and waits for it to finish; the finished row.
fn reconcile(custody: &Custody, admin: &Client, scope: &str) -> Value {
    let r = admin.post("/v1/admin/reconcile", &json!({ "scope": scope }), None);
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let scheduled = r.json();
    assert_eq!(scheduled["scope"], scope);
    assert_eq!(scheduled["status"], "scheduled");
    assert_eq!(scheduled.as_object().unwrap().len(), 3, "{scheduled}");
    let id = scheduled["id"].as_str().unwrap().to_owned();
    custody.wait_for(30, &format!("{scope} run {id}"), || {
        let list = admin.get("/v1/admin/reconciliations").json();
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["id"] == id.as_str())
            .filter(|row| row["status"] == "completed" || row["status"] == "failed")
            .cloned()
    })
}

fn quote_bnb(client: &Client) -> custody_e2e::Resp {
    client.post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                 "destination_address": DESTINATION, "amount_units": (ETH / 10).to_string() }),
        None,
    )
}

#[test]
fn a_treasury_shortfall_stops_bnb_withdrawals_until_an_operator_lifts_it() {
    let Some(anvil) = Anvil::start() else { return };
    let funder = anvil.account(0).to_owned();
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    // The catalog's tokens exist on this node too, so every BSC asset can be read.
    for mainnet in [
        "0x55d398326f99059fF775485246999027B3197955",
        "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d",
    ] {
        let local = anvil.deploy_token(&funder, "Token", "TKN");
        custody.edit_config(mainnet, &local);
    }
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    // Only the runs this test asks for.
    set_config(&dir, "reconciliation", "ledger_every_ms", "0");
    set_config(&dir, "reconciliation", "treasury_every_ms", "0");
    set_config(&dir, "reconciliation", "claim_interval_ms", "100");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    // The house's own BNB in the hot wallet.
    anvil.send_value(&funder, &hot, ETH / 10);
    custody.start();
    let client = custody.client(&cred);
    let admin = custody.client(&ops);

    // A BNB deposit, credited.
    let address = client.wallet("alice", "BSC")["address"]
        .as_str()
        .unwrap()
        .to_owned();
    anvil.send_value(&funder, &address, ETH);
    anvil.mine(16);
    custody.wait_for(60, "the deposit credited", || {
        let d = client.deposits("?external_user_id=alice");
        d.first().filter(|d| d["status"] == "credited").cloned()
    });

    // Bad requests: 422 before anything is scheduled.
    for body in [
        json!({ "scope": "BOTH" }),
        json!({ "scope": "ledger" }),
        json!({}),
        json!({ "scope": "LEDGER", "extra": 1 }),
    ] {
        let r = admin.post("/v1/admin/reconcile", &body, None);
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "{body}"
        );
    }
    let r = client.post("/v1/admin/reconcile", &json!({ "scope": "LEDGER" }), None);
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));

    let ledger = reconcile(&custody, &admin, "LEDGER");
    assert_eq!(ledger["status"], "completed", "{ledger}");
    assert_eq!(ledger["balanced"], true, "{ledger}");
    assert_eq!(ledger["discrepancies"], json!([]));
    assert!(ledger["requested_by"]
        .as_str()
        .unwrap()
        .starts_with("credential:"));

    let healthy = reconcile(&custody, &admin, "TREASURY");
    assert_eq!(healthy["status"], "completed", "{healthy}");
    assert_eq!(healthy["balanced"], true, "{healthy}");
    assert_eq!(quote_bnb(&client).status, 201);

    // Funds moved away on the node: the deposit address keeps 0.4 BNB of the 1 credited.
    anvil.rpc(
        "anvil_setBalance",
        json!([address, format!("0x{:x}", 4 * ETH / 10)]),
    );
    let short = reconcile(&custody, &admin, "TREASURY");
    assert_eq!(short["status"], "completed", "{short}");
    assert_eq!(short["balanced"], false, "{short}");
    let found = short["discrepancies"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{short}");
    let d = &found[0];
    assert_eq!(
        (d["network"].as_str(), d["asset"].as_str()),
        (Some("BSC"), Some("BNB"))
    );
    assert_eq!(d["hot_wallet_units"], (ETH / 10).to_string());
    assert_eq!(d["deposit_addresses_units"], (4 * ETH / 10).to_string());
    assert_eq!(d["holdings_units"], (5 * ETH / 10).to_string());
    assert_eq!(d["user_liabilities_units"], ETH.to_string());
    assert_eq!(d["shortfall_units"], (5 * ETH / 10).to_string());
    // Newest first.
    let list = admin.get("/v1/admin/reconciliations?limit=2").json();
    assert_eq!(list["data"][0]["id"], short["id"]);
    assert_eq!(list["data"][1]["id"], healthy["id"]);
    assert_eq!(list["has_more"], true);

    let alerts = admin.get("/v1/admin/alerts").json();
    let alert = alerts["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "treasury_shortfall")
        .expect("a treasury_shortfall alert")
        .clone();
    assert_eq!(alert["severity"], "critical");
    assert_eq!(alert["reference_id"], short["id"]);

    // BNB withdrawals stop.
    let refused = quote_bnb(&client);
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (503, "KILL_SWITCH_ACTIVE")
    );
    let dash = admin.get("/v1/admin/dashboard").json();
    let control = dash["controls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["control_key"] == "treasury_shortfall.BSC.BNB")
        .expect("the automatic control on the dashboard")
        .clone();
    assert_eq!(control["enabled"], true);
    assert_eq!(control["updated_by"], "system:reconciliation");
    let bnb = dash["assets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["network"] == "BSC" && a["asset"] == "BNB")
        .unwrap()
        .clone();
    assert_eq!(bnb["ledger_liabilities_units"], ETH.to_string());
    assert_eq!(bnb["onchain_treasury_units"], (5 * ETH / 10).to_string());
    assert_eq!(dash["reconciliations"]["TREASURY"]["id"], short["id"]);
    assert_eq!(dash["reconciliations"]["LEDGER"]["id"], ledger["id"]);

    // Only shortfall keys of catalog assets are accepted.
    let r = admin.post(
        "/v1/admin/controls",
        &json!({ "control_key": "treasury_shortfall.BSC.DOGE", "enabled": false, "reason": "x" }),
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (422, "UNSUPPORTED_ASSET"));
    // The operator turns it off.
    let off = admin.post(
        "/v1/admin/controls",
        &json!({ "control_key": "treasury_shortfall.BSC.BNB", "enabled": false,
                 "reason": "funds restored from cold storage" }),
        None,
    );
    assert_eq!(off.status, 200, "{}", String::from_utf8_lossy(&off.body));
    let audit = admin.get("/v1/admin/audit").json();
    let rows: Vec<_> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["target"] == "treasury_shortfall.BSC.BNB")
        .cloned()
        .collect();
    assert_eq!(rows.len(), 2, "{audit}");
    assert!(rows[0]["actor"]
        .as_str()
        .unwrap()
        .starts_with("credential:"));
    assert_eq!(rows[0]["old_value"], json!({ "enabled": true }));
    assert_eq!(rows[0]["new_value"], json!({ "enabled": false }));
    assert_eq!(rows[0]["reason"], "funds restored from cold storage");
    assert_eq!(rows[1]["actor"], "system:reconciliation");
    assert!(rows[1]["reason"].as_str().unwrap().contains("short by"));
    assert_eq!(quote_bnb(&client).status, 201, "quotes work again");

    // The treasury view shows the same figures per asset.
    let treasuries = admin.get("/v1/admin/treasuries").json();
    let bsc = treasuries["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["network"] == "BSC")
        .unwrap()
        .clone();
    let figures = bsc["assets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["asset"] == "BNB")
        .unwrap()
        .clone();
    assert_eq!(
        figures["deposit_addresses_units"],
        (4 * ETH / 10).to_string()
    );
    assert_eq!(figures["user_liabilities_units"], ETH.to_string());
    assert_eq!(figures["deposit_addresses"], 1);
    custody.stop();
}

#[test]
fn the_scheduled_ledger_run_finds_a_discrepancy_forced_in_the_database() {
    let mut custody = Custody::init();
    let dir = custody.data_dir();
    set_config(&dir, "reconciliation", "ledger_every_ms", "1000");
    set_config(&dir, "reconciliation", "treasury_every_ms", "0");
    set_config(&dir, "reconciliation", "claim_interval_ms", "100");
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    custody.start();
    custody.client(&cred).wallet("alice", "TRON");
    custody.adjust("acme", "alice", "TRON", "USDT", true, "1234");
    custody.stop();
    // The account's cached total no longer equals its entries.
    let db = rusqlite::Connection::open(dir.join("custody.db")).unwrap();
    let changed = db
        .execute(
            "UPDATE ledger_accounts SET credits_posted = '99999' WHERE credits_posted = '1234'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    custody.start();
    let admin = custody.client(&ops);
    let run = custody.wait_for(30, "a scheduled LEDGER run", || {
        let list = admin.get("/v1/admin/reconciliations").json();
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["scope"] == "LEDGER" && r["balanced"] == false)
            .cloned()
    });
    assert_eq!(run["requested_by"], "system:reconciliation");
    assert_eq!(run["status"], "completed", "{run}");
    let messages: Vec<_> = run["discrepancies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect();
    assert!(messages.iter().any(|m| m.contains("99999")), "{messages:?}");
    let alerts = admin.get("/v1/admin/alerts").json();
    let alert = alerts["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "ledger_discrepancy")
        .expect("a ledger_discrepancy alert")
        .clone();
    assert_eq!(alert["severity"], "critical");
    assert_eq!(alert["reference_id"], run["id"]);
    custody.stop();
}
