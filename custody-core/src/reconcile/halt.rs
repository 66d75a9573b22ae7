//! The automatic control a TREASURY shortfall turns on, `treasury_shortfall.<NETWORK>.<ASSET>`
//! (decisions §14), and the one check every money path makes against it: withdrawal quotes and
//! executions, swap quotes and executions (either side of the pair), and the broadcaster before
//! it signs a new payment.

use uuid::Uuid;

use crate::admin::ControlReads;
use crate::asset::AssetId;
use crate::error::{CoreResult, ErrorCode, PortError, Refusal};
use crate::network::Network;
use crate::outgoing::Purpose;
use crate::ports::store::ReadTx;

pub const SHORTFALL_PREFIX: &str = "treasury_shortfall.";

/// `treasury_shortfall.BSC.USDT`.
pub fn shortfall_key(asset: &AssetId) -> String {
    format!("{SHORTFALL_PREFIX}{}.{}", asset.network, asset.code)
}

/// The asset a `treasury_shortfall.<NETWORK>.<ASSET>` key names, if it has that shape (the
/// caller checks the asset against the catalog).
pub fn parse_shortfall_key(key: &str) -> Option<AssetId> {
    let rest = key.strip_prefix(SHORTFALL_PREFIX)?;
    let (network, code) = rest.split_once('.')?;
    let network: Network = network.parse().ok()?;
    let shaped = !code.is_empty()
        && code.len() <= 16
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    shaped.then(|| AssetId::new(network, code))
}

fn halted(repo: &mut dyn ControlReads, asset: &AssetId) -> Result<bool, PortError> {
    Ok(repo
        .control(&shortfall_key(asset))?
        .is_some_and(|c| c.enabled))
}

/// Refuses (503 `KILL_SWITCH_ACTIVE`) when a shortfall control of any of `assets` is on: money
/// of an asset the chain does not fully back must not leave until an operator has looked.
pub fn refuse_if_halted(repo: &mut dyn ControlReads, assets: &[AssetId]) -> CoreResult<()> {
    for asset in assets {
        if halted(repo, asset)? {
            return Err(Refusal::new(
                ErrorCode::KillSwitchActive,
                format!(
                    "withdrawals and swaps of {} {} are stopped: the TREASURY reconciliation \
                     found a shortfall ({} is on)",
                    asset.network,
                    asset.code,
                    shortfall_key(asset)
                ),
            )
            .into());
        }
    }
    Ok(())
}

/// Whether the payment of (`purpose`, `reference`) involves an asset whose shortfall control is
/// on: a withdrawal's asset, either side of a swap. An approval moves no funds and stays free
/// (its swap is what carries the assets); so do sweeps and fundings.
pub fn halted_for_payment(
    tx: &mut dyn ReadTx,
    purpose: Purpose,
    reference: Uuid,
) -> Result<bool, PortError> {
    let assets = match purpose {
        Purpose::Withdrawal => match tx.withdrawal_by_id(reference)? {
            Some(w) => vec![AssetId::new(w.network, &w.asset)],
            None => Vec::new(),
        },
        Purpose::Swap => match tx.swap_by_id(reference)? {
            Some(s) => vec![
                AssetId::new(Network::Bsc, &s.asset_in),
                AssetId::new(Network::Bsc, &s.asset_out),
            ],
            None => Vec::new(),
        },
        // The treasury's own moves bring funds back to the hot wallet (or gas for that):
        // a shortfall is no reason to stop them.
        Purpose::Approval | Purpose::Sweep | Purpose::Funding | Purpose::Rebalance => Vec::new(),
    };
    for asset in &assets {
        if halted(tx, asset)? {
            return Ok(true);
        }
    }
    Ok(false)
}
