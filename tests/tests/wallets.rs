//! Wallets through the real server: idempotent creation, concurrency, tenant isolation,
//! derivation checked by an independent tool, balances and history.

use std::sync::Arc;

use custody_e2e::{oracle_address, Custody, TEST_MNEMONIC};
use serde_json::json;

#[test]
fn creation_is_idempotent_and_replays_byte_for_byte() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let body = json!({ "external_user_id": "alice", "network": "BSC" });

    let first = client.post("/v1/wallets", &body, Some("key-00000001"));
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!(first.header("idempotent-replayed"), None);
    let w = first.json();
    assert_eq!(w["external_user_id"], "alice");
    assert_eq!(w["network"], "BSC");
    assert_eq!(w["derivation_path"], "m/44'/60'/0'/0/0");
    let mut keys: Vec<_> = w.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "address",
            "created_at",
            "derivation_path",
            "external_user_id",
            "id",
            "network",
            "previous_addresses"
        ]
    );
    // Never migrated: no earlier address.
    assert_eq!(w["previous_addresses"], json!([]));

    let replay = client.post("/v1/wallets", &body, Some("key-00000001"));
    assert_eq!(replay.status, 201);
    assert_eq!(replay.body, first.body, "byte for byte");
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));

    let other_body = json!({ "external_user_id": "bob", "network": "BSC" });
    let conflict = client.post("/v1/wallets", &other_body, Some("key-00000001"));
    assert_eq!(
        (conflict.status, conflict.code().as_str()),
        (409, "IDEMPOTENCY_CONFLICT")
    );

    // Another key for the same user and network: the same wallet, 201.
    let again = client.post("/v1/wallets", &body, Some("key-00000002"));
    assert_eq!(again.status, 201);
    assert_eq!(again.json()["id"], w["id"]);
}

#[test]
fn twenty_concurrent_creates_make_one_wallet() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = Arc::new(c.client(&cred));
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let client = Arc::clone(&client);
            std::thread::spawn(move || {
                let body = json!({ "external_user_id": "carol", "network": "TRON" });
                let r = client.post("/v1/wallets", &body, Some(&format!("concurrent-{i:04}")));
                assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
                r.json()["id"].as_str().unwrap().to_owned()
            })
        })
        .collect();
    let ids: std::collections::BTreeSet<_> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(ids.len(), 1, "one wallet: {ids:?}");
}

#[test]
fn tenants_never_see_each_other() {
    let mut c = Custody::init();
    let a = c.credential("tenant-a", &[]);
    let b = c.credential("tenant-b", &[]);
    c.start();
    let wa = c.client(&a).wallet("same-user", "BSC");
    let wb = c.client(&b).wallet("same-user", "BSC");
    assert_ne!(wa["id"], wb["id"]);
    assert_ne!(wa["address"], wb["address"]);
    assert_eq!(wa["derivation_path"], "m/44'/60'/0'/0/0");
    assert_eq!(
        wb["derivation_path"], "m/44'/60'/1'/0/0",
        "each tenant has its own account"
    );

    let id_a = wa["id"].as_str().unwrap();
    for path in [
        format!("/v1/wallets/{id_a}"),
        format!("/v1/wallets/{id_a}/balances"),
        format!("/v1/wallets/{id_a}/transactions"),
    ] {
        let foreign = c.client(&b).get(&path);
        let missing = c
            .client(&b)
            .get(&path.replace(id_a, "00000000-0000-4000-8000-000000000000"));
        assert_eq!(
            (foreign.status, foreign.code()),
            (404, "NOT_FOUND".to_string()),
            "{path}"
        );
        let strip = |r: &custody_e2e::Resp| {
            let mut v = r.json();
            v.as_object_mut().unwrap().remove("trace_id");
            v
        };
        assert_eq!(
            strip(&foreign),
            strip(&missing),
            "another tenant's wallet looks missing"
        );
    }
    let malformed = c.client(&a).get("/v1/wallets/not-a-uuid");
    assert_eq!(
        (malformed.status, malformed.code().as_str()),
        (404, "NOT_FOUND")
    );
}

