//! Strict request bodies (decisions §17), through the real server: a body two JSON parsers could
//! read differently is refused before anything runs.

use custody_e2e::{Client, Custody};
use serde_json::json;

/// Sends `body` exactly as given (no re-serialization, which would drop a repeated key).
fn post_raw(client: &Client, path: &str, body: &[u8], idem: Option<&str>) -> custody_e2e::Resp {
    client.send(&client.signed("POST", path, body, idem))
}

#[test]
fn a_repeated_key_at_any_depth_is_malformed_json() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    let admin = c.credential("ops", &["--admin"]);
    c.start();
    let client = c.client(&cred);
    client.wallet("alice", "TRON");
    client.wallet("bob", "TRON");
    c.adjust("acme", "alice", "TRON", "TRX", true, "1000000");

    // A partner's reviewer reads 1; a last-wins parser would settle 900000.
    let r = post_raw(
        &client,
        "/v1/internal-transfers",
        br#"{"sender_external_user_id":"alice","recipient_external_user_id":"bob","asset":"TRX","network":"TRON","amount_units":"1","amount_units":"900000"}"#,
        Some("dup-amount-01"),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "MALFORMED_JSON"));
    let alice = client.wallet("alice", "TRON");
    assert_eq!(client.available(&alice, "TRX"), 1_000_000, "nothing moved");

    let r = post_raw(
        &client,
        "/v1/wallets",
        br#"{"external_user_id":"a","external_user_id":"b","network":"TRON"}"#,
        Some("dup-wallet-01"),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "MALFORMED_JSON"));

    let ops = c.client(&admin);
    let r = post_raw(
        &ops,
        "/v1/admin/controls",
        br#"{"control_key":"maintenance.BSC","enabled":true,"reason":"x","enabled":false}"#,
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (400, "MALFORMED_JSON"));
    let audit = ops.get("/v1/admin/audit").json();
    assert!(
        audit["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["action"] != "control.update"),
        "no control changed: {audit}"
    );

    // Nested objects and arrays too; the key may be spelled with escapes.
    for body in [
        &br#"{"external_user_id":"a","network":"TRON","x":{"k":1,"k":2}}"#[..],
        br#"{"external_user_id":"a","network":"TRON","x":[{"k":1},{"k":1,"k":1}]}"#,
        br#"{"external_user_id":"a","network":"TRON","net\u0077ork":"BSC"}"#,
    ] {
        let r = post_raw(&client, "/v1/wallets", body, Some("dup-nested-01"));
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "MALFORMED_JSON"),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn bytes_that_are_not_one_utf8_json_value_are_malformed() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    for (i, body) in [
        &b"{\"external_user_id\":\"caf\xe9\",\"network\":\"TRON\"}"[..],
        b"\xef\xbb\xbf{\"external_user_id\":\"a\",\"network\":\"TRON\"}",
        b"{\"external_user_id\":\"a\",\"network\":\"TRON\"}{}",
        b"{\"external_user_id\":\"a\",\"network\":\"TRON\"} x",
        b"{\"external_user_id\":\"a\",\"network\":\"TRON\"}\x00",
    ]
    .iter()
    .enumerate()
    {
        let r = post_raw(&client, "/v1/wallets", body, Some(&format!("bytes-{i:04}")));
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "MALFORMED_JSON"),
            "case {i}"
        );
    }
    // Whitespace around the value is fine.
    let r = post_raw(
        &client,
        "/v1/wallets",
        b" \r\n\t{\"external_user_id\":\"a\",\"network\":\"TRON\"} \r\n\t",
        Some("bytes-ok-01"),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn numbers_nulls_and_control_characters_are_validation_failures_with_details() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    client.wallet("alice", "TRON");
    client.wallet("bob", "TRON");
    let transfer_with = |amount: &str| {
        format!(
            r#"{{"sender_external_user_id":"alice","recipient_external_user_id":"bob","asset":"TRX","network":"TRON","amount_units":{amount}}}"#
        )
    };
    let huge = format!("1{}", "0".repeat(400));
    for (i, amount) in ["1e400", "-1e400", huge.as_str(), "5", "5.0", "null"]
        .iter()
        .enumerate()
    {
        let r = post_raw(
            &client,
            "/v1/internal-transfers",
            transfer_with(amount).as_bytes(),
            Some(&format!("number-{i:04}")),
        );
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "amount_units: {amount}"
        );
        assert_eq!(r.json()["details"][0]["field"], "amount_units", "{amount}");
    }

    for (i, (body, field)) in [
        (
            json!({ "external_user_id": null, "network": "TRON" }),
            "external_user_id",
        ),
        (
            json!({ "external_user_id": "a", "network": null }),
            "network",
        ),
        (
            json!({ "external_user_id": "a\u{0007}b", "network": "TRON" }),
            "external_user_id",
        ),
        (
            json!({ "external_user_id": "a\nb", "network": "TRON" }),
            "external_user_id",
        ),
        (
            json!({ "external_user_id": "a\u{009b}b", "network": "TRON" }),
            "external_user_id",
        ),
    ]
    .iter()
    .enumerate()
    {
        let r = client.post("/v1/wallets", body, Some(&format!("fields-{i:04}")));
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "{body}"
        );
        assert_eq!(r.json()["details"][0]["field"], *field, "{body}");
    }
}

