//! A TRC20 sweep on the TRON API test server through `custody serve` (decisions §13): a USDT
//! deposit credited on an address that holds no TRX (its account does not even exist) is
//! swept to the hot wallet after a TRX treasury funding, and only once that funding is final;
//! the books follow the chain. With `[sweeps] tron_energy_mode = "delegate"` the energy is
//! lent from the hot wallet's stake instead, and taken back after the sweep.

use custody_e2e::receiver::set_config;
use custody_e2e::tron_api::{
    BlockSpec, TronApi, TxSpec, TRC20_TRANSFER_ENERGY, TRC20_TRANSFER_ENERGY_NEW_HOLDER,
};
use custody_e2e::{Cred, Custody};
use serde_json::Value;

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const SENDER: &str = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy";
const SUN: i64 = 1_000_000;
const MAINNET_GENESIS: &str = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";

use custody_e2e::admin_rows as admin;

#[test]
fn a_trc20_deposit_is_swept_after_a_final_trx_funding() {
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
    set_config(&dir, "tron.sending", "lease_ms", "3000");
    set_config(&dir, "sweeps", "interval_ms", "200");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("TRON");
    api.set_trx_balance(&hot, 1_000 * SUN);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let a = alice["address"].as_str().unwrap().to_owned();

    // 50 USDT arrive; the address has no TRX and no account.
    api.append(BlockSpec::new().tx(TxSpec::trc20(USDT, SENDER, &a, 50_000_000)));
    api.set_trc20_balance(USDT, &a, 50_000_000);
    assert_eq!(api.trx_balance(&a), None);
    api.append_empty(19);
    custody.wait_for(60, "credited", || {
        (client.deposits("?status=credited").len() == 1).then_some(())
    });

    let funding = custody.wait_for(60, "a TRX funding broadcast", || {
        admin(&custody, &ops, "treasury-fundings")
            .into_iter()
            .find(|f| f["address"] == a.as_str() && f["status"] == "broadcasted")
    });
    assert_eq!(funding["asset"], "TRX");
    let sweep = custody.wait_for(30, "a sweep waiting for its funding", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == a.as_str() && s["status"] == "funding")
    });
    assert_eq!(sweep["funding_id"], funding["id"]);
    assert_eq!(sweep["asset"], "USDT");
    // Included, not yet final: nothing leaves the address.
    api.produce_block();
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    let funded = api
        .trx_balance(&a)
        .expect("the funding created the account");
    assert!(funded > 0);
    assert_eq!(api.trc20_balance(USDT, &a), 50_000_000);
    assert!(
        api.pool().is_empty(),
        "no sweep before the funding is final"
    );
    api.append_empty(18);
    custody.wait_for(60, "the sweep sent", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "broadcasted")
    });
    api.produce_block();
    api.append_empty(18);
    let done = custody.wait_for(60, "the sweep confirmed", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "confirmed")
    });
    let funding = admin(&custody, &ops, "treasury-fundings")
        .into_iter()
        .find(|f| f["id"] == funding["id"])
        .unwrap();
    assert_eq!(funding["status"], "confirmed");
    assert!(
        done["block_number"].as_u64().unwrap() >= funding["block_number"].as_u64().unwrap() + 19,
        "the sweep was built only after the funding was final: {funding} {done}"
    );
    // TRON ids are bare hex (decisions §10).
    assert!(!done["tx_hash"].as_str().unwrap().starts_with("0x"));
    assert_eq!(api.trc20_balance(USDT, &a), 0);
    assert_eq!(api.trc20_balance(USDT, &hot), 50_000_000);
    // Every party, every asset: the user holds the USDT deposit and nothing else (the TRX
    // top-up is the treasury's own move, never a deposit), and the books follow the chain.
    let units = |v: &Value| v.as_str().unwrap().parse::<i128>().unwrap();
    let (funding_fee, sweep_fee) = (
        units(&funding["network_cost_units"]),
        units(&done["network_cost_units"]),
    );
    let deposits = client.deposits("");
    assert_eq!(deposits.len(), 1, "one deposit, the USDT: {deposits:?}");
    assert_eq!(deposits[0]["asset"], "USDT");
    for (asset, figures) in client.all_balances(&alice) {
        let held = if asset == "USDT" { 50_000_000 } else { 0 };
        assert_eq!(
            figures,
            [held, 0, 0],
            "alice's {asset}: available, reserved, pending"
        );
    }
    let funded = i128::from(funded);
    assert_eq!(
        i128::from(api.trx_balance(&hot).unwrap()),
        i128::from(1_000 * SUN) - funded - funding_fee
    );
    assert_eq!(i128::from(api.trx_balance(&a).unwrap()), funded - sweep_fee);
    let expected: std::collections::BTreeMap<String, i128> = [
        ("user:acme:TRON:USDT:alice", 50_000_000),
        ("system:deposit_clearing:TRON:USDT", 0),
        ("system:treasury:TRON:USDT", -50_000_000),
        ("system:deposit_clearing:TRON:TRX", -(funded - sweep_fee)),
        ("system:treasury:TRON:TRX", funded + funding_fee),
        ("system:network_fees:TRON:TRX", -(funding_fee + sweep_fee)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(custody.client(&ops).ledger_books(), expected);
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}

/// A service pointed at a fresh TRON test chain with sweeps every 200 ms, its energy lent
/// (`[sweeps] tron_energy_mode = "delegate"`), and a hot wallet holding 1,000 TRX and
/// `stake_trx` staked for energy.
fn delegating(api: &TronApi, stake_trx: i64) -> (Custody, Cred, Cred, String) {
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
    set_config(&dir, "tron.sending", "lease_ms", "3000");
    set_config(&dir, "sweeps", "interval_ms", "200");
    set_config(&dir, "sweeps", "tron_energy_mode", "\"delegate\"");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("TRON");
    api.set_trx_balance(&hot, 1_000 * SUN);
    api.set_energy_stake(&hot, stake_trx * SUN);
    custody.start();
    (custody, cred, ops, hot)
}

/// The block of the server's chain that holds `txid`.
fn block_holding(api: &TronApi, txid: &str) -> u64 {
    (1..=api.head().number)
        .find(|n| {
            api.block(*n)
                .is_some_and(|b| b.txids.iter().any(|t| t.eq_ignore_ascii_case(txid)))
        })
        .unwrap_or_else(|| panic!("no block holds {txid}"))
}

fn funding_of(custody: &Custody, ops: &Cred, address: &str, kind: &str) -> Option<Value> {
    admin(custody, ops, "treasury-fundings")
        .into_iter()
        .find(|f| f["address"] == address && f["kind"] == kind)
}

/// Decisions §13 with energy delegation: the address gets TRX for its bandwidth and
/// activation, then the energy of the hot wallet's stake (the resource planner's figure plus
/// the margin) once that TRX is final, the sweep once the delegation is final, and the energy
/// is taken back once the sweep is final. The order is read from the server's blocks.
#[test]
fn a_trc20_sweep_borrows_the_hot_wallets_energy_and_gives_it_back() {
    let api = TronApi::start();
    let (mut custody, cred, ops, hot) = delegating(&api, 40_000);
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let a = alice["address"].as_str().unwrap().to_owned();
    api.append(BlockSpec::new().tx(TxSpec::trc20(USDT, SENDER, &a, 50_000_000)));
    api.set_trc20_balance(USDT, &a, 50_000_000);
    api.append_empty(19);
    custody.wait_for(60, "credited", || {
        (client.deposits("?status=credited").len() == 1).then_some(())
    });

    let funding = custody.wait_for(60, "a TRX funding broadcast", || {
        funding_of(&custody, &ops, &a, "native").filter(|f| f["status"] == "broadcasted")
    });
    let sweep = custody.wait_for(30, "a sweep waiting", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == a.as_str() && s["status"] == "funding")
    });
    let delegation = funding_of(&custody, &ops, &a, "energy_delegation").expect("a delegation");
    assert_eq!(sweep["funding_id"], funding["id"]);
    assert_eq!(sweep["delegation_id"], delegation["id"]);
    // Only the bandwidth is funded in TRX: what the sweep's transfer burns without energy.
    assert_eq!(
        funding["amount_units"], sweep["planned_network_cost_units"],
        "{funding} {sweep}"
    );
    // The planner's energy: the node's estimate of a transfer to a hot wallet that never held
    // USDT (130,285), plus the default 10 % margin; 10 energy per staked TRX on this server.
    let energy = TRC20_TRANSFER_ENERGY_NEW_HOLDER + TRC20_TRANSFER_ENERGY_NEW_HOLDER / 10;
    assert_eq!(delegation["energy_units"], energy);
    assert_eq!(delegation["amount_units"], "14332000000");
    assert_eq!(delegation["status"], "planned");
    assert_eq!(api.delegated_energy(&hot, &a), 0);

    // The funding included, not final: nothing delegated yet (the address did not exist).
    api.produce_block();
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    assert!(
        api.pool().is_empty(),
        "no delegation before the funding is final"
    );
    // A node that lags: the delegation's broadcast is taken but its answer lost, and blocks
    // come without it for a while. It is sent again (the same bytes), never a second one.
    api.set_inclusion_paused(true);
    api.lose_answers("/wallet/broadcasthex", 1);
    api.append_empty(18);
    custody.wait_for(60, "the delegation sent", || {
        funding_of(&custody, &ops, &a, "energy_delegation").filter(|f| f["status"] == "broadcasted")
    });
    for _ in 0..3 {
        api.produce_block();
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert_eq!(api.delegated_energy(&hot, &a), 0, "not included yet");
    assert_eq!(api.pool().len(), 1, "one delegation waits in the pool");
    api.set_inclusion_paused(false);
    api.produce_block();
    assert_eq!(api.delegated_energy(&hot, &a), 14_332 * SUN);
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    assert!(
        api.pool().is_empty(),
        "no sweep before the delegation is final"
    );
    api.append_empty(18);
    custody.wait_for(60, "the sweep sent", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "broadcasted")
    });
    api.produce_block();
    assert_eq!(api.trc20_balance(USDT, &hot), 50_000_000);
    // The reclaim will lag: it is sent, and blocks come without it.
    api.set_inclusion_paused(true);
    api.append_empty(18);
    let done = custody.wait_for(60, "the sweep confirmed", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "confirmed")
    });
    let reclaim = custody.wait_for(60, "the reclaim sent", || {
        funding_of(&custody, &ops, &a, "energy_reclaim").filter(|f| f["status"] == "broadcasted")
    });
    assert_eq!(reclaim["reclaims_id"], delegation["id"]);
    assert_eq!(reclaim["amount_units"], "14332000000");

    // A second deposit to the same address is credited while the reclaim is still on its way.
    // The address's energy still counts the first loan, which the reclaim is about to take
    // back (java-tron keeps one delegation per owner and receiver): nothing is planned for the
    // address until the reclaim is final.
    api.append(BlockSpec::new().tx(TxSpec::trc20(USDT, SENDER, &a, 30_000_000)));
    api.set_trc20_balance(USDT, &a, 30_000_000);
    api.append_empty(19);
    custody.wait_for(60, "the second deposit credited", || {
        (client.deposits("?status=credited").len() == 2).then_some(())
    });
    std::thread::sleep(std::time::Duration::from_millis(2_000));
    assert_eq!(
        api.delegated_energy(&hot, &a),
        14_332 * SUN,
        "not reclaimed yet"
    );
    assert_eq!(
        admin(&custody, &ops, "treasury-fundings").len(),
        3,
        "no funding for the second deposit while the reclaim is open"
    );
    assert_eq!(admin(&custody, &ops, "sweeps").len(), 1, "no second sweep");
    api.set_inclusion_paused(false);
    // Blocks until the reclaim is final (sent again if it expired meanwhile).
    custody.wait_for(120, "the reclaim confirmed", || {
        api.produce_block();
        std::thread::sleep(std::time::Duration::from_millis(100));
        funding_of(&custody, &ops, &a, "energy_reclaim").filter(|f| f["status"] == "confirmed")
    });
    assert_eq!(api.delegated_energy(&hot, &a), 0);
    assert_eq!(
        api.energy_stake(&hot),
        40_000 * SUN,
        "the stake is whole again"
    );

    // The order on the server's chain: funding, delegation 19 blocks later at least (final),
    // sweep 19 blocks after the delegation, reclaim after the sweep.
    let all = admin(&custody, &ops, "treasury-fundings");
    let hash = |id: &Value| {
        all.iter().find(|f| f["id"] == *id).unwrap()["tx_hash"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let funded_in = block_holding(&api, &hash(&funding["id"]));
    let delegated_in = block_holding(&api, &hash(&delegation["id"]));
    let swept_in = block_holding(&api, done["tx_hash"].as_str().unwrap());
    let reclaimed_in = block_holding(&api, &hash(&reclaim["id"]));
    assert!(delegated_in >= funded_in + 19, "{funded_in} {delegated_in}");
    assert!(swept_in >= delegated_in + 19, "{delegated_in} {swept_in}");
    assert!(reclaimed_in > swept_in, "{swept_in} {reclaimed_in}");
    let delegation_hash = hash(&delegation["id"]);
    let holding = (1..=api.head().number)
        .filter(|n| {
            api.block(*n).is_some_and(|b| {
                b.txids
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(&delegation_hash))
            })
        })
        .count();
    assert_eq!(holding, 1, "delegated once");
    // The energy came from the delegation: the sweep burned its bandwidth only.
    assert_eq!(done["network_cost_units"], funding["amount_units"]);
    // The address used the energy; the reclaim moved that usage to the hot wallet.
    assert_eq!(api.account_resource(&a)["EnergyUsed"], 0);
    assert_eq!(
        api.account_resource(&hot)["EnergyUsed"],
        TRC20_TRANSFER_ENERGY_NEW_HOLDER
    );
    assert_eq!(
        client.available(&alice, "USDT"),
        80_000_000,
        "both deposits"
    );

    // The reclaim moved the address's used energy to the hot wallet with the stake (java-tron
    // `UnDelegateResourceActuator`): the second loan is what the transfer needs now that the
    // hot wallet holds USDT (64,285), plus the margin.
    let second = |kind: &str| {
        admin(&custody, &ops, "treasury-fundings")
            .into_iter()
            .find(|f| {
                f["address"] == a.as_str()
                    && f["kind"] == kind
                    && f["id"] != delegation["id"]
                    && f["id"] != funding["id"]
                    && f["id"] != reclaim["id"]
            })
    };
    let funding2 = custody.wait_for(60, "a second TRX funding", || {
        second("native").filter(|f| f["status"] == "broadcasted")
    });
    let lent = TRC20_TRANSFER_ENERGY * 11 / 10;
    assert_eq!(second("energy_delegation").unwrap()["energy_units"], lent);
    api.produce_block();
    api.append_empty(18);
    custody.wait_for(60, "the second delegation sent", || {
        second("energy_delegation").filter(|f| f["status"] == "broadcasted")
    });
    api.produce_block();
    api.append_empty(18);
    let sweep2 = custody.wait_for(60, "the second sweep sent", || {
        admin(&custody, &ops, "sweeps").into_iter().find(|s| {
            s["address"] == a.as_str() && s["id"] != sweep["id"] && s["status"] == "broadcasted"
        })
    });
    api.produce_block();
    api.append_empty(18);
    let done2 = custody.wait_for(60, "the second sweep confirmed", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep2["id"] && s["status"] == "confirmed")
    });
    assert_eq!(done2["network_cost_units"], funding2["amount_units"]);
    assert_eq!(api.trc20_balance(USDT, &hot), 80_000_000);
    custody.wait_for(60, "the second reclaim sent", || {
        second("energy_reclaim").filter(|f| f["status"] == "broadcasted")
    });
    api.produce_block();
    api.append_empty(18);
    custody.wait_for(60, "the second reclaim confirmed", || {
        second("energy_reclaim").filter(|f| f["status"] == "confirmed")
    });
    assert_eq!(api.delegated_energy(&hot, &a), 0);
    assert_eq!(api.energy_stake(&hot), 40_000 * SUN);
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.stop();
}

