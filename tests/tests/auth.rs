//! Signed-request rules of interface §5 and decisions §5, through the real server.

use custody_e2e::{now_s, raw_request, Custody};

/// Waits out the last seconds of a 60 s rate window, so a test that reads the figures twice
/// reads them in one window.
fn clear_of_a_window_edge() {
    let into = now_s().rem_euclid(60);
    if into >= 55 {
        std::thread::sleep(std::time::Duration::from_secs(
            u64::try_from(61 - into).unwrap(),
        ));
    }
}

fn server() -> (Custody, custody_e2e::Cred) {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    (c, cred)
}

#[test]
fn a_valid_request_is_answered_with_trace_and_rate_headers() {
    let (c, cred) = server();
    let r = c.client(&cred).get("/v1/assets?network=TRON");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let trace = r.header("x-trace-id").expect("trace id");
    assert!(uuid::Uuid::parse_str(trace).is_ok());
    assert_eq!(r.header("x-ratelimit-limit"), Some("600"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("599"));
    let body = r.json();
    assert_eq!(body["has_more"], false);
    let codes: Vec<_> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["TRX", "USDT"]);
}

#[test]
fn tampering_is_refused() {
    let (c, cred) = server();
    let client = c.client(&cred);

    let s = client.signed("GET", "/v1/networks", b"", None);
    let r = client.send_with(&s, "not-the-secret", b"", None);
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );
    assert_eq!(
        r.header("x-ratelimit-limit"),
        Some("600"),
        "a known credential's window is shown"
    );
    assert_eq!(
        r.header("x-ratelimit-remaining"),
        Some("600"),
        "a refused request is not counted"
    );

    // The body sent differs from the body signed.
    let mut s = client.signed("GET", "/v1/networks", b"", None);
    s.body = b"{\"x\":1}".to_vec();
    let r = client.send_with(&s, &cred.secret, b"", None);
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );

    // The path sent differs from the path signed.
    let s = client.signed("GET", "/v1/networks", b"", None);
    let r = client.send_with(&s, &cred.secret, b"", Some("/v1/assets"));
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );

    // An unknown key.
    let mut other = c.client(&cred);
    other.cred.api_key = "ck_00000000000000000000000000000000".into();
    let r = other.get("/v1/networks");
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );

    // Missing headers.
    let r = raw_request(&c.addr, "GET", "/v1/networks", &[], b"");
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );
    assert!(r.header("x-trace-id").is_some());
}

#[test]
fn the_timestamp_window_is_300_seconds_each_way() {
    let (c, cred) = server();
    let client = c.client(&cred);
    for offset in [-301i64, 301] {
        let mut s = client.signed("GET", "/v1/networks", b"", None);
        s.timestamp = (now_s() + offset).to_string();
        let r = client.send(&s);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "TIMESTAMP_OUT_OF_WINDOW"),
            "offset {offset}"
        );
    }
    for offset in [-295i64, 295] {
        let mut s = client.signed("GET", "/v1/networks", b"", None);
        s.timestamp = (now_s() + offset).to_string();
        assert_eq!(client.send(&s).status, 200, "offset {offset}");
    }
}

#[test]
fn nonces_are_single_use_and_16_to_128_chars() {
    let (c, cred) = server();
    let client = c.client(&cred);
    let s = client.signed("GET", "/v1/networks", b"", None);
    assert_eq!(client.send(&s).status, 200);
    let mut again = s.clone();
    again.timestamp = now_s().to_string();
    let r = client.send(&again);
    assert_eq!((r.status, r.code().as_str()), (401, "REPLAY_DETECTED"));

    for (len, ok) in [(15usize, false), (16, true), (128, true), (129, false)] {
        let mut s = client.signed("GET", "/v1/networks", b"", None);
        s.nonce = format!(
            "{}{}",
            &uuid::Uuid::new_v4().simple().to_string()[..len.min(32)],
            "y".repeat(len.saturating_sub(32))
        );
        assert_eq!(s.nonce.len(), len);
        let r = client.send(&s);
        if ok {
            assert_eq!(r.status, 200, "nonce of {len}");
        } else {
            assert_eq!(
                (r.status, r.code().as_str()),
                (401, "AUTHENTICATION_FAILED"),
                "nonce of {len}"
            );
        }
    }
}

