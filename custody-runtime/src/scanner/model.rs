//! The deposit pipeline, driven by the real scanner over a real store, against a tiny model of
//! the chain: random sequences of new blocks, reorganizations 1 to 10 deep (dropping
//! transfers, mining some of them again, adding new ones), scanner restarts, partial scans and
//! the crediting kill switch.
//!
//! After every step: no deposit's history ever shortens, and per deposit the ledger's credits
//! minus reversals is 0 or 1. At the end, once the chain settles and crediting is on: every
//! transfer on the canonical chain is credited exactly once (net), every transfer that left it
//! is not, and each user's balance is the sum of their canonical transfers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use custody_core::admin::set_control;
use custody_core::asset::Asset;
use custody_core::chain::{ChainAddress, TxHash};
use custody_core::deposit::{DepositFilter, DepositStatus, PipelineSettings, WatchSet};
use custody_core::error::PortError;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ledger::{self, TxKind, UserAccount};
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, OnchainBalance, ScannedBlock};
use custody_core::ports::store::{read, write};
use custody_core::ports::{ChainSource, Store};
use custody_core::{Amount, AssetCatalog, AssetId, Network, Timestamp};
use custody_store_sqlite::{SqliteStore, StoreOptions};
use proptest::prelude::*;
use uuid::Uuid;

use super::Scanner;
use crate::system::{OsEntropy, SystemClock};

const CONFIRMATIONS: u32 = 3;
const USERS: [&str; 2] = ["u0", "u1"];

/// A transfer the model may put in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Payment {
    id: u32,
    user: usize,
    units: u128,
}

#[derive(Debug, Clone)]
enum Op {
    /// A new block on top, with these new payments.
    Mine(Vec<(usize, u128)>),
    /// The newest `depth` blocks are replaced by `len` new ones; payments of the dropped
    /// blocks whose bit is set in `remine` are mined again in the first new block.
    Reorg {
        depth: usize,
        len: usize,
        remine: u16,
        new: Vec<(usize, u128)>,
    },
    Ticks(u8),
    Restart,
    Crediting(bool),
}

fn op() -> impl Strategy<Value = Op> {
    let payments = prop::collection::vec((0..USERS.len(), 1u128..1_000), 0..3);
    prop_oneof![
        4 => payments.clone().prop_map(Op::Mine),
        2 => (1usize..=10, 1usize..=12, any::<u16>(), payments)
            .prop_map(|(depth, len, remine, new)| Op::Reorg { depth, len, remine, new }),
        4 => (1u8..4).prop_map(Op::Ticks),
        1 => Just(Op::Restart),
        1 => any::<bool>().prop_map(Op::Crediting),
    ]
}

/// The node: the model's canonical chain, served as blocks.
#[derive(Default)]
struct Node {
    /// Block n at index n; each block's payments.
    blocks: Mutex<Vec<(BlockHeader, Vec<Payment>)>>,
    addresses: Mutex<Vec<String>>,
}

impl Node {
    fn block(&self, n: u64) -> Option<ScannedBlock> {
        let blocks = self.blocks.lock().unwrap();
        let (header, payments) = blocks.get(usize::try_from(n).ok()?)?.clone();
        let addresses = self.addresses.lock().unwrap();
        let transfers = payments
            .iter()
            .map(|p| ObservedTransfer {
                tx_hash: TxHash::parse(&format!("{:064x}", p.id)).expect("hex"),
                log_index: None,
                asset_code: "BNB".into(),
                from: ChainAddress::parse(
                    Network::Bsc,
                    "0x0000000000000000000000000000000000000001",
                )
                .expect("an address"),
                to: ChainAddress::parse(Network::Bsc, &addresses[p.user]).expect("an address"),
                amount: Amount::from_units(p.units),
                succeeded: true,
            })
            .collect();
        Some(ScannedBlock { header, transfers })
    }
}

#[async_trait]
impl ChainSource for Node {
    fn network(&self) -> Network {
        Network::Bsc
    }
    async fn head_number(&self) -> Result<u64, PortError> {
        Ok(self.blocks.lock().unwrap().len() as u64 - 1)
    }
    async fn header(&self, n: u64) -> Result<Option<BlockHeader>, PortError> {
        Ok(self.block(n).map(|b| b.header))
    }
    async fn scan_block(&self, n: u64) -> Result<Option<ScannedBlock>, PortError> {
        Ok(self.block(n))
    }
    async fn balance(&self, _: &str, _: &Asset) -> Result<OnchainBalance, PortError> {
        Err(PortError::permanent("model", "no balances"))
    }
    fn endpoint_health(&self) -> Vec<custody_core::chain::EndpointHealth> {
        Vec::new()
    }
}

