//! Wallets read by id, kept in memory with the store's `wallets_version` they were read at.
//!
//! A signed `GET /v1/wallets/{id}` was mostly its wallet statement (a join of the wallet and its
//! address log, eight columns decoded). A wallet changes rarely (a migration moves it), so a
//! reader's snapshot reads `wallets_version` with the credentials version, in the statement that
//! opens it (the SQLite store's `read_in`), and a wallet kept at that same version is what the snapshot
//! would read. Every change to what a wallet reads as raises the version, in the transaction of
//! the change, by any process (triggers of migration 0023), so an entry is never used past a
//! change its snapshot can see.
//!
//! Only wallets found are kept: a missing id is read again each time, so a wallet created later
//! (which leaves the version alone) is found at once. Ids are the table's primary key, unique
//! across tenants, so an entry of another tenant answers "none", as the statement would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use custody_core::wallet::Wallet;
use uuid::Uuid;

/// Wallets kept beyond this many are dropped all at once: the cache stays bounded whatever
/// the number of wallets, and a steady set of hot wallets fills it again within a few reads.
const WALLETS_MAX: usize = 16_384;

#[derive(Default)]
pub struct WalletCache {
    entries: Mutex<HashMap<Uuid, (u64, Arc<Wallet>)>>,
}

impl WalletCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (u64, Arc<Wallet>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The wallet `id` as read at `version`, if kept at exactly that version.
    pub fn get(&self, id: Uuid, version: u64) -> Option<Wallet> {
        let kept = self
            .entries()
            .get(&id)
            .filter(|(v, _)| *v == version)
            .map(|(_, w)| Arc::clone(w))?;
        Some(Wallet::clone(&kept))
    }

    /// Keeps `wallet` as read in a snapshot whose `wallets_version` was `version`, unless a
    /// reader of a newer snapshot kept it already (versions only grow).
    pub fn put(&self, version: u64, wallet: &Wallet) {
        let kept = Arc::new(wallet.clone());
        let mut entries = self.entries();
        if entries.get(&wallet.id).is_some_and(|(v, _)| *v > version) {
            return;
        }
        let dropped = (entries.len() >= WALLETS_MAX && !entries.contains_key(&wallet.id))
            .then(|| std::mem::take(&mut *entries));
        entries.insert(wallet.id, (version, kept));
        drop(entries);
        // Freed outside the lock: other readers need not wait for thousands of wallets.
        drop(dropped);
    }

    /// How many wallets are kept.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
}

/// The cache a reader's snapshot may use, with the snapshot's `wallets_version`.
#[derive(Clone, Copy)]
pub struct SnapshotWallets<'c> {
    pub cache: &'c WalletCache,
    pub version: u64,
}
