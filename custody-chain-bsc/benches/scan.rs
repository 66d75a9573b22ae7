//! Scanning rate of `BscChain::scan_block` against a local anvil node, and the core-side cost
//! of matching the transfers of a block against the watched deposit addresses.
//!
//! Run with `cargo bench -p custody-chain-bsc --bench scan` (needs anvil:
//! `scripts/install-anvil.sh`). Plain `std::time::Instant`, no harness; each measurement stops
//! after `MEASURE_SECONDS`, the whole run takes well under a minute.
//!
//! What is measured:
//! 1. blocks per second scanned one after the other (what the scanner does), for empty blocks
//!    and for blocks holding `TRANSFERS_PER_BLOCK` catalog token transfers, with receipts read
//!    by `eth_getBlockReceipts` and by batched `eth_getTransactionReceipt`. Twice: straight
//!    from anvil (whose own `eth_getBlockByNumber` of 200 full transactions takes ~75 ms), and
//!    from a replay endpoint that serves anvil's recorded answers from memory over keep-alive
//!    HTTP, which isolates the adapter's own cost (HTTP, JSON, checks) from the node's;
//! 2. the matching the core does per transfer: one `HashSet<String>` lookup of the recipient,
//!    with 10 and with 100,000 watched addresses.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use custody_chain_bsc::{BscChain, BscSettings};
use custody_core::address::BscAddress;
use custody_core::asset::{Asset, AssetKind};
use custody_core::ports::chain::ObservedTransfer;
use custody_core::ports::ChainSource;
use custody_core::Network;
use custody_e2e::anvil::Anvil;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

const EMPTY_BLOCKS: u64 = 300;
const TOKEN_BLOCKS: u64 = 8;
const TRANSFERS_PER_BLOCK: usize = 200;
const MEASURE_SECONDS: u64 = 2;
/// BSC's block interval (BEP-524, 0.45 s).
const BSC_BLOCK_MS: f64 = 450.0;

fn recipient(i: usize) -> BscAddress {
    let mut bytes = [0x5au8; 20];
    bytes[16..].copy_from_slice(&u32::try_from(i).expect("small index").to_be_bytes());
    BscAddress::from_bytes(bytes)
}

struct Rate {
    blocks: u64,
    elapsed: Duration,
}

impl Rate {
    #[allow(clippy::float_arithmetic)]
    fn per_second(&self) -> f64 {
        self.blocks as f64 / self.elapsed.as_secs_f64()
    }
    #[allow(clippy::float_arithmetic)]
    fn ms_per_block(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1000.0 / self.blocks as f64
    }
}

/// Scans `blocks` in a loop, one after the other, until `MEASURE_SECONDS` have passed (at
/// least one full pass). Checks every scan found `expect_transfers`.
async fn measure(chain: &BscChain, blocks: &[u64], expect_transfers: usize) -> Rate {
    let budget = Duration::from_secs(MEASURE_SECONDS);
    let started = Instant::now();
    let mut scanned = 0u64;
    'outer: loop {
        for n in blocks {
            let block = chain
                .scan_block(*n)
                .await
                .expect("scan succeeds")
                .expect("block exists");
            assert_eq!(block.transfers.len(), expect_transfers, "block {n}");
            black_box(&block);
            scanned += 1;
            if started.elapsed() > budget && scanned >= blocks.len() as u64 {
                break 'outer;
            }
        }
    }
    Rate {
        blocks: scanned,
        elapsed: started.elapsed(),
    }
}

/// Serialized `"result":...` or `"error":...` member of each answer, by method and params.
type Answers = Arc<Mutex<HashMap<String, Arc<str>>>>;

/// The answer to one call: from memory, or asked of anvil once and kept (serialized, so a
/// replay costs the server a string copy, not a JSON encoding).
async fn replay_one(anvil: &Arc<Anvil>, answers: &Answers, call: &Value) -> String {
    let key = format!("{}{}", call["method"], call["params"]);
    let known = answers.lock().unwrap().get(&key).cloned();
    let member = match known {
        Some(m) => m,
        None => {
            let (anvil, method, params) = (
                anvil.clone(),
                call["method"].as_str().unwrap_or("").to_owned(),
                call["params"].clone(),
            );
            let answer = tokio::task::spawn_blocking(move || anvil.try_rpc(&method, params))
                .await
                .expect("anvil call");
            let member: Arc<str> = match answer {
                Ok(result) => format!("\"result\":{result}"),
                Err(error) => format!("\"error\":{error}"),
            }
            .into();
            answers.lock().unwrap().insert(key, member.clone());
            member
        }
    };
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{},{member}}}", call["id"])
}

