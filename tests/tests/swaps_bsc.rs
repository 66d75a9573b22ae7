//! Swaps end to end on anvil through `custody serve`, against the Uniswap V2 contracts npm ships,
//! placed at PancakeSwap's and the catalog tokens' mainnet addresses (custody_e2e::dex), with the
//! default catalog and `[swaps]`: token→token through WBNB (with no direct pool, and with a dust
//! one), BNB→token and token→BNB with the hot wallet's balances on the node and the user's in the
//! ledger, the router approved once, the user credited what the router actually gave, replays
//! and spent quotes, operators' switches, and a swap whose pool moved past the slippage failing
//! with its hold released.

use custody_e2e::anvil::Anvil;
use custody_e2e::dex::{Dex, USDC, USDT, WBNB};
use custody_e2e::receiver::set_config;
use custody_e2e::{Client, Cred, Custody};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;

struct Setup<'a> {
    anvil: &'a Anvil,
    dex: Dex<'a>,
    custody: Custody,
    cred: Cred,
    hot: String,
}

/// Pools USDT/BNB at 600 USDT per BNB and USDC/BNB at 601, no USDT/USDC pool; the hot wallet
/// holds 10 BNB, 5,000 USDT and 5,000 USDC on chain; alice holds 1,000 USDT and 5 BNB.
fn setup(anvil: &Anvil) -> Setup<'_> {
    let dex = Dex::deploy(anvil);
    dex.add_liquidity_bnb(USDT, 600_000 * E18, 1_000 * E18);
    dex.add_liquidity_bnb(USDC, 601_000 * E18, 1_000 * E18);
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
    anvil.send_value(&dex.lp, &hot, 10 * E18);
    dex.deal(USDT, &hot, 5_000 * E18);
    dex.deal(USDC, &hot, 5_000 * E18);
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
        &(1_000 * E18).to_string(),
    );
    s.custody
        .adjust("acme", "alice", "BSC", "BNB", true, &(5 * E18).to_string());
    s
}

fn units(v: &Value) -> u128 {
    v.as_str()
        .unwrap_or_else(|| panic!("units: {v}"))
        .parse()
        .unwrap()
}

impl Setup<'_> {
    fn client(&self) -> Client {
        self.custody.client(&self.cred)
    }

    fn quote(&self, asset_in: &str, asset_out: &str, amount: u128, slippage: u32) -> Value {
        let q = self.client().post(
            "/v1/swaps/quote",
            &json!({ "external_user_id": "alice", "asset_in": asset_in, "asset_out": asset_out,
                     "amount_in_units": amount.to_string(), "slippage_bps": slippage }),
            None,
        );
        assert_eq!(q.status, 201, "{:?}", q.json());
        q.json()
    }

    fn execute(&self, quote: &Value, key: &str) -> Value {
        let r = self
            .client()
            .post("/v1/swaps", &json!({ "quote_id": quote["id"] }), Some(key));
        assert_eq!(r.status, 201, "{:?}", r.json());
        r.json()
    }

    fn wait(&self, id: &str, status: &str) -> Value {
        self.custody.wait_for(60, status, || {
            let v = self.client().get(&format!("/v1/swaps/{id}")).json();
            (v["status"] == status).then_some(v)
        })
    }

    /// Mines to depth and waits for the swap's end, mining on while it waits: a swap can be
    /// broadcast before an approval ahead of it in nonce order, and is then mined only once that
    /// approval is sent, in a block after those mined here.
    fn settle(&self, id: &str, status: &str) -> Value {
        self.wait(id, "broadcasted");
        self.anvil.mine(16);
        self.custody.wait_for(60, status, || {
            let v = self.client().get(&format!("/v1/swaps/{id}")).json();
            if v["status"] == status {
                return Some(v);
            }
            self.anvil.mine(1);
            None
        })
    }

    fn available(&self, asset: &str) -> u128 {
        let c = self.client();
        let wallet = c.wallet("alice", "BSC");
        units(&c.ledger_balance(wallet["id"].as_str().unwrap(), asset)["available_units"])
    }
}

