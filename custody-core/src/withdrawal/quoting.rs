//! Pricing a withdrawal quote (decisions §4, §11), in the order a partner relies on: the fee
//! policy, then the controls (a stopped withdrawal answers as such even while the chain is
//! down), then the caller's quote budget, then the chain. Adapters parse the request, gather
//! the ports, call [`quote`] and render what it answers.

use uuid::Uuid;

use crate::chain::ChainAddress;
use crate::error::{ErrorCode, Refusal};
use crate::network::Network;
use crate::ports::clock::{new_uuid, Clock, Entropy};
use crate::ports::dex::DexRouter;
use crate::ports::sender::{ChainSender, Payment, DESTINATION_REFUSES};
use crate::ports::store::{read, write, Store};
use crate::pricing::{native_price_source, QuoteFailure, CHAIN_RETRY_AFTER_S};
use crate::tenant::TenantId;

use super::costs::{FeePolicy, Rate};
use super::flow::{controls_refusal, create_quote, HotWallet, QuoteRequest};
use super::record::Quote;

/// What a quote of a network is priced with: each part `None` when not configured.
pub struct QuotePorts<'a> {
    pub store: &'a dyn Store,
    pub clock: &'a dyn Clock,
    pub entropy: &'a dyn Entropy,
    pub sender: Option<&'a dyn ChainSender>,
    pub hot_wallet: Option<&'a HotWallet>,
    /// The DEX router and the wrapped native coin (BSC).
    pub dex: Option<(&'a dyn DexRouter, &'a str)>,
    /// The configured price of the native coin in the asset (TRON).
    pub configured_rate: Option<Rate>,
    pub fee_policy: Option<&'a FeePolicy>,
}

impl std::fmt::Debug for QuotePorts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotePorts")
            .field("sender", &self.sender.is_some())
            .field("hot_wallet", &self.hot_wallet)
            .field("dex", &self.dex.map(|(_, w)| w))
            .field("configured_rate", &self.configured_rate)
            .finish_non_exhaustive()
    }
}

/// A partner's request for a quote, parsed.
#[derive(Debug, Clone)]
pub struct QuoteAsk {
    pub tenant: TenantId,
    pub external_user_id: String,
    pub asset: crate::asset::Asset,
    pub destination: ChainAddress,
    pub amount: crate::amount::Amount,
}

/// The network cannot price this withdrawal now: answered with a retry hint.
pub fn unavailable(network: Network, why: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        ErrorCode::ChainUnavailable,
        format!("{network} cannot be reached to price this withdrawal: {why}"),
    )
    .retry_after(CHAIN_RETRY_AFTER_S)
}

