//! `BscChain` against a real EVM node (anvil, chain id 56), plus fake endpoints on loopback
//! for the failure classes. Each test starts its own node; a test skips (with a message) only
//! when anvil is not installed at all — `scripts/test.sh` installs it.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use custody_chain_bsc::{BscChain, BscSettings};
use custody_core::address::BscAddress;
use custody_core::asset::{Asset, AssetKind};
use custody_core::error::Retry;
use custody_core::ports::chain::ObservedTransfer;
use custody_core::ports::ChainSource;
use custody_core::{Amount, Network};
use custody_e2e::anvil::{free_port, value_tx, Anvil};
use serde_json::{json, Value};
use support::fake_endpoint;

mod support;

macro_rules! anvil_or_skip {
    () => {
        match Anvil::start() {
            Some(anvil) => anvil,
            None => return,
        }
    };
}

const ONE_BNB: u128 = 1_000_000_000_000_000_000;

fn txh(hash: &str) -> custody_core::chain::TxHash {
    custody_core::chain::TxHash::parse(hash).expect("a hash")
}

fn chain_addr(address: &str) -> custody_core::chain::ChainAddress {
    custody_core::chain::ChainAddress::parse(custody_core::Network::Bsc, address)
        .expect("an address")
}

fn eip55(address: &str) -> String {
    BscAddress::parse(address).unwrap().to_string()
}

fn strip0x(hash: &str) -> String {
    hash.trim_start_matches("0x").to_owned()
}

fn native_asset() -> Asset {
    Asset {
        network: Network::Bsc,
        code: "BNB".into(),
        kind: AssetKind::Native,
        decimals: 18,
        contract: None,
    }
}

fn token_asset(code: &str, contract: &str) -> Asset {
    Asset {
        network: Network::Bsc,
        code: code.into(),
        kind: AssetKind::Bep20,
        decimals: 18,
        contract: Some(eip55(contract)),
    }
}

fn settings(urls: Vec<String>, tokens: &[(&str, &str)]) -> BscSettings {
    let mut assets = vec![native_asset()];
    assets.extend(tokens.iter().map(|(code, c)| token_asset(code, c)));
    BscSettings {
        urls,
        chain_id: 56,
        request_timeout_ms: 5_000,
        assets,
        ..BscSettings::default()
    }
}

fn chain(anvil: &Anvil, tokens: &[(&str, &str)]) -> BscChain {
    BscChain::new(settings(vec![anvil.url()], tokens)).expect("valid settings")
}

/// A token deployed and funded: (address, deployer holding 1,000,000 units).
fn funded_token(anvil: &Anvil, symbol: &str) -> String {
    let owner = anvil.account(0).to_owned();
    let token = anvil.deploy_token(&owner, &format!("{symbol} token"), symbol);
    let mint = anvil.mint(&token, &owner, &owner, 1_000_000);
    assert_eq!(anvil.mined(&mint)["status"], json!("0x1"));
    token
}

