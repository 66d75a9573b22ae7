//! A crash loses no acknowledged transfer and forgets no acknowledged nonce: reads' nonces are
//! accepted in memory and logged in batches under a fence (custody_core::auth::nonce_set), and
//! `kill -9` in the middle of a load must not let any of them, or any transfer's, be replayed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use custody_e2e::{now_s, Client, Custody, Signed};
use serde_json::json;

fn transfer_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
        "asset": "BNB", "network": "BSC", "amount_units": "1"
    }))
    .unwrap()
}

/// Every request the server answered with `expect`, exactly as it was sent, with its body.
type Acknowledged = Arc<Mutex<Vec<(Signed, Vec<u8>)>>>;

fn load(
    client: &Arc<Client>,
    stop: &Arc<AtomicBool>,
    acknowledged: &Acknowledged,
    make: impl Fn(usize) -> Signed + Send + 'static,
    expect: u16,
) -> std::thread::JoinHandle<()> {
    let (client, stop, acknowledged) = (
        Arc::clone(client),
        Arc::clone(stop),
        Arc::clone(acknowledged),
    );
    std::thread::spawn(move || {
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let s = make(i);
            match client.try_send(&s) {
                Some(r) if r.status == expect => acknowledged.lock().unwrap().push((s, r.body)),
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
}

#[test]
fn kill_9_mid_load_keeps_every_acknowledged_transfer_and_refuses_every_acknowledged_nonce() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &["--rate-limit", "1000000"]);
    c.start();
    let client = Arc::new(c.client(&cred));
    let alice = client.wallet("alice", "BSC");
    client.wallet("bob", "BSC");
    c.adjust("acme", "alice", "BSC", "BNB", true, "1000000");
    let wallet_path = format!("/v1/wallets/{}", alice["id"].as_str().unwrap());

    let transfers: Acknowledged = Arc::default();
    let reads: Acknowledged = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for t in 0..6 {
        let signer = Arc::clone(&client);
        workers.push(load(
            &client,
            &stop,
            &transfers,
            move |i| {
                let key = format!("crash-{t:02}-{i:06}");
                signer.signed(
                    "POST",
                    "/v1/internal-transfers",
                    &transfer_body(),
                    Some(&key),
                )
            },
            201,
        ));
    }
    for t in 0..6 {
        let signer = Arc::clone(&client);
        let path = if t % 2 == 0 {
            wallet_path.clone()
        } else {
            format!("{wallet_path}/balances")
        };
        workers.push(load(
            &client,
            &stop,
            &reads,
            move |_| signer.signed("GET", &path, b"", None),
            200,
        ));
    }
    let started = Instant::now();
    while (transfers.lock().unwrap().len() < 150 || reads.lock().unwrap().len() < 300)
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    c.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let transfers = transfers.lock().unwrap().clone();
    let reads = reads.lock().unwrap().clone();
    assert!(
        transfers.len() >= 150 && reads.len() >= 300,
        "the load ran: {} transfers, {} reads",
        transfers.len(),
        reads.len()
    );

    c.start();
    let after = c.client(&cred);
    // A fresh request is served at once after the restart.
    assert_eq!(after.get(&wallet_path).status, 200);
    for (s, _) in transfers.iter().chain(reads.iter()) {
        let r = after.send(s);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "REPLAY_DETECTED"),
            "{} {} with nonce {} was acknowledged before the crash",
            s.method,
            s.target,
            s.nonce
        );
    }
    // A transfer's nonce is kept with its transfer: reused with a later timestamp it is
    // refused too (a read's nonce accepted just before the crash is refused with its own
    // timestamp, by the fence's band).
    for (s, _) in &transfers {
        let r = after.send(&reused(s));
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "REPLAY_DETECTED"),
            "transfer nonce {} reused",
            s.nonce
        );
    }
    // Every acknowledged transfer is there: its key answers the stored response.
    for (s, body) in &transfers {
        let again = after.signed(
            "POST",
            "/v1/internal-transfers",
            &s.body,
            s.idempotency_key.as_deref(),
        );
        let r = after.send(&again);
        assert_eq!(r.status, 201);
        assert_eq!(r.header("idempotent-replayed"), Some("true"));
        assert_eq!(&r.body, body);
    }
    let bob = after.wallet("bob", "BSC");
    let alice = after.wallet("alice", "BSC");
    let (a, b) = (after.available(&alice, "BNB"), after.available(&bob, "BNB"));
    assert_eq!(a + b, 1_000_000, "nothing half-written");
    assert!(b >= transfers.len() as u128);
    let (ok, out, err) = c.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}{err}");
}

