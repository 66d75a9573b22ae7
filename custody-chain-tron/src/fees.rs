//! What a TRON transaction will burn, in sun, from what the sending account has staked and
//! what the chain charges. [`estimate`] is pure; [`TronClient::trx_fee_inputs`] and
//! [`TronClient::trc20_fee_inputs`] gather its inputs.
//!
//! The rules (developers.tron.network "Resource Model"; java-tron `BandwidthProcessor` and
//! `EnergyProcessor`):
//!
//! - **Bandwidth**: a transaction needs as many bandwidth points as its bytes (see
//!   [`SignedTransaction::bandwidth_bytes`](crate::tx::SignedTransaction::bandwidth_bytes)).
//!   They come whole from one source, in order: the account's staked bandwidth
//!   (`NetLimit - NetUsed`), then its daily free bandwidth (`freeNetLimit - freeNetUsed`);
//!   when neither covers the whole transaction, `bytes × getTransactionFee` sun are burned.
//! - **Account creation**: a TRX transfer to an address the chain does not know creates it. It
//!   then uses staked bandwidth if it covers the transaction, else burns `getCreateAccountFee`
//!   (0.1 TRX) instead of the bandwidth fee, and always burns
//!   `getCreateNewAccountFeeInSystemContract` (1 TRX).
//! - **Energy**: contract execution takes energy from the account's staked energy
//!   (`EnergyLimit - EnergyUsed`) first, partially if need be; the rest burns
//!   `getEnergyFee` sun per unit, and the burn must stay within the transaction's `fee_limit`.
//!   A USDT-style TRC20 `transfer` costs about [`TRC20_TRANSFER_ENERGY_HOLDER`] when the
//!   recipient already holds the token and about [`TRC20_TRANSFER_ENERGY_NEW_HOLDER`] when not
//!   (a new balance slot is written).

use custody_core::address::TronAddress;
use custody_core::error::PortError;
use serde::Serialize;

use crate::api;
use crate::client::TronClient;

/// Energy of a TRC20 `transfer` to an address that already holds the token.
pub const TRC20_TRANSFER_ENERGY_HOLDER: u64 = 65_000;
/// Energy of a TRC20 `transfer` to an address with no balance of the token yet.
pub const TRC20_TRANSFER_ENERGY_NEW_HOLDER: u64 = 130_000;
/// Bandwidth of a signed single-signature TRX transfer (`TransferContract`) of 2.1 to 268
/// TRX, the 64 bytes of result included (a varint byte more or less outside that range); the
/// oracle test checks it against built transactions.
pub const TRX_TRANSFER_BANDWIDTH_BYTES: u64 = 268;
/// Bandwidth of a signed single-signature TRC20 `transfer` with a `fee_limit`.
pub const TRC20_TRANSFER_BANDWIDTH_BYTES: u64 = 345;

/// Chain prices, from `wallet/getchainparameters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourcePrices {
    /// `getEnergyFee`: sun per energy unit.
    pub energy_sun: u64,
    /// `getTransactionFee`: sun per bandwidth point.
    pub bandwidth_sun: u64,
    /// `getCreateAccountFee`: burned instead of bandwidth when a transfer creates an account.
    pub create_account_sun: u64,
    /// `getCreateNewAccountFeeInSystemContract`: burned when a transfer creates an account.
    pub create_account_system_sun: u64,
}

impl ResourcePrices {
    /// Mainnet values at the time of writing (energy 100 sun, bandwidth 1000 sun, account
    /// creation 0.1 + 1 TRX); use [`ResourcePrices::from_chain_parameters`] for live ones.
    pub const MAINNET: ResourcePrices = ResourcePrices {
        energy_sun: 100,
        bandwidth_sun: 1_000,
        create_account_sun: 100_000,
        create_account_system_sun: 1_000_000,
    };

    /// Reads the four prices; a missing key keeps the [`ResourcePrices::MAINNET`] value (a
    /// zero-valued parameter is printed without `value` and reads as 0).
    pub fn from_chain_parameters(params: &api::ChainParameters) -> Self {
        let mut p = ResourcePrices::MAINNET;
        for c in &params.chain_parameter {
            let v = u64::try_from(c.value).unwrap_or(0);
            match c.key.as_str() {
                "getEnergyFee" => p.energy_sun = v,
                "getTransactionFee" => p.bandwidth_sun = v,
                "getCreateAccountFee" => p.create_account_sun = v,
                "getCreateNewAccountFeeInSystemContract" => p.create_account_system_sun = v,
                _ => {}
            }
        }
        p
    }
}

/// What the sending account has left today, from `wallet/getaccountresource`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AvailableResources {
    pub free_bandwidth: u64,
    pub staked_bandwidth: u64,
    pub staked_energy: u64,
}

