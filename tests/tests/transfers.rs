//! Internal transfers through the real server: rules, idempotency, concurrency and crashes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use custody_e2e::Custody;
use serde_json::{json, Value};

fn transfer(from: &str, to: &str, asset: &str, network: &str, units: &str) -> Value {
    json!({
        "sender_external_user_id": from,
        "recipient_external_user_id": to,
        "asset": asset,
        "network": network,
        "amount_units": units,
    })
}

#[test]
fn a_transfer_settles_at_once_and_shows_in_both_histories() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let alice = client.wallet("alice", "BSC");
    let bob = client.wallet("bob", "BSC");
    c.adjust(
        "acme",
        "alice",
        "BSC",
        "USDT",
        true,
        "1000000000000000000000",
    );

    let r = client.post(
        "/v1/internal-transfers",
        &transfer("alice", "bob", "USDT", "BSC", "250000000000000000000"),
        Some("xfer-000001"),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let t = r.json();
    assert_eq!(t["status"], "settled");
    assert_eq!(t["amount_units"], "250000000000000000000");
    let mut keys: Vec<_> = t.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "amount_units",
            "asset",
            "created_at",
            "id",
            "network",
            "recipient_external_user_id",
            "sender_external_user_id",
            "status"
        ]
    );
    assert_eq!(
        client.available(&alice, "USDT"),
        750_000_000_000_000_000_000
    );
    assert_eq!(client.available(&bob, "USDT"), 250_000_000_000_000_000_000);

    let bob_history = client
        .get(&format!(
            "/v1/wallets/{}/transactions",
            bob["id"].as_str().unwrap()
        ))
        .json();
    let row = &bob_history["data"][0];
    assert_eq!(row["direction"], "credit");
    assert_eq!(row["reference_type"], "internal_transfer");
    assert_eq!(row["reference_id"], t["id"]);
    assert_eq!(row["balance_after_units"], "250000000000000000000");
    let alice_history = client
        .get(&format!(
            "/v1/wallets/{}/transactions",
            alice["id"].as_str().unwrap()
        ))
        .json();
    assert_eq!(alice_history["data"][0]["direction"], "debit");
    assert_eq!(alice_history["data"][0]["reference_id"], t["id"]);
}

#[test]
fn transfer_rules_answer_their_codes() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    client.wallet("alice", "TRON");
    client.wallet("bob", "TRON");
    client.wallet("bsc-only", "BSC");
    c.adjust("acme", "alice", "TRON", "TRX", true, "100");

    let cases = [
        (
            transfer("alice", "bob", "TRX", "TRON", "101"),
            422,
            "INSUFFICIENT_BALANCE",
        ),
        (
            transfer("alice", "bsc-only", "TRX", "TRON", "1"),
            422,
            "RECIPIENT_NOT_FOUND",
        ),
        (
            transfer("alice", "bob", "BNB", "TRON", "1"),
            422,
            "CROSS_CHAIN_NOT_SUPPORTED",
        ),
        (
            transfer("alice", "bob", "DOGE", "TRON", "1"),
            422,
            "UNSUPPORTED_ASSET",
        ),
        (
            transfer("alice", "bob", "TRX", "TRON", "0"),
            422,
            "AMOUNT_TOO_SMALL",
        ),
        (
            transfer("alice", "alice", "TRX", "TRON", "1"),
            422,
            "VALIDATION_FAILED",
        ),
        (
            transfer("alice", "bob", "TRX", "ETH", "1"),
            422,
            "VALIDATION_FAILED",
        ),
        (
            transfer("alice", "bob", "TRX", "TRON", "-1"),
            422,
            "VALIDATION_FAILED",
        ),
        (
            transfer("alice", "bob", "TRX", "TRON", "1.5"),
            422,
            "VALIDATION_FAILED",
        ),
        (
            transfer(
                "alice",
                "bob",
                "TRX",
                "TRON",
                "340282366920938463463374607431768211456",
            ),
            422,
            "VALIDATION_FAILED",
        ),
        (
            json!({ "sender_external_user_id": "alice", "recipient_external_user_id": "bob", "asset": "TRX", "network": "TRON", "amount_units": 5 }),
            422,
            "VALIDATION_FAILED",
        ),
        (
            json!({ "sender_external_user_id": "alice", "recipient_external_user_id": "bob", "asset": "TRX", "network": "TRON", "amount_units": "5", "memo": "x" }),
            422,
            "VALIDATION_FAILED",
        ),
    ];
    for (i, (body, status, code)) in cases.iter().enumerate() {
        let r = client.post(
            "/v1/internal-transfers",
            body,
            Some(&format!("rule-{i:06}")),
        );
        assert_eq!(
            (r.status, r.code().as_str()),
            (*status, *code),
            "case {i}: {body}"
        );
    }
    let alice = client.wallet("alice", "TRON");
    assert_eq!(
        client.available(&alice, "TRX"),
        100,
        "no refusal moved money"
    );
}

