//! The store: a unit of work over every record the service keeps.
//!
//! A command is a synchronous closure over a [`StoreTx`]. The store runs it inside a write
//! transaction, so the command's records, ledger entries, idempotency record and outbox rows
//! commit together or not at all, and business rules (no negative balance, one wallet per user
//! and network) are enforced inside the transaction, never by a read-then-write in a handler.

use std::any::Any;

use async_trait::async_trait;

use crate::error::{CoreError, CoreResult, PortError};

/// Everything a command may read or write inside one transaction. Each domain module declares
/// the repository trait it needs; a store adapter implements all of them on its transaction.
pub trait StoreTx:
    Savepoints
    + crate::webhook::WebhookRepo
    + crate::auth::CredentialRepo
    + crate::idempotency::IdempotencyRepo
    + crate::outbox::OutboxRepo
    + crate::admin::AuditRepo
    + crate::ledger::LedgerRepo
    + crate::wallet::WalletRepo
    + crate::deposit::DepositRepo
    + crate::admin::AlertRepo
    + crate::admin::ControlRepo
{
}

impl<T> StoreTx for T where
    T: Savepoints
        + crate::webhook::WebhookRepo
        + crate::auth::CredentialRepo
        + crate::idempotency::IdempotencyRepo
        + crate::outbox::OutboxRepo
        + crate::admin::AuditRepo
        + crate::ledger::LedgerRepo
        + crate::wallet::WalletRepo
        + crate::deposit::DepositRepo
        + crate::admin::AlertRepo
        + crate::admin::ControlRepo
{
}

/// Nested rollback points inside a job, so a command can undo its own writes and still record
/// something (an idempotent business refusal) in the same transaction.
pub trait Savepoints {
    fn savepoint(&mut self) -> Result<(), PortError>;
    fn release_savepoint(&mut self) -> Result<(), PortError>;
    fn rollback_to_savepoint(&mut self) -> Result<(), PortError>;
}

/// Runs `f` under a savepoint: its writes are kept if it returns `Ok` and undone if it returns
/// `Err`; the transaction goes on either way.
pub fn nested<T>(
    tx: &mut dyn StoreTx,
    f: impl FnOnce(&mut dyn StoreTx) -> CoreResult<T>,
) -> CoreResult<T> {
    tx.savepoint()?;
    match f(tx) {
        Ok(v) => {
            tx.release_savepoint()?;
            Ok(v)
        }
        Err(e) => {
            tx.rollback_to_savepoint()?;
            Err(e)
        }
    }
}

/// A write command. Its `Err` rolls back everything the command wrote, and nothing else.
pub type WriteJob = Box<dyn FnOnce(&mut dyn StoreTx) -> CoreResult<Box<dyn Any + Send>> + Send>;
/// A read-only query.
pub type ReadJob = Box<dyn FnOnce(&mut dyn StoreTx) -> CoreResult<Box<dyn Any + Send>> + Send>;

/// The persistent store.
///
/// An implementation of `write`:
/// - MUST run the job inside a transaction and make its writes durable (fsync) before it
///   returns `Ok`; an `Ok` answer means the command survives a crash that follows.
/// - MUST roll back every write of a job that returns `Err` or panics, without affecting other
///   jobs; it MAY run several jobs in one transaction (group commit) provided each is isolated
///   by a savepoint and all of their answers wait for the one commit.
/// - MUST run jobs one at a time (a single writer): a job sees the writes of every job that
///   was answered before it started.
/// - MUST answer `Err(CoreError::Port)` to every job of a transaction whose commit failed; the
///   jobs then did not happen, and the caller may retry.
/// - MUST NOT hold a transaction open across an `.await`.
///
/// A job MUST NOT cause side effects outside the transaction (network calls, in-memory caches
/// that outlive it): if the commit fails, those would describe something that did not happen.
/// The one exception is a cache that may safely hold more than the store (the scanner's watched
/// addresses), where recording early beats missing it.
///
/// `read` runs the job on a read-only snapshot; write methods called there fail.
#[async_trait]
pub trait Store: Send + Sync {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>>;
    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>>;
}

fn downcast<T: 'static>(value: Box<dyn Any + Send>) -> CoreResult<T> {
    value
        .downcast::<T>()
        .map(|b| *b)
        .map_err(|_| CoreError::Port(PortError::permanent("store", "job result of another type")))
}

fn erase<T, F>(f: F) -> WriteJob
where
    T: Send + 'static,
    F: FnOnce(&mut dyn StoreTx) -> CoreResult<T> + Send + 'static,
{
    Box::new(move |tx| f(tx).map(|v| Box::new(v) as Box<dyn Any + Send>))
}

/// Runs a typed write command on `store`.
pub async fn write<T, F>(store: &dyn Store, f: F) -> CoreResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn StoreTx) -> CoreResult<T> + Send + 'static,
{
    downcast(store.write(erase(f)).await?)
}

/// Runs a typed read-only query on `store`.
pub async fn read<T, F>(store: &dyn Store, f: F) -> CoreResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn StoreTx) -> CoreResult<T> + Send + 'static,
{
    downcast(store.read(erase(f)).await?)
}
