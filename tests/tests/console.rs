//! The operator console and the API console in a real browser (decisions §15): a real
//! `custody serve`, Debian's Chromium driven by playwright-core (tests/console/console-e2e.mjs)
//! through sign-in (a wrong secret first), key creation with its secret shown once, the key
//! listed without it after a reload, a wallet created with it from the API console, the
//! withdrawals kill switch flipped and a quote refused, the audit record, the key revoked and
//! refused, reconciliations, alerts, webhooks and every listing. Screenshots of each page go
//! to `target/console-screenshots/`.
//!
//! Needs node, Chromium and playwright-core: `./scripts/install-playwright.sh` installs them
//! (the README's test command runs it) and prints the folder for CUSTODY_PLAYWRIGHT_DIR.

use std::path::{Path, PathBuf};
use std::process::Command;

use custody_e2e::Custody;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

fn playwright_dir() -> PathBuf {
    let dir = std::env::var("CUSTODY_PLAYWRIGHT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join(".cache/playwright"));
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core is not in {}: run ./scripts/install-playwright.sh and export \
         CUSTODY_PLAYWRIGHT_DIR",
        dir.display()
    );
    dir
}

fn screenshots_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"))
        .join("console-screenshots")
}

/// One open alert and one dead-lettered webhook event in the stopped service's database: the
/// console acknowledges and replays them (nothing else makes them without a chain).
fn seed(dir: &Path) -> (String, String) {
    let db = rusqlite::Connection::open(dir.join("custody.db")).unwrap();
    let alert = uuid::Uuid::new_v4().to_string();
    db.execute(
        "INSERT INTO alerts (id, kind, severity, message, created_at) \
         VALUES (?1, 'scan_stuck', 'warning', 'seeded by the console test', 1700000000000)",
        [&alert],
    )
    .unwrap();
    let event = uuid::Uuid::new_v4().to_string();
    db.execute(
        "INSERT INTO outbox (id, tenant, event_type, body, created_at, status, attempts, \
         next_attempt_at, updated_at) \
         VALUES (?1, 'acme', 'deposit.credited', x'7b7d', 1000, 'dead_lettered', 10, 1000, 1000)",
        [&event],
    )
    .unwrap();
    (alert, event)
}

#[test]
fn the_consoles_work_in_a_real_browser() {
    let playwright = playwright_dir();
    let mut custody = Custody::init();
    let admin = custody.credential("ops", &["--admin", "--pin", "2468"]);
    // The first start creates and migrates the database.
    custody.start();
    custody.stop();
    let (alert, event) = seed(&custody.data_dir());
    custody.start();

    let shots = screenshots_dir();
    let _ = std::fs::remove_dir_all(&shots);
    let script = workspace_root().join("tests/console/console-e2e.mjs");
    let out = Command::new("node")
        .arg(&script)
        .env("CONSOLE_BASE", format!("http://{}", custody.addr))
        .env("CONSOLE_ADMIN_KEY", &admin.api_key)
        .env("CONSOLE_ADMIN_SECRET", &admin.secret)
        .env("CONSOLE_ADMIN_PIN", "2468")
        .env("CONSOLE_ALERT_ID", &alert)
        .env("CONSOLE_DEAD_EVENT_ID", &event)
        .env("CONSOLE_SHOTS", &shots)
        .env("CUSTODY_PLAYWRIGHT_DIR", &playwright)
        .output()
        .expect("node runs (apt-get install nodejs)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success() && stdout.contains("console e2e: ok"),
        "the console script failed:\n{stdout}\n{stderr}"
    );
    let taken = std::fs::read_dir(&shots).unwrap().count();
    assert!(taken >= 15, "{taken} screenshots in {}", shots.display());
    println!("console screenshots: {}", shots.display());
}

/// The console's files over real HTTP, without a browser: types, the policy, no key inside.
#[test]
fn the_console_files_are_served_from_the_binary_with_a_strict_policy() {
    let mut custody = Custody::init();
    custody.start();
    let get = |path: &str| custody_e2e::raw_request(&custody.addr, "GET", path, &[], b"");
    for (path, kind) in [
        ("/console/", "text/html"),
        ("/console/api", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/client.js", "text/javascript"),
        ("/console/vendor/swagger-ui-bundle.js", "text/javascript"),
        ("/console/vendor/swagger-ui.css", "text/css"),
        ("/console/vendor/qrcode.mjs", "text/javascript"),
        ("/console/vendor/LICENSE-swagger-ui-dist", "text/plain"),
    ] {
        let r = get(path);
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.header("content-type").unwrap().starts_with(kind),
            "{path}: {:?}",
            r.header("content-type")
        );
        let csp = r.header("content-security-policy").expect("a policy");
        assert!(
            csp.contains("default-src 'none'")
                && csp.contains("script-src 'self';")
                && csp.contains("connect-src 'self'")
                && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    let page = String::from_utf8(get("/console/").body).unwrap();
    assert!(
        page.contains("/console/app.js") && !page.contains("http://") && !page.contains("https://")
    );
    let redirect = get("/console");
    assert_eq!(
        (redirect.status, redirect.header("location")),
        (308, Some("/console/"))
    );
    assert_eq!(get("/console/missing.js").status, 404);
    assert_eq!(
        custody_e2e::raw_request(&custody.addr, "POST", "/console/", &[], b"").status,
        405
    );
}
