//! Swaps (interface §2, §4; decisions §3, §4, §12): the quote priced by the DEX router, the
//! execution under its idempotency key and second factors, and the record. The rules are in
//! `custody_core::swap`; the engine that sends is a background loop of the binary.

use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetLookup};
use custody_core::error::{CoreResult, ErrorCode, PortError, Refusal};
use custody_core::idempotency::StoredResponse;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::dex::{is_no_pool, DexRouter};
use custody_core::ports::sender::Payment;
use custody_core::ports::store::{read, read_quick, write};
use custody_core::swap::{self, SwapExecuteIds, SwapQuoteRequest, SLIPPAGE_BPS_DEFAULT};
use custody_core::wallet::EXTERNAL_USER_ID_CHARS_MAX;
use custody_core::withdrawal::Rate;
use custody_core::Network;
use uuid::Uuid;

use crate::dispatch::Call;
use crate::idempotent;
use crate::input::{self, Fields};
use crate::reply::Reply;
use crate::state::AppState;

/// Seconds a client should wait when the chain cannot price or take a swap.
const CHAIN_RETRY_AFTER_S: u64 = 5;

fn unavailable(why: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        ErrorCode::ChainUnavailable,
        format!("BSC cannot be reached to price this swap: {why}"),
    )
    .retry_after(CHAIN_RETRY_AFTER_S)
}

/// A catalog asset of BSC by code: a code only TRON has is a cross-chain request.
fn bsc_asset(state: &AppState, field: &str, code: &str) -> Result<Asset, Refusal> {
    match state.catalog.lookup(Network::Bsc, code) {
        AssetLookup::Found(a) => Ok(a.clone()),
        AssetLookup::OtherNetwork(other) => Err(Refusal::new(
            ErrorCode::CrossChainNotSupported,
            format!("{field} {code} is an asset of {other}: swaps are on BSC only"),
        )),
        AssetLookup::Unknown => Err(Refusal::new(
            ErrorCode::UnsupportedAsset,
            format!("{field} {code} is not a supported asset"),
        )),
    }
}

/// The router's token for an asset: its contract, or the wrapped coin for BNB.
fn token_of(asset: &Asset, wrapped: &str) -> String {
    asset.contract.clone().unwrap_or_else(|| wrapped.to_owned())
}

/// A router failure: a revert of the router ("no pool", "insufficient liquidity") means the
/// path cannot be quoted; anything else (a node that cannot be reached, a router that fails its
/// configuration check, a malformed answer) is a 503.
fn no_pool(e: PortError) -> Result<(), Refusal> {
    if is_no_pool(&e) {
        Ok(())
    } else {
        tracing::warn!(error = %e.message, "the DEX router cannot quote");
        Err(unavailable(e.message))
    }
}

/// What the router gives for `amount_in` along `path`, or `None` when it has no pool for it.
async fn quote_path(
    dex: &dyn DexRouter,
    path: &[String],
    amount_in: Amount,
) -> Result<Option<Amount>, Refusal> {
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
) -> Result<(Vec<String>, Vec<String>, Amount), Refusal> {
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
    ))
}

