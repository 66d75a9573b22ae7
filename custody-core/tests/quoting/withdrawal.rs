//! Withdrawal quotes: which ports they ask and in which order, what a switch, a refusing
//! destination or a failing node answers, and the rate of a TRON token.

use std::cell::Cell;

use crate::world::{estimate, policy, switch, Chain, MockPricing, MockRouter, World};
use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetCatalog};
use custody_core::chain::ChainAddress;
use custody_core::error::ErrorCode;
use custody_core::error::{CoreError, PortError};
use custody_core::network::Network;
use custody_core::ports::sender::{Payment, DESTINATION_REFUSES};
use custody_core::ports::store::read;
use custody_core::pricing::QuoteFailure;
use custody_core::tenant::TenantId;
use custody_core::withdrawal::costs::Rate;
use custody_core::withdrawal::quoting::*;
use custody_core::withdrawal::{HotWallet, Quote};
use custody_testkit::block_on;

use custody_core::wallet::hot_wallet_path;

fn usdt() -> Asset {
    AssetCatalog::mainnet()
        .get(Network::Bsc, "USDT")
        .unwrap()
        .clone()
}

fn hot() -> HotWallet {
    HotWallet {
        address: "0x00000000000000000000000000000000000000aa".into(),
        path: hot_wallet_path(Network::Bsc),
    }
}

fn ask() -> QuoteAsk {
    QuoteAsk {
        tenant: TenantId::parse("acme").unwrap(),
        external_user_id: "alice".into(),
        asset: usdt(),
        destination: ChainAddress::parse(
            Network::Bsc,
            "0x00000000000000000000000000000000000000bb",
        )
        .unwrap(),
        amount: Amount::from_units(10_u128.pow(18)),
    }
}