/// Position of the (first) `Transfer` log in its transaction's receipt: what the adapter
/// reports as `log_index`, so a transfer re-mined in another block keeps its identity.
fn log_index(anvil: &Anvil, tx: &str) -> u32 {
    let receipt = anvil.mined(tx);
    let logs = receipt["logs"].as_array().unwrap();
    let position = logs
        .iter()
        .position(|l| {
            l["topics"][0]
                .as_str()
                .unwrap()
                .ends_with("ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
        })
        .expect("a Transfer log");
    u32::try_from(position).unwrap()
}

fn tx_index(anvil: &Anvil, tx: &str) -> u64 {
    custody_e2e::anvil::hex_u64(&anvil.mined(tx)["transactionIndex"])
}

#[tokio::test]
async fn head_and_headers_match_the_node() {
    let anvil = anvil_or_skip!();
    anvil.mine(5);
    let chain = chain(&anvil, &[]);
    assert_eq!(chain.network(), Network::Bsc);

    let head = chain.head_number().await.unwrap();
    assert_eq!(head, anvil.block_number());
    assert_eq!(head, 5);

    for n in 0..=head {
        let node = anvil.block(n);
        let h = chain.header(n).await.unwrap().expect("block exists");
        assert_eq!(h.number, n);
        assert_eq!(h.hash, strip0x(node["hash"].as_str().unwrap()));
        assert_eq!(h.parent_hash, strip0x(node["parentHash"].as_str().unwrap()));
        let seconds = i64::try_from(custody_e2e::anvil::hex_u64(&node["timestamp"])).unwrap();
        assert_eq!(h.timestamp_ms, seconds * 1000);
        assert_eq!(h.hash.len(), 64);
        assert!(h
            .hash
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
        if n > 0 {
            let parent = chain.header(n - 1).await.unwrap().unwrap();
            assert_eq!(h.parent_hash, parent.hash);
        }
    }
    assert_eq!(chain.header(head + 1).await.unwrap(), None);
    assert_eq!(chain.scan_block(head + 1).await.unwrap(), None);
    let empty = chain.scan_block(head).await.unwrap().unwrap();
    assert!(empty.transfers.is_empty());
}

/// One block with: a BNB transfer, a catalog token transfer, a transfer of a token outside
/// the catalog, a zero-value catalog transfer, a BNB transfer that reverts and a token
/// transfer that reverts.
async fn scan_mixed_block(use_block_receipts: bool) {
    let anvil = anvil_or_skip!();
    let (a0, a1, a2) = (
        anvil.account(0).to_owned(),
        anvil.account(1).to_owned(),
        anvil.account(2).to_owned(),
    );
    let token = funded_token(&anvil, "TST");
    let foreign = funded_token(&anvil, "FRN");

    anvil.set_automine(false);
    let bnb = anvil.send_value(&a0, &a1, ONE_BNB * 3 / 2);
    let tst = anvil.token_transfer(&token, &a0, &a1, 12_345);
    let frn = anvil.token_transfer(&foreign, &a0, &a1, 999);
    let zero = anvil.token_transfer(&token, &a0, &a2, 0);
    // The token contract has no receive function: value sent to it reverts.
    let bnb_reverted = anvil.send(json!({
        "from": a0, "to": token, "value": "0x7", "gas": "0x186a0",
    }));
    // a2 holds no TST: the transfer reverts, and a reverted transaction keeps no logs.
    let tst_reverted = anvil.token_transfer_reverting(&token, &a2, &a1);
    anvil.mine(1);
    anvil.set_automine(true);

    let n = anvil.block_number();
    for tx in [&bnb, &tst, &frn, &zero, &bnb_reverted, &tst_reverted] {
        assert_eq!(
            anvil.mined(tx)["blockNumber"],
            json!(format!("{n:#x}")),
            "all in one block"
        );
    }
    assert_eq!(anvil.mined(&bnb_reverted)["status"], json!("0x0"));
    assert_eq!(anvil.mined(&tst_reverted)["status"], json!("0x0"));

    let mut s = settings(vec![anvil.url()], &[("TST", &token)]);
    s.use_block_receipts = use_block_receipts;
    let chain = BscChain::new(s).unwrap();
    let block = chain.scan_block(n).await.unwrap().expect("block exists");
    assert_eq!(block.header.number, n);
    assert_eq!(block.header.hash, strip0x(&anvil.block_hash(n)));

    let mut expected = vec![
        (
            tx_index(&anvil, &bnb),
            ObservedTransfer {
                tx_hash: txh(&bnb),
                log_index: None,
                asset_code: "BNB".into(),
                from: chain_addr(&a0),
                to: chain_addr(&a1),
                amount: Amount::from_units(ONE_BNB * 3 / 2),
                succeeded: true,
            },
        ),
        (
            tx_index(&anvil, &tst),
            ObservedTransfer {
                tx_hash: txh(&tst),
                log_index: Some(log_index(&anvil, &tst)),
                asset_code: "TST".into(),
                from: chain_addr(&a0),
                to: chain_addr(&a1),
                amount: Amount::from_units(12_345),
                succeeded: true,
            },
        ),
        (
            tx_index(&anvil, &bnb_reverted),
            ObservedTransfer {
                tx_hash: txh(&bnb_reverted),
                log_index: None,
                asset_code: "BNB".into(),
                from: chain_addr(&a0),
                to: chain_addr(&token),
                amount: Amount::from_units(7),
                succeeded: false,
            },
        ),
    ];
    expected.sort_by_key(|(i, _)| *i);
    let expected: Vec<ObservedTransfer> = expected.into_iter().map(|(_, t)| t).collect();
    assert_eq!(block.transfers, expected);

    // Addresses are EIP-55 (mixed case), never the node's lowercase.
    assert!(block
        .transfers
        .iter()
        .all(|t| t.to.as_str() != t.to.as_str().to_lowercase()));
    // Neither the foreign token, nor the zero transfer, nor the reverted token transfer.
    for absent in [&frn, &zero, &tst_reverted] {
        assert!(!block.transfers.iter().any(|t| t.tx_hash == txh(absent)));
    }
}

#[tokio::test]
async fn scan_finds_native_and_catalog_token_transfers() {
    scan_mixed_block(true).await;
}

#[tokio::test]
async fn scan_with_per_transaction_receipts_gives_the_same_transfers() {
    scan_mixed_block(false).await;
}

#[tokio::test]
async fn reorg_replaces_the_block_and_keeps_parent_links() {
    let anvil = anvil_or_skip!();
    let (a0, a1, a3) = (
        anvil.account(0).to_owned(),
        anvil.account(1).to_owned(),
        anvil.account(3).to_owned(),
    );
    anvil.mine(3);
    let before = anvil.send_value(&a0, &a1, 1_000);
    anvil.mined(&before);
    let n = anvil.block_number();
    anvil.mine(2);
    let chain = chain(&anvil, &[]);

    let old = chain.scan_block(n).await.unwrap().unwrap();
    assert_eq!(old.transfers.len(), 1);
    assert_eq!(old.transfers[0].tx_hash, txh(&before));

    // Replace n, n+1, n+2; the new block n carries another transfer.
    anvil.reorg(3, &[(value_tx(&a3, &a1, 5_000), 0)]);
    assert_eq!(chain.head_number().await.unwrap(), n + 2);

    let new = chain.scan_block(n).await.unwrap().unwrap();
    assert_ne!(new.header.hash, old.header.hash, "same height, new hash");
    assert_eq!(
        new.header.parent_hash, old.header.parent_hash,
        "same ancestor"
    );
    assert!(new.transfers.iter().all(|t| t.tx_hash != txh(&before)));
    let moved: Vec<_> = new
        .transfers
        .iter()
        .filter(|t| t.from.as_str() == eip55(&a3))
        .collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].amount, Amount::from_units(5_000));
    assert!(moved[0].succeeded);

    for h in n..=n + 2 {
        let child = chain.header(h).await.unwrap().unwrap();
        let parent = chain.header(h - 1).await.unwrap().unwrap();
        assert_eq!(
            child.parent_hash,
            parent.hash,
            "block {h} links to {}",
            h - 1
        );
        assert_eq!(child.hash, strip0x(&anvil.block_hash(h)));
    }
}

