//! Withdrawals (interface §2, §4; decisions §3, §4, §11): the quote priced from the chain, the
//! execution under its idempotency key and second factors, and the record. The rules are in
//! `custody_core::withdrawal`; the engine that sends is a background loop of the binary.

use custody_core::asset::AssetLookup;
use custody_core::chain::ChainAddress;
use custody_core::error::{CoreResult, ErrorCode, Refusal};
use custody_core::idempotency::StoredResponse;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::{read, read_quick};
use custody_core::wallet::EXTERNAL_USER_ID_CHARS_MAX;
use custody_core::withdrawal::quoting::{self, unavailable, QuoteAsk, QuotePorts};
use custody_core::withdrawal::{self, ExecuteIds};
use custody_core::Network;
use uuid::Uuid;

use crate::dispatch::Call;
use crate::idempotent;
use crate::input::{self, Fields};
use crate::reply::Reply;
use crate::state::AppState;

/// The destination as an address of `network`: another network's address is a cross-chain
/// request, anything else an invalid address.
fn destination(network: Network, text: &str) -> Result<ChainAddress, Refusal> {
    if let Ok(a) = ChainAddress::parse(network, text) {
        return Ok(a);
    }
    let other = match network {
        Network::Bsc => Network::Tron,
        Network::Tron => Network::Bsc,
    };
    if ChainAddress::parse(other, text).is_ok() {
        return Err(Refusal::new(
            ErrorCode::CrossChainNotSupported,
            format!("destination_address is an address of {other}, not of {network}"),
        ));
    }
    Err(Refusal::new(
        ErrorCode::InvalidAddress,
        format!("destination_address is not a valid {network} address"),
    ))
}

pub async fn quote(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = input::json_object(&call.body)?;
    let mut fields = Fields::new();
    fields.no_unknown(
        &map,
        &[
            "external_user_id",
            "network",
            "asset",
            "destination_address",
            "amount_units",
        ],
    );
    let user = fields.string(&map, "external_user_id", EXTERNAL_USER_ID_CHARS_MAX);
    let network = fields.string(&map, "network", 16);
    let asset = fields.string(&map, "asset", 16);
    let dest = fields.string(&map, "destination_address", 128);
    let amount = fields.units(&map, "amount_units");
    let network = network.and_then(|n| match n.parse::<Network>() {
        Ok(n) => Some(n),
        Err(_) => {
            fields.issue("network", "must be BSC or TRON");
            None
        }
    });
    fields.finish()?;
    let (Some(user), Some(network), Some(code), Some(dest), Some(amount)) =
        (user, network, asset, dest, amount)
    else {
        unreachable!("finish() refuses missing fields")
    };
    let asset = match state.catalog.lookup(network, &code) {
        AssetLookup::Found(a) => a.clone(),
        AssetLookup::OtherNetwork(other) => {
            return Err(Refusal::new(
                ErrorCode::CrossChainNotSupported,
                format!("{code} is an asset of {other}, not of {network}"),
            )
            .into())
        }
        AssetLookup::Unknown => {
            return Err(Refusal::new(
                ErrorCode::UnsupportedAsset,
                format!("{code} is not a supported asset"),
            )
            .into())
        }
    };
    let destination = destination(network, &dest)?;
    let policy = state
        .fee_policies
        .iter()
        .find(|(id, _)| *id == asset.id())
        .map(|(_, p)| p);
    let ports = QuotePorts {
        store: state.store.as_ref(),
        clock: state.clock.as_ref(),
        entropy: state.entropy.as_ref(),
        sender: state.senders.get(&network).map(|s| s.as_ref()),
        hot_wallet: state.hot_wallets.get(&network),
        dex: state
            .dex
            .as_ref()
            .zip(state.swap_router.as_ref())
            .map(|(dex, router)| (dex.as_ref(), router.wrapped_native.as_str())),
        configured_rate: state.native_rates.get(&asset.id()).copied(),
        fee_policy: policy,
    };
    let ask = QuoteAsk {
        tenant: call.credential().tenant.clone(),
        external_user_id: user,
        asset,
        destination,
        amount,
    };
    let quote = quoting::quote(&ports, ask, || super::take_quote_budget(state, call))
        .await
        .map_err(|f| super::logged(network, f))?;
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
    let quote = read(state.store.as_ref(), move |tx| Ok(tx.quote(&t, quote_id)?))
        .await?
        .ok_or_else(|| Refusal::not_found("quote"))?;
    let network = quote.network;
    let asset = state
        .catalog
        .get(network, &quote.asset)
        .cloned()
        .ok_or_else(|| unavailable(network, "the quoted asset left the catalog"))?;
    let (Some(_), Some(hot)) = (state.senders.get(&network), state.hot_wallets.get(&network))
    else {
        return Err(unavailable(network, "no endpoint is configured").into());
    };
    let hot = hot.clone();
    let e = state.entropy.as_ref();
    let ids = ExecuteIds {
        withdrawal: new_uuid(e),
        outgoing: new_uuid(e),
        hold_tx: new_uuid(e),
        created_event: new_uuid(e),
        balance_event: new_uuid(e),
    };
    // INSUFFICIENT_BALANCE is a 409 on withdrawals (decisions §7).
    idempotent::run(state, call, 409, move |tx, now| {
        factors.executing()?;
        let w = withdrawal::execute(tx, ids, &tenant, quote_id, &asset, &hot, now)?;
        Ok(StoredResponse {
            status: 201,
            body: serde_json::to_vec(&w.view()).expect("a withdrawal serializes"),
        })
    })
    .await
}

pub async fn get(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let not_found = || Refusal::not_found("withdrawal");
    let id = Uuid::parse_str(&call.params[0]).map_err(|_| not_found())?;
    let tenant = call.credential().tenant.clone();
    let w = read_quick(state.store.as_ref(), move |tx| {
        Ok(tx.withdrawal(&tenant, id)?)
    })
    .await?
    .ok_or_else(not_found)?;
    Ok(Reply::json(200, &w.view()))
}
