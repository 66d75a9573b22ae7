use custody_core::admin;
use custody_core::error::{CoreResult, Refusal};
use custody_core::page::{Page, Paged};
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::read;
use custody_core::ports::store::write;
use custody_core::reconcile::{self, Scope};
use serde_json::json;

use super::catalog;
use crate::dispatch::Call;
use crate::input::limit;
use crate::reply::Reply;
use crate::second_factor;
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
    let after = crate::input::starting_after(&call.query)?;
    // One more row than asked tells whether another page follows.
    let page = Page {
        limit: limit + 1,
        starting_after: after,
    };
    match resource {
        "networks" | "assets" | "fee-policies" | "rpcs" | "treasuries" => {
            // A handful of rows by construction (per network, asset or endpoint of the
            // configuration): always one whole page, so there is nothing to start after.
            if after.is_some() {
                return Err(crate::input::unknown_cursor().into());
            }
            Ok(super::list(&small_listing(state, resource).await?, false))
        }
        "alerts" => paged(state, limit, move |tx| Ok(tx.list_alerts(page)?), json_of).await,
        "audit" => paged(state, limit, move |tx| Ok(tx.list_audit(page)?), json_of).await,
        // Every tenant's events, newest first, with their attempts (no bodies, no secrets).
        "webhooks" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_webhook_events(page)?),
                json_of,
            )
            .await
        }
        // Every tenant's, newest first: the partner's shape with the tenant beside it.
        "withdrawals" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_withdrawals(page)?),
                |w| {
                    let mut v = serde_json::to_value(w.view()).expect("a withdrawal serializes");
                    v["tenant"] = json!(w.tenant.as_str());
                    v
                },
            )
            .await
        }
        "swaps" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_swaps(page)?),
                |s| {
                    let mut v = serde_json::to_value(s.view()).expect("a swap serializes");
                    v["tenant"] = json!(s.tenant.as_str());
                    v
                },
            )
            .await
        }
        "sweeps" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_sweeps(page)?),
                |s| json_of(&s.view()),
            )
            .await
        }
        "treasury-fundings" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_fundings(page)?),
                |f| json_of(&f.view()),
            )
            .await
        }
        // Ledger transactions of every tenant with their entries, newest first.
        "transactions" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_ledger_transactions(page)?),
                ledger_tx_json,
            )
            .await
        }
        "reconciliations" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_reconciliations(page)?),
                json_of,
            )
            .await
        }
        "wallet-migrations" => {
            paged(
                state,
                limit,
                move |tx| Ok(tx.list_migrations(page)?),
                |m| json_of(&m.view()),
            )
            .await
        }
        // Allowlisted names whose feature is not built answer like an unknown path.
        _ => Err(Refusal::not_found("admin resource").into()),
    }
}

/// A ledger transaction as the admin listing shows it: each entry names its account by the
/// account's key (owner, network, asset), with the amounts in units.
fn ledger_tx_json(t: &custody_core::ledger::LedgerTx) -> serde_json::Value {
    let entries: Vec<_> = t
        .entries
        .iter()
        .map(|e| {
            json!({
                "id": e.id,
                "account": e.account.to_string(),
                "direction": e.direction,
                "phase": e.phase,
                "amount_units": e.amount,
                "balance_after_units": e.balance_after,
            })
        })
        .collect();
    json!({
        "id": t.id,
        "kind": t.kind,
        "reference_type": t.reference_type,
        "reference_id": t.reference_id,
        "hold_id": t.hold_id,
        "created_at": t.created_at,
        "entries": entries,
    })
}

fn json_of<T: serde::Serialize>(row: &T) -> serde_json::Value {
    serde_json::to_value(row).expect("a listed row serializes")
}

/// A page of a store listing asked for `limit + 1` rows: the first `limit` shown, the extra one
/// only says that another page follows. A cursor the store does not know is a 422.
async fn paged<T: Send + 'static>(
    state: &AppState,
    limit: usize,
    query: impl FnMut(&mut dyn custody_core::ports::store::ReadTx) -> CoreResult<Paged<T>>
        + Send
        + 'static,
    show: impl Fn(&T) -> serde_json::Value,
) -> CoreResult<Reply> {
    let Some(mut rows) = read(state.store.as_ref(), query).await? else {
        return Err(crate::input::unknown_cursor().into());
    };
    let has_more = rows.len() > limit;
    rows.truncate(limit);
    let data: Vec<_> = rows.iter().map(show).collect();
    Ok(super::list(&data, has_more))
}

