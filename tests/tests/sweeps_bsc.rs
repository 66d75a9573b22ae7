//! Sweeps on anvil through `custody serve` (decisions §13): a BEP20 deposit swept to the hot
//! wallet after a BNB treasury funding whose receipt was final first (checked on the node's
//! block order); a BNB deposit swept in one transfer that leaves the address empty; an amount
//! below the minimum left where it is; and `kill -9` while a sweep's answer is lost: one sweep
//! after the restart.

use custody_e2e::anvil::{hex_u64, Anvil};
use custody_e2e::dex::{Dex, USDT};
use custody_e2e::receiver::set_config;
use custody_e2e::rpc_proxy::{RpcProxy, SendFault};
use custody_e2e::{Client, Cred, Custody};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;

struct Setup {
    custody: Custody,
    cred: Cred,
    ops: Cred,
    hot: String,
}

/// A service whose sweeper runs every 200 ms; the hot wallet holds 1 BNB. `rpc` is the URL the
/// service uses (a proxy in front of anvil, for the fault test).
fn setup(anvil: &Anvil, rpc: &str) -> Setup {
    let custody = Custody::init_with(&["--insecure-dev-seed"], &[("CUSTODY_BSC_RPC_URLS", rpc)]);
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "bsc.sending", "lease_ms", "3000");
    set_config(&dir, "bsc.sending", "rebroadcast_after_ms", "1000");
    set_config(&dir, "sweeps", "interval_ms", "200");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, E18);
    Setup {
        custody,
        cred,
        ops,
        hot,
    }
}

impl Setup {
    fn client(&self) -> Client {
        self.custody.client(&self.cred)
    }

    fn admin(&self, resource: &str) -> Vec<Value> {
        let r = self
            .custody
            .client(&self.ops)
            .get(&format!("/v1/admin/{resource}?limit=100"));
        assert_eq!(r.status, 200, "{:?}", r.json());
        r.json()["data"].as_array().unwrap().clone()
    }

    fn wait_sweep(&self, address: &str, asset: &str, status: &str) -> Value {
        self.custody
            .wait_for(60, &format!("{asset} sweep {status}"), || {
                self.admin("sweeps").into_iter().find(|s| {
                    s["address"] == address && s["asset"] == asset && s["status"] == status
                })
            })
    }

    fn wait_credited(&self, n: usize) {
        let client = self.client();
        self.custody.wait_for(60, "deposits credited", || {
            (client.deposits("?status=credited").len() == n).then_some(())
        });
    }

    fn reconciles(&self) {
        let (ok, out, _) = self.custody.cli(&["ledger", "reconcile"]);
        assert!(ok, "{out}");
    }
}

fn nonce(anvil: &Anvil, address: &str) -> u64 {
    hex_u64(&anvil.rpc("eth_getTransactionCount", json!([address, "latest"])))
}