#[tokio::test]
async fn balances_of_native_and_token() {
    let anvil = anvil_or_skip!();
    let token = funded_token(&anvil, "TST");
    let (a0, a4) = (anvil.account(0).to_owned(), anvil.account(4).to_owned());
    anvil.mined(&anvil.token_transfer(&token, &a0, &a4, 4_242));
    let chain = chain(&anvil, &[("TST", &token)]);

    let native = chain.balance(&eip55(&a4), &native_asset()).await.unwrap();
    assert_eq!(native.units.units(), anvil.balance(&a4));
    assert_eq!(native.units.units(), 10_000 * ONE_BNB);
    assert_eq!(native.block_number, anvil.block_number());

    let tst = token_asset("TST", &token);
    let held = chain.balance(&eip55(&a4), &tst).await.unwrap();
    assert_eq!(held.units, Amount::from_units(4_242));
    assert_eq!(held.block_number, anvil.block_number());
    // Lowercase input is an address too.
    let lower = chain.balance(&a4, &tst).await.unwrap();
    assert_eq!(lower.units, Amount::from_units(4_242));
    let none = chain.balance(&eip55(anvil.account(5)), &tst).await.unwrap();
    assert_eq!(none.units, Amount::ZERO);

    let bad = chain.balance("0x1234", &native_asset()).await.unwrap_err();
    assert_eq!(bad.retry, Retry::Permanent);
    let mut tron = native_asset();
    tron.network = Network::Tron;
    let bad = chain.balance(&eip55(&a4), &tron).await.unwrap_err();
    assert_eq!(bad.retry, Retry::Permanent);
    // A contract address with no code answers nothing: permanent, not zero.
    let ghost = token_asset("GHOST", anvil.account(6));
    let bad = chain.balance(&eip55(&a4), &ghost).await.unwrap_err();
    assert_eq!(bad.retry, Retry::Permanent, "{bad}");
}

