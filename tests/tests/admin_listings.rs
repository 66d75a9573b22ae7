//! The admin listings page by `starting_after`; alerts are acknowledged with an audit record;
//! the dashboard counts; `/v1/metrics` for operators' monitoring. Alerts and a dead-lettered
//! webhook event are written into the database of a stopped service: nothing else makes them
//! without a chain.

use std::collections::HashSet;
use std::path::Path;

use custody_e2e::{Client, Custody};
use serde_json::{json, Value};

/// Writes `alerts` (id, created_at ms) and one dead-lettered outbox event into the database
/// of the stopped service.
fn seed_rows(dir: &Path, alerts: &[(String, i64)]) {
    let db = rusqlite::Connection::open(dir.join("custody.db")).unwrap();
    for (id, at) in alerts {
        db.execute(
            "INSERT INTO alerts (id, kind, severity, message, created_at) \
             VALUES (?1, 'scan_stuck', 'warning', 'seeded by the test', ?2)",
            rusqlite::params![id, at],
        )
        .unwrap();
    }
    db.execute(
        "INSERT INTO outbox (id, tenant, event_type, body, created_at, status, attempts, \
         next_attempt_at, updated_at) \
         VALUES (?1, 'acme', 'deposit.credited', x'7b7d', 1000, 'dead_lettered', 10, 1000, 1000)",
        [uuid::Uuid::new_v4().to_string()],
    )
    .unwrap();
}

/// A service with `n_alerts` seeded alerts (two pairs share a millisecond, so ties fall
/// across page ends), an admin and a partner credential; (service, admin, partner, alert ids).
fn service(n_alerts: usize) -> (Custody, Client, Client, Vec<String>) {
    let mut c = Custody::init();
    let ops = c.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let acme = c.credential("acme", &["--rate-limit", "100000"]);
    // The first start creates and migrates the database.
    c.start();
    c.stop();
    let alerts: Vec<(String, i64)> = (0..n_alerts)
        .map(|i| {
            let at = 1_700_000_000_000 + i64::try_from(i / 2).unwrap();
            (uuid::Uuid::new_v4().to_string(), at)
        })
        .collect();
    seed_rows(&c.data_dir(), &alerts);
    c.start();
    let (admin, partner) = (c.client(&ops), c.client(&acme));
    (
        c,
        admin,
        partner,
        alerts.into_iter().map(|(id, _)| id).collect(),
    )
}

/// Every row of an admin listing read `limit` at a time with `starting_after`, checking each
/// page's shape on the way.
fn page_through(admin: &Client, resource: &str, limit: usize) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let target = match &after {
            None => format!("/v1/admin/{resource}?limit={limit}"),
            Some(id) => format!("/v1/admin/{resource}?limit={limit}&starting_after={id}"),
        };
        let r = admin.get(&target);
        assert_eq!(
            r.status,
            200,
            "{target}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let page = r.json();
        assert_eq!(page.as_object().unwrap().len(), 2, "{page}");
        let data = page["data"].as_array().unwrap().clone();
        assert!(data.len() <= limit, "{target}: {} rows", data.len());
        let has_more = page["has_more"].as_bool().unwrap();
        rows.extend(data.iter().cloned());
        if !has_more {
            return rows;
        }
        assert_eq!(data.len(), limit, "a page before the last one is full");
        after = Some(data.last().unwrap()["id"].as_str().unwrap().to_owned());
    }
}

fn ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The listing and its pages agree: every row once, in the listing's order.
fn assert_pages_cover(admin: &Client, resource: &str, expected: usize) {
    let whole = admin.get(&format!("/v1/admin/{resource}?limit=100")).json();
    assert_eq!(whole["has_more"], false);
    let whole = ids(whole["data"].as_array().unwrap());
    assert_eq!(whole.len(), expected, "{resource}: {whole:?}");
    let paged = ids(&page_through(admin, resource, 2));
    let unique: HashSet<_> = paged.iter().collect();
    assert_eq!(unique.len(), paged.len(), "{resource}: a row shown twice");
    assert_eq!(
        paged, whole,
        "{resource}: pages give the whole listing, in order"
    );
}

