//! BEP20 withdrawals end to end on anvil through `custody serve`, with the catalog's USDT at its
//! mainnet address and its network cost priced at the DEX router (decisions §11): quoted,
//! reserved, sent, confirmed and settled, the destination's token balance checked on the node;
//! and a token transfer that reverts on chain ending `failed` with the hold released in full.

use custody_e2e::anvil::{hex_u128, hex_u64, Anvil};
use custody_e2e::dex::{Dex, USDT, WBNB};
use custody_e2e::receiver::set_config;
use custody_e2e::{Client, Cred, Custody};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000D5";

struct Setup<'a> {
    anvil: &'a Anvil,
    dex: Dex<'a>,
    custody: Custody,
    cred: Cred,
    hot: String,
}

fn units(v: &Value) -> u128 {
    v.as_str()
        .unwrap_or_else(|| panic!("units: {v}"))
        .parse()
        .unwrap()
}

/// A USDT/BNB pool at 600 USDT per BNB; the hot wallet holds 1 BNB and 1,000 USDT on chain;
/// alice holds 500 USDT.
fn setup(anvil: &Anvil) -> Setup<'_> {
    let dex = Dex::deploy(anvil);
    dex.add_liquidity_bnb(USDT, 600_000 * E18, 1_000 * E18);
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(&dex.lp, &hot, E18);
    dex.deal(USDT, &hot, 1_000 * E18);
    custody.start();
    let s = Setup {
        anvil,
        dex,
        custody,
        cred,
        hot,
    };
    s.client().wallet("alice", "BSC");
    s.custody.adjust(
        "acme",
        "alice",
        "BSC",
        "USDT",
        true,
        &(500 * E18).to_string(),
    );
    s
}

impl Setup<'_> {
    fn client(&self) -> Client {
        self.custody.client(&self.cred)
    }

    fn quote(&self, amount: u128) -> Value {
        let q = self.client().post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "USDT",
                     "destination_address": DESTINATION, "amount_units": amount.to_string() }),
            None,
        );
        assert_eq!(q.status, 201, "{:?}", q.json());
        q.json()
    }

    fn execute(&self, q: &Value, key: &str) -> String {
        let w = self.client().post(
            "/v1/withdrawals",
            &json!({ "quote_id": q["id"] }),
            Some(key),
        );
        assert_eq!(w.status, 201, "{:?}", w.json());
        w.json()["id"].as_str().unwrap().to_owned()
    }

    fn wait(&self, id: &str, status: &str) -> Value {
        self.custody.wait_for(60, status, || {
            let v = self.client().get(&format!("/v1/withdrawals/{id}")).json();
            (v["status"] == status).then_some(v)
        })
    }

    fn usdt(&self) -> Value {
        let c = self.client();
        let wallet = c.wallet("alice", "BSC");
        c.ledger_balance(wallet["id"].as_str().unwrap(), "USDT")
    }
}

#[test]
fn a_usdt_withdrawal_is_priced_at_the_router_and_paid_once() {
    let Some(anvil) = Anvil::start() else { return };
    let s = setup(&anvil);
    let amount = 100 * E18;
    let q = s.quote(amount);
    // The network cost: the node's gas estimate of the transfer × its gas price, in USDT at
    // what the router gives for one BNB, rounded up.
    let transfer = format!(
        "0xa9059cbb{:0>64}{:064x}",
        DESTINATION.trim_start_matches("0x").to_lowercase(),
        amount
    );
    let gas = hex_u64(&s.anvil.rpc(
        "eth_estimateGas",
        json!([{ "from": s.hot, "to": USDT, "data": transfer }]),
    )) as u128;
    let price = hex_u128(&s.anvil.rpc("eth_gasPrice", json!([]))).max(50_000_000);
    let usdt_per_bnb = *s.dex.amounts_out(E18, &[WBNB, USDT]).last().unwrap();
    let expected_cost = (gas * price * usdt_per_bnb).div_ceil(E18);
    assert_eq!(units(&q["costs"]["network_cost_units"]), expected_cost);
    assert!(
        units(&q["costs"]["spread_units"]) > 0,
        "a converted cost has a spread"
    );
    let total = units(&q["costs"]["total_debited_units"]);

    let id = s.execute(&q, "bep20-withdraw-1");
    assert_eq!(units(&s.usdt()["reserved_units"]), total);
    s.wait(&id, "broadcasted");
    s.anvil.mine(16);
    let done = s.wait(&id, "confirmed");
    assert_eq!(
        s.anvil.token_balance(USDT, DESTINATION),
        amount,
        "paid once"
    );
    assert_eq!(s.anvil.token_balance(USDT, &s.hot), 1_000 * E18 - amount);
    assert!(units(&done["actual_network_cost_units"]) > 0);
    let b = s.usdt();
    assert_eq!(units(&b["available_units"]), 500 * E18 - total);
    assert_eq!(units(&b["reserved_units"]), 0);
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();
}

#[test]
fn a_token_transfer_that_reverts_on_chain_fails_and_releases_the_hold() {
    let Some(anvil) = Anvil::start() else { return };
    let s = setup(&anvil);
    let q = s.quote(100 * E18);
    s.anvil.set_automine(false);
    let id = s.execute(&q, "bep20-revert-1");
    s.wait(&id, "broadcasted");
    // The tokens leave the hot wallet before the transfer is mined: it reverts.
    s.dex.deal(USDT, &s.hot, 0);
    s.anvil.set_automine(true);
    s.anvil.mine(16);
    let failed = s.wait(&id, "failed");
    let receipt = s.anvil.mined(failed["tx_hash"].as_str().unwrap());
    assert_eq!(receipt["status"], "0x0");
    assert!(failed["failure_reason"].as_str().is_some());
    assert_eq!(s.anvil.token_balance(USDT, DESTINATION), 0);
    let b = s.usdt();
    assert_eq!(units(&b["available_units"]), 500 * E18, "released in full");
    assert_eq!(units(&b["reserved_units"]), 0);
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();
}

#[test]
fn a_usdt_withdrawal_the_hot_wallet_cannot_cover_is_quoted_waits_with_an_alert_then_goes_out() {
    let Some(anvil) = Anvil::start() else { return };
    let s = setup(&anvil);
    s.dex.deal(USDT, &s.hot, 0);
    // The node cannot estimate a transfer of tokens the wallet lacks: still quoted.
    let q = s.quote(100 * E18);
    assert!(units(&q["costs"]["network_cost_units"]) > 0);
    let id = s.execute(&q, "bep20-short-1");
    let ops = s.custody.credential("ops", &["--admin"]);
    let admin = s.custody.client(&ops);
    let alert = s
        .custody
        .wait_for(30, "a hot_wallet_insufficient alert", || {
            admin.get("/v1/admin/alerts?limit=50").json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["kind"] == "hot_wallet_insufficient")
                .cloned()
        });
    assert!(
        alert["message"].as_str().unwrap().contains("token"),
        "{alert}"
    );
    assert_eq!(
        s.client().get(&format!("/v1/withdrawals/{id}")).json()["status"],
        "reserved"
    );
    s.dex.deal(USDT, &s.hot, 1_000 * E18);
    s.wait(&id, "broadcasted");
    s.anvil.mine(16);
    s.wait(&id, "confirmed");
    assert_eq!(s.anvil.token_balance(USDT, DESTINATION), 100 * E18);
    let mut custody = s.custody;
    custody.stop();
}
