//! The record of one reconciliation run and the repository that keeps it.

use serde::Serialize;
use uuid::Uuid;

use crate::error::{PortError, Refusal};
use crate::time::Timestamp;

/// `/admin/reconciliations` pages are at most this long (decisions §3).
pub const LIST_LIMIT_MAX: usize = 100;

/// What a run checks (decisions §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Scope {
    /// The ledger against its own entries (`ledger::reconcile`).
    #[serde(rename = "LEDGER")]
    Ledger,
    /// On-chain holdings against what users are owed, per (network, asset).
    #[serde(rename = "TREASURY")]
    Treasury,
}

impl Scope {
    pub const ALL: [Scope; 2] = [Scope::Ledger, Scope::Treasury];

    /// Stored and shown value; never change one that has shipped.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Ledger => "LEDGER",
            Scope::Treasury => "TREASURY",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Scope::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The `scope` of a request body: exactly `LEDGER` or `TREASURY`, else 422.
    pub fn from_request(s: &str) -> Result<Self, Refusal> {
        Scope::parse(s).ok_or_else(|| Refusal::validation("scope", "must be LEDGER or TREASURY"))
    }
}

stored_enum! {
    RunStatus {
        Scheduled => "scheduled",
        Running => "running",
        Completed => "completed",
        Failed => "failed",
    }
}

impl RunStatus {
    pub const fn is_finished(self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed)
    }
}

/// One reconciliation run, as `/admin/reconciliations` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reconciliation {
    pub id: Uuid,
    pub scope: Scope,
    pub status: RunStatus,
    /// `Some` once completed; `None` while scheduled or running, and for a failed run (which
    /// proved nothing either way; a TREASURY run failed for one unreadable asset still lists
    /// the shortfalls it found among the others).
    pub balanced: Option<bool>,
    /// Each with the figures on both sides (LEDGER: the message of `ledger::reconcile`;
    /// TREASURY: [`super::treasury::Discrepancy`]).
    pub discrepancies: Vec<serde_json::Value>,
    /// `credential:<id>` for a request, [`super::SYSTEM_ACTOR`] for the schedule.
    pub requested_by: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    pub failure_reason: Option<String>,
    /// The lease this copy was claimed under ([`ReconciliationRepo::claim_reconciliation`]);
    /// `None` for a copy read otherwise. Never shown.
    #[serde(skip)]
    pub lease: Option<Timestamp>,
}

impl Reconciliation {
    /// A run waiting to be claimed.
    pub fn scheduled(id: Uuid, scope: Scope, requested_by: &str, now: Timestamp) -> Self {
        Reconciliation {
            id,
            scope,
            status: RunStatus::Scheduled,
            balanced: None,
            discrepancies: Vec::new(),
            requested_by: requested_by.to_owned(),
            created_at: now,
            updated_at: now,
            completed_at: None,
            failure_reason: None,
            lease: None,
        }
    }
}

/// Writes of reconciliation runs.
///
/// An implementation:
/// - MUST refuse a second run with the same id (a constraint).
/// - MUST hand a run to one claimant at a time: [`claim_reconciliation`] leases it in the
///   claiming write job, and a lease is only taken over once it has run out (a crashed
///   runner's run is claimed again; a live one's never).
/// - MUST fence [`finish_reconciliation`] by the lease: a runner whose lease ran out and was
///   taken over cannot overwrite the new holder's result.
///
/// [`claim_reconciliation`]: ReconciliationRepo::claim_reconciliation
/// [`finish_reconciliation`]: ReconciliationRepo::finish_reconciliation
pub trait ReconciliationRepo: ReconciliationReads {
    fn insert_reconciliation(&mut self, run: &Reconciliation) -> Result<(), PortError>;

    /// Leases the oldest run that is `scheduled`, or `running` under a lease that ran out by
    /// `now`, until `lease_until`, and marks it `running` (`updated_at` = `now`). The returned
    /// copy carries `lease: Some(lease_until)`. `None` when nothing is due.
    fn claim_reconciliation(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Option<Reconciliation>, PortError>;

    /// Stores the finished run (`status`, `balanced`, `discrepancies`, `failure_reason`,
    /// `completed_at`, `updated_at`) and ends its lease. MUST fail (transient), changing
    /// nothing, unless the stored run is `running` under exactly `run.lease`.
    fn finish_reconciliation(&mut self, run: &Reconciliation) -> Result<(), PortError>;
}

/// Reads of reconciliation runs.
pub trait ReconciliationReads {
    fn reconciliation(&mut self, id: Uuid) -> Result<Option<Reconciliation>, PortError>;

    /// A page of the runs of every scope, newest first (`created_at`, then id, descending).
    fn list_reconciliations(
        &mut self,
        page: crate::page::Page,
    ) -> Result<crate::page::Paged<Reconciliation>, PortError>;

    /// The newest run of `scope`, whatever its status: what the schedule counts from.
    fn latest_reconciliation(&mut self, scope: Scope) -> Result<Option<Reconciliation>, PortError>;
}