#[test]
fn swaps_route_through_wbnb_credit_the_actual_output_and_settle_the_hold() {
    let Some(anvil) = Anvil::start() else { return };
    let s = setup(&anvil);
    let c = s.client();

    // Refusals of the quote.
    let bad = |body: Value, status: u16, code: &str| {
        let r = c.post("/v1/swaps/quote", &body, None);
        assert_eq!((r.status, r.code()), (status, code.to_owned()), "{body}");
    };
    bad(
        json!({ "external_user_id": "alice", "asset_in": "TRX", "asset_out": "USDT", "amount_in_units": "1000" }),
        422,
        "CROSS_CHAIN_NOT_SUPPORTED",
    );
    bad(
        json!({ "external_user_id": "alice", "asset_in": "USDT", "asset_out": "USDT", "amount_in_units": "1000" }),
        422,
        "UNSUPPORTED_PAIR",
    );
    bad(
        json!({ "external_user_id": "alice", "asset_in": "USDT", "asset_out": "USDC", "amount_in_units": "1000", "slippage_bps": 0 }),
        422,
        "VALIDATION_FAILED",
    );

    // USDT → USDC has no direct pool at all: through WBNB.
    let amount = 100 * E18;
    let q = s.quote("USDT", "USDC", amount, 100);
    assert_eq!(q["route"], json!(["USDT", "BNB", "USDC"]));
    let via = *s
        .dex
        .amounts_out(amount, &[USDT, WBNB, USDC])
        .last()
        .unwrap();
    assert_eq!(units(&q["expected_amount_out_units"]), via);

    // USDT → USDC has only a dust direct pool (anyone can create one): through WBNB, where the
    // router gives far more, priced by the router itself.
    s.dex.add_liquidity(USDT, USDC, 10_000, 10_000);
    assert!(*s.dex.amounts_out(amount, &[USDT, USDC]).last().unwrap() > 0);
    let q = s.quote("USDT", "USDC", amount, 100);
    assert_eq!(q["route"], json!(["USDT", "BNB", "USDC"]));
    let expected = *s
        .dex
        .amounts_out(amount, &[USDT, WBNB, USDC])
        .last()
        .unwrap();
    assert_eq!(units(&q["expected_amount_out_units"]), expected);
    assert_eq!(
        units(&q["min_amount_out_units"]),
        expected / 10_000 * 9_900 + expected % 10_000 * 9_900 / 10_000
    );
    let total = units(&q["costs"]["total_debited_units"]);
    assert!(units(&q["costs"]["network_cost_units"]) > 0);
    assert!(units(&q["costs"]["spread_units"]) > 0);

    // The price moves a little between the quote and the swap: the user gets what the router
    // actually gives, not the estimate.
    s.dex.swap(1_000 * E18, &[USDC, WBNB]);
    let usdc_before = s.anvil.token_balance(USDC, &s.hot);
    let w = s.execute(&q, "swap-usdt-usdc-1");
    assert_eq!(w["status"], "reserved");
    assert_eq!(s.available("USDT"), 1_000 * E18 - total);
    // The same key and body: the stored answer, and nothing executed again.
    let replay = c.post(
        "/v1/swaps",
        &json!({ "quote_id": q["id"] }),
        Some("swap-usdt-usdc-1"),
    );
    assert_eq!(replay.status, 201);
    assert_eq!(replay.header("Idempotent-Replayed"), Some("true"));
    assert_eq!(replay.json(), w);
    // Under another key the quote is spent.
    let again = c.post(
        "/v1/swaps",
        &json!({ "quote_id": q["id"] }),
        Some("swap-usdt-usdc-2"),
    );
    assert_eq!(
        (again.status, again.code()),
        (409, "QUOTE_ALREADY_USED".to_owned())
    );
    assert_eq!(s.available("USDT"), 1_000 * E18 - total, "held once");
    let done = s.settle(w["id"].as_str().unwrap(), "confirmed");
    let got = s.anvil.token_balance(USDC, &s.hot) - usdc_before;
    assert_eq!(units(&done["actual_amount_out_units"]), got);
    assert_ne!(got, expected, "the pool moved");
    assert!(got >= units(&q["min_amount_out_units"]));
    assert_eq!(units(&done["actual_amount_in_units"]), amount);
    assert!(units(&done["actual_network_cost_units"]) > 0);
    assert!(done["tx_hash"].as_str().unwrap().starts_with("0x"));
    assert_eq!(s.available("USDC"), got);
    assert_eq!(s.available("USDT"), 1_000 * E18 - total);
    let steps: Vec<_> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps, ["reserved", "broadcasted", "confirmed"]);

    // BNB → USDT and USDT → BNB (the wrapped coin's moves read from the receipt).
    let gas_paid = |done: &Value| {
        let receipt = s.anvil.mined(done["tx_hash"].as_str().unwrap());
        custody_e2e::anvil::hex_u128(&receipt["gasUsed"])
            * custody_e2e::anvil::hex_u128(&receipt["effectiveGasPrice"])
    };
    let bnb_in = E18 / 2;
    let q = s.quote("BNB", "USDT", bnb_in, 50);
    assert_eq!(q["route"], json!(["BNB", "USDT"]));
    let bnb_total = units(&q["costs"]["total_debited_units"]);
    let (usdt_before, bnb_before) = (s.anvil.token_balance(USDT, &s.hot), s.anvil.balance(&s.hot));
    let usdt_user = s.available("USDT");
    let w = s.execute(&q, "swap-bnb-usdt-1");
    let done = s.settle(w["id"].as_str().unwrap(), "confirmed");
    let got_usdt = s.anvil.token_balance(USDT, &s.hot) - usdt_before;
    assert_eq!(units(&done["actual_amount_out_units"]), got_usdt);
    // The hot wallet paid exactly amount_in and the gas in BNB, and received the output.
    assert_eq!(
        s.anvil.balance(&s.hot),
        bnb_before - bnb_in - gas_paid(&done)
    );
    // The user paid the quoted total in BNB and was credited the actual output in USDT.
    assert_eq!(s.available("BNB"), 5 * E18 - bnb_total);
    assert_eq!(s.available("USDT"), usdt_user + got_usdt);
    assert_eq!(usdt_user, 1_000 * E18 - total);

    let usdt_in = 50 * E18;
    let q = s.quote("USDT", "BNB", usdt_in, 50);
    let usdt_total = units(&q["costs"]["total_debited_units"]);
    let (usdt_before, bnb_before) = (s.anvil.token_balance(USDT, &s.hot), s.anvil.balance(&s.hot));
    let (usdt_user, bnb_user) = (s.available("USDT"), s.available("BNB"));
    let w = s.execute(&q, "swap-usdt-bnb-1");
    let done = s.settle(w["id"].as_str().unwrap(), "confirmed");
    let got_bnb = units(&done["actual_amount_out_units"]);
    assert!(got_bnb > 0);
    // The router was approved for USDT by the first swap: only the swap left the hot wallet.
    assert_eq!(
        s.anvil.balance(&s.hot),
        bnb_before + got_bnb - gas_paid(&done)
    );
    assert_eq!(s.anvil.token_balance(USDT, &s.hot), usdt_before - usdt_in);
    assert_eq!(s.available("USDT"), usdt_user - usdt_total);
    assert_eq!(s.available("BNB"), bnb_user + got_bnb);

    // A BNB quote larger than the hot wallet's BNB (10) is priced, not a 503: the node cannot
    // estimate it now, and the swap would wait for funds.
    let q = s.quote("BNB", "USDT", 20 * E18, 50);
    assert!(units(&q["costs"]["network_cost_units"]) > 0);

    // Operators' switches refuse quotes with their codes, and quotes work again once off.
    let ops = s.custody.credential("ops", &["--admin"]);
    let admin = s.custody.client(&ops);
    let swap_quote = json!({ "external_user_id": "alice", "asset_in": "USDT",
                             "asset_out": "BNB", "amount_in_units": (E18).to_string() });
    for (key, code) in [
        ("kill_switch.swaps", "KILL_SWITCH_ACTIVE"),
        ("maintenance.BSC", "MAINTENANCE"),
    ] {
        let set = |enabled: bool| {
            let r = admin.post(
                "/v1/admin/controls",
                &json!({ "control_key": key, "enabled": enabled, "reason": "swap test" }),
                None,
            );
            assert_eq!(r.status, 200, "{:?}", r.json());
        };
        set(true);
        let r = c.post("/v1/swaps/quote", &swap_quote, None);
        assert_eq!((r.status, r.code()), (503, code.to_owned()), "{key}");
        set(false);
        let r = c.post("/v1/swaps/quote", &swap_quote, None);
        assert_eq!(r.status, 201, "{key} off: {:?}", r.json());
    }

    // Operators see every tenant's swaps; the ledger reconciles.
    let listed = admin.get("/v1/admin/swaps?limit=2").json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
    assert_eq!(listed["has_more"], true);
    assert_eq!(listed["data"][0]["tenant"], "acme");
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();
}