impl AvailableResources {
    pub fn from_account_resource(r: &api::AccountResource) -> Self {
        let left = |limit: i64, used: i64| u64::try_from(limit.saturating_sub(used)).unwrap_or(0);
        AvailableResources {
            free_bandwidth: left(r.free_net_limit, r.free_net_used),
            staked_bandwidth: left(r.net_limit, r.net_used),
            staked_energy: left(r.energy_limit, r.energy_used),
        }
    }
}

/// What one transaction needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TxNeeds {
    pub bandwidth_bytes: u64,
    pub energy: u64,
    /// A TRX transfer to an address the chain does not know yet.
    pub creates_account: bool,
}

/// Everything [`estimate`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FeeInputs {
    pub needs: TxNeeds,
    pub available: AvailableResources,
    pub prices: ResourcePrices,
}

/// Where the bandwidth came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthSource {
    Staked,
    Free,
    Burned,
}

/// The estimated cost, in sun.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FeeEstimate {
    pub bandwidth_source: BandwidthSource,
    pub bandwidth_sun: u64,
    pub energy_from_stake: u64,
    pub energy_burned: u64,
    pub energy_sun: u64,
    pub account_creation_sun: u64,
    pub total_sun: u64,
}

/// The TRX a transaction will burn, in sun. Saturates instead of overflowing.
pub fn estimate(inputs: &FeeInputs) -> FeeEstimate {
    let FeeInputs {
        needs,
        available,
        prices,
    } = *inputs;
    let bytes = needs.bandwidth_bytes;
    let (bandwidth_source, bandwidth_sun, account_creation_sun) = if needs.creates_account {
        let system = prices.create_account_system_sun;
        if available.staked_bandwidth >= bytes {
            (BandwidthSource::Staked, 0, system)
        } else {
            (
                BandwidthSource::Burned,
                0,
                system.saturating_add(prices.create_account_sun),
            )
        }
    } else if available.staked_bandwidth >= bytes {
        (BandwidthSource::Staked, 0, 0)
    } else if available.free_bandwidth >= bytes {
        (BandwidthSource::Free, 0, 0)
    } else {
        (
            BandwidthSource::Burned,
            bytes.saturating_mul(prices.bandwidth_sun),
            0,
        )
    };
    let energy_from_stake = needs.energy.min(available.staked_energy);
    let energy_burned = needs.energy - energy_from_stake;
    let energy_sun = energy_burned.saturating_mul(prices.energy_sun);
    FeeEstimate {
        bandwidth_source,
        bandwidth_sun,
        energy_from_stake,
        energy_burned,
        energy_sun,
        account_creation_sun,
        total_sun: bandwidth_sun
            .saturating_add(energy_sun)
            .saturating_add(account_creation_sun),
    }
}

/// A `fee_limit` (sun) that lets `energy` units burn even with no staked energy, plus
/// `margin_percent` for price or usage changes between estimate and execution.
pub fn fee_limit_sun(energy: u64, prices: &ResourcePrices, margin_percent: u64) -> u64 {
    let base = energy.saturating_mul(prices.energy_sun);
    base.saturating_add(base.saturating_mul(margin_percent) / 100)
}

/// The energy of a TRC20 transfer, by whether the recipient already holds the token.
pub fn trc20_transfer_energy(recipient_holds_token: bool) -> u64 {
    if recipient_holds_token {
        TRC20_TRANSFER_ENERGY_HOLDER
    } else {
        TRC20_TRANSFER_ENERGY_NEW_HOLDER
    }
}

/// The client calls that gather [`FeeInputs`].
impl TronClient {
    pub async fn resource_prices(&self) -> Result<ResourcePrices, PortError> {
        Ok(ResourcePrices::from_chain_parameters(
            &self.chain_parameters().await?,
        ))
    }

    pub async fn available_resources(
        &self,
        address: &TronAddress,
    ) -> Result<AvailableResources, PortError> {
        Ok(AvailableResources::from_account_resource(
            &self.account_resource(address).await?,
        ))
    }

    /// Inputs for a TRX transfer from `from` to `to` (three reads: resources, prices, whether
    /// `to` exists).
    pub async fn trx_fee_inputs(
        &self,
        from: &TronAddress,
        to: &TronAddress,
    ) -> Result<FeeInputs, PortError> {
        Ok(FeeInputs {
            needs: TxNeeds {
                bandwidth_bytes: TRX_TRANSFER_BANDWIDTH_BYTES,
                energy: 0,
                creates_account: self.account(to).await?.is_none(),
            },
            available: self.available_resources(from).await?,
            prices: self.resource_prices().await?,
        })
    }

