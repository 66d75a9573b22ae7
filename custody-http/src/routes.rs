//! The route table: the single description of every served route, used both to dispatch and to
//! generate the OpenAPI document, so the two cannot disagree.

use custody_core::auth::Scope;

/// Which handler serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteId {
    Health,
    OpenApi,
    Metrics,
    ListNetworks,
    ListAssets,
    ListSwapPairs,
    CreateWallet,
    GetWallet,
    GetWalletBalances,
    ListWalletTransactions,
    CreateInternalTransfer,
    QuoteWithdrawal,
    CreateWithdrawal,
    GetWithdrawal,
    QuoteSwap,
    CreateSwap,
    GetSwap,
    ListDeposits,
    GetDeposit,
    AdminDashboard,
    AdminUpdateControl,
    AdminReconcile,
    AdminAckAlert,
    AdminReplayWebhook,
    AdminCancelOutgoing,
    AdminCreateCredential,
    AdminListCredentials,
    AdminRevokeCredential,
    AdminList,
}

impl RouteId {
    /// The route's command writes the request's nonce in its own transaction (one store job per
    /// request). Only routes whose handler has no effect before that command: a route that
    /// checks second factors first must refuse a replay before it counts an attempt.
    pub fn nonce_in_command(self) -> bool {
        matches!(
            self,
            RouteId::CreateWallet | RouteId::CreateInternalTransfer
        )
    }
}

impl RouteId {
    /// The route checks the credentials version in its own first transaction, before it reads
    /// or writes anything else (`crate::fence`), instead of in a read of its own at
    /// authentication: the hottest routes, whose handlers were written for it.
    pub fn fences_in_route(self) -> bool {
        matches!(
            self,
            RouteId::GetWallet
                | RouteId::GetWalletBalances
                | RouteId::CreateWallet
                | RouteId::CreateInternalTransfer
        )
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Public,
    Scope(Scope),
    Admin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub id: RouteId,
    pub method: &'static str,
    /// Path below `/v1`, with `{name}` for parameters.
    pub template: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    pub access: Access,
    pub idempotency_key: bool,
    /// Query parameters accepted (all optional); anything else is a 422.
    pub query: &'static [&'static str],
    pub success_status: u16,
}

