//! Quotes have a budget of their own (issue 31, F14): each asks the chain for several figures,
//! so a credential may ask for at most a fifth of its rate limit in quotes a minute (at least
//! ten), withdrawal and swap quotes together; past it a quote is a 429 `RATE_LIMITED` with
//! `Retry-After`, before any chain call, while the credential's other requests go on.

use custody_e2e::anvil::Anvil;
use custody_e2e::receiver::set_config;
use custody_e2e::Custody;
use serde_json::json;

#[test]
fn quotes_past_their_budget_are_refused_while_other_requests_go_on() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", anvil.url().as_str())],
    );
    set_config(
        &custody.data_dir(),
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    // 60 requests a minute: 12 quotes.
    let cred = custody.credential("acme", &["--rate-limit", "60"]);
    custody.start();
    let client = custody.client(&cred);
    client.wallet("alice", "BSC");
    // The budget is counted per wall-clock minute: start early in one.
    let second = custody_e2e::now_s().rem_euclid(60);
    if second > 40 {
        std::thread::sleep(std::time::Duration::from_secs(
            u64::try_from(61 - second).unwrap(),
        ));
    }
    let quote = || {
        client.post(
            "/v1/withdrawals/quote",
            &json!({ "external_user_id": "alice", "network": "BSC", "asset": "BNB",
                     "destination_address": "0x00000000000000000000000000000000000000D5",
                     "amount_units": "1000000000000000" }),
            None,
        )
    };
    for n in 0..12 {
        let r = quote();
        assert_eq!(r.status, 201, "quote {n}: {:?}", r.json());
    }
    let refused = quote();
    assert_eq!(
        (refused.status, refused.code()),
        (429, "RATE_LIMITED".to_owned()),
        "{:?}",
        refused.json()
    );
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    // Swap quotes share the budget.
    let swap = client.post(
        "/v1/swaps/quote",
        &json!({ "external_user_id": "alice", "asset_in": "USDT", "asset_out": "BNB",
                 "amount_in_units": "1000000000000000000" }),
        None,
    );
    assert_eq!((swap.status, swap.code()), (429, "RATE_LIMITED".to_owned()));
    // Everything else of the credential goes on.
    let r = client.get("/v1/assets?network=BSC");
    assert_eq!(r.status, 200);
    custody.stop();
}
