//! The holdings check of one network: every so often, each deposit address's on-chain balance
//! of each catalog asset against what the ledger credited for it
//! (`custody_core::deposit::holdings`). It finds funds the scanner cannot see (native coin sent
//! by a contract's internal call) and shows them on the admin dashboard. Read-only: it writes
//! nothing, so several instances running it is harmless.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use custody_core::deposit::holdings::{unexplained, HoldingsReport, UnexplainedBalance};
use custody_core::error::CoreResult;
use custody_core::ports::store::read;
use custody_core::ports::{ChainSource, Clock, Store};
use custody_core::{Amount, AssetCatalog, Network};
use tokio::sync::watch;

pub struct HoldingsCheck {
    pub chain: Arc<dyn ChainSource>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub catalog: Arc<AssetCatalog>,
    pub network: Network,
    /// Time between two checks; the first runs one interval after start.
    pub interval: Duration,
    pub report: Arc<Mutex<HoldingsReport>>,
}

impl HoldingsCheck {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            match self.check(&shutdown).await {
                Ok(Some(report)) => {
                    if !report.unexplained.is_empty() {
                        tracing::warn!(network = %self.network, addresses = report.unexplained.len(), "deposit addresses hold funds no deposit explains");
                    }
                    *self.report.lock().unwrap_or_else(|p| p.into_inner()) = report;
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(network = %self.network, error = %e, "holdings check failed")
                }
            }
        }
    }

    /// One pass over every address; `None` when shutdown interrupted it.
    pub async fn check(
        &self,
        shutdown: &watch::Receiver<bool>,
    ) -> CoreResult<Option<HoldingsReport>> {
        let network = self.network;
        let native = self
            .catalog
            .native(network)
            .map(|a| a.code.clone())
            .unwrap_or_default();
        let (addresses, credited, flows) = read(self.store.as_ref(), move |tx| {
            Ok((
                tx.wallet_addresses(network)?,
                tx.credited_by_address(network)?,
                tx.sweep_flows(network, &native)?,
            ))
        })
        .await?;
        // What the books say each address holds: its credited deposits, plus what treasury
        // fundings brought, less what sweeps took away and the fees they burned there.
        let mut credited: HashMap<(String, String), Amount> = credited
            .into_iter()
            .map(|(address, asset, units)| ((address, asset), units))
            .collect();
        for f in flows {
            let e = credited.entry((f.address, f.asset)).or_default();
            *e = e
                .checked_add(f.arrived)
                .and_then(|v| v.checked_sub(f.left))
                .unwrap_or(Amount::ZERO);
        }
        let mut report = HoldingsReport::default();
        for address in addresses {
            if *shutdown.borrow() {
                return Ok(None);
            }
            for asset in self.catalog.of_network(network) {
                let onchain = match self.chain.balance(&address, asset).await {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::debug!(%network, %address, asset = %asset.code, error = %e, "balance not read");
                        report.errors += 1;
                        continue;
                    }
                };
                let ledger = credited
                    .get(&(address.clone(), asset.code.clone()))
                    .copied()
                    .unwrap_or(Amount::ZERO);
                if let Some(excess) = unexplained(onchain.units, ledger) {
                    report.unexplained.push(UnexplainedBalance {
                        network,
                        address: address.clone(),
                        asset: asset.code.clone(),
                        onchain_units: onchain.units,
                        onchain_block: onchain.block_number,
                        credited_units: ledger,
                        unexplained_units: excess,
                    });
                }
            }
            report.addresses_checked += 1;
        }
        report.checked_at = Some(self.clock.now());
        Ok(Some(report))
    }
}
