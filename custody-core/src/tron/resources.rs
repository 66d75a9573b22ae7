//! The TRON resource planner: what one transaction needs in bandwidth and energy, where the
//! sending account gets them, and how much TRX is burned for the rest. Pure: the TRON adapter
//! reads the inputs from the node (`wallet/getaccountresource`, `wallet/getchainparameters`,
//! `wallet/triggerconstantcontract`), [`plan`] decides, and the plan is stored beside what
//! the chain actually charged ([`ActualResources`], from `wallet/gettransactioninfobyid`).
//!
//! The rules (developers.tron.network "Resource Model"; java-tron `BandwidthProcessor`,
//! `EnergyProcessor`, `TransferActuator`):
//!
//! - **Bandwidth.** A transaction needs as many bandwidth points as its signed size plus 64
//!   bytes per contract. They come *whole* from one source, in this order: the account's
//!   staked bandwidth (`NetLimit − NetUsed`), then its daily free allowance
//!   (`freeNetLimit − freeNetUsed`); when neither covers the whole transaction, nothing is
//!   taken from them and `bytes × getTransactionFee` sun are burned (java-tron consumes
//!   bandwidth from one source or burns; it never splits a transaction's bytes).
//! - **Activation.** A TRX transfer to an address the chain does not know creates the account.
//!   Its bandwidth then comes from staked bandwidth if that covers it; otherwise
//!   `getCreateAccountFee` is burned *instead of* the bandwidth fee (the free allowance does not
//!   pay for a creation). `getCreateNewAccountFeeInSystemContract` is always burned on top.
//! - **Energy.** Contract execution takes energy from the account's available energy
//!   (`EnergyLimit − EnergyUsed`: its own stake and energy delegated to it), *partially* if
//!   need be; the rest burns `getEnergyFee` sun per unit, within the transaction's
//!   `fee_limit`.
//! - **New token holders.** A TRC20 `transfer` to an address with no balance of the token
//!   writes a new storage slot: USDT's costs [`TRC20_TRANSFER_ENERGY_NEW_HOLDER`] instead of
//!   [`TRC20_TRANSFER_ENERGY_HOLDER`]. The node's own estimate (`energy_used` of
//!   `triggerconstantcontract`, which already reflects it) is used when there is one; the
//!   documented figures otherwise.
//!
//! **Arithmetic.** Every figure is a `u64` of sun, energy or bandwidth points, combined with
//! saturating operations: an overflow gives `u64::MAX`, never a wrapped small number, so a
//! figure that cannot be represented is far above any balance and the payment waits for funds
//! instead of being priced cheap. With every input up to 10^9 (prices, sizes, energies and
//! resources; mainnet's are 100 sun per energy and 130,285 energy for a USDT transfer) nothing
//! saturates and every total is the exact sum of its parts (property tests).

use serde::{Deserialize, Serialize};

/// Energy of a USDT `transfer` to an address that already holds USDT: 64,285 on mainnet, the
/// dynamic-energy penalty included (TronScan receipts, as quoted by energy-rental services:
/// docs.catfee.io "How Much Energy and Bandwidth Does a USDT Transfer Consume?", eopen.io).
pub const TRC20_TRANSFER_ENERGY_HOLDER: u64 = 64_285;
/// Energy of a USDT `transfer` to an address that never held USDT: 130,285 (same sources);
/// the new balance slot costs about 66,000 energy more.
pub const TRC20_TRANSFER_ENERGY_NEW_HOLDER: u64 = 130_285;
/// Bandwidth of a signed single-signature TRX transfer (`TransferContract`) of 2.1 to 268
/// TRX, the 64 bytes of result included (a varint byte more or less outside that range); the
/// TRON adapter's oracle test checks it against built transactions.
pub const TRX_TRANSFER_BANDWIDTH_BYTES: u64 = 268;
/// Bandwidth of a signed single-signature TRC20 `transfer` with a `fee_limit`.
pub const TRC20_TRANSFER_BANDWIDTH_BYTES: u64 = 345;

/// The chain's prices (`wallet/getchainparameters`), in sun.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourcePrices {
    /// `getEnergyFee`: per energy unit.
    pub energy_sun: u64,
    /// `getTransactionFee`: per bandwidth point.
    pub bandwidth_sun: u64,
    /// `getCreateAccountFee`: burned instead of bandwidth when a transfer creates an account.
    pub create_account_sun: u64,
    /// `getCreateNewAccountFeeInSystemContract`: burned when a transfer creates an account.
    pub create_account_system_sun: u64,
}

impl ResourcePrices {
    /// Mainnet's values: energy 100 sun since proposal #104 (29 August 2025, from 210),
    /// bandwidth 1,000 sun, account creation 0.1 TRX + 1 TRX (the samples in
    /// `tests/fixtures/tron/getchainparameters.json`). Live values come from
    /// [`ResourcePrices::from_parameters`].
    pub const MAINNET: ResourcePrices = ResourcePrices {
        energy_sun: 100,
        bandwidth_sun: 1_000,
        create_account_sun: 100_000,
        create_account_system_sun: 1_000_000,
    };

