//! The admin area: controls with PIN and TOTP, audit, alerts, dashboard.

use custody_e2e::{now_s, totp, Custody};
use serde_json::json;

#[test]
fn controls_need_pin_and_a_fresh_otp_and_are_audited() {
    let mut c = Custody::init();
    let admin = c.credential("ops", &["--admin", "--pin", "4321", "--totp"]);
    c.start();
    let client = c.client(&admin);
    let secret = admin.json["totp_secret"].as_str().unwrap().to_owned();
    let body = serde_json::to_vec(&json!({ "control_key": "kill_switch.withdrawals", "enabled": true, "reason": "incident 42" })).unwrap();
    let send = |pin: Option<&str>, otp: Option<String>| {
        let mut s = client.signed("POST", "/v1/admin/controls", &body, None);
        if let Some(p) = pin {
            s.extra_headers.push(("X-Service-Pin".into(), p.into()));
        }
        if let Some(o) = otp {
            s.extra_headers.push(("X-Service-OTP".into(), o));
        }
        client.send(&s)
    };
    let r = send(None, None);
    assert_eq!((r.status, r.code().as_str()), (401, "PIN_REQUIRED"));
    // A missing factor is named before anything is verified: the PIN is not judged yet.
    let r = send(Some("0000"), None);
    assert_eq!((r.status, r.code().as_str()), (401, "OTP_REQUIRED"));
    let r = send(Some("4321"), None);
    assert_eq!((r.status, r.code().as_str()), (401, "OTP_REQUIRED"));
    // A wrong code with the right PIN is one answer for the pair, which confirms no PIN.
    let r = send(
        Some("4321"),
        Some("000000".into()).filter(|o| *o != totp(&secret, now_s())),
    );
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_PIN"));

    let code = totp(&secret, now_s());
    let r = send(Some("4321"), Some(code.clone()));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["enabled"], true);
    let reused = send(Some("4321"), Some(code));
    assert_eq!(
        (reused.status, reused.code().as_str()),
        (401, "INVALID_PIN"),
        "a code is accepted once"
    );

    let audit = client.get("/v1/admin/audit").json();
    let row = &audit["data"][0];
    assert_eq!(row["action"], "control.update");
    assert_eq!(row["target"], "kill_switch.withdrawals");
    assert_eq!(row["reason"], "incident 42");
    assert_eq!(row["old_value"], json!({ "enabled": false }));
    assert_eq!(row["new_value"], json!({ "enabled": true }));

    let dash = client.get("/v1/admin/dashboard").json();
    let ks = dash["controls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["control_key"] == "kill_switch.withdrawals")
        .unwrap()
        .clone();
    assert_eq!(ks["enabled"], true);
    assert!(dash["chains"]
        .as_array()
        .unwrap()
        .iter()
        .all(|ch| ch["configured"] == false));
    assert_eq!(dash["open_alerts"], 0);
}

