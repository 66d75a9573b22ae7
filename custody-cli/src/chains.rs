//! Building the chain adapters from `custody.toml` and running one scanner per network.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use custody_chain_bsc::{BscChain, BscSenderSettings, BscSettings, DexSettings};
use custody_chain_tron::{TronChain, TronSettings};
use custody_core::chain::ChainAddress;
use custody_core::deposit::holdings::HoldingsReport;
use custody_core::deposit::{PipelineSettings, WatchSet};
use custody_core::ports::store::read;
use custody_core::ports::{ChainSender, ChainSource, Clock, Entropy, Signer, Store};
use custody_core::sweep::TronEnergyMode;
use custody_core::{AssetCatalog, Network};
use custody_http::ScanStatus;
use custody_runtime::holdings::HoldingsCheck;
use custody_runtime::scanner::Scanner;
use custody_runtime::Background;

use crate::config::Config;

/// The adapters of the networks that have endpoints configured.
pub struct Chains {
    pub sources: BTreeMap<Network, Arc<dyn ChainSource>>,
    pub status: BTreeMap<Network, Arc<Mutex<ScanStatus>>>,
    pub holdings: BTreeMap<Network, Arc<Mutex<HoldingsReport>>>,
    /// Sending, over the same endpoints (and health) as the scanners.
    pub senders: BTreeMap<Network, Arc<dyn ChainSender>>,
    /// The BSC DEX router swaps are priced by, when BSC has endpoints.
    pub dex: Option<Arc<dyn custody_core::ports::dex::DexRouter>>,
    /// What the TRON hot wallet's stake can lend, when TRON has endpoints.
    pub energy_stake: Option<Arc<dyn custody_core::ports::EnergyStake>>,
}

/// Builds an adapter for each network with at least one URL. A network without one still
/// serves catalog, wallets and ledger; its chain figures answer as unavailable.
pub fn build(config: &Config, catalog: &AssetCatalog) -> Result<Chains, String> {
    let mut chains = Chains {
        sources: BTreeMap::new(),
        status: BTreeMap::new(),
        holdings: BTreeMap::new(),
        senders: BTreeMap::new(),
        dex: None,
        energy_stake: None,
    };
    for network in Network::ALL {
        chains
            .status
            .insert(network, Arc::new(Mutex::new(ScanStatus::default())));
        chains.holdings.insert(network, Arc::default());
    }
    if !config.bsc.urls.is_empty() {
        let bsc = Arc::new(
            BscChain::new(BscSettings::from_config(&config.bsc, catalog))
                .map_err(|e| format!("[bsc]: {e}"))?,
        );
        chains.senders.insert(
            Network::Bsc,
            Arc::new(custody_chain_bsc::BscSender::new(
                Arc::clone(&bsc),
                BscSenderSettings::from_config(&config.bsc.sending),
            )),
        );
        chains.dex = Some(Arc::new(custody_chain_bsc::BscDexRouter::new(
            Arc::clone(&bsc),
            DexSettings::from_config(&config.swaps)?,
        )));
        chains.sources.insert(Network::Bsc, bsc);
    }
    if !config.tron.urls.is_empty() {
        let settings = TronSettings::from_config(&config.tron);
        let tron =
            Arc::new(TronChain::new(&settings, catalog).map_err(|e| format!("[tron]: {e}"))?);
        let sender = custody_chain_tron::TronSender::new(
            tron.client().clone(),
            custody_chain_tron::TronSenderSettings::default(),
        )
        .map_err(|e| format!("[tron]: {e}"))?;
        chains.senders.insert(Network::Tron, Arc::new(sender));
        chains.energy_stake = Some(Arc::new(custody_chain_tron::TronStake::new(
            tron.client().clone(),
        )));
        chains.sources.insert(Network::Tron, tron);
    }
    Ok(chains)
}

/// Loads every wallet address into the watch set (once, at start-up).
pub async fn load_watch_set(store: &dyn Store) -> Result<Arc<WatchSet>, String> {
    let watch = Arc::new(WatchSet::new());
    for network in Network::ALL {
        let addresses = read(store, move |tx| Ok(tx.wallet_addresses(network)?))
            .await
            .map_err(|e| format!("cannot load wallet addresses: {e}"))?;
        watch.extend(network, addresses);
    }
    Ok(watch)
}

#[allow(clippy::too_many_arguments)]
pub fn start_scanners(
    background: &mut Background,
    chains: &Chains,
    config: &Config,
    catalog: &AssetCatalog,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    watch_set: Arc<WatchSet>,
    hot_wallets: &BTreeMap<Network, custody_core::wallet::hot::HotWalletSet>,
    exclusive: Arc<dyn custody_core::ports::Exclusive>,
) -> Result<(), String> {
    let catalog = Arc::new(catalog.clone());
    for (&network, chain) in &chains.sources {
        let c = config.chain(network);
        let scanner = Scanner {
            chain: Arc::clone(chain),
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            entropy: Arc::clone(&entropy),
            catalog: Arc::clone(&catalog),
            watch: Arc::clone(&watch_set),
            settings: PipelineSettings {
                network,
                required_confirmations: c.confirmations,
                blocks_kept: c.blocks_kept,
                hot_wallets: hot_wallet_addresses(hot_wallets, network)?,
            },
            poll_interval: Duration::from_millis(c.poll_interval_ms.max(10)),
            blocks_per_tick_max: 100,
            start_block: c.start_block,
            stuck_alert_after: Duration::from_millis(c.stuck_alert_after_ms),
            watch_after: std::sync::atomic::AtomicU64::new(0),
            status: Arc::clone(&chains.status[&network]),
            halted: std::sync::atomic::AtomicBool::new(false),
            exclusive: Arc::clone(&exclusive),
        };
        background.spawn("scanner", move |stop| scanner.run(stop));
        if c.holdings_check_interval_ms > 0 {
            let check = HoldingsCheck {
                chain: Arc::clone(chain),
                store: Arc::clone(&store),
                clock: Arc::clone(&clock),
                catalog: Arc::clone(&catalog),
                network,
                interval: Duration::from_millis(c.holdings_check_interval_ms),
                report: Arc::clone(&chains.holdings[&network]),
            };
            background.spawn("holdings", move |stop| check.run(stop));
        }
    }
    Ok(())
}

