//! The addresses the scanner watches, per network, in memory: matching a transfer is one hash
//! lookup, so the cost of a block does not grow with the number of wallets.

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use crate::network::Network;

#[derive(Debug, Default)]
pub struct WatchSet {
    by_network: RwLock<HashMap<Network, HashSet<String>>>,
}

impl WatchSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds addresses (at start-up from the store, then each new wallet once committed).
    pub fn extend(&self, network: Network, addresses: impl IntoIterator<Item = String>) {
        let mut map = self.by_network.write().unwrap_or_else(|p| p.into_inner());
        map.entry(network).or_default().extend(addresses);
    }

    pub fn contains(&self, network: Network, address: &str) -> bool {
        let map = self.by_network.read().unwrap_or_else(|p| p.into_inner());
        map.get(&network).is_some_and(|set| set.contains(address))
    }

    pub fn len(&self, network: Network) -> usize {
        let map = self.by_network.read().unwrap_or_else(|p| p.into_inner());
        map.get(&network).map_or(0, HashSet::len)
    }

    pub fn is_empty(&self, network: Network) -> bool {
        self.len(network) == 0
    }
}
