//! `custody wallets migrate` (decisions §13): moves wallets to new addresses under a new account
//! index of their tenant, one store transaction per tenant, and prints the migrations. With
//! `--mnemonic-file`, the new accounts are derived from the seed in that file: it is sealed
//! with the data dir's key and registered (`wallet::seeds`) in the first tenant's transaction,
//! as the seed of every account allocated from then on.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use custody_core::keys::HdKeys;
use custody_core::ports::clock::new_uuid;
use custody_core::ports::store::{read, write};
use custody_core::ports::Clock;
use custody_core::wallet::migration::{migrate_tenant, tenants_with_wallets};
use custody_core::{Network, TenantId};
use custody_runtime::system::{OsEntropy, SystemClock};
use serde_json::json;

use crate::datadir::DataDir;
use crate::support::{open_store, print_json, runtime};

#[derive(Debug, Subcommand)]
pub enum WalletsCommand {
    /// Move wallets to new addresses under a new account index of their tenant; old addresses
    /// stay watched, credited and are swept (prints the migrations as JSON).
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["tenant", "all"])))]
pub struct MigrateArgs {
    /// Migrate this tenant's wallets.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Migrate every tenant's wallets.
    #[arg(long)]
    pub all: bool,
    /// Only wallets of this network (default: every network).
    #[arg(long)]
    pub network: Option<String>,
    /// Why (written to the audit trail).
    #[arg(long)]
    pub reason: String,
    /// Derive the new addresses from the BIP39 mnemonic in this file (a seed rotation)
    /// instead of the current seed; it is kept sealed like the first seed. Restart `serve`
    /// afterwards so that it signs with it.
    #[arg(long)]
    pub mnemonic_file: Option<PathBuf>,
}

pub fn run(dir: &DataDir, command: &WalletsCommand) -> Result<(), String> {
    match command {
        WalletsCommand::Migrate(args) => migrate(dir, args),
    }
}

fn migrate(dir: &DataDir, args: &MigrateArgs) -> Result<(), String> {
    let new_mnemonic = args
        .mnemonic_file
        .as_ref()
        .map(|path| crate::seeds::read_mnemonic_file(path))
        .transpose()?;
    let network: Option<Network> = args
        .network
        .as_deref()
        .map(|n| n.parse().map_err(|e| format!("--network: {e}")))
        .transpose()?;
    let tenant = args
        .tenant
        .as_deref()
        .map(|t| TenantId::parse(t).map_err(|e| format!("--tenant: {e}")))
        .transpose()?;
    if args.reason.trim().is_empty() {
        return Err("--reason must not be empty".into());
    }
    let actor = format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".into())
    );
    let config = dir.load_config()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let mut seeds = crate::seeds::load(store.as_ref(), &unlocked)?;
    // The new seed as the next generation, from the account the allocator hands out next;
    // `register_seed` checks in the transaction that nothing moved in between.
    let mut new_seed = None;
    if let Some(mnemonic) = &new_mnemonic {
        let (existing, next) = runtime()?
            .block_on(read(store.as_ref(), |tx| {
                Ok((tx.seeds()?.len(), tx.next_account()?))
            }))
            .map_err(|e| format!("cannot read the seeds: {e}"))?;
        let generation = u32::try_from(existing + 1).map_err(|e| e.to_string())?;
        let record = crate::seeds::seal(
            &unlocked,
            mnemonic,
            (generation, next),
            &OsEntropy,
            SystemClock.now(),
        )?;
        let keys = HdKeys::from_mnemonic(mnemonic).map_err(|e| e.to_string())?;
        seeds
            .add(generation, next, keys)
            .map_err(|e| e.to_string())?;
        new_seed = Some((record, crate::datadir::fingerprint(&unlocked.mnemonic)?));
    }
    let signer = std::sync::Arc::new(seeds);
    drop(unlocked);
    let rt = runtime()?;
    let result = rt.block_on(async {
        let tenants = match &tenant {
            Some(t) => vec![t.clone()],
            None => read(store.as_ref(), move |tx| {
                Ok(tenants_with_wallets(tx, network)?)
            })
            .await
            .map_err(|e| format!("cannot list the wallets: {e}"))?,
        };
        let mut migrated = Vec::new();
        let mut seed_imported = false;
        // One transaction per tenant: a tenant's wallets and its new account move together,
        // and a failure leaves the tenants already done migrated (their records say so).
        if tenants.is_empty() && new_seed.is_some() {
            return Err("no wallets to migrate: the new seed was not imported".to_string());
        }
        for t in tenants {
            let (signer, reason, actor) = (signer.clone(), args.reason.clone(), actor.clone());
            let now = SystemClock.now();
            // Registered with the first tenant's wallets: both commit or neither.
            let seed = new_seed.take();
            let done = write(store.as_ref(), move |tx| {
                if let Some((record, first)) = &seed {
                    custody_core::wallet::seeds::register_seed(tx, record, first)?;
                }
                let mut ids = || new_uuid(&OsEntropy);
                let moved = migrate_tenant(
                    tx,
                    signer.as_ref(),
                    &mut ids,
                    &t,
                    network,
                    &actor,
                    &reason,
                    now,
                )?;
                // A seed no wallet moves to is not imported (the transaction rolls back).
                if seed.is_some() && moved.is_empty() {
                    return Err(custody_core::error::Refusal::new(
                        custody_core::error::ErrorCode::ValidationFailed,
                        format!(
                            "tenant {t} has no wallets to migrate: the new seed was not imported"
                        ),
                    )
                    .into());
                }
                Ok(moved)
            })
            .await
            .map_err(|e| match e {
                custody_core::CoreError::Refused(r) => format!("{}: {}", r.code, r.message),
                other => format!("the migration failed: {other}"),
            });
            let done = match done {
                Ok(done) => done,
                Err(why) => return Err(stopped_part_way(why, &migrated, seed_imported)),
            };
            seed_imported |= new_mnemonic.is_some();
            migrated.extend(done);
        }
        Ok::<_, String>(migrated)
    });
    store.close();
    let migrated = result?;
    if let (Some(t), true) = (&tenant, migrated.is_empty()) {
        let on = network.map(|n| format!(" on {n}")).unwrap_or_default();
        return Err(format!("tenant {t} has no wallets{on}: nothing to migrate"));
    }
    if args.mnemonic_file.is_some() {
        eprintln!("{HOT_WALLETS_STAY}");
    }
    let data: Vec<_> = migrated.iter().map(|m| m.view()).collect();
    print_json(&json!({ "data": data }))
}