/// A stake too small for the energy: the sweep falls back to burning TRX (a funding of the
/// whole fee, no delegation).
#[test]
fn without_enough_stake_the_sweep_burns_trx() {
    sweep_burns_trx_with_a_stake_of(1_000);
}

/// A stake just above the loan (14,500 TRX for 14,332) but inside the 5 % of
/// `getcandelegatedmaxsize` kept back: that figure moves before the delegation executes, and a
/// refused delegation would fail the sweep after its funding. The sweep burns TRX.
#[test]
fn a_stake_inside_the_headroom_is_not_lent() {
    sweep_burns_trx_with_a_stake_of(14_500);
}

fn sweep_burns_trx_with_a_stake_of(stake_trx: i64) {
    let api = TronApi::start();
    let (mut custody, cred, ops, _hot) = delegating(&api, stake_trx);
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let a = alice["address"].as_str().unwrap().to_owned();
    api.append(BlockSpec::new().tx(TxSpec::trc20(USDT, SENDER, &a, 50_000_000)));
    api.set_trc20_balance(USDT, &a, 50_000_000);
    api.append_empty(19);
    let funding = custody.wait_for(60, "a TRX funding", || {
        funding_of(&custody, &ops, &a, "native")
    });
    let sweep = admin(&custody, &ops, "sweeps")
        .into_iter()
        .find(|s| s["address"] == a.as_str())
        .unwrap();
    assert_eq!(sweep["delegation_id"], Value::Null);
    assert!(funding_of(&custody, &ops, &a, "energy_delegation").is_none());
    let units: u128 = funding["amount_units"].as_str().unwrap().parse().unwrap();
    assert!(
        units > 130_285 * 100,
        "the funding pays the energy's burn: {funding}"
    );
    custody.stop();
}

