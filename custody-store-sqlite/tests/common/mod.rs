//! Shared pieces of the store's integration tests: a real SQLite file, two users of one tenant
//! with BSC wallets, and scripted blocks carrying a USDT deposit.

#![allow(dead_code)]

use std::sync::Arc;

use custody_core::chain::{ChainAddress, TxHash};
use custody_core::deposit::{
    self, Applied, DepositFilter, DepositStatus, PipelineSettings, WatchSet,
};
use custody_core::error::CoreError;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
use custody_core::ports::store::{read, write};
use custody_core::ports::{Clock, Entropy, Store};
use custody_core::transfer::{self, TransferIds, TransferRequest};
use custody_core::{Amount, AssetCatalog, AssetId, Network, Timestamp};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use uuid::Uuid;

pub const NOW: Timestamp = Timestamp::from_unix_millis(1_800_000_000_000);

pub struct FixedClock;
impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        NOW
    }
}

pub struct RandomEntropy;
impl Entropy for RandomEntropy {
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(16) {
            let id = Uuid::new_v4();
            chunk.copy_from_slice(&id.as_bytes()[..chunk.len()]);
        }
    }
}

pub fn usdt() -> AssetId {
    AssetId::new(Network::Bsc, "USDT".to_owned())
}

pub fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap())
}

/// Creates BSC wallets for `users` of tenant `t`; returns their addresses in order.
pub async fn wallets(store: &dyn Store, users: &[&'static str]) -> Vec<String> {
    let phrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
    let signer =
        Arc::new(HdSigner::from_seed(&Mnemonic::parse(phrase).unwrap().to_seed()).unwrap());
    let mut addresses = Vec::new();
    for &user in users {
        let signer = Arc::clone(&signer);
        let ids = [Uuid::new_v4(), Uuid::new_v4()];
        let created = write(store, move |tx| {
            custody_core::wallet::create_wallet(
                tx,
                signer.as_ref(),
                ids,
                &custody_core::TenantId::parse("t").unwrap(),
                user,
                Network::Bsc,
                NOW,
            )
        })
        .await
        .unwrap();
        addresses.push(created.wallet.address);
    }
    addresses
}

/// Moves `units` USDT from one user of tenant `t` to another.
pub async fn transfer(
    store: &dyn Store,
    from: &str,
    to: &str,
    units: u128,
) -> Result<(), CoreError> {
    let req = TransferRequest {
        tenant: custody_core::TenantId::parse("t").unwrap(),
        sender: from.into(),
        recipient: to.into(),
        network: Network::Bsc,
        asset: "USDT".into(),
        amount: Amount::from_units(units),
    };
    let ids = TransferIds {
        transfer: Uuid::new_v4(),
        ledger_tx: Uuid::new_v4(),
        sender_event: Uuid::new_v4(),
        recipient_event: Uuid::new_v4(),
    };
    write(store, move |tx| {
        transfer::execute(tx, ids, &req, NOW).map(|_| ())
    })
    .await
}

/// Block `number` of branch `fork` (its parent is on `parent_fork`), with a USDT deposit of
/// `units` to `to` when `deposit` is true.
pub fn block(
    number: u64,
    fork: u8,
    parent_fork: u8,
    deposit: Option<(&str, u128)>,
) -> ScannedBlock {
    let hash = |n: u64, f: u8| format!("{f:02x}{n:062x}");
    ScannedBlock {
        header: BlockHeader {
            number,
            hash: hash(number, fork),
            parent_hash: hash(number - 1, parent_fork),
            timestamp_ms: 0,
        },
        transfers: deposit
            .map(|(to, units)| ObservedTransfer {
                tx_hash: TxHash::parse(&"bb".repeat(32)).expect("hex"),
                log_index: Some(0),
                asset_code: "USDT".into(),
                from: ChainAddress::parse(
                    Network::Bsc,
                    "0x0000000000000000000000000000000000000001",
                )
                .expect("an address"),
                to: ChainAddress::parse(Network::Bsc, to).expect("an address"),
                amount: Amount::from_units(units),
                succeeded: true,
            })
            .into_iter()
            .collect(),
    }
}

pub fn settings() -> PipelineSettings {
    PipelineSettings {
        network: Network::Bsc,
        required_confirmations: 2,
        blocks_kept: 10,
        hot_wallets: Vec::new(),
    }
}

pub async fn apply(store: &dyn Store, watch: &Arc<WatchSet>, b: ScannedBlock) -> Applied {
    let (w, s) = (Arc::clone(watch), settings());
    write(store, move |tx| {
        deposit::apply_block(
            tx,
            &RandomEntropy,
            &s,
            &AssetCatalog::mainnet(),
            &w,
            &b,
            NOW,
        )
    })
    .await
    .unwrap()
}

pub async fn deposit_statuses(store: &dyn Store) -> Vec<DepositStatus> {
    read(store, |tx| {
        Ok(tx.list_deposits(
            &custody_core::TenantId::parse("t").unwrap(),
            &DepositFilter::default(),
            10,
        )?)
    })
    .await
    .unwrap()
    .into_iter()
    .map(|d| d.status)
    .collect()
}
