//! Crash loops: rounds of `kill -9` at a random moment under mixed load (internal transfers,
//! withdrawals from quotes, deposits arriving on anvil). After each restart every
//! acknowledged write is there (an acknowledged transfer's idempotency key replays its stored
//! answer; an acknowledged withdrawal reads back), and a LEDGER reconciliation through the
//! admin routes is balanced. At the end, with the chain mined to depth: every acknowledged
//! withdrawal is confirmed and the destination received exactly their sum on the node (none
//! paid twice), every deposit sent is credited exactly once. Seeded; 5 rounds in the short
//! profile, 20 in the long one (docs/reliability.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use custody_e2e::anvil::Anvil;
use custody_e2e::profile::{self, Rng};
use custody_e2e::receiver::set_config;
use custody_e2e::{Client, Cred, Custody};
use serde_json::{json, Value};

const ETH: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000C7";
/// Above the default fee policy's minimum (10^(decimals-4)).
const WITHDRAWN: u128 = 1_000_000_000_000_000;

#[derive(Default)]
struct Acknowledged {
    /// (idempotency key, body sent, transfer id)
    transfers: Vec<(String, Value, String)>,
    withdrawals: Vec<String>,
}

fn reconcile_ledger(custody: &Custody, admin: &Client) -> Value {
    let r = admin.post("/v1/admin/reconcile", &json!({ "scope": "LEDGER" }), None);
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    custody.wait_for(30, "the LEDGER reconciliation", || {
        admin.get("/v1/admin/reconciliations?limit=20").json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["id"] == id.as_str())
            .filter(|row| row["status"] == "completed" || row["status"] == "failed")
            .cloned()
    })
}

/// Sends transfers and withdrawals until `stop`, recording what the server acknowledged.
fn load(client: &Client, stop: &AtomicBool, acked: &Mutex<Acknowledged>, worker: usize) {
    let mut n = 0_u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = format!("crash-{worker}-{}", uuid::Uuid::new_v4());
        if n % 3 == 0 {
            let quote = client.signed(
                "POST",
                "/v1/withdrawals/quote",
                json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                        "destination_address": DESTINATION, "amount_units": WITHDRAWN.to_string() })
                .to_string()
                .as_bytes(),
                None,
            );
            let Some(q) = client.try_send(&quote) else {
                continue;
            };
            if q.status != 201 {
                continue;
            }
            let body = json!({ "quote_id": q.json()["id"] }).to_string();
            let s = client.signed("POST", "/v1/withdrawals", body.as_bytes(), Some(&key));
            if let Some(r) = client.try_send(&s) {
                if r.status == 201 {
                    let id = r.json()["id"].as_str().unwrap().to_owned();
                    acked.lock().unwrap().withdrawals.push(id);
                }
            }
        } else {
            let body = json!({ "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
                               "asset": "BNB", "network": "BSC", "amount_units": "1" });
            let s = client.signed(
                "POST",
                "/v1/internal-transfers",
                body.to_string().as_bytes(),
                Some(&key),
            );
            if let Some(r) = client.try_send(&s) {
                if r.status == 201 {
                    let id = r.json()["id"].as_str().unwrap().to_owned();
                    acked.lock().unwrap().transfers.push((key, body, id));
                }
            }
        }
    }
}

/// Every withdrawal of every tenant, through the admin listing's pages.
fn all_withdrawals(admin: &Client) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = admin
            .get(&format!("/v1/admin/withdrawals?limit=100{cursor}"))
            .json();
        let data = page["data"].as_array().unwrap();
        rows.extend(data.iter().cloned());
        if page["has_more"] != true {
            return rows;
        }
        cursor = format!(
            "&starting_after={}",
            data.last().unwrap()["id"].as_str().unwrap()
        );
    }
}

