//! Reconciliation runs (decisions §8, §14): the record of each LEDGER or TREASURY check, how
//! runs are scheduled and claimed, and what a finished run does.
//!
//! - [`record`]: the run's record and the repository that keeps it. A run is `scheduled` (by
//!   `POST /admin/reconcile` or the schedule), `running` under a lease (so that of several
//!   instances exactly one does it; a crashed runner's lease runs out and the run is claimed
//!   again), then `completed` (with `balanced` and `discrepancies`) or `failed`.

mod record;

pub use record::{
    Reconciliation, ReconciliationReads, ReconciliationRepo, RunStatus, Scope, LIST_LIMIT_MAX,
};
