//! What the native coin costs in a token, for the network cost of a token withdrawal or swap
//! (decisions §11, §12) and the cost test of a token sweep (§13): on BSC the DEX router's own
//! quote of one BNB, on TRON a rate the operator configures (`[[native_rates]]`).

mod config;

pub use config::{native_rates, NativeRateConfig};

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

/// Seconds a client should wait when the chain cannot price a quote.
pub const CHAIN_RETRY_AFTER_S: u64 = 5;

/// `network` cannot be reached to price `priced` ("this withdrawal", "this swap") now: 503
/// `CHAIN_UNAVAILABLE` with a retry hint.
pub fn chain_unavailable(
    network: crate::network::Network,
    priced: &str,
    why: impl std::fmt::Display,
) -> crate::error::Refusal {
    crate::error::Refusal::new(
        crate::error::ErrorCode::ChainUnavailable,
        format!("{network} cannot be reached to price {priced}: {why}"),
    )
    .retry_after(CHAIN_RETRY_AFTER_S)
}

/// A quote not made: what to answer, and, when a chain or price source failed, the step that
/// failed with the provider's detail, for the log (interface §7: endpoints and node texts are
/// logged, never shown).
#[derive(Debug)]
pub struct QuoteFailure {
    pub error: crate::error::CoreError,
    pub log: Option<(&'static str, String)>,
}

impl QuoteFailure {
    /// The step `what` failed at a chain or price source: `answer` is shown, `detail` only
    /// logged.
    pub fn chain(
        answer: crate::error::Refusal,
        what: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        QuoteFailure {
            error: answer.into(),
            log: Some((what, detail.into())),
        }
    }
}

impl<E: Into<crate::error::CoreError>> From<E> for QuoteFailure {
    fn from(e: E) -> Self {
        QuoteFailure {
            error: e.into(),
            log: None,
        }
    }
}

/// Where the native coin's price in an asset comes from, for the network cost of a payment in
/// it (decisions §11): none for the native coin itself, the DEX router's quote on BSC, the
/// operator's configured rate on TRON.
#[derive(Clone, Copy)]
pub enum NativePrice<'a> {
    Native,
    Dex {
        router: &'a dyn DexRouter,
        wrapped: &'a str,
    },
    Configured(Rate),
}

impl std::fmt::Debug for NativePrice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NativePrice::Native => f.write_str("Native"),
            NativePrice::Dex { wrapped, .. } => write!(f, "Dex {{ wrapped: {wrapped} }}"),
            NativePrice::Configured(r) => write!(f, "Configured({r:?})"),
        }
    }
}

/// The source that prices the network cost of a payment in `asset`, from what is configured:
/// `dex` (the router and the wrapped native coin) and `configured` (a rate for `asset`). `Err`
/// names what is missing.
pub fn native_price_source<'a>(
    asset: &Asset,
    dex: Option<(&'a dyn DexRouter, &'a str)>,
    configured: Option<Rate>,
) -> Result<NativePrice<'a>, String> {
    match (asset.network, &asset.contract) {
        (_, None) => Ok(NativePrice::Native),
        (crate::Network::Bsc, Some(_)) => dex
            .map(|(router, wrapped)| NativePrice::Dex { router, wrapped })
            .ok_or_else(|| "no DEX router to price the network cost".to_owned()),
        (crate::Network::Tron, Some(_)) => configured
            .map(NativePrice::Configured)
            .ok_or_else(|| format!("no price of the native coin in {}", asset.code)),
    }
}

impl NativePrice<'_> {
    /// The native coin's price in `asset` from this source; `Err` says why there is none.
    pub async fn rate(&self, asset: &Asset) -> Result<Rate, String> {
        match self {
            NativePrice::Native => Ok(Rate::NATIVE),
            NativePrice::Dex { router, wrapped } => native_rate(*router, wrapped, asset).await,
            NativePrice::Configured(rate) => Ok(*rate),
        }
    }
}
