//! Deposits of the calling tenant.

use custody_core::deposit::{DepositFilter, DepositStatus};
use custody_core::error::{CoreResult, Refusal};
use custody_core::ports::store::{read, read_quick};
use custody_core::wallet::check_external_user_id;
use uuid::Uuid;

use crate::dispatch::Call;
use crate::input::{limit, query_value};
use crate::reply::Reply;
use crate::state::AppState;

pub async fn list(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let limit = limit(&call.query)?;
    let status = match query_value(&call.query, "status") {
        None => None,
        Some(s) => Some(s.parse::<DepositStatus>().map_err(|()| {
            let allowed: Vec<_> = DepositStatus::ALL.iter().map(|d| d.as_str()).collect();
            Refusal::validation("status", format!("must be one of {}", allowed.join(", ")))
        })?),
    };
    let external_user_id = query_value(&call.query, "external_user_id").map(str::to_owned);
    if let Some(u) = &external_user_id {
        check_external_user_id("external_user_id", u)?;
    }
    let tenant = call.credential().tenant.clone();
    let filter = DepositFilter {
        status,
        external_user_id,
    };
    let mut rows = read(state.store.as_ref(), move |tx| {
        Ok(tx.list_deposits(&tenant, &filter, limit + 1)?)
    })
    .await?;
    let has_more = rows.len() > limit;
    rows.truncate(limit);
    let data: Vec<_> = rows.iter().map(|d| d.view()).collect();
    Ok(super::list(&data, has_more))
}

pub async fn get(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let not_found = || Refusal::not_found("deposit");
    let id = Uuid::parse_str(&call.params[0]).map_err(|_| not_found())?;
    let tenant = call.credential().tenant.clone();
    let deposit = read_quick(state.store.as_ref(), move |tx| {
        Ok(tx.deposit_by_id(&tenant, id)?)
    })
    .await?
    .ok_or_else(not_found)?;
    Ok(Reply::json(200, &deposit.view()))
}