#[test]
fn control_input_is_validated_and_non_admins_are_refused() {
    let mut c = Custody::init();
    let admin = c.credential("ops", &["--admin"]);
    let user = c.credential("acme", &[]);
    c.start();
    let client = c.client(&admin);
    for (body, field) in [
        (
            json!({ "control_key": "kill_switch.everything", "enabled": true, "reason": "x" }),
            "control_key",
        ),
        (
            json!({ "control_key": "maintenance.BSC", "enabled": "yes", "reason": "x" }),
            "enabled",
        ),
        (
            json!({ "control_key": "maintenance.BSC", "enabled": true }),
            "reason",
        ),
        (
            json!({ "control_key": "maintenance.BSC", "enabled": true, "reason": "x", "extra": 1 }),
            "extra",
        ),
    ] {
        let r = client.post("/v1/admin/controls", &body, None);
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_FAILED"),
            "{body}"
        );
        assert_eq!(r.json()["details"][0]["field"], field);
    }
    let ok = client.post(
        "/v1/admin/controls",
        &json!({ "control_key": "maintenance.TRON", "enabled": true, "reason": "node upgrade" }),
        None,
    );
    assert_eq!(ok.status, 200);
    let r = c.client(&user).post(
        "/v1/admin/controls",
        &json!({ "control_key": "maintenance.TRON", "enabled": false, "reason": "x" }),
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    // The dashboard shows what the ledger owes per asset, and the webhook and deposit queues.
    c.client(&user).wallet("alice", "TRON");
    c.adjust("acme", "alice", "TRON", "USDT", true, "1234");
    let dash = client.get("/v1/admin/dashboard").json();
    let usdt = dash["assets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["network"] == "TRON" && a["asset"] == "USDT")
        .unwrap()
        .clone();
    assert_eq!(usdt["ledger_liabilities_units"], "1234");
    assert!(usdt["onchain_treasury_units"].is_null());
    assert_eq!(dash["webhooks"]["dead_lettered"], 0);
    assert_eq!(dash["pending_deposits"][0]["count"], 0);
    for resource in ["alerts", "rpcs", "audit", "networks", "assets"] {
        let r = client.get(&format!("/v1/admin/{resource}"));
        assert_eq!(r.status, 200, "{resource}");
        assert!(r.json()["data"].is_array());
    }
}

#[test]
fn five_wrong_pins_lock_the_credential() {
    let mut c = Custody::init();
    let admin = c.credential("ops", &["--admin", "--pin", "2468", "--totp"]);
    c.start();
    let client = c.client(&admin);
    let secret = admin.json["totp_secret"].as_str().unwrap().to_owned();
    let body = serde_json::to_vec(
        &json!({ "control_key": "maintenance.BSC", "enabled": true, "reason": "drill" }),
    )
    .unwrap();
    let send = |pin: &str| {
        let mut s = client.signed("POST", "/v1/admin/controls", &body, None);
        s.extra_headers.push(("X-Service-Pin".into(), pin.into()));
        s.extra_headers
            .push(("X-Service-OTP".into(), totp(&secret, now_s())));
        client.send(&s)
    };
    for guess in ["0000", "1111", "2222", "3333", "4444"] {
        let r = send(guess);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "INVALID_PIN"),
            "{guess}"
        );
    }
    let r = send("2468");
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "INVALID_PIN"),
        "locked, even with the right PIN"
    );
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry));
}

/// Sends a control update with the given second factors.
fn send_control(
    client: &custody_e2e::Client,
    body: &serde_json::Value,
    pin: Option<&str>,
    otp: Option<&str>,
) -> custody_e2e::Resp {
    let bytes = serde_json::to_vec(body).unwrap();
    let mut s = client.signed("POST", "/v1/admin/controls", &bytes, None);
    if let Some(p) = pin {
        s.extra_headers.push(("X-Service-Pin".into(), p.into()));
    }
    if let Some(o) = otp {
        s.extra_headers.push(("X-Service-OTP".into(), o.into()));
    }
    client.send(&s)
}

fn control_updates(client: &custody_e2e::Client) -> usize {
    client.get("/v1/admin/audit").json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["action"] == "control.update")
        .count()
}

