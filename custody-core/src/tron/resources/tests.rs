//! The planner against fixtures whose figures are documented: mainnet chain parameters
//! (getEnergyFee 100 sun since proposal #104 of 29 August 2025, 210 before it;
//! getTransactionFee 1,000 sun; getCreateAccountFee 0.1 TRX;
//! getCreateNewAccountFeeInSystemContract 1 TRX; a daily free allowance of 600 points), USDT
//! transfer energy of 64,285 to a holder and 130,285 to a new holder with about 350
//! bandwidth points (docs.catfee.io: "about 13.5 TRX" and "about 27.7 TRX" burned at 210
//! sun), and java-tron's rules (bandwidth whole from one source, energy partially, creation
//! fee instead of bandwidth).

use super::*;

const MAINNET_BEFORE_104: ResourcePrices = ResourcePrices {
    energy_sun: 210,
    ..ResourcePrices::MAINNET
};

const NONE: AvailableResources = AvailableResources {
    free_bandwidth: 0,
    staked_bandwidth: 0,
    energy: 0,
};
/// A fresh day's free allowance (mainnet `getFreeNetLimit` 600).
const FREE_600: AvailableResources = AvailableResources {
    free_bandwidth: 600,
    ..NONE
};

fn usdt(holder: bool) -> Operation {
    Operation::Trc20Transfer {
        recipient_holds_token: holder,
        estimated_energy: None,
    }
}

fn trx(exists: bool) -> Operation {
    Operation::TrxTransfer {
        recipient_exists: exists,
    }
}

struct Case {
    name: &'static str,
    operation: Operation,
    bytes: u64,
    available: AvailableResources,
    prices: ResourcePrices,
    source: BandwidthSource,
    bandwidth_burn: u64,
    energy_from_account: u64,
    energy_burn: u64,
    activation: u64,
    total: u64,
    fee_limit: u64,
    max: u64,
}

