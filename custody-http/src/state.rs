//! What every request handler can reach: the ports and the settings of this process.

use std::collections::BTreeMap;
use std::sync::Arc;

use custody_core::auth::RateLimit;
use custody_core::idempotency::InFlight;
use custody_core::ports::{ChainSource, Clock, Entropy, Signer, Store};
use custody_core::{AssetCatalog, Network};

/// Per-network settings shown by the catalog.
#[derive(Debug, Clone)]
pub struct NetworkSettings {
    pub network: Network,
    pub chain_id: u64,
    pub confirmations: u32,
}

pub use custody_core::chain::ScanStatus;
pub use custody_core::swap::SwapPair;

/// Limits of the HTTP layer, unit last. Each bounds how long or how often one client can hold
/// a connection slot, so slow or greedy clients cannot take the API from everyone else.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    pub body_bytes_max: usize,
    /// Connections served at once; beyond, a new one is answered 503 and closed.
    pub connections_max: usize,
    /// Connections served at once for one peer (an IPv4 address, an IPv6 /64); beyond, 503.
    pub connections_per_peer_max: usize,
    /// A connection is closed when no complete request head arrived within this time since it
    /// opened or since its last response: idle keep-alive, or headers sent slowly.
    pub idle_timeout_ms: u64,
    /// Time for the whole body to arrive once the head is read; then 408 and the connection
    /// is closed.
    pub body_read_timeout_ms: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            body_bytes_max: 64 * 1024,
            connections_max: 1024,
            connections_per_peer_max: 128,
            idle_timeout_ms: 10_000,
            body_read_timeout_ms: 10_000,
        }
    }
}

pub struct AppState {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    pub signer: Arc<dyn Signer>,
    /// Seals and opens the secrets the store keeps (credentials' HMAC and TOTP keys).
    pub vault: Arc<custody_core::vault::Vault>,
    /// Chain adapters by network; a network without one answers on-chain figures as unknown.
    pub chains: BTreeMap<Network, Arc<dyn ChainSource>>,
    pub scan_status: BTreeMap<Network, Arc<std::sync::Mutex<ScanStatus>>>,
    /// The last holdings check of each network (funds on deposit addresses no deposit explains).
    pub holdings:
        BTreeMap<Network, Arc<std::sync::Mutex<custody_core::deposit::holdings::HoldingsReport>>>,
    /// Addresses the scanners watch; a new wallet joins once its creation committed.
    pub watch: Arc<custody_core::deposit::WatchSet>,
    pub catalog: AssetCatalog,
    pub networks: Vec<NetworkSettings>,
    pub swap_pairs: Vec<SwapPair>,
    /// Sending, per network with endpoints (withdrawals are priced and paid through it).
    pub senders: BTreeMap<Network, Arc<dyn custody_core::ports::ChainSender>>,
    /// The DEX router swaps are priced by (BSC), and what the swap flow needs of it.
    pub dex: Option<Arc<dyn custody_core::ports::dex::DexRouter>>,
    pub swap_router: Option<custody_core::swap::RouterSettings>,
    /// Each network's hot wallet (decisions §11).
    pub hot_wallets: BTreeMap<Network, custody_core::withdrawal::HotWallet>,
    /// Former hot wallets of each network (a rotation retired them), oldest first: shown by
    /// `/admin/treasuries` and counted with the holdings, never paid from for anything new.
    pub retired_hot_wallets: BTreeMap<Network, Vec<custody_core::withdrawal::HotWallet>>,
    /// Configured prices of TRX in a TRON token (`[[native_rates]]`), for the network cost of
    /// TRC20 withdrawals; BSC tokens are priced at the DEX router.
    pub native_rates: BTreeMap<custody_core::AssetId, custody_core::withdrawal::Rate>,
    /// The withdrawal fee policy of every catalog asset (decisions §11).
    pub fee_policies: Vec<(custody_core::AssetId, custody_core::withdrawal::FeePolicy)>,
    pub limits: HttpLimits,
    pub limiter: Arc<dyn RateLimit>,
    /// Quotes counted per credential and window in this process (`auth::quote_budget`): a
    /// quote costs the chain several calls, so quotes have a budget of their own beside the
    /// general limit. Per instance: several instances each allow the budget.
    pub quotes: Arc<custody_core::auth::RateLimiter>,
    /// Where requests' nonces are recorded (`crate::nonces`).
    pub nonces: Arc<crate::nonces::NonceGate>,
    /// Opened credentials, checked against the store's credentials version on every request.
    pub credentials: crate::authn::CredentialCache,
    /// Bounds the PIN verifications running at once (`second_factor`).
    pub second_factors: crate::second_factor::SecondFactorChecks,
    pub inflight: InFlight,
    /// Request counts and latencies, webhook outcomes (`/v1/metrics`); shared with the loops.
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl AppState {
    pub fn new_trace_id(&self) -> uuid::Uuid {
        custody_core::ports::clock::new_uuid(self.entropy.as_ref())
    }
}

impl AppState {
    /// Every hot wallet of each network: the active one and the retired ones.
    pub fn hot_wallet_sets(&self) -> BTreeMap<Network, custody_core::wallet::hot::HotWalletSet> {
        self.hot_wallets
            .iter()
            .map(|(n, active)| {
                (
                    *n,
                    custody_core::wallet::hot::HotWalletSet {
                        active: active.clone(),
                        retired: self.retired_hot_wallets.get(n).cloned().unwrap_or_default(),
                    },
                )
            })
            .collect()
    }
}
