//! The OpenAPI 3.1 document, generated from the route table so that it describes exactly the
//! routes served: a route without a row here cannot be served, and the reverse.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::routes::{Access, Route, RouteId, ROUTES};

/// Characters no request string may hold (decisions §17): Rust's `char::is_control`, the
/// Unicode category Cc.
const NO_CONTROL: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// Free text the server trims first (a reason): no control character and at least one
/// character that is not whitespace (Rust's `char::is_whitespace`).
/// No control character and no white space (Rust's `char::is_control` / `is_whitespace`), as a
/// PIN is checked (`custody_core::auth::issue::check_pin`).
const NO_SPACE_OR_CONTROL: &str =
    "^[^\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]*$";
const NOT_BLANK: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// Idempotency keys are header values: visible ASCII, inner spaces allowed (HTTP trims the
/// ends of a header value, which would change the signed key).
const IDEMPOTENCY_KEY: &str = "^[!-~][ -~]*[!-~]$";

/// A request string of 1 to `max` characters without control characters, as
/// `crate::input::Fields::string` checks it.
fn text(max: usize) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max, "pattern": NO_CONTROL })
}

/// A trimmed free-text reason of at most 500 characters.
fn reason() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": 500, "pattern": NOT_BLANK })
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "headers": { "X-Trace-Id": { "$ref": "#/components/headers/TraceId" } },
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
    })
}

fn success_schema(route: &Route) -> Value {
    match route.id {
        RouteId::Health => json!({
            "type": "object", "additionalProperties": false, "required": ["status"],
            "properties": { "status": { "const": "ok" } }
        }),
        RouteId::OpenApi => json!({ "type": "object" }),
        RouteId::Metrics => json!({ "type": "string" }),
        RouteId::ListNetworks => list_of("#/components/schemas/Network"),
        RouteId::ListAssets => list_of("#/components/schemas/Asset"),
        RouteId::ListSwapPairs => list_of("#/components/schemas/SwapPair"),
        RouteId::CreateWallet | RouteId::GetWallet => {
            json!({ "$ref": "#/components/schemas/Wallet" })
        }
        RouteId::GetWalletBalances => json!({ "$ref": "#/components/schemas/WalletBalances" }),
        RouteId::ListWalletTransactions => list_of("#/components/schemas/WalletTransaction"),
        RouteId::CreateInternalTransfer => {
            json!({ "$ref": "#/components/schemas/InternalTransferResult" })
        }
        RouteId::QuoteWithdrawal => json!({ "$ref": "#/components/schemas/WithdrawalQuote" }),
        RouteId::QuoteSwap => json!({ "$ref": "#/components/schemas/SwapQuote" }),
        RouteId::CreateSwap | RouteId::GetSwap => json!({ "$ref": "#/components/schemas/Swap" }),
        RouteId::CreateWithdrawal | RouteId::GetWithdrawal => {
            json!({ "$ref": "#/components/schemas/Withdrawal" })
        }
        RouteId::ListDeposits => list_of("#/components/schemas/Deposit"),
        RouteId::GetDeposit => json!({ "$ref": "#/components/schemas/Deposit" }),
        RouteId::AdminDashboard => json!({ "type": "object" }),
        RouteId::AdminUpdateControl => json!({ "$ref": "#/components/schemas/Control" }),
        RouteId::AdminReconcile => json!({ "$ref": "#/components/schemas/ReconcileScheduled" }),
        RouteId::AdminAckAlert => json!({ "$ref": "#/components/schemas/Alert" }),
        RouteId::AdminReplayWebhook => json!({ "type": "object" }),
        RouteId::AdminCancelOutgoing => {
            json!({ "$ref": "#/components/schemas/OutgoingTransaction" })
        }
        RouteId::AdminCreateCredential => {
            json!({ "$ref": "#/components/schemas/CreatedCredential" })
        }
        RouteId::AdminListCredentials => list_of("#/components/schemas/Credential"),
        RouteId::AdminRevokeCredential => json!({ "$ref": "#/components/schemas/Credential" }),
        RouteId::AdminList => list_of_any(),
    }
}

/// The request body schema of a route that takes one.
fn request_schema(route: &Route) -> Option<Value> {
    match route.id {
        RouteId::CreateWallet => Some(json!({ "$ref": "#/components/schemas/CreateWallet" })),
        RouteId::CreateInternalTransfer => {
            Some(json!({ "$ref": "#/components/schemas/InternalTransfer" }))
        }
        RouteId::AdminUpdateControl => {
            Some(json!({ "$ref": "#/components/schemas/ControlUpdate" }))
        }
        RouteId::AdminReconcile => Some(json!({ "$ref": "#/components/schemas/Reconcile" })),
        RouteId::AdminAckAlert | RouteId::AdminCancelOutgoing => {
            Some(json!({ "$ref": "#/components/schemas/AlertAck" }))
        }
        RouteId::AdminCreateCredential => {
            Some(json!({ "$ref": "#/components/schemas/CreateCredential" }))
        }
        RouteId::AdminRevokeCredential => {
            Some(json!({ "$ref": "#/components/schemas/RevokeCredential" }))
        }
        RouteId::QuoteWithdrawal => {
            Some(json!({ "$ref": "#/components/schemas/WithdrawalQuoteRequest" }))
        }
        RouteId::CreateWithdrawal | RouteId::CreateSwap => {
            Some(json!({ "$ref": "#/components/schemas/ExecuteQuote" }))
        }
        RouteId::QuoteSwap => Some(json!({ "$ref": "#/components/schemas/SwapQuoteRequest" })),
        _ => None,
    }
}

