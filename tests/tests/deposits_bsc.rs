//! The deposit pipeline end to end: `custody serve` scanning a real local EVM node (anvil).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use custody_e2e::anvil::{value_tx, Anvil};
use custody_e2e::receiver::{set_config, Answer, Receiver};
use custody_e2e::{Cred, Custody};
use serde_json::Value;

const ETH: u128 = 1_000_000_000_000_000_000;

struct Setup {
    anvil: Anvil,
    custody: Custody,
    cred: Cred,
    usdt: String,
    other_token: String,
}

/// Anvil with the catalog's USDT (redeployed locally) and a token outside the catalog, and a
/// custody data dir scanning it from the current block, directly or through `proxy`.
fn setup(proxy: Option<&dyn Fn(u16) -> u16>) -> Option<Setup> {
    let anvil = Anvil::start()?;
    let deployer = anvil.account(0).to_owned();
    let usdt = anvil.deploy_token(&deployer, "Tether USD", "USDT");
    let other_token = anvil.deploy_token(&deployer, "Not Listed", "NOPE");
    anvil.mint(&usdt, &deployer, &deployer, 1_000_000 * ETH);
    anvil.mint(&other_token, &deployer, &deployer, 1_000_000 * ETH);
    let url = match proxy {
        Some(front) => format!("http://127.0.0.1:{}", front(anvil.port())),
        None => anvil.url(),
    };
    let custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", url.as_str())],
    );
    custody.edit_config("0x55d398326f99059fF775485246999027B3197955", &usdt);
    custody.edit_config(
        "poll_interval_ms = 1000",
        &format!(
            "poll_interval_ms = 100\nstart_block = {}",
            anvil.block_number()
        ),
    );
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    Some(Setup {
        anvil,
        custody,
        cred,
        usdt,
        other_token,
    })
}

