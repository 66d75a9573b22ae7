//! The decentralized exchange used for swaps on BSC.

use async_trait::async_trait;

use crate::amount::Amount;
use crate::error::PortError;

/// Quotes on a constant-product router (PancakeSwap-style `getAmountsOut`).
///
/// An implementation:
/// - MUST answer from the chain state at the time of the call and MUST NOT cache quotes: the
///   core applies its own expiry and slippage bound.
/// - MUST return one amount per hop of `path` (first = `amount_in`), as the router does.
/// - MUST classify failures transient or permanent; a path without liquidity is permanent.
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
