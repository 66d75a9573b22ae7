//! Withdrawals when things go wrong, end to end on anvil through `custody serve`: a transaction
//! dropped from the node's pool, a broadcast whose answer is lost (connection cut after
//! sending, or a node that hangs), `kill -9` of the service between signing and sending and
//! between sending and recording the answer: in each the destination is paid exactly once
//! (checked on the node: its balance and the hot wallet's nonce) and the ledger reconciles. And
//! 64 concurrent executions against one balance reserve exactly what it affords.

use custody_e2e::anvil::Anvil;
use custody_e2e::receiver::set_config;
use custody_e2e::rpc_proxy::{RpcProxy, SendFault};
use custody_e2e::{Client, Cred, Custody};
use serde_json::{json, Value};

const ETH: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000D5";

struct Setup {
    anvil: Anvil,
    custody: Custody,
    cred: Cred,
    hot: String,
}

/// A service whose BSC endpoint is `rpc_url` (anvil itself, or a proxy in front of it), with
/// short engine delays and lease, a funded hot wallet and a user holding 2 BNB.
fn setup(anvil: Anvil, rpc_url: Option<&str>) -> Setup {
    let url = rpc_url.map_or_else(|| anvil.url(), str::to_owned);
    let custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", url.as_str())],
    );
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "bsc.sending", "replace_after_ms", "3000");
    set_config(&dir, "bsc.sending", "rebroadcast_after_ms", "1000");
    set_config(&dir, "bsc.sending", "lease_ms", "3000");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    let funder = anvil.account(0).to_owned();
    anvil.send_value(&funder, &hot, 5 * ETH);
    Setup {
        anvil,
        custody,
        cred,
        hot,
    }
}

impl Setup {
    fn client(&self) -> Client {
        self.custody.client(&self.cred)
    }

    /// Starts the service (first time: with alice's wallet and 2 BNB).
    fn start(&mut self, fund_user: bool) {
        self.custody.start();
        if fund_user {
            self.client().wallet("alice", "BSC");
            self.custody
                .adjust("acme", "alice", "BSC", "BNB", true, &(2 * ETH).to_string());
        }
    }

    /// A quoted and executed withdrawal of `amount` to DESTINATION: its id.
    fn withdraw(&self, amount: u128, key: &str) -> String {
        let client = self.client();
        let q = client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": DESTINATION, "amount_units": amount.to_string() }),
            None,
        );
        assert_eq!(q.status, 201, "{:?}", q.json());
        let w = client.post(
            "/v1/withdrawals",
            &json!({ "quote_id": q.json()["id"] }),
            Some(key),
        );
        assert_eq!(w.status, 201, "{:?}", w.json());
        w.json()["id"].as_str().unwrap().to_owned()
    }

    fn get(&self, id: &str) -> Value {
        self.client().get(&format!("/v1/withdrawals/{id}")).json()
    }

    fn wait_status(&self, id: &str, status: &str, secs: u64) -> Value {
        self.custody.wait_for(secs, status, || {
            let v = self.get(id);
            (v["status"] == status).then_some(v)
        })
    }

    /// Transactions the hot wallet ever had mined (its nonce on the node).
    fn hot_nonce(&self) -> u64 {
        custody_e2e::anvil::hex_u64(
            &self
                .anvil
                .rpc("eth_getTransactionCount", json!([self.hot, "latest"])),
        )
    }

    /// Mines to the confirmation depth, waits for `confirmed`, and checks that the destination
    /// got `amount` exactly once and the ledger reconciles.
    fn confirm_paid_once(&self, id: &str, amount: u128) -> Value {
        self.wait_status(id, "broadcasted", 60);
        self.anvil.mine(16);
        let done = self.wait_status(id, "confirmed", 60);
        assert_eq!(self.anvil.balance(DESTINATION), amount, "paid exactly once");
        assert_eq!(self.hot_nonce(), 1, "one transaction from the hot wallet");
        let receipt = self.anvil.mined(done["tx_hash"].as_str().unwrap());
        assert_eq!(receipt["status"], "0x1");
        let (ok, out, _) = self.custody.cli(&["ledger", "reconcile"]);
        assert!(ok, "{out}");
        done
    }
}

#[test]
fn a_transaction_dropped_from_the_pool_is_replaced_and_confirmed_once() {
    let Some(anvil) = Anvil::start() else { return };
    let mut s = setup(anvil, None);
    s.start(true);
    s.anvil.set_automine(false);
    let id = s.withdraw(ETH / 10, "dropped-1");
    let first = s.wait_status(&id, "broadcasted", 30);
    let first_hash = first["tx_hash"].as_str().unwrap().to_owned();
    let gas_price = |hash: &str| {
        let tx = s.anvil.rpc("eth_getTransactionByHash", json!([hash]));
        (
            custody_e2e::anvil::hex_u128(&tx["gasPrice"]),
            custody_e2e::anvil::hex_u64(&tx["nonce"]),
        )
    };
    let (old_price, nonce) = gas_price(&first_hash);
    assert_eq!(nonce, 0);
    s.anvil.rpc("anvil_dropTransaction", json!([first_hash]));
    assert!(
        s.anvil
            .rpc("eth_getTransactionByHash", json!([first_hash]))
            .is_null(),
        "the node forgot it"
    );
    // After replace_after a replacement under the same nonce, at a higher price.
    let replaced = s.custody.wait_for(30, "a replacement", || {
        let v = s.get(&id);
        let h = v["tx_hash"].as_str()?.to_owned();
        (h != first_hash).then_some(h)
    });
    let (new_price, nonce) = gas_price(&replaced);
    assert!(
        new_price * 100 >= old_price * 110,
        "{old_price} -> {new_price}: at least +10 %"
    );
    assert_eq!(nonce, 0, "the same nonce");
    s.anvil.set_automine(true);
    s.anvil.mine(1);
    let done = s.confirm_paid_once(&id, ETH / 10);
    assert_eq!(done["tx_hash"], replaced.as_str());
    s.custody.stop();
}

