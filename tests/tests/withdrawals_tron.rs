//! TRON withdrawals end to end: `custody serve` quoting from the TRON HTTP API test server
//! (which checks broadcasts as a node does, pools them and executes them into its blocks),
//! paying TRX and USDT from the hot wallet through the outgoing-transaction engine and
//! following them to 19 confirmations; a TRC20 transfer that reverts on chain ends `failed`
//! with the hold released; a transaction that expired unseen is rebuilt only once the head is
//! past its expiration by the confirmation depth, and the destination is paid once. The stored
//! payment keeps the resource plan it was priced with beside what the chain charged.

use std::path::Path;

use custody_e2e::receiver::set_config;
use custody_e2e::tron_api::TronApi;
use custody_e2e::{Client, Cred, Custody};
use serde_json::{json, Value};

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
/// Addresses that hold nothing yet.
const NEW_ACCOUNT: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";
const HOLDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";
const TRX: u128 = 1_000_000;
/// One TRX in sun, as the server's balances hold it.
const SUN: i64 = 1_000_000;
const MAINNET_GENESIS: &str = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";

struct Setup {
    api: TronApi,
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

/// A server with blocks to reference, the hot wallet holding 1,000 TRX and 1,000 USDT, alice
/// holding 100 TRX and 100 USDT, USDT priced at 0.12 per TRX (`[[native_rates]]`).
fn setup() -> Setup {
    let api = TronApi::start();
    api.append_empty(30);
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_TRON_API_URLS", api.url())],
    );
    custody.edit_config(
        &format!("genesis_block_id = \"{MAINNET_GENESIS}\""),
        &format!("genesis_block_id = \"{}\"", api.genesis_block_id()),
    );
    let dir = custody.data_dir();
    set_config(&dir, "tron", "poll_interval_ms", "100");
    set_config(&dir, "tron", "start_block", &api.head().number.to_string());
    set_config(&dir, "tron.sending", "rebroadcast_after_ms", "1000");
    set_config(&dir, "tron.sending", "replace_after_ms", "3000");
    set_config(&dir, "tron.sending", "lease_ms", "3000");
    let path = dir.join("custody.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(
        "\n[[native_rates]]\nnetwork = \"TRON\"\nasset = \"USDT\"\nasset_units = \"120000\"\nnative_units = \"1000000\"\n",
    );
    std::fs::write(&path, text).unwrap();
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let hot = custody.hot_wallet("TRON");
    api.set_trx_balance(&hot, 1_000 * SUN);
    api.set_trc20_balance(USDT, &hot, 1_000 * TRX);
    custody.start();
    let s = Setup {
        api,
        custody,
        cred,
        hot,
    };
    s.client().wallet("alice", "TRON");
    s.custody.adjust(
        "acme",
        "alice",
        "TRON",
        "TRX",
        true,
        &(100 * TRX).to_string(),
    );
    s.custody.adjust(
        "acme",
        "alice",
        "TRON",
        "USDT",
        true,
        &(100 * TRX).to_string(),
    );
    s
}

impl Setup {
    fn client(&self) -> Client {
        self.custody.client(&self.cred)
    }

    fn quote(&self, asset: &str, to: &str, amount: u128) -> Value {
        let q = self.client().post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "TRON", "asset": asset,
                     "destination_address": to, "amount_units": amount.to_string() }),
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

    fn get(&self, id: &str) -> Value {
        self.client().get(&format!("/v1/withdrawals/{id}")).json()
    }

    fn wait(&self, id: &str, status: &str) -> Value {
        self.custody.wait_for(60, status, || {
            let v = self.get(id);
            (v["status"] == status).then_some(v)
        })
    }

    /// Includes what is pooled, adds 18 blocks on top, and waits for the end.
    fn settle(&self, id: &str, status: &str) -> Value {
        self.wait(id, "broadcasted");
        self.api.produce_block();
        self.api.append_empty(18);
        self.wait(id, status)
    }

    fn balance(&self, asset: &str) -> Value {
        let c = self.client();
        let wallet = c.wallet("alice", "TRON");
        c.ledger_balance(wallet["id"].as_str().unwrap(), asset)
    }
}

