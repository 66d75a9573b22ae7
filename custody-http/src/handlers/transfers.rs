//! Internal transfers: strict validation here, the settlement in `custody_core::transfer`.

use custody_core::asset::AssetLookup;
use custody_core::error::{CoreResult, ErrorCode, Refusal};
use custody_core::idempotency::StoredResponse;
use custody_core::ports::clock::new_uuid;
use custody_core::transfer::{self, TransferIds, TransferRequest};
use custody_core::wallet::EXTERNAL_USER_ID_CHARS_MAX;
use custody_core::Network;

use crate::dispatch::Call;
use crate::idempotent;
use crate::input::{self, Fields};
use crate::reply::Reply;
use crate::state::AppState;

/// Checks the request against the catalog; these refusals are validation (not stored under the
/// idempotency key, decisions §6).
fn parse(state: &AppState, call: &Call) -> Result<TransferRequest, Refusal> {
    let map = input::json_object(&call.body)?;
    let mut fields = Fields::new();
    fields.no_unknown(
        &map,
        &[
            "sender_external_user_id",
            "recipient_external_user_id",
            "asset",
            "network",
            "amount_units",
        ],
    );
    let sender = fields.string(&map, "sender_external_user_id", EXTERNAL_USER_ID_CHARS_MAX);
    let recipient = fields.string(
        &map,
        "recipient_external_user_id",
        EXTERNAL_USER_ID_CHARS_MAX,
    );
    let asset = fields.string(&map, "asset", 16);
    let network = fields.string(&map, "network", 16);
    let amount = fields.units(&map, "amount_units");
    let network = network.and_then(|n| match n.parse::<Network>() {
        Ok(n) => Some(n),
        Err(_) => {
            fields.issue("network", "must be BSC or TRON");
            None
        }
    });
    fields.finish()?;
    let (Some(sender), Some(recipient), Some(asset), Some(network), Some(amount)) =
        (sender, recipient, asset, network, amount)
    else {
        unreachable!("finish() refuses missing fields")
    };
    match state.catalog.lookup(network, &asset) {
        AssetLookup::Found(_) => {}
        AssetLookup::OtherNetwork(other) => {
            return Err(Refusal::new(
                ErrorCode::CrossChainNotSupported,
                format!("{asset} is an asset of {other}, not of {network}; cross-chain operations are not supported"),
            ))
        }
        AssetLookup::Unknown => {
            return Err(Refusal::new(ErrorCode::UnsupportedAsset, format!("{asset} is not a supported asset")))
        }
    }
    if amount.is_zero() {
        return Err(Refusal::new(
            ErrorCode::AmountTooSmall,
            "amount_units must be greater than zero",
        ));
    }
    if sender == recipient {
        return Err(Refusal::validation(
            "recipient_external_user_id",
            "must differ from the sender",
        ));
    }
    Ok(TransferRequest {
        tenant: call.credential().tenant.clone(),
        sender,
        recipient,
        network,
        asset,
        amount,
    })
}

pub async fn create(state: &AppState, call: &Call) -> CoreResult<Reply> {
    let req = parse(state, call)?;
    let e = state.entropy.as_ref();
    let ids = TransferIds {
        transfer: new_uuid(e),
        ledger_tx: new_uuid(e),
        sender_event: new_uuid(e),
        recipient_event: new_uuid(e),
    };
    // INSUFFICIENT_BALANCE is a 422 on internal transfers (decisions §7).
    idempotent::run(state, call, 422, move |tx, now| {
        let view = transfer::execute(tx, ids, &req, now)?;
        Ok(StoredResponse {
            status: 201,
            body: serde_json::to_vec(&view).expect("a transfer serializes"),
        })
    })
    .await
}
