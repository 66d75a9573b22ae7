//! Signed webhooks end to end: the real binary delivers to a receiver on loopback, which checks
//! every signature with its own HMAC. Retry timing is compressed through `[webhooks]`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use custody_e2e::receiver::{remove_config_section, set_config, Answer, Received, Receiver};
use custody_e2e::{now_s, Client, Custody};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// A data dir whose webhooks may go to loopback over http, with a fast retry schedule.
fn service() -> Custody {
    let c = Custody::init();
    let dir = c.data_dir();
    set_config(&dir, "webhooks", "allow_insecure_loopback", "true");
    set_config(&dir, "webhooks", "retry_base_ms", "50");
    set_config(&dir, "webhooks", "retry_cap_ms", "200");
    set_config(&dir, "webhooks", "poll_interval_ms", "50");
    c
}

/// `webhooks set`; returns the secret.
fn register(c: &Custody, tenant: &str, url: &str) -> String {
    let out = c.cli_ok(&["webhooks", "set", "--tenant", tenant, "--url", url]);
    let mut keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["secret", "url"]);
    assert_eq!(out["url"], url);
    let secret = out["secret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), 64);
    secret
}

/// `webhooks test`; returns the event id.
fn queue_test(c: &Custody, tenant: &str) -> String {
    let out = c.cli_ok(&["webhooks", "test", "--tenant", tenant]);
    assert_eq!(out["event_type"], "webhook.test");
    out["event_id"].as_str().unwrap().to_owned()
}

/// Polls `/v1/admin/webhooks` until `done` holds for the listed events.
fn admin_events(admin: &Client, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = admin.get("/v1/admin/webhooks?limit=100");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let events = r.json()["data"].as_array().unwrap().clone();
        if done(&events) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {events:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn event<'a>(events: &'a [Value], id: &str) -> Option<&'a Value> {
    events.iter().find(|e| e["id"] == id)
}

fn has_status(events: &[Value], id: &str, status: &str) -> bool {
    event(events, id).is_some_and(|e| e["status"] == status)
}

/// Everything interface §6 says about one delivery, checked independently of the server.
fn assert_signed_envelope(r: &Received, secret: &str, event_id: &str, event_type: &str) {
    assert_eq!(r.method, "POST");
    assert_eq!(r.event_id(), event_id);
    let ts = r.header("x-service-timestamp").unwrap();
    assert!(
        ts.len() == 10 && ts.bytes().all(|b| b.is_ascii_digit()),
        "{ts}"
    );
    assert!((ts.parse::<i64>().unwrap() - now_s()).abs() < 120);
    let sig = r.header("x-service-signature").unwrap();
    assert!(sig.starts_with("sha256=") && sig.len() == 71, "{sig}");
    assert!(sig[7..]
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert!(r.verifies_with(secret), "the signature verifies");
    assert!(!r.verifies_with("not-the-secret"));
    let mut tampered = r.clone();
    tampered.body.push(b' ');
    assert!(!tampered.verifies_with(secret), "the body is signed");
    assert_eq!(
        r.header("content-type").map(str::to_ascii_lowercase),
        Some("application/json".into())
    );

    let body = r.json();
    let mut keys: Vec<_> = body.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["created_at", "data", "event_type", "id"]);
    assert_eq!(body["id"], event_id);
    assert_eq!(body["event_type"], event_type);
    assert!(body["data"].is_object());
    let created = body["created_at"].as_str().unwrap();
    assert!(created.ends_with('Z') && created.contains('T'), "{created}");
}

#[test]
fn a_test_event_arrives_signed_and_is_listed_for_admins() {
    let mut c = service();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let url = receiver.url("/hooks/acme?src=custody");
    let admin = c.credential("ops", &["--admin"]);
    let user = c.credential("acme", &[]);
    let secret = register(&c, "acme", &url);
    c.start();

    let id = queue_test(&c, "acme");
    let got = receiver.wait_until(WAIT, "the test event", |r| {
        r.iter().any(|r| r.answered.is_some())
    });
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/hooks/acme?src=custody");
    assert_signed_envelope(&got[0], &secret, &id, "webhook.test");
    assert_eq!(got[0].json()["data"]["tenant"], "acme");

    let admin = c.client(&admin);
    let events = admin_events(&admin, "delivered", |e| has_status(e, &id, "delivered"));
    let e = event(&events, &id).unwrap();
    assert_eq!(e["tenant"], "acme");
    assert_eq!(e["event_type"], "webhook.test");
    assert_eq!(e["attempts"], 1);
    assert_eq!(e["next_attempt_at"], Value::Null);
    assert_eq!(e["attempt_history"][0]["status_code"], 204);
    assert!(e["attempt_history"][0]["latency_ms"].is_u64());
    assert!(e["attempt_history"][0]["at"].is_string());
    let listing = admin.get("/v1/admin/webhooks").body;
    let text = String::from_utf8_lossy(&listing);
    assert!(!text.contains(&secret), "the secret is never listed");
    assert!(
        !text.contains("RECEIVER-PRIVATE"),
        "response bodies are never kept"
    );
    // Tenants do not reach the listing.
    assert_eq!(c.client(&user).get("/v1/admin/webhooks").status, 403);

    // Replacing the endpoint issues a new secret; later events are signed with it.
    let receiver2 = Receiver::start(|_, _| Answer::Status(200));
    let secret2 = register(&c, "acme", &receiver2.url("/v2"));
    assert_ne!(secret2, secret);
    let id2 = queue_test(&c, "acme");
    let got = receiver2.wait_until(WAIT, "the second test event", |r| {
        r.iter().any(|r| r.answered.is_some())
    });
    assert_signed_envelope(&got[0], &secret2, &id2, "webhook.test");
    assert!(!got[0].verifies_with(&secret));
    assert_eq!(receiver.requests().len(), 1);
}