#[test]
fn a_burst_of_wrong_pins_gets_five_guesses_and_the_right_pin_is_refused() {
    use std::sync::{mpsc, Arc, Barrier};
    use std::time::{Duration, Instant};
    let mut c = Custody::init();
    let admin = c.credential("ops", &["--admin", "--pin", "2468"]);
    c.start();
    let body = json!({ "control_key": "maintenance.BSC", "enabled": true, "reason": "drill" });
    let (answers_tx, answers) = mpsc::channel::<(String, custody_e2e::Resp)>();
    let burst = |pins: Vec<String>| {
        let barrier = Arc::new(Barrier::new(pins.len()));
        for pin in pins {
            let (client, body, barrier, tx) = (
                c.client(&admin),
                body.clone(),
                Arc::clone(&barrier),
                answers_tx.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let r = send_control(&client, &body, Some(&pin), None);
                tx.send((pin, r)).unwrap();
            });
        }
    };
    let wrong = |from: usize, n: usize| (from..from + n).map(|i| format!("{i:04}")).collect();

    // Thirty guesses at once; the right PIN comes once the first answers say the limit is
    // reached (or the thirty are answered), as an attacker racing the lockout would send it.
    burst(wrong(1000, 30));
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < 30 {
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = answers
            .recv_timeout(left)
            .expect("the first burst is answered");
        let limited = answer.1.header("retry-after").is_some();
        got.push(answer);
        if limited {
            break;
        }
    }
    let mut second = wrong(2000, 29);
    second.insert(14, "2468".to_owned());
    burst(second);
    drop(answers_tx);
    got.extend(answers.iter());
    assert_eq!(got.len(), 60);

    let (_, right) = got.iter().find(|(pin, _)| pin == "2468").unwrap();
    assert_ne!(
        right.status, 200,
        "the right PIN went through a burst of guesses"
    );
    // A guess that was verified is answered without Retry-After; every other one was refused
    // before Argon2 ran (locked, or five attempts already in flight).
    let verified = got
        .iter()
        .filter(|(_, r)| r.status == 401 && r.header("retry-after").is_none())
        .count();
    assert_eq!(verified, 5, "five guesses per lockout, not one per request");
    for (pin, r) in &got {
        assert!(
            matches!(
                (r.status, r.code().as_str()),
                (401, "INVALID_PIN") | (429, "RATE_LIMITED")
            ),
            "{pin}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    // Once the burst is over the credential is locked, for the right PIN too.
    let r = send_control(&c.client(&admin), &body, Some("2468"), None);
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_PIN"));
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((800..=900).contains(&retry), "{retry}");
    assert_eq!(control_updates(&c.client(&admin)), 0);
}

#[test]
fn both_factors_are_checked_before_either_is_answered() {
    let mut c = Custody::init();
    let admin = c.credential("ops", &["--admin", "--pin", "4321", "--totp"]);
    c.start();
    let client = c.client(&admin);
    let secret = admin.json["totp_secret"].as_str().unwrap().to_owned();
    let body = json!({ "control_key": "kill_switch.swaps", "enabled": true, "reason": "drill" });
    let code = totp(&secret, now_s());
    let wrong_code = if code == "000000" { "111111" } else { "000000" };

    // The body is judged first: a bad one is a 422 whatever the factors, and costs no attempt.
    for _ in 0..6 {
        let r = send_control(
            &client,
            &json!({ "control_key": "kill_switch.everything", "enabled": true, "reason": "x" }),
            Some("0000"),
            Some(wrong_code),
        );
        assert_eq!((r.status, r.code().as_str()), (422, "VALIDATION_FAILED"));
        let r = send_control(
            &client,
            &json!({ "control_key": "maintenance.BSC", "enabled": true, "reason": "  " }),
            Some("0000"),
            Some(wrong_code),
        );
        assert_eq!((r.status, r.code().as_str()), (422, "VALIDATION_FAILED"));
    }

    // A right PIN with a wrong code is answered exactly like a wrong PIN with a right code.
    let right_pin = send_control(&client, &body, Some("4321"), Some(wrong_code));
    let right_code = send_control(&client, &body, Some("0000"), Some(&code));
    for r in [&right_pin, &right_code] {
        assert_eq!((r.status, r.code().as_str()), (401, "INVALID_PIN"));
        assert_eq!(r.header("retry-after"), None);
    }
    assert_eq!(
        right_pin.json()["message"],
        right_code.json()["message"],
        "nothing tells which factor was right"
    );
    // A missing factor is named before anything is verified or counted.
    let r = send_control(&client, &body, Some("0000"), None);
    assert_eq!((r.status, r.code().as_str()), (401, "OTP_REQUIRED"));

    // The code sent with a wrong PIN was not used up; with the right PIN it is, once.
    let r = send_control(&client, &body, Some("4321"), Some(&code));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = send_control(&client, &body, Some("4321"), Some(&code));
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_PIN"));
    assert_eq!(control_updates(&client), 1);
}

#[test]
fn fee_policies_are_listed_for_every_asset_with_the_configured_ones() {
    let mut c = Custody::init();
    let path = c.data_dir().join("custody.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(
        "\n[[fee_policies]]\nnetwork = \"BSC\"\nasset = \"USDT\"\nmin_amount_units = \"5\"\n\
         max_amount_units = \"900\"\nmarkup_bps = 2500\nservice_fee_units = \"3\"\n\
         service_fee_bps = 10\nspread_bps = 75\n",
    );
    std::fs::write(&path, text).unwrap();
    let admin = c.credential("ops", &["--admin"]);
    c.start();
    let rows = c.client(&admin).get("/v1/admin/fee-policies").json();
    let rows = rows["data"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 5, "one per catalog asset");
    let row = |n: &str, a: &str| {
        rows.iter()
            .find(|r| r["network"] == n && r["asset"] == a)
            .unwrap()
            .clone()
    };
    assert_eq!(
        row("BSC", "USDT"),
        json!({
            "network": "BSC", "asset": "USDT", "min_amount_units": "5",
            "max_amount_units": "900", "markup_bps": 2500, "service_fee_units": "3",
            "service_fee_bps": 10, "spread_bps": 75,
        })
    );
    // The default of a 6-decimal asset: 0.0001 to 1,000,000 tokens.
    let trx = row("TRON", "TRX");
    assert_eq!(trx["min_amount_units"], "100");
    assert_eq!(trx["max_amount_units"], "1000000000000");
    assert_eq!(c.stop(), Some(0));

    // A policy for an asset outside the catalog stops `serve` with a clear message.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(
        "\n[[fee_policies]]\nnetwork = \"TRON\"\nasset = \"DOGE\"\nmin_amount_units = \"1\"\n\
         max_amount_units = \"2\"\n",
    );
    std::fs::write(&path, text).unwrap();
    let (ok, _, err) = c.cli(&["serve", "--listen", "127.0.0.1:0"]);
    assert!(!ok);
    assert!(
        err.contains("[[fee_policies]] TRON DOGE: not an asset of the catalog"),
        "{err}"
    );
}