/// A JSON-RPC endpoint (hyper, HTTP/1.1 keep-alive) replaying anvil's answers from memory.
async fn start_replay(anvil: Arc<Anvil>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answers: Answers = Arc::default();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (anvil, answers) = (anvil.clone(), answers.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (anvil, answers) = (anvil.clone(), answers.clone());
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let request: Value = serde_json::from_slice(&body).unwrap();
                        let answer = match &request {
                            Value::Array(calls) => {
                                let mut out = Vec::with_capacity(calls.len());
                                for c in calls {
                                    out.push(replay_one(&anvil, &answers, c).await);
                                }
                                format!("[{}]", out.join(","))
                            }
                            call => replay_one(&anvil, &answers, call).await,
                        };
                        let bytes = Bytes::from(answer);
                        Ok::<_, Infallible>(Response::new(Full::new(bytes)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    url
}

/// Lookups per second of each transfer's recipient in a set of `watched` addresses.
#[allow(clippy::float_arithmetic)]
fn matching(transfers: &[ObservedTransfer], watched_count: usize) -> (f64, usize) {
    // Half of the block's recipients are ours, the rest of the set is other users.
    let mut watched: HashSet<String> = transfers
        .iter()
        .step_by(2)
        .map(|t| t.to.as_str().to_owned())
        .take(watched_count)
        .collect();
    let mut i = 1_000_000;
    while watched.len() < watched_count {
        watched.insert(recipient(i).to_string());
        i += 1;
    }
    let budget = Duration::from_secs(1);
    let started = Instant::now();
    let mut lookups = 0usize;
    let mut hits = 0usize;
    while started.elapsed() < budget {
        for t in transfers {
            if watched.contains(black_box(t.to.as_str())) {
                hits += 1;
            }
        }
        lookups += transfers.len();
    }
    let ns = started.elapsed().as_nanos() as f64 / lookups as f64;
    (ns, hits * transfers.len() / lookups.max(1))
}

#[allow(clippy::float_arithmetic)]
fn main() {
    let Some(anvil) = Anvil::start() else {
        println!("bench skipped: anvil is not installed (scripts/install-anvil.sh)");
        return;
    };
    let owner = anvil.account(0).to_owned();
    let token = anvil.deploy_token(&owner, "Bench token", "BNCH");
    anvil.mined(&anvil.mint(&token, &owner, &owner, u128::from(u64::MAX)));

    let setup = Instant::now();
    let first_empty = anvil.block_number() + 1;
    anvil.mine(EMPTY_BLOCKS);
    let empty: Vec<u64> = (first_empty..first_empty + EMPTY_BLOCKS).collect();

    anvil.set_automine(false);
    let mut full = Vec::new();
    for b in 0..TOKEN_BLOCKS {
        for i in 0..TRANSFERS_PER_BLOCK {
            let to = recipient(usize::try_from(b).unwrap() * TRANSFERS_PER_BLOCK + i);
            anvil.token_transfer(&token, &owner, &to.to_lowercase_hex(), 1 + i as u128);
        }
        anvil.mine(1);
        full.push(anvil.block_number());
    }
    anvil.set_automine(true);
    println!(
        "setup: {EMPTY_BLOCKS} empty blocks and {TOKEN_BLOCKS} blocks of {TRANSFERS_PER_BLOCK} \
         token transfers in {:.1} s",
        setup.elapsed().as_secs_f64()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let assets = vec![
        Asset {
            network: Network::Bsc,
            code: "BNB".into(),
            kind: AssetKind::Native,
            decimals: 18,
            contract: None,
        },
        Asset {
            network: Network::Bsc,
            code: "BNCH".into(),
            kind: AssetKind::Bep20,
            decimals: 18,
            contract: Some(BscAddress::parse(&token).unwrap().to_string()),
        },
    ];
    let anvil = Arc::new(anvil);
    let replay = runtime.block_on(start_replay(anvil.clone()));

    println!();
    println!(
        "| node | receipts via | transfers/block | blocks scanned | blocks/s | ms/block | margin vs 450 ms |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut sample = Vec::new();
    for (node, url) in [("anvil", anvil.url()), ("replay", replay)] {
        for use_block_receipts in [true, false] {
            let chain = BscChain::new(BscSettings {
                urls: vec![url.clone()],
                chain_id: 56,
                assets: assets.clone(),
                use_block_receipts,
                ..BscSettings::default()
            })
            .expect("settings");
            let mode = if use_block_receipts {
                "eth_getBlockReceipts"
            } else {
                "eth_getTransactionReceipt batch"
            };
            runtime.block_on(async {
                // Warm up: first contact, chain id check, connection pool, replay memory.
                chain.head_number().await.expect("head");
                for n in empty.iter().chain(&full) {
                    let block = chain.scan_block(*n).await.unwrap().unwrap();
                    if sample.len() < full.len() * TRANSFERS_PER_BLOCK {
                        sample.extend(block.transfers);
                    }
                }
                for (blocks, per_block) in [(&empty, 0), (&full, TRANSFERS_PER_BLOCK)] {
                    let rate = measure(&chain, blocks, per_block).await;
                    println!(
                        "| {node} | {mode} | {per_block} | {} | {:.0} | {:.2} | {:.0}× |",
                        rate.blocks,
                        rate.per_second(),
                        rate.ms_per_block(),
                        BSC_BLOCK_MS / rate.ms_per_block()
                    );
                }
            });
        }
    }
    assert_eq!(sample.len(), full.len() * TRANSFERS_PER_BLOCK);

    println!();
    println!(
        "| watched addresses | ns per transfer lookup | µs per block of {TRANSFERS_PER_BLOCK} | \
         recipients watched among {} |",
        sample.len()
    );
    println!("|---:|---:|---:|---:|");
    for watched in [10, 100_000] {
        let (ns, hits) = matching(&sample, watched);
        println!(
            "| {watched} | {ns:.1} | {:.1} | {hits} |",
            ns * TRANSFERS_PER_BLOCK as f64 / 1000.0
        );
    }
}
