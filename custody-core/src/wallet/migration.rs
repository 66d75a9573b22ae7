//! Wallet migrations (decisions §13): after a suspected key compromise, every wallet of a
//! tenant (on one network, or all) moves to a new address under a new account index of the
//! tenant, taken from the global allocator. The wallet keeps its id and user; its old address
//! stays watched, is matched to the wallet, and is swept with its own key by the sweeper.
//!
//! Each moved wallet gets a migration record: `planned` → `sweeping` (the old address still
//! holds an asset above its sweep minimum) → `completed` (nothing left above the minimums and
//! no open sweep) | `failed` (the old address's key cannot be derived from the seed, so
//! nothing can ever be swept from it). An old address that holds nothing worth sweeping moves
//! from `planned` straight to `completed`.

use serde::Serialize;
use uuid::Uuid;

use crate::admin::AuditRecord;
use crate::error::{CoreError, CoreResult, ErrorCode, PortError, Refusal};
use crate::keys::derive_address;
use crate::network::Network;
use crate::ports::signer::{HdPath, Signer};
use crate::ports::store::WriteTx;
use crate::tenant::TenantId;
use crate::time::Timestamp;

use super::HOT_WALLET_ACCOUNT;

stored_enum! {
    /// States of a wallet migration.
    MigrationStatus {
        Planned => "planned",
        Sweeping => "sweeping",
        Completed => "completed",
        Failed => "failed",
    }
    moves {
        Planned => Sweeping,
        Planned => Completed,
        Planned => Failed,
        Sweeping => Completed,
        Sweeping => Failed,
    }
}

impl MigrationStatus {
    pub const fn is_open(self) -> bool {
        matches!(self, MigrationStatus::Planned | MigrationStatus::Sweeping)
    }
}

/// One step of a migration's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct MigrationStep {
    pub status: String,
    pub at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// One wallet moved from an old address to a new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletMigration {
    pub id: Uuid,
    pub tenant: TenantId,
    pub wallet_id: Uuid,
    pub network: Network,
    pub external_user_id: String,
    pub old_address: String,
    pub old_path: HdPath,
    pub new_address: String,
    pub new_path: HdPath,
    /// The operator's reason, as written to the audit trail.
    pub reason: String,
    pub status: MigrationStatus,
    pub history: Vec<MigrationStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The row `/admin/wallet-migrations` lists and `custody wallets migrate` prints.