/// A request a partner would send, shown in the document and tried first by API fuzzers.
fn request_example(route: &Route) -> Option<Value> {
    match route.id {
        RouteId::CreateWallet => Some(json!({ "external_user_id": "alice", "network": "BSC" })),
        RouteId::CreateInternalTransfer => Some(json!({
            "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
            "asset": "BNB", "network": "BSC", "amount_units": "1000"
        })),
        RouteId::QuoteWithdrawal => Some(json!({
            "external_user_id": "alice", "network": "BSC", "asset": "BNB",
            "destination_address": "0x000000000000000000000000000000000000dEaD",
            "amount_units": "1000000000000000"
        })),
        RouteId::QuoteSwap => Some(json!({
            "external_user_id": "alice", "asset_in": "BNB", "asset_out": "USDT",
            "amount_in_units": "1000000000000000", "slippage_bps": 50
        })),
        RouteId::AdminUpdateControl => Some(json!({
            "control_key": "maintenance.TRON", "enabled": false, "reason": "node upgraded"
        })),
        RouteId::AdminReconcile => Some(json!({ "scope": "LEDGER" })),
        _ => None,
    }
}

/// OpenAPI links: how the answer of one operation feeds the next (the id of a created wallet,
/// the quote a withdrawal or swap executes), for clients and stateful API testing.
fn links(route: &Route) -> Option<Value> {
    let by_id = |op: &str, expr: &str| json!({ "operationId": op, "parameters": { "id": expr } });
    let execute = |op: &str| json!({ "operationId": op, "requestBody": { "quote_id": "$response.body#/id" } });
    let links = match route.id {
        RouteId::CreateWallet => json!({
            "GetWallet": by_id("getWallet", "$response.body#/id"),
            "GetWalletBalances": by_id("getWalletBalances", "$response.body#/id"),
            "ListWalletTransactions": by_id("listWalletTransactions", "$response.body#/id"),
            "ListDepositsOfUser": {
                "operationId": "listDeposits",
                "parameters": { "external_user_id": "$response.body#/external_user_id" }
            }
        }),
        RouteId::QuoteWithdrawal => json!({ "CreateWithdrawal": execute("createWithdrawal") }),
        RouteId::CreateWithdrawal => {
            json!({ "GetWithdrawal": by_id("getWithdrawal", "$response.body#/id") })
        }
        RouteId::QuoteSwap => json!({ "CreateSwap": execute("createSwap") }),
        RouteId::CreateSwap => json!({ "GetSwap": by_id("getSwap", "$response.body#/id") }),
        RouteId::ListDeposits => {
            json!({ "GetDeposit": by_id("getDeposit", "$response.body#/data/0/id") })
        }
        _ => return None,
    };
    Some(links)
}

fn list_of(item_ref: &str) -> Value {
    json!({
        "type": "object", "additionalProperties": false, "required": ["data", "has_more"],
        "properties": { "data": { "type": "array", "items": { "$ref": item_ref } }, "has_more": { "type": "boolean" } }
    })
}

fn list_of_any() -> Value {
    json!({
        "type": "object", "additionalProperties": false, "required": ["data", "has_more"],
        "properties": { "data": { "type": "array", "items": { "type": "object" } }, "has_more": { "type": "boolean" } }
    })
}

fn parameters(route: &Route) -> Vec<Value> {
    let mut out = Vec::new();
    for segment in route.template.split('/') {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let schema = if name == "resource" {
                json!({ "type": "string", "enum": crate::handlers::admin_resources() })
            } else {
                json!({ "type": "string", "format": "uuid" })
            };
            out.push(json!({ "name": name, "in": "path", "required": true, "schema": schema }));
        }
    }
    for q in route.query {
        let schema = match *q {
            "limit" => json!({ "type": "integer", "minimum": 1, "maximum": 100, "default": 50 }),
            "starting_after" => json!({ "type": "string", "format": "uuid" }),
            "network" => json!({ "$ref": "#/components/schemas/NetworkName" }),
            "status" => json!({
                "type": "string",
                "enum": ["detected", "confirming", "confirmed", "credited", "orphaned", "reversed"]
            }),
            "external_user_id" => text(160),
            _ => json!({ "type": "string" }),
        };
        let mut param = json!({ "name": q, "in": "query", "required": false, "schema": schema });
        if *q == "starting_after" {
            param["description"] = json!(
                "The id of the last row of the previous page: the page holds the rows after it \
                 (newest first, by created_at then id). An id that names no row of the listing \
                 is a 422. The listings of configuration (networks, assets, rpcs, treasuries, \
                 fee-policies) are always one page (has_more false) and take no cursor."
            );
        }
        out.push(param);
    }
    if takes_second_factors(route) {
        for name in ["X-Service-Pin", "X-Service-OTP"] {
            out.push(json!({
                "name": name, "in": "header", "required": false,
                "description": "mandatory when the credential was created with a PIN / TOTP",
                "schema": { "type": "string" }
            }));
        }
    }
    if route.idempotency_key {
        out.push(json!({
            "name": "Idempotency-Key", "in": "header", "required": true,
            "schema": { "type": "string", "minLength": 8, "maxLength": 128, "pattern": IDEMPOTENCY_KEY }
        }));
    }
    if optional_idempotency_key(route) {
        out.push(json!({
            "name": "Idempotency-Key", "in": "header", "required": false,
            "description": "optional: a retry with the same key and body within 24 h answers the first answer (the same secret) instead of making a second key",
            "schema": { "type": "string", "minLength": 8, "maxLength": 128, "pattern": IDEMPOTENCY_KEY }
        }));
    }
    out
}

