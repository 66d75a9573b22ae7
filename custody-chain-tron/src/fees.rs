//! The inputs of the core's TRON resource planner ([`custody_core::tron::resources`]), read
//! from the node, and the resources a transaction actually used, read back from its info.
//! Every rule and every sum is the core's: this module only turns node answers into the
//! planner's types.
//!
//! - prices: `wallet/getchainparameters` ([`resource_prices`]);
//! - what the sending account has left: `wallet/getaccountresource`
//!   ([`available_resources`]; `EnergyLimit` counts energy delegated to the account);
//! - the operation: whether a TRX recipient exists (`wallet/getaccount`), whether a TRC20
//!   recipient holds the token (`balanceOf`), and the node's energy estimate of a call
//!   (`wallet/triggerconstantcontract`, read by the sender);
//! - what was charged: `wallet/gettransactioninfobyid` ([`actual_resources`]).

use custody_core::address::TronAddress;
use custody_core::error::PortError;
pub use custody_core::tron::resources::{
    fee_limit_sun, plan, ActualResources, AvailableResources, BandwidthSource, Operation,
    PlanInputs, ResourcePlan, ResourcePrices, TRC20_TRANSFER_BANDWIDTH_BYTES,
    TRC20_TRANSFER_ENERGY_HOLDER, TRC20_TRANSFER_ENERGY_NEW_HOLDER, TRX_TRANSFER_BANDWIDTH_BYTES,
};

use crate::api;
use crate::client::TronClient;

/// The planner's margin when none is configured (the sender's default).
pub const ENERGY_MARGIN_PERCENT: u64 = 20;

/// The four prices of the node's chain parameters.
pub fn resource_prices(params: &api::ChainParameters) -> ResourcePrices {
    ResourcePrices::from_parameters(
        params
            .chain_parameter
            .iter()
            .map(|c| (c.key.as_str(), c.value)),
    )
}

/// What the account has left, from its `wallet/getaccountresource` answer.
pub fn available_resources(r: &api::AccountResource) -> AvailableResources {
    AvailableResources::from_limits(
        (r.free_net_limit, r.free_net_used),
        (r.net_limit, r.net_used),
        (r.energy_limit, r.energy_used),
    )
}

/// What the transaction used and burned, from its info. A negative figure (which no node
/// writes) reads as 0.
pub fn actual_resources(info: &api::TransactionInfo) -> ActualResources {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    let r = info.receipt.clone().unwrap_or_default();
    ActualResources {
        energy_usage: n(r.energy_usage),
        energy_usage_total: n(r.energy_usage_total),
        energy_fee: n(r.energy_fee),
        net_usage: n(r.net_usage),
        net_fee: n(r.net_fee),
        fee: n(info.fee),
    }
}

/// The client calls that gather [`PlanInputs`].
impl TronClient {
    pub async fn resource_prices(&self) -> Result<ResourcePrices, PortError> {
        Ok(resource_prices(&self.chain_parameters().await?))
    }

    pub async fn available_resources(
        &self,
        address: &TronAddress,
    ) -> Result<AvailableResources, PortError> {
        Ok(available_resources(&self.account_resource(address).await?))
    }

    /// Inputs for a TRX transfer from `from` to `to`, with the documented size of a transfer
    /// (three reads: resources, prices, whether `to` exists).
    pub async fn trx_plan_inputs(
        &self,
        from: &TronAddress,
        to: &TronAddress,
    ) -> Result<PlanInputs, PortError> {
        Ok(PlanInputs {
            operation: Operation::TrxTransfer {
                recipient_exists: self.account(to).await?.is_some(),
            },
            bandwidth_bytes: TRX_TRANSFER_BANDWIDTH_BYTES,
            available: self.available_resources(from).await?,
            prices: self.resource_prices().await?,
            energy_margin_percent: ENERGY_MARGIN_PERCENT,
        })
    }

    /// Inputs for a TRC20 `transfer` of `token` from `from` to `to` without the node's energy
    /// estimate: the documented energy for a holder or a new holder (three reads: resources,
    /// prices, the recipient's token balance). For a payment that cannot be simulated yet
    /// (the sender does not hold the tokens, as before a sweep's funding).
    pub async fn trc20_plan_inputs(
        &self,
        from: &TronAddress,
        token: &TronAddress,
        to: &TronAddress,
    ) -> Result<PlanInputs, PortError> {
        let holds = self.trc20_balance(token, to).await? > 0;
        Ok(PlanInputs {
            operation: Operation::Trc20Transfer {
                recipient_holds_token: holds,
                estimated_energy: None,
            },
            bandwidth_bytes: TRC20_TRANSFER_BANDWIDTH_BYTES,
            available: self.available_resources(from).await?,
            prices: self.resource_prices().await?,
            energy_margin_percent: ENERGY_MARGIN_PERCENT,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_answers_become_planner_inputs() {
        let params: api::ChainParameters = serde_json::from_str(
            r#"{"chainParameter":[{"key":"getTransactionFee","value":1000},
                {"key":"getEnergyFee","value":210},{"key":"getAllowTvmCompatibleEvm"}]}"#,
        )
        .unwrap();
        let p = resource_prices(&params);
        assert_eq!((p.energy_sun, p.bandwidth_sun), (210, 1_000));
        let r: api::AccountResource = serde_json::from_str(
            r#"{"freeNetUsed":441,"freeNetLimit":600,"EnergyLimit":5,"EnergyUsed":9}"#,
        )
        .unwrap();
        assert_eq!(
            available_resources(&r),
            AvailableResources {
                free_bandwidth: 159,
                staked_bandwidth: 0,
                energy: 0
            }
        );
    }

    #[test]
    fn actual_resources_read_the_receipt_and_the_fee() {
        let info: api::TransactionInfo = serde_json::from_str(
            r#"{"id":"ab","fee":6773500,"blockNumber":5,"receipt":{"energy_usage":1000,
                "energy_fee":6328500,"energy_usage_total":64285,"net_fee":345000,
                "result":"SUCCESS"}}"#,
        )
        .unwrap();
        assert_eq!(
            actual_resources(&info),
            ActualResources {
                energy_usage: 1_000,
                energy_usage_total: 64_285,
                energy_fee: 6_328_500,
                net_usage: 0,
                net_fee: 345_000,
                fee: 6_773_500,
            }
        );
        // A TRX transfer paid from the free allowance: no fee, no energy.
        let info: api::TransactionInfo =
            serde_json::from_str(r#"{"id":"ab","blockNumber":5,"receipt":{"net_usage":268}}"#)
                .unwrap();
        assert_eq!(
            actual_resources(&info),
            ActualResources {
                net_usage: 268,
                ..ActualResources::default()
            }
        );
    }
}