#[test]
fn wallet_created_carries_the_wallet_as_its_get_returns_it() {
    let mut c = service();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let cred = c.credential("acme", &[]);
    let secret = register(&c, "acme", &receiver.url("/w"));
    c.start();
    let client = c.client(&cred);
    let r = client.post(
        "/v1/wallets",
        &serde_json::json!({ "external_user_id": "user-1", "network": "BSC" }),
        Some("wallet-key-000001"),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let wallet = r.json();
    let id = wallet["id"].as_str().unwrap();
    let got = receiver.wait_until(WAIT, "wallet.created", |r| {
        r.iter()
            .any(|r| r.json()["event_type"] == "wallet.created" && r.answered.is_some())
    });
    let delivery = got
        .iter()
        .find(|r| r.json()["event_type"] == "wallet.created")
        .unwrap();
    let event_id = delivery.event_id().to_owned();
    assert_signed_envelope(delivery, &secret, &event_id, "wallet.created");
    let fetched = client.get(&format!("/v1/wallets/{id}"));
    assert_eq!(fetched.status, 200);
    assert_eq!(delivery.json()["data"], fetched.json());
}

#[test]
fn three_failures_then_success_carry_one_event_id() {
    let mut c = service();
    let receiver = Receiver::start(|n, _| {
        if n < 3 {
            Answer::WithHeaders(503, vec![("Retry-After".into(), "0".into())])
        } else {
            Answer::Status(204)
        }
    });
    let admin = c.credential("ops", &["--admin"]);
    let secret = register(&c, "acme", &receiver.url("/flaky"));
    c.start();
    let id = queue_test(&c, "acme");
    let got = receiver.wait_until(WAIT, "four attempts", |r| {
        r.iter().any(|r| r.answered == Some(204))
    });
    assert_eq!(got.len(), 4);
    for r in &got {
        assert_signed_envelope(r, &secret, &id, "webhook.test");
        assert_eq!(r.body, got[0].body, "every retry sends the same bytes");
    }
    let statuses: Vec<_> = got.iter().map(|r| r.answered).collect();
    assert_eq!(statuses, [Some(503), Some(503), Some(503), Some(204)]);

    let events = admin_events(&c.client(&admin), "delivered", |e| {
        has_status(e, &id, "delivered")
    });
    let e = event(&events, &id).unwrap();
    assert_eq!(e["attempts"], 4);
    assert!(
        e["last_error"].is_null(),
        "a delivered event shows no error; its failures stay in attempt_history"
    );
    let codes: Vec<_> = e["attempt_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status_code"].as_u64().unwrap())
        .collect();
    assert_eq!(codes, [503, 503, 503, 204]);
}

