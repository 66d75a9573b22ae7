//! Two `custody serve` processes on one PostgreSQL database (decisions §16), load-balanced by
//! the test: spends of one balance, nonces, idempotency keys and an instance killed mid-load.
//! Each test has a schema of its own in the test database (dropped afterwards).

use std::sync::Arc;
use std::thread;

use custody_e2e::{Client, Custody};
use custody_store_postgres::testing::TestSchema;
use serde_json::{json, Value};

fn transfer(to: &str, units: &str) -> Value {
    json!({
        "sender_external_user_id": "alice",
        "recipient_external_user_id": to,
        "asset": "USDT",
        "network": "BSC",
        "amount_units": units,
    })
}

/// A data dir initialized on the schema's database, with `env` besides. Its pools are small
/// (4 writers, 2 readers): tests run in parallel, each with two instances and CLI commands, on
/// a server whose `max_connections` is 100.
fn init_on(schema: &TestSchema, env: &[(&str, &str)]) -> Custody {
    let url = schema.url();
    let mut all = vec![("CUSTODY_DATABASE_URL", url.as_str())];
    all.extend_from_slice(env);
    let c = Custody::init_with(&["--insecure-dev-seed"], &all);
    custody_e2e::receiver::set_config(&c.data_dir(), "store", "writers", "4");
    custody_e2e::receiver::set_config(&c.data_dir(), "store", "readers", "2");
    c
}

/// Instance `a` (initialized on the schema's database) and `b` (a copy of its data dir), both
/// serving, and a credential of tenant acme.
fn two_instances(schema: &TestSchema) -> (Custody, Custody, custody_e2e::Cred) {
    let a = init_on(schema, &[]);
    let cred = a.credential("acme", &[]);
    let b = a.sibling();
    (a, b, cred)
}

#[test]
fn init_records_the_shared_database_and_creates_no_sqlite_file() {
    let schema = TestSchema::new();
    let c = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_DATABASE_URL", schema.url().as_str())],
    );
    assert!(!c.data_dir().join("custody.db").exists());
    let config = std::fs::read_to_string(c.data_dir().join("custody.toml")).unwrap();
    assert!(config.contains("postgres://"), "{config}");
    let cred = c.credential("acme", &[]);
    let listed = c.cli_ok(&["credentials", "list"]);
    assert!(listed.to_string().contains(&cred.api_key));

    // Another init on a database in use would bring a seed that cannot sign for its wallets.
    let other = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(custody_e2e::custody_bin())
        .arg("--data-dir")
        .arg(other.path().join("data"))
        .args(["init", "--insecure-dev-seed"])
        .env("CUSTODY_DATABASE_URL", schema.url())
        .env_remove("CUSTODY_DATA_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("already holds"), "{stderr}");
    assert!(
        !other.path().join("data").exists(),
        "nothing is left behind"
    );
}