#[test]
fn a_key_replays_and_a_stored_refusal_stays_refused() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let alice = client.wallet("alice", "BSC");
    let bob = client.wallet("bob", "BSC");
    c.adjust("acme", "alice", "BSC", "BNB", true, "10");

    let body = transfer("alice", "bob", "BNB", "BSC", "4");
    let first = client.post("/v1/internal-transfers", &body, Some("pay-bob-0001"));
    assert_eq!(first.status, 201);
    let again = client.post("/v1/internal-transfers", &body, Some("pay-bob-0001"));
    assert_eq!(
        (again.status, again.header("idempotent-replayed")),
        (201, Some("true"))
    );
    assert_eq!(again.body, first.body);
    assert_eq!(client.available(&bob, "BNB"), 4, "executed once");

    let conflict = client.post(
        "/v1/internal-transfers",
        &transfer("alice", "bob", "BNB", "BSC", "5"),
        Some("pay-bob-0001"),
    );
    assert_eq!(
        (conflict.status, conflict.code().as_str()),
        (409, "IDEMPOTENCY_CONFLICT")
    );

    // INSUFFICIENT_BALANCE is a business outcome: stored, and replayed even once funds arrive.
    let big = transfer("alice", "bob", "BNB", "BSC", "100");
    let refused = client.post("/v1/internal-transfers", &big, Some("pay-bob-0002"));
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (422, "INSUFFICIENT_BALANCE")
    );
    c.adjust("acme", "alice", "BSC", "BNB", true, "1000");
    let replayed = client.post("/v1/internal-transfers", &big, Some("pay-bob-0002"));
    assert_eq!(replayed.body, refused.body);
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(client.available(&alice, "BNB"), 1006);
}

#[test]
fn sixty_four_concurrent_tenths_let_exactly_ten_through() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "10000"]);
    c.start();
    let client = Arc::new(c.client(&cred));
    let alice = client.wallet("alice", "TRON");
    let bob = client.wallet("bob", "TRON");
    c.adjust("acme", "alice", "TRON", "USDT", true, "1000");

    let handles: Vec<_> = (0..64)
        .map(|i| {
            let client = Arc::clone(&client);
            std::thread::spawn(move || {
                let r = client.post(
                    "/v1/internal-transfers",
                    &transfer("alice", "bob", "USDT", "TRON", "100"),
                    Some(&format!("tenth-{i:04}")),
                );
                (r.status, r.code_or_empty())
            })
        })
        .collect();
    let mut outcomes: BTreeMap<(u16, String), usize> = BTreeMap::new();
    for h in handles {
        *outcomes.entry(h.join().unwrap()).or_default() += 1;
    }
    assert_eq!(
        outcomes.get(&(201, String::new())),
        Some(&10),
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.get(&(422, "INSUFFICIENT_BALANCE".to_string())),
        Some(&54),
        "{outcomes:?}"
    );
    assert_eq!(client.available(&alice, "USDT"), 0);
    assert_eq!(client.available(&bob, "USDT"), 1000);
}

#[test]
fn back_and_forth_under_load_neither_deadlocks_nor_loses_updates() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "100000"]);
    c.start();
    let client = Arc::new(c.client(&cred));
    let alice = client.wallet("alice", "BSC");
    let bob = client.wallet("bob", "BSC");
    c.adjust("acme", "alice", "BSC", "USDC", true, "500");
    c.adjust("acme", "bob", "BSC", "USDC", true, "500");

    let handles: Vec<_> = (0..16)
        .map(|t| {
            let client = Arc::clone(&client);
            std::thread::spawn(move || {
                let (from, to) = if t % 2 == 0 {
                    ("alice", "bob")
                } else {
                    ("bob", "alice")
                };
                let mut moved = 0i64;
                for i in 0..20 {
                    let r = client.post(
                        "/v1/internal-transfers",
                        &transfer(from, to, "USDC", "BSC", "7"),
                        Some(&format!("bf-{t:02}-{i:04}")),
                    );
                    match r.status {
                        201 => moved += if from == "alice" { -7 } else { 7 },
                        422 => assert_eq!(r.code(), "INSUFFICIENT_BALANCE"),
                        other => panic!("unexpected {other}: {}", String::from_utf8_lossy(&r.body)),
                    }
                }
                moved
            })
        })
        .collect();
    let net: i64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let a = client.available(&alice, "USDC");
    let b = client.available(&bob, "USDC");
    assert_eq!(a + b, 1000, "conserved");
    assert_eq!(
        i64::try_from(a).unwrap(),
        500 + net,
        "every 201 moved money once"
    );
    let (ok, out, err) = c.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}{err}");
}

