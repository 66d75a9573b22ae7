//! A local BSC devnet for trying the service by hand (`./scripts/dev.sh --devnet`): anvil with
//! the catalog's USDT and USDC, WBNB and PancakeSwap's factory and router at their mainnet
//! addresses (the Uniswap V2 bytecode npm ships), pools seeded with liquidity, the hot wallet
//! funded, and `custody serve` configured against it, with the commands to try printed.
//!
//! `devnet up DIR LISTEN` (a fresh DIR each time: the chain is new) runs until Ctrl-C;
//! `devnet send DIR ADDRESS ASSET UNITS` sends BNB, USDT or USDC on that chain to ADDRESS (a
//! deposit address, say) as a real transfer the service will see.

use std::path::{Path, PathBuf};
use std::process::Command;

use custody_e2e::anvil::Anvil;
use custody_e2e::dex::{Dex, USDC, USDT};
use custody_e2e::receiver::set_config;
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;

/// Where the printed withdrawal sends: an address nobody holds a key of, so its balance on the
/// devnet is only what withdrawals paid it.
const WITHDRAWAL_DESTINATION: &str = "0x00000000000000000000000000000000000000D5";

fn custody(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(custody_e2e::custody_bin())
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("the custody binary runs");
    assert!(
        out.status.success(),
        "custody {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn up(dir: &Path, listen: &str) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove the previous devnet data dir");
    }
    let anvil = Anvil::start_with(&["--block-time", "1"])
        .expect("anvil is not installed: run scripts/install-anvil.sh");
    let dex = Dex::deploy(&anvil);
    dex.add_liquidity_bnb(USDT, 600_000 * E18, 1_000 * E18);
    dex.add_liquidity_bnb(USDC, 600_000 * E18, 1_000 * E18);
    dex.add_liquidity(USDT, USDC, 500_000 * E18, 500_000 * E18);

    custody(dir, &["init", "--insecure-dev-seed"]);
    set_config(dir, "bsc", "poll_interval_ms", "500");
    set_config(dir, "bsc", "start_block", &anvil.block_number().to_string());
    let partner = custody(dir, &["credentials", "create", "--tenant", "demo"]);
    std::fs::write(dir.join("demo-credential.json"), &partner).unwrap();
    let ops = custody(
        dir,
        &["credentials", "create", "--tenant", "ops", "--admin"],
    );
    std::fs::write(dir.join("ops-credential.json"), &ops).unwrap();
    let shown: Value = serde_json::from_str(&custody(dir, &["treasury", "show"])).unwrap();
    let hot = shown["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["network"] == "BSC")
        .unwrap()["address"]
        .as_str()
        .unwrap()
        .to_owned();
    anvil.send_value(&dex.lp, &hot, 100 * E18);
    dex.deal(USDT, &hot, 100_000 * E18);
    dex.deal(USDC, &hot, 100_000 * E18);
    std::fs::write(
        dir.join("devnet.json"),
        json!({ "rpc_port": anvil.port(), "rpc_url": anvil.url(), "lp": dex.lp }).to_string(),
    )
    .unwrap();

    let d = dir.display();
    println!(
        "BSC devnet on {url} (chain id 56): USDT, USDC, WBNB, PancakeSwap V2 at their mainnet \
         addresses, pools USDT/BNB, USDC/BNB, USDT/USDC; hot wallet {hot} funded.\n\
         custody serves http://{listen}/v1 with data dir {d}.\n\n\
         Partner credential: {d}/demo-credential.json; operator: {d}/ops-credential.json.\n\
         Try (in another terminal):\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json POST /v1/wallets '{{\"external_user_id\":\"alice\",\"network\":\"BSC\"}}' key-alice-0001\n\
         \x20 cargo run -q -p custody-e2e --bin devnet -- send {d} <alice's address> USDT 250000000000000000000\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json GET '/v1/deposits'\n\
         Swap: quote, then execute the quote's id, then follow it:\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json POST /v1/swaps/quote '{{\"external_user_id\":\"alice\",\"asset_in\":\"USDT\",\"asset_out\":\"BNB\",\"amount_in_units\":\"100000000000000000000\"}}'\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json POST /v1/swaps '{{\"quote_id\":\"<the quote's id>\"}}' key-swap-0001\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json GET /v1/swaps/<the swap's id>\n\
         Withdrawal: quote, then execute the quote's id, then follow it:\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json POST /v1/withdrawals/quote '{{\"external_user_id\":\"alice\",\"network\":\"BSC\",\"asset\":\"USDT\",\"destination_address\":\"{WITHDRAWAL_DESTINATION}\",\"amount_units\":\"10000000000000000000\"}}'\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json POST /v1/withdrawals '{{\"quote_id\":\"<the quote's id>\"}}' key-withdrawal-0001\n\
         \x20 scripts/signed-curl.sh {d}/demo-credential.json GET /v1/withdrawals/<the withdrawal's id>\n\
         Ctrl-C stops both.",
        url = anvil.url(),
    );
    let status = Command::new(custody_e2e::custody_bin())
        .arg("--data-dir")
        .arg(dir)
        .args(["serve", "--listen", listen])
        .env("CUSTODY_BSC_RPC_URLS", anvil.url())
        .status()
        .expect("custody serve runs");
    drop(anvil);
    std::process::exit(status.code().unwrap_or(1));
}

fn send(dir: &Path, address: &str, asset: &str, units: &str) {
    let text = std::fs::read_to_string(dir.join("devnet.json"))
        .unwrap_or_else(|e| panic!("no devnet in {} ({e}): start one first", dir.display()));
    let devnet: Value = serde_json::from_str(&text).expect("devnet.json");
    let port = u16::try_from(devnet["rpc_port"].as_u64().expect("rpc_port")).expect("a port");
    let anvil = Anvil::attach(port);
    let dex = Dex {
        anvil: &anvil,
        lp: devnet["lp"].as_str().expect("lp").to_owned(),
    };
    let amount: u128 = units.parse().expect("UNITS is a whole number of units");
    let hash = match asset {
        "BNB" => anvil.send_value(&dex.lp, address, amount),
        "USDT" | "USDC" => {
            let token = if asset == "USDT" { USDT } else { USDC };
            let held = anvil.token_balance(token, &dex.lp);
            dex.deal(token, &dex.lp, held + amount);
            anvil.token_transfer(token, &dex.lp, address, amount)
        }
        other => panic!("ASSET is BNB, USDT or USDC, not {other}"),
    };
    println!("{hash}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match (arg(0), arg(1)) {
        (Some("up"), Some(dir)) => up(&PathBuf::from(dir), arg(2).unwrap_or("127.0.0.1:8080")),
        (Some("send"), Some(dir)) => match (arg(2), arg(3), arg(4)) {
            (Some(address), Some(asset), Some(units)) => {
                send(&PathBuf::from(dir), address, asset, units)
            }
            _ => usage(),
        },
        _ => usage(),
    }
}

fn usage() {
    eprintln!(
        "usage: devnet up DIR [LISTEN]\n       devnet send DIR ADDRESS (BNB|USDT|USDC) UNITS"
    );
    std::process::exit(2);
}