/// A JSON value `depth` levels deep (objects and arrays in turn) with a repeated key at the
/// innermost object, built as text: no JSON library would keep the second copy.
fn nested_with_repeated_key(rng: &mut custody_e2e::profile::Rng, depth: usize) -> String {
    let leaf = if rng.below(2) == 0 {
        r#"{"k":"first","k":"second"}"#.to_owned()
    } else {
        r#"{"a":1,"k":[],"b":null,"k":{}}"#.to_owned()
    };
    (0..depth).fold(leaf, |inner, level| {
        if level % 2 == 0 {
            format!(r#"{{"x{level}":true,"n{level}":{inner}}}"#)
        } else {
            format!("[0,{inner},\"s\"]")
        }
    })
}

#[test]
fn generated_bodies_with_a_repeated_key_or_trailing_bytes_are_refused_on_every_route() {
    let (mut rng, seed) = custody_e2e::profile::Rng::from_env();
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "1000000"]);
    let admin = c.credential("ops", &["--admin", "--rate-limit", "1000000"]);
    c.start();
    let (client, ops) = (c.client(&cred), c.client(&admin));
    let routes: [(&Client, &str, bool, &str); 8] = [
        (
            &client,
            "/v1/wallets",
            true,
            r#""external_user_id":"a","network":"TRON""#,
        ),
        (
            &client,
            "/v1/internal-transfers",
            true,
            r#""sender_external_user_id":"a","recipient_external_user_id":"b","asset":"TRX","network":"TRON","amount_units":"1""#,
        ),
        (
            &client,
            "/v1/withdrawals/quote",
            false,
            r#""external_user_id":"a","network":"TRON","asset":"TRX","destination_address":"TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy","amount_units":"1""#,
        ),
        (
            &client,
            "/v1/withdrawals",
            true,
            r#""quote_id":"6f1c3a1e-8a59-4c1b-9d4e-2f6a7b8c9d0e""#,
        ),
        (
            &client,
            "/v1/swaps/quote",
            false,
            r#""external_user_id":"a","asset_in":"BNB","asset_out":"USDT","amount_in_units":"1""#,
        ),
        (
            &client,
            "/v1/swaps",
            true,
            r#""quote_id":"6f1c3a1e-8a59-4c1b-9d4e-2f6a7b8c9d0e""#,
        ),
        (
            &ops,
            "/v1/admin/controls",
            false,
            r#""control_key":"maintenance.TRON","enabled":true,"reason":"x""#,
        ),
        (&ops, "/v1/admin/reconcile", false, r#""scope":"LEDGER""#),
    ];
    let trailing: [&[u8]; 6] = [b"x", b"{}", b"[]", b"0", b"\x00", b"\"\""];
    for i in 0..400 {
        let (who, path, idem, fields) = routes[rng.below(routes.len())];
        let depth = rng.below(12);
        let body = if i % 2 == 0 {
            let nested = nested_with_repeated_key(&mut rng, depth);
            format!("{{{fields},\"extra\":{nested}}}").into_bytes()
        } else {
            let mut b = format!("{{{fields}}}").into_bytes();
            b.extend_from_slice(&b" \n"[..rng.below(3)]);
            b.extend_from_slice(trailing[rng.below(trailing.len())]);
            b
        };
        let key = idem.then(|| format!("strict-{i:06}"));
        let r = post_raw(who, path, &body, key.as_deref());
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "MALFORMED_JSON"),
            "seed {seed}: {path} {}",
            String::from_utf8_lossy(&body)
        );
    }
    // Nothing the refused bodies asked for happened.
    let audit = ops.get("/v1/admin/audit").json();
    assert!(
        audit["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["action"] != "control.update"),
        "{audit}"
    );
    let db = rusqlite::Connection::open(c.data_dir().join("custody.db")).unwrap();
    let wallets: i64 = db
        .query_row("SELECT COUNT(*) FROM wallets", [], |row| row.get(0))
        .unwrap();
    assert_eq!(wallets, 0, "no wallet created from a refused body");
}
