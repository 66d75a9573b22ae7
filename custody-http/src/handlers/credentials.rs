//! `/admin/credentials`: API keys made, listed and revoked by an operator (decisions §15), on
//! the rules of `custody_core::auth::issue` that the CLI uses too.

use std::sync::Arc;

use custody_core::auth::issue::{self, CredentialView, NewCredential};
use custody_core::error::{CoreError, CoreResult, PortError, Refusal};
use custody_core::idempotency::StoredResponse;
use custody_core::page::{self, Page};
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::{read, write};
use custody_core::secret::Secret;
use custody_core::TenantId;
use serde_json::{Map, Value};

use crate::dispatch::Call;
use crate::idempotent;
use crate::input::{self, Fields};
use crate::reply::Reply;
use crate::second_factor;
use crate::state::AppState;

fn actor(call: &Call) -> String {
    format!("credential:{}", call.credential().id)
}

/// The body of a create request, every problem reported at once.
fn new_credential(map: &Map<String, Value>) -> Result<NewCredential, Refusal> {
    let mut fields = Fields::new();
    fields.no_unknown(
        map,
        &["tenant", "scopes", "admin", "rate_limit", "pin", "totp"],
    );
    let tenant = fields
        .string(map, "tenant", custody_core::tenant::TENANT_CHARS_MAX)
        .and_then(|t| match TenantId::parse(&t) {
            Ok(t) => Some(t),
            Err(e) => {
                fields.issue("tenant", e);
                None
            }
        });
    let scopes = match map.get("scopes") {
        Some(Value::Array(items)) => {
            let mut names = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => names.push(s.clone()),
                    _ => fields.issue(&format!("scopes[{i}]"), "must be a string"),
                }
            }
            match issue::check_scopes(&names) {
                Ok(s) => Some(s),
                Err(issues) => {
                    for (field, why) in issues {
                        fields.issue(&field, why);
                    }
                    None
                }
            }
        }
        // As `credentials create` without --scopes (decisions §1): every non-admin scope.
        None => Some(custody_core::auth::Scope::ALL.into_iter().collect()),
        Some(_) => {
            fields.issue("scopes", "must be a list of scope names");
            None
        }
    };
    let admin = optional_bool(&mut fields, map, "admin");
    // As every integer of a body (`Fields::opt_int`): `17089.0` is the integer 17089 in the
    // JSON Schema the OpenAPI document speaks; `null` is refused, absent is the default.
    let rate_limit = match map.get("rate_limit") {
        None => Some(issue::RATE_LIMIT_DEFAULT),
        Some(_) => fields
            .opt_int(map, "rate_limit", 1..=u64::from(issue::RATE_LIMIT_MAX))
            .and_then(|n| u32::try_from(n).ok()),
    };
    let pin = match map.get("pin") {
        None => None,
        Some(Value::String(p)) => match issue::check_pin(p) {
            Ok(()) => Some(Secret::new(p.clone())),
            Err(why) => {
                fields.issue("pin", why);
                None
            }
        },
        Some(_) => {
            fields.issue("pin", "must be a string");
            None
        }
    };
    let totp = optional_bool(&mut fields, map, "totp");
    if scopes.as_ref().is_some_and(|s| s.is_empty()) && admin == Some(false) {
        fields.issue(
            "scopes",
            "must name at least one scope unless admin is true",
        );
    }
    fields.finish()?;
    let (Some(tenant), Some(scopes), Some(admin), Some(rate_limit), Some(totp)) =
        (tenant, scopes, admin, rate_limit, totp)
    else {
        unreachable!("finish() refuses missing or invalid fields")
    };
    Ok(NewCredential {
        tenant,
        scopes,
        admin,
        rate_limit,
        pin,
        totp,
    })
}

/// An optional boolean, `false` when absent.
fn optional_bool(fields: &mut Fields, map: &Map<String, Value>, field: &str) -> Option<bool> {
    match map.get(field) {
        None => Some(false),
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            fields.issue(field, "must be a boolean");
            None
        }
    }
}