    /// Inputs for a TRC20 `transfer` of `token` from `from` to `to` (three reads: resources,
    /// prices, the recipient's token balance).
    pub async fn trc20_fee_inputs(
        &self,
        from: &TronAddress,
        token: &TronAddress,
        to: &TronAddress,
    ) -> Result<FeeInputs, PortError> {
        let holds = self.trc20_balance(token, to).await? > 0;
        Ok(FeeInputs {
            needs: TxNeeds {
                bandwidth_bytes: TRC20_TRANSFER_BANDWIDTH_BYTES,
                energy: trc20_transfer_energy(holds),
                creates_account: false,
            },
            available: self.available_resources(from).await?,
            prices: self.resource_prices().await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(needs: TxNeeds, available: AvailableResources) -> FeeInputs {
        FeeInputs {
            needs,
            available,
            prices: ResourcePrices::MAINNET,
        }
    }

    const TRC20_NEW: TxNeeds = TxNeeds {
        bandwidth_bytes: TRC20_TRANSFER_BANDWIDTH_BYTES,
        energy: TRC20_TRANSFER_ENERGY_NEW_HOLDER,
        creates_account: false,
    };

    #[test]
    fn nothing_staked_burns_bandwidth_and_all_energy() {
        let e = estimate(&inputs(TRC20_NEW, AvailableResources::default()));
        assert_eq!(e.bandwidth_source, BandwidthSource::Burned);
        assert_eq!(e.bandwidth_sun, 345_000);
        assert_eq!(e.energy_sun, 13_000_000);
        assert_eq!(e.total_sun, 13_345_000);
    }

    #[test]
    fn free_bandwidth_is_used_whole_or_not_at_all() {
        let mut available = AvailableResources {
            free_bandwidth: 600,
            ..Default::default()
        };
        let e = estimate(&inputs(TRC20_NEW, available));
        assert_eq!(
            (e.bandwidth_source, e.bandwidth_sun),
            (BandwidthSource::Free, 0)
        );
        available.free_bandwidth = 344;
        let e = estimate(&inputs(TRC20_NEW, available));
        assert_eq!(e.bandwidth_sun, 345_000, "344 free points pay nothing");
        available.staked_bandwidth = 345;
        let e = estimate(&inputs(TRC20_NEW, available));
        assert_eq!(e.bandwidth_source, BandwidthSource::Staked);
    }

    #[test]
    fn staked_energy_is_used_first_and_partially() {
        let available = AvailableResources {
            free_bandwidth: 600,
            staked_energy: 100_000,
            ..Default::default()
        };
        let e = estimate(&inputs(TRC20_NEW, available));
        assert_eq!(e.energy_from_stake, 100_000);
        assert_eq!(e.energy_burned, 30_000);
        assert_eq!(e.total_sun, 3_000_000);
        let holder = TxNeeds {
            energy: trc20_transfer_energy(true),
            ..TRC20_NEW
        };
        assert_eq!(estimate(&inputs(holder, available)).total_sun, 0);
    }

    #[test]
    fn creating_an_account_costs_one_trx_plus_bandwidth_or_a_tenth() {
        let needs = TxNeeds {
            bandwidth_bytes: TRX_TRANSFER_BANDWIDTH_BYTES,
            energy: 0,
            creates_account: true,
        };
        // Free bandwidth does not pay for account creation.
        let free_only = AvailableResources {
            free_bandwidth: 600,
            ..Default::default()
        };
        assert_eq!(estimate(&inputs(needs, free_only)).total_sun, 1_100_000);
        let staked = AvailableResources {
            staked_bandwidth: 1_000,
            ..Default::default()
        };
        assert_eq!(estimate(&inputs(needs, staked)).total_sun, 1_000_000);
        let existing = TxNeeds {
            creates_account: false,
            ..needs
        };
        assert_eq!(estimate(&inputs(existing, free_only)).total_sun, 0);
        assert_eq!(
            estimate(&inputs(existing, AvailableResources::default())).total_sun,
            268_000
        );
    }

    #[test]
    fn prices_and_resources_read_from_node_answers() {
        let params: api::ChainParameters = serde_json::from_str(
            r#"{"chainParameter":[{"key":"getTransactionFee","value":1000},
                {"key":"getEnergyFee","value":210},{"key":"getAllowTvmCompatibleEvm"}]}"#,
        )
        .unwrap();
        let p = ResourcePrices::from_chain_parameters(&params);
        assert_eq!((p.energy_sun, p.bandwidth_sun), (210, 1_000));
        let r: api::AccountResource = serde_json::from_str(
            r#"{"freeNetUsed":441,"freeNetLimit":600,"EnergyLimit":5,"EnergyUsed":9}"#,
        )
        .unwrap();
        assert_eq!(
            AvailableResources::from_account_resource(&r),
            AvailableResources {
                free_bandwidth: 159,
                staked_bandwidth: 0,
                staked_energy: 0
            }
        );
        assert_eq!(fee_limit_sun(130_000, &p, 20), 32_760_000);
        assert_eq!(fee_limit_sun(u64::MAX, &p, 20), u64::MAX);
    }
}
