//! Every control key of decisions §8 stops the operations it names and lets them resume when
//! turned off, each change audited (who, old, new, reason); and every admin listing answers the
//! list shape to an admin and 403 to a partner. No chain is configured: the controls answer
//! before any node is asked (deposit crediting, which needs blocks, is tested in the core's
//! pipeline tests and the scanner's model).

use custody_e2e::{Client, Custody};
use serde_json::{json, Value};

const E18: &str = "1000000000000000000";

fn set(admin: &Client, key: &str, enabled: bool) {
    let r = admin.post(
        "/v1/admin/controls",
        &json!({ "control_key": key, "enabled": enabled, "reason": format!("matrix {key}") }),
        None,
    );
    assert_eq!(r.status, 200, "{key}: {:?}", r.json());
}

/// (status, code) of each probed operation.
fn probe(client: &Client, n: &mut u32) -> Vec<(&'static str, u16, String)> {
    *n += 1;
    let transfer = client.post(
        "/v1/internal-transfers",
        &json!({ "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
                 "asset": "USDT", "network": "BSC", "amount_units": "1" }),
        Some(&format!("matrix-transfer-{n:04}")),
    );
    let withdrawal = |network: &str, asset: &str, to: &str| {
        client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": network, "asset": asset,
                     "destination_address": to, "amount_units": E18 }),
            None,
        )
    };
    let bsc = withdrawal("BSC", "BNB", "0x00000000000000000000000000000000000000D5");
    let tron = withdrawal("TRON", "TRX", "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK");
    let swap = client.post(
        "/v1/swaps/quote",
        &json!({ "external_user_id": "alice", "asset_in": "USDT", "asset_out": "BNB",
                 "amount_in_units": E18 }),
        None,
    );
    [
        ("transfer", transfer),
        ("withdrawal BSC", bsc),
        ("withdrawal TRON", tron),
        ("swap", swap),
    ]
    .into_iter()
    .map(|(what, r)| {
        let code = if r.status >= 400 {
            r.code()
        } else {
            String::new()
        };
        (what, r.status, code)
    })
    .collect()
}

#[test]
fn each_control_stops_what_it_names_and_resumes_audited() {
    let mut custody = Custody::init();
    let ops = custody.credential("ops", &["--admin"]);
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    custody.start();
    let (admin, client) = (custody.client(&ops), custody.client(&cred));
    client.wallet("alice", "BSC");
    client.wallet("bob", "BSC");
    custody.adjust("acme", "alice", "BSC", "USDT", true, "1000");
    let mut n = 0;
    // With every control off: transfers settle, quotes need the chain that is not there.
    let open = probe(&client, &mut n);
    let base: Vec<_> = open.iter().map(|(w, s, c)| (*w, *s, c.clone())).collect();
    assert_eq!(base[0].1, 201, "{base:?}");
    for (_, status, code) in &base[1..] {
        assert_eq!(
            (*status, code.as_str()),
            (503, "CHAIN_UNAVAILABLE"),
            "{base:?}"
        );
    }
    let stopped = |what: &str| -> (u16, String) {
        match what {
            "maintenance" => (503, "MAINTENANCE".into()),
            _ => (503, "KILL_SWITCH_ACTIVE".into()),
        }
    };
    // key -> the operations it stops, and how.
    let matrix: [(&str, &[&str], &str); 6] = [
        (
            "kill_switch.global",
            &["transfer", "withdrawal BSC", "withdrawal TRON", "swap"],
            "kill",
        ),
        (
            "kill_switch.withdrawals",
            &["withdrawal BSC", "withdrawal TRON"],
            "kill",
        ),
        ("kill_switch.swaps", &["swap"], "kill"),
        ("kill_switch.internal_transfers", &["transfer"], "kill"),
        (
            "maintenance.BSC",
            &["withdrawal BSC", "swap"],
            "maintenance",
        ),
        ("maintenance.TRON", &["withdrawal TRON"], "maintenance"),
    ];
    for (key, stops, how) in matrix {
        set(&admin, key, true);
        for (what, status, code) in probe(&client, &mut n) {
            let expected = if stops.contains(&what) {
                stopped(how)
            } else {
                let b = base.iter().find(|(w, _, _)| *w == what).unwrap();
                (b.1, b.2.clone())
            };
            assert_eq!((status, code), expected, "{key} on: {what}");
        }
        set(&admin, key, false);
        for (what, status, code) in probe(&client, &mut n) {
            let b = base.iter().find(|(w, _, _)| *w == what).unwrap();
            assert_eq!(
                (status, code),
                (b.1, b.2.clone()),
                "{key} off again: {what}"
            );
        }
    }
    // Every change is in the audit trail: who, old, new, why.
    let audit = admin.get("/v1/admin/audit?limit=100").json();
    let changes: Vec<&Value> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "control.update")
        .collect();
    assert_eq!(changes.len(), 12, "on and off for each of six keys");
    for (key, _, _) in matrix {
        let of_key: Vec<_> = changes.iter().filter(|a| a["target"] == key).collect();
        assert_eq!(of_key.len(), 2, "{key}");
        for a in of_key {
            assert!(a["actor"].as_str().unwrap().starts_with("credential:"));
            assert_eq!(a["reason"], format!("matrix {key}"));
            assert!(a["old_value"]["enabled"].is_boolean());
            assert_ne!(a["old_value"], a["new_value"]);
        }
    }
    custody.stop();
}

#[test]
fn every_admin_listing_answers_the_list_shape_to_admins_and_403_to_partners() {
    let mut custody = Custody::init();
    let ops = custody.credential("ops", &["--admin"]);
    let cred = custody.credential("acme", &[]);
    custody.start();
    let (admin, partner) = (custody.client(&ops), custody.client(&cred));
    for resource in [
        "networks",
        "assets",
        "rpcs",
        "treasuries",
        "fee-policies",
        "reconciliations",
        "audit",
        "alerts",
        "transactions",
        "withdrawals",
        "swaps",
        "sweeps",
        "webhooks",
        "wallet-migrations",
        "treasury-fundings",
    ] {
        let r = admin.get(&format!("/v1/admin/{resource}?limit=100"));
        assert_eq!(r.status, 200, "{resource}: {:?}", r.json());
        let v = r.json();
        assert!(v["data"].is_array(), "{resource}: {v}");
        assert!(v["has_more"].is_boolean(), "{resource}: {v}");
        assert_eq!(v.as_object().unwrap().len(), 2, "{resource}: {v}");
        assert_eq!(
            partner.get(&format!("/v1/admin/{resource}")).code(),
            "FORBIDDEN",
            "{resource}"
        );
        let bad = admin.get(&format!("/v1/admin/{resource}?limit=101"));
        assert_eq!(bad.status, 422, "{resource}");
    }
    custody.stop();
}