/// The listings read from the configuration or the chains rather than from stored rows.
async fn small_listing(state: &AppState, resource: &str) -> CoreResult<Vec<serde_json::Value>> {
    Ok(match resource {
        "networks" => catalog::networks_json(state),
        "assets" => state
            .catalog
            .all()
            .iter()
            .map(catalog::asset_json)
            .collect(),
        "fee-policies" => state
            .fee_policies
            .iter()
            .map(|(asset, p)| {
                json!({
                    "network": asset.network,
                    "asset": asset.code,
                    "min_amount_units": p.min_amount_units,
                    "max_amount_units": p.max_amount_units,
                    "markup_bps": p.markup_bps,
                    "service_fee_units": p.service_fee_units,
                    "service_fee_bps": p.service_fee_bps,
                    "spread_bps": p.spread_bps,
                })
            })
            .collect(),
        "rpcs" => state
            .chains
            .iter()
            .map(|(network, chain)| {
                json!({ "network": network, "endpoints": chain.endpoint_health() })
            })
            .collect(),
        // One row per hot wallet (retired ones marked): balances read from the chain now.
        _ => custody_core::treasury::rows_of(
            &state.hot_wallet_sets(),
            &state.chains,
            &state.catalog,
            state.store.as_ref(),
        )
        .await?
        .iter()
        .map(json_of)
        .collect(),
    })
}

pub async fn update_control(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = crate::input::json_object(&call.body)?;
    let mut fields = crate::input::Fields::new();
    fields.no_unknown(&map, &["control_key", "enabled", "reason"]);
    let key = fields.string(&map, "control_key", 64);
    let enabled = fields.bool(&map, "enabled");
    let reason = fields.string(&map, "reason", 500);
    fields.finish()?;
    let (Some(key), Some(enabled), Some(reason)) = (key, enabled, reason) else {
        unreachable!("finish() refuses missing fields")
    };
    // The whole request is judged before the second factors: a refusal for the body must not
    // cost an attempt, nor come after a code was accepted.
    let reason = admin::check_control_request(&key, &reason, &state.catalog)?.to_owned();
    let credential = call.credential();
    second_factor::check(state, credential, &call.headers).await?;
    let actor = format!("credential:{}", credential.id);
    let audit_id = new_uuid(state.entropy.as_ref());
    let now = state.clock.now();
    let control = write(state.store.as_ref(), move |tx| {
        admin::set_control(tx, audit_id, &actor, &key, enabled, &reason, now)
    })
    .await?;
    Ok(Reply::json(200, &control))
}

/// The body `{"reason"}` of an operator's action on one record, judged before the second
/// factors (a refusal for the body must not count as a failed factor); then the factors.
/// Returns the reason and the actor for the audit record.
async fn reasoned_action(state: &AppState, call: &Call) -> CoreResult<(String, String)> {
    let map = crate::input::json_object(&call.body)?;
    let mut fields = crate::input::Fields::new();
    fields.no_unknown(&map, &["reason"]);
    let reason = fields.string(&map, "reason", 500);
    fields.finish()?;
    let Some(reason) = reason else {
        unreachable!("finish() refuses missing fields")
    };
    let reason = admin::check_ack_reason(&reason)?.to_owned();
    let credential = call.credential();
    second_factor::check(state, credential, &call.headers).await?;
    Ok((reason, format!("credential:{}", credential.id)))
}

/// `POST /admin/alerts/{id}/ack`: the alert stops counting as open, with an audit record (who,
/// when, why). Body first, then the second factors, as for `/admin/controls`; an id that is
/// not a UUID is as unknown as one no alert has (404).
pub async fn acknowledge_alert(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let id = uuid::Uuid::parse_str(&call.params[0]).map_err(|_| Refusal::not_found("alert"))?;
    let (reason, actor) = reasoned_action(state, call).await?;
    let audit_id = new_uuid(state.entropy.as_ref());
    let now = state.clock.now();
    let alert = write(state.store.as_ref(), move |tx| {
        admin::acknowledge_alert(tx, audit_id, &actor, id, &reason, now)
    })
    .await?;
    Ok(Reply::json(200, &alert))
}

/// `POST /admin/outgoing/{id}/cancel`: an operator's way out for a payment that can never
/// proceed (`outgoing::request_cancel`; the engine carries it out). Body first, then the
/// second factors, as for `/admin/controls`; an id that is not a UUID is unknown (404).
pub async fn cancel_outgoing(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let id = uuid::Uuid::parse_str(&call.params[0])
        .map_err(|_| Refusal::not_found("outgoing transaction"))?;
    let (reason, actor) = reasoned_action(state, call).await?;
    let audit_id = new_uuid(state.entropy.as_ref());
    let now = state.clock.now();
    let out = write(state.store.as_ref(), move |tx| {
        custody_core::outgoing::request_cancel(tx, audit_id, &actor, id, &reason, now)
    })
    .await?;
    Ok(Reply::json(200, &out.operator_view()))
}