/// `POST /admin/credentials`. Body, then the idempotency key when one is sent, then the second
/// factors — on every request, replays included: a replay answers the secret again, so it
/// must prove as much as the first request did. Without an `Idempotency-Key` each request
/// makes a key; with one, a retry answers the first answer.
pub async fn create(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = input::json_object(&call.body)?;
    let request = new_credential(&map)?;
    let raw_key = call.headers.get("idempotency-key");
    if raw_key.is_some_and(|v| v.to_str().is_err()) {
        return Err(Refusal::validation(
            "Idempotency-Key",
            "must contain only visible ASCII characters",
        )
        .into());
    }
    if raw_key.is_some() {
        custody_core::auth::check_idempotency_key(raw_key.and_then(|v| v.to_str().ok()))?;
    }
    let credential = call.credential();
    second_factor::check(state, credential, &call.headers).await?;

    // Argon2 (the PIN) is CPU work: off the async threads.
    let entropy = Arc::clone(&state.entropy);
    let now = state.clock.now();
    let issued = tokio::task::spawn_blocking(move || issue::issue(request, entropy.as_ref(), now))
        .await
        .map_err(|e| CoreError::Port(PortError::permanent("credentials", e.to_string())))?
        .map_err(|why| CoreError::Port(PortError::permanent("credentials", why)))?;
    let stored = issued.credential.seal(&state.vault);
    let body = serde_json::to_vec(&issued.shown_once()).expect("a credential serializes");
    let body = Secret::new(body);
    let audit_id = new_uuid(state.entropy.as_ref());
    let actor = actor(call);
    if raw_key.is_none() {
        write(state.store.as_ref(), move |tx| {
            issue::record_issued(tx, audit_id, &actor, &stored, stored.created_at)
        })
        .await?;
        return Ok(Reply::raw_json(201, body.expose().clone()));
    }
    idempotent::run_sealed(state, call, move |tx, _now| {
        issue::record_issued(tx, audit_id, &actor, &stored, stored.created_at)?;
        Ok(StoredResponse {
            status: 201,
            body: body.expose().clone(),
        })
    })
    .await
}

/// `GET /admin/credentials`: the admin listing shape and paging (`limit`, `starting_after`),
/// newest first. Credentials are few (an operator makes each): the page is cut from the whole
/// list by the same keyset the SQL listings use.
pub async fn list(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let limit = input::limit(&call.query)?;
    let after = input::starting_after(&call.query)?;
    let all = read(state.store.as_ref(), |tx| Ok(tx.list_credentials()?)).await?;
    let views: Vec<CredentialView> = all.iter().map(CredentialView::of).collect();
    let page = Page {
        limit: limit + 1,
        starting_after: after,
    };
    let Some(mut rows) = page::select(&views, |v| (v.created_at, v.id), page) else {
        return Err(input::unknown_cursor().into());
    };
    let has_more = rows.len() > limit;
    rows.truncate(limit);
    Ok(super::list(&rows, has_more))
}

/// `POST /admin/credentials/revoke` with `{"api_key"}` or `{"id"}` (one of them) and an
/// optional `reason`: body first, then the second factors, as for `/admin/controls`. The
/// key's next request is refused.
pub async fn revoke(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = input::json_object(&call.body)?;
    let mut fields = Fields::new();
    fields.no_unknown(&map, &["api_key", "id", "reason"]);
    let which = match (map.get("api_key"), map.get("id")) {
        (Some(_), Some(_)) => {
            fields.issue("id", "give api_key or id, not both");
            None
        }
        (Some(_), None) => fields
            .string(&map, "api_key", 128)
            .map(issue::CredentialRef::ApiKey),
        (None, Some(_)) => {
            fields
                .string(&map, "id", 64)
                .and_then(|id| match uuid::Uuid::parse_str(&id) {
                    Ok(id) => Some(issue::CredentialRef::Id(id)),
                    Err(_) => {
                        fields.issue("id", "must be a UUID");
                        None
                    }
                })
        }
        (None, None) => {
            fields.issue("api_key", "is required (or id)");
            None
        }
    };
    let reason = match map.get("reason") {
        None => Some(issue::REVOKE_REASON_DEFAULT.to_owned()),
        Some(_) => fields.string(&map, "reason", 500),
    };
    fields.finish()?;
    let (Some(which), Some(reason)) = (which, reason) else {
        unreachable!("finish() refuses missing fields")
    };
    let reason = issue::check_revoke_reason(&reason)?.to_owned();
    let credential = call.credential();
    second_factor::check(state, credential, &call.headers).await?;
    let actor = actor(call);
    let audit_id = new_uuid(state.entropy.as_ref());
    let now = state.clock.now();
    let view = write(state.store.as_ref(), move |tx| {
        issue::revoke(tx, audit_id, &actor, &which, &reason, now)
    })
    .await?;
    Ok(Reply::json(200, &view))
}
