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
