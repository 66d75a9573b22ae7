//! Pricing a swap quote (decisions §4, §12), in the order a partner relies on: the amount and
//! the pair's limits (a bad amount is a 422 whatever the node's state), the controls (a stopped
//! swap answers as such even while the chain is down), the caller's quote budget, then the
//! router and the chain. Adapters parse the request, gather the ports, call [`quote`] and
//! render what it answers.

use crate::amount::Amount;
use crate::asset::Asset;
use crate::error::{ErrorCode, PortError, Refusal};
use crate::ports::clock::{new_uuid, Clock, Entropy};
use crate::ports::dex::{is_no_pool, DexRouter};
use crate::ports::sender::{ChainSender, Payment};
use crate::ports::store::{read, write, Store};
use crate::pricing::{chain_unavailable, native_rate, QuoteFailure};
use crate::tenant::TenantId;
use crate::withdrawal::{FeePolicy, HotWallet, Rate};

use super::costs::swap_costs;
use super::flow::{controls_refusal, create_quote, RouterSettings, SwapQuoteRequest};
use super::record::SwapQuote;

/// What a swap quote is priced with: each part `None` when not configured.
pub struct SwapQuotePorts<'a> {
    pub store: &'a dyn Store,
    pub clock: &'a dyn Clock,
    pub entropy: &'a dyn Entropy,
    pub sender: Option<&'a dyn ChainSender>,
    pub hot_wallet: Option<&'a HotWallet>,
    pub dex: Option<&'a dyn DexRouter>,
    pub router: Option<&'a RouterSettings>,
    /// `asset_in`'s fee policy.
    pub fee_policy: Option<&'a FeePolicy>,
}

impl std::fmt::Debug for SwapQuotePorts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwapQuotePorts")
            .field("sender", &self.sender.is_some())
            .field("hot_wallet", &self.hot_wallet)
            .field("dex", &self.dex.is_some())
            .field("router", &self.router)
            .finish_non_exhaustive()
    }
}

/// A partner's request for a swap quote, parsed, with the enabled pair's limits (`None`: the
/// fee policy's own).
#[derive(Debug, Clone)]
pub struct SwapAsk {
    pub tenant: TenantId,
    pub external_user_id: String,
    pub asset_in: Asset,
    pub asset_out: Asset,
    pub amount_in: Amount,
    pub slippage_bps: u32,
    pub pair_limits: Option<(Amount, Amount)>,
}

/// BSC cannot price this swap now: answered with a retry hint.
pub fn unavailable(why: impl std::fmt::Display) -> Refusal {
    chain_unavailable(crate::network::Network::Bsc, "this swap", why)
}

/// Prices `ask` and stores it as a single-use quote. `budget` is asked once the request would
/// reach the chain, and refuses when the caller's quote budget is spent.
pub async fn quote(
    ports: &SwapQuotePorts<'_>,
    ask: SwapAsk,
    budget: impl FnOnce() -> Result<(), Refusal>,
) -> Result<SwapQuote, QuoteFailure> {
    if ask.amount_in.is_zero() {
        return Err(Refusal::new(
            ErrorCode::AmountTooSmall,
            "amount_in_units must be greater than zero",
        )
        .into());
    }
    let mut policy = ports
        .fee_policy
        .cloned()
        .ok_or_else(|| unavailable(format!("no fee policy for {}", ask.asset_in.code)))?;
    if let Some((min, max)) = ask.pair_limits {
        policy.min_amount_units = min;
        policy.max_amount_units = max;
    }
    // Limits first: a bad amount is a 422 whatever the node's state.
    swap_costs(&policy, ask.amount_in, Amount::ZERO, Rate::NATIVE)?;
    let (a_in, a_out) = (ask.asset_in.clone(), ask.asset_out.clone());
    read(ports.store, move |tx| controls_refusal(tx, &a_in, &a_out)).await?;
    let (Some(dex), Some(router), Some(sender), Some(hot)) =
        (ports.dex, ports.router, ports.sender, ports.hot_wallet)
    else {
        return Err(unavailable("no [bsc] endpoint is configured").into());
    };
    budget()?;
    let wrapped = router.wrapped_native.as_str();
    let (codes, path, expected) =
        route(dex, wrapped, &ask.asset_in, &ask.asset_out, ask.amount_in).await?;
    let rate = native_rate(dex, wrapped, &ask.asset_in)
        .await
        .map_err(|why| {
            let what = "the DEX router cannot price the network cost";
            QuoteFailure::chain(unavailable(what), what, why)
        })?;
    let payment = Payment::Swap {
        router: router.router.clone(),
        path: path.clone(),
        amount_in: ask.amount_in,
        min_out: Amount::ZERO,
        native_in: ask.asset_in.contract.is_none(),
        native_out: ask.asset_out.contract.is_none(),
        to: hot.address.clone(),
        deadline_s: u64::MAX,
    };
    let estimate = sender.price(&hot.address, &payment).await.map_err(|e| {
        let what = "the node cannot price the swap now";
        QuoteFailure::chain(unavailable(what), what, e.message)
    })?;
    let request = SwapQuoteRequest {
        tenant: ask.tenant,
        external_user_id: ask.external_user_id,
        asset_in: ask.asset_in,
        asset_out: ask.asset_out,
        amount_in: ask.amount_in,
        slippage_bps: ask.slippage_bps,
        route: codes,
        path,
        expected_amount_out: expected,
        policy,
        network_native: estimate.expected_native,
        rate,
    };
    let (id, now) = (new_uuid(ports.entropy), ports.clock.now());
    Ok(write(ports.store, move |tx| create_quote(tx, id, &request, now)).await?)
}