/// `POST /admin/webhooks/{id}/replay`: a dead-lettered event goes back to the queue under its
/// id (receivers deduplicate on it), with an audit record; any other status is a 422. Takes no
/// body; the second factors as for `/admin/controls`.
pub async fn replay_webhook(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let id =
        uuid::Uuid::parse_str(&call.params[0]).map_err(|_| Refusal::not_found("webhook event"))?;
    if !call.body.is_empty() {
        let map = crate::input::json_object(&call.body)?;
        let mut fields = crate::input::Fields::new();
        fields.no_unknown(&map, &[]);
        fields.finish()?;
    }
    let credential = call.credential();
    second_factor::check(state, credential, &call.headers).await?;
    let operator = custody_core::webhook::Operator {
        audit_id: new_uuid(state.entropy.as_ref()),
        actor: format!("credential:{}", credential.id),
    };
    let now = state.clock.now();
    let event = write(state.store.as_ref(), move |tx| {
        custody_core::webhook::replay(tx, id, now, &operator)
    })
    .await?;
    Ok(Reply::json(200, &event))
}

/// `POST /admin/reconcile`: schedules a run for the reconciler (202); the result is listed by
/// `/admin/reconciliations`. Body first, then the second factors, as for `/admin/controls`.
pub async fn reconcile(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = crate::input::json_object(&call.body)?;
    let mut fields = crate::input::Fields::new();
    fields.no_unknown(&map, &["scope"]);
    let scope = fields.string(&map, "scope", 16);
    fields.finish()?;
    let Some(scope) = scope else {
        unreachable!("finish() refuses missing fields")
    };
    let scope = Scope::from_request(&scope)?;
    let credential = call.credential();
    second_factor::check(state, credential, &call.headers).await?;
    let actor = format!("credential:{}", credential.id);
    let id = new_uuid(state.entropy.as_ref());
    let now = state.clock.now();
    let run = write(state.store.as_ref(), move |tx| {
        reconcile::request(tx, id, scope, &actor, now)
    })
    .await?;
    Ok(Reply::json(
        202,
        &json!({ "id": run.id, "scope": run.scope, "status": run.status }),
    ))
}

pub async fn dashboard(state: &AppState) -> CoreResult<Reply> {
    let networks: Vec<_> = state.networks.iter().map(|n| n.network).collect();
    // One snapshot: the counts agree with each other.
    let (controls, alerts, pending, work, webhooks, latest) =
        read(state.store.as_ref(), move |tx| {
            let controls = tx.list_controls()?;
            let alerts = tx.open_alert_count()?;
            let mut pending = Vec::new();
            for &network in &networks {
                pending.push((network, tx.pending_deposit_count(network)?));
            }
            let work = (
                tx.pending_withdrawal_count()?,
                tx.pending_swap_count()?,
                tx.open_sweep_count()?,
            );
            let webhooks = tx.count_webhook_events()?;
            let mut latest = Vec::new();
            for scope in Scope::ALL {
                latest.push((scope, tx.latest_reconciliation(scope)?));
            }
            Ok((controls, alerts, pending, work, webhooks, latest))
        })
        .await?;
    let (pending_withdrawals, pending_swaps, open_sweeps) = work;
    let assets = asset_figures(state).await?;
    let chains: Vec<_> = state
        .networks
        .iter()
        .map(|n| {
            let status = state
                .scan_status
                .get(&n.network)
                .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).clone())
                .unwrap_or_default();
            json!({
                "network": n.network,
                "configured": state.chains.contains_key(&n.network),
                "head_block": status.head_block,
                "scanned_block": status.scanned_block,
                "lag_blocks": status.lag_blocks(),
                "last_error": status.last_error,
                "failing_since": status.failing_since,
                "rpc_health": state.chains.get(&n.network).map(|c| c.endpoint_health()),
                "holdings_check": state
                    .holdings
                    .get(&n.network)
                    .map(|h| h.lock().unwrap_or_else(|p| p.into_inner()).clone()),
            })
        })
        .collect();
    // Every fixed key, then any automatic treasury_shortfall control that exists (on or off).
    let shortfalls = controls
        .iter()
        .map(|c| c.control_key.as_str())
        .filter(|k| reconcile::parse_shortfall_key(k).is_some());
    let controls_view: Vec<_> = admin::CONTROL_KEYS
        .iter()
        .copied()
        .chain(shortfalls)
        .map(|key| {
            let c = controls.iter().find(|c| c.control_key == key);
            json!({
                "control_key": key,
                "enabled": c.is_some_and(|c| c.enabled),
                "reason": c.map(|c| c.reason.clone()),
                "updated_by": c.map(|c| c.updated_by.clone()),
                "updated_at": c.map(|c| c.updated_at),
            })
        })
        .collect();
    let reconciliations: serde_json::Map<_, _> = latest
        .into_iter()
        .map(|(scope, run)| (scope.as_str().to_owned(), json!(run)))
        .collect();
    Ok(Reply::json(
        200,
        &json!({
            "chains": chains,
            "controls": controls_view,
            "pending_deposits": pending.iter().map(|(n, c)| json!({ "network": n, "count": c })).collect::<Vec<_>>(),
            "pending_withdrawals": pending_withdrawals,
            "pending_swaps": pending_swaps,
            "open_sweeps": open_sweeps,
            "webhooks": { "pending": webhooks.pending, "delivered": webhooks.delivered, "dead_lettered": webhooks.dead_lettered },
            "dead_lettered_webhooks": webhooks.dead_lettered,
            "open_alerts": alerts,
            "assets": assets,
            "reconciliations": reconciliations,
        }),
    ))
}