/// Routes that take an `Idempotency-Key` without requiring it (decisions §15 does not ask for
/// one on key creation; a client that wants safe retries sends one).
fn optional_idempotency_key(route: &Route) -> bool {
    route.id == RouteId::AdminCreateCredential
}

fn success_content_type(route: &Route) -> &'static str {
    if route.id == RouteId::Metrics {
        crate::metrics::CONTENT_TYPE
    } else {
        "application/json"
    }
}

/// Routes that check `X-Service-Pin` / `X-Service-OTP` (crate::second_factor).
fn takes_second_factors(route: &Route) -> bool {
    matches!(
        route.id,
        RouteId::AdminUpdateControl
            | RouteId::AdminReconcile
            | RouteId::AdminAckAlert
            | RouteId::AdminReplayWebhook
            | RouteId::AdminCancelOutgoing
            | RouteId::AdminCreateCredential
            | RouteId::AdminRevokeCredential
            | RouteId::CreateWithdrawal
            | RouteId::CreateSwap
    )
}

fn operation(route: &Route) -> Value {
    let mut responses = Map::new();
    let ok_headers = if route.access == Access::Public {
        json!({ "X-Trace-Id": { "$ref": "#/components/headers/TraceId" } })
    } else {
        json!({
            "X-Trace-Id": { "$ref": "#/components/headers/TraceId" },
            "X-RateLimit-Limit": { "$ref": "#/components/headers/RateLimitLimit" },
            "X-RateLimit-Remaining": { "$ref": "#/components/headers/RateLimitRemaining" }
        })
    };
    let mut success = json!({
        "description": "Success",
        "headers": ok_headers,
        "content": { success_content_type(route): { "schema": success_schema(route) } }
    });
    if let Some(links) = links(route) {
        success["links"] = links;
    }
    responses.insert(route.success_status.to_string(), success);
    let mut op = json!({
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
        "parameters": parameters(route),
    });
    if let Some(schema) = request_schema(route) {
        op["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": schema } }
        });
        if let Some(example) = request_example(route) {
            op["requestBody"]["content"]["application/json"]["example"] = example;
        }
        responses.insert(
            "400".into(),
            error_response(
                "MALFORMED_JSON: not one JSON value in UTF-8, or a key repeated in an object",
            ),
        );
        responses.insert(
            "408".into(),
            error_response(
                "REQUEST_TIMEOUT: the body did not arrive in time; the connection is closed",
            ),
        );
        responses.insert("413".into(), error_response("PAYLOAD_TOO_LARGE"));
    }
    if route.idempotency_key || optional_idempotency_key(route) {
        responses.insert(
            "409".into(),
            error_response("IDEMPOTENCY_CONFLICT, IDEMPOTENCY_IN_PROGRESS, INSUFFICIENT_BALANCE (withdrawals and swaps)"),
        );
    }
    if route.access == Access::Public {
        op["security"] = json!([]);
    } else {
        for (status, what) in [
            ("401", "Not authenticated (AUTHENTICATION_FAILED, TIMESTAMP_OUT_OF_WINDOW, REPLAY_DETECTED)"),
            ("403", "FORBIDDEN: the credentials lack the scope or admin rights"),
            ("422", "VALIDATION_FAILED and the other validation codes"),
            ("429", "RATE_LIMITED, with Retry-After"),
        ] {
            responses.insert(status.into(), error_response(what));
        }
        if takes_second_factors(route) {
            responses.insert(
                "401".into(),
                error_response("Not authenticated (AUTHENTICATION_FAILED, TIMESTAMP_OUT_OF_WINDOW, REPLAY_DETECTED), or a second factor missing (PIN_REQUIRED, OTP_REQUIRED) or failed: one answer whichever factor failed, INVALID_PIN for a credential with a PIN, else INVALID_OTP; with Retry-After while locked after 5 failures"),
            );
            responses.insert(
                "429".into(),
                error_response("RATE_LIMITED, with Retry-After: the rate limit, or 5 PIN/OTP checks of the credential already in progress"),
            );
        }
        op["x-required-scope"] = match route.access {
            Access::Scope(s) => json!(s.as_str()),
            Access::Admin => json!("admin"),
            Access::Public => Value::Null,
        };
    }
    if route.template.contains('{') {
        responses.insert("404".into(), error_response("NOT_FOUND"));
    }
    if matches!(route.id, RouteId::CreateWithdrawal | RouteId::CreateSwap) {
        responses.insert(
            "404".into(),
            error_response("NOT_FOUND: no quote of the calling tenant has this quote_id"),
        );
    }
    if route.id == RouteId::AdminRevokeCredential {
        responses.insert(
            "404".into(),
            error_response("NOT_FOUND: no credential has this api_key or id"),
        );
    }
    responses.insert("405".into(), error_response("METHOD_NOT_ALLOWED"));
    responses.insert(
        "500".into(),
        error_response(
            "INTERNAL_ERROR (sanitized); with Retry-After when the failure is transient (the store busy or its disk full)",
        ),
    );
    responses.insert(
        "503".into(),
        error_response("MAINTENANCE: too many connections, from this address or in all; retry after Retry-After seconds"),
    );
    op["responses"] = Value::Object(responses);
    op
}