#[test]
fn audit_and_alerts_page_past_the_first_page() {
    let (_c, admin, _partner, alert_ids) = service(5);
    for i in 0..5 {
        let body = json!({ "control_key": "maintenance.TRON", "enabled": i % 2 == 0,
                           "reason": format!("change {i}") });
        assert_eq!(admin.post("/v1/admin/controls", &body, None).status, 200);
    }
    assert_pages_cover(&admin, "audit", 5);
    assert_pages_cover(&admin, "alerts", 5);
    let audit = page_through(&admin, "audit", 2);
    let reasons: HashSet<_> = audit
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    let written: Vec<String> = (0..5).map(|i| format!("change {i}")).collect();
    assert_eq!(reasons, written.iter().map(String::as_str).collect());
    // Newest first (records of one millisecond, if any, by id).
    let times: Vec<_> = audit
        .iter()
        .map(|r| r["created_at"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let listed: HashSet<_> = ids(&page_through(&admin, "alerts", 3))
        .into_iter()
        .collect();
    assert_eq!(listed, alert_ids.into_iter().collect::<HashSet<_>>());
    // The first page of 2 says that more follow.
    let first = admin.get("/v1/admin/alerts?limit=2").json();
    assert_eq!(first["has_more"], true);
    assert_eq!(first["data"].as_array().unwrap().len(), 2);
}

#[test]
fn ledger_transactions_are_listed_with_their_entries_in_pages() {
    let (c, admin, partner, _) = service(0);
    partner.wallet("alice", "TRON");
    for units in ["10", "20", "30"] {
        c.adjust("acme", "alice", "TRON", "USDT", true, units);
    }
    c.adjust("acme", "alice", "TRON", "USDT", false, "5");
    assert_pages_cover(&admin, "transactions", 4);
    let newest = &admin.get("/v1/admin/transactions?limit=1").json()["data"][0];
    assert_eq!(newest["reference_type"], "adjustment", "{newest}");
    let entries = newest["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{newest}");
    let user = entries
        .iter()
        .find(|e| e["account"].as_str().unwrap().contains("alice"))
        .expect("the user's entry");
    assert_eq!(user["direction"], "debit");
    assert_eq!(user["amount_units"], "5");
    assert_eq!(user["balance_after_units"], "55");
}

#[test]
fn bad_pages_are_refused_and_non_admins_see_nothing() {
    let (_c, admin, partner, alert_ids) = service(1);
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=two", "limit"),
        ("starting_after=not-an-id", "starting_after"),
        // A well-formed id of no row.
        (
            "starting_after=00000000-0000-4000-8000-000000000000",
            "starting_after",
        ),
    ] {
        let target = format!("/v1/admin/alerts?{query}");
        let r = admin.get(&target);
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "{target}"
        );
        assert_eq!(r.json()["details"][0]["field"], field, "{target}");
    }
    assert_eq!(admin.get("/v1/admin/alerts?offset=1").status, 422);
    // Every stored listing looks its cursor up in its own rows: an alert's id names no sweep.
    for resource in [
        "audit",
        "transactions",
        "webhooks",
        "withdrawals",
        "swaps",
        "sweeps",
        "treasury-fundings",
        "reconciliations",
    ] {
        let page = admin.get(&format!("/v1/admin/{resource}?limit=2")).json();
        assert_eq!(page["has_more"], false, "{resource}");
        let r = admin.get(&format!(
            "/v1/admin/{resource}?starting_after={}",
            alert_ids[0]
        ));
        assert_eq!(r.status, 422, "{resource}");
    }
    // The configuration listings are one page: a limit is accepted, a cursor is not.
    for resource in ["networks", "assets", "rpcs", "treasuries", "fee-policies"] {
        let r = admin.get(&format!("/v1/admin/{resource}?limit=1"));
        assert_eq!(r.status, 200, "{resource}");
        assert_eq!(r.json()["has_more"], false, "{resource}");
        let r = admin.get(&format!(
            "/v1/admin/{resource}?starting_after={}",
            alert_ids[0]
        ));
        assert_eq!(r.status, 422, "{resource}");
    }
    // A partner: 403 for the listings, the acknowledgement and the metrics.
    for r in [
        partner.get("/v1/admin/alerts?limit=2"),
        partner.get(&format!("/v1/admin/audit?starting_after={}", alert_ids[0])),
        partner.post(
            &format!("/v1/admin/alerts/{}/ack", alert_ids[0]),
            &json!({ "reason": "mine" }),
            None,
        ),
        partner.get("/v1/metrics"),
    ] {
        assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    }
    // The partner listings keep their own parameters.
    assert_eq!(partner.get("/v1/deposits?starting_after=x").status, 422);
    // The OpenAPI documents the cursor of the admin listing.
    let doc = custody_e2e::raw_request(&admin.addr, "GET", "/v1/openapi.json", &[], b"").json();
    let params = doc["paths"]["/admin/{resource}"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        params.iter().any(|p| p["name"] == "starting_after"),
        "{params:?}"
    );
    assert!(doc["paths"]["/admin/alerts/{id}/ack"]["post"].is_object());
}