/// Per catalog asset: what the ledger owes users against the on-chain treasury holdings (hot
/// wallet + deposit addresses), read now through `treasury::rows` (the figures TREASURY
/// reconciliation decides on). A network whose holdings cannot be read says why.
async fn asset_figures(state: &AppState) -> CoreResult<Vec<serde_json::Value>> {
    let rows = custody_core::treasury::rows_of(
        &state.hot_wallet_sets(),
        &state.chains,
        &state.catalog,
        state.store.as_ref(),
    )
    .await?;
    // For networks without a hot wallet row.
    let liabilities = read(state.store.as_ref(), |tx| Ok(admin::user_liabilities(tx)?)).await?;
    Ok(state
        .catalog
        .all()
        .iter()
        .map(|a| {
            let f = rows
                .iter()
                .flat_map(|r| &r.assets)
                .find(|f| f.network == a.network && f.asset == a.code);
            match f {
                Some(f) => json!({
                    "network": a.network,
                    "asset": a.code,
                    "ledger_liabilities_units": f.user_liabilities_units,
                    "onchain_treasury_units": f.onchain_units(),
                    "hot_wallet_units": f.hot_wallet_units,
                    "deposit_addresses_units": f.deposit_addresses_units,
                    "in_transit_units": f.in_transit_units,
                    "pending_outgoing_units": f.pending_outgoing_units,
                    "onchain_treasury_error": (!f.errors.is_empty()).then(|| f.errors.join("; ")),
                }),
                // No hot wallet for the network: nothing on chain to compare with.
                None => json!({
                    "network": a.network,
                    "asset": a.code,
                    "ledger_liabilities_units": liabilities.get(&a.id()).copied().unwrap_or_default(),
                    "onchain_treasury_units": null,
                    "onchain_treasury_error": "no hot wallet for this network",
                }),
            }
        })
        .collect())
}

/// `GET /v1/metrics`: the counters kept as requests and deliveries happen, with the gauges
/// read now: scanner positions from the scanners' status, queue depths from one store snapshot.
pub async fn metrics(state: &AppState) -> CoreResult<Reply> {
    let networks: Vec<_> = state.networks.iter().map(|n| n.network).collect();
    let (webhooks, withdrawals, swaps, sweeps, alerts, outgoing) =
        read(state.store.as_ref(), move |tx| {
            let mut outgoing = Vec::new();
            for &network in &networks {
                outgoing.push((network, tx.unfinished_outgoing_count(network)?));
            }
            Ok((
                tx.count_webhook_events()?,
                tx.pending_withdrawal_count()?,
                tx.pending_swap_count()?,
                tx.open_sweep_count()?,
                tx.open_alert_count()?,
                outgoing,
            ))
        })
        .await?;
    let m = &state.metrics;
    for (network, status) in &state.scan_status {
        let s = status.lock().unwrap_or_else(|p| p.into_inner()).clone();
        m.set_scanner(network.as_str(), s.scanned_block, s.lag_blocks());
    }
    for (queue, depth) in [
        ("outbox_pending", webhooks.pending),
        ("webhooks_dead_lettered", webhooks.dead_lettered),
        ("withdrawals_pending", withdrawals),
        ("swaps_pending", swaps),
        ("sweeps_open", sweeps),
        ("alerts_open", alerts),
    ] {
        m.set_queue(queue, depth);
    }
    for (network, n) in outgoing {
        m.set_outgoing(network.as_str(), n);
    }
    Ok(Reply::raw_json(200, m.encode().into_bytes())
        .with_header("content-type", crate::metrics::CONTENT_TYPE))
}
