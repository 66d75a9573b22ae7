//! A BSC node that misbehaves, through a fault-injecting proxy in front of anvil
//! (custody_e2e::rpc_proxy::NodeFault): down (connections closed unanswered, as when the node
//! is killed), slow, answering 5xx, answering truncated JSON, serving blocks whose parent hash
//! is not their parent's. Each fault starts just after a deposit landed on chain and a
//! withdrawal was executed, so it hits both the scanner mid-scan and the broadcaster
//! mid-broadcast; blocks are mined while it lasts. Meanwhile the API keeps answering (no 500:
//! quotes are 503 CHAIN_UNAVAILABLE or succeed, balances show the on-chain side as unknown
//! with a reason), nothing is credited from a lying node. When the node recovers, every deposit
//! is credited exactly once, every withdrawal confirmed and paid exactly once on the node, and
//! the ledger reconciles. The same faults on TRON's HTTP API for deposits, and the node process
//! itself stopped and started again. Complements withdrawals_faults.rs (dropped transactions, cut
//! broadcasts, `kill -9` of the service) and deposits_bsc.rs (a node unreachable mid-scan).

use std::time::Duration;

use custody_e2e::anvil::Anvil;
use custody_e2e::receiver::set_config;
use custody_e2e::rpc_proxy::{NodeFault, RpcProxy};
use custody_e2e::Custody;
use serde_json::json;

const ETH: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000E9";
const DEPOSIT: u128 = ETH / 100;
const WITHDRAWN: u128 = ETH / 1000;

#[test]
fn a_node_that_is_down_slow_failing_truncated_or_lying_costs_nothing_once_it_recovers() {
    let Some(anvil) = Anvil::start() else { return };
    let proxy = RpcProxy::start(&anvil.url());
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", proxy.url().as_str())],
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
    let cred = custody.credential("acme", &["--rate-limit", "1000000"]);
    let admin = custody.credential("ops", &["--admin", "--rate-limit", "1000000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, 10 * ETH);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "BSC");
    let address = alice["address"].as_str().unwrap().to_owned();
    custody.adjust("acme", "alice", "BSC", "BNB", true, &ETH.to_string());

    let faults = [
        NodeFault::Down,
        NodeFault::Slow(1500),
        NodeFault::ServerError,
        NodeFault::TruncatedJson,
        NodeFault::BrokenParentHash,
    ];
    let mut withdrawals = Vec::new();
    for (i, fault) in faults.iter().enumerate() {
        // A deposit on chain and a withdrawal on its way, then the fault.
        anvil.send_value(anvil.account(1), &address, DEPOSIT);
        let quote = client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": DESTINATION, "amount_units": WITHDRAWN.to_string() }),
            None,
        );
        assert_eq!(
            quote.status,
            201,
            "{}",
            String::from_utf8_lossy(&quote.body)
        );
        let w = client.post(
            "/v1/withdrawals",
            &json!({ "quote_id": quote.json()["id"] }),
            Some(&format!("node-fault-{i:04}")),
        );
        assert_eq!(w.status, 201, "{}", String::from_utf8_lossy(&w.body));
        withdrawals.push(w.json()["id"].as_str().unwrap().to_owned());
        proxy.set_node_fault(*fault);
        let calls_before = proxy.calls();

        for _ in 0..6 {
            anvil.mine(1);
            std::thread::sleep(Duration::from_millis(400));
            // The API answers, without a 500, whatever the node does.
            let b = client.get(&format!(
                "/v1/wallets/{}/balances",
                alice["id"].as_str().unwrap()
            ));
            assert_eq!(b.status, 200, "{fault:?}: balances");
            let bnb = b.json()["balances"][0].clone();
            assert!(
                !bnb["onchain"].is_null() || bnb["onchain_error"].is_string(),
                "{fault:?}: {bnb}"
            );
            let q = client.post(
                "/v1/withdrawals/quote",
                &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                         "destination_address": DESTINATION, "amount_units": WITHDRAWN.to_string() }),
                None,
            );
            assert!(
                q.status == 201 || (q.status == 503 && q.code() == "CHAIN_UNAVAILABLE"),
                "{fault:?}: quote answered {} {}",
                q.status,
                String::from_utf8_lossy(&q.body)
            );
            if q.status == 503 {
                assert!(q.header("retry-after").is_some(), "{fault:?}: Retry-After");
            }
        }
        assert!(
            proxy.calls() > calls_before,
            "{fault:?}: the service kept calling the node"
        );
        // Nothing credited from what a broken node said.
        if matches!(
            fault,
            NodeFault::TruncatedJson | NodeFault::BrokenParentHash
        ) {
            let credited = client
                .deposits("")
                .iter()
                .filter(|d| d["status"] == "credited")
                .count();
            assert!(
                credited <= i,
                "{fault:?}: a deposit was credited during the fault"
            );
        }
        proxy.set_node_fault(NodeFault::Healthy);

        // Recovery: this round's deposit credited and withdrawal confirmed.
        let id = withdrawals.last().unwrap().clone();
        custody.wait_for(120, &format!("{fault:?}: recovery"), || {
            let credited = client
                .deposits("")
                .iter()
                .filter(|d| d["status"] == "credited")
                .count();
            let w = client.get(&format!("/v1/withdrawals/{id}")).json();
            if credited == i + 1 && w["status"] == "confirmed" {
                return Some(());
            }
            assert_ne!(w["status"], "failed", "{fault:?}: {w}");
            anvil.mine(1);
            None
        });
        println!("node faults: {fault:?}: API answered throughout, recovered");
    }

    // Exactly once, on the node and in the ledger.
    let deposits = client.deposits("");
    assert_eq!(
        deposits.len(),
        faults.len(),
        "one deposit per transfer: {deposits:?}"
    );
    assert_eq!(
        anvil.balance(DESTINATION),
        WITHDRAWN * u128::try_from(faults.len()).unwrap(),
        "each withdrawal paid once"
    );
    let (balanced, out, err) = custody.cli(&["ledger", "reconcile"]);
    assert!(balanced, "{out} {err}");
    let dashboard = custody.client(&admin).get("/v1/admin/dashboard");
    assert_eq!(dashboard.status, 200);
}