#[tokio::test]
async fn failover_skips_a_dead_endpoint_and_reports_its_health() {
    let anvil = anvil_or_skip!();
    anvil.mine(2);
    let dead = format!("http://127.0.0.1:{}", free_port());
    let chain = BscChain::new(settings(vec![dead.clone(), anvil.url()], &[])).unwrap();

    let before = chain.health();
    assert!(before
        .iter()
        .all(|h| !h.healthy && h.last_success_at.is_none()));

    assert_eq!(chain.head_number().await.unwrap(), 2);
    assert!(chain.scan_block(1).await.unwrap().is_some());

    let health = chain.health();
    assert_eq!(health.len(), 2);
    assert_eq!(health[0].url, dead);
    assert!(!health[0].healthy);
    assert!(health[0].consecutive_failures >= 1);
    let error = health[0].last_error.as_deref().unwrap();
    assert!(error.contains("connection"), "{error}");
    assert!(health[1].healthy);
    assert!(health[1].chain_id_verified);
    assert_eq!(health[1].consecutive_failures, 0);
    assert!(health[1].last_success_at.is_some());
    assert!(health[1].last_latency_ms.is_some());

    // The admin listing serializes it as is.
    let json = serde_json::to_value(&health).unwrap();
    assert_eq!(json[0]["healthy"], json!(false));
    assert_eq!(json[1]["healthy"], json!(true));
    assert!(json[1]["last_success_at"].as_str().unwrap().ends_with('Z'));

    // probe_all refreshes every endpoint, the dead one included.
    let failures = health[0].consecutive_failures;
    chain.probe_all().await;
    assert!(chain.health()[0].consecutive_failures > failures);
}

#[tokio::test]
async fn chain_id_mismatch_is_permanent() {
    let anvil = anvil_or_skip!();
    let mut s = settings(vec![anvil.url()], &[]);
    s.chain_id = 97;
    let chain = BscChain::new(s).unwrap();
    let err = chain.head_number().await.unwrap_err();
    assert_eq!(err.retry, Retry::Permanent, "{err}");
    assert!(err.message.contains("chain id"), "{err}");
    // The endpoint is never used again, and the health says why.
    let err = chain.scan_block(0).await.unwrap_err();
    assert_eq!(err.retry, Retry::Permanent);
    let health = chain.health();
    assert!(!health[0].healthy && !health[0].chain_id_verified);
    assert!(health[0]
        .last_error
        .as_deref()
        .unwrap()
        .contains("mismatch"));
}