/// A `custody` command with `url` as its database, run to its end (at most 60 s: a `serve` that
/// was not refused would run on, and is killed and reported).
fn run_on(data_dir: &std::path::Path, url: &str, args: &[&str]) -> (bool, String) {
    let mut child = std::process::Command::new(custody_e2e::custody_bin())
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env("CUSTODY_DATABASE_URL", url)
        .env_remove("CUSTODY_DATA_DIR")
        .env_remove("CUSTODY_PASSPHRASE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("custody {args:?} was not refused and still runs after 60 s");
        }
        thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn init_records_the_database_url_without_its_password() {
    let schema = TestSchema::new();
    // The server trusts local connections, so any password opens it.
    let plain = schema.url();
    let at = plain.find('@').expect("the test database url names a user");
    let url = format!("{}:s3cret-pw{}", &plain[..at], &plain[at..]);
    let c = Custody::init_with(&["--insecure-dev-seed"], &[("CUSTODY_DATABASE_URL", &url)]);
    let config = std::fs::read_to_string(c.data_dir().join("custody.toml")).unwrap();
    assert!(config.contains(&plain[..at]), "{config}");
    assert!(!config.contains("s3cret-pw"), "{config}");

    // Without CUSTODY_DATABASE_URL, the recorded URL plus CUSTODY_DATABASE_PASSWORD opens it.
    let out = std::process::Command::new(custody_e2e::custody_bin())
        .arg("--data-dir")
        .arg(c.data_dir())
        .args(["credentials", "list"])
        .env_remove("CUSTODY_DATABASE_URL")
        .env_remove("CUSTODY_DATA_DIR")
        .env("CUSTODY_DATABASE_PASSWORD", "s3cret-pw")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_shared_database_belongs_to_the_seed_that_first_opened_it() {
    let schema = TestSchema::new();
    // The first init binds the database to its seed, before it holds any credential or wallet.
    let first = init_on(&schema, &[]);

    // A second init with another (random) mnemonic: its seed would derive other addresses from
    // the same counters.
    let other = tempfile::tempdir().unwrap();
    let (ok, stderr) = run_on(
        &other.path().join("data"),
        &schema.url(),
        &["init", "--insecure-dev-seed"],
    );
    assert!(!ok, "a second seed is refused");
    assert!(stderr.contains("belongs to another seed"), "{stderr}");
    assert!(
        !other.path().join("data").exists(),
        "nothing is left behind"
    );

    // Another service's data dir (its own seed, its own database) pointed at this database.
    let elsewhere = TestSchema::new();
    let foreign = init_on(&elsewhere, &[]);
    let (ok, stderr) = run_on(
        &foreign.data_dir(),
        &schema.url(),
        &["serve", "--listen", "127.0.0.1:0"],
    );
    assert!(!ok, "serve with a foreign data dir is refused");
    assert!(stderr.contains("belongs to another seed"), "{stderr}");

    // The service's own data dir (and its copies) still open it.
    first.cli_ok(&["credentials", "list"]);
    first.sibling().cli_ok(&["credentials", "list"]);
}

#[test]
fn two_instances_spend_exactly_the_balance_and_share_nonces_and_keys() {
    let schema = TestSchema::new();
    let (mut a, mut b, cred) = two_instances(&schema);
    a.start();
    b.start();
    let (ca, cb) = (a.client(&cred), b.client(&cred));
    ca.wallet("alice", "BSC");
    cb.wallet("bob", "BSC");
    a.adjust("acme", "alice", "BSC", "USDT", true, "100");

    // 2 × 64 concurrent spends of 1 unit, half through each instance.
    let clients = Arc::new([ca, cb]);
    let spends: Vec<_> = (0..128)
        .map(|i| {
            let clients = Arc::clone(&clients);
            thread::spawn(move || {
                let r = clients[i % 2].post(
                    "/v1/internal-transfers",
                    &transfer("bob", "1"),
                    Some(&format!("spend-{i:06}")),
                );
                (r.status, r.code())
            })
        })
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for s in spends {
        match s.join().unwrap() {
            (201, _) => ok += 1,
            (422, code) if code == "INSUFFICIENT_BALANCE" => refused += 1,
            other => panic!("a spend answered {other:?}"),
        }
    }
    assert_eq!((ok, refused), (100, 28));
    let [ca, cb] = &*clients;
    let alice = ca.wallet("alice", "BSC");
    let bob = cb.wallet("bob", "BSC");
    assert_eq!(cb.available(&alice, "USDT"), 0);
    assert_eq!(ca.available(&bob, "USDT"), 100);

    // A nonce used on one instance is refused by the other.
    let target = format!("/v1/wallets/{}", alice["id"].as_str().unwrap());
    let signed = ca.signed("GET", &target, b"", None);
    assert_eq!(ca.send(&signed).status, 200);
    let replayed = cb.send(&signed);
    assert_eq!(
        (replayed.status, replayed.code().as_str()),
        (401, "REPLAY_DETECTED")
    );

    // An idempotency key replays across instances: one transfer, the same answer twice.
    a.adjust("acme", "alice", "BSC", "USDT", true, "10");
    let first = ca.post(
        "/v1/internal-transfers",
        &transfer("bob", "7"),
        Some("replay-000001"),
    );
    assert_eq!(first.status, 201);
    let again = cb.post(
        "/v1/internal-transfers",
        &transfer("bob", "7"),
        Some("replay-000001"),
    );
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.json()["id"], first.json()["id"]);
    assert_eq!(ca.available(&alice, "USDT"), 3);
    a.stop();
    b.stop();
}

/// Sends `body` under `key` to `first`, and to `second` when `first` is gone: the client's
/// retry after a lost instance.
fn post_with_failover(first: &Client, second: &Client, body: &Value, key: &str) -> (u16, String) {
    let bytes = serde_json::to_vec(body).unwrap();
    match first.try_send(&first.signed("POST", "/v1/internal-transfers", &bytes, Some(key))) {
        Some(r) => (r.status, r.code()),
        None => {
            let r = second.post("/v1/internal-transfers", body, Some(key));
            (r.status, r.code())
        }
    }
}

#[test]
fn an_instance_killed_mid_load_loses_nothing_and_does_nothing_twice() {
    let schema = TestSchema::new();
    let (mut a, mut b, cred) = two_instances(&schema);
    a.start();
    b.start();
    let (ca, cb) = (a.client(&cred), b.client(&cred));
    ca.wallet("alice", "BSC");
    cb.wallet("bob", "BSC");
    a.adjust("acme", "alice", "BSC", "USDT", true, "100");

    let clients = Arc::new([ca, cb]);
    let spends: Vec<_> = (0..128)
        .map(|i| {
            let clients = Arc::clone(&clients);
            thread::spawn(move || {
                let (first, second) = (&clients[i % 2], &clients[(i + 1) % 2]);
                let key = format!("load-{i:06}");
                let answer = post_with_failover(first, second, &transfer("bob", "1"), &key);
                // Whatever the first answer was, asking again (on the survivor) replays it.
                (i, key, answer)
            })
        })
        .collect();
    thread::sleep(std::time::Duration::from_millis(150));
    a.kill9();
    let mut answers = Vec::new();
    for s in spends {
        answers.push(s.join().unwrap());
    }
    let [_, cb] = &*clients;
    let mut ok = 0;
    for (i, key, (status, code)) in &answers {
        match (*status, code.as_str()) {
            (201, _) => ok += 1,
            (422, "INSUFFICIENT_BALANCE") => {}
            // Killed while answering: the survivor decides, once, under the same key.
            other => panic!("spend {i} answered {other:?}"),
        }
        let again = cb.post("/v1/internal-transfers", &transfer("bob", "1"), Some(key));
        assert_eq!(again.status, *status, "spend {i} replays its answer");
    }
    assert_eq!(ok, 100, "exactly the balance was spent");
    let alice = cb.wallet("alice", "BSC");
    let bob = cb.wallet("bob", "BSC");
    assert_eq!(cb.available(&alice, "USDT"), 0);
    assert_eq!(cb.available(&bob, "USDT"), 100);
    b.stop();
}

#[test]
fn deposits_are_credited_once_with_both_scanners_and_a_dead_instances_work_is_taken_over() {
    use custody_e2e::anvil::Anvil;
    use custody_e2e::receiver::{set_config, Answer, Receiver};

    const ETH: u128 = 1_000_000_000_000_000_000;
    let Some(anvil) = Anvil::start() else { return };
    let schema = TestSchema::new();
    let rpc = anvil.url();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let mut a = init_on(&schema, &[("CUSTODY_BSC_RPC_URLS", rpc.as_str())]);
    a.edit_config(
        "poll_interval_ms = 1000",
        &format!(
            "poll_interval_ms = 100\nstart_block = {}",
            anvil.block_number()
        ),
    );
    set_config(&a.data_dir(), "webhooks", "allow_insecure_loopback", "true");
    set_config(&a.data_dir(), "webhooks", "poll_interval_ms", "50");
    let cred = a.credential("acme", &["--rate-limit", "100000"]);
    a.cli_ok(&[
        "webhooks",
        "set",
        "--tenant",
        "acme",
        "--url",
        &receiver.url("/hook"),
    ]);
    let mut b = a.sibling();
    a.start();
    b.start();
    let (ca, cb) = (a.client(&cred), b.client(&cred));
    let alice = ca.wallet("alice", "BSC");
    let address = alice["address"].as_str().unwrap().to_owned();
    let funder = anvil.account(0).to_owned();
    let (pid_a, pid_b) = (a.pid().unwrap(), b.pid().unwrap());

    // Both instances run a BSC scanner: one holds the network's work lock and scans, the other
    // stands by. Each deposit is detected and credited once.
    let scanning = a.wait_for(30, "one instance holds the BSC scanner lock", || {
        scanner_lock_holder(&schema, "BSC")
    });
    assert!(
        scanning == pid_a || scanning == pid_b,
        "the lock is held by one of the two instances, not {scanning}"
    );
    let a_scans = scanning == pid_a;
    let amounts: Vec<u128> = (1..=4).map(|i| i * ETH / 10).collect();
    for wei in &amounts {
        anvil.send_value(&funder, &address, *wei);
    }
    a.wait_for(30, "four deposits detected", || {
        (cb.deposits("").len() == 4).then_some(())
    });
    anvil.mine(8);
    // The scanning instance dies mid-way through the confirmations: its session ends, its lock
    // with it, and the other takes the scanning over on its next tick.
    let (survivor_pid, cs) = if a_scans {
        a.kill9();
        (pid_b, &cb)
    } else {
        b.kill9();
        (pid_a, &ca)
    };
    anvil.mine(10);
    let watcher = if a_scans { &b } else { &a };
    watcher.wait_for(60, "the survivor holds the scanner lock", || {
        (scanner_lock_holder(&schema, "BSC") == Some(survivor_pid)).then_some(())
    });
    watcher.wait_for(60, "four deposits credited", || {
        (cs.deposits("?status=credited").len() == 4).then_some(())
    });
    let all = cs.deposits("");
    assert_eq!(all.len(), 4, "{all:#?}");
    assert_eq!(cs.available(&alice, "BNB"), amounts.iter().sum::<u128>());

    // Every deposit's credit event reaches the receiver: those the dead instance had claimed
    // are claimed again by the survivor once their lease ran out.
    let ids: Vec<String> = all
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    watcher.wait_for(90, "every credit delivered", || {
        let delivered: Vec<serde_json::Value> =
            receiver.requests().iter().map(|r| r.json()).collect();
        ids.iter()
            .all(|id| {
                delivered
                    .iter()
                    .any(|e| e["event_type"] == "deposit.credited" && e["data"]["id"] == *id)
            })
            .then_some(())
    });
    if a_scans {
        b.stop();
    } else {
        a.stop();
    }
}

/// The process id of the instance holding `network`'s scanner lock on `schema`, from the
/// holding session's application name (`custody work lock pid=N`). An advisory lock on a bigint
/// key shows its high half as `classid` and its low half as `objid`.
fn scanner_lock_holder(schema: &TestSchema, network: &str) -> Option<u32> {
    let (base, name, work) = (
        custody_store_postgres::testing::base_url(),
        schema.name().to_owned(),
        format!("scanner:{network}"),
    );
    thread::spawn(move || {
        let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
        let row = admin
            .query_opt(
                "WITH k AS (SELECT hashtextextended('custody-work:' || $1 || ':' || $2, 0) AS key)
                 SELECT a.application_name FROM pg_locks l
                 JOIN pg_stat_activity a ON a.pid = l.pid, k
                 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                   AND l.classid = ((k.key >> 32) & 4294967295)::oid
                   AND l.objid = (k.key & 4294967295)::oid",
                &[&name, &work],
            )
            .unwrap()?;
        let app: String = row.get(0);
        app.strip_prefix("custody work lock pid=")?.parse().ok()
    })
    .join()
    .unwrap()
}

#[test]
fn a_credentials_rate_limit_holds_across_instances() {
    let schema = TestSchema::new();
    let mut a = init_on(&schema, &[]);
    let cred = a.credential("acme", &["--rate-limit", "10"]);
    let mut b = a.sibling();
    a.start();
    b.start();
    let (ca, cb) = (a.client(&cred), b.client(&cred));
    // Windows are fixed 60 s ones: start well inside one, so all requests count in it.
    while custody_e2e::now_s().rem_euclid(60) > 45 {
        thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut statuses = Vec::new();
    for i in 0..12 {
        let client = if i % 2 == 0 { &ca } else { &cb };
        let r = client.get("/v1/networks");
        statuses.push((r.status, r.code()));
    }
    let allowed = statuses.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(allowed, 10, "{statuses:?}");
    assert!(
        statuses[10..]
            .iter()
            .all(|(s, c)| *s == 429 && c == "RATE_LIMITED"),
        "{statuses:?}"
    );
    a.stop();
    b.stop();
}

#[test]
fn withdrawals_through_two_instances_are_paid_once_when_one_dies() {
    use custody_e2e::anvil::Anvil;
    use custody_e2e::receiver::set_config;

    const ETH: u128 = 1_000_000_000_000_000_000;
    const DESTINATION: &str = "0x00000000000000000000000000000000000000D5";
    let Some(anvil) = Anvil::start() else { return };
    let schema = TestSchema::new();
    let rpc = anvil.url();
    let mut a = init_on(&schema, &[("CUSTODY_BSC_RPC_URLS", rpc.as_str())]);
    set_config(&a.data_dir(), "bsc", "poll_interval_ms", "100");
    set_config(
        &a.data_dir(),
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    // A short lease, so that the survivor takes a dead broadcaster's payments over quickly.
    set_config(&a.data_dir(), "bsc.sending", "lease_ms", "3000");
    let cred = a.credential("acme", &["--rate-limit", "100000"]);
    let hot = a.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, 20 * ETH);
    let mut b = a.sibling();
    a.start();
    b.start();
    let (ca, cb) = (a.client(&cred), b.client(&cred));
    ca.wallet("alice", "BSC");
    a.adjust("acme", "alice", "BSC", "BNB", true, &(10 * ETH).to_string());

    // Six withdrawals, each quoted on one instance and created on the other.
    let mut ids = Vec::new();
    for i in 0..6 {
        let (quoting, creating) = if i % 2 == 0 { (&ca, &cb) } else { (&cb, &ca) };
        let quote = quoting.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": DESTINATION, "amount_units": (ETH / 10).to_string() }),
            None,
        );
        assert_eq!(quote.status, 201, "{:?}", quote.json());
        let created = creating.post(
            "/v1/withdrawals",
            &json!({ "quote_id": quote.json()["id"] }),
            Some(&format!("withdraw-{i:04}")),
        );
        assert_eq!(created.status, 201, "{:?}", created.json());
        ids.push(created.json()["id"].as_str().unwrap().to_owned());
    }
    // One instance dies while the payments go out; the other's broadcaster finishes them.
    a.kill9();
    let statuses = b.wait_for(120, "every withdrawal confirmed", || {
        anvil.mine(1);
        let all: Vec<Value> = ids
            .iter()
            .map(|id| cb.get(&format!("/v1/withdrawals/{id}")).json())
            .collect();
        all.iter()
            .all(|w| w["status"] == "confirmed")
            .then_some(all)
    });
    assert_eq!(
        anvil.balance(DESTINATION),
        6 * ETH / 10,
        "every withdrawal paid exactly once"
    );
    let mut hashes: Vec<&str> = statuses
        .iter()
        .map(|w| w["tx_hash"].as_str().unwrap())
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    assert_eq!(hashes.len(), 6, "one transaction each");
    let nonce = anvil.rpc("eth_getTransactionCount", json!([hot, "latest"]));
    assert_eq!(
        custody_e2e::anvil::hex_u64(&nonce),
        6,
        "the hot wallet used six nonces"
    );
    let (ok, out, _) = b.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    b.stop();
}
