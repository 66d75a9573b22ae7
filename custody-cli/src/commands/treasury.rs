//! `custody treasury show` (decisions §11): each network's hot wallets (the active one, and
//! any a rotation retired), their on-chain balances of every catalog asset, what is on its way
//! out of them, and the next nonce the store would hand out (BSC); the same rows as
//! `/admin/treasuries` (`custody_core::treasury`).
//!
//! `custody treasury rotate` (issue 31, F4): a new hot wallet under the newest seed, the old
//! one retired and drained into it (`custody_core::wallet::hot`).

use clap::Args;
use custody_core::amount::Amount;
use custody_core::keys::derive_address;
use custody_core::outgoing::OutgoingTx;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::sender::Payment;
use custody_core::ports::store::{read, write};
use custody_core::ports::{ChainSender, ChainSource, Clock, Signer, Store};
use custody_core::wallet::hot::{self, DrainAsset, RotationRequest};
use custody_core::withdrawal::HotWallet;
use custody_core::{AssetCatalog, Network};
use custody_runtime::system::{OsEntropy, SystemClock};
use serde_json::json;

use crate::datadir::DataDir;
use crate::hot_wallets::{first_hot_wallet, hot_wallet_sets};
use crate::support::{open_store, print_json, runtime};

#[derive(Debug, Args)]
pub struct RotateArgs {
    /// BSC or TRON.
    #[arg(long)]
    pub network: String,
    /// Why (written to the audit trail and the hot wallet's record).
    #[arg(long)]
    pub reason: String,
}

impl RotateArgs {
    fn network(&self) -> Result<Network, String> {
        self.network
            .parse()
            .map_err(|_| format!("--network: must be BSC or TRON (got {:?})", self.network))
    }
}

/// The network's chain reader and sender: a drain needs both.
fn endpoints(
    chains: &crate::chains::Chains,
    network: Network,
) -> Result<(&dyn ChainSource, &dyn ChainSender), String> {
    match (chains.sources.get(&network), chains.senders.get(&network)) {
        (Some(chain), Some(sender)) => Ok((chain.as_ref(), sender.as_ref())),
        _ => Err(format!(
            "no [{}] endpoint is configured: the drain needs the chain",
            network.as_str().to_lowercase()
        )),
    }
}

pub fn show(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = crate::seeds::load(store.as_ref(), &unlocked)?;
    drop(unlocked);
    let rt = runtime()?;
    let rows = rt.block_on(async {
        let sets = hot_wallet_sets(store.as_ref(), &signer).await?;
        let chains = crate::chains::build(&config, &catalog)?;
        custody_core::treasury::rows_of(&sets, &chains.sources, &catalog, store.as_ref())
            .await
            .map_err(|e| format!("cannot read the treasury: {e}"))
    });
    store.close();
    print_json(&json!({ "data": rows? }))
}

pub fn rotate(dir: &DataDir, args: &RotateArgs) -> Result<(), String> {
    let network = args.network()?;
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    // Held until the rotation is recorded: a running service keeps paying from the hot wallet
    // it derived at start, which the drain would leave short.
    let _serving = dir.lock_for_serve().map_err(|e| {
        format!("{e}: stop every `custody serve` of this store before rotating its hot wallet")
    })?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = std::sync::Arc::new(crate::seeds::load(store.as_ref(), &unlocked)?);
    drop(unlocked);
    let result = runtime()?.block_on(async {
        let chains = crate::chains::build(&config, &catalog)?;
        let (chain, sender) = endpoints(&chains, network)?;
        rotate_with(
            store.as_ref(),
            std::sync::Arc::clone(&signer),
            (chain, sender),
            &catalog,
            network,
            args,
        )
        .await
    });
    store.close();
    print_json(&result?)
}