#[test]
fn an_acknowledged_alert_leaves_the_open_count_with_an_audit_record() {
    let (_c, admin, _partner, alert_ids) = service(3);
    let dash = admin.get("/v1/admin/dashboard").json();
    assert_eq!(dash["open_alerts"], 3);
    assert_eq!(dash["dead_lettered_webhooks"], 1);
    assert_eq!(dash["webhooks"]["dead_lettered"], 1);
    assert_eq!(dash["pending_withdrawals"], 0);
    assert_eq!(dash["pending_swaps"], 0);
    assert_eq!(dash["open_sweeps"], 0);
    assert!(dash["reconciliations"]["LEDGER"].is_null(), "{dash}");
    assert!(dash["pending_deposits"].is_array());

    let id = &alert_ids[1];
    let path = format!("/v1/admin/alerts/{id}/ack");
    for body in [
        json!({}),
        json!({ "reason": "" }),
        json!({ "reason": "x".repeat(501) }),
        json!({ "reason": "ok", "extra": 1 }),
    ] {
        let r = admin.post(&path, &body, None);
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "{body}"
        );
    }
    let r = admin.post(&path, &json!({ "reason": "node restarted" }), None);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let acked = r.json();
    assert_eq!(acked["id"], id.as_str());
    assert!(acked["acknowledged_by"]
        .as_str()
        .unwrap()
        .starts_with("credential:"));
    assert!(acked["acknowledged_at"].is_string());
    // Again: the same record, no second decision in the trail.
    let again = admin.post(&path, &json!({ "reason": "twice" }), None);
    assert_eq!(again.status, 200);
    assert_eq!(again.json(), acked);
    let audit = admin.get("/v1/admin/audit").json();
    let acks: Vec<_> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "alert.acknowledge")
        .cloned()
        .collect();
    assert_eq!(acks.len(), 1, "{audit}");
    assert_eq!(acks[0]["target"], id.as_str());
    assert_eq!(acks[0]["reason"], "node restarted");
    assert_eq!(acks[0]["actor"], acked["acknowledged_by"]);
    assert_eq!(acks[0]["created_at"], acked["acknowledged_at"]);
    // The listing shows it; the open count drops by one.
    let listed = admin.get("/v1/admin/alerts").json();
    let row = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row, acked);
    assert_eq!(admin.get("/v1/admin/dashboard").json()["open_alerts"], 2);

    let unknown = admin.post(
        "/v1/admin/alerts/00000000-0000-4000-8000-000000000000/ack",
        &json!({ "reason": "x" }),
        None,
    );
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (404, "NOT_FOUND")
    );
    let not_an_id = admin.post("/v1/admin/alerts/abc/ack", &json!({ "reason": "x" }), None);
    assert_eq!(not_an_id.status, 404);
}