#[test]
fn always_500_dead_letters_on_the_tenth_attempt_and_replay_redelivers() {
    let mut c = service();
    let healthy = Arc::new(AtomicBool::new(false));
    let h = Arc::clone(&healthy);
    let receiver = Receiver::start(move |_, _| {
        if h.load(Ordering::SeqCst) {
            Answer::Status(204)
        } else {
            Answer::Status(500)
        }
    });
    let admin = c.credential("ops", &["--admin"]);
    let secret = register(&c, "acme", &receiver.url("/down"));
    c.start();
    let admin = c.client(&admin);
    let id = queue_test(&c, "acme");
    let events = admin_events(&admin, "dead letter", |e| {
        has_status(e, &id, "dead_lettered")
    });
    let e = event(&events, &id).unwrap();
    assert_eq!(e["attempts"], 10);
    assert_eq!(e["last_error"], "HTTP 500");
    assert_eq!(e["next_attempt_at"], Value::Null);
    assert_eq!(e["attempt_history"].as_array().unwrap().len(), 10);
    // /v1/metrics counts each recorded outcome (just after its write: wait for it).
    let outcomes = |want: &'static [&'static str]| {
        c.wait_for(5, "the webhook outcomes in /v1/metrics", || {
            let text = String::from_utf8(admin.get("/v1/metrics").body).unwrap();
            want.iter().all(|w| text.contains(w)).then_some(())
        })
    };
    outcomes(&[
        r#"custody_webhook_deliveries_total{outcome="retry"} 9"#,
        r#"custody_webhook_deliveries_total{outcome="dead_lettered"} 1"#,
        r#"custody_webhook_deliveries_total{outcome="delivered"} 0"#,
    ]);
    // Nothing more is sent after the tenth attempt.
    std::thread::sleep(Duration::from_millis(600));
    let got = receiver.requests();
    assert_eq!(got.len(), 10);
    assert!(got
        .iter()
        .all(|r| r.event_id() == id && r.verifies_with(&secret)));

    // Replay re-queues it under the same id.
    healthy.store(true, Ordering::SeqCst);
    let out = c.cli_ok(&["webhooks", "replay", "--event-id", &id]);
    assert_eq!(
        (out["event_id"].as_str(), out["status"].as_str()),
        (Some(id.as_str()), Some("pending"))
    );
    let got = receiver.wait_until(WAIT, "the replayed event", |r| {
        r.iter().any(|r| r.answered == Some(204))
    });
    assert_eq!(got.len(), 11);
    assert_signed_envelope(&got[10], &secret, &id, "webhook.test");
    assert_eq!(got[10].body, got[0].body);
    let events = admin_events(&admin, "delivered after replay", |e| {
        has_status(e, &id, "delivered")
    });
    assert_eq!(event(&events, &id).unwrap()["attempts"], 11);
    outcomes(&[r#"custody_webhook_deliveries_total{outcome="delivered"} 1"#]);
    // Only a dead-lettered event can be replayed.
    let (ok, stdout, stderr) = c.cli(&["webhooks", "replay", "--event-id", &id]);
    assert!(
        !ok && stdout.is_empty() && stderr.contains("dead-lettered"),
        "{stderr}"
    );
}

#[test]
fn client_errors_dead_letter_at_once_and_redirects_are_retried_never_followed() {
    let mut c = service();
    let receiver = Receiver::start(|_, r| match r.path.as_str() {
        "/r400" => Answer::Status(400),
        "/r410" => Answer::Status(410),
        "/moved" => Answer::WithHeaders(302, vec![("Location".into(), "/target".into())]),
        "/target" => Answer::Status(204),
        _ => Answer::Status(404),
    });
    let admin = c.credential("ops", &["--admin"]);
    register(&c, "t400", &receiver.url("/r400"));
    register(&c, "t410", &receiver.url("/r410"));
    register(&c, "t302", &receiver.url("/moved"));
    c.start();
    let ids: Vec<String> = ["t400", "t410", "t302"]
        .iter()
        .map(|t| queue_test(&c, t))
        .collect();
    let events = admin_events(&c.client(&admin), "three dead letters", |e| {
        ids.iter().all(|id| has_status(e, id, "dead_lettered"))
    });
    for (id, code) in ids.iter().zip([400, 410]) {
        let e = event(&events, id).unwrap();
        assert_eq!(e["attempts"], 1, "{code}: dead-lettered at once");
        assert_eq!(e["attempt_history"][0]["status_code"], code);
    }
    // A redirect is a failed attempt (only 4xx are permanent, decisions §9): retried until
    // the 10th failure, never followed.
    let redirected = event(&events, &ids[2]).unwrap();
    assert_eq!(redirected["attempts"], 10, "{redirected}");
    assert_eq!(redirected["attempt_history"][0]["status_code"], 302);
    std::thread::sleep(Duration::from_millis(600));
    let paths: Vec<_> = receiver.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths.len(), 12, "{paths:?}");
    assert!(
        !paths.contains(&"/target".to_string()),
        "the redirect was followed"
    );
}

