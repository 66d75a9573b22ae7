//! `balance.updated`: emitted in the same transaction as any ledger change of a user.

use serde_json::json;
use uuid::Uuid;

use crate::error::CoreResult;
use crate::ledger::{self, ReferenceType, UserAccount, UserBalance};
use crate::outbox::{EventType, NewEvent};
use crate::ports::store::WriteTx;
use crate::time::Timestamp;

/// Queues `balance.updated` for `account` with its balance as of this transaction. `data` is the
/// account's ledger figures and the cause; on-chain figures are not part of a ledger event.
pub fn emit(
    tx: &mut dyn WriteTx,
    event_id: Uuid,
    account: &UserAccount,
    cause: (ReferenceType, Uuid),
    now: Timestamp,
) -> CoreResult<()> {
    let balance = ledger::user_balance(tx, account)?;
    let tenant = crate::tenant::TenantId::from_stored(account.tenant.clone())?;
    let wallet = tx.wallet_by_user(&tenant, &account.user, account.asset.network)?;
    emit_known(
        tx,
        event_id,
        account,
        balance,
        wallet.map(|w| w.id),
        cause,
        now,
    )
}

/// [`emit`] for a caller that already holds the account's balance after its ledger write and
/// its wallet id (an internal transfer): the same event, without reading them again.
pub fn emit_known(
    tx: &mut dyn WriteTx,
    event_id: Uuid,
    account: &UserAccount,
    balance: UserBalance,
    wallet_id: Option<Uuid>,
    cause: (ReferenceType, Uuid),
    now: Timestamp,
) -> CoreResult<()> {
    let data = json!({
        "wallet_id": wallet_id,
        "external_user_id": account.user,
        "network": account.asset.network,
        "asset": account.asset.code,
        "ledger": {
            "available_units": balance.available,
            "reserved_units": balance.reserved,
        },
        "reference_type": cause.0,
        "reference_id": cause.1,
    });
    tx.enqueue_event(&NewEvent::new(
        event_id,
        &account.tenant,
        EventType::BalanceUpdated,
        &data,
        now,
    ))?;
    Ok(())
}
