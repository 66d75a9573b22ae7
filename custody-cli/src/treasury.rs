//! `custody treasury show` (decisions §11): each network's hot wallet, its on-chain balances
//! of every catalog asset, and the next nonce the store would hand out (BSC).

use std::sync::Arc;

use custody_core::keys::HdSigner;
use custody_core::ports::store::read;
use custody_core::ports::ChainSource;
use custody_core::wallet::{hot_wallet_address, hot_wallet_path};
use custody_core::Network;
use serde_json::{json, Value};

use crate::commands::{open_store, print_json, runtime};
use crate::datadir::DataDir;

pub fn show(dir: &DataDir) -> Result<(), String> {
    let config = dir.load_config()?;
    let catalog = config.catalog()?;
    let (store, unlocked) = open_store(dir, &config)?;
    let signer = HdSigner::from_seed(&unlocked.mnemonic.to_seed())
        .map_err(|e| format!("cannot load the master key: {e}"))?;
    drop(unlocked);
    let rt = runtime()?;
    let chains = rt.block_on(async { crate::chains::build(&config, &catalog) })?;
    let mut rows = Vec::new();
    for network in Network::ALL {
        let address = hot_wallet_address(&signer, network)
            .map_err(|e| format!("cannot derive the {network} hot wallet: {e}"))?;
        let chain: Option<Arc<dyn ChainSource>> = chains.sources.get(&network).cloned();
        let mut balances = Vec::new();
        for asset in catalog.of_network(network) {
            let entry: Value = match &chain {
                None => json!({
                    "asset": asset.code, "units": null,
                    "error": format!("no [{}] endpoint is configured", network.as_str().to_lowercase()),
                }),
                Some(chain) => match rt.block_on(chain.balance(&address, asset)) {
                    Ok(b) => json!({
                        "asset": asset.code, "units": b.units, "block_number": b.block_number,
                    }),
                    Err(e) => json!({ "asset": asset.code, "units": null, "error": e.message }),
                },
            };
            balances.push(entry);
        }
        let owner = address.clone();
        let next_nonce = rt
            .block_on(read(store.as_ref(), move |tx| {
                Ok(tx.next_nonce(network, &owner)?)
            }))
            .map_err(|e| format!("cannot read the nonce allocator: {e}"))?;
        rows.push(json!({
            "network": network,
            "address": address,
            "derivation_path": hot_wallet_path(network).render(),
            "balances": balances,
            "next_nonce": next_nonce,
        }));
    }
    store.close();
    print_json(&json!({ "data": rows }))
}