#[test]
fn a_swap_whose_pool_moved_past_the_slippage_fails_and_releases_the_hold() {
    let Some(anvil) = Anvil::start() else { return };
    let s = setup(&anvil);
    let before = s.available("USDT");
    let q = s.quote("USDT", "BNB", 100 * E18, 10);
    // Someone sells a lot of USDT for BNB first: the router now gives far less.
    s.dex.swap(100_000 * E18, &[USDT, WBNB]);
    let w = s.execute(&q, "swap-slipped-1");
    let id = w["id"].as_str().unwrap().to_owned();
    let failed = s.settle(&id, "failed");
    assert!(
        failed["failure_reason"]
            .as_str()
            .unwrap()
            .contains("minimum output"),
        "{failed}"
    );
    assert!(failed["actual_amount_out_units"].is_null());
    assert_eq!(s.available("USDT"), before, "the hold is released in full");
    let receipt = s.anvil.mined(failed["tx_hash"].as_str().unwrap());
    assert_eq!(receipt["status"], "0x0", "reverted on chain");
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();
}

/// The router's approval on chain, `allowance(hot, ROUTER)` of `token`.
fn allowance_on_chain(anvil: &Anvil, token: &str, owner: &str, spender: &str) -> u128 {
    let word = |a: &str| format!("{:0>64}", a.trim_start_matches("0x").to_lowercase());
    let data = format!("0xdd62ed3e{}{}", word(owner), word(spender));
    let v = anvil.rpc("eth_call", json!([{ "to": token, "data": data }, "latest"]));
    u128::from_str_radix(&v.as_str().unwrap()[2 + 32..], 16).unwrap()
}