    /// The four prices from the node's `(key, value)` chain parameters. A key the node does
    /// not list keeps its [`ResourcePrices::MAINNET`] value; a negative value reads as 0 (a
    /// zero-valued parameter is printed without `value`, which the adapter reads as 0).
    pub fn from_parameters<'a>(params: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut p = ResourcePrices::MAINNET;
        for (key, value) in params {
            let v = u64::try_from(value).unwrap_or(0);
            match key {
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

/// What the sending account has left now, from `wallet/getaccountresource`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AvailableResources {
    /// `freeNetLimit − freeNetUsed`: the daily free allowance left.
    pub free_bandwidth: u64,
    /// `NetLimit − NetUsed`: bandwidth from staked TRX left.
    pub staked_bandwidth: u64,
    /// `EnergyLimit − EnergyUsed`: energy from the account's own stake and from stake
    /// delegated to it (java-tron counts both in `EnergyLimit`).
    pub energy: u64,
}

impl AvailableResources {
    /// From the node's limits and usages; a usage above its limit (the node recovers usage
    /// over 24 h and may print either first) leaves nothing, never a negative.
    pub fn from_limits(
        (free_net_limit, free_net_used): (i64, i64),
        (net_limit, net_used): (i64, i64),
        (energy_limit, energy_used): (i64, i64),
    ) -> Self {
        let left = |limit: i64, used: i64| u64::try_from(limit.saturating_sub(used)).unwrap_or(0);
        AvailableResources {
            free_bandwidth: left(free_net_limit, free_net_used),
            staked_bandwidth: left(net_limit, net_used),
            energy: left(energy_limit, energy_used),
        }
    }
}

/// What the transaction does, as far as its resources go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Operation {
    /// A TRX transfer (`TransferContract`); to an address the chain does not know, it creates
    /// the account.
    TrxTransfer { recipient_exists: bool },
    /// A TRC20 `transfer(to, amount)`. `estimated_energy`: the node's run of it
    /// (`triggerconstantcontract`), which already reflects a new holder; without one, the
    /// documented USDT figure for a holder or a new holder.
    Trc20Transfer {
        recipient_holds_token: bool,
        estimated_energy: Option<u64>,
    },
    /// A system contract that runs no code and creates no account (Stake 2.0
    /// `DelegateResourceContract`, `UnDelegateResourceContract`): bandwidth only.
    SystemContract,
}

impl Operation {
    /// The energy it needs.
    pub fn energy(&self) -> u64 {
        match *self {
            Operation::Trc20Transfer {
                estimated_energy: Some(energy),
                ..
            } => energy,
            Operation::Trc20Transfer {
                recipient_holds_token,
                estimated_energy: None,
            } => {
                if recipient_holds_token {
                    TRC20_TRANSFER_ENERGY_HOLDER
                } else {
                    TRC20_TRANSFER_ENERGY_NEW_HOLDER
                }
            }
            Operation::TrxTransfer { .. } | Operation::SystemContract => 0,
        }
    }

    fn creates_account(&self) -> bool {
        matches!(
            self,
            Operation::TrxTransfer {
                recipient_exists: false
            }
        )
    }

    fn runs_code(&self) -> bool {
        matches!(self, Operation::Trc20Transfer { .. })
    }
}

/// Everything [`plan`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanInputs {
    pub operation: Operation,
    /// Bandwidth points of the signed transaction (its size + 64).
    pub bandwidth_bytes: u64,
    pub available: AvailableResources,
    pub prices: ResourcePrices,
    /// `fee_limit` = energy × price, plus this percentage for price or usage changes between
    /// the plan and the execution.
    pub energy_margin_percent: u64,
}

/// Where a transaction's bandwidth comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthSource {
    /// The account's staked bandwidth.
    Staked,
    /// The account's daily free allowance.
    Free,
    /// Burned at `getTransactionFee` per point.
    Burned,
    /// Paid by `getCreateAccountFee`, counted in [`ResourcePlan::activation_sun`].
    CreateAccountFee,
}

/// The plan of one transaction: every figure, so that it can be checked against what the
/// chain charged ([`ActualResources`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourcePlan {
    pub operation: Operation,
    pub prices: ResourcePrices,
    /// Bandwidth points the transaction needs.
    pub bandwidth_needed: u64,
    pub bandwidth_source: BandwidthSource,
    /// Sun burned for bandwidth (0 unless the source is `Burned`).
    pub bandwidth_burn_sun: u64,
    pub energy_needed: u64,
    /// Energy taken from the account's own or delegated energy.
    pub energy_from_account: u64,
    /// Energy paid by burning TRX.
    pub energy_burned: u64,
    pub energy_burn_sun: u64,
    /// Sun burned to create the recipient's account (both creation fees).
    pub activation_sun: u64,
    /// What the transaction burns with the account's resources as they are now: bandwidth +
    /// energy + activation.
    pub total_burn_sun: u64,
    /// The `fee_limit` to build a TRC20 call with (energy × price + margin); 0 for what runs no
    /// code.
    pub fee_limit_sun: u64,
    /// The most it may burn, if the account's resources are gone by the time it executes:
    /// bandwidth burned in full, the activation, and the `fee_limit` (or the energy at the
    /// price). What the sender must hold.
    pub max_burn_sun: u64,
}

