//! The decentralized exchange used for swaps on BSC.

use async_trait::async_trait;

use crate::amount::Amount;
use crate::error::{PortError, Retry};

/// How a [`DexRouter`] error's message starts when the router itself reverted the quote (no
/// pair, no liquidity): the one failure that means a path has no pool. Anything else — a node
/// that cannot be reached, a method the endpoint lacks, invalid parameters, a router that is not
/// the configured one — means the router cannot quote now, whatever its pools.
pub const ROUTER_REVERTED: &str = "the router reverted";

/// Whether `e` says the path has no pool (see [`ROUTER_REVERTED`]).
pub fn is_no_pool(e: &PortError) -> bool {
    e.retry == Retry::Permanent && e.message.starts_with(ROUTER_REVERTED)
}

/// Quotes on a constant-product router (PancakeSwap-style `getAmountsOut`).
///
/// An implementation:
/// - MUST answer from the chain state at the time of the call and MUST NOT cache quotes: the
///   core applies its own expiry and slippage bound.
/// - MUST return one amount per hop of `path` (first = `amount_in`), as the router does.
/// - MUST classify failures transient or permanent; a path without liquidity is permanent and
///   its message starts with [`ROUTER_REVERTED`], which no other failure's does.
#[async_trait]
pub trait DexRouter: Send + Sync {
    /// Router contract address (EIP-55).
    fn router_address(&self) -> String;

    /// Expected amounts along `path` (token contract addresses) for `amount_in`.
    async fn amounts_out(
        &self,
        amount_in: Amount,
        path: &[String],
    ) -> Result<Vec<Amount>, PortError>;
}
