//! What executing a quote needs, for withdrawals and swaps alike.

use std::sync::Arc;

use custody_core::error::{CoreResult, PortError};
use custody_core::ports::store::read;
use custody_core::ports::ChainSender;
use custody_core::Network;

use crate::dispatch::Call;
use crate::second_factor;
use crate::state::AppState;

/// Checks the second factors, unless the request retries one already executed under its
/// idempotency key: that one replays its stored answer (decisions §6), and its one-time code
/// was used by the first execution.
pub async fn second_factors_unless_replay(state: &AppState, call: &Call) -> CoreResult<()> {
    let credential = call.credential();
    let key = call
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let executed = match key {
        Some(key) => {
            let (t, now) = (credential.tenant.clone(), state.clock.now());
            read(state.store.as_ref(), move |tx| {
                Ok(tx.idempotency_record(&t, &key, now)?.is_some())
            })
            .await?
        }
        None => false,
    };
    if !executed {
        second_factor::check(state, credential, &call.headers).await?;
    }
    Ok(())
}

/// The seed of the hot wallet's nonce allocator on `network`: none on TRON; on BSC the
/// allocator's own next nonce once seeded (from then on it is the truth), else the chain's.
/// The outer error is the store's, the inner one the chain's.
pub async fn nonce_seed(
    state: &AppState,
    network: Network,
    sender: &Arc<dyn ChainSender>,
    address: &str,
) -> CoreResult<Result<Option<u64>, PortError>> {
    if network == Network::Tron {
        return Ok(Ok(None));
    }
    let owner = address.to_owned();
    let seeded = read(state.store.as_ref(), move |tx| {
        Ok(tx.next_nonce(network, &owner)?)
    })
    .await?;
    Ok(match seeded {
        Some(n) => Ok(Some(n)),
        None => sender.confirmed_nonce(address).await,
    })
}
