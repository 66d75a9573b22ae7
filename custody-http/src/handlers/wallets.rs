//! Wallets: create (idempotent), read, balances (ledger and on-chain apart), history.

use std::time::Duration;

use custody_core::error::{CoreResult, Refusal};
use custody_core::idempotency::StoredResponse;
use custody_core::ledger::{self, UserAccount};
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::read;
use custody_core::wallet::{self, Wallet};
use custody_core::{Amount, AssetId, Network};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::dispatch::Call;
use crate::fence::read_quick_fenced;
use crate::idempotent;
use crate::input::{self, Fields};
use crate::reply::Reply;
use crate::state::AppState;

/// How long the balances endpoint waits for a chain before answering without it.
pub const ONCHAIN_TIMEOUT_MS: u64 = 3_000;

fn parse_network(fields: &mut Fields, map: &serde_json::Map<String, Value>) -> Option<Network> {
    let raw = fields.string(map, "network", 16)?;
    match raw.parse::<Network>() {
        Ok(n) => Some(n),
        Err(_) => {
            fields.issue("network", "must be BSC or TRON");
            None
        }
    }
}

pub async fn create(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let map = input::json_object(&call.body)?;
    let mut fields = Fields::new();
    fields.no_unknown(&map, &["external_user_id", "network"]);
    let user = fields.string(&map, "external_user_id", wallet::EXTERNAL_USER_ID_CHARS_MAX);
    let network = parse_network(&mut fields, &map);
    fields.finish()?;
    let (Some(user), Some(network)) = (user, network) else {
        unreachable!("finish() refuses missing fields")
    };

    let signer = std::sync::Arc::clone(&state.signer);
    let watch = std::sync::Arc::clone(&state.watch);
    let ids = [
        new_uuid(state.entropy.as_ref()),
        new_uuid(state.entropy.as_ref()),
    ];
    let tenant = call.credential().tenant.clone();
    idempotent::run(state, call, 409, move |tx, now| {
        let created =
            wallet::create_wallet(tx, signer.as_ref(), ids, &tenant, &user, network, now)?;
        // Watched from inside the command, not after it: a client that disconnects once the
        // commit is done must not leave an address unwatched, its deposits skipped for good.
        // Watching before the commit is harmless: a transfer to an address without a
        // committed wallet finds no wallet and is not a deposit.
        watch.extend(network, [created.wallet.address.clone()]);
        Ok(StoredResponse {
            status: 201,
            body: serde_json::to_vec(&created.wallet.view()).expect("a wallet serializes"),
        })
    })
    .await
}

/// The caller's wallet by path id; a malformed id or another tenant's wallet is a 404, exactly
/// like a missing one.
pub async fn load(state: &AppState, call: &Call) -> CoreResult<Wallet> {
    let not_found = || Refusal::not_found("wallet");
    let id = Uuid::parse_str(&call.params[0]).map_err(|_| not_found())?;
    let tenant = call.credential().tenant.clone();
    read_quick_fenced(state.store.as_ref(), &call.fence, move |tx| {
        Ok(tx.wallet_by_id(&tenant, id)?)
    })
    .await?
    .ok_or_else(|| not_found().into())
}

pub async fn get(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let w = load(state, call).await?;
    Ok(Reply::json(200, &w.view()))
}

