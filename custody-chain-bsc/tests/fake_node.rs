//! The BSC adapters against fake endpoints on loopback that answer what a real node rarely does:
//! a receipt without its `logs`.

use std::sync::Arc;

use custody_chain_bsc::{BscChain, BscSender, BscSenderSettings, BscSettings};
use custody_core::amount::Amount;
use custody_core::asset::{Asset, AssetKind};
use custody_core::error::Retry;
use custody_core::ports::sender::{ChainSender, TxLookup};
use custody_core::Network;
use serde_json::{json, Value};
use support::fake_endpoint;

mod support;

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
        let url = node(move |method, _| match method {
            "eth_getTransactionReceipt" => Ok(receipt(with_logs)),
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
