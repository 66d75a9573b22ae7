//! The treasury view of decisions §11: each network's hot wallet with its on-chain balances,
//! what is still on its way out of it, and the next nonce (BSC). One shape for `custody
//! treasury show` and `/admin/treasuries`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::amount::Amount;
use crate::asset::AssetCatalog;
use crate::error::CoreResult;
use crate::network::Network;
use crate::outgoing::OutgoingTx;
use crate::ports::sender::Payment;
use crate::ports::store::read;
use crate::ports::{ChainSource, Store};
use crate::withdrawal::HotWallet;

/// One asset's on-chain balance, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreasuryBalance {
    pub asset: String,
    pub units: Option<Amount>,
    pub block_number: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What unfinished outgoing transactions still take out of the wallet, per asset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingOutgoing {
    pub asset: String,
    pub units: Amount,
    pub transactions: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreasuryRow {
    pub network: Network,
    pub address: String,
    pub derivation_path: String,
    pub balances: Vec<TreasuryBalance>,
    pub pending_outgoing: Vec<PendingOutgoing>,
    /// BSC: the nonce the store hands out next (`None` before the first payment).
    pub next_nonce: Option<u64>,
}

/// What a payment takes out of the wallet, as (asset code, units) by the catalog ("?" for a
/// token outside it).
fn outflows(catalog: &AssetCatalog, network: Network, payment: &Payment) -> Vec<(String, Amount)> {
    let s = payment.spends();
    let mut out = Vec::new();
    if !s.native.is_zero() {
        if let Some(native) = catalog.native(network) {
            out.push((native.code.clone(), s.native));
        }
    }
    if let Some((contract, units)) = s.token {
        let code = catalog
            .of_network(network)
            .find(|a| {
                a.contract
                    .as_deref()
                    .is_some_and(|c| c.eq_ignore_ascii_case(contract))
            })
            .map_or_else(|| "?".to_owned(), |a| a.code.clone());
        out.push((code, units));
    }
    out
}

/// Sums the payments of unfinished transactions per asset, catalog order.
pub fn pending_outgoing(
    catalog: &AssetCatalog,
    network: Network,
    in_flight: &[OutgoingTx],
) -> Vec<PendingOutgoing> {
    let mut sums: BTreeMap<String, (Amount, u64)> = BTreeMap::new();
    for tx in in_flight.iter().filter(|t| !t.status.is_terminal()) {
        for (code, units) in outflows(catalog, network, &tx.payment) {
            let entry = sums.entry(code).or_insert((Amount::ZERO, 0));
            entry.0 = entry.0.checked_add(units).unwrap_or(entry.0);
            entry.1 += 1;
        }
    }
    catalog
        .of_network(network)
        .map(|a| {
            let (units, transactions) = sums.remove(&a.code).unwrap_or((Amount::ZERO, 0));
            PendingOutgoing {
                asset: a.code.clone(),
                units,
                transactions,
            }
        })
        .collect()
}

/// The treasury rows of `hot_wallets`, reading balances from `chains` (a network without an
/// adapter says so in each balance's `error`).
pub async fn rows(
    hot_wallets: &BTreeMap<Network, HotWallet>,
    chains: &BTreeMap<Network, Arc<dyn ChainSource>>,
    catalog: &AssetCatalog,
    store: &dyn Store,
) -> CoreResult<Vec<TreasuryRow>> {
    let mut out = Vec::with_capacity(hot_wallets.len());
    for (&network, hot) in hot_wallets {
        let mut balances = Vec::new();
        for asset in catalog.of_network(network) {
            let b = match chains.get(&network) {
                None => TreasuryBalance {
                    asset: asset.code.clone(),
                    units: None,
                    block_number: None,
                    error: Some(format!(
                        "no [{}] endpoint is configured",
                        network.as_str().to_lowercase()
                    )),
                },
                Some(chain) => match chain.balance(&hot.address, asset).await {
                    Ok(b) => TreasuryBalance {
                        asset: asset.code.clone(),
                        units: Some(b.units),
                        block_number: Some(b.block_number),
                        error: None,
                    },
                    Err(e) => TreasuryBalance {
                        asset: asset.code.clone(),
                        units: None,
                        block_number: None,
                        error: Some(e.message),
                    },
                },
            };
            balances.push(b);
        }
        let address = hot.address.clone();
        let (in_flight, next_nonce) = read(store, move |tx| {
            Ok((
                tx.outgoing_in_flight(network, &address)?,
                tx.next_nonce(network, &address)?,
            ))
        })
        .await?;
        out.push(TreasuryRow {
            network,
            address: hot.address.clone(),
            derivation_path: hot.path.render(),
            balances,
            pending_outgoing: pending_outgoing(catalog, network, &in_flight),
            next_nonce,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outgoing::{OutStatus, Purpose};
    use crate::ports::signer::HdPath;
    use crate::time::Timestamp;
    use uuid::Uuid;

    fn tx(id: u128, payment: Payment, status: OutStatus) -> OutgoingTx {
        let mut t = OutgoingTx::new(
            Uuid::from_u128(id),
            Network::Bsc,
            Purpose::Withdrawal,
            Uuid::from_u128(id),
            "hot".into(),
            HdPath {
                network: Network::Bsc,
                account: 2_147_483_647,
                index: 0,
            },
            payment,
            Some(0),
            Timestamp::from_unix_millis(0),
        );
        t.status = status;
        t
    }

    #[test]
    fn pending_outgoing_sums_unfinished_payments_per_catalog_asset() {
        let catalog = AssetCatalog::mainnet();
        let usdt = catalog.get(Network::Bsc, "USDT").unwrap();
        let token = |units| Payment::Token {
            contract: usdt.contract.clone().unwrap().to_lowercase(),
            to: "x".into(),
            amount: Amount::from_units(units),
        };
        let native = |units| Payment::Native {
            to: "x".into(),
            amount: Amount::from_units(units),
        };
        let rows = pending_outgoing(
            &catalog,
            Network::Bsc,
            &[
                tx(1, native(5), OutStatus::Sent),
                tx(2, native(7), OutStatus::Built),
                tx(3, native(100), OutStatus::Final),
                tx(4, token(9), OutStatus::Included),
            ],
        );
        let find = |code: &str| rows.iter().find(|r| r.asset == code).unwrap().clone();
        assert_eq!(find("BNB").units, Amount::from_units(12));
        assert_eq!(find("BNB").transactions, 2);
        assert_eq!(find("USDT").units, Amount::from_units(9));
        assert_eq!(find("USDC").units, Amount::ZERO);
        assert_eq!(rows.len(), catalog.of_network(Network::Bsc).count());
    }
}