#[test]
fn bnb_and_token_deposits_are_credited_after_fifteen_confirmations_and_nothing_else() {
    let Some(mut s) = setup(None) else { return };
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    set_config(
        &s.custody.data_dir(),
        "webhooks",
        "allow_insecure_loopback",
        "true",
    );
    set_config(&s.custody.data_dir(), "webhooks", "poll_interval_ms", "50");
    let hook = s.custody.cli_ok(&[
        "webhooks",
        "set",
        "--tenant",
        "acme",
        "--url",
        &receiver.url("/hook"),
    ]);
    let hook_secret = hook["secret"].as_str().unwrap().to_owned();
    s.custody.start();
    let client = s.custody.client(&s.cred);
    let alice = client.wallet("alice", "BSC");
    let bob = client.wallet("bob", "BSC");
    let (alice_addr, bob_addr) = (
        alice["address"].as_str().unwrap().to_owned(),
        bob["address"].as_str().unwrap().to_owned(),
    );
    let funder = s.anvil.account(0).to_owned();

    let bnb_tx = s.anvil.send_value(&funder, &alice_addr, 3 * ETH / 2);
    let usdt_tx = s
        .anvil
        .token_transfer(&s.usdt, &funder, &bob_addr, 250 * ETH);
    s.anvil
        .token_transfer(&s.other_token, &funder, &alice_addr, 99 * ETH);
    let reverted = s
        .anvil
        .token_transfer_reverting(&s.usdt, s.anvil.account(3), &alice_addr);
    assert_eq!(
        s.anvil.mined(&reverted)["status"],
        "0x0",
        "the transfer reverts on chain"
    );

    let seen = s.custody.wait_for(30, "two deposits detected", || {
        let d = client.deposits("");
        (d.len() == 2).then_some(d)
    });
    let bnb = seen
        .iter()
        .find(|d| d["asset"] == "BNB")
        .expect("BNB deposit");
    // Decisions §10: BSC hashes are 0x and 64 lowercase hex digits everywhere.
    assert_eq!(bnb["tx_hash"].as_str().unwrap(), bnb_tx.to_lowercase());
    let block_hash = bnb["block_hash"].as_str().unwrap();
    assert!(
        block_hash.len() == 66
            && block_hash.starts_with("0x")
            && block_hash[2..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{block_hash}"
    );
    assert_eq!(bnb["history"][0]["block_hash"], block_hash);
    assert_eq!(bnb["amount_units"], (3 * ETH / 2).to_string());
    assert_eq!(bnb["log_index"], Value::Null);
    assert_eq!(bnb["external_user_id"], "alice");
    assert_eq!(bnb["required_confirmations"], 15);
    let usdt = seen
        .iter()
        .find(|d| d["asset"] == "USDT")
        .expect("USDT deposit");
    assert_eq!(usdt["tx_hash"].as_str().unwrap(), usdt_tx.to_lowercase());
    assert_eq!(usdt["amount_units"], (250 * ETH).to_string());
    assert!(usdt["log_index"].is_u64());
    assert_eq!(usdt["wallet_id"], bob["id"]);

    // Not yet deep enough: pending, not available.
    s.anvil.mine(5);
    s.custody.wait_for(30, "confirming", || {
        client
            .deposits("?status=confirming")
            .len()
            .eq(&2)
            .then_some(())
    });
    assert_eq!(client.available(&alice, "BNB"), 0);
    let pending =
        client.ledger_balance(alice["id"].as_str().unwrap(), "BNB")["pending_units"].clone();
    assert_eq!(pending, (3 * ETH / 2).to_string());

    s.anvil.mine(15);
    s.custody.wait_for(30, "credited", || {
        client
            .deposits("?status=credited")
            .len()
            .eq(&2)
            .then_some(())
    });
    assert_eq!(client.available(&alice, "BNB"), 3 * ETH / 2);
    assert_eq!(client.available(&bob, "USDT"), 250 * ETH);
    assert_eq!(
        client.available(&alice, "USDT"),
        0,
        "reverted and unlisted transfers are never credited"
    );

    let d = client
        .get(&format!("/v1/deposits/{}", bnb["id"].as_str().unwrap()))
        .json();
    assert_eq!(d["status"], "credited");
    assert!(d["confirmations"].as_u64().unwrap() >= 15);
    let steps: Vec<_> = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["detected", "confirming", "confirmed", "credited"]);
    let history = client
        .get(&format!(
            "/v1/wallets/{}/transactions",
            alice["id"].as_str().unwrap()
        ))
        .json();
    assert_eq!(history["data"][0]["kind"], "deposit_credit");
    assert_eq!(history["data"][0]["reference_id"], d["id"]);

    // The partner was told at every step, with the deposit as its GET shows it.
    let events = receiver.wait_until(std::time::Duration::from_secs(30), "deposit events", |r| {
        r.iter()
            .filter(|e| e.json()["event_type"] == "deposit.credited")
            .count()
            == 2
    });
    assert!(
        events.iter().all(|e| e.verifies_with(&hook_secret)),
        "every delivery is signed"
    );
    for kind in ["deposit.detected", "deposit.confirmed", "deposit.credited"] {
        let of_bnb: Vec<_> = events
            .iter()
            .map(|e| e.json())
            .filter(|e| e["event_type"] == kind && e["data"]["id"] == bnb["id"])
            .collect();
        assert_eq!(of_bnb.len(), 1, "one {kind} for the BNB deposit");
        assert_eq!(of_bnb[0]["data"]["amount_units"], (3 * ETH / 2).to_string());
        assert_eq!(
            of_bnb[0]["data"]["status"],
            kind.trim_start_matches("deposit.")
        );
    }
    let credited_event = events
        .iter()
        .map(|e| e.json())
        .find(|e| e["event_type"] == "deposit.credited" && e["data"]["id"] == bnb["id"])
        .unwrap();
    assert_eq!(
        credited_event["data"], d,
        "data is the resource as GET /deposits/{{id}} returns it"
    );
    let balance_events: Vec<_> = events
        .iter()
        .map(|e| e.json())
        .filter(|e| {
            e["event_type"] == "balance.updated" && e["data"]["external_user_id"] == "alice"
        })
        .collect();
    assert_eq!(balance_events.len(), 1);
    assert_eq!(
        balance_events[0]["data"]["ledger"]["available_units"],
        (3 * ETH / 2).to_string()
    );

    // Filters and validation.
    assert_eq!(client.deposits("?external_user_id=bob").len(), 1);
    let r = client.get("/v1/deposits?status=lost");
    assert_eq!((r.status, r.code().as_str()), (422, "VALIDATION_FAILED"));
    let other = s.custody.credential("other-tenant", &[]);
    assert!(
        s.custody.client(&other).deposits("").is_empty(),
        "deposits are scoped to the tenant"
    );
    let r = s
        .custody
        .client(&other)
        .get(&format!("/v1/deposits/{}", bnb["id"].as_str().unwrap()));
    assert_eq!(r.status, 404);

    // On-chain balances come from the node, apart from the ledger.
    let b = client
        .get(&format!(
            "/v1/wallets/{}/balances",
            alice["id"].as_str().unwrap()
        ))
        .json();
    let bnb_entry = b["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["asset"] == "BNB")
        .unwrap()
        .clone();
    assert_eq!(bnb_entry["onchain"]["units"], (3 * ETH / 2).to_string());
    assert!(bnb_entry["onchain_error"].is_null());
}

#[test]
fn a_reorg_before_confirmation_orphans_and_the_remined_transfer_is_credited_once() {
    let Some(mut s) = setup(None) else { return };
    s.custody.start();
    let client = s.custody.client(&s.cred);
    let alice = client.wallet("alice", "BSC");
    let addr = alice["address"].as_str().unwrap().to_owned();
    let funder = s.anvil.account(1).to_owned();

    s.anvil.send_value(&funder, &addr, ETH);
    s.anvil.mine(1);
    let first = s
        .custody
        .wait_for(30, "detected", || client.deposits("").into_iter().next());
    // Replace the last two blocks; the new chain carries the same transfer again.
    s.anvil.reorg(2, &[(value_tx(&funder, &addr, ETH), 0)]);
    s.custody.wait_for(30, "orphaned", || {
        client
            .deposits("?status=orphaned")
            .into_iter()
            .next()
            .or_else(|| {
                // The same transaction re-mined keeps its identity: orphaned then detected again.
                let d = client
                    .get(&format!("/v1/deposits/{}", first["id"].as_str().unwrap()))
                    .json();
                d["history"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|h| h["status"] == "orphaned")
                    .then_some(d)
            })
    });
    s.anvil.mine(16);
    s.custody.wait_for(30, "credited", || {
        client.deposits("?status=credited").into_iter().next()
    });
    assert_eq!(client.available(&alice, "BNB"), ETH, "credited once");
    let all = client.deposits("");
    let credited = all.iter().filter(|d| d["status"] == "credited").count();
    assert_eq!(credited, 1, "{all:#?}");
    let orphan_steps = all
        .iter()
        .flat_map(|d| d["history"].as_array().unwrap().iter())
        .filter(|h| h["status"] == "orphaned")
        .count();
    assert_eq!(orphan_steps, 1, "the orphaned step stays in the history");
}

#[test]
fn kill_9_mid_scan_then_restart_misses_and_repeats_nothing() {
    let Some(mut s) = setup(None) else { return };
    s.custody.start();
    let client = s.custody.client(&s.cred);
    let alice = client.wallet("alice", "BSC");
    let addr = alice["address"].as_str().unwrap().to_owned();
    let funder = s.anvil.account(2).to_owned();
    let mut expected = 0u128;
    for i in 1..=30u128 {
        s.anvil.send_value(&funder, &addr, i * 1_000);
        expected += i * 1_000;
        if i == 12 {
            s.custody.wait_for(30, "some deposits", || {
                (client.deposits("").len() >= 5).then_some(())
            });
            s.custody.kill9();
        }
    }
    s.anvil.mine(20);
    s.custody.start();
    let client = s.custody.client(&s.cred);
    s.custody.wait_for(60, "all credited", || {
        (client.deposits("?status=credited&limit=100").len() == 30).then_some(())
    });
    assert_eq!(
        client.deposits("?limit=100").len(),
        30,
        "nothing missed, nothing twice"
    );
    assert_eq!(client.available(&alice, "BNB"), expected);
    let (ok, out, err) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}{err}");
}