#[tokio::test]
async fn every_endpoint_down_is_transient() {
    let urls = vec![
        format!("http://127.0.0.1:{}", free_port()),
        format!(
            "http://127.0.0.1:{}/v1/SECRETKEY?apikey=HIDDEN",
            free_port()
        ),
    ];
    let chain = BscChain::new(settings(urls, &[])).unwrap();
    let err = chain.head_number().await.unwrap_err();
    assert_eq!(err.retry, Retry::Transient, "{err}");
    assert_eq!(err.port, "chain.bsc");
    let health = chain.health();
    assert!(health
        .iter()
        .all(|h| h.consecutive_failures == 1 && !h.healthy));
    // API keys in the path or query appear nowhere: not in the error, not in the health.
    let shown = format!("{err} {}", serde_json::to_string(&health).unwrap());
    assert!(
        !shown.contains("SECRETKEY") && !shown.contains("HIDDEN"),
        "{shown}"
    );
    assert!(health[1].url.ends_with("/…?…"), "{}", health[1].url);

    let none = BscChain::new(settings(Vec::new(), &[])).unwrap();
    assert_eq!(
        none.head_number().await.unwrap_err().retry,
        Retry::Transient
    );
}

#[tokio::test]
async fn a_silent_endpoint_times_out_as_transient() {
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(4) {
            held.push(stream);
        }
        std::thread::sleep(Duration::from_secs(10));
    });
    let mut s = settings(vec![format!("http://127.0.0.1:{port}")], &[]);
    s.request_timeout_ms = 300;
    let chain = BscChain::new(s).unwrap();
    let started = Instant::now();
    let err = chain.head_number().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(err.retry, Retry::Transient, "{err}");
    assert!(err.message.contains("300 ms"), "{err}");
}

#[tokio::test]
async fn http_failures_are_classified_and_fail_over() {
    let anvil = anvil_or_skip!();
    anvil.mine(1);
    let unavailable = fake_endpoint(|_| (503, "busy".into()));
    let limited = fake_endpoint(|_| (429, "slow down".into()));
    let garbage = fake_endpoint(|_| (200, "<html>hello</html>".into()));
    let quota = fake_endpoint(|req| {
        (
            200,
            json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32005, "message": "limit exceeded"}})
                .to_string(),
        )
    });

    for (url, retry, text) in [
        (&unavailable, Retry::Transient, "HTTP status 503"),
        (&limited, Retry::Transient, "HTTP status 429"),
        (&garbage, Retry::Permanent, "malformed"),
        (&quota, Retry::Transient, "rate limited"),
    ] {
        let alone = BscChain::new(settings(vec![url.clone()], &[])).unwrap();
        let err = alone.head_number().await.unwrap_err();
        assert_eq!(err.retry, retry, "{url}: {err}");
        assert!(err.message.contains(text), "{url}: {err}");

        // With a working endpoint behind it, the call succeeds and the health shows why the
        // first one was passed over.
        let both = BscChain::new(settings(vec![url.clone(), anvil.url()], &[])).unwrap();
        assert_eq!(both.head_number().await.unwrap(), 1);
        let health = both.health();
        assert!(!health[0].healthy);
        assert!(health[0].last_error.as_deref().unwrap().contains(text));
        assert!(health[1].healthy);
    }
}

#[tokio::test]
async fn an_oversized_answer_is_permanent() {
    let huge = fake_endpoint(|req| {
        let padding = "0".repeat(64 * 1024);
        (
            200,
            json!({"jsonrpc": "2.0", "id": req["id"], "result": format!("0x{padding}")})
                .to_string(),
        )
    });
    let mut s = settings(vec![huge], &[]);
    s.response_bytes_max = 16 * 1024;
    let chain = BscChain::new(s).unwrap();
    let err = chain.head_number().await.unwrap_err();
    assert_eq!(err.retry, Retry::Permanent, "{err}");
    assert!(err.message.contains("larger than 16384 bytes"), "{err}");
}

