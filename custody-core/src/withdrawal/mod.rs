//! Withdrawals: a user's funds leaving to an external address (decisions §3, §4, §11).
//!
//! States: `reserved` (the quote was executed and the total is held) → `broadcasted` (signed
//! and sent from the network's hot wallet; `tx_hash` known) → `confirmed` (required depth; the
//! hold settles) or `failed` (the hold is released in full, `failure_reason` says why). The
//! transaction itself is an outgoing transaction of the engine (`crate::outgoing`).

mod config;
pub mod costs;
mod flow;
pub mod quoting;
mod record;
pub mod settle;

pub use config::{default_fee_policy, fee_policies, FeePolicyConfig};
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

stored_enum! {
    WithdrawalStatus {
        Reserved => "reserved",
        Broadcasted => "broadcasted",
        Confirmed => "confirmed",
        Failed => "failed",
    }
    // A withdrawal ends once, confirmed or failed.
    moves {
        Reserved => Broadcasted,
        Reserved => Failed,
        Broadcasted => Confirmed,
        Broadcasted => Failed,
    }
}

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