/// A reclaim the node refuses because the energy was taken back already (an operator
/// undelegated by hand): java-tron answers "delegated Resource does not exist". That is no
/// shortage a funding cures: the reclaim fails once its refused attempt can no longer be
/// included, and an `energy_reclaim_failed` alert names it; it is never sent again.
#[test]
fn a_reclaim_the_node_refuses_fails_and_tells_an_operator() {
    let api = TronApi::start();
    let (mut custody, cred, ops, hot) = delegating(&api, 40_000);
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "TRON");
    let a = alice["address"].as_str().unwrap().to_owned();
    api.append(BlockSpec::new().tx(TxSpec::trc20(USDT, SENDER, &a, 50_000_000)));
    api.set_trc20_balance(USDT, &a, 50_000_000);
    api.append_empty(19);
    custody.wait_for(60, "a TRX funding broadcast", || {
        funding_of(&custody, &ops, &a, "native").filter(|f| f["status"] == "broadcasted")
    });
    api.produce_block();
    api.append_empty(18);
    custody.wait_for(60, "the delegation sent", || {
        funding_of(&custody, &ops, &a, "energy_delegation").filter(|f| f["status"] == "broadcasted")
    });
    api.produce_block();
    api.append_empty(18);
    let sweep = custody.wait_for(60, "the sweep sent", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == a.as_str() && s["status"] == "broadcasted")
    });
    api.produce_block();
    assert_eq!(api.trc20_balance(USDT, &hot), 50_000_000);
    // The energy is taken back by hand before the service's reclaim.
    api.take_back_delegation(&hot, &a);
    api.append_empty(18);
    custody.wait_for(60, "the sweep confirmed", || {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["id"] == sweep["id"] && s["status"] == "confirmed")
    });
    let reclaim = custody.wait_for(60, "the reclaim", || {
        funding_of(&custody, &ops, &a, "energy_reclaim")
    });
    let failed = custody.wait_for(120, "the reclaim failed", || {
        api.produce_block();
        std::thread::sleep(std::time::Duration::from_millis(100));
        funding_of(&custody, &ops, &a, "energy_reclaim").filter(|f| f["status"] == "failed")
    });
    assert_eq!(failed["id"], reclaim["id"]);
    assert!(
        failed["failure_reason"]
            .as_str()
            .is_some_and(|r| r.contains("delegated Resource does not exist")),
        "{failed}"
    );
    let alerts = custody
        .client(&ops)
        .get("/v1/admin/alerts?limit=100")
        .json();
    let alert = alerts["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["kind"] == "energy_reclaim_failed")
        .unwrap_or_else(|| panic!("an energy_reclaim_failed alert: {alerts}"))
        .clone();
    assert_eq!(alert["reference_id"], reclaim["id"]);
    // Never sent again: no block holds an undelegation, and none waits.
    let before = api.broadcasts().len();
    for _ in 0..10 {
        api.produce_block();
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(api.broadcasts().len(), before, "nothing more is sent");
    assert_eq!(api.energy_stake(&hot), 40_000 * SUN, "the stake is whole");
    custody.stop();
}
