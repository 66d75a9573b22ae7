//! The store: a unit of work over every record the service keeps.
//!
//! A command is a synchronous closure over a [`WriteTx`]. The store runs it inside a write
//! transaction, so the command's records, ledger entries, idempotency record and outbox rows
//! commit together or not at all, and business rules (no negative balance, one wallet per user
//! and network) are enforced inside the transaction, never by a read-then-write in a handler.

use std::any::Any;

use async_trait::async_trait;

use crate::error::{CoreError, CoreResult, PortError};

/// Everything a query may read. Read-only jobs get this and nothing more, so a query cannot
/// write by mistake (as reth separates its read and write providers).
pub trait ReadTx:
    crate::webhook::WebhookReads
    + crate::auth::CredentialReads
    + crate::idempotency::IdempotencyReads
    + crate::admin::AuditReads
    + crate::ledger::LedgerReads
    + crate::wallet::WalletReads
    + crate::wallet::migration::MigrationReads
    + crate::wallet::seeds::SeedReads
    + crate::wallet::hot::HotWalletReads
    + crate::deposit::DepositReads
    + crate::chain::ChainReads
    + crate::outgoing::OutgoingReads
    + crate::withdrawal::WithdrawalReads
    + crate::swap::SwapReads
    + crate::sweep::SweepReads
    + crate::admin::AlertReads
    + crate::admin::ControlReads
    + crate::reconcile::ReconciliationReads
{
}

impl<T> ReadTx for T where
    T: crate::webhook::WebhookReads
        + crate::auth::CredentialReads
        + crate::idempotency::IdempotencyReads
        + crate::admin::AuditReads
        + crate::ledger::LedgerReads
        + crate::wallet::WalletReads
        + crate::wallet::migration::MigrationReads
        + crate::wallet::seeds::SeedReads
        + crate::wallet::hot::HotWalletReads
        + crate::deposit::DepositReads
        + crate::chain::ChainReads
        + crate::outgoing::OutgoingReads
        + crate::withdrawal::WithdrawalReads
        + crate::swap::SwapReads
        + crate::sweep::SweepReads
        + crate::admin::AlertReads
        + crate::admin::ControlReads
        + crate::reconcile::ReconciliationReads
{
}

/// Everything a command may read or write inside one transaction. Each domain module declares
/// the repository traits it needs (`XReads` for queries, `XRepo: XReads` for writes); a store
/// adapter implements all of them on its transaction type.
pub trait WriteTx:
    ReadTx
    + Savepoints
    + crate::webhook::WebhookRepo
    + crate::auth::CredentialRepo
    + crate::idempotency::IdempotencyRepo
    + crate::outbox::OutboxRepo
    + crate::admin::AuditRepo
    + crate::ledger::LedgerRepo
    + crate::wallet::WalletRepo
    + crate::wallet::migration::MigrationRepo
    + crate::wallet::seeds::SeedRepo
    + crate::wallet::hot::HotWalletRepo
    + crate::deposit::DepositRepo
    + crate::chain::ChainRepo
    + crate::outgoing::OutgoingRepo
    + crate::withdrawal::WithdrawalRepo
    + crate::swap::SwapRepo
    + crate::sweep::SweepRepo
    + crate::admin::AlertRepo
    + crate::admin::ControlRepo
    + crate::reconcile::ReconciliationRepo
{
}

