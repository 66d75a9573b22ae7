//! Every network's hot wallets as the store records them, for `serve` and `custody treasury`.

use std::collections::BTreeMap;

use custody_core::ports::store::read;
use custody_core::ports::{Signer, Store};
use custody_core::wallet::hot::{self, HotWalletSet};
use custody_core::wallet::{hot_wallet_address, hot_wallet_path};
use custody_core::withdrawal::HotWallet;
use custody_core::Network;

/// Every network's hot wallets: recorded by rotations, else generation 0's.
pub(crate) async fn hot_wallet_sets(
    store: &dyn Store,
    signer: &dyn Signer,
) -> Result<BTreeMap<Network, HotWalletSet>, String> {
    let mut sets = BTreeMap::new();
    for network in Network::ALL {
        let first = first_hot_wallet(signer, network)?;
        let records = read(store, move |tx| Ok(tx.hot_wallet_records(network)?))
            .await
            .map_err(|e| format!("cannot read the {network} hot wallets: {e}"))?;
        sets.insert(network, hot::resolve(&records, first));
    }
    Ok(sets)
}

pub(crate) fn first_hot_wallet(signer: &dyn Signer, network: Network) -> Result<HotWallet, String> {
    let address = hot_wallet_address(signer, network)
        .map_err(|e| format!("cannot derive the {network} hot wallet: {e}"))?;
    Ok(HotWallet {
        address,
        path: hot_wallet_path(network),
    })
}
