//! Route handlers, one module per tag. Each reads its input strictly, calls the core and
//! renders the result; none decides business rules.

pub(crate) mod admin;
mod catalog;
mod credentials;
mod deposits;
mod execution;
mod swaps;
mod transfers;
mod wallets;
mod withdrawals;

use custody_core::error::CoreResult;

use crate::dispatch::Call;
use crate::reply::Reply;
use crate::routes::{Route, RouteId};
use crate::state::AppState;

/// A list result (decisions §3): newest first, `has_more` when the limit cut it.
pub fn list<T: serde::Serialize>(data: &[T], has_more: bool) -> Reply {
    Reply::json(
        200,
        &serde_json::json!({ "data": data, "has_more": has_more }),
    )
}

pub async fn dispatch(state: &AppState, route: &Route, call: &Call) -> CoreResult<Reply> {
    match route.id {
        RouteId::Health => Ok(Reply::json(200, &serde_json::json!({ "status": "ok" }))),
        RouteId::OpenApi => Ok(Reply::raw_json(
            200,
            crate::openapi::document_bytes().to_vec(),
        )),
        RouteId::Metrics => admin::metrics(state).await,
        RouteId::ListNetworks => Ok(catalog::networks(state)),
        RouteId::ListAssets => catalog::assets(state, call),
        RouteId::ListSwapPairs => Ok(catalog::swap_pairs(state)),
        RouteId::CreateWallet => wallets::create(state, call).await,
        RouteId::GetWallet => wallets::get(state, call).await,
        RouteId::GetWalletBalances => wallets::balances(state, call).await,
        RouteId::ListWalletTransactions => wallets::transactions(state, call).await,
        RouteId::CreateInternalTransfer => transfers::create(state, call).await,
        RouteId::QuoteWithdrawal => withdrawals::quote(state, call).await,
        RouteId::CreateWithdrawal => withdrawals::create(state, call).await,
        RouteId::GetWithdrawal => withdrawals::get(state, call).await,
        RouteId::QuoteSwap => swaps::quote(state, call).await,
        RouteId::CreateSwap => swaps::create(state, call).await,
        RouteId::GetSwap => swaps::get(state, call).await,
        RouteId::ListDeposits => deposits::list(state, call).await,
        RouteId::GetDeposit => deposits::get(state, call).await,
        RouteId::AdminDashboard => admin::dashboard(state).await,
        RouteId::AdminUpdateControl => admin::update_control(state, call).await,
        RouteId::AdminReconcile => admin::reconcile(state, call).await,
        RouteId::AdminAckAlert => admin::acknowledge_alert(state, call).await,
        RouteId::AdminReplayWebhook => admin::replay_webhook(state, call).await,
        RouteId::AdminCancelOutgoing => admin::cancel_outgoing(state, call).await,
        RouteId::AdminCreateCredential => credentials::create(state, call).await,
        RouteId::AdminListCredentials => credentials::list(state, call).await,
        RouteId::AdminRevokeCredential => credentials::revoke(state, call).await,
        RouteId::AdminList => admin::list(state, call).await,
    }
}

/// The admin resource names (for the OpenAPI enum).
pub fn admin_resources() -> &'static [&'static str] {
    admin::RESOURCES
}

/// A quote not made, as answered: the provider's detail of a failed chain is logged here, under
/// the step that failed, and never shown (interface §7).
pub(crate) fn logged(
    network: custody_core::Network,
    failure: custody_core::pricing::QuoteFailure,
) -> custody_core::error::CoreError {
    if let Some((what, detail)) = &failure.log {
        tracing::warn!(%network, %detail, "{what}");
    }
    failure.error
}

/// Counts a quote against its credential's quote budget (`auth::quote_budget`) before the
/// chain is asked anything; over it, 429 `RATE_LIMITED` with the window's `Retry-After`.
pub(crate) fn take_quote_budget(
    state: &crate::state::AppState,
    call: &crate::dispatch::Call,
) -> Result<(), custody_core::error::Refusal> {
    let credential = call.credential();
    let budget = custody_core::auth::quote_budget(credential.rate_limit);
    let decision = state.quotes.check(credential.id, budget, state.clock.now());
    if decision.allowed {
        return Ok(());
    }
    Err(custody_core::error::Refusal::new(
        custody_core::error::ErrorCode::RateLimited,
        format!(
            "the quote budget of these credentials is reached ({budget} quotes a minute: a \
             quote costs the chain several calls)"
        ),
    )
    .retry_after(decision.reset_after_s))
}