/// Appends a block on `branch` carrying `payments`.
fn push(blocks: &mut Vec<(BlockHeader, Vec<Payment>)>, branch: u32, payments: Vec<Payment>) {
    let number = blocks.len() as u64;
    let parent_hash = blocks
        .last()
        .map_or_else(|| "00".repeat(32), |(h, _)| h.hash.clone());
    blocks.push((
        BlockHeader {
            number,
            hash: format!("{branch:08x}{number:056x}"),
            parent_hash,
            timestamp_ms: 0,
        },
        payments,
    ));
}

fn scanner(store: &Arc<dyn Store>, node: &Arc<Node>, watch: &Arc<WatchSet>) -> Scanner {
    Scanner {
        chain: Arc::clone(node) as Arc<dyn ChainSource>,
        store: Arc::clone(store),
        clock: Arc::new(SystemClock),
        entropy: Arc::new(OsEntropy),
        catalog: Arc::new(AssetCatalog::mainnet()),
        watch: Arc::clone(watch),
        settings: PipelineSettings {
            network: Network::Bsc,
            required_confirmations: CONFIRMATIONS,
            blocks_kept: 64,
            hot_wallets: Vec::new(),
        },
        poll_interval: Duration::from_millis(1),
        blocks_per_tick_max: 5,
        start_block: Some(0),
        stuck_alert_after: Duration::from_secs(600),
        watch_after: std::sync::atomic::AtomicU64::new(0),
        status: Arc::default(),
        halted: AtomicBool::new(false),
        exclusive: Arc::new(custody_core::ports::Alone),
    }
}

/// Per deposit (by tx hash): (history length, net credits).
async fn observe(store: &dyn Store) -> BTreeMap<String, (usize, i64, DepositStatus)> {
    let (deposits, net) = read(store, |tx| {
        let mut deposits = Vec::new();
        for user in USERS {
            let filter = DepositFilter {
                external_user_id: Some(user.to_owned()),
                ..DepositFilter::default()
            };
            deposits.extend(tx.list_deposits(
                &custody_core::TenantId::parse("t").unwrap(),
                &filter,
                1_000,
            )?);
        }
        let mut net: HashMap<Uuid, i64> = HashMap::new();
        tx.scan_ledger_transactions(&mut |t| match t.kind {
            TxKind::DepositCredit => *net.entry(t.reference_id).or_default() += 1,
            TxKind::DepositReversal => *net.entry(t.reference_id).or_default() -= 1,
            _ => {}
        })?;
        Ok((deposits, net))
    })
    .await
    .unwrap();
    deposits
        .into_iter()
        .map(|d| {
            let n = net.get(&d.id).copied().unwrap_or(0);
            (d.tx_hash.clone(), (d.history.len(), n, d.status))
        })
        .collect()
}

