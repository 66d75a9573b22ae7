//! Withdrawals: a user's funds leaving to an external address (decisions §3, §4, §11).
//!
//! States: `reserved` (the quote was executed and the total is held) → `broadcasted` (signed
//! and sent from the network's hot wallet; `tx_hash` known) → `confirmed` (required depth; the
//! hold settles) or `failed` (the hold is released in full, `failure_reason` says why). The
//! transaction itself is an outgoing transaction of the engine (`crate::outgoing`).

pub mod costs;
mod flow;
mod record;
pub mod settle;

use serde::Serialize;

pub use costs::{mul_div_ceil, withdrawal_costs, Costs, FeePolicy, Rate, BPS};
pub use flow::{
    check_quote_usable, controls_refusal, create_quote, execute, on_outgoing, ExecuteIds,
    HotWallet, QuoteRequest,
};
pub use record::{
    Quote, QuoteView, Withdrawal, WithdrawalReads, WithdrawalRepo, WithdrawalStep, WithdrawalView,
    QUOTE_LIFETIME_MS,
};
pub use settle::{settlement, Settlement};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WithdrawalStatus {
    Reserved,
    Broadcasted,
    Confirmed,
    Failed,
}

impl WithdrawalStatus {
    pub const ALL: [WithdrawalStatus; 4] = [
        WithdrawalStatus::Reserved,
        WithdrawalStatus::Broadcasted,
        WithdrawalStatus::Confirmed,
        WithdrawalStatus::Failed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            WithdrawalStatus::Reserved => "reserved",
            WithdrawalStatus::Broadcasted => "broadcasted",
            WithdrawalStatus::Confirmed => "confirmed",
            WithdrawalStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        WithdrawalStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The only legal moves: a withdrawal ends once, confirmed or failed.
    pub fn can_move_to(self, next: WithdrawalStatus) -> bool {
        use WithdrawalStatus::*;
        matches!(
            (self, next),
            (Reserved, Broadcasted)
                | (Reserved, Failed)
                | (Broadcasted, Confirmed)
                | (Broadcasted, Failed)
        )
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod state_tests {
    use super::*;

    #[test]
    fn a_withdrawal_ends_once() {
        use WithdrawalStatus::*;
        for s in WithdrawalStatus::ALL {
            assert_eq!(WithdrawalStatus::parse(s.as_str()), Some(s));
        }
        assert!(Reserved.can_move_to(Broadcasted));
        assert!(Broadcasted.can_move_to(Confirmed));
        assert!(Broadcasted.can_move_to(Failed));
        for end in [Confirmed, Failed] {
            for next in WithdrawalStatus::ALL {
                assert!(!end.can_move_to(next), "{end:?} -> {next:?}");
            }
        }
        assert!(
            !Reserved.can_move_to(Confirmed),
            "never confirmed without a transaction"
        );
    }
}