#[test]
fn an_acknowledgement_needs_the_credentials_second_factors() {
    let mut c = Custody::init();
    let ops = c.credential("ops", &["--admin", "--pin", "4321"]);
    c.start();
    c.stop();
    let id = uuid::Uuid::new_v4().to_string();
    seed_rows(&c.data_dir(), &[(id.clone(), 1_700_000_000_000)]);
    c.start();
    let admin = c.client(&ops);
    let body = serde_json::to_vec(&json!({ "reason": "seen" })).unwrap();
    let send = |pin: Option<&str>| {
        let mut s = admin.signed("POST", &format!("/v1/admin/alerts/{id}/ack"), &body, None);
        if let Some(p) = pin {
            s.extra_headers.push(("X-Service-Pin".into(), p.into()));
        }
        admin.send(&s)
    };
    let r = send(None);
    assert_eq!((r.status, r.code().as_str()), (401, "PIN_REQUIRED"));
    let r = send(Some("0000"));
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_PIN"));
    assert_eq!(admin.get("/v1/admin/dashboard").json()["open_alerts"], 1);
    let r = send(Some("4321"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(admin.get("/v1/admin/dashboard").json()["open_alerts"], 0);
}

#[test]
fn metrics_count_requests_per_route_template_for_admins() {
    let (_c, admin, partner, alert_ids) = service(2);
    partner.wallet("alice", "TRON");
    assert_eq!(admin.get("/v1/admin/dashboard").status, 200);
    assert_eq!(admin.get("/v1/admin/dashboard").status, 200);
    assert_eq!(admin.get("/v1/admin/alerts?limit=1").status, 200);
    assert_eq!(admin.get("/v1/admin/alerts?limit=0").status, 422);
    let wallet = partner.wallet("alice", "TRON");
    let wallet_id = wallet["id"].as_str().unwrap();
    assert_eq!(partner.get(&format!("/v1/wallets/{wallet_id}")).status, 200);
    let r = admin.get("/v1/metrics");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = String::from_utf8(r.body).unwrap();
    for expected in [
        r#"custody_http_requests_total{route="/admin/dashboard",method="GET",status="200"} 2"#,
        r#"custody_http_requests_total{route="/admin/{resource}",method="GET",status="200"} 1"#,
        r#"custody_http_requests_total{route="/admin/{resource}",method="GET",status="422"} 1"#,
        r#"custody_http_requests_total{route="/wallets/{id}",method="GET",status="200"} 1"#,
        r#"custody_http_request_duration_seconds_bucket{le="+Inf",route="/admin/dashboard",method="GET",status="200"} 2"#,
        r#"custody_queue_depth{queue="webhooks_dead_lettered"} 1"#,
        r#"custody_queue_depth{queue="alerts_open"} 2"#,
        r#"custody_queue_depth{queue="withdrawals_pending"} 0"#,
        r#"custody_outgoing_unfinished{network="BSC"} 0"#,
        r#"custody_webhook_deliveries_total{outcome="dead_lettered"} 0"#,
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    // Raw paths never become labels.
    assert!(!text.contains(wallet_id), "{text}");
    assert!(!text.contains(&alert_ids[0]), "{text}");
    assert!(text.ends_with("# EOF\n"));
    // Unknown parameters are refused here too.
    assert_eq!(admin.get("/v1/metrics?format=json").status, 422);
}

#[test]
fn a_dead_lettered_event_is_replayed_once_through_the_api_with_an_audit_record() {
    let (_c, admin, partner, _) = service(0);
    let events = admin.get("/v1/admin/webhooks").json();
    let dead = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["status"] == "dead_lettered")
        .expect("the seeded dead-lettered event")
        .clone();
    let path = format!("/v1/admin/webhooks/{}/replay", dead["id"].as_str().unwrap());
    let r = partner.post(&path, &json!({}), None);
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = admin.post(&path, &json!({ "why": "x" }), None);
    assert_eq!((r.status, r.code().as_str()), (422, "VALIDATION_FAILED"));
    let r = admin.send(&admin.signed("POST", &path, b"", None));
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["status"], "pending");
    assert_eq!(r.json()["id"], dead["id"]);
    // Only a dead-lettered event is replayed.
    let again = admin.post(&path, &json!({}), None);
    assert_eq!(
        (again.status, again.code().as_str()),
        (422, "VALIDATION_FAILED")
    );
    let unknown = admin.post(
        &format!("/v1/admin/webhooks/{}/replay", uuid::Uuid::new_v4()),
        &json!({}),
        None,
    );
    assert_eq!(unknown.status, 404);
    let audit = admin.get("/v1/admin/audit").json();
    let replays: Vec<_> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "webhooks.replay")
        .collect();
    assert_eq!(replays.len(), 1, "{audit}");
    assert_eq!(
        replays[0]["target"],
        format!("event:{}", dead["id"].as_str().unwrap())
    );
}
