//! Swaps (interface §2, §4; decisions §3, §4, §12): the quote priced by the DEX router, the
//! execution under its idempotency key and second factors, and the record. The rules are in
//! `custody_core::swap`; the engine that sends is a background loop of the binary.

use custody_core::asset::{Asset, AssetLookup};
use custody_core::error::{CoreResult, ErrorCode, Refusal};
use custody_core::idempotency::StoredResponse;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::{read, read_quick};
use custody_core::swap::quoting::{self, unavailable, SwapAsk, SwapQuotePorts};
use custody_core::swap::{self, SwapExecuteIds, SLIPPAGE_BPS_DEFAULT};
use custody_core::wallet::EXTERNAL_USER_ID_CHARS_MAX;
use custody_core::Network;
use uuid::Uuid;

use crate::dispatch::Call;
use crate::idempotent;
use crate::input::{self, Fields};
use crate::reply::Reply;
use crate::state::AppState;

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
    let ports = SwapQuotePorts {
        store: state.store.as_ref(),
        clock: state.clock.as_ref(),
        entropy: state.entropy.as_ref(),
        sender: state.senders.get(&Network::Bsc).map(|s| s.as_ref()),
        hot_wallet: state.hot_wallets.get(&Network::Bsc),
        dex: state.dex.as_ref().map(|d| d.as_ref()),
        router: state.swap_router.as_ref(),
        fee_policy: state
            .fee_policies
            .iter()
            .find(|(id, _)| *id == asset_in.id())
            .map(|(_, p)| p),
    };
    let ask = SwapAsk {
        tenant: call.credential().tenant.clone(),
        external_user_id: user,
        asset_in,
        asset_out,
        amount_in,
        slippage_bps,
        pair_limits,
    };
    let quote = quoting::quote(&ports, ask, || super::take_quote_budget(state, call))
        .await
        .map_err(|f| super::logged(Network::Bsc, f))?;
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
