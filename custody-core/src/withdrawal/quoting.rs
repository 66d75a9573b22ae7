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
use crate::pricing::{chain_unavailable, native_price_source, QuoteFailure};
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
    chain_unavailable(network, "this withdrawal", why)
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
        QuoteFailure::chain(unavailable(network, what), what, why)
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
                QuoteFailure::chain(unavailable(network, what), what, e.message)
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
