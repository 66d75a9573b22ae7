//! `custody treasury show` (decisions §11): each network's hot wallet, its on-chain balances
//! of every catalog asset, what is on its way out of it, and the next nonce the store would
//! hand out (BSC); the same rows as `/admin/treasuries` (`custody_core::treasury`).

use std::collections::BTreeMap;

use custody_core::wallet::{hot_wallet_address, hot_wallet_path};
use custody_core::withdrawal::HotWallet;
use custody_core::Network;
use serde_json::json;

use crate::commands::{open_store, print_json, runtime};
use crate::datadir::DataDir;

pub fn show(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = crate::seeds::load(store.as_ref(), &unlocked)?;
    drop(unlocked);
    let mut hot_wallets = BTreeMap::new();
    for network in Network::ALL {
        let address = hot_wallet_address(&signer, network)
            .map_err(|e| format!("cannot derive the {network} hot wallet: {e}"))?;
        let path = hot_wallet_path(network);
        hot_wallets.insert(network, HotWallet { address, path });
    }
    let rt = runtime()?;
    let rows = rt.block_on(async {
        let chains = crate::chains::build(&config, &catalog)?;
        custody_core::treasury::rows(&hot_wallets, &chains.sources, &catalog, store.as_ref())
            .await
            .map_err(|e| format!("cannot read the treasury: {e}"))
    });
    store.close();
    print_json(&json!({ "data": rows? }))
}