fn build() -> Value {
    let tags: Vec<Value> = [
        "Catalog",
        "Wallets",
        "Deposits",
        "Withdrawals",
        "Swaps",
        "Transfers",
        "Admin",
    ]
    .iter()
    .map(|t| json!({ "name": t }))
    .collect();
    let mut paths = Map::new();
    for route in ROUTES {
        let entry = paths
            .entry(route.template.to_owned())
            .or_insert_with(|| json!({}));
        entry[route.method.to_lowercase()] = operation(route);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Custodial Crypto Core Service",
            "version": "1.0.0",
            "description": "Custodial service for BSC and TRON. Every authenticated request carries X-Service-Key, X-Service-Timestamp, X-Service-Nonce and X-Service-Signature: lowercase hex HMAC-SHA256, under the credential's secret, of METHOD\\nPATH\\nTIMESTAMP\\nNONCE\\nIDEMPOTENCY_KEY\\nSHA256_HEX(BODY), where PATH includes /v1 and excludes the query, and IDEMPOTENCY_KEY is empty when the request has none."
        },
        "servers": [
            { "url": "{base_url}", "variables": { "base_url": { "default": "http://127.0.0.1:8080/v1" } } },
            { "url": "{contingency_url}", "variables": { "contingency_url": { "default": "http://127.0.0.1:8081/v1" } } }
        ],
        "tags": tags,
        "security": [ { "ServiceKey": [], "ServiceTimestamp": [], "ServiceNonce": [], "ServiceSignature": [] } ],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "ServiceKey": { "type": "apiKey", "in": "header", "name": "X-Service-Key" },
                "ServiceTimestamp": { "type": "apiKey", "in": "header", "name": "X-Service-Timestamp", "description": "Unix seconds, within 300 s of the server clock" },
                "ServiceNonce": { "type": "apiKey", "in": "header", "name": "X-Service-Nonce", "description": "16 to 128 characters, never reused" },
                "ServiceSignature": { "type": "apiKey", "in": "header", "name": "X-Service-Signature", "description": "lowercase hex HMAC-SHA256 of the canonical string" }
            },
            "headers": {
                "TraceId": { "schema": { "type": "string", "format": "uuid" } },
                "RateLimitLimit": { "schema": { "type": "integer" } },
                "RateLimitRemaining": { "schema": { "type": "integer" } }
            },
            "schemas": component_schemas()
        }
    })
}