impl ResourcePlan {
    /// The most it may burn when nothing but the sending account's own transactions spends its
    /// resources before it executes (a deposit address: its bandwidth and energy, its own or
    /// lent to it, are spent by its sweeps only, one at a time): bandwidth and activation as
    /// planned now, and the energy's `fee_limit` only if the account's energy does not cover
    /// it all.
    pub fn max_burn_keeping_resources_sun(&self) -> u64 {
        let energy = if self.energy_burned == 0 {
            0
        } else if self.fee_limit_sun > 0 {
            self.fee_limit_sun
        } else {
            self.energy_burn_sun
        };
        self.bandwidth_burn_sun
            .saturating_add(self.activation_sun)
            .saturating_add(energy)
    }
}

/// The bandwidth part: (source, sun burned for bandwidth, activation sun).
fn bandwidth(
    operation: &Operation,
    bytes: u64,
    available: &AvailableResources,
    prices: &ResourcePrices,
) -> (BandwidthSource, u64, u64) {
    if operation.creates_account() {
        let system = prices.create_account_system_sun;
        return if available.staked_bandwidth >= bytes {
            (BandwidthSource::Staked, 0, system)
        } else {
            (
                BandwidthSource::CreateAccountFee,
                0,
                system.saturating_add(prices.create_account_sun),
            )
        };
    }
    if available.staked_bandwidth >= bytes {
        (BandwidthSource::Staked, 0, 0)
    } else if available.free_bandwidth >= bytes {
        (BandwidthSource::Free, 0, 0)
    } else {
        (
            BandwidthSource::Burned,
            bytes.saturating_mul(prices.bandwidth_sun),
            0,
        )
    }
}

/// `fee_limit` for `energy` units: energy × price plus `margin_percent` of it (rounded down).
/// Computed in u128 so that the margin of a large figure is exact, then saturated.
pub fn fee_limit_sun(energy: u64, prices: &ResourcePrices, margin_percent: u64) -> u64 {
    let base = u128::from(energy.saturating_mul(prices.energy_sun));
    let limit = base + base * u128::from(margin_percent) / 100;
    u64::try_from(limit).unwrap_or(u64::MAX)
}

/// Plans one transaction (see the module documentation for the rules).
pub fn plan(inputs: &PlanInputs) -> ResourcePlan {
    let PlanInputs {
        operation,
        bandwidth_bytes,
        available,
        prices,
        energy_margin_percent,
    } = *inputs;
    let (bandwidth_source, bandwidth_burn_sun, activation_sun) =
        bandwidth(&operation, bandwidth_bytes, &available, &prices);
    let energy_needed = operation.energy();
    let energy_from_account = energy_needed.min(available.energy);
    let energy_burned = energy_needed - energy_from_account;
    let energy_burn_sun = energy_burned.saturating_mul(prices.energy_sun);
    let fee_limit_sun = if operation.runs_code() {
        fee_limit_sun(energy_needed, &prices, energy_margin_percent)
    } else {
        0
    };
    // The worst case: nothing left of the account's resources when the transaction executes.
    let (_, worst_bandwidth_sun, worst_activation_sun) = bandwidth(
        &operation,
        bandwidth_bytes,
        &AvailableResources::default(),
        &prices,
    );
    let worst_energy_sun = if operation.runs_code() {
        fee_limit_sun
    } else {
        energy_needed.saturating_mul(prices.energy_sun)
    };
    ResourcePlan {
        operation,
        prices,
        bandwidth_needed: bandwidth_bytes,
        bandwidth_source,
        bandwidth_burn_sun,
        energy_needed,
        energy_from_account,
        energy_burned,
        energy_burn_sun,
        activation_sun,
        total_burn_sun: bandwidth_burn_sun
            .saturating_add(energy_burn_sun)
            .saturating_add(activation_sun),
        fee_limit_sun,
        max_burn_sun: worst_bandwidth_sun
            .saturating_add(worst_activation_sun)
            .saturating_add(worst_energy_sun),
    }
}

/// What a transaction actually used and burned, from its `receipt` and `fee` in
/// `wallet/gettransactioninfobyid` (proto3 JSON: an absent figure is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActualResources {
    /// `receipt.energy_usage`: energy taken from the account's own or delegated energy.
    pub energy_usage: u64,
    /// `receipt.energy_usage_total`: all the energy the execution used.
    pub energy_usage_total: u64,
    /// `receipt.energy_fee`: sun burned for energy.
    pub energy_fee: u64,
    /// `receipt.net_usage`: bandwidth taken from staked or free bandwidth.
    pub net_usage: u64,
    /// `receipt.net_fee`: sun burned for bandwidth (or the create-account fee).
    pub net_fee: u64,
    /// `fee`: everything burned.
    pub fee: u64,
}

#[cfg(test)]
mod tests;
