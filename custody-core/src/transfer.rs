//! Internal transfers: settled at once on the ledger between two users of one tenant, on one
//! (network, asset). The recipient must have a wallet on that network.

use serde::Serialize;
use uuid::Uuid;

use crate::admin::restricted;
use crate::amount::Amount;
use crate::asset::AssetId;
use crate::balance_event;
use crate::error::{CoreResult, ErrorCode, Refusal};
use crate::ledger::{self, ReferenceType, TxMeta, UserAccount};
use crate::network::Network;
use crate::ports::store::WriteTx;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    pub tenant: crate::tenant::TenantId,
    pub sender: String,
    pub recipient: String,
    pub network: Network,
    pub asset: String,
    pub amount: Amount,
}

/// The resource answered by `POST /internal-transfers` (decisions §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransferView {
    pub id: Uuid,
    pub sender_external_user_id: String,
    pub recipient_external_user_id: String,
    pub network: Network,
    pub asset: String,
    pub amount_units: Amount,
    pub status: &'static str,
    pub created_at: Timestamp,
}

/// Ids the command needs, drawn by the caller (the core has no randomness of its own).
#[derive(Debug, Clone, Copy)]
pub struct TransferIds {
    pub transfer: Uuid,
    pub ledger_tx: Uuid,
    pub sender_event: Uuid,
    pub recipient_event: Uuid,
}

/// Posts the transfer and its two `balance.updated` events in the caller's transaction.
pub fn execute(
    tx: &mut dyn WriteTx,
    ids: TransferIds,
    req: &TransferRequest,
    now: Timestamp,
) -> CoreResult<TransferView> {
    if restricted(tx, "kill_switch.internal_transfers")? {
        return Err(Refusal::new(
            ErrorCode::KillSwitchActive,
            "internal transfers are suspended by an operator",
        )
        .into());
    }
    crate::deposit::refuse_if_owing(tx, &req.tenant, &req.sender, req.network, &req.asset)?;
    let Some(recipient_wallet) = tx.wallet_id_by_user(&req.tenant, &req.recipient, req.network)?
    else {
        return Err(Refusal::new(
            ErrorCode::RecipientNotFound,
            format!("the recipient has no {} wallet", req.network),
        )
        .into());
    };
    let sender = UserAccount::new(
        req.tenant.clone(),
        req.sender.clone(),
        AssetId::new(req.network, req.asset.clone()),
    );
    let meta = TxMeta {
        id: ids.ledger_tx,
        reference_type: ReferenceType::InternalTransfer,
        reference_id: ids.transfer,
        created_at: now,
    };
    // The balances after the posting come from the posting itself, and the recipient's wallet
    // from the check above: the events carry the same figures as a read-back would.
    let posted = ledger::transfer_with_balances(tx, &meta, &sender, &req.recipient, req.amount)?;
    let sender_wallet = tx.wallet_id_by_user(&req.tenant, &req.sender, req.network)?;
    let cause = (ReferenceType::InternalTransfer, ids.transfer);
    balance_event::emit_known(
        tx,
        ids.sender_event,
        &sender,
        posted.sender,
        sender_wallet,
        cause,
        now,
    )?;
    balance_event::emit_known(
        tx,
        ids.recipient_event,
        &sender.with_user(req.recipient.clone()),
        posted.recipient,
        Some(recipient_wallet),
        cause,
        now,
    )?;
    Ok(TransferView {
        id: ids.transfer,
        sender_external_user_id: req.sender.clone(),
        recipient_external_user_id: req.recipient.clone(),
        network: req.network,
        asset: req.asset.clone(),
        amount_units: req.amount,
        status: "settled",
        created_at: now,
    })
}
