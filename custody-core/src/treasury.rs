//! The treasury view of decisions §11: each network's hot wallet with its on-chain balances,
//! what is still on its way out of it, and the next nonce (BSC); and per (network, asset) the
//! figures the TREASURY reconciliation decides on ([`AssetFigures`]: hot wallet and
//! deposit-address holdings, user liabilities, in transit, pending outgoing). One shape for
//! `custody treasury show`, `/admin/treasuries`, the dashboard and the reconciliation.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::amount::Amount;
use crate::asset::AssetCatalog;
use crate::error::CoreResult;
use crate::network::Network;
use crate::outgoing::{OutgoingTx, Purpose};
use crate::ports::sender::Payment;
use crate::ports::store::{read, ReadTx};
use crate::ports::{ChainSource, Store};
use crate::reconcile::treasury::{in_transit, HeldPayment};
use crate::wallet::hot::{HotWalletSet, HotWalletStatus};
use crate::withdrawal::HotWallet;

/// One asset's on-chain balance, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreasuryBalance {
    pub asset: String,
    /// Everything held, staked TRX included (the house's, recoverable by unstaking).
    pub units: Option<Amount>,
    /// TRON: the part of `units` staked (Stake 2.0, for energy lent to sweeps or otherwise):
    /// not spendable by withdrawals until unstaked. Left out when nothing is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staked_units: Option<Amount>,
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