/// Every hot wallet of `network`, active and retired, as the deposit pipeline compares
/// senders with them: a retired one's native transfers are still the treasury's.
fn hot_wallet_addresses(
    hot_wallets: &BTreeMap<Network, custody_core::wallet::hot::HotWalletSet>,
    network: Network,
) -> Result<Vec<ChainAddress>, String> {
    hot_wallets
        .get(&network)
        .into_iter()
        .flat_map(|set| set.all())
        .map(|h| {
            ChainAddress::parse(network, &h.address)
                .map_err(|e| format!("the {network} hot wallet address {}: {e}", h.address))
        })
        .collect()
}

/// What every broadcaster shares: the store, the signer, the clock and the entropy.
pub type EnginePorts = (
    Arc<dyn Store>,
    Arc<dyn Signer>,
    Arc<dyn Clock>,
    Arc<dyn Entropy>,
);

/// One broadcaster per network that can send: the outgoing-transaction engine's loop.
pub fn start_broadcasters(
    background: &mut Background,
    chains: &Chains,
    config: &Config,
    catalog: &AssetCatalog,
    ports: EnginePorts,
    exclusive: Arc<dyn custody_core::ports::Exclusive>,
) {
    let (store, signer, clock, entropy) = ports;
    for (&network, sender) in &chains.senders {
        let Some(native) = catalog.native(network) else {
            tracing::error!(%network, "no native coin in the catalog: nothing is sent on it");
            continue;
        };
        let c = config.chain(network);
        let b = custody_runtime::broadcaster::Broadcaster {
            network,
            sender: Arc::clone(sender),
            signer: Arc::clone(&signer),
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            entropy: Arc::clone(&entropy),
            policy: c.sending.engine_policy(network, c.confirmations),
            poll_interval: Duration::from_millis(c.poll_interval_ms.max(10)),
            lease: Duration::from_millis(c.sending.lease_ms),
            batch: 32,
            native: native.id(),
            exclusive: Arc::clone(&exclusive),
        };
        background.spawn("broadcaster", move |stop| b.run(stop));
    }
}

/// One sweeper per network that can send and has sweeping on (`[sweeps] interval_ms` > 0).
pub fn start_sweepers(
    background: &mut Background,
    chains: &Chains,
    config: &Config,
    catalog: &AssetCatalog,
    hot_wallets: &BTreeMap<Network, custody_core::withdrawal::HotWallet>,
    native_rates: &BTreeMap<custody_core::AssetId, custody_core::withdrawal::Rate>,
    ports: EnginePorts,
) -> Result<(), String> {
    if config.sweeps.interval_ms == 0 {
        return Ok(());
    }
    let (store, signer, clock, entropy) = ports;
    let catalog = Arc::new(catalog.clone());
    for (&network, sender) in &chains.senders {
        let Some(hot) = hot_wallets.get(&network) else {
            continue;
        };
        let prices = custody_runtime::sweeper::NativePrices {
            dex: match (network, &chains.dex) {
                (Network::Bsc, Some(dex)) => Some((
                    Arc::clone(dex),
                    config.swaps.router_settings()?.wrapped_native,
                )),
                _ => None,
            },
            fixed: native_rates
                .iter()
                .filter(|(id, _)| id.network == network)
                .map(|(id, r)| (id.clone(), *r))
                .collect(),
        };
        let sweeper = custody_runtime::sweeper::Sweeper {
            network,
            sender: Arc::clone(sender),
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            entropy: Arc::clone(&entropy),
            catalog: Arc::clone(&catalog),
            hot: hot.clone(),
            policies: config.sweeps.policies(&catalog, network)?,
            prices,
            signer: Arc::clone(&signer),
            interval: Duration::from_millis(config.sweeps.interval_ms.max(100)),
            failure_backoff: Duration::from_millis(config.sweeps.failure_backoff_ms),
            energy: match (
                network,
                &chains.energy_stake,
                config.sweeps.tron_energy_mode,
            ) {
                (Network::Tron, Some(stake), TronEnergyMode::Delegate) => {
                    Some(custody_runtime::sweeper::EnergyLending {
                        stake: Arc::clone(stake),
                        margin_percent: config.sweeps.tron_delegation_margin_percent,
                    })
                }
                _ => None,
            },
        };
        background.spawn("sweeper", move |stop| sweeper.run(stop));
    }
    Ok(())
}