#[test]
fn undelivered_events_survive_kill_9() {
    let mut c = service();
    let release = Arc::new(AtomicBool::new(false));
    let healthy = Arc::new(AtomicBool::new(false));
    let (r, h) = (Arc::clone(&release), Arc::clone(&healthy));
    let receiver = Receiver::start(move |_, _| {
        if h.load(Ordering::SeqCst) {
            Answer::Status(204)
        } else {
            Answer::Hold(Arc::clone(&r))
        }
    });
    let admin = c.credential("ops", &["--admin"]);
    let secret = register(&c, "acme", &receiver.url("/slow"));
    // The killed process's claims are leases of timeout + 5 s: they run out, nothing releases
    // them in bulk (another instance could hold them).
    set_config(&c.data_dir(), "webhooks", "timeout_ms", "2000");
    c.start();
    let mut ids: Vec<String> = (0..3).map(|_| queue_test(&c, "acme")).collect();
    // Kill the server while its attempts are in flight (the receiver holds them).
    receiver.wait_until(WAIT, "attempts in flight", |r| r.len() == 3);
    c.kill9();
    release.store(true, Ordering::SeqCst);
    // One more event queued while the server is down.
    ids.push(queue_test(&c, "acme"));
    healthy.store(true, Ordering::SeqCst);
    c.start();
    let got = receiver.wait_until(WAIT, "every event delivered after the restart", |r| {
        ids.iter().all(|id| {
            r.iter()
                .any(|r| r.event_id() == id && r.answered == Some(204))
        })
    });
    for r in got.iter().filter(|r| r.answered == Some(204)) {
        assert!(r.verifies_with(&secret));
        assert!(ids.contains(&r.event_id().to_owned()), "no invented event");
    }
    admin_events(&c.client(&admin), "all delivered", |e| {
        ids.iter().all(|id| has_status(e, id, "delivered"))
    });
    assert_eq!(c.stop(), Some(0));
}

#[test]
fn endpoint_registration_refuses_unsafe_urls() {
    let c = Custody::init();
    // A data dir from before the [webhooks] section loads with its defaults.
    remove_config_section(&c.data_dir(), "webhooks");
    c.cli_ok(&["credentials", "list"]);
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1/hook",
        "https://127.1/hook",
        "https://0x7f.0.0.1/hook",
        "https://2130706433/hook",
        "https://0177.0.0.1/hook",
        "https://0.0.0.0/hook",
        "https://0/hook",
        "https://[::1]/hook",
        "https://[::]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://[::ffff:a9fe:a9fe]/hook",
        "https://[64:ff9b::a00:1]/hook",
        "https://[fe80::1]/hook",
        "https://[fc00::1]/hook",
        "https://[ff02::1]/hook",
        "https://10.0.0.1/hook",
        "https://172.16.0.1/hook",
        "https://192.168.1.1/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://100.64.0.1/hook",
        "https://192.0.2.1/hook",
        "https://198.51.100.1/hook",
        "https://203.0.113.1/hook",
        "https://224.0.0.1/hook",
        "https://255.255.255.255/hook",
        "https://240.0.0.1/hook",
        "https://localhost/hook",
        "https://hooks.localhost/hook",
        "http://93.184.215.14/hook",
        "ftp://93.184.215.14/hook",
        "https://user:pw@93.184.215.14/hook",
        "https://93.184.215.14@127.0.0.1/hook",
        "not a url",
    ] {
        let (ok, stdout, stderr) = c.cli(&["webhooks", "set", "--tenant", "acme", "--url", url]);
        assert!(!ok, "{url} was accepted: {stdout}");
        assert!(stdout.is_empty(), "{url}: {stdout}");
        assert!(stderr.contains("error:"), "{url}: {stderr}");
    }
    // A public address is accepted; the URL comes back in canonical form.
    let out = c.cli_ok(&[
        "webhooks",
        "set",
        "--tenant",
        "acme",
        "--url",
        "HTTPS://93.184.215.14:443/in",
    ]);
    assert_eq!(out["url"], "https://93.184.215.14/in");
    assert_eq!(out["secret"].as_str().unwrap().len(), 64);

    // The loopback switch opens http to loopback, and nothing else.
    set_config(&c.data_dir(), "webhooks", "allow_insecure_loopback", "true");
    c.cli_ok(&[
        "webhooks",
        "set",
        "--tenant",
        "acme",
        "--url",
        "http://127.0.0.1:9/hook",
    ]);
    for url in [
        "http://10.0.0.1/hook",
        "http://93.184.215.14/hook",
        "https://192.168.1.1/hook",
    ] {
        let (ok, _, _) = c.cli(&["webhooks", "set", "--tenant", "acme", "--url", url]);
        assert!(!ok, "{url} was accepted with the loopback switch");
    }

    // The other commands refuse what they cannot do, on stderr with a failure exit.
    for args in [
        vec!["webhooks", "test", "--tenant", "nobody"],
        vec!["webhooks", "test", "--tenant", "bad tenant"],
        vec!["webhooks", "replay", "--event-id", "not-a-uuid"],
        vec![
            "webhooks",
            "replay",
            "--event-id",
            "00000000-0000-4000-8000-000000000000",
        ],
    ] {
        let (ok, stdout, stderr) = c.cli(&args);
        assert!(
            !ok && stdout.is_empty() && stderr.contains("error:"),
            "{args:?}: {stderr}"
        );
    }
}