#[test]
fn a_bad_signature_does_not_burn_the_nonce() {
    let (c, cred) = server();
    let client = c.client(&cred);
    let s = client.signed("GET", "/v1/networks", b"", None);
    let r = client.send_with(&s, "wrong-secret", b"", None);
    assert_eq!(r.status, 401);
    assert_eq!(
        client.send(&s).status,
        200,
        "the same nonce is still usable"
    );
}

#[test]
fn admin_area_needs_admin_credentials() {
    let mut c = Custody::init();
    let user = c.credential("acme", &[]);
    let admin = c.credential("ops", &["--admin"]);
    c.start();
    let r = c.client(&user).get("/v1/admin/audit");
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = c.client(&user).get("/v1/admin/not-a-resource");
    assert_eq!(
        (r.status, r.code().as_str()),
        (403, "FORBIDDEN"),
        "non-admins learn nothing of the area"
    );
    let r = c.client(&admin).get("/v1/admin/audit");
    assert_eq!(r.status, 200);
    let r = c.client(&admin).get("/v1/admin/not-a-resource");
    assert_eq!((r.status, r.code().as_str()), (404, "NOT_FOUND"));

    // Methods too: only an admin learns that GET is the one allowed here.
    let r = raw_request(&c.addr, "DELETE", "/v1/admin/audit", &[], b"");
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );
    let del = |cred| {
        let client = c.client(cred);
        client.send(&client.signed("DELETE", "/v1/admin/audit", b"", None))
    };
    let r = del(&user);
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = del(&admin);
    assert_eq!((r.status, r.code().as_str()), (405, "METHOD_NOT_ALLOWED"));
    assert_eq!(r.header("allow"), Some("GET"));
}

#[test]
fn missing_scope_is_forbidden() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--scopes", "wallets:read"]);
    c.start();
    let r = c.client(&cred).get("/v1/assets");
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
}

#[test]
fn rate_limit_counts_down_then_429_with_retry_after() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "5"]);
    c.start();
    let client = c.client(&cred);
    for expected in (0..5).rev() {
        let r = client.get("/v1/networks");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some(expected.to_string().as_str())
        );
    }
    let r = client.get("/v1/networks");
    assert_eq!((r.status, r.code().as_str()), (429, "RATE_LIMITED"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry));
}

#[test]
fn revoked_credentials_stop_working_at_once() {
    let (c, cred) = server();
    assert_eq!(c.client(&cred).get("/v1/networks").status, 200);
    c.cli_ok(&["credentials", "revoke", "--api-key", &cred.api_key]);
    let r = c.client(&cred).get("/v1/networks");
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED")
    );
}

/// The four routes that check a cached credential in their own transaction (custody-http's
/// `fence`), each as a fresh signed request of `client`.
fn fenced_requests(
    client: &custody_e2e::Client,
    wallet: &str,
    round: &str,
) -> Vec<(&'static str, custody_e2e::Signed)> {
    let transfer = serde_json::json!({
        "sender_external_user_id": "alice",
        "recipient_external_user_id": "bob",
        "asset": "USDT",
        "network": "BSC",
        "amount_units": "1000",
    });
    let new_wallet =
        serde_json::json!({ "external_user_id": format!("carol-{round}"), "network": "BSC" });
    vec![
        (
            "GET wallet",
            client.signed("GET", &format!("/v1/wallets/{wallet}"), b"", None),
        ),
        (
            "GET balances",
            client.signed("GET", &format!("/v1/wallets/{wallet}/balances"), b"", None),
        ),
        (
            "POST transfer",
            client.signed(
                "POST",
                "/v1/internal-transfers",
                transfer.to_string().as_bytes(),
                Some(&format!("fenced-transfer-{round}")),
            ),
        ),
        (
            "POST wallet",
            client.signed(
                "POST",
                "/v1/wallets",
                new_wallet.to_string().as_bytes(),
                Some(&format!("fenced-wallet-{round}")),
            ),
        ),
    ]
}

