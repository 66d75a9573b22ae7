//! Blocks per second `TronChain::scan_block` gets through from the TRON HTTP API test server
//! (`custody_e2e::tron_api`, loopback), with 0 and with 300 TRC20 transfers per block, against
//! TRON's one block every 3 s. Each block scan is the real path: `wallet/getblockbynum`, then
//! (when the block has contract calls) `wallet/gettransactioninfobyblocknum`, JSON parsing,
//! consistency checks and transfer extraction. The pure extraction (`scan::scan` on parsed
//! answers) is timed alone too.
//!
//! Bounded: each scenario stops after `CUSTODY_BENCH_SECONDS` seconds (default 5) or 2 000
//! scans, whichever comes first.
//!
//! ```sh
//! CARGO_TARGET_DIR=/work/target-tron cargo bench -p custody-chain-tron --bench scan
//! ```

use std::time::{Duration, Instant};

use custody_chain_tron::{api, scan, TronChain, TronSettings};
use custody_core::address::TronAddress;
use custody_core::asset::AssetCatalog;
use custody_core::ports::chain::ChainSource;
use custody_e2e::tron_api::{BlockSpec, TronApi};

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const DISTINCT_BLOCKS: u64 = 50;
const SCANS_MAX: u64 = 2_000;
const TRON_BLOCKS_PER_SECOND: f64 = 1.0 / 3.0;

fn budget() -> Duration {
    let seconds = std::env::var("CUSTODY_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    Duration::from_secs(seconds)
}

fn address(i: u64) -> String {
    let mut bytes = [0u8; 20];
    bytes[..8].copy_from_slice(&i.to_be_bytes());
    bytes[19] = 0x5a;
    TronAddress::from_bytes(bytes).to_string()
}

/// A chain of `DISTINCT_BLOCKS` blocks with `transfers` USDT transfers each; returns the first
/// block number.
fn fill(api: &TronApi, transfers: u64) -> u64 {
    let first = api.head().number + 1;
    for b in 0..DISTINCT_BLOCKS {
        let mut spec = BlockSpec::new();
        for t in 0..transfers {
            let n = b * 1_000 + t;
            spec = spec.trc20(USDT, &address(n), &address(n + 1), u128::from(n) + 1);
        }
        api.append(spec);
    }
    first
}

#[allow(clippy::float_arithmetic)]
fn report(name: &str, scans: u64, elapsed: Duration, transfers: usize) {
    let per_second = scans as f64 / elapsed.as_secs_f64();
    println!(
        "{name:<44} {scans:>5} blocks in {:>6.2} s = {per_second:>8.1} blocks/s \
         ({:>6.0}x TRON's block rate, {:.2} ms/block, {transfers} transfers/block)",
        elapsed.as_secs_f64(),
        per_second / TRON_BLOCKS_PER_SECOND,
        elapsed.as_secs_f64() * 1_000.0 / scans as f64,
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let catalog = AssetCatalog::mainnet();
    let budget = budget();
    println!(
        "TRON scanning, {} distinct blocks per scenario, budget {budget:?} or {SCANS_MAX} scans",
        DISTINCT_BLOCKS
    );

    for transfers in [0u64, 300] {
        let api = TronApi::start_at(70_000_000);
        let first = fill(&api, transfers);
        let settings =
            TronSettings::new(vec![api.url().into()]).with_genesis_block_id(api.genesis_block_id());
        let chain = TronChain::new(&settings, &catalog).unwrap();

        // Through HTTP, as the deposit scanner calls it.
        let (scans, elapsed, found) = runtime.block_on(async {
            let started = Instant::now();
            let mut scans = 0u64;
            let mut found = 0usize;
            while scans < SCANS_MAX && started.elapsed() < budget {
                let number = first + scans % DISTINCT_BLOCKS;
                let block = chain.scan_block(number).await.unwrap().unwrap();
                found = block.transfers.len();
                scans += 1;
            }
            (scans, started.elapsed(), found)
        });
        assert_eq!(found, usize::try_from(transfers).unwrap());
        report(
            &format!("scan_block over HTTP, {transfers} TRC20/block"),
            scans,
            elapsed,
            found,
        );

        // Extraction alone, on answers already parsed.
        let (block, infos) = runtime.block_on(async {
            let client = chain.client();
            let block = client.block_by_num(first).await.unwrap().unwrap();
            let infos = client.transaction_infos_by_block_num(first).await.unwrap();
            (block, infos)
        });
        let tron = scan::TronCatalog::from_assets(&catalog).unwrap();
        let started = Instant::now();
        let mut scans = 0u64;
        while scans < SCANS_MAX * 10 && started.elapsed() < budget / 5 {
            let scanned = scan::scan(&block, &infos, &tron).unwrap();
            assert_eq!(scanned.transfers.len(), found);
            scans += 1;
        }
        report(
            &format!("scan::scan alone, {transfers} TRC20/block"),
            scans,
            started.elapsed(),
            found,
        );

        // Parsing alone (the two answers' bytes to the adapter's types).
        let block_json = custody_e2e::raw_request(
            &api.addr().to_string(),
            "POST",
            "/wallet/getblockbynum",
            &[],
            format!("{{\"num\":{first}}}").as_bytes(),
        )
        .body;
        let infos_json = custody_e2e::raw_request(
            &api.addr().to_string(),
            "POST",
            "/wallet/gettransactioninfobyblocknum",
            &[],
            format!("{{\"num\":{first}}}").as_bytes(),
        )
        .body;
        let started = Instant::now();
        let mut scans = 0u64;
        while scans < SCANS_MAX * 10 && started.elapsed() < budget / 5 {
            let b: api::Block = serde_json::from_slice(&block_json).unwrap();
            let i: Vec<api::TransactionInfo> = serde_json::from_slice(&infos_json).unwrap();
            assert_eq!(b.transactions.len(), i.len());
            scans += 1;
        }
        report(
            &format!(
                "JSON parsing alone, {transfers} TRC20/block ({} + {} bytes)",
                block_json.len(),
                infos_json.len()
            ),
            scans,
            started.elapsed(),
            found,
        );
    }
}