/// The router's token for an asset: its contract, or the wrapped coin for BNB.
fn token_of(asset: &Asset, wrapped: &str) -> String {
    asset.contract.clone().unwrap_or_else(|| wrapped.to_owned())
}

/// A router failure: a revert of the router ("no pool", "insufficient liquidity") means the
/// path cannot be quoted; anything else (a node that cannot be reached, a router that fails its
/// configuration check, a malformed answer) is a 503.
fn no_pool(e: PortError) -> Result<(), QuoteFailure> {
    if is_no_pool(&e) {
        Ok(())
    } else {
        let what = "the DEX router cannot quote";
        Err(QuoteFailure::chain(unavailable(what), what, e.message))
    }
}

/// What the router gives for `amount_in` along `path`, or `None` when it has no pool for it.
async fn quote_path(
    dex: &dyn DexRouter,
    path: &[String],
    amount_in: Amount,
) -> Result<Option<Amount>, QuoteFailure> {
    match dex.amounts_out(amount_in, path).await {
        Ok(amounts) => Ok(amounts.last().copied().filter(|a| !a.is_zero())),
        Err(e) => no_pool(e).map(|()| None),
    }
}

/// The route (decisions §12): the direct pair or the path through the wrapped coin, whichever
/// the router gives more for — a direct pool with almost no liquidity (anyone can create one)
/// must not win over a deep route through WBNB. Returns (asset codes, router path, expected
/// output).
async fn route(
    dex: &dyn DexRouter,
    wrapped: &str,
    asset_in: &Asset,
    asset_out: &Asset,
    amount_in: Amount,
) -> Result<(Vec<String>, Vec<String>, Amount), QuoteFailure> {
    let (t_in, t_out) = (token_of(asset_in, wrapped), token_of(asset_out, wrapped));
    let direct = vec![t_in.clone(), t_out.clone()];
    let mut best = quote_path(dex, &direct, amount_in).await?.map(|out| {
        (
            vec![asset_in.code.clone(), asset_out.code.clone()],
            direct,
            out,
        )
    });
    let native_end = asset_in.contract.is_none() || asset_out.contract.is_none();
    if !native_end {
        let via = vec![t_in, wrapped.to_owned(), t_out];
        if let Some(out) = quote_path(dex, &via, amount_in).await? {
            if best
                .as_ref()
                .is_none_or(|(_, _, direct_out)| out > *direct_out)
            {
                let codes = vec![
                    asset_in.code.clone(),
                    "BNB".to_owned(),
                    asset_out.code.clone(),
                ];
                best = Some((codes, via, out));
            }
        }
    }
    if let Some(found) = best {
        return Ok(found);
    }
    Err(Refusal::new(
        ErrorCode::UnsupportedPair,
        format!(
            "the router has no pool with liquidity for {} to {}, directly or through BNB",
            asset_in.code, asset_out.code
        ),
    )
    .into())
}
