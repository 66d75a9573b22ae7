//! Reconciliation runs (decisions §8, §14): the record of each LEDGER or TREASURY check, how
//! runs are scheduled and claimed, and what a finished run does.
//!
//! - `record`: the run's record and the repository that keeps it. A run is `scheduled` (by
//!   `POST /admin/reconcile` or the schedule), `running` under a lease (so that of several
//!   instances exactly one does it; a crashed runner's lease runs out and the run is claimed
//!   again), then `completed` (with `balanced` and `discrepancies`) or `failed`.
//! - `treasury`: the pure TREASURY decision per (network, asset).
//! - `halt`: the automatic `treasury_shortfall.<NETWORK>.<ASSET>` control, and the one check
//!   every money path makes against it.
//! - `run`: scheduling, claiming and applying a result (alerts, the control) in one
//!   transaction.

mod halt;
mod record;
mod run;
pub mod treasury;

#[cfg(test)]
mod tests;

pub use halt::{
    halted_for_payment, parse_shortfall_key, refuse_if_halted, shortfall_key, SHORTFALL_PREFIX,
};
pub use record::{
    Reconciliation, ReconciliationReads, ReconciliationRepo, RunStatus, Scope, LIST_LIMIT_MAX,
};
pub use run::{
    claim, finish_failed, finish_ledger, finish_treasury, request, schedule_due, SYSTEM_ACTOR,
};