/// The component schemas, one `json!` each (a single literal exceeds the macro recursion limit).
fn component_schemas() -> Value {
    let mut schemas = Map::new();
    schemas.insert(
        "Units".into(),
        json!({ "type": "string", "pattern": "^[0-9]+$" }),
    );
    schemas.insert(
        "NetworkName".into(),
        json!({ "type": "string", "enum": ["BSC", "TRON"] }),
    );
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["code", "message", "trace_id"],
            "properties": {
                "code": { "type": "string" },
                "message": { "type": "string" },
                "trace_id": { "type": "string", "format": "uuid" },
                "details": { "type": "array", "items": {
                    "type": "object", "additionalProperties": false, "required": ["field", "issue"],
                    "properties": { "field": { "type": "string" }, "issue": { "type": "string" } }
                } }
            }
        }),
    );
    schemas.insert(
        "Network".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["network", "name", "chain_id", "native_asset", "required_confirmations"],
            "properties": {
                "network": { "$ref": "#/components/schemas/NetworkName" },
                "name": { "type": "string" },
                "chain_id": { "type": "integer" },
                "native_asset": { "type": "string" },
                "required_confirmations": { "type": "integer" }
            }
        }),
    );
    schemas.insert(
        "Asset".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["network", "code", "kind", "decimals", "contract"],
            "properties": {
                "network": { "$ref": "#/components/schemas/NetworkName" },
                "code": { "type": "string" },
                "kind": { "type": "string", "enum": ["native", "BEP20", "TRC20"] },
                "decimals": { "type": "integer", "minimum": 0 },
                "contract": { "type": ["string", "null"] }
            }
        }),
    );
    schemas.insert(
        "CreateWallet".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["external_user_id", "network"],
            "properties": {
                "external_user_id": text(160),
                "network": { "$ref": "#/components/schemas/NetworkName" }
            }
        }),
    );
    let costs = costs_schema();
    schemas.insert("WithdrawalQuoteRequest".into(), json!({
        "type": "object", "additionalProperties": false,
        "required": ["external_user_id", "network", "asset", "destination_address", "amount_units"],
        "properties": {
            "external_user_id": text(160),
            "network": { "$ref": "#/components/schemas/NetworkName" },
            "asset": text(16),
            "destination_address": text(128),
            "amount_units": { "$ref": "#/components/schemas/Units" }
        }
    }));
    schemas.insert(
        "ExecuteQuote".into(),
        json!({
            "type": "object", "additionalProperties": false, "required": ["quote_id"],
            "properties": { "quote_id": { "type": "string", "format": "uuid" } }
        }),
    );
    schemas.insert("WithdrawalQuote".into(), json!({
        "type": "object", "additionalProperties": false,
        "required": ["id", "kind", "external_user_id", "network", "asset", "destination_address", "amount_units", "costs", "expires_at", "created_at"],
        "properties": {
            "id": { "type": "string", "format": "uuid" },
            "kind": { "type": "string", "enum": ["withdrawal"] },
            "external_user_id": { "type": "string" },
            "network": { "$ref": "#/components/schemas/NetworkName" },
            "asset": { "type": "string" },
            "destination_address": { "type": "string" },
            "amount_units": { "$ref": "#/components/schemas/Units" },
            "costs": costs.clone(),
            "expires_at": { "type": "string", "format": "date-time" },
            "created_at": { "type": "string", "format": "date-time" }
        }
    }));
    schemas.insert("Withdrawal".into(), json!({
        "type": "object", "additionalProperties": false,
        "required": ["id", "quote_id", "external_user_id", "network", "asset", "destination_address", "amount_units", "costs", "status", "tx_hash", "block_number", "confirmations", "actual_network_cost_units", "failure_reason", "history", "created_at", "updated_at"],
        "properties": {
            "id": { "type": "string", "format": "uuid" },
            "quote_id": { "type": "string", "format": "uuid" },
            "external_user_id": { "type": "string" },
            "network": { "$ref": "#/components/schemas/NetworkName" },
            "asset": { "type": "string" },
            "destination_address": { "type": "string" },
            "amount_units": { "$ref": "#/components/schemas/Units" },
            "costs": costs,
            "status": { "type": "string", "enum": ["reserved", "broadcasted", "confirmed", "failed"] },
            "tx_hash": { "type": ["string", "null"] },
            "block_number": { "type": ["integer", "null"] },
            "confirmations": { "type": "integer", "minimum": 0 },
            "actual_network_cost_units": { "oneOf": [{ "$ref": "#/components/schemas/Units" }, { "type": "null" }] },
            "failure_reason": { "type": ["string", "null"] },
            "history": { "type": "array", "items": {
                "type": "object", "additionalProperties": false, "required": ["status", "tx_hash", "at"],
                "properties": {
                    "status": { "type": "string" },
                    "tx_hash": { "type": ["string", "null"] },
                    "at": { "type": "string", "format": "date-time" }
                }
            }},
            "created_at": { "type": "string", "format": "date-time" },
            "updated_at": { "type": "string", "format": "date-time" }
        }
    }));
    let history = json!({ "type": "array", "items": {
        "type": "object", "additionalProperties": false, "required": ["status", "tx_hash", "at"],
        "properties": {
            "status": { "type": "string" },
            "tx_hash": { "type": ["string", "null"] },
            "at": { "type": "string", "format": "date-time" }
        }
    }});
    let units_or_null =
        json!({ "oneOf": [{ "$ref": "#/components/schemas/Units" }, { "type": "null" }] });
    schemas.insert(
        "SwapQuoteRequest".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["external_user_id", "asset_in", "asset_out", "amount_in_units"],
            "properties": {
                "external_user_id": text(160),
                "asset_in": text(16),
                "asset_out": text(16),
                "amount_in_units": { "$ref": "#/components/schemas/Units" },
                "slippage_bps": { "type": "integer", "minimum": 1, "maximum": 10000, "default": 50 }
            }
        }),
    );
    schemas.insert("SwapQuote".into(), json!({
        "type": "object", "additionalProperties": false,
        "required": ["id", "kind", "external_user_id", "asset_in", "asset_out", "amount_in_units", "slippage_bps", "route", "expected_amount_out_units", "min_amount_out_units", "costs", "expires_at", "created_at"],
        "properties": {
            "id": { "type": "string", "format": "uuid" },
            "kind": { "type": "string", "enum": ["swap"] },
            "external_user_id": { "type": "string" },
            "asset_in": { "type": "string" },
            "asset_out": { "type": "string" },
            "amount_in_units": { "$ref": "#/components/schemas/Units" },
            "slippage_bps": { "type": "integer" },
            "route": { "type": "array", "items": { "type": "string" } },
            "expected_amount_out_units": { "$ref": "#/components/schemas/Units" },
            "min_amount_out_units": { "$ref": "#/components/schemas/Units" },
            "costs": costs_schema(),
            "expires_at": { "type": "string", "format": "date-time" },
            "created_at": { "type": "string", "format": "date-time" }
        }
    }));
    schemas.insert("Swap".into(), json!({
        "type": "object", "additionalProperties": false,
        "required": ["id", "quote_id", "external_user_id", "asset_in", "asset_out", "amount_in_units", "route", "expected_amount_out_units", "min_amount_out_units", "costs", "status", "tx_hash", "block_number", "actual_amount_in_units", "actual_amount_out_units", "actual_network_cost_units", "failure_reason", "history", "created_at", "updated_at"],
        "properties": {
            "id": { "type": "string", "format": "uuid" },
            "quote_id": { "type": "string", "format": "uuid" },
            "external_user_id": { "type": "string" },
            "asset_in": { "type": "string" },
            "asset_out": { "type": "string" },
            "amount_in_units": { "$ref": "#/components/schemas/Units" },
            "route": { "type": "array", "items": { "type": "string" } },
            "expected_amount_out_units": { "$ref": "#/components/schemas/Units" },
            "min_amount_out_units": { "$ref": "#/components/schemas/Units" },
            "costs": costs_schema(),
            "status": { "type": "string", "enum": ["reserved", "broadcasted", "confirmed", "failed"] },
            "tx_hash": { "type": ["string", "null"] },
            "block_number": { "type": ["integer", "null"] },
            "actual_amount_in_units": units_or_null.clone(),
            "actual_amount_out_units": units_or_null.clone(),
            "actual_network_cost_units": units_or_null,
            "failure_reason": { "type": ["string", "null"] },
            "history": history,
            "created_at": { "type": "string", "format": "date-time" },
            "updated_at": { "type": "string", "format": "date-time" }
        }
    }));
    schemas.insert("InternalTransfer".into(), json!({
                    "type": "object", "additionalProperties": false,
                    "required": ["sender_external_user_id", "recipient_external_user_id", "asset", "network", "amount_units"],
                    "properties": {
                        "sender_external_user_id": text(160),
                        "recipient_external_user_id": text(160),
                        "asset": text(16),
                        "network": { "$ref": "#/components/schemas/NetworkName" },
                        "amount_units": { "$ref": "#/components/schemas/Units" }
                    }
                }));
    schemas.insert("Wallet".into(), json!({
                    "type": "object", "additionalProperties": false,
                    "required": ["id", "external_user_id", "network", "address", "derivation_path", "previous_addresses", "created_at"],
                    "properties": {
                        "id": { "type": "string", "format": "uuid" },
                        "external_user_id": { "type": "string" },
                        "network": { "$ref": "#/components/schemas/NetworkName" },
                        "address": { "type": "string" },
                        "derivation_path": { "type": "string" },
                        "previous_addresses": {
                            "description": "Addresses the wallet had before wallet migrations, oldest first; still watched and credited.",
                            "type": "array",
                            "items": {
                                "type": "object", "additionalProperties": false,
                                "required": ["address", "derivation_path", "retired_at"],
                                "properties": {
                                    "address": { "type": "string" },
                                    "derivation_path": { "type": "string" },
                                    "retired_at": { "type": "string", "format": "date-time" }
                                }
                            }
                        },
                        "created_at": { "type": "string", "format": "date-time" }
                    }
                }));
    schemas.insert("WalletBalances".into(), json!({
                    "type": "object", "additionalProperties": false,
                    "required": ["wallet_id", "network", "address", "balances"],
                    "properties": {
                        "wallet_id": { "type": "string", "format": "uuid" },
                        "network": { "$ref": "#/components/schemas/NetworkName" },
                        "address": { "type": "string" },
                        "balances": { "type": "array", "items": {
                            "type": "object", "additionalProperties": false,
                            "required": ["asset", "decimals", "ledger", "onchain", "onchain_error"],
                            "properties": {
                                "asset": { "type": "string" },
                                "decimals": { "type": "integer" },
                                "ledger": {
                                    "type": "object", "additionalProperties": false,
                                    "required": ["available_units", "reserved_units", "pending_units"],
                                    "properties": {
                                        "available_units": { "$ref": "#/components/schemas/Units" },
                                        "reserved_units": { "$ref": "#/components/schemas/Units" },
                                        "pending_units": { "$ref": "#/components/schemas/Units" }
                                    }
                                },
                                "onchain": { "oneOf": [ { "type": "null" }, {
                                    "type": "object", "additionalProperties": false,
                                    "required": ["units", "block_number"],
                                    "properties": { "units": { "$ref": "#/components/schemas/Units" }, "block_number": { "type": "integer" } }
                                } ] },
                                "onchain_error": { "type": ["string", "null"] }
                            }
                        } }
                    }
                }));
    schemas.insert("WalletTransaction".into(), json!({
                    "type": "object", "additionalProperties": false,
                    "required": ["id", "kind", "asset", "direction", "amount_units", "balance_after_units", "reference_type", "reference_id", "created_at"],
                    "properties": {
                        "id": { "type": "string", "format": "uuid" },
                        "kind": { "type": "string" },
                        "asset": { "type": "string" },
                        "direction": { "type": "string", "enum": ["credit", "debit"] },
                        "amount_units": { "$ref": "#/components/schemas/Units" },
                        "balance_after_units": { "$ref": "#/components/schemas/Units" },
                        "reference_type": { "type": "string" },
                        "reference_id": { "type": "string", "format": "uuid" },
                        "created_at": { "type": "string", "format": "date-time" }
                    }
                }));
    schemas.insert("InternalTransferResult".into(), json!({
                    "type": "object", "additionalProperties": false,
                    "required": ["id", "sender_external_user_id", "recipient_external_user_id", "network", "asset", "amount_units", "status", "created_at"],
                    "properties": {
                        "id": { "type": "string", "format": "uuid" },
                        "sender_external_user_id": { "type": "string" },
                        "recipient_external_user_id": { "type": "string" },
                        "network": { "$ref": "#/components/schemas/NetworkName" },
                        "asset": { "type": "string" },
                        "amount_units": { "$ref": "#/components/schemas/Units" },
                        "status": { "const": "settled" },
                        "created_at": { "type": "string", "format": "date-time" }
                    }
                }));
    schemas.insert(
        "SwapPair".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["network", "pair", "base_asset", "quote_asset", "enabled"],
            "properties": {
                "network": { "const": "BSC" },
                "pair": { "type": "string" },
                "base_asset": { "type": "string" },
                "quote_asset": { "type": "string" },
                "enabled": { "type": "boolean" }
            }
        }),
    );
    schemas.insert(
        "Deposit".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["id", "network", "asset", "external_user_id", "wallet_id", "address", "tx_hash",
                "log_index", "from_address", "amount_units", "block_number", "block_hash", "confirmations",
                "required_confirmations", "status", "history", "created_at", "updated_at"],
            "properties": {
                "id": { "type": "string", "format": "uuid" },
                "network": { "$ref": "#/components/schemas/NetworkName" },
                "asset": { "type": "string" },
                "external_user_id": { "type": "string" },
                "wallet_id": { "type": "string", "format": "uuid" },
                "address": { "type": "string" },
                "tx_hash": { "type": "string" },
                "log_index": { "type": ["integer", "null"] },
                "from_address": { "type": "string" },
                "amount_units": { "$ref": "#/components/schemas/Units" },
                "block_number": { "type": ["integer", "null"] },
                "block_hash": { "type": ["string", "null"] },
                "confirmations": { "type": "integer" },
                "required_confirmations": { "type": "integer" },
                "status": { "type": "string", "enum": ["detected", "confirming", "confirmed", "credited", "orphaned", "reversed"] },
                "history": { "type": "array", "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["status", "block_number", "block_hash", "at"],
                    "properties": {
                        "status": { "type": "string" },
                        "block_number": { "type": ["integer", "null"] },
                        "block_hash": { "type": ["string", "null"] },
                        "at": { "type": "string", "format": "date-time" }
                    }
                } },
                "created_at": { "type": "string", "format": "date-time" },
                "updated_at": { "type": "string", "format": "date-time" }
            }
        }),
    );
    schemas.insert(
        "ControlUpdate".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["control_key", "enabled", "reason"],
            "properties": {
                "control_key": { "anyOf": [
                    { "type": "string", "enum": custody_core::admin::CONTROL_KEYS },
                    {
                        "type": "string",
                        "pattern": "^treasury_shortfall\\.(BSC|TRON)\\.[A-Z0-9]{1,16}$",
                        "description": "the automatic control a TREASURY shortfall turns on, for an asset of the catalog (any other asset: 422 UNSUPPORTED_ASSET)"
                    }
                ] },
                "enabled": { "type": "boolean" },
                "reason": reason()
            }
        }),
    );
    schemas.insert(
        "Reconcile".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["scope"],
            "properties": { "scope": { "type": "string", "enum": ["LEDGER", "TREASURY"] } }
        }),
    );
    schemas.insert(
        "ReconcileScheduled".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["id", "scope", "status"],
            "properties": {
                "id": { "type": "string", "format": "uuid" },
                "scope": { "type": "string", "enum": ["LEDGER", "TREASURY"] },
                "status": { "const": "scheduled" }
            }
        }),
    );
    schemas.insert(
        "OutgoingTransaction".into(),
        json!({
            "type": "object",
            "required": ["id", "network", "purpose", "reference_id", "from_address", "status", "cancel_requested", "history"],
            "properties": {
                "id": { "type": "string", "format": "uuid" },
                "network": { "type": "string", "enum": ["BSC", "TRON"] },
                "purpose": { "type": "string" },
                "reference_id": { "type": "string", "format": "uuid" },
                "from_address": { "type": "string" },
                "nonce": { "type": ["integer", "null"] },
                "status": { "type": "string" },
                "cancel_requested": { "type": "boolean" },
                "history": { "type": "array", "items": { "type": "object" } }
            }
        }),
    );
    schemas.insert(
        "AlertAck".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["reason"],
            "properties": { "reason": reason() }
        }),
    );
    schemas.insert(
        "Alert".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["id", "kind", "severity", "message", "reference_type", "reference_id",
                "created_at", "acknowledged_at", "acknowledged_by"],
            "properties": {
                "id": { "type": "string", "format": "uuid" },
                "kind": { "type": "string" },
                "severity": { "type": "string", "enum": ["warning", "critical"] },
                "message": { "type": "string" },
                "reference_type": { "type": ["string", "null"] },
                "reference_id": { "type": ["string", "null"], "format": "uuid" },
                "created_at": { "type": "string", "format": "date-time" },
                "acknowledged_at": { "type": ["string", "null"], "format": "date-time" },
                "acknowledged_by": { "type": ["string", "null"] }
            }
        }),
    );
    schemas.insert(
        "Control".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["control_key", "enabled", "reason", "updated_by", "updated_at"],
            "properties": {
                "control_key": { "type": "string" },
                "enabled": { "type": "boolean" },
                "reason": { "type": "string" },
                "updated_by": { "type": "string" },
                "updated_at": { "type": "string", "format": "date-time" }
            }
        }),
    );
    credential_schemas(&mut schemas);
    Value::Object(schemas)
}

