//! The store conformance suites against [`MemoryStore`], and the ledger suite against a bare
//! `MemoryLedger`, the reference. `custody-store-sqlite/tests/conformance.rs` runs the same
//! suites against the SQLite store.

use std::sync::Arc;

use custody_core::ports::Store;
use custody_testkit::{block_on, conformance, MemoryStore};

fn make() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

#[test]
fn transactions() {
    block_on(conformance::transactions_suite(make));
}

#[test]
fn credentials() {
    block_on(conformance::credentials_suite(make));
}

#[test]
fn idempotency() {
    block_on(conformance::idempotency_suite(make));
}

#[test]
fn webhooks_and_outbox() {
    block_on(conformance::webhook_suite(make));
}

#[test]
fn admin() {
    block_on(conformance::admin_suite(make));
}

#[test]
fn ledger() {
    block_on(conformance::ledger_suite(make));
}

#[test]
fn memory_ledger() {
    block_on(conformance::memory_ledger_suite());
}

#[test]
fn wallets() {
    block_on(conformance::wallet_suite(make));
}

#[test]
fn wallet_migrations() {
    block_on(conformance::wallet_migration_suite(make));
}

#[test]
fn deposits() {
    block_on(conformance::deposit_suite(make));
}

#[test]
fn chain() {
    block_on(conformance::chain_suite(make));
}

#[test]
fn withdrawals() {
    block_on(conformance::withdrawal_suite(make));
}

#[test]
fn swaps() {
    block_on(conformance::swap_suite(make));
}

#[test]
fn outgoing() {
    block_on(conformance::outgoing_suite(make));
}

#[test]
fn sweeps() {
    block_on(conformance::sweep_suite(make));
}

#[test]
fn reconciliations() {
    block_on(conformance::reconciliation_suite(make));
}
