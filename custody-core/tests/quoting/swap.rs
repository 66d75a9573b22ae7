//! Swap quotes: what they ask of the router and the node.

use std::cell::Cell;

use crate::world::{estimate, policy, switch, Chain, MockPricing, MockRouter, World};
use custody_core::amount::Amount;
use custody_core::asset::Asset;
use custody_core::asset::AssetCatalog;
use custody_core::error::CoreError;
use custody_core::error::ErrorCode;
use custody_core::network::Network;
use custody_core::ports::sender::Payment;
use custody_core::swap::quoting::*;
use custody_core::swap::RouterSettings;
use custody_core::tenant::TenantId;
use custody_core::withdrawal::HotWallet;
use custody_testkit::block_on;

use custody_core::wallet::hot_wallet_path;

const WBNB: &str = "0x00000000000000000000000000000000000000cc";

fn asset(code: &str) -> Asset {
    AssetCatalog::mainnet()
        .get(Network::Bsc, code)
        .unwrap()
        .clone()
}

fn ask() -> SwapAsk {
    SwapAsk {
        tenant: TenantId::parse("acme").unwrap(),
        external_user_id: "alice".into(),
        asset_in: asset("BNB"),
        asset_out: asset("USDT"),
        amount_in: Amount::from_units(10_u128.pow(18)),
        slippage_bps: 50,
        pair_limits: None,
    }
}

fn settings() -> (HotWallet, RouterSettings) {
    (
        HotWallet {
            address: "0x00000000000000000000000000000000000000aa".into(),
            path: hot_wallet_path(Network::Bsc),
        },
        RouterSettings {
            router: "0x00000000000000000000000000000000000000dd".into(),
            wrapped_native: WBNB.into(),
            deadline_s: 600,
        },
    )
}

/// A swap quote refused by a switch asks neither the router, the node nor the budget.
#[test]
fn a_swap_quote_refused_by_a_switch_never_asks_the_router_or_the_node() {
    let World {
        store,
        clock,
        entropy,
    } = World::new();
    let (chain, router) = (Chain::silent(), MockRouter::new());
    let (policy, (hot, settings)) = (policy(), settings());
    let budget_asked = Cell::new(0);
    for key in ["kill_switch.swaps", "kill_switch.global", "maintenance.BSC"] {
        switch(&store, key, true);
        let ports = SwapQuotePorts {
            store: &store,
            clock: &clock,
            entropy: &entropy,
            sender: Some(&chain),
            hot_wallet: Some(&hot),
            dex: Some(&router),
            router: Some(&settings),
            fee_policy: Some(&policy),
        };
        let refused = block_on(quote(&ports, ask(), || {
            budget_asked.set(budget_asked.get() + 1);
            Ok(())
        }))
        .unwrap_err();
        assert!(
            matches!(&refused.error, CoreError::Refused(r)
                if matches!(r.code, ErrorCode::KillSwitchActive | ErrorCode::Maintenance)),
            "{key}: {:?}",
            refused.error
        );
        switch(&store, key, false);
    }
    assert_eq!(budget_asked.get(), 0);
}

/// BNB to USDT: the budget, then the router once (the direct pair: a native end has no
/// route through the wrapped coin, and BNB needs no price of itself), then the node once
/// for the swap's gas; the quote keeps what they answered.
#[test]
fn a_swap_quote_asks_the_router_and_the_node_once_each() {
    let World {
        store,
        clock,
        entropy,
    } = World::new();
    let mut router = MockRouter::new();
    router
        .expect_amounts_out()
        .times(1)
        .returning(|amount, path| {
            assert_eq!(path.first().map(String::as_str), Some(WBNB));
            Ok(vec![amount, Amount::from_units(600 * 10_u128.pow(18))])
        });
    let mut pricing = MockPricing::new();
    pricing.expect_price().times(1).returning(|_, payment| {
        assert!(
            matches!(
                payment,
                Payment::Swap {
                    native_in: true,
                    ..
                }
            ),
            "{payment:?}"
        );
        Ok(estimate(10_u128.pow(15)))
    });
    let chain = Chain(pricing);
    let (policy, (hot, settings)) = (policy(), settings());
    let budget_asked = Cell::new(0);
    let ports = SwapQuotePorts {
        store: &store,
        clock: &clock,
        entropy: &entropy,
        sender: Some(&chain),
        hot_wallet: Some(&hot),
        dex: Some(&router),
        router: Some(&settings),
        fee_policy: Some(&policy),
    };
    let q = block_on(quote(&ports, ask(), || {
        budget_asked.set(budget_asked.get() + 1);
        Ok(())
    }))
    .unwrap();
    assert_eq!(budget_asked.get(), 1);
    assert_eq!(
        q.expected_amount_out,
        Amount::from_units(600 * 10_u128.pow(18))
    );
    assert_eq!(q.network_native, Amount::from_units(10_u128.pow(15)));
}