impl<T> WriteTx for T where
    T: ReadTx
        + Savepoints
        + crate::webhook::WebhookRepo
        + crate::auth::CredentialRepo
        + crate::idempotency::IdempotencyRepo
        + crate::outbox::OutboxRepo
        + crate::admin::AuditRepo
        + crate::ledger::LedgerRepo
        + crate::wallet::WalletRepo
        + crate::wallet::migration::MigrationRepo
        + crate::wallet::seeds::SeedRepo
        + crate::wallet::hot::HotWalletRepo
        + crate::deposit::DepositRepo
        + crate::chain::ChainRepo
        + crate::outgoing::OutgoingRepo
        + crate::withdrawal::WithdrawalRepo
        + crate::swap::SwapRepo
        + crate::sweep::SweepRepo
        + crate::admin::AlertRepo
        + crate::admin::ControlRepo
        + crate::reconcile::ReconciliationRepo
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
/// `Err`; the transaction goes on either way. A store that ran the job without savepoints (see
/// [`Store`]) cannot undo them: it answers its own `Err` instead of `f`'s and runs the job
/// again with savepoints. So an `Err` from `nested` is passed on, or handled by its kind (a
/// `CoreError::Refused`), never taken as `f`'s own failure from a `Port` error.
pub fn nested<T>(
    tx: &mut dyn WriteTx,
    f: impl FnOnce(&mut dyn WriteTx) -> CoreResult<T>,
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

/// A write command. Its `Err` rolls back everything the command wrote, and nothing else. It may
/// be run more than once (a store retries a job whose transaction lost a serialization
/// conflict), so it is `FnMut` and its only effects are its writes.
pub type WriteJob = Box<dyn FnMut(&mut dyn WriteTx) -> CoreResult<Box<dyn Any + Send>> + Send>;
/// A read-only query; it may be run more than once too.
pub type ReadJob = Box<dyn FnMut(&mut dyn ReadTx) -> CoreResult<Box<dyn Any + Send>> + Send>;

/// The persistent store: the contract every implementation (the embedded SQLite file, a shared
/// PostgreSQL database, the in-memory one of the tests) keeps, so that several writers, several
/// workers and several instances can share it.
///
/// Writes. An implementation of `write`:
/// - MUST run the job inside a transaction and make its writes durable before it returns
///   `Ok`; an `Ok` answer means the command survives a crash that follows.
/// - MUST roll back every write of a job that returns `Err` or panics, without affecting other
///   jobs; it MAY run several jobs in one transaction (group commit) provided each is isolated
///   by a savepoint and all of their answers wait for the one commit. It MAY also run a batch
///   without savepoints and commit it only if every job succeeded, provided any failure rolls
///   the whole transaction back and the batch runs again with a savepoint per job: a job whose
///   own savepoint ([`nested`]) must be rolled back makes that attempt fail too.
/// - MAY run jobs concurrently, but MUST make every write job serializable: the job behaves as
///   if it ran alone, after every job answered before it started. Either the transactions are
///   SERIALIZABLE and a job that loses a conflict is rolled back and run again (which is why
///   jobs are `FnMut` and MUST NOT have effects outside their writes), or every read that a
///   write depends on locks what it read until the commit (`SELECT ... FOR UPDATE`): the ledger
///   reads account totals and writes them back, a claim reads what is due and leases it. The
///   embedded SQLite store has one writer thread, which satisfies this trivially. The
///   PostgreSQL store takes the first way: every write job is a SERIALIZABLE transaction, and a
///   job refused with a serialization failure (40001) or a deadlock (40P01), on any statement or
///   at the commit, is rolled back and run again on a fresh snapshot, so jobs need no locks of
///   their own and keep one code path for both stores.
/// - MUST enforce uniqueness with constraints (nonces, idempotency keys, deposit identities,
///   wallet per user and network, outgoing nonces), never with a prior read alone. The one
///   exception is the nonce log (`CredentialRepo::log_nonce`) of a store one process alone
///   writes: that process's nonce set decides, and the log only keeps what it decided.
/// - MUST answer `Err(CoreError::Port)` to every job of a transaction whose commit failed; the
///   jobs then did not happen, and the caller may retry. A commit whose answer was lost (the
///   connection broke during `COMMIT`) is not a failure until the store knows it did not take
///   effect: it MUST find out (the PostgreSQL store asks the server about the transaction id it
///   took at `BEGIN`) and answer `Ok` if it committed. If it cannot find out, it answers a
///   permanent `Err(CoreError::Port)` whose message says the outcome is unknown, never a
///   transient one that invites a retry.
/// - MUST NOT hold a transaction open across an `.await`.
///
/// Work shared between processes. Claims on background work (webhook events, outgoing
/// transactions, reconciliation runs) are leases with an expiry, taken and renewed in write
/// jobs: a crashed process's leases simply run out and the work is claimed again. Leases are
/// never released in bulk at start-up, since another instance may hold them. Work without a
/// claim is fenced by what it writes: a scanner's block applies only onto the stored cursor, and
/// one sweep is open per address (a constraint), so instances doing it at once write it once. What must hold
/// across instances (nonces, idempotency records, cursors, controls) is read from the store,
/// never from a process's memory; what a process keeps in memory (the watch set, the in-flight
/// idempotency keys, rate windows on the embedded store) is a cache or a per-instance limit,
/// never the truth. A store shared by several instances counts rate windows itself
/// (`auth::RateLimit`, outside the jobs).
///
/// A job MUST NOT cause side effects outside the transaction (network calls, in-memory caches
/// that outlive it): if the commit fails, those would describe something that did not happen.
/// The one exception is a cache that may safely hold more than the store (the scanner's watched
/// addresses), where recording early beats missing it.
///
/// Reads. `read` runs the job on a consistent read-only snapshot; the job gets a [`ReadTx`], so
/// it cannot write.
#[async_trait]
pub trait Store: Send + Sync {
    async fn write(&self, job: WriteJob) -> CoreResult<Box<dyn Any + Send>>;
    async fn read(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>>;

    /// A number that changes whenever a credential is created, changed or revoked, by any
    /// process sharing the store, and that is cheap to read (no job): the HTTP layer keeps
    /// opened credentials in memory and checks this number on every request, so a revocation
    /// takes effect on the next request. `None` (the default): the store cannot tell cheaply,
    /// and every request loads its credential.
    async fn credentials_version(&self) -> CoreResult<Option<u64>> {
        Ok(None)
    }

    /// A read of a few rows by key (a request's wallet, its balances), which takes
    /// microseconds: a store MAY run it on the caller's thread instead of handing it to a
    /// blocking thread, whose two thread switches cost more than the query. Same contract as
    /// [`Store::read`]; the default is `read`. Never for scans or listings.
    async fn read_quick(&self, job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        self.read(job).await
    }
}

fn downcast<T: 'static>(value: Box<dyn Any + Send>) -> CoreResult<T> {
    value
        .downcast::<T>()
        .map(|b| *b)
        .map_err(|_| CoreError::Port(PortError::permanent("store", "job result of another type")))
}

/// Runs a typed write command on `store`.
pub async fn write<T, F>(store: &dyn Store, f: F) -> CoreResult<T>
where
    T: Send + 'static,
    F: FnMut(&mut dyn WriteTx) -> CoreResult<T> + Send + 'static,
{
    let mut f = f;
    let job: WriteJob = Box::new(move |tx| f(tx).map(|v| Box::new(v) as Box<dyn Any + Send>));
    downcast(store.write(job).await?)
}

/// Runs a typed read of a few rows by key on `store` ([`Store::read_quick`]).
pub async fn read_quick<T, F>(store: &dyn Store, f: F) -> CoreResult<T>
where
    T: Send + 'static,
    F: FnMut(&mut dyn ReadTx) -> CoreResult<T> + Send + 'static,
{
    let mut f = f;
    let job: ReadJob = Box::new(move |tx| f(tx).map(|v| Box::new(v) as Box<dyn Any + Send>));
    downcast(store.read_quick(job).await?)
}

/// Runs a typed read-only query on `store`.
pub async fn read<T, F>(store: &dyn Store, f: F) -> CoreResult<T>
where
    T: Send + 'static,
    F: FnMut(&mut dyn ReadTx) -> CoreResult<T> + Send + 'static,
{
    let mut f = f;
    let job: ReadJob = Box::new(move |tx| f(tx).map(|v| Box::new(v) as Box<dyn Any + Send>));
    downcast(store.read(job).await?)
}
