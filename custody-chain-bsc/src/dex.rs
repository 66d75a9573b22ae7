//! The DEX router on BSC: the [`DexRouter`] port over a Uniswap-V2-compatible router
//! (PancakeSwap V2 on mainnet), through the chain's endpoints.
//!
//! `amounts_out` is the router's own `getAmountsOut(amountIn, path)` run with `eth_call` at the
//! latest block: never a price computed here, nor a fee constant that might not match the
//! router. A call the router reverts (no pair, no liquidity, an identical pair of tokens) is a
//! permanent error starting with [`ROUTER_REVERTED`]; an endpoint that refuses the call itself
//! (method not found, invalid params) is permanent without it; a node that cannot be reached,
//! a transient one.
//!
//! Before its first quote the router is checked once against the configuration: its
//! `factory()` and `WETH()` must be the configured factory and wrapped coin, or every quote is
//! refused (a router of another DEX, or a typo, would price and swap against the wrong pools).

use std::sync::Arc;

use alloy_sol_types::SolCall;
use async_trait::async_trait;
use custody_core::address::BscAddress;
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::ports::dex::{is_no_pool, DexRouter, ROUTER_REVERTED};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::{codec, BscChain};

const PORT: &str = "chain.bsc.dex";

alloy_sol_types::sol! {
    function getAmountsOut(uint256 amountIn, address[] path) returns (uint256[] amounts);
    function factory() returns (address);
    function WETH() returns (address);
}

/// Where the router is, and what it must be built on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DexSettings {
    pub router: BscAddress,
    pub factory: BscAddress,
    pub wrapped_native: BscAddress,
}

pub struct BscDexRouter {
    chain: Arc<BscChain>,
    settings: DexSettings,
    /// Set once the router was found built on the configured factory and wrapped coin; a
    /// mismatch is not remembered (one lagging or wrong endpoint must not stop quotes for good).
    checked: OnceCell<()>,
}

fn address_word(a: &BscAddress) -> alloy_primitives::Address {
    alloy_primitives::Address::from(*a.as_bytes())
}

impl BscDexRouter {
    pub fn new(chain: Arc<BscChain>, settings: DexSettings) -> Self {
        BscDexRouter {
            chain,
            settings,
            checked: OnceCell::new(),
        }
    }

    /// `eth_call` of `data` on the router: the returned bytes, or the node's refusal (a
    /// revert) as a permanent error.
    async fn call(&self, data: Vec<u8>) -> Result<Vec<u8>, PortError> {
        let answer = self
            .chain
            .rpc()
            .call_raw(
                "eth_call",
                json!([{
                    "to": self.settings.router.to_lowercase_hex(),
                    "data": format!("0x{}", hex::encode(data)),
                }, "latest"]),
            )
            .await?;
        match answer {
            Ok(v) => codec::data(&v)
                .map_err(|e| PortError::permanent(PORT, format!("malformed answer: {e}"))),
            // A revert (no pair, no liquidity) is the router's answer; a node that lags
            // ("header not found") or is busy is not, and neither is an endpoint that refuses
            // the call itself (method not found, invalid params): that says nothing of pools.
            Err(refusal) if refusal.is_revert() => Err(PortError::permanent(
                PORT,
                format!("{ROUTER_REVERTED}: {}", refusal.message),
            )),
            Err(refusal) if refusal.is_permanent() => Err(PortError::permanent(
                PORT,
                format!("the node refused the router call: {}", refusal.message),
            )),
            Err(refusal) => Err(PortError::transient(
                PORT,
                format!("the node could not run the call: {}", refusal.message),
            )),
        }
    }

    async fn address_of(&self, data: Vec<u8>, what: &str) -> Result<BscAddress, PortError> {
        let word = self.call(data).await.map_err(|e| {
            if is_no_pool(&e) {
                // A contract that reverts `factory()` or `WETH()` is not a Uniswap V2 router:
                // the configuration is wrong, not a pool missing.
                PortError::permanent(
                    PORT,
                    format!(
                        "the configured router {} does not answer {what}: {}",
                        self.settings.router, e.message
                    ),
                )
            } else {
                e
            }
        })?;
        codec::word_address(&word)
            .map_err(|e| PortError::permanent(PORT, format!("the router's {what}: {e}")))
    }

    /// Checks once that the router is built on the configured factory and wrapped coin. A node
    /// that cannot be reached leaves it unchecked, to try again on the next quote.
    async fn check(&self) -> Result<(), PortError> {
        self.checked
            .get_or_try_init(|| async {
                let factory = self
                    .address_of(factoryCall {}.abi_encode(), "factory()")
                    .await?;
                let weth = self.address_of(WETHCall {}.abi_encode(), "WETH()").await?;
                let s = &self.settings;
                if factory != s.factory || weth != s.wrapped_native {
                    return Err(PortError::permanent(
                        PORT,
                        format!(
                            "the router {} is built on factory {factory} and wrapped coin {weth}, \
                             not the configured [swaps] factory {} and wrapped_native {}",
                            s.router, s.factory, s.wrapped_native
                        ),
                    ));
                }
                Ok(())
            })
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl DexRouter for BscDexRouter {
    fn router_address(&self) -> String {
        self.settings.router.to_string()
    }

    async fn amounts_out(
        &self,
        amount_in: Amount,
        path: &[String],
    ) -> Result<Vec<Amount>, PortError> {
        self.check().await?;
        let path = path
            .iter()
            .map(|t| {
                BscAddress::parse(t)
                    .map(|a| address_word(&a))
                    .map_err(|e| PortError::permanent(PORT, format!("path token {t:?}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let hops = path.len();
        let data = getAmountsOutCall {
            amountIn: alloy_primitives::U256::from(amount_in.units()),
            path,
        }
        .abi_encode();
        let bytes = self.call(data).await?;
        let amounts = getAmountsOutCall::abi_decode_returns(&bytes).map_err(|e| {
            PortError::permanent(PORT, format!("malformed getAmountsOut answer: {e}"))
        })?;
        let first = alloy_primitives::U256::from(amount_in.units());
        if amounts.len() != hops || amounts.first() != Some(&first) {
            return Err(PortError::permanent(
                PORT,
                format!(
                    "getAmountsOut gave {amounts:?} for {} along {hops} tokens",
                    amount_in.units()
                ),
            ));
        }
        amounts
            .into_iter()
            .map(|a| {
                u128::try_from(a).map(Amount::from_units).map_err(|_| {
                    PortError::permanent(PORT, format!("an amount beyond 128 bits: {a}"))
                })
            })
            .collect()
    }
}
