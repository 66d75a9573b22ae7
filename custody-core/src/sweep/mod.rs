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
//! transaction of the hot wallet, of one [`FundingKind`]:
//!
//! - `native`: the native coin sent to the address (the gas or TRX the transfer burns);
//! - `energy_delegation` (TRON, `[sweeps] tron_energy_mode = "delegate"`): the energy the
//!   token transfer needs, lent from the hot wallet's stake instead of burning TRX. When the
//!   address also needs TRX (its bandwidth, or its activation: java-tron refuses a delegation
//!   to an account that does not exist), the delegation is recorded with the sweep but sent only
//!   once that native funding is final ([`Funding::waits_for`]);
//! - `energy_reclaim`: the undelegation taking that energy back, created in the very store
//!   transaction in which the sweep's transfer ends (final or failed), so that no crash can
//!   leave a delegation without its reclaim, nor make two.
//!
//! At most one sweep is open per deposit address (a constraint): a native sweep empties the
//! address, so it must never race a token sweep that needs the address's gas.

mod config;
mod flow;
pub mod plan;
mod record;

pub use config::{SweepPolicyConfig, SweepsConfig, TronEnergyMode};
pub use flow::{
    create_sweep, on_outgoing, ready_for_transfer, start_delegation, start_funded_sweep, SweepIds,
    SweepOrder, SweepSource,
};
pub use plan::{
    delegation_budget, plan_native, plan_token, plan_token_delegated, reclaim_pending, Delegation,
    DelegationFacts, Plan, SweepPolicy, TokenFacts,
};
pub use record::{
    flows, AddressFlow, Funding, FundingView, Sweep, SweepReads, SweepRepo, SweepStep, SweepView,
};

stored_enum! {
    /// States of a sweep.
    SweepStatus {
        Planned => "planned",
        Funding => "funding",
        Broadcasted => "broadcasted",
        Confirmed => "confirmed",
        Failed => "failed",
    }
    moves {
        Planned => Broadcasted,
        Planned => Failed,
        Funding => Broadcasted,
        Funding => Failed,
        Broadcasted => Confirmed,
        Broadcasted => Failed,
    }
}

impl SweepStatus {
    pub const fn is_open(self) -> bool {
        !matches!(self, SweepStatus::Confirmed | SweepStatus::Failed)
    }
}

stored_enum! {
    /// What a treasury funding does.
    FundingKind {
        /// The native coin sent to the deposit address; `amount` is what it receives.
        Native => "native",
        /// TRON: the energy of `amount` sun of the hot wallet's stake lent to the address.
        EnergyDelegation => "energy_delegation",
        /// TRON: that stake's energy taken back; `amount` is the stake undelegated.
        EnergyReclaim => "energy_reclaim",
        /// A retired hot wallet's `amount` of `asset` (any asset) sent to the active one by a
        /// rotation (`crate::wallet::hot`); `address` is the active hot wallet, no sweep is
        /// paid.
        HotWalletDrain => "hot_wallet_drain",
    }
}

stored_enum! {
    /// States of a treasury funding.
    FundingStatus {
        Planned => "planned",
        Broadcasted => "broadcasted",
        Confirmed => "confirmed",
        Failed => "failed",
    }
    moves {
        Planned => Broadcasted,
        Planned => Failed,
        Broadcasted => Confirmed,
        Broadcasted => Failed,
    }
}

#[cfg(test)]
mod tests;