/// Forwards every call to anvil. With `lacks_block_receipts` it answers
/// `eth_getBlockReceipts` with "method not found" as some nodes do; `before_receipts` runs
/// before a request that asks for logs or receipts is forwarded.
///
/// The endpoint's thread outlives the test, so it holds the node weakly: when the test drops
/// its `Arc`, anvil is killed rather than left running after the test process exits.
fn proxy<F>(anvil: Arc<Anvil>, lacks_block_receipts: bool, before_receipts: F) -> String
where
    F: Fn(&Anvil) + Send + Sync + 'static,
{
    let anvil = Arc::downgrade(&anvil);
    fake_endpoint(move |request| {
        let Some(anvil) = anvil.upgrade() else {
            return (503, "the test is over".to_owned());
        };
        let one = |call: &Value| {
            let method = call["method"].as_str().unwrap();
            let answer = if lacks_block_receipts && method == "eth_getBlockReceipts" {
                Err(
                    json!({"code": -32601, "message": "the method eth_getBlockReceipts does not exist/is not available"}),
                )
            } else {
                anvil.try_rpc(method, call["params"].clone())
            };
            match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": call["id"], "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": call["id"], "error": error}),
            }
        };
        let calls = match request {
            Value::Array(calls) => calls.clone(),
            call => vec![call.clone()],
        };
        if calls.iter().any(|c| {
            matches!(
                c["method"].as_str(),
                Some("eth_getLogs" | "eth_getBlockReceipts" | "eth_getTransactionReceipt")
            )
        }) {
            before_receipts(&anvil);
        }
        let body = match request {
            Value::Array(calls) => Value::Array(calls.iter().map(one).collect()),
            call => one(call),
        };
        (200, body.to_string())
    })
}

#[tokio::test]
async fn falls_back_to_transaction_receipts_when_the_node_lacks_block_receipts() {
    let anvil = Arc::new(anvil_or_skip!());
    let (a0, a1) = (anvil.account(0).to_owned(), anvil.account(1).to_owned());
    let token = funded_token(&anvil, "TST");
    anvil.set_automine(false);
    let bnb = anvil.send_value(&a0, &a1, 77);
    let tst = anvil.token_transfer(&token, &a0, &a1, 88);
    anvil.mine(1);
    anvil.set_automine(true);
    let n = anvil.block_number();

    let direct = chain(&anvil, &[("TST", &token)]);
    let expected = direct.scan_block(n).await.unwrap().unwrap();
    assert_eq!(expected.transfers.len(), 2);

    let proxy = proxy(anvil.clone(), true, |_| {});
    let chain = BscChain::new(settings(vec![proxy], &[("TST", &token)])).unwrap();
    for _ in 0..2 {
        // The first scan meets "method not found" and falls back; the second goes straight to
        // per-transaction receipts.
        let got = chain.scan_block(n).await.unwrap().unwrap();
        assert_eq!(got, expected);
    }
    let hashes: Vec<String> = expected
        .transfers
        .iter()
        .map(|t| t.tx_hash.to_hex())
        .collect();
    assert_eq!(hashes, vec![strip0x(&bnb), strip0x(&tst)]);
    assert!(
        chain.health()[0].healthy,
        "a missing method is not an endpoint failure"
    );
}