/// A quote refused by a switch never reaches the chain: not the node, not the router,
/// not the caller's quote budget.
#[test]
fn a_quote_refused_by_a_switch_never_asks_the_chain() {
    let World {
        store,
        clock,
        entropy,
    } = World::new();
    // No expectation is set: any call of either port fails the test.
    let (chain, router) = (Chain::silent(), MockRouter::new());
    let (policy, hot) = (policy(), hot());
    let budget_asked = Cell::new(0);
    for key in [
        "kill_switch.withdrawals",
        "kill_switch.global",
        "maintenance.BSC",
    ] {
        switch(&store, key, true);
        let ports = QuotePorts {
            store: &store,
            clock: &clock,
            entropy: &entropy,
            sender: Some(&chain),
            hot_wallet: Some(&hot),
            dex: Some((&router, "0x00000000000000000000000000000000000000cc")),
            configured_rate: None,
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
        assert_eq!(refused.log, None, "{key}");
        switch(&store, key, false);
    }
    assert_eq!(budget_asked.get(), 0);
}

/// With no switch on, the same quote asks the router once for BNB's price in USDT and the
/// node once for the gas, after the budget, and stores what they answered.
#[test]
fn a_quote_asks_the_budget_then_the_router_and_the_node_once_each() {
    let World {
        store,
        clock,
        entropy,
    } = World::new();
    let budget_asked = Cell::new(0);
    let mut router = MockRouter::new();
    router
        .expect_amounts_out()
        .times(1)
        .returning(|one_bnb, _| Ok(vec![one_bnb, Amount::from_units(600 * 10_u128.pow(18))]));
    let mut pricing = MockPricing::new();
    pricing.expect_price().times(1).returning(|from, payment| {
        assert_eq!(from, "0x00000000000000000000000000000000000000aa");
        assert!(matches!(payment, Payment::Token { .. }), "{payment:?}");
        Ok(estimate(10_u128.pow(14)))
    });
    let chain = Chain(pricing);
    let (policy, hot) = (policy(), hot());
    let ports = QuotePorts {
        store: &store,
        clock: &clock,
        entropy: &entropy,
        sender: Some(&chain),
        hot_wallet: Some(&hot),
        dex: Some((&router, "0x00000000000000000000000000000000000000cc")),
        configured_rate: None,
        fee_policy: Some(&policy),
    };
    let q = block_on(quote(&ports, ask(), || {
        budget_asked.set(budget_asked.get() + 1);
        Ok(())
    }))
    .unwrap();
    assert_eq!(budget_asked.get(), 1);
    // 10^14 wei of gas at 600 USDT a BNB: 0.06 USDT, the quote's network cost.
    assert_eq!(q.network_native, Amount::from_units(10_u128.pow(14)));
    assert_eq!(
        q.costs.network_cost_units,
        Amount::from_units(6 * 10_u128.pow(16))
    );
    let stored = block_on(read(&store, move |tx| {
        Ok(tx.quote(&TenantId::parse("acme").unwrap(), q.id)?)
    }))
    .unwrap();
    assert_eq!(stored.map(|s| s.id), Some(q.id));
}

fn tron_usdt_ask() -> QuoteAsk {
    QuoteAsk {
        asset: AssetCatalog::mainnet()
            .get(Network::Tron, "USDT")
            .unwrap()
            .clone(),
        destination: ChainAddress::parse(Network::Tron, "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK")
            .unwrap(),
        amount: Amount::from_units(10_u128.pow(6)),
        ..ask()
    }
}

/// A TRON token's network cost is priced at the configured rate: without one, the quote is
/// refused as unavailable before the node is asked; with one, the node is asked once and
/// the cost converted at that rate. The router is never asked on TRON.
#[test]
fn a_tron_token_is_priced_at_the_configured_rate_or_not_at_all() {
    let World {
        store,
        clock,
        entropy,
    } = World::new();
    let (policy, router) = (policy(), MockRouter::new());
    let hot = HotWallet {
        address: "TJRabPrwbZy45sbavfcjinPJC18kjpRTv8".into(),
        path: hot_wallet_path(Network::Tron),
    };
    let silent = Chain::silent();
    let quote_with = |chain: &Chain, rate: Option<Rate>| -> Result<Quote, QuoteFailure> {
        let ports = QuotePorts {
            store: &store,
            clock: &clock,
            entropy: &entropy,
            sender: Some(chain),
            hot_wallet: Some(&hot),
            dex: Some((&router, "0x00000000000000000000000000000000000000cc")),
            configured_rate: rate,
            fee_policy: Some(&policy),
        };
        block_on(quote(&ports, tron_usdt_ask(), || Ok(())))
    };
    let refused = quote_with(&silent, None).unwrap_err();
    assert!(
        matches!(&refused.error, CoreError::Refused(r)
            if r.code == ErrorCode::ChainUnavailable
                && r.message.contains("no price of the native coin in USDT")),
        "{:?}",
        refused.error
    );
    let mut pricing = MockPricing::new();
    pricing
        .expect_price()
        .times(1)
        .returning(|_, _| Ok(estimate(2_000_000)));
    // 1 TRX (10^6 sun) is 0.25 USDT (250,000 units): 2 TRX of fees are 0.5 USDT.
    let rate = Rate {
        asset_units: Amount::from_units(250_000),
        native_units: Amount::from_units(1_000_000),
    };
    let q = quote_with(&Chain(pricing), Some(rate)).unwrap();
    assert_eq!(q.costs.network_cost_units, Amount::from_units(500_000));
    assert_eq!(q.rate, rate);
}

/// A destination contract that refuses the transfer is the partner's error (422 on
/// `destination`), with nothing to log; any other pricing failure is unavailable, with the
/// node's text only in the log.
#[test]
fn a_refusing_destination_is_a_validation_error_and_a_node_failure_is_logged_only() {
    let World {
        store,
        clock,
        entropy,
    } = World::new();
    let (policy, hot) = (policy(), hot());
    let mut router = MockRouter::new();
    router
        .expect_amounts_out()
        .returning(|one_bnb, _| Ok(vec![one_bnb, Amount::from_units(600 * 10_u128.pow(18))]));
    for (port, message) in [
        (DESTINATION_REFUSES, "execution reverted"),
        (
            "chain.bsc",
            "endpoint https://secret-node.example/key-123 timed out",
        ),
    ] {
        let mut pricing = MockPricing::new();
        pricing
            .expect_price()
            .times(1)
            .returning(move |_, _| Err(PortError::permanent(port, message)));
        let chain = Chain(pricing);
        let ports = QuotePorts {
            store: &store,
            clock: &clock,
            entropy: &entropy,
            sender: Some(&chain),
            hot_wallet: Some(&hot),
            dex: Some((&router, "0x00000000000000000000000000000000000000cc")),
            configured_rate: None,
            fee_policy: Some(&policy),
        };
        let failed = block_on(quote(&ports, ask(), || Ok(()))).unwrap_err();
        let CoreError::Refused(r) = &failed.error else {
            panic!("{:?}", failed.error);
        };
        assert!(!r.message.contains("secret-node"), "{}", r.message);
        if port == DESTINATION_REFUSES {
            assert_eq!(r.code, ErrorCode::ValidationFailed);
            assert_eq!(failed.log, None);
        } else {
            assert_eq!(r.code, ErrorCode::ChainUnavailable);
            let (what, detail) = failed.log.clone().unwrap();
            assert_eq!(what, "the node cannot price the transfer now");
            assert!(detail.contains("secret-node"), "{detail}");
        }
    }
}