/// Issue 31, F14: the router is approved without limit, so a router change must not leave
/// the old router able to take the hot wallet's tokens: the service, restarted with another
/// router, revokes the old approval on chain (an audited `approve(0)`), paying only its gas.
#[test]
fn a_router_change_revokes_the_old_routers_approval_on_chain() {
    let Some(anvil) = Anvil::start() else { return };
    let s = setup(&anvil);
    let q = s.quote("USDT", "BNB", 100 * E18, 100);
    let w = s.execute(&q, "swap-before-router-change");
    s.settle(w["id"].as_str().unwrap(), "confirmed");
    let router = custody_e2e::dex::ROUTER;
    assert!(allowance_on_chain(&anvil, USDT, &s.hot, router) > 1u128 << 100);
    let mut custody = s.custody;
    custody.stop();
    let ops = custody.credential("ops", &["--admin"]);
    let books_of = |c: &Custody| c.client(&ops).ledger_books();
    let hot_bnb = anvil.balance(&s.hot);
    let hot_usdt = anvil.token_balance(USDT, &s.hot);
    set_config(
        &custody.data_dir(),
        "swaps",
        "router",
        "\"0x00000000000000000000000000000000000000E2\"",
    );
    custody.start();
    let before = books_of(&custody);
    let alice = custody.client(&s.cred).wallet("alice", "BSC");
    let alice_before = custody.client(&s.cred).all_balances(&alice);
    custody.wait_for(60, "the old router's approval revoked on chain", || {
        anvil.mine(1);
        (allowance_on_chain(&anvil, USDT, &s.hot, router) == 0).then_some(())
    });
    anvil.mine(16);
    let fee_key = "system:network_fees:BSC:BNB";
    let after = custody.wait_for(60, "the revocation's fee booked", || {
        let b = books_of(&custody);
        (b.get(fee_key) != before.get(fee_key)).then_some(b)
    });
    let fee = u128::try_from(before.get(fee_key).copied().unwrap_or(0) - after[fee_key]).unwrap();
    assert!(fee > 0);
    assert_eq!(
        anvil.balance(&s.hot),
        hot_bnb - fee,
        "only the revocation's gas"
    );
    assert_eq!(anvil.token_balance(USDT, &s.hot), hot_usdt);
    assert_eq!(
        custody.client(&s.cred).all_balances(&alice),
        alice_before,
        "no user's balance moved"
    );
    let audit = custody.client(&ops).get("/v1/admin/audit?limit=100").json();
    assert!(audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["action"] == "swap.router_approval_revoked"));
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}