/// Prices `ask` and stores it as a single-use quote. `budget` is asked once the request would
/// reach the chain, and refuses when the caller's quote budget is spent.
pub async fn quote(
    ports: &QuotePorts<'_>,
    ask: QuoteAsk,
    budget: impl FnOnce() -> Result<(), Refusal>,
) -> Result<Quote, QuoteFailure> {
    let network = ask.asset.network;
    if ask.amount.is_zero() {
        return Err(Refusal::new(
            ErrorCode::AmountTooSmall,
            "amount_units must be greater than zero",
        )
        .into());
    }
    let policy = ports
        .fee_policy
        .cloned()
        .ok_or_else(|| unavailable(network, "no fee policy"))?;
    let id = ask.asset.id();
    read(ports.store, move |tx| controls_refusal(tx, &id)).await?;
    let (Some(sender), Some(hot)) = (ports.sender, ports.hot_wallet) else {
        return Err(unavailable(network, "no endpoint is configured").into());
    };
    budget()?;
    let source = native_price_source(&ask.asset, ports.dex, ports.configured_rate)
        .map_err(|why| unavailable(network, why))?;
    let rate = source.rate(&ask.asset).await.map_err(|why| {
        let what = "the DEX router cannot price the network cost";
        QuoteFailure::chain(unavailable(network, what), why)
    })?;
    let payment = Payment::transfer(&ask.asset, ask.destination.as_str(), ask.amount);
    let estimate = sender
        .price(&hot.address, &payment)
        .await
        .map_err(|e| {
            if e.port == DESTINATION_REFUSES {
                // A contract that reverts on this payment: it would only burn the house's gas.
                Refusal::validation(
                    "destination",
                    "this address is a contract that refuses the transfer (the node's gas estimate reverts)",
                )
                .into()
            } else {
                let what = "the node cannot price the transfer now";
                QuoteFailure::chain(unavailable(network, what), e.message)
            }
        })?;
    let request = QuoteRequest {
        tenant: ask.tenant,
        external_user_id: ask.external_user_id,
        asset: ask.asset,
        destination: ask.destination,
        amount: ask.amount,
        policy,
        network_native: estimate.expected_native,
        rate,
    };
    let (id, now): (Uuid, _) = (new_uuid(ports.entropy), ports.clock.now());
    Ok(write(ports.store, move |tx| create_quote(tx, id, &request, now)).await?)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use uuid::Uuid;

    use super::*;
    use crate::amount::Amount;
    use crate::asset::{Asset, AssetCatalog};
    use crate::error::{CoreError, PortError};
    use crate::ports::sender::{
        BlockListing, BroadcastOutcome, BuildRequest, FeeBid, FeeEstimate, Inclusion, SignedTx,
        TxLookup, UnsignedTx,
    };
    use crate::ports::signer::RecoverableSignature;
    use crate::testing::{block_on, CountingEntropy, ManualClock, MemoryStore};
    use crate::time::Timestamp;
    use crate::wallet::hot_wallet_path;

    /// The one call of the chain a quote may make, stated in advance by each test (mockall):
    /// a call where none may be fails the test.
    #[mockall::automock]
    trait Pricing {
        fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError>;
    }

    /// A chain whose pricing is the mock's; any other call fails the test, as no quote makes one.
    struct Chain(MockPricing);

    #[async_trait::async_trait]
    impl ChainSender for Chain {
        fn network(&self) -> Network {
            Network::Bsc
        }
        async fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError> {
            self.0.price(from, payment)
        }
        async fn confirmed_nonce(&self, _: &str) -> Result<Option<u64>, PortError> {
            unreachable!("a quote reads no nonce")
        }
        async fn final_transaction_at_nonce(
            &self,
            _: &str,
            _: u64,
            _: u32,
        ) -> Result<Option<String>, PortError> {
            unreachable!("a quote reads no nonce")
        }
        async fn build(&self, _: &BuildRequest) -> Result<UnsignedTx, PortError> {
            unreachable!("a quote builds nothing")
        }
        fn assemble(
            &self,
            _: &UnsignedTx,
            _: &RecoverableSignature,
        ) -> Result<SignedTx, PortError> {
            unreachable!("a quote signs nothing")
        }
        async fn broadcast(&self, _: &SignedTx) -> BroadcastOutcome {
            unreachable!("a quote sends nothing")
        }
        async fn lookup(&self, _: &str) -> Result<TxLookup, PortError> {
            unreachable!("a quote looks nothing up")
        }
        async fn head(&self) -> Result<(u64, i64), PortError> {
            unreachable!("a quote reads no head")
        }
        async fn block_time(&self, _: u64) -> Result<Option<i64>, PortError> {
            unreachable!("a quote reads no block")
        }
        async fn block_listing(&self, _: u64) -> Result<Option<BlockListing>, PortError> {
            unreachable!("a quote reads no block")
        }
        async fn inclusion_in_block(
            &self,
            _: &str,
            _: u64,
        ) -> Result<Option<Inclusion>, PortError> {
            unreachable!("a quote reads no block")
        }
        async fn balances(
            &self,
            _: &str,
            _: Option<&str>,
        ) -> Result<(Amount, Option<Amount>), PortError> {
            unreachable!("a quote reads no balance")
        }
    }

    mockall::mock! {
        Router {}
        #[async_trait::async_trait]
        impl DexRouter for Router {
            fn router_address(&self) -> String;
            async fn amounts_out(
                &self,
                amount_in: Amount,
                path: &[String],
            ) -> Result<Vec<Amount>, PortError>;
        }
    }

    fn usdt() -> Asset {
        AssetCatalog::mainnet()
            .get(Network::Bsc, "USDT")
            .unwrap()
            .clone()
    }

    fn policy() -> FeePolicy {
        FeePolicy {
            min_amount_units: Amount::from_units(10),
            max_amount_units: Amount::from_units(10_u128.pow(24)),
            markup_bps: 0,
            service_fee_units: Amount::ZERO,
            service_fee_bps: 0,
            spread_bps: 0,
        }
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

    fn switch(store: &MemoryStore, key: &'static str, on: bool) {
        block_on(write(store, move |tx| {
            crate::admin::set_control(
                tx,
                Uuid::new_v4(),
                "ops",
                key,
                on,
                "test",
                Timestamp::from_unix_millis(0),
            )
        }))
        .unwrap();
    }

    /// A quote refused by a switch never reaches the chain: not the node, not the router,
    /// not the caller's quote budget.
    #[test]
    fn a_quote_refused_by_a_switch_never_asks_the_chain() {
        let store = MemoryStore::new();
        let (clock, entropy) = (
            ManualClock::new(Timestamp::from_unix_millis(1)),
            CountingEntropy::new(1),
        );
        // No expectation is set: any call of either port fails the test.
        let (chain, router) = (Chain(MockPricing::new()), MockRouter::new());
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
            assert_eq!(refused.detail, None, "{key}");
            switch(&store, key, false);
        }
        assert_eq!(budget_asked.get(), 0);
    }

    /// With no switch on, the same quote asks the router once for BNB's price in USDT and the
    /// node once for the gas, after the budget, and stores what they answered.
    #[test]
    fn a_quote_asks_the_budget_then_the_router_and_the_node_once_each() {
        let store = MemoryStore::new();
        let (clock, entropy) = (
            ManualClock::new(Timestamp::from_unix_millis(1)),
            CountingEntropy::new(1),
        );
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
            Ok(FeeEstimate {
                expected_native: Amount::from_units(10_u128.pow(14)),
                max_native: Amount::from_units(2 * 10_u128.pow(14)),
                bid: FeeBid::Gas {
                    gas_limit: 100_000,
                    gas_price_wei: 10_u128.pow(9),
                },
                plan: None,
            })
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
}