#[test]
fn a_control_that_stops_withdrawals_answers_as_such_while_the_chain_is_down() {
    // No endpoint is configured: a quote could never be priced.
    let mut custody = custody_e2e::Custody::init();
    let ops = custody.credential("ops", &["--admin"]);
    let cred = custody.credential("acme", &[]);
    custody.start();
    let (admin, client) = (custody.client(&ops), custody.client(&cred));
    let quote = || {
        client.post(
            "/v1/withdrawals/quote",
            &serde_json::json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                "destination_address": "0x00000000000000000000000000000000000000D5",
                "amount_units": "1000" }),
            None,
        )
    };
    assert_eq!(quote().code(), "CHAIN_UNAVAILABLE");
    for (key, code) in [
        ("maintenance.BSC", "MAINTENANCE"),
        ("kill_switch.withdrawals", "KILL_SWITCH_ACTIVE"),
    ] {
        let set = |enabled: bool| {
            let r = admin.post(
                "/v1/admin/controls",
                &serde_json::json!({ "control_key": key, "enabled": enabled, "reason": "test" }),
                None,
            );
            assert_eq!(r.status, 200, "{:?}", r.json());
        };
        set(true);
        let r = quote();
        assert_eq!((r.status, r.code().as_str()), (503, code), "{key}");
        set(false);
    }
    custody.stop();
}
