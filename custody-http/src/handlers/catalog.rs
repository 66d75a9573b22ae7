use custody_core::error::{CoreResult, ErrorCode, Refusal};
use custody_core::{Asset, Network};
use serde_json::{json, Value};

use super::list;
use crate::dispatch::Call;
use crate::input::query_value;
use crate::reply::Reply;
use crate::state::AppState;

pub fn asset_json(a: &Asset) -> Value {
    json!({
        "network": a.network,
        "code": a.code,
        "kind": a.kind,
        "decimals": a.decimals,
        "contract": a.contract,
    })
}

pub fn networks_json(state: &AppState) -> Vec<Value> {
    state
        .networks
        .iter()
        .map(|n| {
            json!({
                "network": n.network,
                "name": n.network.display_name(),
                "chain_id": n.chain_id,
                "native_asset": state.catalog.native(n.network).map(|a| a.code.clone()),
                "required_confirmations": n.confirmations,
            })
        })
        .collect()
}

pub fn networks(state: &AppState) -> Reply {
    list(&networks_json(state), false)
}

pub fn assets(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let network = match query_value(&call.query, "network") {
        None => None,
        Some(v) => Some(v.parse::<Network>().map_err(|_| {
            Refusal::new(ErrorCode::ValidationFailed, "the request is not valid")
                .with_detail("network", "must be BSC or TRON")
        })?),
    };
    let data: Vec<Value> = state
        .catalog
        .all()
        .iter()
        .filter(|a| network.is_none_or(|n| a.network == n))
        .map(asset_json)
        .collect();
    Ok(list(&data, false))
}

pub fn swap_pairs(state: &AppState) -> Reply {
    let data: Vec<Value> = state
        .swap_pairs
        .iter()
        .map(|p| {
            json!({
                "network": Network::Bsc,
                "pair": format!("{}-{}", p.base, p.quote),
                "base_asset": p.base,
                "quote_asset": p.quote,
                "enabled": true,
            })
        })
        .collect();
    list(&data, false)
}
