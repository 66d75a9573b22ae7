//! The store conformance suites of `custody_testkit::conformance` against `PgStore`, each case
//! in a new schema of the test database (dropped afterwards). The same suites run against the
//! SQLite store (custody-store-sqlite/tests/conformance.rs) and the testkit's `MemoryStore`
//! (custody-testkit/tests/memory_store.rs).

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use custody_core::error::CoreResult;
use custody_core::ports::store::{ReadJob, Store, WriteJob};
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgStore, StoreOptions};
use custody_testkit::conformance;

/// A store and its schema, dropped after the store closes.
struct TempStore {
    store: PgStore,
    _schema: TestSchema,
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

impl Drop for TempStore {
    fn drop(&mut self) {
        self.store.close();
    }
}

fn make() -> Arc<dyn Store> {
    let schema = TestSchema::new();
    let options = StoreOptions {
        writers: 3,
        readers: 2,
        ..StoreOptions::default()
    };
    let store = PgStore::open(&schema.url(), options).expect("the store opens");
    Arc::new(TempStore {
        store,
        _schema: schema,
    })
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

/// Instances share this store, so no process's nonce set decides: a nonce logged by mistake is
/// still refused by the unique key the second time, on any instance.
#[tokio::test]
async fn a_logged_nonce_is_refused_once_used() {
    use custody_core::ports::store::write;
    use custody_core::time::Timestamp;
    use uuid::Uuid;
    let store = make();
    let at = Timestamp::from_unix_millis(900_000);
    let log = |nonce: &'static str| {
        write(store.as_ref(), move |tx| {
            Ok(tx.log_nonce(Uuid::from_u128(1), nonce, at)?)
        })
    };
    assert!(log("pg-nonce-0001").await.unwrap());
    assert!(!log("pg-nonce-0001").await.unwrap(), "used already");
    let used = write(store.as_ref(), move |tx| {
        Ok(tx.use_nonce(Uuid::from_u128(1), "pg-nonce-0001", at)?)
    });
    assert!(!used.await.unwrap(), "the same key as use_nonce");
}
