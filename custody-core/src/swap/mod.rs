//! Swaps on BSC through a Uniswap-V2-compatible router (decisions §3, §4, §12).
//!
//! States are a withdrawal's: `reserved` (the quote was executed and the total is held in
//! `asset_in`) → `broadcasted` (the router call was signed and sent from the BSC hot wallet) →
//! `confirmed` (required depth; the hold settles and the user is credited the output actually
//! received, read from the receipt) or `failed` (the hold is released in full, `failure_reason`
//! says why). The transaction is an outgoing transaction of the engine (`crate::outgoing`).

mod config;
pub mod costs;
mod flow;
pub mod quoting;
mod record;

pub use crate::withdrawal::WithdrawalStatus as SwapStatus;
pub use config::{RouterAddresses, SwapLimitConfig, SwapPair, SwapsConfig};
pub use costs::{
    min_amount_out, swap_costs, SLIPPAGE_BPS_DEFAULT, SLIPPAGE_BPS_MAX, SLIPPAGE_BPS_MIN,
};
pub use flow::{
    actual_amounts, controls_refusal, create_quote, execute, on_outgoing, revoke_stale_approvals,
    RouterSettings, SwapExecuteIds, SwapQuoteRequest,
};
pub use record::{
    Allowance, Swap, SwapQuote, SwapQuoteView, SwapReads, SwapRepo, SwapView,
    SWAP_QUOTE_LIFETIME_MS,
};