/// Every route this build serves. A feature that is not built has no row here and answers 404
/// like any unknown path.
pub const ROUTES: &[Route] = &[
    Route {
        id: RouteId::Health,
        method: "GET",
        template: "/health",
        operation_id: "getHealth",
        summary: "Liveness: answers 200 while the process serves requests",
        tag: "Catalog",
        access: Access::Public,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::OpenApi,
        method: "GET",
        template: "/openapi.json",
        operation_id: "getOpenApi",
        summary: "This OpenAPI 3.1 document",
        tag: "Catalog",
        access: Access::Public,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::Metrics,
        method: "GET",
        template: "/metrics",
        operation_id: "getMetrics",
        summary: "Operational metrics in the OpenMetrics text format (Prometheus): requests, latencies, scanner lag, queue depths, webhook outcomes",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::ListNetworks,
        method: "GET",
        template: "/networks",
        operation_id: "listNetworks",
        summary: "Networks served, with confirmations required",
        tag: "Catalog",
        access: Access::Scope(Scope::CatalogRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::ListAssets,
        method: "GET",
        template: "/assets",
        operation_id: "listAssets",
        summary: "Assets of the catalog, optionally of one network",
        tag: "Catalog",
        access: Access::Scope(Scope::CatalogRead),
        idempotency_key: false,
        query: &["network"],
        success_status: 200,
    },
    Route {
        id: RouteId::ListSwapPairs,
        method: "GET",
        template: "/swap-pairs",
        operation_id: "listSwapPairs",
        summary: "Enabled BSC swap pairs",
        tag: "Catalog",
        access: Access::Scope(Scope::CatalogRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::CreateWallet,
        method: "POST",
        template: "/wallets",
        operation_id: "createWallet",
        summary: "Creates the HD wallet of a user on a network, or returns the existing one",
        tag: "Wallets",
        access: Access::Scope(Scope::WalletsWrite),
        idempotency_key: true,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::GetWallet,
        method: "GET",
        template: "/wallets/{id}",
        operation_id: "getWallet",
        summary: "A wallet of the calling tenant",
        tag: "Wallets",
        access: Access::Scope(Scope::WalletsRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::GetWalletBalances,
        method: "GET",
        template: "/wallets/{id}/balances",
        operation_id: "getWalletBalances",
        summary: "Ledger and on-chain balances of a wallet, kept apart",
        tag: "Wallets",
        access: Access::Scope(Scope::WalletsRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::ListWalletTransactions,
        method: "GET",
        template: "/wallets/{id}/transactions",
        operation_id: "listWalletTransactions",
        summary: "Ledger entries of the wallet's user on its network, newest first",
        tag: "Wallets",
        access: Access::Scope(Scope::WalletsRead),
        idempotency_key: false,
        query: &["limit"],
        success_status: 200,
    },
    Route {
        id: RouteId::QuoteWithdrawal,
        method: "POST",
        template: "/withdrawals/quote",
        operation_id: "quoteWithdrawal",
        summary: "Authoritative withdrawal quote: itemized costs, valid 60 s, single use",
        tag: "Withdrawals",
        access: Access::Scope(Scope::WithdrawalsWrite),
        idempotency_key: false,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::CreateWithdrawal,
        method: "POST",
        template: "/withdrawals",
        operation_id: "createWithdrawal",
        summary: "Authorizes and reserves a withdrawal from a quote; it is then sent and tracked",
        tag: "Withdrawals",
        access: Access::Scope(Scope::WithdrawalsWrite),
        idempotency_key: true,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::GetWithdrawal,
        method: "GET",
        template: "/withdrawals/{id}",
        operation_id: "getWithdrawal",
        summary: "A withdrawal of the tenant",
        tag: "Withdrawals",
        access: Access::Scope(Scope::WithdrawalsRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::QuoteSwap,
        method: "POST",
        template: "/swaps/quote",
        operation_id: "quoteSwap",
        summary: "Route and quote on the BSC decentralized exchange: itemized costs, valid 30 s, single use",
        tag: "Swaps",
        access: Access::Scope(Scope::SwapsWrite),
        idempotency_key: false,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::CreateSwap,
        method: "POST",
        template: "/swaps",
        operation_id: "createSwap",
        summary: "Reserves and executes a swap from a quote; the user is credited the actual output",
        tag: "Swaps",
        access: Access::Scope(Scope::SwapsWrite),
        idempotency_key: true,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::GetSwap,
        method: "GET",
        template: "/swaps/{id}",
        operation_id: "getSwap",
        summary: "A swap of the tenant, with the values actually obtained",
        tag: "Swaps",
        access: Access::Scope(Scope::SwapsRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::CreateInternalTransfer,
        method: "POST",
        template: "/internal-transfers",
        operation_id: "createInternalTransfer",
        summary: "Settles a transfer between two users of the tenant on the ledger",
        tag: "Transfers",
        access: Access::Scope(Scope::TransfersWrite),
        idempotency_key: true,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::ListDeposits,
        method: "GET",
        template: "/deposits",
        operation_id: "listDeposits",
        summary: "Deposits of the calling tenant, newest first",
        tag: "Deposits",
        access: Access::Scope(Scope::DepositsRead),
        idempotency_key: false,
        query: &["status", "external_user_id", "limit"],
        success_status: 200,
    },
    Route {
        id: RouteId::GetDeposit,
        method: "GET",
        template: "/deposits/{id}",
        operation_id: "getDeposit",
        summary: "A deposit with its confirmations and full history",
        tag: "Deposits",
        access: Access::Scope(Scope::DepositsRead),
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminDashboard,
        method: "GET",
        template: "/admin/dashboard",
        operation_id: "getAdminDashboard",
        summary: "Operational indicators: chains, controls, pending work, alerts, liabilities",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminUpdateControl,
        method: "POST",
        template: "/admin/controls",
        operation_id: "updateAdminControl",
        summary: "Turns a kill switch or maintenance control on or off, with audit",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminReconcile,
        method: "POST",
        template: "/admin/reconcile",
        operation_id: "triggerReconciliation",
        summary: "Schedules a LEDGER or TREASURY reconciliation; its result appears in /admin/reconciliations",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 202,
    },
    Route {
        id: RouteId::AdminAckAlert,
        method: "POST",
        template: "/admin/alerts/{id}/ack",
        operation_id: "acknowledgeAlert",
        summary: "Acknowledges an alert, with audit: it no longer counts as open; acknowledging again answers the same record",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminCancelOutgoing,
        method: "POST",
        template: "/admin/outgoing/{id}/cancel",
        operation_id: "cancelOutgoingTransaction",
        summary: "Cancels a payment that can never proceed, with audit: failed at once if nothing was signed; on BSC its nonce voided by a 0-value self-transfer, then failed and its hold released (paid instead if its own attempt is mined); on TRON failed once every attempt is void",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminReplayWebhook,
        method: "POST",
        template: "/admin/webhooks/{id}/replay",
        operation_id: "replayWebhookEvent",
        summary: "Re-queues a dead-lettered webhook event under its id, with audit",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    // Before `/admin/{resource}`: the first matching row serves a path.
    Route {
        id: RouteId::AdminCreateCredential,
        method: "POST",
        template: "/admin/credentials",
        operation_id: "createCredential",
        summary: "Creates an API key for a tenant with the chosen scopes, with audit; the HMAC secret (and TOTP secret) are in this response only",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 201,
    },
    Route {
        id: RouteId::AdminListCredentials,
        method: "GET",
        template: "/admin/credentials",
        operation_id: "listCredentials",
        summary: "API keys of every tenant, newest first, in pages; never a secret",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &["limit", "starting_after"],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminRevokeCredential,
        method: "POST",
        template: "/admin/credentials/revoke",
        operation_id: "revokeCredential",
        summary: "Revokes an API key at once, with audit; revoking it again answers the same record",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &[],
        success_status: 200,
    },
    Route {
        id: RouteId::AdminList,
        method: "GET",
        template: "/admin/{resource}",
        operation_id: "listAdminResource",
        summary: "Operational listing of an admin resource (allowlisted names), across tenants, newest first, in pages",
        tag: "Admin",
        access: Access::Admin,
        idempotency_key: false,
        query: &["limit", "starting_after"],
        success_status: 200,
    },
];

/// Result of matching a request path and method.
#[derive(Debug, PartialEq, Eq)]
pub enum Match {
    Found {
        route: &'static Route,
        params: Vec<String>,
    },
    /// The path exists with other methods.
    WrongMethod {
        allow: Vec<&'static str>,
    },
    NotFound,
}

/// `depth`: how many `/`-separated segments `path` has.
fn match_template(template: &str, path: &str, depth: usize) -> Option<Vec<String>> {
    // Matched before anything is copied: most routes of the table do not match.
    let segments = || template.split('/').zip(path.split('/'));
    let is_param = |t: &str| t.starts_with('{') && t.ends_with('}');
    if template.split('/').count() != depth
        || !segments().all(|(t, p)| if is_param(t) { !p.is_empty() } else { t == p })
    {
        return None;
    }
    Some(
        segments()
            .filter(|(t, _)| is_param(t))
            .map(|(_, p)| p.to_owned())
            .collect(),
    )
}

/// Matches `path` (below `/v1`) and `method` against the table. A path that spells a literal
/// route (`/swaps/quote`) is that route only, never a parameter of another one
/// (`/swaps/{id}`): its allowed methods are the literal route's, as the document lists them.
pub fn find(method: &str, path: &str) -> Match {
    let literal = ROUTES.iter().any(|r| r.template == path);
    let depth = path.split('/').count();
    let mut allow = Vec::new();
    for route in ROUTES {
        if literal && route.template != path {
            continue;
        }
        if let Some(params) = match_template(route.template, path, depth) {
            if route.method == method {
                return Match::Found { route, params };
            }
            allow.push(route.method);
        }
    }
    if allow.is_empty() {
        Match::NotFound
    } else {
        Match::WrongMethod { allow }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_literals_and_parameters() {
        assert!(
            matches!(find("GET", "/assets"), Match::Found { route, .. } if route.id == RouteId::ListAssets)
        );
        assert_eq!(
            find("GET", "/admin/audit"),
            Match::Found {
                route: ROUTES.iter().find(|r| r.id == RouteId::AdminList).unwrap(),
                params: vec!["audit".into()]
            }
        );
        assert_eq!(
            find("POST", "/assets"),
            Match::WrongMethod { allow: vec!["GET"] }
        );
        assert_eq!(find("GET", "/assets/"), Match::NotFound);
        // A literal route is never read as a parameter of another one.
        assert_eq!(
            find("GET", "/swaps/quote"),
            Match::WrongMethod {
                allow: vec!["POST"]
            }
        );
        assert_eq!(
            find("GET", "/admin/reconcile"),
            Match::WrongMethod {
                allow: vec!["POST"]
            }
        );
        assert_eq!(find("GET", "/admin/"), Match::NotFound);
        assert!(
            matches!(find("GET", "/admin/credentials"), Match::Found { route, .. } if route.id == RouteId::AdminListCredentials)
        );
        assert_eq!(
            find("GET", "/admin/credentials/revoke"),
            Match::WrongMethod {
                allow: vec!["POST"]
            }
        );
        assert_eq!(find("GET", "/nope"), Match::NotFound);
    }
}
