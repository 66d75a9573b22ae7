//! What the native coin costs in a token, for the network cost of a token withdrawal or swap
//! (decisions §11, §12) and the cost test of a token sweep (§13): on BSC the DEX router's own
//! quote of one BNB.

use crate::amount::Amount;
use crate::asset::Asset;
use crate::ports::dex::DexRouter;
use crate::withdrawal::Rate;

/// One BNB in wei: the amount the router prices BNB at in a token.
const ONE_BNB: u128 = 1_000_000_000_000_000_000;

/// BNB's price in `asset` at the router (what one BNB buys of it along [wrapped, token]);
/// [`Rate::NATIVE`] for BNB itself. `Err` says why it cannot be priced.
pub async fn native_rate(
    dex: &dyn DexRouter,
    wrapped: &str,
    asset: &Asset,
) -> Result<Rate, String> {
    let Some(token) = &asset.contract else {
        return Ok(Rate::NATIVE);
    };
    let amounts = dex
        .amounts_out(
            Amount::from_units(ONE_BNB),
            &[wrapped.to_owned(), token.clone()],
        )
        .await
        .map_err(|e| {
            format!(
                "no price of BNB in {} at the router: {}",
                asset.code, e.message
            )
        })?;
    match amounts.last() {
        Some(out) if !out.is_zero() => Ok(Rate {
            asset_units: *out,
            native_units: Amount::from_units(ONE_BNB),
        }),
        _ => Err(format!("the router gives no {} for BNB", asset.code)),
    }
}