#[derive(Debug, Serialize)]
pub struct MigrationView {
    pub id: Uuid,
    pub tenant: TenantId,
    pub wallet_id: Uuid,
    pub network: Network,
    pub external_user_id: String,
    pub old_address: String,
    pub old_derivation_path: String,
    pub new_address: String,
    pub new_derivation_path: String,
    pub reason: String,
    pub status: MigrationStatus,
    pub history: Vec<MigrationStep>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl WalletMigration {
    pub fn view(&self) -> MigrationView {
        MigrationView {
            id: self.id,
            tenant: self.tenant.clone(),
            wallet_id: self.wallet_id,
            network: self.network,
            external_user_id: self.external_user_id.clone(),
            old_address: self.old_address.clone(),
            old_derivation_path: self.old_path.render(),
            new_address: self.new_address.clone(),
            new_derivation_path: self.new_path.render(),
            reason: self.reason.clone(),
            status: self.status,
            history: self.history.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Moves to `next` with a history step. Refuses an illegal move.
    pub fn transition(
        &mut self,
        next: MigrationStatus,
        detail: impl Into<String>,
        now: Timestamp,
    ) -> Result<(), String> {
        if !self.status.can_move_to(next) {
            return Err(format!(
                "wallet migration {} cannot move from {} to {}",
                self.id,
                self.status.as_str(),
                next.as_str()
            ));
        }
        self.status = next;
        self.updated_at = now;
        self.history.push(MigrationStep {
            status: next.as_str().to_owned(),
            at: now.to_rfc3339(),
            detail: detail.into(),
        });
        Ok(())
    }
}

pub trait MigrationRepo: MigrationReads {
    /// MUST fail if the id exists.
    fn insert_migration(&mut self, m: &WalletMigration) -> Result<(), PortError>;
    /// Replaces the status, history and `updated_at`. MUST fail if it does not exist.
    fn update_migration(&mut self, m: &WalletMigration) -> Result<(), PortError>;
}

pub trait MigrationReads {
    fn migration_by_id(&mut self, id: Uuid) -> Result<Option<WalletMigration>, PortError>;
    /// The migrations of `network` still `planned` or `sweeping`, oldest first.
    fn open_migrations(&mut self, network: Network) -> Result<Vec<WalletMigration>, PortError>;
    /// Every migration, newest first (`created_at`, then latest stored first).
    /// Every migration, a page at a time, newest first (`crate::page`).
    fn list_migrations(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<WalletMigration>, PortError>;
}

/// The tenants owning wallets on `network` (every network when `None`), each once, in the
/// order their first wallet was created: what `custody wallets migrate --all` walks.
pub fn tenants_with_wallets(
    tx: &mut dyn crate::ports::store::ReadTx,
    network: Option<Network>,
) -> Result<Vec<TenantId>, PortError> {
    let mut tenants: Vec<TenantId> = Vec::new();
    for w in tx.list_wallets(None, network)? {
        if !tenants.contains(&w.tenant) {
            tenants.push(w.tenant);
        }
    }
    Ok(tenants)
}

/// Moves every wallet of `tenant` on `network` (all of its networks when `None`) to a new
/// address under a fresh account index, in the caller's transaction: the tenant's new
/// account (later wallets are created under it), the moved wallets, one `planned` migration
/// per wallet and the audit record commit together. `ids` gives each new record its id.
/// A tenant without wallets there is left as it is (an empty answer).
#[allow(clippy::too_many_arguments)]
pub fn migrate_tenant(
    tx: &mut dyn WriteTx,
    signer: &dyn Signer,
    ids: &mut dyn FnMut() -> Uuid,
    tenant: &TenantId,
    network: Option<Network>,
    actor: &str,
    reason: &str,
    now: Timestamp,
) -> CoreResult<Vec<WalletMigration>> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Refusal::validation("reason", "must not be empty").into());
    }
    let wallets = tx.list_wallets(Some(tenant), network)?;
    if wallets.is_empty() {
        return Ok(Vec::new());
    }
    let old_account = tx.tenant_account(tenant)?;
    let account = tx.replace_tenant_account(tenant, now)?;
    // The last account index belongs to the hot wallets (decisions §11): never a tenant's.
    if account >= HOT_WALLET_ACCOUNT {
        return Err(Refusal::new(
            ErrorCode::InternalError,
            "no account index is left for a wallet migration",
        )
        .into());
    }
    // Derived from the seed generation the store says serves this account (a new seed
    // registered in this transaction by `seeds::register_seed`, or the current one).
    super::seeds::check_seed_loaded(tx, signer, account)?;
    let mut done = Vec::with_capacity(wallets.len());
    for w in wallets {
        let index = tx.take_address_index(tenant, w.network)?;
        if index > HdPath::COMPONENT_MAX {
            return Err(Refusal::new(
                ErrorCode::InternalError,
                "no derivation index is left for this tenant and network",
            )
            .into());
        }
        let (pubkey, chain_code) = signer.external_chain_public_key(w.network, account)?;
        let (address, _) = derive_address(w.network, &pubkey, &chain_code, index)
            .map_err(|e| PortError::permanent("signer", e.to_string()))?;
        tx.move_wallet(w.id, &address, account, index, now)?;
        let m = WalletMigration {
            id: ids(),
            tenant: tenant.clone(),
            wallet_id: w.id,
            network: w.network,
            external_user_id: w.external_user_id.clone(),
            old_address: w.address.clone(),
            old_path: w.path(),
            new_address: address,
            new_path: HdPath {
                network: w.network,
                account,
                index,
            },
            reason: reason.to_owned(),
            status: MigrationStatus::Planned,
            history: vec![MigrationStep {
                status: MigrationStatus::Planned.as_str().to_owned(),
                at: now.to_rfc3339(),
                detail: String::new(),
            }],
            created_at: now,
            updated_at: now,
        };
        tx.insert_migration(&m)?;
        done.push(m);
    }
    tx.append_audit(&AuditRecord {
        id: ids(),
        actor: actor.to_owned(),
        action: "wallets.migrate".into(),
        target: format!("tenant:{tenant}"),
        old_value: Some(serde_json::json!({ "account": old_account })),
        new_value: Some(serde_json::json!({
            "account": account,
            "seed_generation": signer.seed_generation(account),
            "network": network,
            "migrations": done.iter().map(|m| m.id).collect::<Vec<_>>(),
        })),
        reason: reason.to_owned(),
        created_at: now,
    })?;
    Ok(done)
}

/// What the sweeper saw of a migration's old address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldAddress {
    /// It holds an asset above its sweep minimum (named in the detail).
    Holds(String),
    /// It holds nothing above the sweep minimums.
    Empty,
    /// Its key cannot be derived from the seed: nothing can be swept from it, ever.
    KeyLost(String),
}

/// Checks that the seed still gives the key of the migration's old address: a seed changed
/// under the service would leave the old address's funds unsweepable.
pub fn old_key_available(signer: &dyn Signer, m: &WalletMigration) -> Result<(), String> {
    let (pubkey, chain_code) = signer
        .external_chain_public_key(m.network, m.old_path.account)
        .map_err(|e| format!("the key of {} cannot be derived: {e}", m.old_path.render()))?;
    let (address, _) = derive_address(m.network, &pubkey, &chain_code, m.old_path.index)
        .map_err(|e| format!("the key of {} cannot be derived: {e}", m.old_path.render()))?;
    if address != m.old_address {
        return Err(format!(
            "{} of the seed is {address}, not the old address {}: its key is not in this seed",
            m.old_path.render(),
            m.old_address
        ));
    }
    Ok(())
}

/// Moves an open migration on what the sweeper saw, in the caller's transaction; `None` when
/// nothing changed (or it was no longer open). An address with an open sweep is still being
/// swept, whatever its balances say now.
pub fn observe(
    tx: &mut dyn WriteTx,
    id: Uuid,
    seen: &OldAddress,
    now: Timestamp,
) -> CoreResult<Option<WalletMigration>> {
    let Some(mut m) = tx.migration_by_id(id)? else {
        return Ok(None);
    };
    if !m.status.is_open() {
        return Ok(None);
    }
    let open_sweep = tx.open_sweep_at(m.network, &m.old_address)?;
    let (next, detail) = match (seen, open_sweep) {
        (OldAddress::KeyLost(why), _) => (MigrationStatus::Failed, why.clone()),
        (OldAddress::Holds(what), _) => (MigrationStatus::Sweeping, what.clone()),
        (OldAddress::Empty, Some(s)) => (
            MigrationStatus::Sweeping,
            format!("sweep {} of {} is open", s.id, s.asset),
        ),
        (OldAddress::Empty, None) => (
            MigrationStatus::Completed,
            "the old address holds nothing above the sweep minimums".to_owned(),
        ),
    };
    if next == m.status {
        return Ok(None);
    }
    m.transition(next, detail, now)
        .map_err(CoreError::Invariant)?;
    tx.update_migration(&m)?;
    Ok(Some(m))
}

#[cfg(test)]
mod tests;
