//! The tenant isolation matrix (decisions §5): three tenants, each with the same user "alice"
//! holding a wallet on each network, a deposit (on anvil), a withdrawal, a swap and unexecuted
//! quotes; every route with an id, called by every tenant with every other tenant's ids,
//! answers 404 exactly as for an id nobody has, and executing another tenant's quote is 404
//! with nothing reserved. Each tenant reads its own ids (the matrix's diagonal) with 200.

use custody_e2e::anvil::Anvil;
use custody_e2e::dex::{Dex, USDT};
use custody_e2e::receiver::set_config;
use custody_e2e::{Client, Custody, Resp};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;
const DESTINATION: &str = "0x00000000000000000000000000000000000000D5";

/// The ids one tenant owns.
struct Owned {
    tenant: &'static str,
    client: Client,
    wallets: Vec<String>,
    deposit: String,
    withdrawal: String,
    swap: String,
    withdrawal_quote: String,
    swap_quote: String,
}

fn created(r: &Resp) -> Value {
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

fn withdrawal_quote(client: &Client) -> Value {
    created(&client.post(
        "/v1/withdrawals/quote",
        &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                 "destination_address": DESTINATION, "amount_units": "1000000000000000" }),
        None,
    ))
}

fn swap_quote(client: &Client) -> Value {
    created(&client.post(
        "/v1/swaps/quote",
        &json!({ "external_user_id": "alice", "asset_in": "BNB", "asset_out": "USDT",
                 "amount_in_units": "1000000000000000" }),
        None,
    ))
}

/// What a caller gets for an id nobody has: code and message (the trace id differs).
fn shape(r: &Resp) -> (u16, String, String) {
    let v = r.json();
    (
        r.status,
        v["code"].as_str().unwrap_or("").to_owned(),
        v["message"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn every_route_with_an_id_answers_404_to_every_other_tenant() {
    let Some(anvil) = Anvil::start() else { return };
    let dex = Dex::deploy(&anvil);
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
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(&dex.lp, &hot, 20 * E18);
    let tenants = ["acme", "globex", "initech"];
    let creds: Vec<_> = tenants
        .iter()
        .map(|t| custody.credential(t, &["--rate-limit", "1000000"]))
        .collect();
    custody.start();

    let mut owned = Vec::new();
    for (tenant, cred) in tenants.iter().zip(&creds) {
        let client = custody.client(cred);
        let bsc = client.wallet("alice", "BSC");
        let tron = client.wallet("alice", "TRON");
        custody.adjust(tenant, "alice", "BSC", "BNB", true, &(2 * E18).to_string());
        anvil.send_value(&dex.lp, bsc["address"].as_str().unwrap(), E18 / 100);
        let quote = withdrawal_quote(&client);
        let withdrawal = created(&client.post(
            "/v1/withdrawals",
            &json!({ "quote_id": quote["id"] }),
            Some(&format!("withdrawal-{tenant}")),
        ));
        let quote = swap_quote(&client);
        let swap = created(&client.post(
            "/v1/swaps",
            &json!({ "quote_id": quote["id"] }),
            Some(&format!("swap-{tenant}-1")),
        ));
        owned.push(Owned {
            tenant,
            client,
            wallets: vec![id_of(&bsc), id_of(&tron)],
            deposit: String::new(),
            withdrawal: id_of(&withdrawal),
            swap: id_of(&swap),
            withdrawal_quote: String::new(),
            swap_quote: String::new(),
        });
    }
    for o in &mut owned {
        let deposits = custody.wait_for(60, "a deposit of each tenant", || {
            let d = o.client.deposits("");
            (!d.is_empty()).then_some(d)
        });
        assert_eq!(deposits.len(), 1, "{}: only its own deposit", o.tenant);
        o.deposit = id_of(&deposits[0]);
    }
    // Quotes last: they live 30 s (swaps) and 60 s (withdrawals).
    for o in &mut owned {
        o.withdrawal_quote = id_of(&withdrawal_quote(&o.client));
        o.swap_quote = id_of(&swap_quote(&o.client));
    }

    let routes = |o: &Owned| -> Vec<String> {
        let mut r = Vec::new();
        for w in &o.wallets {
            r.push(format!("/v1/wallets/{w}"));
            r.push(format!("/v1/wallets/{w}/balances"));
            r.push(format!("/v1/wallets/{w}/transactions"));
        }
        r.push(format!("/v1/deposits/{}", o.deposit));
        r.push(format!("/v1/withdrawals/{}", o.withdrawal));
        r.push(format!("/v1/swaps/{}", o.swap));
        r
    };
    let nobody = uuid::Uuid::new_v4().to_string();
    let mut cells = 0;
    for caller in &owned {
        for route in routes(caller) {
            let r = caller.client.get(&route);
            assert_eq!(r.status, 200, "{} reads its own {route}", caller.tenant);
        }
        for owner in owned.iter().filter(|o| o.tenant != caller.tenant) {
            for route in routes(owner) {
                let missing = route
                    .replace(&owner.deposit, &nobody)
                    .replace(&owner.withdrawal, &nobody)
                    .replace(&owner.swap, &nobody)
                    .replace(&owner.wallets[0], &nobody)
                    .replace(&owner.wallets[1], &nobody);
                let theirs = caller.client.get(&route);
                let absent = caller.client.get(&missing);
                assert_eq!(
                    shape(&theirs),
                    shape(&absent),
                    "{} calling {route} of {}",
                    caller.tenant,
                    owner.tenant
                );
                assert_eq!(theirs.status, 404, "{route}");
                cells += 1;
            }
            // Executing another tenant's quote: as unknown as a quote nobody has, nothing held.
            for (path, quote) in [
                ("/v1/withdrawals", &owner.withdrawal_quote),
                ("/v1/swaps", &owner.swap_quote),
            ] {
                let before = caller.client.ledger_balance(&caller.wallets[0], "BNB");
                let key = format!("cross-{}-{}-{quote}", caller.tenant, owner.tenant);
                let theirs = caller.client.post(
                    path,
                    &json!({ "quote_id": quote }),
                    Some(&key[..64.min(key.len())]),
                );
                let absent = caller.client.post(
                    path,
                    &json!({ "quote_id": nobody }),
                    Some(&format!("absent-{}", uuid::Uuid::new_v4())),
                );
                assert_eq!(
                    shape(&theirs),
                    shape(&absent),
                    "{path} with {}'s quote",
                    owner.tenant
                );
                assert_eq!(theirs.status, 404);
                assert_eq!(
                    caller.client.ledger_balance(&caller.wallets[0], "BNB"),
                    before,
                    "nothing reserved"
                );
                cells += 1;
            }
            // Listings filtered by the same user name never show another tenant's records.
            let listed = caller.client.deposits("?external_user_id=alice");
            assert!(listed.iter().all(|d| d["id"] != owner.deposit.as_str()));
        }
    }
    // The quotes still belong to their owners: each executes for its own tenant.
    for o in &owned {
        created(&o.client.post(
            "/v1/withdrawals",
            &json!({ "quote_id": o.withdrawal_quote }),
            Some(&format!("own-withdrawal-{}", o.tenant)),
        ));
    }
    println!("tenant isolation: {cells} cross-tenant calls, every one 404 like a missing id");
}