/// `custody treasury drain`: every retired hot wallet of the network that holds something
/// beyond what its unfinished payments need is drained into the active one. Runs beside
/// `custody serve` (which sends the transfers): the write refuses a plan whose wallet's
/// unfinished payments changed meanwhile.
pub fn drain(dir: &DataDir, args: &RotateArgs) -> Result<(), String> {
    let network = args.network()?;
    if args.reason.trim().is_empty() {
        return Err("--reason: must not be empty (it is written to the audit trail)".into());
    }
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = crate::seeds::load(store.as_ref(), &unlocked)?;
    drop(unlocked);
    let result: Result<serde_json::Value, String> = runtime()?.block_on(async {
        let chains = crate::chains::build(&config, &catalog)?;
        let (chain, sender) = endpoints(&chains, network)?;
        let set = hot_wallet_sets(store.as_ref(), &signer)
            .await?
            .remove(&network)
            .ok_or_else(|| format!("no {network} hot wallet"))?;
        let mut drained = Vec::new();
        // Each retired wallet on its own: one that cannot be drained now does not hide what
        // was recorded for the others.
        for old in &set.retired {
            let outcome = drain_one(
                store.as_ref(),
                (chain, sender),
                &catalog,
                (old, &set.active),
                args,
            )
            .await;
            drained.push(match outcome {
                Ok(done) => done,
                Err(e) => json!({ "retired": old.address, "error": e }),
            });
        }
        Ok(json!({
            "network": network,
            "active": set.active.address,
            "retired": drained,
        }))
    });
    store.close();
    let result = result?;
    print_json(&result)?;
    let failed = result["retired"]
        .as_array()
        .is_some_and(|r| r.iter().any(|w| w.get("error").is_some()));
    if failed {
        return Err(
            "the drain of at least one retired hot wallet was not recorded (see \"error\")".into(),
        );
    }
    Ok(())
}

/// Plans and records the drain of retired wallet `old` into `active`: what it planned and what
/// it left, and why.
async fn drain_one(
    store: &dyn Store,
    (chain, sender): (&dyn ChainSource, &dyn ChainSender),
    catalog: &AssetCatalog,
    (old, active): (&HotWallet, &HotWallet),
    args: &RotateArgs,
) -> Result<serde_json::Value, String> {
    let network = args.network()?;
    let (plan, seen) = plan_drain_of(
        store,
        (chain, sender),
        catalog,
        network,
        old,
        &active.address,
    )
    .await?;
    let left: Vec<_> = plan
        .left
        .iter()
        .map(|(asset, why)| json!({ "asset": asset, "why": why }))
        .collect();
    let fundings = if plan.transfers.is_empty() {
        Vec::new()
    } else {
        let request = hot::DrainRequest {
            network,
            actor: crate::support::cli_actor(),
            reason: args.reason.clone(),
        };
        let (old_w, new_w, now) = (old.clone(), active.clone(), SystemClock.now());
        write(store, move |tx| {
            let mut next = || new_uuid(&OsEntropy);
            hot::drain_retired(tx, &mut next, (&old_w, &new_w), &request, &plan, &seen, now)
        })
        .await
        .map_err(|e| format!("the drain was not recorded: {e}"))?
    };
    Ok(json!({
        "retired": old.address,
        "drain": fundings.iter().map(|f| f.view()).collect::<Vec<_>>(),
        "left": left,
    }))
}

/// What the rotation reads before its one write: the old wallet's balances, its unfinished
/// payments and the prices of the drain's transfers.
async fn rotate_with(
    store: &dyn Store,
    signer: std::sync::Arc<custody_core::keys::SeedSet>,
    (chain, sender): (&dyn ChainSource, &dyn ChainSender),
    catalog: &AssetCatalog,
    network: Network,
    args: &RotateArgs,
) -> Result<serde_json::Value, String> {
    let sets = hot_wallet_sets(store, signer.as_ref()).await?;
    let old = sets[&network].active.clone();
    let first = first_hot_wallet(signer.as_ref(), network)?;
    // The account the rotation will take (checked again in its write).
    let account = read(store, |tx| Ok(tx.next_account()?))
        .await
        .map_err(|e| format!("cannot read the account allocator: {e}"))?;
    let new_address = address_at(signer.as_ref(), network, account)?;
    let (plan, seen) =
        plan_drain_of(store, (chain, sender), catalog, network, &old, &new_address).await?;
    let request = RotationRequest {
        network,
        expected_old: old,
        first,
        actor: crate::support::cli_actor(),
        reason: args.reason.clone(),
    };
    let now = SystemClock.now();
    let ids = [new_uuid(&OsEntropy), new_uuid(&OsEntropy)];
    let plan_for_write = plan.clone();
    let (old, new, fundings) = write(store, move |tx| {
        let (old, new) = hot::rotate(tx, signer.as_ref(), ids, &request, now)?;
        if new.address != new_address {
            return Err(custody_core::error::Refusal::new(
                custody_core::error::ErrorCode::ValidationFailed,
                "the account allocator moved while the rotation was prepared: run it again",
            )
            .into());
        }
        let mut next = || new_uuid(&OsEntropy);
        let fundings = hot::create_drain(
            tx,
            &mut next,
            (&old, &new),
            network,
            &plan_for_write,
            &seen,
            now,
        )?;
        Ok((old, new, fundings))
    })
    .await
    .map_err(|e| format!("the rotation was not recorded: {e}"))?;
    Ok(json!({
        "network": network,
        "retired": { "address": old.address, "derivation_path": old.path.render() },
        "active": { "address": new.address, "derivation_path": new.path.render() },
        "drain": fundings.iter().map(|f| f.view()).collect::<Vec<_>>(),
        "left": plan.left.iter().map(|(asset, why)| json!({ "asset": asset, "why": why })).collect::<Vec<_>>(),
        "next": "restart `custody serve`: it pays from the new hot wallet and sends the drain",
    }))
}