/// A TCP proxy that can be switched off: while down it closes every connection at once.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
}

impl Proxy {
    fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&up);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !flag.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut c1, mut s1) = (client, server);
                let (f1, f2) = (Arc::clone(&flag), Arc::clone(&flag));
                std::thread::spawn(move || pipe(&mut c1, &mut s1, &f1));
                std::thread::spawn(move || pipe(&mut s2, &mut c2, &f2));
            }
        });
        Proxy { port, up }
    }
}

/// Copies bytes until either side closes, or the proxy goes down (then both sides are cut, so
/// pooled keep-alive connections die too).
fn pipe(from: &mut TcpStream, to: &mut TcpStream, up: &AtomicBool) {
    let _ = from.set_read_timeout(Some(std::time::Duration::from_millis(50)));
    let mut buf = [0u8; 16 * 1024];
    while up.load(Ordering::SeqCst) {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

#[test]
fn scanning_resumes_when_the_node_comes_back() {
    let proxy: std::cell::OnceCell<Proxy> = std::cell::OnceCell::new();
    let front = |anvil_port: u16| proxy.get_or_init(|| Proxy::start(anvil_port)).port;
    let Some(mut s) = setup(Some(&front)) else {
        return;
    };
    let proxy = proxy.get().expect("setup started the proxy");
    s.custody.start();
    let client = s.custody.client(&s.cred);
    let alice = client.wallet("alice", "BSC");
    let addr = alice["address"].as_str().unwrap().to_owned();

    proxy.up.store(false, Ordering::SeqCst);
    s.anvil.send_value(s.anvil.account(4), &addr, 777);
    s.anvil.mine(20);
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(
        client.deposits("").is_empty(),
        "nothing can be seen while the node is down"
    );
    let admin = s.custody.credential("ops", &["--admin"]);
    let dash = s.custody.client(&admin).get("/v1/admin/dashboard").json();
    let bsc = dash["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["network"] == "BSC")
        .unwrap()
        .clone();
    assert!(
        bsc["last_error"].is_string(),
        "the dashboard shows the failure: {bsc}"
    );
    let b = client
        .get(&format!(
            "/v1/wallets/{}/balances",
            alice["id"].as_str().unwrap()
        ))
        .json();
    assert!(
        b["balances"][0]["onchain"].is_null(),
        "on-chain figures are unknown, not zero"
    );
    assert!(b["balances"][0]["onchain_error"].is_string());

    proxy.up.store(true, Ordering::SeqCst);
    s.custody.wait_for(60, "credited after recovery", || {
        client.deposits("?status=credited").into_iter().next()
    });
    assert_eq!(client.available(&alice, "BNB"), 777);
}

#[test]
fn funds_no_deposit_explains_are_listed_on_the_dashboard() {
    let Some(mut s) = setup(None) else { return };
    set_config(
        &s.custody.data_dir(),
        "bsc",
        "holdings_check_interval_ms",
        "200",
    );
    let admin = s.custody.credential("ops", &["--admin"]);
    s.custody.start();
    let client = s.custody.client(&s.cred);
    let ops = s.custody.client(&admin);
    let alice = client.wallet("alice", "BSC");
    let alice_addr = alice["address"].as_str().unwrap().to_owned();
    let funder = s.anvil.account(0).to_owned();
    s.anvil.send_value(&funder, &alice_addr, ETH);
    s.anvil.mine(16);
    s.custody.wait_for(30, "credited", || {
        (client.available(&alice, "BNB") == ETH).then_some(())
    });

    // BNB arriving without a transaction the scanner sees (as from a contract's internal
    // call): the address now holds 1.25 BNB, of which 1 was credited.
    s.anvil.rpc(
        "anvil_setBalance",
        serde_json::json!([alice_addr, format!("0x{:x}", 5 * ETH / 4)]),
    );
    let found = s.custody.wait_for(30, "the holdings check", || {
        let dash = ops.get("/v1/admin/dashboard").json();
        let bsc = dash["chains"]
            .as_array()?
            .iter()
            .find(|c| c["network"] == "BSC")?
            .clone();
        let unexplained = bsc["holdings_check"]["unexplained"].as_array()?.clone();
        // A check that ran before the credit (or before the balance was set) is not this one.
        let current = unexplained
            .iter()
            .any(|u| u["onchain_units"] == (5 * ETH / 4).to_string().as_str());
        current.then_some(unexplained)
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["address"], alice_addr.as_str());
    assert_eq!(found[0]["asset"], "BNB");
    assert_eq!(found[0]["credited_units"], ETH.to_string());
    assert_eq!(found[0]["onchain_units"], (5 * ETH / 4).to_string());
    assert_eq!(found[0]["unexplained_units"], (ETH / 4).to_string());
    s.custody.stop();
}