/// The resource plan of the attempt that was included and the resources the chain charged
/// it, as the broadcaster stored them for withdrawal `id` (custody.db, read after the run).
fn stored_plan_and_actual(dir: &Path, id: &str) -> (Value, Value) {
    let db = rusqlite::Connection::open_with_flags(
        dir.join("custody.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (attempts, included): (String, String) = db
        .query_row(
            "SELECT attempts, included FROM outgoing_txs \
             WHERE purpose = 'withdrawal' AND reference_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    let included: Value = serde_json::from_str(&included).unwrap();
    let attempt = attempts
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["hash"] == included["hash"])
        .expect("the included attempt is stored")
        .clone();
    (attempt["plan"].clone(), included["resources"].clone())
}

#[test]
fn trx_and_usdt_withdrawals_are_sent_confirmed_and_paid_once() {
    let s = setup();
    // TRX to an account that does not exist yet: the quote includes its activation.
    let q_new = s.quote("TRX", NEW_ACCOUNT, 10 * TRX);
    s.api.set_trx_balance(HOLDER, 1);
    let q_old = s.quote("TRX", HOLDER, 10 * TRX);
    assert!(
        units(&q_new["costs"]["network_cost_units"]) > units(&q_old["costs"]["network_cost_units"]),
        "a new account costs its activation: {} vs {}",
        q_new["costs"],
        q_old["costs"]
    );
    let total = units(&q_new["costs"]["total_debited_units"]);
    let trx_id = s.execute(&q_new, "tron-trx-0001");
    let id = trx_id.clone();
    let done = s.settle(&id, "confirmed");
    assert_eq!(s.api.trx_balance(NEW_ACCOUNT), Some(10 * SUN), "paid once");
    let hash = done["tx_hash"].as_str().unwrap();
    assert!(!hash.starts_with("0x") && hash.len() == 64, "{hash}");
    assert!(units(&done["actual_network_cost_units"]) > 0);
    assert_eq!(
        units(&s.balance("TRX")["available_units"]),
        100 * TRX - total
    );
    assert_eq!(units(&s.balance("TRX")["reserved_units"]), 0);

    // USDT: a recipient that never held it costs about twice the energy.
    s.api.set_trc20_balance(USDT, HOLDER, 1);
    let q_holder = s.quote("USDT", HOLDER, 5 * TRX);
    let q_fresh = s.quote("USDT", NEW_ACCOUNT, 5 * TRX);
    let (c_holder, c_fresh) = (
        units(&q_holder["costs"]["network_cost_units"]),
        units(&q_fresh["costs"]["network_cost_units"]),
    );
    assert!(c_fresh > c_holder, "{c_fresh} vs {c_holder}");
    assert!(units(&q_fresh["costs"]["spread_units"]) > 0);
    let total = units(&q_fresh["costs"]["total_debited_units"]);
    let usdt_id = s.execute(&q_fresh, "tron-usdt-0001");
    let id = usdt_id.clone();
    s.settle(&id, "confirmed");
    assert_eq!(s.api.trc20_balance(USDT, NEW_ACCOUNT), 5 * TRX);
    assert_eq!(s.api.trc20_balance(USDT, &s.hot), 995 * TRX);
    assert_eq!(
        units(&s.balance("USDT")["available_units"]),
        100 * TRX - total
    );
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();

    // Each stored payment holds its plan beside what the chain charged, and they agree.
    // TRX to a new account: the hot wallet has no bandwidth, so 0.1 TRX instead of it and the
    // 1 TRX system fee.
    let (plan, actual) = stored_plan_and_actual(&custody.data_dir(), &trx_id);
    assert_eq!(plan["operation"]["kind"], "trx_transfer", "{plan}");
    assert_eq!(plan["operation"]["recipient_exists"], false, "{plan}");
    assert_eq!(plan["bandwidth_source"], "create_account_fee", "{plan}");
    assert_eq!(plan["activation_sun"], 1_100_000, "{plan}");
    assert_eq!(actual["net_fee"], 100_000, "{actual}");
    assert_eq!(actual["fee"], plan["total_burn_sun"], "{plan} {actual}");
    // USDT to an address that never held it: the new holder's energy, all of it burned.
    let (plan, actual) = stored_plan_and_actual(&custody.data_dir(), &usdt_id);
    assert_eq!(plan["operation"]["recipient_holds_token"], false, "{plan}");
    assert_eq!(plan["energy_needed"], 130_285, "{plan}");
    assert_eq!(
        actual["energy_usage_total"], plan["energy_needed"],
        "{actual}"
    );
    assert_eq!(actual["energy_fee"], plan["energy_burn_sun"], "{actual}");
    assert_eq!(actual["net_fee"], plan["bandwidth_burn_sun"], "{actual}");
    assert_eq!(actual["fee"], plan["total_burn_sun"], "{plan} {actual}");
}

#[test]
fn a_trc20_transfer_that_reverts_fails_and_releases_the_hold() {
    let s = setup();
    let q = s.quote("USDT", HOLDER, 5 * TRX);
    let id = s.execute(&q, "tron-revert-0001");
    s.wait(&id, "broadcasted");
    // The tokens leave the hot wallet before the transfer is included: it reverts.
    s.api.set_trc20_balance(USDT, &s.hot, 0);
    let failed = s.settle(&id, "failed");
    assert!(failed["failure_reason"].as_str().is_some());
    assert_eq!(s.api.trc20_balance(USDT, HOLDER), 0);
    assert_eq!(units(&s.balance("USDT")["available_units"]), 100 * TRX);
    assert_eq!(units(&s.balance("USDT")["reserved_units"]), 0);
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();
}

#[test]
fn an_expired_transaction_is_rebuilt_only_after_its_expiration_and_paid_once() {
    let s = setup();
    s.api.set_trx_balance(HOLDER, 1);
    s.api.set_inclusion_paused(true);
    let q = s.quote("TRX", HOLDER, 7 * TRX);
    let id = s.execute(&q, "tron-expiry-0001");
    let first = s.wait(&id, "broadcasted")["tx_hash"]
        .as_str()
        .unwrap()
        .to_owned();
    // Blocks come but nothing is included; before the head passes the expiration (60 s of
    // chain time = 20 blocks) the same transaction is the only one ever sent.
    for _ in 0..15 {
        s.api.append_empty(1);
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    // The same bytes (sent again while unseen), never a second transaction.
    let sent: std::collections::BTreeSet<_> = s.api.broadcasts().into_iter().collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(s.get(&id)["tx_hash"], first.as_str());
    // Past the expiration by the confirmation depth (19 blocks: a fork can no longer hold it),
    // unseen: a new transaction.
    s.api.append_empty(30);
    let rebuilt = s.custody.wait_for(60, "a rebuilt transaction", || {
        let h = s.get(&id)["tx_hash"].as_str()?.to_owned();
        (h != first).then_some(h)
    });
    s.api.set_inclusion_paused(false);
    s.api.produce_block();
    s.api.append_empty(18);
    let done = s.wait(&id, "confirmed");
    assert_eq!(done["tx_hash"], rebuilt.as_str());
    assert_eq!(s.api.trx_balance(HOLDER), Some(7 * SUN + 1), "paid once");
    let mut custody = s.custody;
    custody.stop();
}

/// Every ledger account's net balance (credits − debits, posted and pending) in custody.db.
fn ledger_nets(dir: &Path) -> std::collections::BTreeMap<String, i128> {
    let db = rusqlite::Connection::open_with_flags(
        dir.join("custody.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut q = db
        .prepare(
            "SELECT id, debits_posted, credits_posted, debits_pending, credits_pending \
             FROM ledger_accounts",
        )
        .unwrap();
    let rows = q
        .query_map([], |r| {
            let n = |i: usize| -> rusqlite::Result<i128> {
                Ok(r.get::<_, String>(i)?.parse::<i128>().unwrap())
            };
            Ok((r.get::<_, String>(0)?, n(2)? - n(1)? + n(4)? - n(3)?))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The kinds of the alerts raised, in custody.db.
fn alert_kinds(dir: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open_with_flags(
        dir.join("custody.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut q = db.prepare("SELECT kind FROM alerts").unwrap();
    let kinds = q.query_map([], |r| r.get(0)).unwrap();
    kinds.map(Result::unwrap).collect()
}

/// Issue 31, F2: the first transaction of a 5 TRX withdrawal is in a block, but the node
/// answers `{}` to every lookup of its id (a lagging backend behind a load-balanced URL, or a
/// lying endpoint). Past its expiration by the confirmation depth the broadcaster used to
/// sign a second transaction and the destination was paid twice; now the blocks it reads by
/// number list the first one: it is recorded as included, with a `node_inconsistent` alert,
/// and the destination is paid once.
#[test]
fn a_transaction_hidden_from_lookups_is_found_in_its_block_and_paid_once() {
    let s = setup();
    s.api.set_trx_balance(HOLDER, 1);
    let dir = s.custody.data_dir();
    let hot_trx = s.api.trx_balance(&s.hot).unwrap();
    let hot_usdt = s.api.trc20_balance(USDT, &s.hot);
    let (alice_trx, alice_usdt) = (s.balance("TRX"), s.balance("USDT"));
    let ledger_before = ledger_nets(&dir);
    s.api.set_inclusion_paused(true);
    let q = s.quote("TRX", HOLDER, 5 * TRX);
    let total = units(&q["costs"]["total_debited_units"]);
    let id = s.execute(&q, "tron-hidden-0001");
    let first = s.wait(&id, "broadcasted")["tx_hash"]
        .as_str()
        .unwrap()
        .to_owned();
    s.api.hide_from_lookups(&first);
    s.api.set_inclusion_paused(false);
    s.api.produce_block();
    assert_eq!(s.api.trx_balance(HOLDER), Some(5 * SUN + 1), "in a block");
    // Blocks keep coming (they would include anything sent), far past its expiration (20
    // blocks) by the confirmation depth (19): where a second transaction used to be signed.
    let done = s.custody.wait_for(90, "confirmed", || {
        s.api.produce_block();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let v = s.get(&id);
        (v["status"] == "confirmed").then_some(v)
    });
    // A while longer with blocks that would include anything sent.
    for _ in 0..10 {
        s.api.produce_block();
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(done["tx_hash"], first.as_str());
    let sent: std::collections::BTreeSet<_> = s.api.broadcasts().into_iter().collect();
    assert_eq!(sent.len(), 1, "one transaction ever signed: {sent:?}");
    // The destination: exactly 5 TRX, once; no token.
    assert_eq!(s.api.trx_balance(HOLDER), Some(5 * SUN + 1), "paid once");
    assert_eq!(s.api.trc20_balance(USDT, HOLDER), 0);
    // The hot wallet: the one payment and its burn (what the withdrawal books as its cost).
    let cost = units(&done["actual_network_cost_units"]);
    assert!(cost > 0, "{done}");
    assert_eq!(
        s.api.trx_balance(&s.hot).unwrap(),
        hot_trx - 5 * SUN - i64::try_from(cost).unwrap()
    );
    assert_eq!(s.api.trc20_balance(USDT, &s.hot), hot_usdt);
    // Alice: debited once, nothing reserved, her USDT untouched.
    let after = s.balance("TRX");
    assert_eq!(
        units(&after["available_units"]),
        units(&alice_trx["available_units"]) - total
    );
    assert_eq!(units(&after["reserved_units"]), 0);
    assert_eq!(s.balance("USDT"), alice_usdt);
    let (ok, out, _) = s.custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    let mut custody = s.custody;
    custody.stop();
    // The house: alice debited the total once, the treasury out by the one payment and its
    // burn, the markup earned; nothing else moved.
    let ledger_after = ledger_nets(&dir);
    let moved: std::collections::BTreeMap<_, _> = ledger_after
        .iter()
        .map(|(k, v)| (k.clone(), v - ledger_before.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect();
    let markup = i128::try_from(units(&done["costs"]["markup_units"])).unwrap();
    let expected: std::collections::BTreeMap<String, i128> = [
        ("user:acme:TRON:TRX:alice", -i128::try_from(total).unwrap()),
        (
            "system:treasury:TRON:TRX",
            i128::from(5 * SUN) + i128::try_from(cost).unwrap(),
        ),
        ("system:revenue:TRON:TRX", markup),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(moved, expected);
    let kinds = alert_kinds(&dir);
    assert!(kinds.iter().any(|k| k == "node_inconsistent"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "double_payment"), "{kinds:?}");
}
