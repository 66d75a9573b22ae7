//! A BSC chain modelled for money: blocks that link by hash, a pool of transfers waiting for a
//! block, reorganizations that replace the newest blocks (their transfers return to the pool or
//! vanish), and balances that follow the canonical chain only. It serves the `ChainSource` port
//! the scanner reads, exactly as an adapter does: whatever the world did, the port shows the
//! canonical chain.

use std::sync::Mutex;

use async_trait::async_trait;
use custody_core::amount::Amount;
use custody_core::asset::Asset;
use custody_core::chain::EndpointHealth;
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::chain::{
    BlockHeader, ChainSource, ObservedTransfer, OnchainBalance, ScannedBlock,
};

/// The first block of every simulated chain.
pub const FIRST_BLOCK: u64 = 1_000;
const BLOCK_MS: i64 = 3_000;
const GENESIS_MS: i64 = 1_800_000_000_000;

#[derive(Debug, Clone)]
struct Block {
    header: BlockHeader,
    transfers: Vec<ObservedTransfer>,
}

#[derive(Debug, Default)]
struct State {
    blocks: Vec<Block>,
    pool: Vec<ObservedTransfer>,
    /// Bumped by every block made, so a replacing block never has the hash of the one it
    /// replaces.
    made: u64,
}

#[derive(Debug)]
pub struct SimChain {
    state: Mutex<State>,
}

impl Default for SimChain {
    fn default() -> Self {
        Self::new()
    }
}

impl SimChain {
    /// A chain of one block, [`FIRST_BLOCK`].
    pub fn new() -> Self {
        let chain = SimChain {
            state: Mutex::new(State::default()),
        };
        chain.mine(0);
        chain
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Offers `transfer` to the pool; a later block includes it.
    pub fn submit(&self, transfer: ObservedTransfer) {
        self.state().pool.push(transfer);
    }

    /// Makes the next block with the oldest `take` transfers of the pool.
    pub fn mine(&self, take: usize) {
        let mut s = self.state();
        let take = take.min(s.pool.len());
        let transfers: Vec<_> = s.pool.drain(..take).collect();
        let number = s.blocks.last().map_or(FIRST_BLOCK, |b| b.header.number + 1);
        let parent_hash = s
            .blocks
            .last()
            .map_or_else(|| "0".repeat(64), |b| b.header.hash.clone());
        s.made += 1;
        let header = BlockHeader {
            number,
            hash: format!("{number:016x}{:048x}", s.made),
            parent_hash,
            timestamp_ms: GENESIS_MS + i64::try_from(number).unwrap_or(0) * BLOCK_MS,
        };
        s.blocks.push(Block { header, transfers });
    }

    /// Drops the newest `depth` blocks (never the first). Each of their transfers returns to
    /// the pool when `back` says so, and vanishes otherwise (a transaction the new fork never
    /// includes). Returns how many blocks were dropped.
    pub fn drop_newest(&self, depth: usize, mut back: impl FnMut() -> bool) -> usize {
        let mut s = self.state();
        let depth = depth.min(s.blocks.len().saturating_sub(1));
        let keep = s.blocks.len() - depth;
        let dropped: Vec<Block> = s.blocks.drain(keep..).collect();
        let mut returned: Vec<ObservedTransfer> = dropped
            .into_iter()
            .flat_map(|b| b.transfers)
            .filter(|_| back())
            .collect();
        returned.append(&mut s.pool);
        s.pool = returned;
        depth
    }

    pub fn head_hash(&self) -> String {
        self.state()
            .blocks
            .last()
            .map(|b| b.header.hash.clone())
            .unwrap_or_default()
    }

    pub fn head(&self) -> u64 {
        self.state()
            .blocks
            .last()
            .map_or(FIRST_BLOCK, |b| b.header.number)
    }

    /// Every transfer in the canonical chain.
    pub fn canonical_transfers(&self) -> Vec<ObservedTransfer> {
        self.state()
            .blocks
            .iter()
            .flat_map(|b| b.transfers.iter().cloned())
            .collect()
    }

    pub fn pool_len(&self) -> usize {
        self.state().pool.len()
    }

    fn block(&self, number: u64) -> Option<Block> {
        let s = self.state();
        let index = usize::try_from(number.checked_sub(FIRST_BLOCK)?).ok()?;
        s.blocks.get(index).cloned()
    }
}

#[async_trait]
impl ChainSource for SimChain {
    fn network(&self) -> Network {
        Network::Bsc
    }

    async fn head_number(&self) -> Result<u64, PortError> {
        Ok(self.head())
    }

    async fn header(&self, number: u64) -> Result<Option<BlockHeader>, PortError> {
        Ok(self.block(number).map(|b| b.header))
    }

    async fn scan_block(&self, number: u64) -> Result<Option<ScannedBlock>, PortError> {
        Ok(self.block(number).map(|b| ScannedBlock {
            header: b.header,
            transfers: b.transfers,
        }))
    }

    async fn balance(&self, address: &str, asset: &Asset) -> Result<OnchainBalance, PortError> {
        let mut units: i128 = 0;
        for t in self.canonical_transfers() {
            if !t.succeeded || t.asset_code != asset.code {
                continue;
            }
            let amount = i128::try_from(t.amount.units()).unwrap_or(i128::MAX);
            if t.to.as_str().eq_ignore_ascii_case(address) {
                units += amount;
            }
            if t.from.as_str().eq_ignore_ascii_case(address) {
                units -= amount;
            }
        }
        Ok(OnchainBalance {
            units: Amount::from_units(u128::try_from(units.max(0)).unwrap_or(0)),
            staked_units: Amount::ZERO,
            block_number: self.head(),
        })
    }

    fn endpoint_health(&self) -> Vec<EndpointHealth> {
        Vec::new()
    }
}
