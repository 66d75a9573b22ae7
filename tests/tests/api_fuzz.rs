//! API fuzzing with schemathesis against `/v1/openapi.json` of a real `custody serve` (BSC on
//! anvil with the DEX, TRON on the API test server), every request signed over the exact bytes
//! sent (tests/fuzz/hooks.py), with every check schemathesis has and the examples, coverage,
//! fuzzing and stateful phases. Zero server errors, zero answers outside the document, and no
//! schema-valid request refused for its shape. Short profile by default;
//! `CUSTODY_RELIABILITY=long` generates at least 10,000 requests (docs/reliability.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use custody_e2e::anvil::Anvil;
use custody_e2e::dex::{Dex, USDC, USDT};
use custody_e2e::receiver::set_config;
use custody_e2e::tron_api::TronApi;
use custody_e2e::{profile, Custody};
use serde_json::Value;

const E18: u128 = 1_000_000_000_000_000_000;
const SUN: i64 = 1_000_000;
const MAINNET_GENESIS: &str = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc";
const TRON_USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

fn schemathesis() -> PathBuf {
    let python = std::env::var("CUSTODY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/py/bin/python"));
    python.with_file_name("schemathesis")
}

/// A service with both chains reachable and funded, and alice and bob holding balances on both.
fn funded_service(anvil: &Anvil, api: &TronApi) -> Custody {
    let dex = Dex::deploy(anvil);
    dex.add_liquidity_bnb(USDT, 600_000 * E18, 1_000 * E18);
    dex.add_liquidity_bnb(USDC, 601_000 * E18, 1_000 * E18);
    let custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[
            ("CUSTODY_BSC_RPC_URLS", anvil.url().as_str()),
            ("CUSTODY_TRON_API_URLS", api.url()),
        ],
    );
    custody.edit_config(
        &format!("genesis_block_id = \"{MAINNET_GENESIS}\""),
        &format!("genesis_block_id = \"{}\"", api.genesis_block_id()),
    );
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "200");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "tron", "poll_interval_ms", "200");
    set_config(&dir, "tron", "start_block", &api.head().number.to_string());
    let path = dir.join("custody.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(
        "\n[[native_rates]]\nnetwork = \"TRON\"\nasset = \"USDT\"\nasset_units = \"120000\"\nnative_units = \"1000000\"\n",
    );
    std::fs::write(&path, text).unwrap();
    // The hot wallets hold more than every liability, so a TREASURY reconciliation the fuzzer
    // schedules finds no shortfall (which would stop withdrawals with 503 by design).
    let hot_bsc = custody.hot_wallet("BSC");
    anvil.send_value(&dex.lp, &hot_bsc, 50 * E18);
    dex.deal(USDT, &hot_bsc, 50_000 * E18);
    dex.deal(USDC, &hot_bsc, 50_000 * E18);
    let hot_tron = custody.hot_wallet("TRON");
    api.set_trx_balance(&hot_tron, 1_000_000 * SUN);
    api.set_trc20_balance(TRON_USDT, &hot_tron, 1_000_000_000_000);
    custody
}

#[test]
fn schemathesis_finds_no_server_error_and_no_answer_outside_the_document() {
    let Some(anvil) = Anvil::start() else { return };
    let api = TronApi::start();
    api.append_empty(30);
    let mut custody = funded_service(&anvil, &api);
    let partner = custody.credential("acme", &["--rate-limit", "100000000"]);
    let admin = custody.credential("ops", &["--admin", "--rate-limit", "100000000"]);
    custody.start();
    let client = custody.client(&partner);
    for user in ["alice", "bob"] {
        for network in ["BSC", "TRON"] {
            let wallet = client.wallet(user, network);
            if (user, network) == ("alice", "BSC") {
                // A deposit, so the listing's link leads to a real one.
                let to = wallet["address"].as_str().unwrap();
                anvil.send_value(anvil.account(2), to, E18 / 100);
            }
        }
    }
    custody.wait_for(60, "the deposit detected", || {
        (!client.deposits("").is_empty()).then_some(())
    });
    for (network, asset, units) in [
        ("BSC", "BNB", 5 * E18),
        ("BSC", "USDT", 1_000 * E18),
        ("BSC", "USDC", 1_000 * E18),
        ("TRON", "TRX", 1_000 * 1_000_000),
        ("TRON", "USDT", 1_000 * 1_000_000),
    ] {
        custody.adjust("acme", "alice", network, asset, true, &units.to_string());
    }

    let base = format!("http://{}/v1", custody.addr);
    let counts = custody.dir.path().join("fuzz-counts.json");
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let (examples, max_time) = profile::pick(("10", "90"), ("100", "300"));
    let started = std::time::Instant::now();
    let out = Command::new(schemathesis())
        // schemathesis keeps a cache in its working directory: the run's temp dir, not the tree.
        .current_dir(custody.dir.path())
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .env("PYTHONPATH", &fuzz_dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("CUSTODY_FUZZ_PARTNER", partner.json.to_string())
        .env("CUSTODY_FUZZ_ADMIN", admin.json.to_string())
        .env("CUSTODY_FUZZ_BASE_URL", &base)
        .env("CUSTODY_FUZZ_COUNTS", &counts)
        .env("NO_COLOR", "1")
        .arg("--config-file")
        .arg(fuzz_dir.join("schemathesis.toml"))
        .arg("run")
        .arg(format!("{base}/openapi.json"))
        .args(["--url", &base, "--checks", "all", "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", examples, "--max-time", max_time])
        .args(["--suppress-health-check", "all", "--seed", "20261124"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} (scripts/install-pytools.sh): {e}",
                schemathesis().display()
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let statuses: Value =
        serde_json::from_str(&std::fs::read_to_string(&counts).unwrap_or_else(|_| "{}".into()))
            .unwrap();
    let total: u64 = statuses
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let server_errors: u64 = statuses
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with('5'))
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    println!(
        "api fuzz: {total} requests in {:.0} s, by status {statuses}",
        started.elapsed().as_secs_f64()
    );
    let summary: String = stdout
        .lines()
        .skip_while(|l| !l.contains("SUMMARY"))
        .collect::<Vec<_>>()
        .join("\n");
    println!("{summary}");
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{stdout}\n{stderr}"
    );
    assert_eq!(server_errors, 0, "5xx answers: {statuses}");
    let floor = profile::pick(1_000, 10_000);
    assert!(
        total >= floor,
        "only {total} requests were generated (at least {floor})"
    );
}
