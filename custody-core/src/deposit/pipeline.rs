//! The deposit pipeline, the same for every network. Chain adapters return blocks; these
//! functions, each run inside one store write transaction, decide what is a deposit, move it
//! through its states, credit it exactly once, and undo what a reorganization removed.
//!
//! Order is checked here, not trusted: `apply_block` refuses a block whose parent is not the
//! cursor ([`Applied::CannotConnect`], as BDK's `apply_update` does), and the caller rewinds
//! only to a block that [`crate::chain::find_fork`] found both we and the node agree on.

use super::{Arrival, Deposit, DepositStatus, HistoryStep, TreasuryMove, WatchSet};
use crate::admin::{restricted, Alert};
use crate::asset::AssetCatalog;
use crate::balance_event;
use crate::chain::{connects, ChainAddress, ChainCursor};
use crate::error::{CoreError, CoreResult};
use crate::ledger::{self, ReferenceType, TxMeta, UserAccount};
use crate::network::Network;
use crate::outbox::{EventType, NewEvent};
use crate::ports::chain::ScannedBlock;
use crate::ports::clock::{new_uuid, Entropy};
use crate::ports::store::WriteTx;
use crate::time::Timestamp;
use crate::{Amount, AssetId};

#[derive(Debug, Clone)]
pub struct PipelineSettings {
    pub network: Network,
    pub required_confirmations: u32,
    /// Recorded block hashes kept for reorg detection; a deeper reorg raises an alert.
    pub blocks_kept: u64,
    /// The network's hot wallet addresses (the current one and any former one): native coin
    /// from them that is no withdrawal is the treasury's own move, never a deposit.
    pub hot_wallets: Vec<ChainAddress>,
}

/// Whether a block was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Block(BlockOutcome),
    /// The block does not follow the cursor (another height, or its parent is not the cursor's
    /// block): nothing was written. The chain moved; look for the fork.
    CannotConnect {
        cursor: Option<ChainCursor>,
    },
}

/// What applying one block did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockOutcome {
    pub detected: u32,
    pub confirmed: u32,
    pub credited: u32,
}

fn emit(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    d: &Deposit,
    event: EventType,
    now: Timestamp,
) -> CoreResult<()> {
    let data = serde_json::to_value(d.view()).expect("a deposit serializes");
    tx.enqueue_event(&NewEvent::new(
        new_uuid(entropy),
        &d.tenant,
        event,
        &data,
        now,
    ))?;
    Ok(())
}

fn invariant(e: String) -> CoreError {
    CoreError::Invariant(e)
}

/// Records deposits found in `block` and moves the chain cursor to it, then advances every
/// open deposit of the network to the new tip.
pub fn apply_block(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    settings: &PipelineSettings,
    catalog: &AssetCatalog,
    watch: &WatchSet,
    block: &ScannedBlock,
    now: Timestamp,
) -> CoreResult<Applied> {
    let network = settings.network;
    let header = &block.header;
    let cursor = tx.chain_cursor(network)?;
    if !connects(cursor.as_ref(), header) {
        return Ok(Applied::CannotConnect { cursor });
    }
    let mut outcome = BlockOutcome::default();
    for t in &block.transfers {
        // Failed transactions, zero amounts, assets outside the catalog and addresses that are
        // not ours are never deposits.
        if !t.succeeded || t.amount.is_zero() || !watch.contains(network, t.to.as_str()) {
            continue;
        }
        if catalog.get(network, &t.asset_code).is_none() {
            continue;
        }
        let Some(wallet) = tx.wallet_by_address(network, &t.to)? else {
            continue;
        };
        match super::classify(tx, network, &settings.hot_wallets, t)? {
            Arrival::Deposit => {}
            Arrival::Treasury(TreasuryMove::Own { .. }) => continue,
            Arrival::Treasury(TreasuryMove::FromHotWallet { from }) => {
                unrecognized_treasury_move(tx, entropy, network, t, &from, now)?;
                continue;
            }
        }
        match tx.deposit_by_identity(network, &t.tx_hash, t.log_index)? {
            Some(mut d)
                if matches!(d.status, DepositStatus::Orphaned | DepositStatus::Reversed) =>
            {
                // The same transfer, mined again in the new chain. Its identity (tx hash and
                // position in the transaction) fixes its content; a mismatch means a bug or a
                // lying node, never a reason to credit.
                if d.address != t.to.as_str()
                    || d.asset != t.asset_code
                    || d.amount != t.amount
                    || d.from_address != t.from.as_str()
                {
                    tx.raise_alert(&Alert::open(
                        new_uuid(entropy),
                        "deposit_identity_mismatch",
                        "critical",
                        format!(
                            "{network} transfer {}#{:?} reappeared with other content than deposit {}; not applied",
                            crate::chain::display_hash(network, &t.tx_hash.to_hex()), t.log_index, d.id
                        ),
                        Some(("deposit", d.id)),
                        now,
                    ))?;
                    continue;
                }
                d.block_number = Some(header.number);
                d.block_hash = Some(header.hash.clone());
                d.confirmations = 1;
                d.transition(DepositStatus::Detected, now)
                    .map_err(invariant)?;
                tx.update_deposit(&d)?;
                emit(tx, entropy, &d, EventType::DepositDetected, now)?;
                outcome.detected += 1;
            }
            Some(_) => {}
            None => {
                let d = Deposit {
                    id: new_uuid(entropy),
                    tenant: wallet.tenant.clone(),
                    network,
                    asset: t.asset_code.clone(),
                    external_user_id: wallet.external_user_id.clone(),
                    wallet_id: wallet.id,
                    // The address paid, which after a wallet migration may be one of the
                    // wallet's previous addresses: the sweeper sweeps from it.
                    address: t.to.as_str().to_owned(),
                    tx_hash: t.tx_hash.to_hex(),
                    log_index: t.log_index,
                    from_address: t.from.as_str().to_owned(),
                    amount: t.amount,
                    block_number: Some(header.number),
                    block_hash: Some(header.hash.clone()),
                    confirmations: 1,
                    required_confirmations: settings.required_confirmations,
                    status: DepositStatus::Detected,
                    history: vec![HistoryStep {
                        status: DepositStatus::Detected.as_str().to_owned(),
                        block_number: Some(header.number),
                        block_hash: Some(header.hash.clone()),
                        at: now.to_rfc3339(),
                    }],
                    credit_tx_id: None,
                    shortfall: Amount::ZERO,
                    created_at: now,
                    updated_at: now,
                };
                tx.insert_deposit(&d)?;
                emit(tx, entropy, &d, EventType::DepositDetected, now)?;
                outcome.detected += 1;
            }
        }
    }
    tx.record_block(network, header.number, &header.hash, &header.parent_hash)?;
    tx.prune_blocks(network, header.number.saturating_sub(settings.blocks_kept))?;
    let advanced = advance(tx, entropy, settings, header.number, now)?;
    outcome.confirmed = advanced.confirmed;
    outcome.credited = advanced.credited;
    Ok(Applied::Block(outcome))
}

