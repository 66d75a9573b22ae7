//! The BSC adapters against fake endpoints on loopback that answer what a real node rarely does:
//! a receipt without its `logs`, and router calls refused for other reasons than a revert.

use std::sync::Arc;

use custody_chain_bsc::{
    BscChain, BscDexRouter, BscSender, BscSenderSettings, BscSettings, DexSettings,
};
use custody_core::address::BscAddress;
use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetKind};
use custody_core::error::Retry;
use custody_core::ports::dex::{is_no_pool, DexRouter};
use custody_core::ports::sender::{ChainSender, TxLookup};
use custody_core::Network;
use serde_json::{json, Value};
use support::fake_endpoint;

mod support;

const ROUTER: &str = "0x10ed43c718714eb63d5aa57b78b54704e256024e";
const FACTORY: &str = "0xca143ce32fe78f1f7019d7d551a6402fc5350c73";
const WBNB: &str = "0xbb4cdb9cbd36b01bd1cbaebf2de08d9173bc095c";
const USDT: &str = "0x55d398326f99059ff775485246999027b3197955";

/// A node on chain 56 that answers every other call with `answer(method, params)`: `Ok`
/// result or `Err` JSON-RPC error object. Single calls and batches alike.
fn node<F>(answer: F) -> String
where
    F: Fn(&str, &Value) -> Result<Value, Value> + Send + Sync + 'static,
{
    fake_endpoint(move |request| {
        let one = |call: &Value| {
            let method = call["method"].as_str().unwrap();
            let answer = if method == "eth_chainId" {
                Ok(json!("0x38"))
            } else {
                answer(method, &call["params"])
            };
            match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": call["id"], "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": call["id"], "error": error}),
            }
        };
        let body = match request {
            Value::Array(calls) => Value::Array(calls.iter().map(one).collect()),
            call => one(call),
        };
        (200, body.to_string())
    })
}

fn chain(url: String) -> Arc<BscChain> {
    Arc::new(
        BscChain::new(BscSettings {
            urls: vec![url],
            chain_id: 56,
            request_timeout_ms: 5_000,
            assets: vec![Asset {
                network: Network::Bsc,
                code: "BNB".into(),
                kind: AssetKind::Native,
                decimals: 18,
                contract: None,
            }],
            ..BscSettings::default()
        })
        .unwrap(),
    )
}

/// The node's blocks: `latest` is 0x20; block 0x10 holds the receipts below (hash `cd…`).
fn block(params: &Value) -> Result<Value, Value> {
    Ok(if params[0] == "latest" {
        json!({ "number": "0x20", "hash": format!("0x{}", "ee".repeat(32)), "timestamp": "0x6553f200" })
    } else {
        assert_eq!(params[0], "0x10");
        json!({ "number": "0x10", "hash": format!("0x{}", "cd".repeat(32)), "timestamp": "0x6553f100" })
    })
}

fn receipt(with_logs: bool) -> Value {
    let mut r = json!({
        "transactionHash": format!("0x{}", "ab".repeat(32)),
        "blockNumber": "0x10",
        "blockHash": format!("0x{}", "cd".repeat(32)),
        "status": "0x1",
        "gasUsed": "0x5208",
        "effectiveGasPrice": "0x3b9aca00",
    });
    if with_logs {
        r["logs"] = json!([]);
    }
    r
}

#[tokio::test]
async fn a_receipt_without_logs_is_asked_again_never_read_as_nothing_moved() {
    for with_logs in [false, true] {
        let url = node(move |method, params| match method {
            "eth_getTransactionReceipt" => Ok(receipt(with_logs)),
            "eth_getBlockByNumber" => block(params),
            other => Err(json!({"code": -32601, "message": format!("no {other} here")})),
        });
        let sender = BscSender::new(chain(url), BscSenderSettings::default());
        let looked = sender.lookup(&"ab".repeat(32)).await;
        if with_logs {
            let Ok(TxLookup::Included(i)) = looked else {
                panic!("{looked:?}")
            };
            assert!(i.succeeded && i.moves.is_empty());
            assert_eq!(i.fee_native, Amount::from_units(21_000 * 1_000_000_000));
        } else {
            let e = looked.unwrap_err();
            assert_eq!(e.retry, Retry::Transient, "{e}");
            assert!(e.message.contains("no logs"), "{e}");
        }
    }
}

#[tokio::test]
async fn a_failed_receipt_carries_its_blocks_time_to_tell_a_deadline_from_a_price() {
    for status in ["0x0", "0x1"] {
        let url = node(move |method, params| match method {
            "eth_getTransactionReceipt" => {
                let mut r = receipt(true);
                r["status"] = json!(status);
                Ok(r)
            }
            "eth_getBlockByNumber" => block(params),
            other => Err(json!({"code": -32601, "message": format!("no {other} here")})),
        });
        let sender = BscSender::new(chain(url), BscSenderSettings::default());
        let Ok(TxLookup::Included(i)) = sender.lookup(&"ab".repeat(32)).await else {
            panic!("included")
        };
        if status == "0x0" {
            assert!(!i.succeeded);
            assert_eq!(i.block_time_ms, Some(0x6553_f100 * 1_000));
        } else {
            // A success needs no block time.
            assert!(i.succeeded);
            assert_eq!(i.block_time_ms, None);
        }
    }
}