/// The document, serialized once.
pub fn document_bytes() -> &'static [u8] {
    static DOC: OnceLock<Vec<u8>> = OnceLock::new();
    DOC.get_or_init(|| serde_json::to_vec(&build()).expect("the document serializes"))
}

/// The itemized costs of a quote (decisions §3).
fn costs_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["network_cost_units", "markup_units", "service_fee_units", "spread_units", "total_debited_units"],
        "properties": {
            "network_cost_units": { "$ref": "#/components/schemas/Units" },
            "markup_units": { "$ref": "#/components/schemas/Units" },
            "service_fee_units": { "$ref": "#/components/schemas/Units" },
            "spread_units": { "$ref": "#/components/schemas/Units" },
            "total_debited_units": { "$ref": "#/components/schemas/Units" }
        }
    })
}

/// `/admin/credentials`: the request bodies, the listed credential (never a secret) and the
/// created one (the secrets, shown once).
fn credential_schemas(schemas: &mut Map<String, Value>) {
    use custody_core::auth::issue;
    let scope_names: Vec<&str> = custody_core::auth::Scope::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    schemas.insert(
        "CreateCredential".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": ["tenant"],
            "description": "scopes may be empty only when admin is true",
            "anyOf": [
                { "required": ["admin"], "properties": { "admin": { "const": true } } },
                { "properties": { "scopes": { "minItems": 1 } } }
            ],
            "properties": {
                "tenant": { "type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$" },
                "scopes": {
                    "description": "Only the scopes the key needs (interface §5); empty only for an admin key; when absent, every non-admin scope (as the CLI)",
                    "type": "array", "uniqueItems": true,
                    "items": { "type": "string", "enum": scope_names }
                },
                "admin": { "type": "boolean", "default": false, "description": "grants /admin/*" },
                "rate_limit": {
                    "type": "integer", "minimum": 1, "maximum": issue::RATE_LIMIT_MAX,
                    "default": issue::RATE_LIMIT_DEFAULT,
                    "description": "requests per 60 s window"
                },
                "pin": {
                    "type": "string", "minLength": issue::PIN_CHARS_MIN, "maxLength": issue::PIN_CHARS_MAX, "pattern": NO_SPACE_OR_CONTROL,
                    "description": "when set, X-Service-Pin is required on withdrawal and swap creation and on admin mutations; stored hashed"
                },
                "totp": {
                    "type": "boolean", "default": false,
                    "description": "when true, a TOTP key is made (RFC 6238, SHA-1, 30 s, 6 digits) and X-Service-OTP is required where X-Service-Pin is"
                }
            }
        }),
    );
    schemas.insert(
        "RevokeCredential".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "description": "The key to revoke, by api_key or by id (exactly one); the reason is kept in the audit trail",
            "oneOf": [ { "required": ["api_key"] }, { "required": ["id"] } ],
            "properties": {
                "api_key": text(128),
                "id": { "type": "string", "format": "uuid" },
                "reason": { "type": "string", "minLength": 1, "maxLength": 500, "pattern": NOT_BLANK, "default": "revoked by an operator" }
            }
        }),
    );
    let properties = json!({
        "id": { "type": "string", "format": "uuid" },
        "api_key": { "type": "string" },
        "tenant": { "type": "string" },
        "scopes": { "type": "array", "items": { "type": "string", "enum": scope_names } },
        "admin": { "type": "boolean" },
        "rate_limit": { "type": "integer" },
        "pin": { "type": "boolean", "description": "whether a PIN is set" },
        "totp": { "type": "boolean", "description": "whether a TOTP key is set" },
        "status": { "type": "string", "enum": ["active", "revoked"] },
        "created_at": { "type": "string", "format": "date-time" },
        "updated_at": { "type": "string", "format": "date-time" },
        "revoked_at": { "type": ["string", "null"], "format": "date-time" }
    });
    let required = json!([
        "id",
        "api_key",
        "tenant",
        "scopes",
        "admin",
        "rate_limit",
        "pin",
        "totp",
        "status",
        "created_at",
        "updated_at",
        "revoked_at"
    ]);
    schemas.insert(
        "Credential".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": required.clone(),
            "properties": properties.clone()
        }),
    );
    let mut created = properties;
    created["hmac_secret"] = json!({
        "type": "string", "pattern": "^[0-9a-f]{64}$",
        "description": "the HMAC-SHA256 key (its UTF-8 bytes); shown in this response only"
    });
    created["totp_secret"] = json!({
        "type": "string", "description": "base32 TOTP key, when totp was asked; shown in this response only"
    });
    created["totp_uri"] = json!({
        "type": "string", "description": "otpauth:// URI of the TOTP key for an authenticator app, when totp was asked"
    });
    let mut required_created = required;
    required_created
        .as_array_mut()
        .expect("a list")
        .push(json!("hmac_secret"));
    schemas.insert(
        "CreatedCredential".into(),
        json!({
            "type": "object", "additionalProperties": false,
            "required": required_created,
            "properties": created
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let doc: Value = serde_json::from_slice(document_bytes()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        let mut documented = 0;
        for (path, ops) in paths {
            for (method, _) in ops.as_object().unwrap() {
                documented += 1;
                assert!(
                    ROUTES
                        .iter()
                        .any(|r| r.template == path && r.method.to_lowercase() == *method),
                    "{method} {path} is documented but not served"
                );
            }
        }
        assert_eq!(documented, ROUTES.len());
        assert_eq!(doc["openapi"], "3.1.0");
    }

    #[test]
    fn connection_and_body_refusals_are_documented() {
        let doc: Value = serde_json::from_slice(document_bytes()).unwrap();
        let wallets = &doc["paths"]["/wallets"]["post"]["responses"];
        assert!(wallets["408"]["description"]
            .as_str()
            .unwrap()
            .starts_with("REQUEST_TIMEOUT"));
        for route in ROUTES {
            let op = &doc["paths"][route.template][route.method.to_lowercase()];
            assert!(op["responses"]["503"].is_object(), "{}", route.template);
        }
    }
}