#[test]
fn a_broadcast_whose_connection_is_cut_after_sending_is_not_paid_twice() {
    let Some(anvil) = Anvil::start() else { return };
    let proxy = RpcProxy::start(&anvil.url());
    let mut s = setup(anvil, Some(&proxy.url()));
    s.start(true);
    proxy.set_send_fault(SendFault::CutAfterForward);
    let id = s.withdraw(ETH / 10, "cut-0001");
    s.custody.wait_for(30, "a send forwarded", || {
        (proxy.sends_forwarded() >= 1).then_some(())
    });
    // The answer never came: the engine sends the same bytes again (the node knows them) and
    // asks the chain, which has the transaction.
    let done = s.confirm_paid_once(&id, ETH / 10);
    assert!(done["tx_hash"].as_str().unwrap().starts_with("0x"));
    s.custody.stop();
}

#[test]
fn kill_9_between_signing_and_sending_sends_the_stored_transaction_once_after_restart() {
    let Some(anvil) = Anvil::start() else { return };
    let proxy = RpcProxy::start(&anvil.url());
    let mut s = setup(anvil, Some(&proxy.url()));
    s.start(true);
    proxy.set_send_fault(SendFault::HoldBeforeForward);
    let id = s.withdraw(ETH / 10, "crash-0001");
    // Signed and stored (the send is on its way), never reached the node: kill -9 now.
    s.custody.wait_for(30, "a send held", || {
        (proxy.sends_seen() >= 1).then_some(())
    });
    s.custody.kill9();
    assert_eq!(proxy.sends_forwarded(), 0);
    assert_eq!(s.anvil.balance(DESTINATION), 0);
    proxy.set_send_fault(SendFault::Pass);
    s.start(false);
    s.confirm_paid_once(&id, ETH / 10);
    s.custody.stop();
}

#[test]
fn kill_9_between_sending_and_recording_the_answer_is_not_paid_twice() {
    let Some(anvil) = Anvil::start() else { return };
    let proxy = RpcProxy::start(&anvil.url());
    let mut s = setup(anvil, Some(&proxy.url()));
    s.start(true);
    proxy.set_send_fault(SendFault::HoldAfterForward);
    let id = s.withdraw(ETH / 10, "crash-0002");
    // The node has (and anvil has mined) the transaction; the service never heard back.
    s.custody.wait_for(30, "a send forwarded", || {
        (proxy.sends_forwarded() >= 1).then_some(())
    });
    s.custody.kill9();
    assert_eq!(s.anvil.balance(DESTINATION), ETH / 10);
    proxy.set_send_fault(SendFault::Pass);
    s.start(false);
    s.confirm_paid_once(&id, ETH / 10);
    s.custody.stop();
}

#[test]
fn sixty_four_concurrent_withdrawals_reserve_exactly_what_the_balance_affords() {
    let Some(anvil) = Anvil::start() else { return };
    let mut s = setup(anvil, None);
    s.start(true);
    let client = s.client();
    // Quotes first: each costs the same total.
    let mut quotes = Vec::new();
    for _ in 0..64 {
        let q = client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": DESTINATION, "amount_units": (ETH / 10).to_string() }),
            None,
        );
        assert_eq!(q.status, 201, "{:?}", q.json());
        quotes.push(q.json());
    }
    let total: u128 = quotes[0]["costs"]["total_debited_units"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(quotes
        .iter()
        .all(|q| q["costs"]["total_debited_units"] == quotes[0]["costs"]["total_debited_units"]));
    let affordable = (2 * ETH / total) as usize;
    assert!(affordable > 0 && affordable < 64, "{affordable}");
    let results: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = quotes
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let client = s.client();
                scope.spawn(move || {
                    let r = client.post(
                        "/v1/withdrawals",
                        &json!({ "quote_id": q["id"] }),
                        Some(&format!("concurrent-{i:04}")),
                    );
                    (
                        r.status,
                        if r.status == 201 {
                            String::new()
                        } else {
                            r.code()
                        },
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let reserved = results.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(reserved, affordable, "{results:?}");
    assert!(results
        .iter()
        .filter(|(status, _)| *status != 201)
        .all(|(status, code)| *status == 409 && code == "INSUFFICIENT_BALANCE"));
    let wallet = client.wallet("alice", "BSC");
    let balance = client.ledger_balance(wallet["id"].as_str().unwrap(), "BNB");
    let held = total * affordable as u128;
    assert_eq!(balance["available_units"], (2 * ETH - held).to_string());
    assert_eq!(balance["reserved_units"], held.to_string());
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    s.custody.stop();
}