/// One (network, asset): on-chain holdings against what users are owed. See
/// [`crate::reconcile::treasury`] for the rule and why `in_transit_units` counts with the
/// holdings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssetFigures {
    pub network: Network,
    pub asset: String,
    /// The hot wallet's on-chain balance; `None` when it could not be read.
    pub hot_wallet_units: Option<Amount>,
    /// The sum of every deposit address's on-chain balance; `None` when one could not be read.
    pub deposit_addresses_units: Option<Amount>,
    pub deposit_addresses: u64,
    /// Holds of withdrawals and swaps whose payment is signed and unfinished.
    pub in_transit_units: Amount,
    /// Available + reserved of every user account of the asset.
    pub user_liabilities_units: Amount,
    /// What unfinished payments still take out of the hot wallet.
    pub pending_outgoing_units: Amount,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl AssetFigures {
    /// Hot wallet + deposit addresses, when both were read.
    pub fn onchain_units(&self) -> Option<Amount> {
        self.hot_wallet_units?
            .checked_add(self.deposit_addresses_units?)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreasuryRow {
    pub network: Network,
    pub address: String,
    pub derivation_path: String,
    /// `retired`: a former hot wallet (a rotation), finishing what it started, drained.
    pub status: HotWalletStatus,
    pub balances: Vec<TreasuryBalance>,
    pub pending_outgoing: Vec<PendingOutgoing>,
    /// BSC: the nonce the store hands out next (`None` before the first payment).
    pub next_nonce: Option<u64>,
    /// Per catalog asset of the network, counting every hot wallet of it: on the active
    /// wallet's row only (empty on a retired one's).
    pub assets: Vec<AssetFigures>,
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

fn no_endpoint(network: Network) -> String {
    format!(
        "no [{}] endpoint is configured",
        network.as_str().to_lowercase()
    )
}

/// Reads `address`'s balance of every catalog asset of `network`.
async fn balances_of(
    chain: Option<&Arc<dyn ChainSource>>,
    catalog: &AssetCatalog,
    network: Network,
    address: &str,
) -> Vec<TreasuryBalance> {
    let mut out = Vec::new();
    for asset in catalog.of_network(network) {
        let (units, staked_units, block_number, error) = match chain {
            None => (None, None, None, Some(no_endpoint(network))),
            Some(chain) => match chain.balance(address, asset).await {
                Ok(b) => (
                    Some(b.units),
                    (!b.staked_units.is_zero()).then_some(b.staked_units),
                    Some(b.block_number),
                    None,
                ),
                Err(e) => (None, None, None, Some(e.message)),
            },
        };
        out.push(TreasuryBalance {
            asset: asset.code.clone(),
            units,
            staked_units,
            block_number,
            error,
        });
    }
    out
}

/// The deposit addresses' balances summed per asset (catalog order): `None` for an asset of
/// which some address could not be read, with the first such error.
async fn deposit_holdings(
    chain: Option<&Arc<dyn ChainSource>>,
    catalog: &AssetCatalog,
    network: Network,
    addresses: &[String],
) -> Vec<(Option<Amount>, Option<String>)> {
    let mut sums: Vec<(Option<Amount>, Option<String>)> = catalog
        .of_network(network)
        .map(|_| (Some(Amount::ZERO), None))
        .collect();
    for address in addresses {
        let balances = balances_of(chain, catalog, network, address).await;
        for (sum, b) in sums.iter_mut().zip(balances) {
            match (sum.0, b.units) {
                (Some(total), Some(units)) => {
                    sum.0 = Some(total.checked_add(units).unwrap_or(Amount::MAX))
                }
                (_, None) => {
                    sum.0 = None;
                    if sum.1.is_none() {
                        sum.1 = b.error.map(|e| format!("deposit address {address}: {e}"));
                    }
                }
                (None, Some(_)) => {}
            }
        }
    }
    sums
}

/// What the store says of one network, read in one snapshot.
struct Books {
    in_flight: Vec<OutgoingTx>,
    next_nonce: Option<u64>,
    held: Vec<HeldPayment>,
    liabilities: BTreeMap<crate::AssetId, Amount>,
}

fn read_books(tx: &mut dyn ReadTx, network: Network, hot: &str) -> CoreResult<Books> {
    let in_flight = tx.outgoing_in_flight(network, hot)?;
    let mut held = Vec::new();
    for out in &in_flight {
        // Exhaustive: a new purpose must say whether a user's hold pays for it.
        let payment = match out.purpose {
            Purpose::Withdrawal => tx.withdrawal_by_id(out.reference_id)?.map(|w| {
                (
                    crate::AssetId::new(w.network, w.asset),
                    w.costs.total_debited_units,
                )
            }),
            Purpose::Swap => tx.swap_by_id(out.reference_id)?.map(|s| {
                (
                    crate::AssetId::new(network, s.asset_in),
                    s.costs.total_debited_units,
                )
            }),
            // No user's hold: an approval moves nothing, and sweeps and fundings move funds
            // between addresses the holdings count already (only their fees leave).
            Purpose::Approval | Purpose::Sweep | Purpose::Funding | Purpose::Rebalance => None,
        };
        if let Some((asset, hold)) = payment {
            held.push(HeldPayment {
                asset,
                hold,
                status: out.status,
            });
        }
    }
    Ok(Books {
        next_nonce: tx.next_nonce(network, hot)?,
        liabilities: crate::admin::user_liabilities(tx)?,
        in_flight,
        held,
    })
}

/// The treasury rows of `hot_wallets` (each network's active hot wallet alone), reading
/// balances from `chains`. See [`rows_of`].
pub async fn rows(
    hot_wallets: &BTreeMap<Network, HotWallet>,
    chains: &BTreeMap<Network, Arc<dyn ChainSource>>,
    catalog: &AssetCatalog,
    store: &dyn Store,
) -> CoreResult<Vec<TreasuryRow>> {
    let sets: BTreeMap<Network, HotWalletSet> = hot_wallets
        .iter()
        .map(|(n, h)| {
            (
                *n,
                HotWalletSet {
                    active: h.clone(),
                    retired: Vec::new(),
                },
            )
        })
        .collect();
    rows_of(&sets, chains, catalog, store).await
}

/// Sums per catalog asset over the wallets of a network; `None` when one was not read.
fn sum_balances(all: &[Vec<TreasuryBalance>]) -> Vec<(Option<Amount>, Vec<String>)> {
    let Some(first) = all.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|i| {
            let mut total = Some(Amount::ZERO);
            let mut errors = Vec::new();
            for wallet in all {
                let b = &wallet[i];
                total = match (total, b.units) {
                    (Some(t), Some(u)) => Some(t.checked_add(u).unwrap_or(Amount::MAX)),
                    _ => None,
                };
                errors.extend(b.error.iter().map(|e| format!("hot wallet: {e}")));
            }
            (total, errors)
        })
        .collect()
}

/// The treasury rows of every hot wallet of `sets`: per network the active one, then its
/// retired ones (`status` says which), reading balances from `chains` (a network without an
/// adapter says so in each balance's `error`). Every deposit address's balance of every
/// catalog asset is read: one request each. The network's [`AssetFigures`] are on its active
/// row only, and count every hot wallet of the network: a retired one's holdings and
/// unfinished payments are still the treasury's.
///
/// The chain is read before the store, so that a payment signed in between is counted in
/// transit while its funds are still read on chain (see [`crate::reconcile::treasury`]); the
/// deposit addresses before the hot wallets, so that a sweep landing in between is counted
/// twice rather than not at all.
pub async fn rows_of(
    sets: &BTreeMap<Network, HotWalletSet>,
    chains: &BTreeMap<Network, Arc<dyn ChainSource>>,
    catalog: &AssetCatalog,
    store: &dyn Store,
) -> CoreResult<Vec<TreasuryRow>> {
    let mut out = Vec::with_capacity(sets.len());
    for (&network, set) in sets {
        let chain = chains.get(&network);
        // Deposit addresses before the hot wallets: a sweep mined between the two reads is
        // then counted on both sides (never on neither, which would look like missing money).
        let addresses = read(store, move |tx| Ok(tx.wallet_addresses(network)?)).await?;
        let deposits = deposit_holdings(chain, catalog, network, &addresses).await;
        let wallets: Vec<HotWallet> = set.all().cloned().collect();
        let mut balances = Vec::with_capacity(wallets.len());
        for hot in &wallets {
            balances.push(balances_of(chain, catalog, network, &hot.address).await);
        }
        let mut books = Vec::with_capacity(wallets.len());
        for hot in &wallets {
            let address = hot.address.clone();
            books.push(read(store, move |tx| read_books(tx, network, &address)).await?);
        }
        let all_in_flight: Vec<OutgoingTx> =
            books.iter().flat_map(|b| b.in_flight.clone()).collect();
        let all_held: Vec<HeldPayment> = books.iter().flat_map(|b| b.held.clone()).collect();
        let pending_all = pending_outgoing(catalog, network, &all_in_flight);
        let transit = in_transit(&all_held);
        let hot_sums = sum_balances(&balances);
        let liabilities = &books[0].liabilities;
        let assets: Vec<AssetFigures> = catalog
            .of_network(network)
            .zip(&hot_sums)
            .zip(&pending_all)
            .zip(deposits)
            .map(
                |(((asset, (hot_units, hot_errors)), pending), (deposit_units, deposit_error))| {
                    AssetFigures {
                        network,
                        asset: asset.code.clone(),
                        hot_wallet_units: *hot_units,
                        deposit_addresses_units: deposit_units,
                        deposit_addresses: u64::try_from(addresses.len()).unwrap_or(u64::MAX),
                        in_transit_units: transit.get(&asset.id()).copied().unwrap_or_default(),
                        user_liabilities_units: liabilities
                            .get(&asset.id())
                            .copied()
                            .unwrap_or_default(),
                        pending_outgoing_units: pending.units,
                        errors: hot_errors.iter().cloned().chain(deposit_error).collect(),
                    }
                },
            )
            .collect();
        let mut assets = Some(assets);
        for ((i, hot), (balances, books)) in wallets
            .iter()
            .enumerate()
            .zip(balances.into_iter().zip(books))
        {
            out.push(TreasuryRow {
                network,
                address: hot.address.clone(),
                derivation_path: hot.path.render(),
                status: if i == 0 {
                    HotWalletStatus::Active
                } else {
                    HotWalletStatus::Retired
                },
                balances,
                pending_outgoing: pending_outgoing(catalog, network, &books.in_flight),
                next_nonce: books.next_nonce,
                assets: assets.take().unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outgoing::OutStatus;
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