pub async fn balances(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let not_found = || Refusal::not_found("wallet");
    let id = Uuid::parse_str(&call.params[0]).map_err(|_| not_found())?;
    let tenant = call.credential().tenant.clone();
    // Every network's asset codes, so that one read finds the wallet and its figures.
    let catalog: Vec<(Network, String)> = Network::ALL
        .iter()
        .flat_map(|&n| {
            state
                .catalog
                .of_network(n)
                .map(move |a| (n, a.code.clone()))
        })
        .collect();
    let found = read_quick_fenced(state.store.as_ref(), &call.fence, move |tx| {
        let Some(w) = tx.wallet_by_id(&tenant, id)? else {
            return Ok(None);
        };
        let codes: Vec<String> = catalog
            .iter()
            .filter(|(n, _)| *n == w.network)
            .map(|(_, code)| code.clone())
            .collect();
        let accounts: Vec<UserAccount> = codes
            .iter()
            .map(|code| {
                UserAccount::new(
                    w.tenant.clone(),
                    w.external_user_id.clone(),
                    AssetId::new(w.network, code.clone()),
                )
            })
            .collect();
        let balances = ledger::user_balances(tx, &accounts)?;
        let pending =
            tx.pending_deposit_units_of(&w.tenant, &w.external_user_id, w.network, &codes)?;
        if pending.len() != codes.len() {
            return Err(custody_core::error::PortError::permanent(
                "store",
                "pending deposits: one figure per asset expected",
            )
            .into());
        }
        Ok(Some((
            w,
            balances.into_iter().zip(pending).collect::<Vec<_>>(),
        )))
    })
    .await?;
    let (w, ledger_figures) = found.ok_or_else(not_found)?;
    let assets: Vec<_> = state.catalog.of_network(w.network).cloned().collect();

    let chain = state.chains.get(&w.network).cloned();
    // One deadline for all assets: a hanging node costs the caller 3 s, not 3 s per asset.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ONCHAIN_TIMEOUT_MS);
    let mut balances = Vec::with_capacity(assets.len());
    for (asset, (ledger_balance, pending)) in assets.iter().zip(ledger_figures) {
        let (onchain, onchain_error) = match &chain {
            None => (
                None,
                Some(format!("no {} endpoint is configured", w.network)),
            ),
            Some(chain) => {
                let call = chain.balance(&w.address, asset);
                match tokio::time::timeout_at(deadline, call).await {
                    Ok(Ok(b)) => (
                        Some(OnchainView {
                            block_number: b.block_number,
                            units: b.units,
                        }),
                        None,
                    ),
                    Ok(Err(e)) => {
                        tracing::warn!(wallet_id = %w.id, error = %e, "on-chain balance failed");
                        (
                            None,
                            Some(format!("the {} node could not be reached", w.network)),
                        )
                    }
                    Err(_) => (
                        None,
                        Some(format!("the {} node did not answer in time", w.network)),
                    ),
                }
            }
        };
        balances.push(AssetBalanceView {
            asset: &asset.code,
            decimals: asset.decimals,
            ledger: LedgerView {
                available_units: ledger_balance.available,
                pending_units: pending,
                reserved_units: ledger_balance.reserved,
            },
            onchain,
            onchain_error,
        });
    }
    Ok(Reply::json(
        200,
        &BalancesView {
            address: &w.address,
            balances,
            network: w.network,
            wallet_id: w.id,
        },
    ))
}

// The balances answer, rendered straight from these (no intermediate JSON tree); fields in
// alphabetical order, the order the answer has always had.
#[derive(Serialize)]
struct BalancesView<'a> {
    address: &'a str,
    balances: Vec<AssetBalanceView<'a>>,
    network: Network,
    wallet_id: Uuid,
}

#[derive(Serialize)]
struct AssetBalanceView<'a> {
    asset: &'a str,
    decimals: u8,
    ledger: LedgerView,
    onchain: Option<OnchainView>,
    onchain_error: Option<String>,
}

#[derive(Serialize)]
struct LedgerView {
    available_units: Amount,
    pending_units: Amount,
    reserved_units: Amount,
}

#[derive(Serialize)]
struct OnchainView {
    block_number: u64,
    units: Amount,
}

pub async fn transactions(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let limit = input::limit(&call.query)?;
    let w = load(state, call).await?;
    let page = read(state.store.as_ref(), move |tx| {
        Ok(ledger::history(
            tx,
            &w.tenant,
            &w.external_user_id,
            w.network,
            limit,
        )?)
    })
    .await?;
    Ok(Reply::json(200, &page))
}