#[test]
fn addresses_match_their_path_when_derived_by_bip_utils() {
    let mut c = Custody::init_with_test_mnemonic();
    let a = c.credential("tenant-a", &[]);
    let b = c.credential("tenant-b", &[]);
    c.start();
    let mut checked = 0;
    for (cred, users) in [(&a, ["u1", "u2"]), (&b, ["u1", "u3"])] {
        for network in ["BSC", "TRON"] {
            for user in users {
                let w = c.client(cred).wallet(user, network);
                let path = w["derivation_path"].as_str().unwrap();
                let parts: Vec<&str> = path.split('/').collect();
                let account: u32 = parts[3].trim_end_matches('\'').parse().unwrap();
                let index: u32 = parts[5].parse().unwrap();
                let coin = if network == "BSC" { "60'" } else { "195'" };
                assert_eq!(parts[2], coin);
                let expected = oracle_address(TEST_MNEMONIC, network, account, index);
                assert_eq!(w["address"].as_str().unwrap(), expected, "{network} {path}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 8);
}

#[test]
fn validation_errors() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let cases = [
        (
            json!({ "external_user_id": "u", "network": "DOGE" }),
            422,
            "VALIDATION_FAILED",
        ),
        (
            json!({ "external_user_id": "u", "network": "BSC", "extra": 1 }),
            422,
            "VALIDATION_FAILED",
        ),
        (json!({ "network": "BSC" }), 422, "VALIDATION_FAILED"),
        (
            json!({ "external_user_id": "x".repeat(161), "network": "BSC" }),
            422,
            "VALIDATION_FAILED",
        ),
        (
            json!({ "external_user_id": "", "network": "BSC" }),
            422,
            "VALIDATION_FAILED",
        ),
        (
            json!({ "external_user_id": 7, "network": "BSC" }),
            422,
            "VALIDATION_FAILED",
        ),
    ];
    for (i, (body, status, code)) in cases.iter().enumerate() {
        let r = client.post("/v1/wallets", body, Some(&format!("validation-{i:04}")));
        assert_eq!(
            (r.status, r.code().as_str()),
            (*status, *code),
            "case {i}: {body}"
        );
    }
    let unknown = client.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u", "network": "BSC", "extra": 1 }),
        Some("validation-x1"),
    );
    assert_eq!(unknown.json()["details"][0]["field"], "extra");
    let ok = client.post(
        "/v1/wallets",
        &json!({ "external_user_id": "x".repeat(160), "network": "BSC" }),
        Some("validation-ok"),
    );
    assert_eq!(ok.status, 201, "160 characters are allowed");

    let s = client.signed(
        "POST",
        "/v1/wallets",
        b"{\"external_user_id\":",
        Some("malformed-01"),
    );
    let r = client.send(&s);
    assert_eq!((r.status, r.code().as_str()), (400, "MALFORMED_JSON"));

    let no_key = client.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u", "network": "BSC" }),
        None,
    );
    assert_eq!(
        (no_key.status, no_key.code().as_str()),
        (422, "VALIDATION_FAILED")
    );
    let short_key = client.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u", "network": "BSC" }),
        Some("short"),
    );
    assert_eq!(
        (short_key.status, short_key.code().as_str()),
        (422, "VALIDATION_FAILED")
    );

    // A validation failure is not stored: the same key works once the body is fixed.
    let bad = client.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u", "network": "XX" }),
        Some("retry-key-01"),
    );
    assert_eq!(bad.status, 422);
    let good = client.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u", "network": "BSC" }),
        Some("retry-key-01"),
    );
    assert_eq!(
        good.status, 201,
        "the failed attempt did not use up the key"
    );
}