pub async fn quote(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = input::json_object(&call.body)?;
    let mut fields = Fields::new();
    fields.no_unknown(
        &map,
        &[
            "external_user_id",
            "asset_in",
            "asset_out",
            "amount_in_units",
            "slippage_bps",
        ],
    );
    let user = fields.string(&map, "external_user_id", EXTERNAL_USER_ID_CHARS_MAX);
    let code_in = fields.string(&map, "asset_in", 16);
    let code_out = fields.string(&map, "asset_out", 16);
    let amount_in = fields.units(&map, "amount_in_units");
    let slippage = fields.opt_int(&map, "slippage_bps", 1..=10_000);
    fields.finish()?;
    let (Some(user), Some(code_in), Some(code_out), Some(amount_in)) =
        (user, code_in, code_out, amount_in)
    else {
        unreachable!("finish() refuses missing fields")
    };
    let slippage_bps = slippage.map_or(SLIPPAGE_BPS_DEFAULT, |s| {
        u32::try_from(s).expect("at most 10000")
    });
    let asset_in = bsc_asset(state, "asset_in", &code_in)?;
    let asset_out = bsc_asset(state, "asset_out", &code_out)?;
    let Some(pair_limits) = state
        .swap_pairs
        .iter()
        .find_map(|p| p.limits(&asset_in.code, &asset_out.code))
    else {
        return Err(Refusal::new(
            ErrorCode::UnsupportedPair,
            format!("{code_in} to {code_out} is not an enabled swap pair"),
        )
        .into());
    };
    if amount_in.is_zero() {
        return Err(Refusal::new(
            ErrorCode::AmountTooSmall,
            "amount_in_units must be greater than zero",
        )
        .into());
    }
    let mut policy = state
        .fee_policies
        .iter()
        .find(|(id, _)| *id == asset_in.id())
        .map(|(_, p)| p.clone())
        .ok_or_else(|| unavailable(format!("no fee policy for {code_in}")))?;
    if let Some((min, max)) = pair_limits {
        policy.min_amount_units = min;
        policy.max_amount_units = max;
    }
    // Limits first: a bad amount is a 422 whatever the node's state.
    swap::swap_costs(&policy, amount_in, Amount::ZERO, Rate::NATIVE)?;
    // A control that stops swaps answers as such, even while the chain is down.
    let (a_in, a_out) = (asset_in.clone(), asset_out.clone());
    read(state.store.as_ref(), move |tx| {
        swap::controls_refusal(tx, &a_in, &a_out)
    })
    .await?;
    let (Some(dex), Some(router), Some(sender), Some(hot)) = (
        state.dex.as_ref(),
        state.swap_router.as_ref(),
        state.senders.get(&Network::Bsc),
        state.hot_wallets.get(&Network::Bsc),
    ) else {
        return Err(unavailable("no [bsc] endpoint is configured").into());
    };
    super::take_quote_budget(state, call)?;
    let wrapped = router.wrapped_native.as_str();
    let (codes, path, expected) =
        route(dex.as_ref(), wrapped, &asset_in, &asset_out, amount_in).await?;
    let rate = custody_core::pricing::native_rate(dex.as_ref(), wrapped, &asset_in)
        .await
        .map_err(unavailable)?;
    let payment = Payment::Swap {
        router: router.router.clone(),
        path: path.clone(),
        amount_in,
        min_out: Amount::ZERO,
        native_in: asset_in.contract.is_none(),
        native_out: asset_out.contract.is_none(),
        to: hot.address.clone(),
        deadline_s: u64::MAX,
    };
    let estimate = sender
        .price(&hot.address, &payment)
        .await
        .map_err(|e| unavailable(e.message))?;
    let request = SwapQuoteRequest {
        tenant: call.credential().tenant.clone(),
        external_user_id: user,
        asset_in,
        asset_out,
        amount_in,
        slippage_bps,
        route: codes,
        path,
        expected_amount_out: expected,
        policy,
        network_native: estimate.expected_native,
        rate,
    };
    let (id, now) = (new_uuid(state.entropy.as_ref()), state.clock.now());
    let quote = write(state.store.as_ref(), move |tx| {
        swap::create_quote(tx, id, &request, now)
    })
    .await?;
    Ok(Reply::json(201, &quote.view()))
}

pub async fn create(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = input::json_object(&call.body)?;
    let mut fields = Fields::new();
    fields.no_unknown(&map, &["quote_id"]);
    let quote_id = fields.string(&map, "quote_id", 64);
    fields.finish()?;
    let quote_id = quote_id
        .and_then(|q| Uuid::parse_str(&q).ok())
        .ok_or_else(|| Refusal::validation("quote_id", "must be a UUID"))?;
    let tenant = call.credential().tenant.clone();
    let factors = super::execution::second_factors_unless_replay(state, call).await?;
    let t = tenant.clone();
    let quote = read(state.store.as_ref(), move |tx| {
        Ok(tx.swap_quote(&t, quote_id)?)
    })
    .await?
    .ok_or_else(|| Refusal::not_found("quote"))?;
    let assets = (
        state.catalog.get(Network::Bsc, &quote.asset_in).cloned(),
        state.catalog.get(Network::Bsc, &quote.asset_out).cloned(),
    );
    let (Some(asset_in), Some(asset_out)) = assets else {
        return Err(unavailable("a quoted asset left the catalog").into());
    };
    let (Some(router), Some(_), Some(hot)) = (
        state.swap_router.clone(),
        state.senders.get(&Network::Bsc),
        state.hot_wallets.get(&Network::Bsc),
    ) else {
        return Err(unavailable("no [bsc] endpoint is configured").into());
    };
    let hot = hot.clone();
    let e = state.entropy.as_ref();
    let ids = SwapExecuteIds {
        swap: new_uuid(e),
        outgoing: new_uuid(e),
        approvals: [new_uuid(e), new_uuid(e)],
        hold_tx: new_uuid(e),
        created_event: new_uuid(e),
        balance_event: new_uuid(e),
    };
    // INSUFFICIENT_BALANCE is a 409 on swaps (decisions §7).
    idempotent::run(state, call, 409, move |tx, now| {
        factors.executing()?;
        let s = swap::execute(
            tx,
            ids,
            &tenant,
            quote_id,
            (&asset_in, &asset_out),
            &hot,
            &router,
            now,
        )?;
        Ok(StoredResponse {
            status: 201,
            body: serde_json::to_vec(&s.view()).expect("a swap serializes"),
        })
    })
    .await
}

pub async fn get(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let not_found = || Refusal::not_found("swap");
    let id = Uuid::parse_str(&call.params[0]).map_err(|_| not_found())?;
    let tenant = call.credential().tenant.clone();
    let s = read_quick(state.store.as_ref(), move |tx| Ok(tx.swap(&tenant, id)?))
        .await?
        .ok_or_else(not_found)?;
    Ok(Reply::json(200, &s.view()))
}