/// The error of a run that failed after some tenants were migrated (each tenant commits on
/// its own): what was done, and how to finish (the new seed, imported with the first tenant,
/// must not be given again).
fn stopped_part_way(
    why: String,
    migrated: &[custody_core::wallet::migration::WalletMigration],
    seed_imported: bool,
) -> String {
    if migrated.is_empty() {
        return why;
    }
    let done: Vec<_> = migrated.iter().map(|m| m.view()).collect();
    let again = if seed_imported {
        "the new seed is imported: run the command again without --mnemonic-file to migrate \
         the rest"
    } else {
        "run the command again to migrate the rest"
    };
    format!(
        "{why}\nalready migrated (kept): {}\n{again}",
        serde_json::to_string(&done).unwrap_or_default()
    )
}

/// Printed after a migration to a new seed: the hot wallets move only when rotated.
const HOT_WALLETS_STAY: &str = "warning: the hot wallets stay on the seed that derived them: a \
    migration to a new seed does not move them. If that seed is compromised, turn \
    kill_switch.sweeps on, stop `custody serve`, and run `custody treasury rotate --network N \
    --reason TEXT` for each network: a new hot wallet under the new seed, the old one drained \
    into it (`custody treasury show` lists both with their balances).";

#[cfg(test)]
mod tests {
    use super::*;
    use custody_core::ports::signer::HdPath;
    use custody_core::wallet::migration::{MigrationStatus, WalletMigration};

    fn moved(id: u128) -> WalletMigration {
        let path = |account| HdPath {
            network: Network::Bsc,
            account,
            index: 0,
        };
        let at = custody_core::time::Timestamp::from_unix_millis(0);
        WalletMigration {
            id: uuid::Uuid::from_u128(id),
            tenant: TenantId::parse("acme").unwrap(),
            wallet_id: uuid::Uuid::from_u128(id + 100),
            network: Network::Bsc,
            external_user_id: "alice".into(),
            old_address: "0x00000000000000000000000000000000000000bB".into(),
            old_path: path(0),
            new_address: "0x00000000000000000000000000000000000000cC".into(),
            new_path: path(1),
            reason: "r".into(),
            status: MigrationStatus::Planned,
            history: Vec::new(),
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn a_run_stopped_part_way_lists_what_it_kept_and_how_to_go_on() {
        // Nothing kept: the error as it is (the seed was not imported either).
        assert_eq!(stopped_part_way("boom".into(), &[], false), "boom");
        let kept = [moved(1)];
        let said = stopped_part_way("boom".into(), &kept, true);
        assert!(said.starts_with("boom\n"), "{said}");
        assert!(
            said.contains(&uuid::Uuid::from_u128(1).to_string()),
            "{said}"
        );
        assert!(said.contains("without --mnemonic-file"), "{said}");
        let plain = stopped_part_way("boom".into(), &kept, false);
        assert!(!plain.contains("--mnemonic-file"), "{plain}");
        assert!(plain.contains("run the command again"), "{plain}");
    }
}
