use custody_core::error::{CoreResult, Refusal};
use custody_core::ports::store::read;

use super::catalog;
use crate::dispatch::Call;
use crate::input::limit;
use crate::reply::Reply;
use crate::state::AppState;

/// Every name the contract allows in `/admin/{resource}` (interface §4).
pub const RESOURCES: &[&str] = &[
    "networks",
    "assets",
    "rpcs",
    "treasuries",
    "fee-policies",
    "reconciliations",
    "audit",
    "alerts",
    "transactions",
    "withdrawals",
    "swaps",
    "sweeps",
    "webhooks",
    "wallet-migrations",
    "treasury-fundings",
];

pub async fn list(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let resource = call.params[0].as_str();
    let limit = limit(&call.query)?;
    match resource {
        "networks" => Ok(super::list(&catalog::networks_json(state), false)),
        "assets" => {
            let data: Vec<_> = state
                .catalog
                .all()
                .iter()
                .map(catalog::asset_json)
                .collect();
            Ok(super::list(&data, false))
        }
        "audit" => {
            let mut rows = read(
                state.store.as_ref(),
                move |tx| Ok(tx.list_audit(limit + 1)?),
            )
            .await?;
            let has_more = rows.len() > limit;
            rows.truncate(limit);
            Ok(super::list(&rows, has_more))
        }
        // Allowlisted names whose feature is not built answer like an unknown path.
        _ => Err(Refusal::not_found("admin resource").into()),
    }
}