/// A server with alice (funded) and bob, and the id of alice's wallet; each of `keys` keys has
/// answered every fenced route once, so its credential is in the server's cache.
fn fenced_server(keys: usize) -> (Custody, Vec<custody_e2e::Cred>, custody_e2e::Cred, String) {
    let mut c = Custody::init();
    let creds: Vec<_> = (0..keys).map(|_| c.credential("acme", &[])).collect();
    let other = c.credential("acme", &[]);
    c.start();
    let alice = c.client(&other).wallet("alice", "BSC");
    c.client(&other).wallet("bob", "BSC");
    c.adjust("acme", "alice", "BSC", "USDT", true, "1000000");
    let wallet = alice["id"].as_str().unwrap().to_owned();
    for (k, cred) in creds.iter().enumerate() {
        let client = c.client(cred);
        for (what, s) in fenced_requests(&client, &wallet, &format!("warm-{k}")) {
            let r = client.send(&s);
            assert!(
                r.status < 300,
                "{what}: {}",
                String::from_utf8_lossy(&r.body)
            );
        }
    }
    (c, creds, other, wallet)
}

#[test]
fn a_key_revoked_by_another_process_is_refused_at_once_on_the_routes_that_check_it_in_their_transaction(
) {
    // One key per route, each revoked while cached: each route is its key's first request
    // after the revocation, so each route's own check is what refuses it.
    let (c, creds, other, wallet) = fenced_server(6);
    let before = c
        .client(&other)
        .available(&serde_json::json!({ "id": wallet }), "USDT");
    // Each key's window as its last answer before the revocation showed it; and one request
    // of the last key, to be replayed once its key is revoked.
    let remaining = |r: &custody_e2e::Resp| -> u32 {
        r.header("x-ratelimit-remaining").unwrap().parse().unwrap()
    };
    let last_seen: Vec<u32> = creds
        .iter()
        .map(|cred| remaining(&c.client(cred).get(&format!("/v1/wallets/{wallet}"))))
        .collect();
    let replayed_client = c.client(&creds[5]);
    let replayed = replayed_client.signed("GET", &format!("/v1/wallets/{wallet}"), b"", None);
    assert_eq!(replayed_client.send(&replayed).status, 200);
    for cred in &creds {
        c.cli_ok(&["credentials", "revoke", "--api-key", &cred.api_key]);
    }
    for (k, cred) in creds.iter().take(4).enumerate() {
        let client = c.client(cred);
        let (what, s) = fenced_requests(&client, &wallet, "revoked").swap_remove(k);
        let r = client.send(&s);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "AUTHENTICATION_FAILED"),
            "{what}"
        );
        // Refused, it is not counted: the window is as it was (or a new one began).
        let shown = remaining(&r);
        assert!(
            shown == last_seen[k] || shown == 600,
            "{what}: {shown} left, {} before",
            last_seen[k]
        );
    }
    // A replay by a revoked key is refused as a revoked key, not as a replay.
    let r = replayed_client.send(&replayed);
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED"),
        "a replay"
    );
    // A refusal on the way to the route is answered on the credential as it stands too.
    let r = c
        .client(&creds[4])
        .get(&format!("/v1/wallets/{wallet}?bogus=1"));
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "AUTHENTICATION_FAILED"),
        "a query refusal"
    );
    // Nothing of the refused commands happened.
    let other = c.client(&other);
    assert_eq!(
        other.available(&serde_json::json!({ "id": wallet }), "USDT"),
        before
    );
    let r = other.post(
        "/v1/wallets",
        &serde_json::json!({ "external_user_id": "carol-revoked", "network": "BSC" }),
        Some("carol-after-revoke"),
    );
    assert_eq!(r.status, 201, "the refused creation made no wallet");
}

