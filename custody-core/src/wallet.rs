//! HD deposit wallets: one per (tenant, external user, network). Each tenant gets one BIP44
//! account index, allocated once and never reused; each wallet of a tenant on a network takes
//! the next address index. Addresses are derived from the account's external-chain public key,
//! so creating a wallet never touches a private key.
//!
//! A wallet migration (decisions §13, [`migration`]) moves a wallet to a new address under a
//! new account of its tenant; the wallet keeps its id and user, and its earlier addresses stay
//! its own: watched, matched to it, and signed from with their own paths.

pub mod hot;
pub mod migration;
pub mod seeds;

use serde::Serialize;
use uuid::Uuid;

use crate::error::{CoreResult, ErrorCode, PortError, Refusal};
use crate::keys::derive_address;
use crate::network::Network;
use crate::outbox::{EventType, NewEvent};
use crate::ports::signer::{HdPath, Signer};
use crate::ports::store::WriteTx;
use crate::time::Timestamp;

/// Longest `external_user_id` (interface §2).
pub const EXTERNAL_USER_ID_CHARS_MAX: usize = 160;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wallet {
    pub id: Uuid,
    pub tenant: crate::tenant::TenantId,
    pub external_user_id: String,
    pub network: Network,
    pub address: String,
    pub account: u32,
    pub index: u32,
    pub created_at: Timestamp,
    /// Addresses the wallet had before its migrations, oldest first. Empty for a new wallet
    /// (`insert_wallet` ignores it: a wallet gets previous addresses only by moving).
    pub previous_addresses: Vec<PreviousAddress>,
}

/// An address a wallet held before a migration: still watched for deposits and swept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousAddress {
    pub address: String,
    pub account: u32,
    pub index: u32,
    pub retired_at: Timestamp,
}

#[derive(Debug, Serialize)]
pub struct PreviousAddressView<'a> {
    pub address: &'a str,
    pub derivation_path: String,
    pub retired_at: Timestamp,
}

impl Wallet {
    pub fn path(&self) -> HdPath {
        HdPath {
            network: self.network,
            account: self.account,
            index: self.index,
        }
    }

