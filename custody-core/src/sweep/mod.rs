//! Sweeps and treasury fundings (decisions §13): the service moving its own funds between the
//! deposit addresses and the network's hot wallet. Neither touches a user's balance (their
//! deposits were credited already); both move the house's books between
//! `deposit_clearing` (what sits on deposit addresses) and `treasury` (the hot wallet), and
//! every fee they burn is the house's `network_fees` expense.
//!
//! A sweep moves one asset of one deposit address to the hot wallet:
//! `planned` → `funding` (tokens only: the address cannot pay the transfer's fee, and a
//! treasury funding sends it the native coin first) → `broadcasted` → `confirmed` | `failed`.
//! The token transfer of a funded sweep is created only once the funding is final, never on
//! the funding's mere inclusion (a reorganization could still take the gas away and leave the
//! sweep's nonce blocked behind it).
//!
//! A treasury funding: `planned` → `broadcasted` → `confirmed` | `failed`, one outgoing
//! transaction of the hot wallet.
//!
//! At most one sweep is open per deposit address (a constraint): a native sweep empties the
//! address, so it must never race a token sweep that needs the address's gas.

mod flow;
pub mod plan;
mod record;

use serde::Serialize;

pub use flow::{create_sweep, on_outgoing, start_funded_sweep, SweepIds, SweepOrder, SweepSource};
pub use plan::{plan_native, plan_token, Plan, SweepPolicy, TokenFacts};
pub use record::{
    flows, AddressFlow, Funding, FundingView, Sweep, SweepReads, SweepRepo, SweepStep, SweepView,
};

/// States of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepStatus {
    Planned,
    Funding,
    Broadcasted,
    Confirmed,
    Failed,
}

impl SweepStatus {
    pub const ALL: [SweepStatus; 5] = [
        SweepStatus::Planned,
        SweepStatus::Funding,
        SweepStatus::Broadcasted,
        SweepStatus::Confirmed,
        SweepStatus::Failed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            SweepStatus::Planned => "planned",
            SweepStatus::Funding => "funding",
            SweepStatus::Broadcasted => "broadcasted",
            SweepStatus::Confirmed => "confirmed",
            SweepStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        SweepStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub const fn is_open(self) -> bool {
        !matches!(self, SweepStatus::Confirmed | SweepStatus::Failed)
    }

    /// The only legal moves.
    pub fn can_move_to(self, next: SweepStatus) -> bool {
        use SweepStatus::*;
        matches!(
            (self, next),
            (Planned, Broadcasted)
                | (Planned, Failed)
                | (Funding, Broadcasted)
                | (Funding, Failed)
                | (Broadcasted, Confirmed)
                | (Broadcasted, Failed)
        )
    }
}

/// States of a treasury funding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FundingStatus {
    Planned,
    Broadcasted,
    Confirmed,
    Failed,
}

impl FundingStatus {
    pub const ALL: [FundingStatus; 4] = [
        FundingStatus::Planned,
        FundingStatus::Broadcasted,
        FundingStatus::Confirmed,
        FundingStatus::Failed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            FundingStatus::Planned => "planned",
            FundingStatus::Broadcasted => "broadcasted",
            FundingStatus::Confirmed => "confirmed",
            FundingStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        FundingStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub fn can_move_to(self, next: FundingStatus) -> bool {
        use FundingStatus::*;
        matches!(
            (self, next),
            (Planned, Broadcasted)
                | (Planned, Failed)
                | (Broadcasted, Confirmed)
                | (Broadcasted, Failed)
        )
    }
}

#[cfg(test)]
mod tests;
