//! What a payment's move means to the flow that made it: one entry point, run in the write
//! that records the move (`outgoing::OutgoingTx` stored after a step of the broadcaster), which
//! hands it to its purpose's flow. The match is exhaustive, so a new purpose cannot be recorded
//! without saying which flow settles it.

use crate::asset::AssetId;
use crate::error::CoreResult;
use crate::outgoing::{OutgoingTx, Purpose};
use crate::ports::clock::Entropy;
use crate::ports::store::WriteTx;
use crate::time::Timestamp;

/// Runs `out`'s move through its flow: a withdrawal broadcast, confirmed or failed; a swap or
/// its approval; a sweep, a funding or a rebalance. `native` is the network's native coin,
/// `confirmations` the depth at which a withdrawal is final.
pub fn on_move(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    out: &OutgoingTx,
    native: &AssetId,
    confirmations: u32,
    now: Timestamp,
) -> CoreResult<()> {
    match out.purpose {
        Purpose::Withdrawal => {
            crate::withdrawal::on_outgoing(tx, entropy, out, native, confirmations, now)
        }
        Purpose::Swap | Purpose::Approval => {
            crate::swap::on_outgoing(tx, entropy, out, native, now)
        }
        Purpose::Sweep | Purpose::Funding | Purpose::Rebalance => {
            crate::sweep::on_outgoing(tx, entropy, out, native, now)
        }
    }
}
