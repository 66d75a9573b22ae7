//! `custody ledger adjust`: an operator's correction, printed as the ledger transaction.

use custody_core::adjustment::{self, AdjustmentIds, AdjustmentRequest};
use custody_core::asset::AssetLookup;
use custody_core::deposit::repair::{self, RepairRequest, SettleRequest, Settlement};
use custody_core::ledger::{Direction, LedgerTx};
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::{read, write};
use custody_core::ports::Clock;
use custody_core::{Amount, Network};
use custody_runtime::system::{OsEntropy, SystemClock};
use serde_json::json;

use crate::datadir::DataDir;
use crate::support::{open_store, print_json, refusal_text, runtime};
use crate::{AdjustArgs, SettleOwedArgs};

pub fn ledger_tx_json(t: &LedgerTx) -> serde_json::Value {
    json!({
        "id": t.id,
        "kind": t.kind.as_str(),
        "reference_type": t.reference_type.as_str(),
        "reference_id": t.reference_id,
        "created_at": t.created_at,
        "entries": t.entries.iter().map(|e| json!({
            "id": e.id,
            "account": e.account.storage_id(),
            "direction": e.direction.as_str(),
            "phase": e.phase.as_str(),
            "amount_units": e.amount,
            "balance_after_units": e.balance_after,
        })).collect::<Vec<_>>(),
    })
}

pub fn adjust(dir: &DataDir, args: &AdjustArgs) -> Result<(), String> {
    let network: Network = args
        .network
        .parse()
        .map_err(|e| format!("--network: {e}"))?;
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    match catalog.lookup(network, &args.asset) {
        AssetLookup::Found(_) => {}
        AssetLookup::OtherNetwork(n) => {
            return Err(format!(
                "{} is an asset of {n}, not of {network}",
                args.asset
            ))
        }
        AssetLookup::Unknown => return Err(format!("{} is not in the catalog", args.asset)),
    }
    let amount =
        Amount::parse_units(&args.amount_units).map_err(|e| format!("--amount-units {e}"))?;
    let direction = if args.credit {
        Direction::Credit
    } else {
        Direction::Debit
    };
    let actor = format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".into())
    );
    let req = AdjustmentRequest {
        tenant: custody_core::TenantId::parse(&args.tenant)
            .map_err(|e| format!("--tenant: {e}"))?,
        external_user_id: args.external_user_id.clone(),
        network,
        asset: args.asset.clone(),
        direction,
        amount,
        reason: args.reason.clone(),
        actor,
    };
    let ids = AdjustmentIds {
        audit: new_uuid(&OsEntropy),
        ledger_tx: new_uuid(&OsEntropy),
        event: new_uuid(&OsEntropy),
    };
    let (store, _) = open_store(dir, &config)?;
    let now = SystemClock.now();
    let posted = runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            adjustment::execute(tx, ids, &req, now)
        }))
        .map_err(|e| match e {
            custody_core::CoreError::Refused(r) => refusal_text(&r),
            other => format!("the adjustment failed: {other}"),
        })?;
    store.close();
    print_json(&ledger_tx_json(&posted))
}

/// Re-derives every balance from the entries and prints the report; exits non-zero when the
/// ledger does not balance, so it can gate scripts.
pub fn reconcile(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, _) = open_store(dir, &config)?;
    let report = runtime()?
        .block_on(read(store.as_ref(), |tx| {
            Ok(custody_core::ledger::reconcile(tx)?)
        }))
        .map_err(|e| format!("reconciliation failed: {e}"))?;
    store.close();
    print_json(&json!({
        "balanced": report.balanced,
        "accounts": report.accounts,
        "transactions": report.transactions,
        "holds": report.holds,
        "discrepancies": report.discrepancies,
    }))?;
    if report.balanced {
        Ok(())
    } else {
        Err("the ledger does not balance".into())
    }
}

/// `custody ledger repair-treasury-deposits`: every network, batch after batch, each batch one
/// write transaction (`custody_core::deposit::repair`). Prints every deposit it changed (or
/// would change, with `--dry-run`).
pub fn repair_treasury_deposits(dir: &DataDir, dry_run: bool) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = crate::seeds::load(store.as_ref(), &unlocked)?;
    drop(unlocked);
    let actor = format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".into())
    );
    let rt = runtime()?;
    let mut repaired = Vec::new();
    for network in Network::ALL {
        let request = RepairRequest {
            network,
            hot_wallets: hot_wallets_of(&signer)?
                .into_iter()
                .filter(|h| h.network() == network)
                .collect(),
            dry_run,
            actor: actor.clone(),
        };
        let mut after = None;
        loop {
            let (request, now) = (request.clone(), SystemClock.now());
            let batch = rt
                .block_on(write(store.as_ref(), move |tx| {
                    repair::repair_treasury_deposits(tx, &OsEntropy, &request, after, now)
                }))
                .map_err(|e| format!("the {network} repair failed: {e}"))?;
            repaired.extend(batch.repaired);
            match batch.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    store.close();
    print_json(&json!({ "dry_run": dry_run, "data": repaired }))
}

/// `custody ledger settle-owed`: prints what was settled and what is still owed.
pub fn settle_owed(dir: &DataDir, args: &SettleOwedArgs) -> Result<(), String> {
    let config = dir.load_config()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = crate::seeds::load(store.as_ref(), &unlocked)?;
    drop(unlocked);
    let hot_wallets = hot_wallets_of(&signer)?;
    let request = SettleRequest {
        tenant: custody_core::TenantId::parse(&args.tenant)
            .map_err(|e| format!("--tenant: {e}"))?,
        hot_wallets,
        deposit_id: args
            .deposit_id
            .parse()
            .map_err(|e| format!("--deposit-id: {e}"))?,
        how: if args.write_off {
            Settlement::WriteOff
        } else {
            Settlement::FromUser
        },
        reason: args.reason.clone(),
        actor: format!(
            "cli:{}",
            std::env::var("USER").unwrap_or_else(|_| "operator".into())
        ),
    };
    let now = SystemClock.now();
    let settled = runtime()?
        .block_on(write(store.as_ref(), move |tx| {
            repair::settle_owed(tx, &OsEntropy, &request, now)
        }))
        .map_err(|e| match e {
            custody_core::CoreError::Refused(r) => refusal_text(&r),
            other => format!("the settlement failed: {other}"),
        })?;
    store.close();
    print_json(&json!(settled))
}

/// Every network's hot wallet, as the deposit rules compare senders with it.
fn hot_wallets_of(
    signer: &dyn custody_core::ports::Signer,
) -> Result<Vec<custody_core::chain::ChainAddress>, String> {
    Network::ALL
        .into_iter()
        .map(|network| {
            let hot = custody_core::wallet::hot_wallet_address(signer, network)
                .map_err(|e| format!("cannot derive the {network} hot wallet: {e}"))?;
            custody_core::chain::ChainAddress::parse(network, &hot)
                .map_err(|e| format!("the {network} hot wallet address {hot}: {e}"))
        })
        .collect()
}