/// The block is replaced between the read of its body and the read of its logs and receipts:
/// the scan must not mix two blocks, it fails as transient and the next scan sees the new
/// block.
async fn reorg_during_scan(use_block_receipts: bool, with_token: bool) {
    let anvil = Arc::new(anvil_or_skip!());
    let (a0, a1) = (anvil.account(0).to_owned(), anvil.account(1).to_owned());
    let token = funded_token(&anvil, "TST");
    anvil.set_automine(false);
    let bnb = anvil.send_value(&a0, &a1, 77);
    anvil.token_transfer(&token, &a0, &a1, 88);
    anvil.mine(1);
    anvil.set_automine(true);
    let n = anvil.block_number();
    let old_hash = anvil.block_hash(n);

    let reorged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = reorged.clone();
    let url = proxy(anvil.clone(), false, move |anvil| {
        if !flag.swap(true, std::sync::atomic::Ordering::SeqCst) {
            anvil.reorg(1, &[]);
        }
    });
    let tokens: &[(&str, &str)] = if with_token { &[("TST", &token)] } else { &[] };
    let mut s = settings(vec![url], tokens);
    s.use_block_receipts = use_block_receipts;
    let chain = BscChain::new(s).unwrap();

    let err = chain.scan_block(n).await.unwrap_err();
    assert!(reorged.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(err.retry, Retry::Transient, "{err}");
    assert!(err.message.contains("changed during the scan"), "{err}");

    let again = chain.scan_block(n).await.unwrap().unwrap();
    assert_ne!(again.header.hash, strip0x(&old_hash));
    assert_eq!(again.header.hash, strip0x(&anvil.block_hash(n)));
    assert!(again.transfers.iter().all(|t| t.tx_hash != txh(&bnb)));
}

#[tokio::test]
async fn a_reorg_during_the_scan_is_transient_with_logs_and_block_receipts() {
    reorg_during_scan(true, true).await;
}

#[tokio::test]
async fn a_reorg_during_the_scan_is_transient_with_transaction_receipts() {
    reorg_during_scan(false, false).await;
}

/// Bytes of the JSON answer to `method(params)` on anvil.
fn answer_len(anvil: &Anvil, method: &str, params: Value) -> usize {
    anvil.rpc(method, params).to_string().len()
}

/// A block of 30 token transfers and 10 BNB transfers: (its number, the token).
fn busy_block(anvil: &Anvil) -> (u64, String) {
    let token = funded_token(anvil, "TST");
    let a0 = anvil.account(0).to_owned();
    anvil.set_automine(false);
    for i in 0..30u128 {
        anvil.token_transfer(&token, &a0, anvil.account(1 + (i % 5) as usize), 100 + i);
    }
    for i in 0..10u128 {
        anvil.send_value(&a0, anvil.account(6 + (i % 3) as usize), 1_000 + i);
    }
    anvil.mine(1);
    anvil.set_automine(true);
    let n = anvil.block_number();
    let txs = anvil.block(n)["transactions"].as_array().unwrap().len();
    assert_eq!(txs, 40, "every transaction in one block");
    (n, token)
}

/// A block's logs and receipts together (and, with a smaller limit, its body and its logs
/// alone) are over the response limit: the scan reads them in parts and finds exactly what a
/// scan without a limit finds. Before, the scan failed as permanent on every try.
async fn busy_block_over_the_limit(use_block_receipts: bool) {
    let anvil = anvil_or_skip!();
    let (n, token) = busy_block(&anvil);
    let tokens = [("TST", token.as_str())];
    let hash = anvil.block_hash(n);
    let block_len = answer_len(
        &anvil,
        "eth_getBlockByNumber",
        json!([format!("{n:#x}"), true]),
    );
    let receipts_len = answer_len(&anvil, "eth_getBlockReceipts", json!([hash]));
    let logs_len = answer_len(
        &anvil,
        "eth_getLogs",
        json!([{"blockHash": hash, "address": [token.to_lowercase()]}]),
    );

    let mut s = settings(vec![anvil.url()], &tokens);
    s.use_block_receipts = use_block_receipts;
    let expected = BscChain::new(s.clone())
        .unwrap()
        .scan_block(n)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(expected.transfers.len(), 40);

    // 1. The body fits, logs and receipts together do not.
    let limit = block_len.max(logs_len) + 1024;
    assert!(
        receipts_len + logs_len > limit,
        "{receipts_len} + {logs_len} vs {limit}"
    );
    s.response_bytes_max = limit;
    let chain = BscChain::new(s.clone()).unwrap();
    assert_eq!(chain.scan_block(n).await.unwrap().unwrap(), expected);
    let health = &chain.health()[0];
    assert!(
        health.healthy && health.consecutive_failures == 0,
        "{health:?}"
    );

    // 2. Neither the body nor the logs alone fit: transactions by hash, every receipt.
    let limit = 8 * 1024;
    assert!(
        block_len > limit && logs_len > limit,
        "{block_len} {logs_len}"
    );
    s.response_bytes_max = limit;
    let chain = BscChain::new(s).unwrap();
    assert_eq!(chain.scan_block(n).await.unwrap().unwrap(), expected);
    assert!(chain.health()[0].healthy);
}

#[tokio::test]
async fn a_busy_block_over_the_response_limit_is_scanned_in_parts() {
    busy_block_over_the_limit(true).await;
}

#[tokio::test]
async fn a_busy_block_over_the_response_limit_is_scanned_in_parts_with_transaction_receipts() {
    busy_block_over_the_limit(false).await;
}

/// Forwards every call to anvil and appends `padding` spaces to an answer that holds a call
/// of one of `methods` (the same JSON, larger). Holds the node weakly, as `proxy` does.
fn padding_proxy(anvil: Arc<Anvil>, methods: &'static [&'static str], padding: usize) -> String {
    let anvil = Arc::downgrade(&anvil);
    fake_endpoint(move |request| {
        let Some(anvil) = anvil.upgrade() else {
            return (503, "the test is over".to_owned());
        };
        let one = |call: &Value| match anvil
            .try_rpc(call["method"].as_str().unwrap(), call["params"].clone())
        {
            Ok(result) => json!({"jsonrpc": "2.0", "id": call["id"], "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": call["id"], "error": error}),
        };
        let calls = match request {
            Value::Array(calls) => calls.clone(),
            call => vec![call.clone()],
        };
        let body = match request {
            Value::Array(calls) => Value::Array(calls.iter().map(one).collect()),
            call => one(call),
        };
        let mut text = body.to_string();
        if calls
            .iter()
            .any(|c| methods.contains(&c["method"].as_str().unwrap_or("")))
        {
            text.push_str(&" ".repeat(padding));
        }
        (200, text)
    })
}