fn setup(anvil: &Anvil) -> (Custody, Cred, Cred) {
    let custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(&dir, "bsc", "confirmations", "3");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "bsc.sending", "replace_after_ms", "3000");
    set_config(&dir, "bsc.sending", "rebroadcast_after_ms", "1000");
    set_config(&dir, "bsc.sending", "lease_ms", "3000");
    set_config(&dir, "reconciliation", "ledger_every_ms", "0");
    set_config(&dir, "reconciliation", "treasury_every_ms", "0");
    set_config(&dir, "reconciliation", "claim_interval_ms", "100");
    let cred = custody.credential("acme", &["--rate-limit", "100000000"]);
    let admin = custody.credential("ops", &["--admin", "--rate-limit", "100000000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, 100 * ETH);
    (custody, cred, admin)
}

#[test]
fn kill_9_under_mixed_load_loses_no_acknowledged_write_and_pays_nothing_twice() {
    let Some(anvil) = Anvil::start() else { return };
    let (mut rng, seed) = Rng::from_env();
    let rounds = profile::pick(5, 20);
    println!("crash loop: seed {seed} (CUSTODY_RELIABILITY_SEED={seed} replays its timing)");
    let (mut custody, cred, admin_cred) = setup(&anvil);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "BSC");
    client.wallet("bob", "BSC");
    let carol = client.wallet("carol", "BSC");
    custody.adjust("acme", "alice", "BSC", "BNB", true, &(50 * ETH).to_string());
    let carol_address = carol["address"].as_str().unwrap().to_owned();

    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let mut deposits_sent = Vec::new();
    let started = std::time::Instant::now();
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (client, stop, acked) =
                    (custody.client(&cred), Arc::clone(&stop), Arc::clone(&acked));
                std::thread::spawn(move || load(&client, &stop, &acked, w))
            })
            .collect();
        // A deposit lands on chain while the service runs (or is about to die).
        deposits_sent.push(anvil.send_value(anvil.account(1), &carol_address, ETH / 1000));
        let alive = Duration::from_millis(200 + u64::try_from(rng.below(1800)).unwrap());
        std::thread::sleep(alive);
        custody.kill9();
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
        anvil.mine(1);
        custody.start();

        // Every acknowledged write is there.
        let client = custody.client(&cred);
        let admin = custody.client(&admin_cred);
        let snapshot = {
            let a = acked.lock().unwrap();
            (a.transfers.clone(), a.withdrawals.clone())
        };
        for (key, body, id) in &snapshot.0 {
            let r = client.post("/v1/internal-transfers", body, Some(key));
            assert_eq!(r.status, 201, "round {round}: transfer {key} after restart");
            assert_eq!(r.header("idempotent-replayed"), Some("true"), "{key}");
            assert_eq!(r.json()["id"], id.as_str(), "{key}");
        }
        for id in &snapshot.1 {
            let r = client.get(&format!("/v1/withdrawals/{id}"));
            assert_eq!(
                r.status, 200,
                "round {round}: withdrawal {id} after restart"
            );
        }
        let ledger = reconcile_ledger(&custody, &admin);
        assert_eq!(ledger["status"], "completed", "round {round}: {ledger}");
        assert_eq!(ledger["balanced"], true, "round {round}: {ledger}");
        println!(
            "crash loop: round {round}: killed after {} ms; {} transfers and {} withdrawals acknowledged so far, all present; LEDGER balanced",
            alive.as_millis(),
            snapshot.0.len(),
            snapshot.1.len()
        );
    }

    // The end of the story on chain: mine to depth until every withdrawal the store holds
    // (acknowledged or not: a kill may come between the commit and the answer) is final.
    let acked = acked.lock().unwrap();
    let (client, admin) = (custody.client(&cred), custody.client(&admin_cred));
    let all = custody.wait_for(180, "every withdrawal final", || {
        let rows = all_withdrawals(&admin);
        if rows
            .iter()
            .all(|w| w["status"] == "confirmed" || w["status"] == "failed")
        {
            return Some(rows);
        }
        anvil.mine(1);
        None
    });
    let confirmed: Vec<&Value> = all.iter().filter(|w| w["status"] == "confirmed").collect();
    assert_eq!(confirmed.len(), all.len(), "no withdrawal failed: {all:?}");
    for id in &acked.withdrawals {
        assert!(
            confirmed.iter().any(|w| w["id"] == id.as_str()),
            "acknowledged withdrawal {id} confirmed"
        );
    }
    assert_eq!(
        anvil.balance(DESTINATION),
        u128::try_from(confirmed.len()).unwrap() * WITHDRAWN,
        "the destination was paid exactly once per withdrawal"
    );
    // Every deposit sent is credited exactly once.
    let credited = custody.wait_for(120, "every deposit credited", || {
        let d = client.deposits("?external_user_id=carol&limit=100");
        let done = d.len() == deposits_sent.len() && d.iter().all(|d| d["status"] == "credited");
        if !done {
            anvil.mine(1);
        }
        done.then_some(d)
    });
    let mut hashes: Vec<&str> = credited
        .iter()
        .map(|d| d["tx_hash"].as_str().unwrap())
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    assert_eq!(
        hashes.len(),
        deposits_sent.len(),
        "one deposit per transaction"
    );
    assert_eq!(
        client.available(&carol, "BNB"),
        u128::try_from(deposits_sent.len()).unwrap() * (ETH / 1000),
        "carol credited once per deposit"
    );
    let ledger = reconcile_ledger(&custody, &admin);
    assert_eq!(ledger["balanced"], true, "{ledger}");
    assert!(
        client.available(&alice, "BNB") < 50 * ETH,
        "the load moved alice's funds"
    );
    println!(
        "crash loop: {rounds} rounds of kill -9 in {:.0} s: {} transfers and {} withdrawals acknowledged, {} withdrawals paid once each on the node, {} deposits credited once each",
        started.elapsed().as_secs_f64(),
        acked.transfers.len(),
        acked.withdrawals.len(),
        confirmed.len(),
        deposits_sent.len()
    );
}