#[test]
fn kill_9_during_a_burst_loses_no_acknowledged_transfer() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "100000"]);
    c.start();
    let client = Arc::new(c.client(&cred));
    client.wallet("alice", "TRON");
    client.wallet("bob", "TRON");
    c.adjust("acme", "alice", "TRON", "TRX", true, "1000000");

    // (idempotency key, response body) of every transfer the server answered 201.
    type Acknowledged = Arc<Mutex<Vec<(String, Vec<u8>)>>>;
    let acknowledged: Acknowledged = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..12)
        .map(|t| {
            let (client, acknowledged, stop) = (
                Arc::clone(&client),
                Arc::clone(&acknowledged),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("burst-{t:02}-{i:06}");
                    let body =
                        serde_json::to_vec(&transfer("alice", "bob", "TRX", "TRON", "3")).unwrap();
                    let s = client.signed("POST", "/v1/internal-transfers", &body, Some(&key));
                    match client.try_send(&s) {
                        Some(r) if r.status == 201 => {
                            acknowledged.lock().unwrap().push((key, r.body))
                        }
                        Some(r) => panic!(
                            "unexpected {}: {}",
                            r.status,
                            String::from_utf8_lossy(&r.body)
                        ),
                        None => break,
                    }
                    i += 1;
                }
            })
        })
        .collect();
    let started = Instant::now();
    while acknowledged.lock().unwrap().len() < 100 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    c.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 100,
        "the burst ran: {}",
        acknowledged.len()
    );

    let (ok, out, err) = c.cli(&["ledger", "reconcile"]);
    assert!(ok, "the ledger balances after the crash: {out}{err}");
    c.start();
    for (key, body) in &acknowledged {
        let payload = serde_json::to_vec(&transfer("alice", "bob", "TRX", "TRON", "3")).unwrap();
        let after = c.client(&cred);
        let r = after.send(&after.signed("POST", "/v1/internal-transfers", &payload, Some(key)));
        assert_eq!(r.status, 201, "{key}");
        assert_eq!(
            r.header("idempotent-replayed"),
            Some("true"),
            "{key} was committed before it was acknowledged"
        );
        assert_eq!(&r.body, body);
    }
    let after = c.client(&cred);
    let alice = after.wallet("alice", "TRON");
    let bob = after.wallet("bob", "TRON");
    let (a, b) = (after.available(&alice, "TRX"), after.available(&bob, "TRX"));
    assert_eq!(a + b, 1_000_000, "nothing half-written");
    assert!(b >= 3 * acknowledged.len() as u128);
}

trait CodeOrEmpty {
    fn code_or_empty(&self) -> String;
}

impl CodeOrEmpty for custody_e2e::Resp {
    fn code_or_empty(&self) -> String {
        if self.status < 300 {
            String::new()
        } else {
            self.code()
        }
    }
}

#[test]
fn the_kill_switch_suspends_transfers_without_using_up_the_key() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    let admin = c.credential("ops", &["--admin"]);
    c.start();
    let client = c.client(&cred);
    client.wallet("alice", "BSC");
    let bob = client.wallet("bob", "BSC");
    c.adjust("acme", "alice", "BSC", "BNB", true, "10");
    let switch = |enabled: bool| {
        let r = c.client(&admin).post(
            "/v1/admin/controls",
            &json!({ "control_key": "kill_switch.internal_transfers", "enabled": enabled, "reason": "drill" }),
            None,
        );
        assert_eq!(r.status, 200);
    };
    switch(true);
    let body = transfer("alice", "bob", "BNB", "BSC", "3");
    let r = client.post("/v1/internal-transfers", &body, Some("during-drill-1"));
    assert_eq!((r.status, r.code().as_str()), (503, "KILL_SWITCH_ACTIVE"));
    switch(false);
    let r = client.post("/v1/internal-transfers", &body, Some("during-drill-1"));
    assert_eq!(r.status, 201, "a 503 is not stored under the key");
    assert_eq!(r.header("idempotent-replayed"), None);
    assert_eq!(client.available(&bob, "BNB"), 3);
}