#[test]
fn a_second_server_on_the_same_data_dir_is_refused() {
    let mut c = Custody::init();
    c.start();
    let (ok, _, err) = c.cli(&["serve", "--listen", "127.0.0.1:0"]);
    assert!(!ok);
    assert!(err.contains("another custody serve is running"), "{err}");
    // The first one still serves, and once it stopped cleanly the dir can be served again.
    assert_eq!(c.stop(), Some(0));
    c.start();
}

/// A reused nonce, not only a replayed request: the same nonce signed again with a later
/// timestamp.
fn reused(s: &Signed) -> Signed {
    let ts: i64 = s.timestamp.parse().unwrap();
    Signed {
        timestamp: now_s().max(ts + 1).to_string(),
        ..s.clone()
    }
}

#[test]
fn a_clean_restart_keeps_reads_nonces_and_refuses_no_fresh_request() {
    let mut c = Custody::init();
    let cred = c.credential("acme", &[]);
    c.start();
    let client = c.client(&cred);
    let wallet = client.wallet("alice", "BSC");
    client.wallet("bob", "BSC");
    c.adjust("acme", "alice", "BSC", "BNB", true, "1000");
    let path = format!("/v1/wallets/{}", wallet["id"].as_str().unwrap());
    let reads: Vec<Signed> = (0..50)
        .map(|_| {
            let s = client.signed("GET", &path, b"", None);
            assert_eq!(client.send(&s).status, 200);
            s
        })
        .collect();
    let transfers: Vec<Signed> = (0..10)
        .map(|i| {
            let key = format!("clean-{i:04}");
            let s = client.signed(
                "POST",
                "/v1/internal-transfers",
                &transfer_body(),
                Some(&key),
            );
            assert_eq!(client.send(&s).status, 201);
            s
        })
        .collect();
    // SIGTERM: the nonce log writes what it holds and marks its fence clean.
    assert_eq!(c.stop(), Some(0));
    c.start();
    let after = c.client(&cred);
    assert_eq!(
        after.get(&path).status,
        200,
        "no band after a clean stop: a request signed now passes at once"
    );
    for s in &reads {
        let r = after.send(s);
        assert_eq!((r.status, r.code().as_str()), (401, "REPLAY_DETECTED"));
    }
    // The nonces are kept for their window whatever the timestamp: a read's or a transfer's
    // nonce used again, on a read or on a transfer, is refused after the restart.
    for s in reads.iter().chain(transfers.iter()) {
        for method in ["GET", "POST"] {
            let again = if method == "GET" {
                Signed {
                    method: "GET".into(),
                    target: path.clone(),
                    body: Vec::new(),
                    idempotency_key: None,
                    ..reused(s)
                }
            } else {
                Signed {
                    method: "POST".into(),
                    target: "/v1/internal-transfers".into(),
                    body: transfer_body(),
                    idempotency_key: Some(format!("reuse-{}", s.nonce)),
                    ..reused(s)
                }
            };
            let r = after.send(&again);
            assert_eq!(
                (r.status, r.code().as_str()),
                (401, "REPLAY_DETECTED"),
                "{} nonce {} reused on a {method}",
                s.method,
                s.nonce
            );
        }
    }
    assert_eq!(after.available(&after.wallet("bob", "BSC"), "BNB"), 10);
}