#[test]
fn scopes_are_enforced() {
    let mut c = Custody::init();
    let writer = c.credential("acme", &[]);
    let reader = c.credential("acme", &["--scopes", "wallets:read"]);
    c.start();
    let w = c.client(&writer).wallet("u", "BSC");
    let r = c.client(&reader).post(
        "/v1/wallets",
        &json!({ "external_user_id": "v", "network": "BSC" }),
        Some("scoped-0001"),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = c
        .client(&reader)
        .get(&format!("/v1/wallets/{}", w["id"].as_str().unwrap()));
    assert_eq!(r.status, 200);
}

#[test]
fn balances_keep_ledger_and_chain_apart_and_history_shows_credits() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let w = client.wallet("alice", "TRON");
    let id = w["id"].as_str().unwrap();

    let raw = client.get(&format!("/v1/wallets/{id}/balances"));
    // The bytes as sent (a parsed map would sort its keys whatever the wire said).
    let text = String::from_utf8(raw.body.clone()).unwrap();
    assert_eq!(
        text,
        format!(
            "{{\"address\":\"{address}\",\"balances\":[\
             {{\"asset\":\"TRX\",\"decimals\":6,\"ledger\":{{\"available_units\":\"0\",\
             \"pending_units\":\"0\",\"reserved_units\":\"0\"}},\"onchain\":null,\
             \"onchain_error\":\"no TRON endpoint is configured\"}},\
             {{\"asset\":\"USDT\",\"decimals\":6,\"ledger\":{{\"available_units\":\"0\",\
             \"pending_units\":\"0\",\"reserved_units\":\"0\"}},\"onchain\":null,\
             \"onchain_error\":\"no TRON endpoint is configured\"}}],\
             \"network\":\"TRON\",\"wallet_id\":\"{id}\"}}",
            address = w["address"].as_str().unwrap()
        )
    );
    let b = raw.json();
    assert_eq!(b["wallet_id"], w["id"]);
    assert_eq!(b["address"], w["address"]);
    let assets: Vec<_> = b["balances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["asset"].as_str().unwrap())
        .collect();
    assert_eq!(assets, ["TRX", "USDT"]);
    for entry in b["balances"].as_array().unwrap() {
        assert_eq!(
            entry["ledger"],
            json!({ "available_units": "0", "reserved_units": "0", "pending_units": "0" })
        );
        assert!(entry["onchain"].is_null());
        assert!(entry["onchain_error"].as_str().unwrap().contains("TRON"));
    }
    assert_eq!(entry_decimals(&b, "TRX"), 6);

    let posted = c.adjust("acme", "alice", "TRON", "USDT", true, "2500000");
    assert_eq!(posted["kind"], "adjustment");
    assert_eq!(
        client.ledger_balance(id, "USDT")["available_units"],
        "2500000"
    );
    c.adjust("acme", "alice", "TRON", "USDT", false, "500000");
    assert_eq!(
        client.ledger_balance(id, "USDT")["available_units"],
        "2000000"
    );

    let history = client
        .get(&format!("/v1/wallets/{id}/transactions?limit=1"))
        .json();
    assert_eq!(history["has_more"], true);
    let row = &history["data"][0];
    assert_eq!(row["direction"], "debit");
    assert_eq!(row["amount_units"], "500000");
    assert_eq!(row["balance_after_units"], "2000000");
    assert_eq!(row["asset"], "USDT");
    let all = client.get(&format!("/v1/wallets/{id}/transactions")).json();
    assert_eq!(all["data"].as_array().unwrap().len(), 2);
    assert_eq!(all["data"][1]["direction"], "credit");

    for bad in ["limit=0", "limit=101", "limit=x", "cursor=1"] {
        let r = client.get(&format!("/v1/wallets/{id}/transactions?{bad}"));
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "{bad}"
        );
    }

    // The adjustment is audited.
    let admin = c.credential("ops", &["--admin"]);
    let audit = c.client(&admin).get("/v1/admin/audit").json();
    assert_eq!(audit["data"][0]["action"], "ledger.adjust.debit");
    assert_eq!(audit["data"][0]["reason"], "test funding");
}

fn entry_decimals(b: &serde_json::Value, asset: &str) -> u64 {
    b["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["asset"] == asset)
        .unwrap()["decimals"]
        .as_u64()
        .unwrap()
}