/// The node process itself stopped and started again (its chain kept, as a real node keeps
/// its database), right after a deposit and a withdrawal (the scanner mid-scan, the
/// broadcaster mid-broadcast), and at a random moment later: while it is down the API answers
/// without a 500; once it is back every deposit is credited once and every withdrawal paid
/// once on the node.
#[test]
fn the_node_killed_and_restarted_mid_scan_and_mid_broadcast_pays_and_credits_once() {
    let state = tempfile::tempdir().unwrap();
    let Some(mut anvil) = Anvil::start_persistent(&state.path().join("chain.json")) else {
        return;
    };
    let (mut rng, seed) = custody_e2e::profile::Rng::from_env();
    let mut custody = Custody::init_with(
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
    let cred = custody.credential("acme", &["--rate-limit", "1000000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, 10 * ETH);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "BSC");
    let address = alice["address"].as_str().unwrap().to_owned();
    custody.adjust("acme", "alice", "BSC", "BNB", true, &ETH.to_string());
    let destination = "0x00000000000000000000000000000000000000F1";

    let rounds = 4;
    let mut withdrawals = Vec::new();
    for round in 0..rounds {
        anvil.send_value(anvil.account(1), &address, DEPOSIT);
        let quote = client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": destination, "amount_units": WITHDRAWN.to_string() }),
            None,
        );
        assert_eq!(
            quote.status,
            201,
            "{}",
            String::from_utf8_lossy(&quote.body)
        );
        let w = client.post(
            "/v1/withdrawals",
            &json!({ "quote_id": quote.json()["id"] }),
            Some(&format!("node-restart-{round:04}")),
        );
        assert_eq!(w.status, 201);
        withdrawals.push(w.json()["id"].as_str().unwrap().to_owned());
        // Round 0 at once; the others after a random moment of the service's work.
        let after = if round == 0 { 0 } else { 50 + rng.below(600) };
        std::thread::sleep(Duration::from_millis(u64::try_from(after).unwrap()));
        let down = std::thread::scope(|s| {
            let probe = s.spawn(|| {
                // While the node is down (or coming back): the API answers without a 500.
                let mut seen = Vec::new();
                for _ in 0..8 {
                    std::thread::sleep(Duration::from_millis(150));
                    let q = client.post(
                        "/v1/withdrawals/quote",
                        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                                 "destination_address": destination,
                                 "amount_units": WITHDRAWN.to_string() }),
                        None,
                    );
                    seen.push(q.status);
                    let b = client.get(&format!(
                        "/v1/wallets/{}/balances",
                        alice["id"].as_str().unwrap()
                    ));
                    seen.push(b.status);
                }
                seen
            });
            anvil.restart(Duration::from_millis(1500));
            probe.join().unwrap()
        });
        assert!(
            down.iter().all(|s| *s == 200 || *s == 201 || *s == 503),
            "seed {seed}, round {round}: answers while the node was down {down:?}"
        );
        let id = withdrawals.last().unwrap().clone();
        custody.wait_for(120, &format!("round {round}: recovery"), || {
            let credited = client
                .deposits("")
                .iter()
                .filter(|d| d["status"] == "credited")
                .count();
            let w = client.get(&format!("/v1/withdrawals/{id}")).json();
            if credited == round + 1 && w["status"] == "confirmed" {
                return Some(());
            }
            assert_ne!(w["status"], "failed", "{w}");
            anvil.mine(1);
            None
        });
        println!(
            "node restart: round {round}: stopped {after} ms after the withdrawal, down 1.5 s, answers meanwhile {down:?}, recovered"
        );
    }
    assert_eq!(client.deposits("").len(), rounds);
    assert_eq!(
        anvil.balance(destination),
        WITHDRAWN * u128::try_from(rounds).unwrap(),
        "each withdrawal paid once"
    );
    let (balanced, out, err) = custody.cli(&["ledger", "reconcile"]);
    assert!(balanced, "{out} {err}");
}