fn word(address: &str) -> String {
    format!("0x{:0>64}", address.trim_start_matches("0x"))
}

/// A router built on the configured factory and WBNB whose `getAmountsOut` (and, with
/// `factory_reverts`, its `factory()`) is answered with `error`.
fn router(error: Value, factory_reverts: bool) -> BscDexRouter {
    let url = node(move |method, params| {
        assert_eq!(method, "eth_call");
        let data = params[0]["data"].as_str().unwrap();
        match &data[..10] {
            // factory()
            "0xc45a0155" if factory_reverts => {
                Err(json!({"code": 3, "message": "execution reverted", "data": "0x"}))
            }
            "0xc45a0155" => Ok(json!(word(FACTORY))),
            // WETH()
            "0xad5c4648" => Ok(json!(word(WBNB))),
            // getAmountsOut(uint256,address[])
            "0xd06ca61f" => Err(error.clone()),
            other => panic!("unexpected call {other}"),
        }
    });
    let a = |s: &str| BscAddress::parse(s).unwrap();
    BscDexRouter::new(
        chain(url),
        DexSettings {
            router: a(ROUTER),
            factory: a(FACTORY),
            wrapped_native: a(WBNB),
        },
    )
}

#[tokio::test]
async fn only_a_revert_of_the_router_means_the_path_has_no_pool() {
    let path = [
        BscAddress::parse(WBNB).unwrap().to_string(),
        BscAddress::parse(USDT).unwrap().to_string(),
    ];
    let cases = [
        (
            json!({"code": 3, "message": "execution reverted: UniswapV2Library: INSUFFICIENT_LIQUIDITY", "data": "0x"}),
            false,
            true,
        ),
        (
            json!({"code": -32000, "message": "execution reverted"}),
            false,
            true,
        ),
        // The endpoint refuses the call itself: nothing is known of the pools.
        (
            json!({"code": -32601, "message": "the method eth_call does not exist/is not available"}),
            false,
            false,
        ),
        (
            json!({"code": -32602, "message": "invalid params: invalid type"}),
            false,
            false,
        ),
        // A router that reverts factory() is not a Uniswap V2 router: misconfigured.
        (
            json!({"code": 3, "message": "execution reverted"}),
            true,
            false,
        ),
    ];
    for (error, factory_reverts, no_pool) in cases {
        let dex = router(error.clone(), factory_reverts);
        let e = dex
            .amounts_out(Amount::from_units(1_000), &path)
            .await
            .unwrap_err();
        assert_eq!(is_no_pool(&e), no_pool, "{error}: {e}");
        assert_eq!(e.retry, Retry::Permanent, "{error}: {e}");
    }
}

/// Makes a receipt (first) or its block (second) lie.
type Spoil = fn(&mut Value, &mut Value);

/// Issue 31, F5: an inclusion is read from one endpoint's receipt and head, and only when the
/// receipt names the chain's block at its height; anything else is asked again, never taken
/// as included (a stale fork's receipt would be counted final on a block the chain dropped).
#[tokio::test]
async fn a_receipt_of_another_transaction_a_stale_block_or_above_the_head_is_no_inclusion() {
    let cases: [(&str, Spoil); 3] = [
        ("of 0x", |r, _| {
            r["transactionHash"] = json!(format!("0x{}", "ac".repeat(32)));
        }),
        ("the chain holds", |_, b| {
            b["hash"] = json!(format!("0x{}", "0f".repeat(32)));
        }),
        ("above the endpoint's own head", |r, _| {
            r["blockNumber"] = json!("0x21");
        }),
    ];
    for (said, spoil) in cases {
        let (mut r, mut b) = (receipt(true), block(&json!(["0x10"])).unwrap());
        spoil(&mut r, &mut b);
        let url = node(move |method, params| match method {
            "eth_getTransactionReceipt" => Ok(r.clone()),
            "eth_getBlockByNumber" if params[0] == "latest" => block(params),
            "eth_getBlockByNumber" => Ok(b.clone()),
            other => Err(json!({"code": -32601, "message": format!("no {other} here")})),
        });
        let sender = BscSender::new(chain(url), BscSenderSettings::default());
        let e = sender.lookup(&"ab".repeat(32)).await.unwrap_err();
        assert_eq!(e.retry, Retry::Transient, "{e}");
        assert!(e.message.contains(said), "{said}: {e}");
    }
}
