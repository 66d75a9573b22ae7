//! Operator adjustments: the one way to correct a user's balance by hand. Posted against the
//! `adjustments` system account, with an audit record and a `balance.updated` event, all in one
//! transaction. A debit never makes the available balance negative.

use serde_json::json;
use uuid::Uuid;

use crate::admin::AuditRecord;
use crate::amount::Amount;
use crate::asset::AssetId;
use crate::balance_event;
use crate::error::{CoreResult, Refusal};
use crate::ledger::{self, Direction, LedgerTx, ReferenceType, TxMeta, UserAccount};
use crate::network::Network;
use crate::ports::store::WriteTx;
use crate::time::Timestamp;

#[derive(Debug, Clone)]
pub struct AdjustmentRequest {
    pub tenant: crate::tenant::TenantId,
    pub external_user_id: String,
    pub network: Network,
    pub asset: String,
    pub direction: Direction,
    pub amount: Amount,
    pub reason: String,
    /// Who asked, for the audit trail.
    pub actor: String,
}

#[derive(Debug, Clone, Copy)]
pub struct AdjustmentIds {
    pub audit: Uuid,
    pub ledger_tx: Uuid,
    pub event: Uuid,
}

pub fn execute(
    tx: &mut dyn WriteTx,
    ids: AdjustmentIds,
    req: &AdjustmentRequest,
    now: Timestamp,
) -> CoreResult<LedgerTx> {
    if req.reason.trim().is_empty() {
        return Err(Refusal::validation("reason", "an adjustment needs a reason").into());
    }
    if tx
        .wallet_by_user(&req.tenant, &req.external_user_id, req.network)?
        .is_none()
    {
        return Err(Refusal::not_found("wallet of this user on this network").into());
    }
    if req.direction == crate::ledger::Direction::Debit {
        // A debit would not settle a reorganization debt (the re-mined transfer settles the
        // receivable), so the user would pay twice: refused while anything is owed.
        let owed =
            tx.owed_after_reorg_units(&req.tenant, &req.external_user_id, req.network, &req.asset)?;
        if !owed.is_zero() {
            return Err(Refusal::validation(
                "amount_units",
                format!(
                    "this user owes {owed} units of {} after a deposit left the chain; a debit \
                     adjustment would not settle that debt and is refused",
                    req.asset
                ),
            )
            .into());
        }
    }
    let account = UserAccount::new(
        req.tenant.clone(),
        req.external_user_id.clone(),
        AssetId::new(req.network, req.asset.clone()),
    );
    let before = ledger::user_balance(tx, &account)?;
    let meta = TxMeta {
        id: ids.ledger_tx,
        reference_type: ReferenceType::Adjustment,
        reference_id: ids.audit,
        created_at: now,
    };
    let posted = ledger::adjust(tx, &meta, &account, req.direction, req.amount)?;
    let after = ledger::user_balance(tx, &account)?;
    tx.append_audit(&AuditRecord {
        id: ids.audit,
        actor: req.actor.clone(),
        action: format!("ledger.adjust.{}", req.direction.as_str()),
        target: format!(
            "{}/{}/{}/{}",
            req.tenant, req.external_user_id, req.network, req.asset
        ),
        old_value: Some(
            json!({ "available_units": before.available, "reserved_units": before.reserved }),
        ),
        new_value: Some(
            json!({ "available_units": after.available, "reserved_units": after.reserved }),
        ),
        reason: req.reason.clone(),
        created_at: now,
    })?;
    balance_event::emit(
        tx,
        ids.event,
        &account,
        (ReferenceType::Adjustment, ids.audit),
        now,
    )?;
    Ok(posted)
}
