//! The store conformance suites of `custody_testkit::conformance` against `SqliteStore`, each
//! case on a new database file in its own temporary directory. The testkit runs the same suites
//! against its `MemoryStore` (custody-testkit/tests/memory_store.rs).

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use custody_core::error::CoreResult;
use custody_core::ports::store::{ReadJob, Store, WriteJob};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use custody_testkit::conformance;

/// A store and the directory of its file, removed when the store is dropped (after it closes).
struct TempStore {
    store: SqliteStore,
    _dir: tempfile::TempDir,
}

#[async_trait]
impl Store for TempStore {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        self.store.write(job).await
    }

    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        self.store.read(job).await
    }
}

fn make() -> Arc<dyn Store> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default())
        .expect("the store opens");
    Arc::new(TempStore { store, _dir: dir })
}

#[tokio::test]
async fn transactions() {
    conformance::transactions_suite(make).await;
}

#[tokio::test]
async fn credentials() {
    conformance::credentials_suite(make).await;
}

#[tokio::test]
async fn idempotency() {
    conformance::idempotency_suite(make).await;
}

#[tokio::test]
async fn webhooks_and_outbox() {
    conformance::webhook_suite(make).await;
}

#[tokio::test]
async fn admin() {
    conformance::admin_suite(make).await;
}

#[tokio::test]
async fn ledger() {
    conformance::ledger_suite(make).await;
}

#[tokio::test]
async fn wallets() {
    conformance::wallet_suite(make).await;
}

#[tokio::test]
async fn wallet_migrations() {
    conformance::wallet_migration_suite(make).await;
}

#[tokio::test]
async fn deposits() {
    conformance::deposit_suite(make).await;
}

#[tokio::test]
async fn chain() {
    conformance::chain_suite(make).await;
}

#[tokio::test]
async fn withdrawals() {
    conformance::withdrawal_suite(make).await;
}

#[tokio::test]
async fn swaps() {
    conformance::swap_suite(make).await;
}

#[tokio::test]
async fn outgoing() {
    conformance::outgoing_suite(make).await;
}

#[tokio::test]
async fn sweeps() {
    conformance::sweep_suite(make).await;
}

#[tokio::test]
async fn reconciliations() {
    conformance::reconciliation_suite(make).await;
}