/// The same faults on TRON's HTTP API (the test server of custody_e2e::tron_api behind the
/// proxy): TRX deposits arrive while the API is down, slow, failing, truncating or serving
/// blocks whose parent hash names no block; the API keeps answering without a 500, nothing is
/// credited from a broken answer, and once it is healthy each deposit is credited once.
#[test]
fn a_tron_api_that_misbehaves_credits_each_deposit_once_when_it_recovers() {
    use custody_e2e::tron_api::{BlockSpec, TronApi, TxSpec};
    const MAINNET_GENESIS: &str =
        "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";
    const SENDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";
    const TRX: i64 = 2_500_000;

    let api = TronApi::start();
    api.append_empty(3);
    let proxy = RpcProxy::start(api.url());
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_TRON_API_URLS", proxy.url().as_str())],
    );
    custody.edit_config(
        &format!("genesis_block_id = \"{MAINNET_GENESIS}\""),
        &format!("genesis_block_id = \"{}\"", api.genesis_block_id()),
    );
    let dir = custody.data_dir();
    set_config(&dir, "tron", "poll_interval_ms", "100");
    set_config(&dir, "tron", "confirmations", "3");
    set_config(&dir, "tron", "start_block", &api.head().number.to_string());
    let cred = custody.credential("acme", &["--rate-limit", "1000000"]);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let address = alice["address"].as_str().unwrap().to_owned();

    // The short profile keeps the faults particular to what a node says (the BSC test above
    // runs all five); the long one runs all five here too.
    let all = [
        NodeFault::Down,
        NodeFault::Slow(1500),
        NodeFault::ServerError,
        NodeFault::TruncatedJson,
        NodeFault::BrokenParentHash,
    ];
    let faults: &[NodeFault] = custody_e2e::profile::pick(
        &[
            NodeFault::Down,
            NodeFault::TruncatedJson,
            NodeFault::BrokenParentHash,
        ],
        &all,
    );
    for (i, fault) in faults.iter().enumerate() {
        api.append(BlockSpec::new().tx(TxSpec::trx(SENDER, &address, TRX)));
        proxy.set_node_fault(*fault);
        for _ in 0..6 {
            api.append_empty(1);
            std::thread::sleep(Duration::from_millis(400));
            let b = client.get(&format!(
                "/v1/wallets/{}/balances",
                alice["id"].as_str().unwrap()
            ));
            assert_eq!(b.status, 200, "{fault:?}: balances");
        }
        if matches!(
            fault,
            NodeFault::TruncatedJson | NodeFault::BrokenParentHash
        ) {
            let credited = client
                .deposits("")
                .iter()
                .filter(|d| d["status"] == "credited")
                .count();
            assert!(
                credited <= i,
                "{fault:?}: a deposit was credited during the fault"
            );
        }
        proxy.set_node_fault(NodeFault::Healthy);
        custody.wait_for(120, &format!("TRON {fault:?}: recovery"), || {
            let credited = client
                .deposits("")
                .iter()
                .filter(|d| d["status"] == "credited")
                .count();
            if credited == i + 1 {
                return Some(());
            }
            api.append_empty(1);
            None
        });
        println!("node faults: TRON {fault:?}: API answered throughout, recovered");
    }
    assert_eq!(client.deposits("").len(), faults.len());
    assert_eq!(
        client.available(&alice, "TRX"),
        u128::try_from(TRX).unwrap() * u128::try_from(faults.len()).unwrap(),
        "each deposit credited once"
    );
    let (balanced, out, err) = custody.cli(&["ledger", "reconcile"]);
    assert!(balanced, "{out} {err}");
}