/// What draining hot wallet `old` into `new_address` moves: read from the chain (balances,
/// prices) and the store (`old`'s unfinished payments, returned as the ids the write checks
/// again), planned by `hot::plan_drain`.
async fn plan_drain_of(
    store: &dyn Store,
    (chain, sender): (&dyn ChainSource, &dyn ChainSender),
    catalog: &AssetCatalog,
    network: Network,
    old: &HotWallet,
    new_address: &str,
) -> Result<(hot::DrainPlan, Vec<uuid::Uuid>), String> {
    let new_address = new_address.to_owned();
    let from = old.address.clone();
    let in_flight: Vec<OutgoingTx> = read(store, move |tx| {
        Ok(tx
            .outgoing_in_flight(network, &from)?
            .into_iter()
            .filter(|o| !o.status.is_terminal())
            .collect())
    })
    .await
    .map_err(|e| format!("cannot read the old hot wallet's payments: {e}"))?;
    let pending = custody_core::treasury::pending_outgoing(catalog, network, &in_flight);
    let mut in_flight_fees = Amount::ZERO;
    for o in &in_flight {
        let fee = sender
            .price(&old.address, &o.payment)
            .await
            .map_err(|e| format!("cannot price payment {}: {e}", o.id))?;
        in_flight_fees = in_flight_fees
            .checked_add(fee.max_native)
            .unwrap_or(Amount::MAX);
    }
    let mut native = None;
    let mut tokens = Vec::new();
    for asset in catalog.of_network(network) {
        let balance = chain
            .balance(&old.address, asset)
            .await
            .map_err(|e| format!("cannot read the old hot wallet's {}: {e}", asset.code))?;
        let spendable = balance
            .units
            .checked_sub(balance.staked_units)
            .unwrap_or(Amount::ZERO);
        let pending_units = pending
            .iter()
            .find(|p| p.asset == asset.code)
            .map_or(Amount::ZERO, |p| p.units);
        // A token priced with what it holds (the node estimates the real transfer); the
        // native coin with one unit (the estimate must not fail on the fee it leaves).
        let is_native = asset.contract.is_none();
        let probe = if is_native {
            Amount::from_units(1)
        } else {
            spendable.max(Amount::from_units(1))
        };
        let payment = Payment::transfer(asset, &new_address, probe);
        let has_tokens = !is_native && !spendable.is_zero();
        let max_fee = if is_native || has_tokens {
            sender
                .price(&old.address, &payment)
                .await
                .map_err(|e| format!("cannot price the drain of {}: {e}", asset.code))?
                .max_native
        } else {
            Amount::ZERO
        };
        let facts = DrainAsset {
            asset: asset.clone(),
            spendable,
            pending: pending_units,
            max_fee,
        };
        if is_native {
            native = Some(facts);
        } else {
            tokens.push(facts);
        }
    }
    let native = native.ok_or_else(|| format!("the catalog has no {network} native coin"))?;
    let plan = hot::plan_drain(&native, &tokens, in_flight_fees).map_err(|r| r.message)?;
    Ok((plan, in_flight.iter().map(|o| o.id).collect()))
}

fn address_at(signer: &dyn Signer, network: Network, account: u32) -> Result<String, String> {
    let (pubkey, chain_code) = signer
        .external_chain_public_key(network, account)
        .map_err(|e| format!("cannot derive account {account}: {e}"))?;
    derive_address(network, &pubkey, &chain_code, 0)
        .map(|(a, _)| a)
        .map_err(|e| format!("cannot derive account {account}: {e}"))
}
