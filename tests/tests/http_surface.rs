//! The HTTP surface: public routes, unknown routes and methods, body and query limits, the
//! error shape, and graceful shutdown.

use custody_e2e::{raw_request, Custody};

#[test]
fn public_routes_and_the_openapi_document() {
    let mut c = Custody::init();
    c.start();
    let r = raw_request(&c.addr, "GET", "/v1/health", &[], b"");
    assert_eq!(r.status, 200);
    assert!(r.header("x-trace-id").is_some());
    let r = raw_request(&c.addr, "GET", "/v1/openapi.json", &[], b"");
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/networks",
        "/assets",
        "/swap-pairs",
        "/health",
        "/admin/{resource}",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} documented");
    }
    assert_eq!(
        doc["components"]["schemas"]["Error"]["additionalProperties"],
        false
    );
}

#[test]
fn unknown_routes_methods_queries_and_bodies() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);

    let r = raw_request(&c.addr, "GET", "/v1/nope", &[], b"");
    assert_eq!((r.status, r.code().as_str()), (404, "NOT_FOUND"));
    let r = raw_request(&c.addr, "GET", "/v2/assets", &[], b"");
    assert_eq!(r.status, 404);
    for method in ["DELETE", "PUT", "PATCH", "TRACE", "POST"] {
        let r = raw_request(&c.addr, method, "/v1/assets", &[], b"");
        assert_eq!(
            (r.status, r.code().as_str()),
            (405, "METHOD_NOT_ALLOWED"),
            "{method}"
        );
    }

    let r = client.get("/v1/assets?network=DOGE");
    assert_eq!((r.status, r.code().as_str()), (422, "VALIDATION_FAILED"));
    let r = client.get("/v1/assets?color=red");
    assert_eq!((r.status, r.code().as_str()), (422, "VALIDATION_FAILED"));
    assert_eq!(r.json()["details"][0]["field"], "color");

    // Over 64 KiB: refused before anything else is read.
    let big = vec![b'a'; 64 * 1024 + 1];
    let r = raw_request(&c.addr, "GET", "/v1/assets", &[], &big);
    assert_eq!((r.status, r.code().as_str()), (413, "PAYLOAD_TOO_LARGE"));

    // Error bodies have exactly the documented fields.
    let r = raw_request(&c.addr, "GET", "/v1/nope", &[], b"");
    let body = r.json();
    let mut keys: Vec<_> = body.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["code", "message", "trace_id"]);
    assert_eq!(body["trace_id"].as_str(), r.header("x-trace-id"));
}

#[test]
fn catalog_listings() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let nets = client.get("/v1/networks").json();
    let names: Vec<_> = nets["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["network"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["BSC", "TRON"]);
    assert_eq!(nets["data"][0]["required_confirmations"], 15);
    assert_eq!(nets["data"][1]["required_confirmations"], 19);
    let assets = client.get("/v1/assets").json();
    assert_eq!(assets["data"].as_array().unwrap().len(), 5);
    let usdt_bsc = &assets["data"][1];
    assert_eq!(
        usdt_bsc["contract"],
        "0x55d398326f99059fF775485246999027B3197955"
    );
    assert_eq!(usdt_bsc["decimals"], 18);
    let pairs = client.get("/v1/swap-pairs").json();
    assert_eq!(pairs["data"][0]["pair"], "BNB-USDT");
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let mut c = Custody::init();
    c.start();
    assert_eq!(c.stop(), Some(0));
}

#[test]
fn init_refuses_an_existing_dir_and_needs_a_passphrase() {
    let c = Custody::init();
    let (ok, _, err) = c.cli(&["init", "--insecure-dev-seed"]);
    assert!(!ok);
    assert!(err.contains("refusing to overwrite"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(custody_e2e::custody_bin())
        .args(["--data-dir", dir.path().join("d").to_str().unwrap(), "init"])
        .env_remove("CUSTODY_PASSPHRASE")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CUSTODY_PASSPHRASE"));
}

#[test]
fn a_passphrase_protected_seed_needs_the_passphrase_to_serve() {
    let pass = [("CUSTODY_PASSPHRASE", "correct horse battery staple")];
    let c = Custody::init_with(&[], &pass);
    let cred = c.credential("acme", &[]);
    assert_eq!(cred.secret.len(), 64);
    let raw = std::fs::read(c.data_dir().join("custody.db")).unwrap();
    assert!(
        !raw.windows(cred.secret.len())
            .any(|w| w == cred.secret.as_bytes()),
        "the HMAC secret is not stored in clear"
    );
    let seed = std::fs::read_to_string(c.data_dir().join("seed.json")).unwrap();
    assert!(seed.contains("\"protection\": \"passphrase\""));

    // The process that holds the decrypted seed writes no core file.
    let mut c = c;
    c.start();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", c.pid().unwrap())).unwrap();
    let core = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap();
    assert_eq!(
        core.split_whitespace().skip(4).take(2).collect::<Vec<_>>(),
        ["0", "0"],
        "{core}"
    );
    c.stop();

    let out = std::process::Command::new(custody_e2e::custody_bin())
        .args([
            "--data-dir",
            c.data_dir().to_str().unwrap(),
            "credentials",
            "list",
        ])
        .env("CUSTODY_PASSPHRASE", "wrong horse battery staple")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("passphrase is wrong"));
}

#[test]
fn init_builds_the_data_dir_whole_or_not_at_all() {
    let parent = tempfile::tempdir().unwrap();
    let target = parent.path().join("data");
    std::fs::create_dir(&target).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--data-dir",
            target.to_str().unwrap(),
            "init",
            "--insecure-dev-seed",
        ];
        args.extend_from_slice(extra);
        std::process::Command::new(custody_e2e::custody_bin())
            .args(&args)
            .output()
            .unwrap()
    };
    // A bad mnemonic file fails before anything is made.
    let bad = parent.path().join("bad-mnemonic");
    std::fs::write(&bad, "not a mnemonic at all").unwrap();
    assert!(!run(&["--mnemonic-file", bad.to_str().unwrap()])
        .status
        .success());
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nothing half-made"
    );

    // An existing empty directory is accepted and filled in one move.
    assert!(run(&[]).status.success());
    for file in ["custody.toml", "custody.db", "seed.json"] {
        assert!(target.join(file).exists(), "{file}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".init-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