    /// The resource as `GET /wallets/{id}` shows it (decisions §3).
    pub fn view(&self) -> WalletView<'_> {
        WalletView {
            id: self.id,
            external_user_id: &self.external_user_id,
            network: self.network,
            address: &self.address,
            derivation_path: self.path().render(),
            previous_addresses: self
                .previous_addresses
                .iter()
                .map(|p| PreviousAddressView {
                    address: &p.address,
                    derivation_path: HdPath {
                        network: self.network,
                        account: p.account,
                        index: p.index,
                    }
                    .render(),
                    retired_at: p.retired_at,
                })
                .collect(),
            created_at: self.created_at,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct WalletView<'a> {
    pub id: Uuid,
    pub external_user_id: &'a str,
    pub network: Network,
    pub address: &'a str,
    pub derivation_path: String,
    pub previous_addresses: Vec<PreviousAddressView<'a>>,
    pub created_at: Timestamp,
}

/// Persistence of wallets and of the account and address index allocation.
pub trait WalletRepo: WalletReads {
    /// Allocates the next unused account index to `tenant`. MUST fail if it already has one.
    fn allocate_tenant_account(
        &mut self,
        tenant: &crate::tenant::TenantId,
        at: Timestamp,
    ) -> Result<u32, PortError>;
    /// Takes the next address index of (tenant, network); indexes are never handed out twice.
    fn take_address_index(
        &mut self,
        tenant: &crate::tenant::TenantId,
        network: Network,
    ) -> Result<u32, PortError>;
    /// MUST fail if (tenant, user, network) or the address already has a wallet (as its
    /// current or a previous address), or its path is another wallet's.
    fn insert_wallet(&mut self, wallet: &Wallet) -> Result<(), PortError>;
    /// Gives `tenant` a fresh account index from the same allocator as
    /// `allocate_tenant_account` (never reused), as its current account, and restarts its
    /// address indexes at 0: the account is new, so no path under it is taken. MUST fail if
    /// the tenant has no account.
    fn replace_tenant_account(
        &mut self,
        tenant: &crate::tenant::TenantId,
        at: Timestamp,
    ) -> Result<u32, PortError>;
    /// Moves wallet `wallet_id` to `address` at (`account`, `index`): its current address
    /// becomes a previous one retired at `at`, which stays in the watch set and keeps finding
    /// the wallet. The new address takes a new watch-set position. MUST fail if the wallet
    /// does not exist, or the address or path is already any wallet's (current or previous).
    fn move_wallet(
        &mut self,
        wallet_id: Uuid,
        address: &str,
        account: u32,
        index: u32,
        at: Timestamp,
    ) -> Result<(), PortError>;
}

pub trait WalletReads {
    fn wallet_by_user(
        &mut self,
        tenant: &crate::tenant::TenantId,
        external_user_id: &str,
        network: Network,
    ) -> Result<Option<Wallet>, PortError>;
    /// The id of the user's wallet on `network`, if there is one: all a command that only names
    /// the wallet needs (an internal transfer, twice per request). A store may answer it without
    /// reading the wallet's addresses.
    fn wallet_id_by_user(
        &mut self,
        tenant: &crate::tenant::TenantId,
        external_user_id: &str,
        network: Network,
    ) -> Result<Option<Uuid>, PortError>;
    /// A wallet of `tenant` by id; another tenant's wallet is `None`, like a missing one.
    fn wallet_by_id(
        &mut self,
        tenant: &crate::tenant::TenantId,
        id: Uuid,
    ) -> Result<Option<Wallet>, PortError>;
    /// The tenant's account index, if one was allocated.
    fn tenant_account(
        &mut self,
        tenant: &crate::tenant::TenantId,
    ) -> Result<Option<u32>, PortError>;
    /// The wallets of `tenant` (every tenant when `None`), on `network` (every network when
    /// `None`), in creation order.
    fn list_wallets(
        &mut self,
        tenant: Option<&crate::tenant::TenantId>,
        network: Option<Network>,
    ) -> Result<Vec<Wallet>, PortError>;
    /// The key path of `address` on `network`, whether it is a wallet's current or a previous
    /// address: what signs from that address (a sweep of an old address uses the old key).
    fn address_path(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<HdPath>, PortError>;
    /// The wallet holding `address` on `network`, of any tenant (deposit matching), whether
    /// the address is its current or a previous one.
    fn wallet_by_address(
        &mut self,
        network: Network,
        address: &crate::chain::ChainAddress,
    ) -> Result<Option<Wallet>, PortError>;
    /// Every address on `network`, current and previous (the scanner's watch set).
    fn wallet_addresses(&mut self, network: Network) -> Result<Vec<String>, PortError>;
    /// At most `limit` addresses on `network` stored after position `after`, with their
    /// positions, in increasing position. Every address a wallet gets (at creation, or by a
    /// migration) takes the next position; positions grow in commit order, so a scanner that
    /// remembers the last one it saw picks up wallets created or moved by any instance.
    fn wallet_addresses_after(
        &mut self,
        network: Network,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, PortError>;
}

/// Validates an `external_user_id`: 1 to 160 characters, no control characters.
pub fn check_external_user_id(field: &str, id: &str) -> Result<(), Refusal> {
    let n = id.chars().count();
    if n == 0 || n > EXTERNAL_USER_ID_CHARS_MAX {
        return Err(Refusal::validation(field, "must be 1 to 160 characters"));
    }
    if id.chars().any(char::is_control) {
        return Err(Refusal::validation(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

/// Whether `create_wallet` made a new wallet or found the existing one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub wallet: Wallet,
    pub new: bool,
}

/// The account index of the hot wallets: `m/44'/{coin}'/2147483647'/0/0` (decisions §11).
pub const HOT_WALLET_ACCOUNT: u32 = HdPath::COMPONENT_MAX;

/// The key path of `network`'s hot wallet.
pub fn hot_wallet_path(network: Network) -> HdPath {
    HdPath {
        network,
        account: HOT_WALLET_ACCOUNT,
        index: 0,
    }
}

/// The address of `network`'s hot wallet, derived from the master seed like every other
/// address (decisions §11).
pub fn hot_wallet_address(signer: &dyn Signer, network: Network) -> CoreResult<String> {
    let (pubkey, chain_code) = signer.external_chain_public_key(network, HOT_WALLET_ACCOUNT)?;
    let (address, _) = derive_address(network, &pubkey, &chain_code, 0)
        .map_err(|e| PortError::permanent("signer", e.to_string()))?;
    Ok(address)
}

/// Returns the wallet of (tenant, user, network), creating it if needed, inside the caller's
/// transaction: the allocation, the wallet row and the `wallet.created` event commit together.
pub fn create_wallet(
    tx: &mut dyn WriteTx,
    signer: &dyn Signer,
    ids: [Uuid; 2],
    tenant: &crate::tenant::TenantId,
    external_user_id: &str,
    network: Network,
    now: Timestamp,
) -> CoreResult<Created> {
    if let Some(wallet) = tx.wallet_by_user(tenant, external_user_id, network)? {
        return Ok(Created { wallet, new: false });
    }
    let account = match tx.tenant_account(tenant)? {
        Some(a) => a,
        None => tx.allocate_tenant_account(tenant, now)?,
    };
    let index = tx.take_address_index(tenant, network)?;
    // The last account index belongs to the hot wallets (decisions §11): never a tenant's.
    if account >= HOT_WALLET_ACCOUNT || index > HdPath::COMPONENT_MAX {
        return Err(Refusal::new(
            ErrorCode::InternalError,
            "no derivation index is left for this tenant and network",
        )
        .into());
    }
    seeds::check_seed_loaded(tx, signer, account)?;
    let (pubkey, chain_code) = signer.external_chain_public_key(network, account)?;
    let (address, _) = derive_address(network, &pubkey, &chain_code, index)
        .map_err(|e| PortError::permanent("signer", e.to_string()))?;
    let [wallet_id, event_id] = ids;
    let wallet = Wallet {
        id: wallet_id,
        tenant: tenant.clone(),
        external_user_id: external_user_id.to_owned(),
        network,
        address,
        account,
        index,
        created_at: now,
        previous_addresses: Vec::new(),
    };
    tx.insert_wallet(&wallet)?;
    let data = serde_json::to_value(wallet.view()).expect("a wallet view serializes");
    tx.enqueue_event(&NewEvent::new(
        event_id,
        tenant,
        EventType::WalletCreated,
        &data,
        now,
    ))?;
    Ok(Created { wallet, new: true })
}
