//! The admin area: controls with PIN and TOTP, audit, alerts, dashboard.

use custody_e2e::{now_s, Custody};
use hmac::{Hmac, Mac};
use serde_json::json;

/// RFC 6238 code, written here independently of the server.
fn totp(secret_b32: &str, t: i64) -> String {
    let key = data_encoding::BASE32_NOPAD
        .decode(secret_b32.as_bytes())
        .unwrap();
    let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(&key).unwrap();
    mac.update(&(t / 30).to_be_bytes());
    let h = mac.finalize().into_bytes();
    let o = usize::from(h[19] & 0xf);
    let n = (u32::from(h[o] & 0x7f) << 24)
        | (u32::from(h[o + 1]) << 16)
        | (u32::from(h[o + 2]) << 8)
        | u32::from(h[o + 3]);
    format!("{:06}", n % 1_000_000)
}

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
    let r = send(Some("0000"), None);
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_PIN"));
    let r = send(Some("4321"), None);
    assert_eq!((r.status, r.code().as_str()), (401, "OTP_REQUIRED"));
    let r = send(
        Some("4321"),
        Some("000000".into()).filter(|o| *o != totp(&secret, now_s())),
    );
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_OTP"));

    let code = totp(&secret, now_s());
    let r = send(Some("4321"), Some(code.clone()));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["enabled"], true);
    let reused = send(Some("4321"), Some(code));
    assert_eq!(
        (reused.status, reused.code().as_str()),
        (401, "INVALID_OTP"),
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
