//! A [`ChainSource`] whose blocks the test scripts: what a scanner, a holdings check or a
//! listing of endpoints reads, without a node.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use custody_core::asset::Asset;
use custody_core::chain::EndpointHealth;
use custody_core::error::PortError;
use custody_core::ports::chain::{BlockHeader, OnchainBalance, ScannedBlock};
use custody_core::ports::ChainSource;
use custody_core::Network;

/// A BSC node serving the scripted blocks (block `n` at index `n`) up to its visible head.
/// It can lag (a head below the blocks it holds), lack heights below its head (a replica
/// behind a load balancer), or be down (every head request fails). It has no balances.
#[derive(Debug, Default)]
pub struct ScriptedNode {
    blocks: Mutex<Vec<ScannedBlock>>,
    visible: AtomicU64,
    lacking: Mutex<BTreeSet<u64>>,
    down: AtomicBool,
    scans: AtomicU64,
}

impl ScriptedNode {
    /// A node holding `blocks` whose head is `visible`.
    pub fn new(blocks: Vec<ScannedBlock>, visible: u64) -> Self {
        ScriptedNode {
            blocks: Mutex::new(blocks),
            visible: AtomicU64::new(visible),
            ..ScriptedNode::default()
        }
    }

    /// The node now holds `blocks` instead (a reorganization).
    pub fn set_blocks(&self, blocks: Vec<ScannedBlock>) {
        *self.blocks.lock().unwrap() = blocks;
    }

    /// The head the node names from now on.
    pub fn set_visible(&self, head: u64) {
        self.visible.store(head, Ordering::SeqCst);
    }

    /// The node stops serving these heights (it still names its head).
    pub fn lack(&self, heights: Range<u64>) {
        self.lacking.lock().unwrap().extend(heights);
    }

    /// The node serves every height up to its head again.
    pub fn serve_all(&self) {
        self.lacking.lock().unwrap().clear();
    }

    /// Whether every head request fails from now on.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// How many blocks were asked for so far.
    pub fn scans(&self) -> u64 {
        self.scans.load(Ordering::SeqCst)
    }

    fn get(&self, n: u64) -> Option<ScannedBlock> {
        if n > self.visible.load(Ordering::SeqCst) || self.lacking.lock().unwrap().contains(&n) {
            return None;
        }
        self.blocks
            .lock()
            .unwrap()
            .get(usize::try_from(n).ok()?)
            .cloned()
    }
}

#[async_trait]
impl ChainSource for ScriptedNode {
    fn network(&self) -> Network {
        Network::Bsc
    }
    async fn head_number(&self) -> Result<u64, PortError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(PortError::transient("test", "node down"));
        }
        Ok(self.visible.load(Ordering::SeqCst))
    }
    async fn header(&self, n: u64) -> Result<Option<BlockHeader>, PortError> {
        Ok(self.get(n).map(|b| b.header))
    }
    async fn scan_block(&self, n: u64) -> Result<Option<ScannedBlock>, PortError> {
        self.scans.fetch_add(1, Ordering::SeqCst);
        Ok(self.get(n))
    }
    async fn balance(&self, _: &str, _: &Asset) -> Result<OnchainBalance, PortError> {
        Err(PortError::permanent("test", "no balances here"))
    }
    fn endpoint_health(&self) -> Vec<EndpointHealth> {
        Vec::new()
    }
}