/// Native coin from a hot wallet reached a deposit address in a transaction that is none of the
/// service's known payments (an operator's manual top-up, most likely): the treasury's money
/// still, so it is not credited, and admins are told where it went.
fn unrecognized_treasury_move(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    network: Network,
    t: &crate::ports::chain::ObservedTransfer,
    from: &str,
    now: Timestamp,
) -> CoreResult<()> {
    tx.raise_alert(&Alert::open(
        new_uuid(entropy),
        "treasury_transfer_unrecognized",
        "warning",
        format!(
            "{network} transaction {} moved {} {} units from hot wallet {from} to deposit address \
             {}; it is no payment of the service, so it was not credited to the address's user: \
             the coins are still the treasury's",
            crate::chain::display_hash(network, &t.tx_hash.to_hex()),
            t.amount,
            t.asset_code,
            t.to.as_str()
        ),
        None,
        now,
    ))?;
    Ok(())
}

/// Brings every pending deposit of the network up to date with the tip `tip`: confirmations,
/// `confirming`/`confirmed`, and the credit once confirmed unless crediting is switched off.
pub fn advance(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    settings: &PipelineSettings,
    tip: u64,
    now: Timestamp,
) -> CoreResult<BlockOutcome> {
    let network = settings.network;
    let crediting_off = restricted(tx, "kill_switch.deposit_crediting")?;
    let mut outcome = BlockOutcome::default();
    for mut d in tx.open_deposits(network, u64::MAX)? {
        let Some(block) = d.block_number else {
            continue;
        };
        if !d.status.is_pending() {
            continue;
        }
        if let Some(why) = super::repair::treasury_move_of(tx, &settings.hot_wallets, &d)? {
            // Recorded as a deposit by an older version, still pending: never credited.
            super::repair::void_pending(tx, &mut d, now)?;
            tx.raise_alert(&Alert::open(
                new_uuid(entropy),
                "treasury_deposit_voided",
                "warning",
                format!(
                    "deposit {} ({} {} units to user {} of tenant {}) is the treasury's own move \
                     ({why}) that an older version recorded as a deposit: orphaned, never credited",
                    d.id, d.asset, d.amount, d.external_user_id, d.tenant
                ),
                Some(("deposit", d.id)),
                now,
            ))?;
            continue;
        }
        let depth = tip.saturating_sub(block).saturating_add(1);
        let confirmations = u32::try_from(depth).unwrap_or(u32::MAX);
        let mut changed = confirmations != d.confirmations;
        d.confirmations = confirmations;
        if confirmations >= d.required_confirmations && d.status != DepositStatus::Confirmed {
            d.transition(DepositStatus::Confirmed, now)
                .map_err(invariant)?;
            emit(tx, entropy, &d, EventType::DepositConfirmed, now)?;
            outcome.confirmed += 1;
            changed = true;
        } else if confirmations > 1
            && d.status == DepositStatus::Detected
            && confirmations < d.required_confirmations
        {
            d.transition(DepositStatus::Confirming, now)
                .map_err(invariant)?;
            changed = true;
        }
        // Full depth is re-checked: a deposit held at `confirmed` by the kill switch may have
        // lost depth to a reorganization since.
        if d.status == DepositStatus::Confirmed
            && !crediting_off
            && confirmations >= d.required_confirmations
        {
            if d.credit_tx_id.is_some() {
                // Re-mined after a reversal that could not be posted: the user still holds
                // the first credit, so the deposit is credited again without a new entry.
                d.transition(DepositStatus::Credited, now)
                    .map_err(invariant)?;
                emit(tx, entropy, &d, EventType::DepositCredited, now)?;
            } else {
                credit(tx, entropy, &mut d, now)?;
            }
            outcome.credited += 1;
            changed = true;
        }
        if changed {
            d.updated_at = now;
            tx.update_deposit(&d)?;
        }
    }
    Ok(outcome)
}