#[tokio::test]
async fn a_single_receipt_over_the_limit_is_permanent_and_not_the_endpoints_fault() {
    let anvil = Arc::new(anvil_or_skip!());
    let (n, token) = busy_block(&anvil);
    let url = padding_proxy(
        anvil.clone(),
        &["eth_getBlockReceipts", "eth_getTransactionReceipt"],
        64 * 1024,
    );
    // The block body (about 34 KB) fits; every answer holding a receipt does not.
    let mut s = settings(vec![url], &[("TST", &token)]);
    s.response_bytes_max = 48 * 1024;
    let chain = BscChain::new(s).unwrap();
    let err = chain.scan_block(n).await.unwrap_err();
    assert_eq!(err.retry, Retry::Permanent, "{err}");
    assert!(
        err.message
            .contains("a transaction receipt alone is larger"),
        "{err}"
    );
    let health = &chain.health()[0];
    assert!(
        health.healthy && health.consecutive_failures == 0,
        "{health:?}"
    );
}

#[tokio::test]
async fn batch_split_halves_a_batch_answered_too_large_and_keeps_the_order() {
    // Answers a batch of more than two calls with a padded (too large) body.
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = requests.clone();
    let url = fake_endpoint(move |request| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = |call: &Value| {
            let result = if call["method"] == "eth_chainId" {
                json!("0x38")
            } else {
                call["params"][0].clone()
            };
            json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
        };
        match request {
            Value::Array(calls) => {
                let mut text = Value::Array(calls.iter().map(answer).collect()).to_string();
                if calls.len() > 2 {
                    text.push_str(&" ".repeat(4096));
                }
                (200, text)
            }
            call => (200, answer(call).to_string()),
        }
    });
    let client = custody_chain_bsc::RpcClient::new(&custody_chain_bsc::RpcSettings {
        urls: vec![url],
        expected_chain_id: Some(56),
        request_timeout_ms: 5_000,
        response_bytes_max: 2048,
        batch_max: 100,
        allow_insecure_http: false,
    })
    .unwrap();
    let calls: Vec<(&str, Value)> = (0..7).map(|i| ("echo", json!([i]))).collect();
    let whole = client.try_batch(&calls).await.unwrap_err();
    assert!(
        matches!(whole, custody_chain_bsc::CallFailure::TooLarge(_)),
        "{whole:?}"
    );
    requests.store(0, std::sync::atomic::Ordering::SeqCst);
    let answers = client.batch_split(&calls).await.unwrap();
    let got: Vec<Value> = answers.into_iter().map(Result::unwrap).collect();
    assert_eq!(got, (0..7).map(|i| json!(i)).collect::<Vec<_>>());
    // 7 → 3 + 4 → (1 + 2) + (2 + 2): 7 requests at most 2n − 1.
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 7);
    assert!(client.health()[0].healthy);
}