async fn run_case(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("db"), StoreOptions::default()).unwrap());
    let phrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
    let signer =
        Arc::new(HdSigner::from_seed(&Mnemonic::parse(phrase).unwrap().to_seed()).unwrap());
    let node = Arc::new(Node::default());
    for user in USERS {
        let (signer, ids) = (Arc::clone(&signer), [Uuid::new_v4(), Uuid::new_v4()]);
        let now = Timestamp::from_unix_millis(1_800_000_000_000);
        let w = write(store.as_ref(), move |tx| {
            custody_core::wallet::create_wallet(
                tx,
                signer.as_ref(),
                ids,
                &custody_core::TenantId::parse("t").unwrap(),
                user,
                Network::Bsc,
                now,
            )
        })
        .await
        .unwrap();
        node.addresses.lock().unwrap().push(w.wallet.address);
    }
    let watch = Arc::new(WatchSet::new());
    watch.extend(Network::Bsc, node.addresses.lock().unwrap().clone());
    push(&mut node.blocks.lock().unwrap(), 0, Vec::new());

    let mut scan = scanner(&store, &node, &watch);
    let (mut next_id, mut branch, mut highest) = (1u32, 0u32, 1usize);
    let mut seen = observe(store.as_ref()).await;
    let new_payments = |list: &[(usize, u128)], next_id: &mut u32| -> Vec<Payment> {
        list.iter()
            .map(|&(user, units)| {
                *next_id += 1;
                Payment {
                    id: *next_id,
                    user,
                    units,
                }
            })
            .collect()
    };
    let set_crediting = |on: bool| {
        let store = Arc::clone(&store);
        async move {
            write(store.as_ref(), move |tx| {
                set_control(
                    tx,
                    Uuid::new_v4(),
                    "model",
                    "kill_switch.deposit_crediting",
                    !on,
                    "model test",
                    Timestamp::from_unix_millis(1_800_000_000_000),
                )
            })
            .await
            .unwrap();
        }
    };

    for op in ops {
        match op {
            Op::Mine(list) => {
                let payments = new_payments(&list, &mut next_id);
                push(&mut node.blocks.lock().unwrap(), branch, payments);
            }
            Op::Reorg {
                depth,
                len,
                remine,
                new,
            } => {
                branch += 1;
                let mut blocks = node.blocks.lock().unwrap();
                let keep = blocks.len().saturating_sub(depth).max(1);
                let dropped: Vec<Payment> = blocks.drain(keep..).flat_map(|(_, p)| p).collect();
                let mut first: Vec<Payment> = dropped
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| remine & (1 << (i % 16)) != 0)
                    .map(|(_, p)| p)
                    .collect();
                first.extend(new_payments(&new, &mut next_id));
                push(&mut blocks, branch, first);
                for _ in 1..len {
                    push(&mut blocks, branch, Vec::new());
                }
            }
            Op::Ticks(k) => {
                for _ in 0..k {
                    scan.tick()
                        .await
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Op::Restart => scan = scanner(&store, &node, &watch),
            Op::Crediting(on) => set_crediting(on).await,
        }
        highest = highest.max(node.blocks.lock().unwrap().len());
        let now = observe(store.as_ref()).await;
        for (hash, (len, net, _)) in &now {
            prop_assert!((0..=1).contains(net), "deposit {hash}: net credits {net}");
            if let Some((before, _, _)) = seen.get(hash) {
                prop_assert!(len >= before, "deposit {hash}: history shortened");
            }
        }
        prop_assert!(
            !scan.halted.load(Ordering::SeqCst),
            "a fork within the kept blocks halted the scanner"
        );
        seen = now;
    }

    // Settle: crediting on, enough blocks on top, scan to the head. A chain that reorganized
    // to fewer blocks than our cursor is taken for a lagging node until it grows past the
    // cursor (the safe reading: a lagging replica is far more common), so it grows past the
    // highest block ever served.
    set_crediting(true).await;
    {
        let mut blocks = node.blocks.lock().unwrap();
        while blocks.len() < highest + 1 + CONFIRMATIONS as usize {
            push(&mut blocks, branch, Vec::new());
        }
    }
    for _ in 0..200 {
        if matches!(scan.tick().await, Ok(super::Tick::UpToDate)) {
            break;
        }
    }
    scan.tick()
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let canonical: Vec<Payment> = node
        .blocks
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, p)| p.clone())
        .collect();
    let end = observe(store.as_ref()).await;
    let mut expected = [0u128; USERS.len()];
    for p in &canonical {
        let hash = format!("{:064x}", p.id);
        let Some((_, net, status)) = end.get(&hash) else {
            return Err(TestCaseError::fail(format!(
                "payment {} never detected",
                p.id
            )));
        };
        prop_assert_eq!(*net, 1, "payment {} on the chain: net credits", p.id);
        prop_assert_eq!(*status, DepositStatus::Credited);
        expected[p.user] += p.units;
    }
    for (hash, (_, net, status)) in &end {
        if !canonical.iter().any(|p| format!("{:064x}", p.id) == *hash) {
            prop_assert_eq!(*net, 0, "deposit {} off the chain is not credited", hash);
            prop_assert!(matches!(
                status,
                DepositStatus::Orphaned | DepositStatus::Reversed
            ));
        }
    }
    for (i, user) in USERS.iter().enumerate() {
        let account = UserAccount::new(
            "t".to_owned(),
            (*user).to_owned(),
            AssetId::new(Network::Bsc, "BNB".to_owned()),
        );
        let balance = read(store.as_ref(), move |tx| {
            Ok(ledger::user_balance(tx, &account)?)
        })
        .await
        .unwrap();
        prop_assert_eq!(
            balance.available.units(),
            expected[i],
            "balance of {}",
            user
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_transfer_is_credited_exactly_once_through_reorgs_and_restarts(
        ops in prop::collection::vec(op(), 1..40)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run_case(ops))?;
    }
}