/// A ledger transaction of deposit `d`, with a fresh id.
fn deposit_meta(entropy: &dyn Entropy, d: &Deposit, now: Timestamp) -> TxMeta {
    TxMeta {
        id: new_uuid(entropy),
        reference_type: ReferenceType::Deposit,
        reference_id: d.id,
        created_at: now,
    }
}

fn user_account(d: &Deposit) -> UserAccount {
    UserAccount::new(
        d.tenant.clone(),
        d.external_user_id.clone(),
        AssetId::new(d.network, d.asset.clone()),
    )
}

/// Posts the one ledger credit of a confirmed deposit, with its events.
fn credit(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    d: &mut Deposit,
    now: Timestamp,
) -> CoreResult<()> {
    if d.credit_tx_id.is_some() {
        return Err(invariant(format!("deposit {} was credited already", d.id)));
    }
    let meta = deposit_meta(entropy, d, now);
    let account = user_account(d);
    if d.shortfall.is_zero() {
        ledger::credit_deposit(tx, &meta, &account, d.amount)?;
    } else {
        // Mined again after a reversal the user could not cover: settle what they owe first.
        ledger::recredit_deposit(tx, &meta, &account, d.amount, d.shortfall)?;
        d.shortfall = Amount::ZERO;
    }
    d.credit_tx_id = Some(meta.id);
    d.transition(DepositStatus::Credited, now)
        .map_err(invariant)?;
    emit(tx, entropy, d, EventType::DepositCredited, now)?;
    balance_event::emit(
        tx,
        new_uuid(entropy),
        &account,
        (ReferenceType::Deposit, d.id),
        now,
    )?;
    Ok(())
}

/// Undoes everything above block `ancestor`, the newest block we and the node agree on:
/// pending deposits there are orphaned, credited ones reversed with a compensating entry and an
/// alert, and the cursor moves back to `ancestor`.
pub fn rewind(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    settings: &PipelineSettings,
    ancestor: u64,
    now: Timestamp,
) -> CoreResult<u32> {
    let network = settings.network;
    let mut moved = 0;
    for mut d in tx.open_deposits(network, ancestor.saturating_add(1))? {
        if d.block_number.is_none_or(|b| b <= ancestor) {
            continue;
        }
        match d.status {
            s if s.is_pending() => {
                d.transition(DepositStatus::Orphaned, now)
                    .map_err(invariant)?;
                d.block_number = None;
                d.block_hash = None;
                d.confirmations = 0;
                tx.update_deposit(&d)?;
            }
            DepositStatus::Credited => reverse(tx, entropy, &mut d, now)?,
            _ => continue,
        }
        moved += 1;
    }
    tx.rewind_blocks(network, ancestor)?;
    Ok(moved)
}

fn reverse(
    tx: &mut dyn WriteTx,
    entropy: &dyn Entropy,
    d: &mut Deposit,
    now: Timestamp,
) -> CoreResult<()> {
    let meta = deposit_meta(entropy, d, now);
    let account = user_account(d);
    let (_, shortfall) = ledger::reverse_deposit(tx, &meta, &account, d.amount)?;
    d.credit_tx_id = None;
    d.shortfall = shortfall;
    balance_event::emit(
        tx,
        new_uuid(entropy),
        &account,
        (ReferenceType::Deposit, d.id),
        now,
    )?;
    let (severity, message) = if shortfall.is_zero() {
        ("warning", format!(
            "deposit {} ({} {} units on {}) left the chain after it was credited; the credit was reversed",
            d.id, d.asset, d.amount, d.network
        ))
    } else {
        ("critical", format!(
            "deposit {} ({} {} units on {}) left the chain after it was credited, and user {} of \
             tenant {} had already spent {} units of it: what was left was reversed and the rest is \
             booked as owed (reorg_receivable). The user's outgoing {} operations (and debit \
             adjustments) are refused until the transfer is mined again, which settles it",
            d.id, d.asset, d.amount, d.network, d.external_user_id, d.tenant, shortfall, d.asset
        ))
    };
    d.transition(DepositStatus::Reversed, now)
        .map_err(invariant)?;
    tx.update_deposit(d)?;
    tx.raise_alert(&Alert::open(
        new_uuid(entropy),
        "deposit_reversed",
        severity,
        message,
        Some(("deposit", d.id)),
        now,
    ))?;
    Ok(())
}