#[test]
fn plans_match_the_documented_fixtures() {
    use BandwidthSource::*;
    let b20 = TRC20_TRANSFER_BANDWIDTH_BYTES;
    let bt = TRX_TRANSFER_BANDWIDTH_BYTES;
    let cases = [
        Case {
            // 64,285 × 100 + 345 × 1,000: about 6.8 TRX.
            name: "USDT to a holder, nothing staked",
            operation: usdt(true),
            bytes: b20,
            available: NONE,
            prices: ResourcePrices::MAINNET,
            source: Burned,
            bandwidth_burn: 345_000,
            energy_from_account: 0,
            energy_burn: 6_428_500,
            activation: 0,
            total: 6_773_500,
            fee_limit: 7_714_200,
            max: 8_059_200,
        },
        Case {
            // 130,285 × 100: about 13 TRX, twice the holder's.
            name: "USDT to a new holder, nothing staked",
            operation: usdt(false),
            bytes: b20,
            available: NONE,
            prices: ResourcePrices::MAINNET,
            source: Burned,
            bandwidth_burn: 345_000,
            energy_from_account: 0,
            energy_burn: 13_028_500,
            activation: 0,
            total: 13_373_500,
            fee_limit: 15_634_200,
            max: 15_979_200,
        },
        Case {
            // docs.catfee.io at 210 sun: "approximately 27.7 TRX" (27.36 energy + 0.345).
            name: "USDT to a new holder before proposal #104",
            operation: usdt(false),
            bytes: b20,
            available: NONE,
            prices: MAINNET_BEFORE_104,
            source: Burned,
            bandwidth_burn: 345_000,
            energy_from_account: 0,
            energy_burn: 27_359_850,
            activation: 0,
            total: 27_704_850,
            fee_limit: 32_831_820,
            max: 33_176_820,
        },
        Case {
            // docs.catfee.io at 210 sun: "approximately 13.5 TRX" of energy.
            name: "USDT to a holder before proposal #104, free bandwidth",
            operation: usdt(true),
            bytes: b20,
            available: FREE_600,
            prices: MAINNET_BEFORE_104,
            source: Free,
            bandwidth_burn: 0,
            energy_from_account: 0,
            energy_burn: 13_499_850,
            activation: 0,
            total: 13_499_850,
            fee_limit: 16_199_820,
            max: 16_544_820,
        },
        Case {
            // Energy is taken partially: 50,000 delegated, 14,285 burned.
            name: "USDT to a holder with 50,000 energy delegated",
            operation: usdt(true),
            bytes: b20,
            available: AvailableResources {
                energy: 50_000,
                ..FREE_600
            },
            prices: ResourcePrices::MAINNET,
            source: Free,
            bandwidth_burn: 0,
            energy_from_account: 50_000,
            energy_burn: 1_428_500,
            activation: 0,
            total: 1_428_500,
            fee_limit: 7_714_200,
            max: 8_059_200,
        },
        Case {
            // The node's estimate wins over the documented figure.
            name: "a TRC20 transfer the node estimates at 31,895 energy, staked in full",
            operation: Operation::Trc20Transfer {
                recipient_holds_token: true,
                estimated_energy: Some(31_895),
            },
            bytes: b20,
            available: AvailableResources {
                free_bandwidth: 600,
                staked_bandwidth: 0,
                energy: 31_895,
            },
            prices: ResourcePrices::MAINNET,
            source: Free,
            bandwidth_burn: 0,
            energy_from_account: 31_895,
            energy_burn: 0,
            activation: 0,
            total: 0,
            fee_limit: 3_827_400,
            max: 4_172_400,
        },
        Case {
            // 344 free points do not pay part of 345: all of it is burned.
            name: "bandwidth is never split between the allowance and a burn",
            operation: usdt(true),
            bytes: b20,
            available: AvailableResources {
                free_bandwidth: 344,
                ..NONE
            },
            prices: ResourcePrices::MAINNET,
            source: Burned,
            bandwidth_burn: 345_000,
            energy_from_account: 0,
            energy_burn: 6_428_500,
            activation: 0,
            total: 6_773_500,
            fee_limit: 7_714_200,
            max: 8_059_200,
        },
        Case {
            name: "TRX to an existing account, free bandwidth",
            operation: trx(true),
            bytes: bt,
            available: FREE_600,
            prices: ResourcePrices::MAINNET,
            source: Free,
            bandwidth_burn: 0,
            energy_from_account: 0,
            energy_burn: 0,
            activation: 0,
            total: 0,
            fee_limit: 0,
            max: 268_000,
        },
        Case {
            // 268 points × 1,000 sun: 0.268 TRX.
            name: "TRX to an existing account, allowance used up",
            operation: trx(true),
            bytes: bt,
            available: NONE,
            prices: ResourcePrices::MAINNET,
            source: Burned,
            bandwidth_burn: 268_000,
            energy_from_account: 0,
            energy_burn: 0,
            activation: 0,
            total: 268_000,
            fee_limit: 0,
            max: 268_000,
        },
        Case {
            // 0.1 TRX instead of the bandwidth, 1 TRX system fee: the free allowance does not
            // pay for a creation.
            name: "TRX to a new account, free bandwidth only",
            operation: trx(false),
            bytes: bt,
            available: FREE_600,
            prices: ResourcePrices::MAINNET,
            source: CreateAccountFee,
            bandwidth_burn: 0,
            energy_from_account: 0,
            energy_burn: 0,
            activation: 1_100_000,
            total: 1_100_000,
            fee_limit: 0,
            max: 1_100_000,
        },
        Case {
            name: "TRX to a new account, staked bandwidth",
            operation: trx(false),
            bytes: bt,
            available: AvailableResources {
                staked_bandwidth: 1_000,
                ..NONE
            },
            prices: ResourcePrices::MAINNET,
            source: Staked,
            bandwidth_burn: 0,
            energy_from_account: 0,
            energy_burn: 0,
            activation: 1_000_000,
            total: 1_000_000,
            fee_limit: 0,
            max: 1_100_000,
        },
        Case {
            // A Stake 2.0 delegation: bandwidth only, no energy, no fee_limit.
            name: "an energy delegation",
            operation: Operation::SystemContract,
            bytes: 279,
            available: NONE,
            prices: ResourcePrices::MAINNET,
            source: Burned,
            bandwidth_burn: 279_000,
            energy_from_account: 0,
            energy_burn: 0,
            activation: 0,
            total: 279_000,
            fee_limit: 0,
            max: 279_000,
        },
    ];
    for c in cases {
        let p = plan(&PlanInputs {
            operation: c.operation,
            bandwidth_bytes: c.bytes,
            available: c.available,
            prices: c.prices,
            energy_margin_percent: 20,
        });
        let got = (
            p.bandwidth_source,
            p.bandwidth_burn_sun,
            p.energy_from_account,
            p.energy_burn_sun,
            p.activation_sun,
            p.total_burn_sun,
            p.fee_limit_sun,
            p.max_burn_sun,
        );
        let want = (
            c.source,
            c.bandwidth_burn,
            c.energy_from_account,
            c.energy_burn,
            c.activation,
            c.total,
            c.fee_limit,
            c.max,
        );
        assert_eq!(got, want, "{}", c.name);
        assert_eq!(p.bandwidth_needed, c.bytes, "{}", c.name);
        assert_eq!(
            p.energy_from_account + p.energy_burned,
            p.energy_needed,
            "{}",
            c.name
        );
    }
}