#[test]
fn a_bep20_deposit_is_swept_after_its_funding_is_final() {
    let Some(anvil) = Anvil::start() else { return };
    let dex = Dex::deploy(&anvil);
    dex.add_liquidity_bnb(USDT, 600_000 * E18, 1_000 * E18);
    let mut s = setup(&anvil, &anvil.url());
    s.custody.start();
    let client = s.client();
    let alice = client.wallet("alice", "BSC");
    let address = alice["address"].as_str().unwrap().to_owned();
    dex.deal(USDT, &dex.lp, 100 * E18);
    anvil.token_transfer(USDT, &dex.lp, &address, 100 * E18);
    anvil.mine(16);
    s.wait_credited(1);

    // The address holds no BNB: the hot wallet funds it first.
    let funding = s.custody.wait_for(60, "a funding sent", || {
        s.admin("treasury-fundings")
            .into_iter()
            .find(|f| f["address"] == address.as_str() && f["status"] == "broadcasted")
    });
    let sweep = s.wait_sweep(&address, "USDT", "funding");
    assert_eq!(sweep["funding_id"], funding["id"]);
    assert_eq!(sweep["amount_units"], (100 * E18).to_string());
    assert_eq!(
        nonce(&anvil, &address),
        0,
        "no transfer before the funding is final"
    );
    let funded: u128 = funding["amount_units"].as_str().unwrap().parse().unwrap();
    assert_eq!(anvil.balance(&address), funded);
    // Included is not final: still nothing from the address.
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    assert_eq!(nonce(&anvil, &address), 0);
    anvil.mine(16);
    let sent = s.wait_sweep(&address, "USDT", "broadcasted");
    anvil.mine(16);
    let done = s.wait_sweep(&address, "USDT", "confirmed");
    let funding = s
        .admin("treasury-fundings")
        .into_iter()
        .find(|f| f["id"] == funding["id"])
        .unwrap();
    assert_eq!(funding["status"], "confirmed");

    // On the node: the funding's receipt, then the sweep's, at least the depth apart.
    let receipt = |h: &Value| anvil.mined(h.as_str().unwrap());
    let funding_block = hex_u64(&receipt(&funding["tx_hash"])["blockNumber"]);
    let sweep_block = hex_u64(&receipt(&done["tx_hash"])["blockNumber"]);
    assert!(
        sweep_block >= funding_block + 15,
        "funding in {funding_block}, sweep in {sweep_block}"
    );
    assert_eq!(sent["tx_hash"], done["tx_hash"]);
    assert_eq!(anvil.token_balance(USDT, &address), 0);
    assert_eq!(anvil.token_balance(USDT, &s.hot), 100 * E18);
    assert_eq!(nonce(&anvil, &address), 1, "one transfer from the address");
    let fee: u128 = done["network_cost_units"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        anvil.balance(&address),
        funded - fee,
        "the funding paid exactly the sweep's gas"
    );
    // Every party, every asset. The user holds the USDT deposit and nothing else: the gas
    // top-up is the treasury's own move, never a deposit (it passed every test that looked at
    // USDT alone).
    let units = |v: &Value| v.as_str().unwrap().parse::<u128>().unwrap();
    let funding_fee = units(&funding["network_cost_units"]);
    let deposits = client.deposits("");
    assert_eq!(deposits.len(), 1, "one deposit, the USDT: {deposits:?}");
    assert_eq!(deposits[0]["asset"], "USDT");
    for (asset, figures) in client.all_balances(&alice) {
        let held = if asset == "USDT" { 100 * E18 } else { 0 };
        assert_eq!(
            figures,
            [held, 0, 0],
            "alice's {asset}: available, reserved, pending"
        );
    }
    assert_eq!(anvil.balance(&s.hot), E18 - funded - funding_fee);
    let i = |u: u128| i128::try_from(u).unwrap();
    let expected: std::collections::BTreeMap<String, i128> = [
        ("user:acme:BSC:USDT:alice", i(100 * E18)),
        ("system:deposit_clearing:BSC:USDT", 0),
        ("system:treasury:BSC:USDT", -i(100 * E18)),
        // What the deposit address still holds of the top-up.
        ("system:deposit_clearing:BSC:BNB", -i(funded - fee)),
        ("system:treasury:BSC:BNB", i(funded + funding_fee)),
        ("system:network_fees:BSC:BNB", -i(funding_fee + fee)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(s.custody.client(&s.ops).ledger_books(), expected);
    s.reconciles();
    // The BNB left on the address is below the minimum: nothing more is swept.
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert_eq!(s.admin("sweeps").len(), 1);
    s.custody.stop();
}

#[test]
fn a_bnb_deposit_is_swept_in_one_transfer_and_a_small_one_stays() {
    let Some(anvil) = Anvil::start() else { return };
    let mut s = setup(&anvil, &anvil.url());
    s.custody.start();
    let client = s.client();
    let alice = client.wallet("alice", "BSC");
    let bob = client.wallet("bob", "BSC");
    let a = alice["address"].as_str().unwrap().to_owned();
    let b = bob["address"].as_str().unwrap().to_owned();
    // Read before the deposits: the sweep may be sent (and automined) as soon as they are
    // credited, before this test looks again.
    let hot_before = anvil.balance(&s.hot);
    anvil.send_value(anvil.account(1), &a, 2 * E18);
    // Below the default minimum of one BNB.
    anvil.send_value(anvil.account(1), &b, E18 / 2);
    anvil.mine(16);
    s.wait_credited(2);
    s.wait_sweep(&a, "BNB", "broadcasted");
    anvil.mine(16);
    let done = s.wait_sweep(&a, "BNB", "confirmed");
    let amount: u128 = done["amount_units"].as_str().unwrap().parse().unwrap();
    let fee: u128 = done["network_cost_units"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(amount + fee, 2 * E18);
    assert_eq!(anvil.balance(&a), 0, "nothing left behind");
    assert_eq!(anvil.balance(&s.hot), hot_before + amount);
    assert!(done["tx_hash"].as_str().unwrap().starts_with("0x"));
    let steps: Vec<_> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps, ["planned", "broadcasted", "confirmed"]);
    assert!(
        s.admin("treasury-fundings").is_empty(),
        "a native sweep needs no funding"
    );
    // Bob's half BNB stays; the sweeper has had many rounds.
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    assert!(s.admin("sweeps").iter().all(|x| x["address"] != b.as_str()));
    assert_eq!(anvil.balance(&b), E18 / 2);
    assert_eq!(client.available(&alice, "BNB"), 2 * E18);
    s.reconciles();
    // A new deposit is swept only once it is credited: before, a reorganization could still
    // take it back and void the sweep.
    anvil.send_value(anvil.account(1), &a, 3 * E18);
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert_eq!(anvil.balance(&a), 3 * E18, "not swept while confirming");
    assert_eq!(s.admin("sweeps").len(), 1);
    anvil.mine(16);
    s.wait_credited(3);
    s.wait_sweep(&a, "BNB", "broadcasted");
    assert_eq!(s.admin("sweeps").len(), 2);
    anvil.mine(16);
    s.custody.wait_for(60, "the second sweep confirmed", || {
        s.admin("sweeps")
            .iter()
            .all(|x| x["status"] == "confirmed")
            .then_some(())
    });
    assert_eq!(anvil.balance(&a), 0);
    s.reconciles();
    s.custody.stop();
}

#[test]
fn kill_9_while_a_sweep_answer_is_lost_sweeps_once_after_restart() {
    let Some(anvil) = Anvil::start() else { return };
    let proxy = RpcProxy::start(&anvil.url());
    let mut s = setup(&anvil, &proxy.url());
    s.custody.start();
    let client = s.client();
    let alice = client.wallet("alice", "BSC");
    let a = alice["address"].as_str().unwrap().to_owned();
    anvil.send_value(anvil.account(1), &a, 3 * E18);
    anvil.mine(16);
    s.wait_credited(1);
    // The sweep reaches the node (anvil mines it), the service never hears back: kill -9.
    proxy.set_send_fault(SendFault::HoldAfterForward);
    s.custody.wait_for(60, "a sweep forwarded", || {
        (proxy.sends_forwarded() >= 1).then_some(())
    });
    s.custody.kill9();
    assert_eq!(nonce(&anvil, &a), 1);
    proxy.set_send_fault(SendFault::Pass);
    s.custody.start();
    s.wait_sweep(&a, "BNB", "broadcasted");
    anvil.mine(16);
    let done = s.wait_sweep(&a, "BNB", "confirmed");
    // Still one transaction from the address, one sweep on record, nothing left behind.
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    assert_eq!(nonce(&anvil, &a), 1, "swept once");
    assert_eq!(anvil.balance(&a), 0);
    let sweeps = s.admin("sweeps");
    assert_eq!(sweeps.len(), 1, "{sweeps:#?}");
    assert_eq!(sweeps[0]["id"], done["id"]);
    s.reconciles();
    s.custody.stop();
}

/// `kill_switch.sweeps` (issue 31, F4): while it is on nothing is swept or funded, and
/// withdrawals still go out; once it is off the deposit is swept as usual.
#[test]
fn the_sweeps_switch_stops_sweeps_alone() {
    let Some(anvil) = Anvil::start() else { return };
    let mut s = setup(&anvil, &anvil.url());
    s.custody.start();
    let ops = s.custody.client(&s.ops);
    let switch = |on: bool| {
        let r = ops.post(
            "/v1/admin/controls",
            &json!({ "control_key": "kill_switch.sweeps", "enabled": on, "reason": "rotation" }),
            None,
        );
        assert_eq!(r.status, 200, "{:?}", r.json());
    };
    switch(true);
    let client = s.client();
    let alice = client.wallet("alice", "BSC");
    let a = alice["address"].as_str().unwrap().to_owned();
    anvil.send_value(anvil.account(1), &a, 2 * E18);
    anvil.mine(16);
    s.wait_credited(1);
    // Many sweeper rounds (every 200 ms): nothing planned, nothing left the address.
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert!(s.admin("sweeps").is_empty());
    assert_eq!(anvil.balance(&a), 2 * E18);
    // A withdrawal is not a sweep: it goes out from the hot wallet.
    client.wallet("bob", "BSC");
    s.custody
        .adjust("acme", "bob", "BSC", "BNB", true, &E18.to_string());
    let q = client.post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "bob", "network": "BSC", "asset": "BNB",
                 "destination_address": "0x00000000000000000000000000000000000000D5",
                 "amount_units": (E18 / 10).to_string() }),
        None,
    );
    assert_eq!(q.status, 201, "{:?}", q.json());
    let w = client.post(
        "/v1/withdrawals",
        &json!({ "quote_id": q.json()["id"] }),
        Some("sweeps-switch-w1"),
    );
    assert_eq!(w.status, 201, "{:?}", w.json());
    let id = w.json()["id"].as_str().unwrap().to_owned();
    s.custody.wait_for(30, "the withdrawal sent", || {
        let v = client.get(&format!("/v1/withdrawals/{id}")).json();
        (v["status"] == "broadcasted").then_some(())
    });
    assert!(s.admin("sweeps").is_empty(), "still no sweep");
    switch(false);
    s.wait_sweep(&a, "BNB", "broadcasted");
    anvil.mine(16);
    s.wait_sweep(&a, "BNB", "confirmed");
    assert_eq!(anvil.balance(&a), 0);
    s.custody.stop();
}