#[test]
fn a_change_to_another_key_reruns_the_routes_that_check_in_their_transaction_once() {
    let (c, creds, _, wallet) = fenced_server(1);
    let client = c.client(&creds[0]);
    let start = client.available(&serde_json::json!({ "id": wallet }), "USDT");
    let sent = fenced_requests(&client, &wallet, "changed");
    for (what, s) in &sent {
        // Another key is made by another process before each request: the cached credential's
        // version is stale, while the credential itself stands.
        c.credential("acme", &[]);
        let r = client.send(s);
        assert!(
            r.status < 300,
            "{what}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    assert_eq!(
        client.available(&serde_json::json!({ "id": wallet }), "USDT"),
        start - 1000,
        "the transfer ran once"
    );
    // Each request's nonce was used once, by the run that answered.
    for (what, s) in &sent {
        let r = client.send(s);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "REPLAY_DETECTED"),
            "{what}"
        );
    }
}

#[test]
fn refusals_before_the_signature_show_a_known_key_its_window() {
    let (c, cred) = server();
    let client = c.client(&cred);
    clear_of_a_window_edge();
    assert_eq!(client.get("/v1/networks").status, 200);
    let figures = |r: &custody_e2e::Resp| {
        (
            r.header("x-ratelimit-limit").map(str::to_owned),
            r.header("x-ratelimit-remaining").map(str::to_owned),
        )
    };
    let expected = (Some("600".to_owned()), Some("599".to_owned()));

    // Header-format failures: the key is valid, something else is missing or malformed.
    let key = ("X-Service-Key", cred.api_key.clone());
    let ts = ("X-Service-Timestamp", now_s().to_string());
    for headers in [
        vec![key.clone()],
        vec![
            key.clone(),
            ("X-Service-Timestamp", "soon".to_owned()),
            ("X-Service-Nonce", custody_e2e::fresh_nonce()),
            ("X-Service-Signature", "00".repeat(32)),
        ],
        vec![
            key.clone(),
            ts.clone(),
            ("X-Service-Nonce", "short".to_owned()),
            ("X-Service-Signature", "00".repeat(32)),
        ],
    ] {
        let r = raw_request(&c.addr, "GET", "/v1/networks", &headers, b"");
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "AUTHENTICATION_FAILED")
        );
        assert_eq!(figures(&r), expected, "{headers:?}: shown, not counted");
    }

    // 413: refused on Content-Length before the body is read or the signature checked.
    let mut s = client.signed("POST", "/v1/wallets", b"", Some("too-large-01"));
    s.body = vec![b'a'; 64 * 1024 + 1];
    let r = client.send(&s);
    assert_eq!((r.status, r.code().as_str()), (413, "PAYLOAD_TOO_LARGE"));
    assert_eq!(figures(&r), expected, "413: shown, not counted");

    // An unknown key has no window to show.
    let r = raw_request(
        &c.addr,
        "GET",
        "/v1/networks",
        &[("X-Service-Key", "ck_unknown".to_owned())],
        b"",
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.header("x-ratelimit-limit"), None);
}

#[test]
fn a_replay_does_not_use_up_the_victims_window() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "5"]);
    c.start();
    let client = c.client(&cred);
    clear_of_a_window_edge();
    let s = client.signed("GET", "/v1/networks", b"", None);
    let r = client.send(&s);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-ratelimit-remaining"), Some("4"));
    for _ in 0..10 {
        let r = client.send(&s);
        assert_eq!((r.status, r.code().as_str()), (401, "REPLAY_DETECTED"));
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some("4"),
            "a replay is not counted"
        );
    }
    let r = client.get("/v1/networks");
    assert_eq!(r.status, 200, "the owner still has the rest of the window");
    assert_eq!(r.header("x-ratelimit-remaining"), Some("3"));
}