#[test]
fn prices_and_resources_read_from_node_figures() {
    let p = ResourcePrices::from_parameters([
        ("getTransactionFee", 1_000),
        ("getEnergyFee", 210),
        ("getCreateAccountFee", -5),
        ("getAllowTvmCompatibleEvm", 1),
    ]);
    assert_eq!(
        p,
        ResourcePrices {
            energy_sun: 210,
            bandwidth_sun: 1_000,
            create_account_sun: 0,
            create_account_system_sun: 1_000_000,
        }
    );
    assert_eq!(
        AvailableResources::from_limits((600, 441), (0, 0), (5, 9)),
        AvailableResources {
            free_bandwidth: 159,
            staked_bandwidth: 0,
            energy: 0
        }
    );
    assert_eq!(fee_limit_sun(130_000, &p, 20), 32_760_000);
    assert_eq!(fee_limit_sun(u64::MAX, &p, 20), u64::MAX);
}

#[test]
fn a_plan_reads_back_from_its_stored_form() {
    let p = plan(&PlanInputs {
        operation: usdt(false),
        bandwidth_bytes: 345,
        available: FREE_600,
        prices: ResourcePrices::MAINNET,
        energy_margin_percent: 20,
    });
    let text = serde_json::to_string(&p).unwrap();
    assert!(text.contains(r#""kind":"trc20_transfer""#), "{text}");
    assert!(text.contains(r#""bandwidth_source":"free""#), "{text}");
    assert_eq!(serde_json::from_str::<ResourcePlan>(&text).unwrap(), p);
}

/// A deposit address whose energy was lent it holds only what its bandwidth burns; without
/// energy (or with too little) it holds the whole fee limit; a TRX transfer holds its burn.
#[test]
fn a_sweep_with_its_own_energy_holds_only_its_bandwidth() {
    let lent = AvailableResources {
        energy: 143_313,
        ..NONE
    };
    let inputs = |available, operation| PlanInputs {
        operation,
        bandwidth_bytes: TRC20_TRANSFER_BANDWIDTH_BYTES,
        available,
        prices: ResourcePrices::MAINNET,
        energy_margin_percent: 20,
    };
    let delegated = plan(&inputs(lent, usdt(false)));
    assert_eq!(delegated.energy_burned, 0);
    assert_eq!(delegated.max_burn_keeping_resources_sun(), 345_000);
    let free = plan(&inputs(
        AvailableResources {
            free_bandwidth: 600,
            ..lent
        },
        usdt(false),
    ));
    assert_eq!(free.max_burn_keeping_resources_sun(), 0);
    let short = plan(&inputs(
        AvailableResources {
            energy: 130_284,
            ..NONE
        },
        usdt(false),
    ));
    assert_eq!(
        short.max_burn_keeping_resources_sun(),
        345_000 + short.fee_limit_sun
    );
    let native = plan(&inputs(FREE_600, trx(true)));
    assert_eq!(
        native.max_burn_keeping_resources_sun(),
        native.total_burn_sun
    );
}
