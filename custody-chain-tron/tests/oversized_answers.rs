//! A block whose transaction infos answer is over the response limit is still scanned: the
//! infos are read one by one (`wallet/gettransactioninfobyid`), with the same result as the
//! whole-block read. Only a single info over the limit stays a (permanent) error.

use custody_chain_tron::{TronChain, TronSettings};
use custody_core::asset::AssetCatalog;
use custody_core::error::Retry;
use custody_core::ports::chain::ChainSource;
use custody_e2e::tron_api::{BlockSpec, TronApi, TxSpec};

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const UNLISTED: &str = "TXLAQ63Xg1NAzckPwKHvzw7CSEmLMEqcdj";
const A0: &str = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
const A1: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";
const INFOS: &str = "/wallet/gettransactioninfobyblocknum";
const INFO: &str = "/wallet/gettransactioninfobyid";
/// The response limit of the adapter under test.
const LIMIT: usize = 64 * 1024;

fn chain(api: &TronApi, response_bytes_max: usize) -> TronChain {
    let mut s =
        TronSettings::new(vec![api.url().into()]).with_genesis_block_id(api.genesis_block_id());
    s.response_bytes_max = response_bytes_max;
    TronChain::new(&s, &AssetCatalog::mainnet()).unwrap()
}

/// A busy block: 40 USDT transfers, TRX transfers, failed calls, an unlisted token. Returns
/// its number and transactions.
fn busy_block(api: &TronApi) -> (u64, BlockSpec) {
    let mut spec = BlockSpec::new();
    for i in 0..40u128 {
        spec = spec.trc20(USDT, A1, A0, 1_000 + i);
    }
    spec = spec
        .trx(A1, A0, 5)
        .tx(TxSpec::trc20(USDT, A1, A0, 77).with_result("REVERT"))
        .tx(TxSpec::trc20(USDT, A1, A0, 78).with_result("OUT_OF_ENERGY"))
        .trc20(UNLISTED, A1, A0, 79)
        .trx(A0, A1, 6);
    let block = api.append(spec.clone());
    api.append_empty(3);
    (block.number, spec)
}

#[tokio::test]
async fn infos_over_the_limit_are_read_one_by_one_with_the_same_result() {
    let api = TronApi::start();
    let (n, _) = busy_block(&api);
    let expected = chain(&api, TronSettings::RESPONSE_BYTES_MAX)
        .scan_block(n)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(expected.transfers.len(), 44, "40 + 2 TRX + 2 failed calls");

    // The infos answer is now over the limit (the block itself is not).
    api.pad_answers(INFOS, LIMIT);
    api.clear_requests();
    let c = chain(&api, LIMIT);
    let got = c.scan_block(n).await.unwrap().unwrap();
    assert_eq!(got, expected);
    // One read of the block, one of its infos (too large), then one per contract call (43:
    // 40 + 2 failed + the unlisted token), then the block again to check it did not change.
    assert_eq!(api.request_count(INFOS), 1);
    assert_eq!(api.request_count(INFO), 43);
    assert_eq!(api.request_count("/wallet/getblockbynum"), 1 + 1 + 1);
    // An answer too large is not the endpoint's failure.
    let health = &c.health()[0];
    assert!(health.healthy, "{health:?}");
    assert_eq!(health.failures, 0, "{health:?}");

    // A block without contract calls needs no infos at all.
    api.clear_requests();
    let plain = api.append(BlockSpec::new().trx(A1, A0, 9));
    let scanned = c.scan_block(plain.number).await.unwrap().unwrap();
    assert_eq!(scanned.transfers.len(), 1);
    assert_eq!(api.request_count(INFOS) + api.request_count(INFO), 0);
}

#[tokio::test]
async fn a_single_info_over_the_limit_is_permanent() {
    let api = TronApi::start();
    let (n, _) = busy_block(&api);
    api.pad_answers(INFOS, LIMIT);
    api.pad_answers(INFO, LIMIT);
    let c = chain(&api, LIMIT);
    let e = c.scan_block(n).await.unwrap_err();
    assert_eq!(e.retry, Retry::Permanent, "{e}");
    assert!(e.message.contains("alone is larger"), "{e}");
    assert!(e.message.contains(&format!("{LIMIT} bytes")), "{e}");
}

#[tokio::test]
async fn a_reorganization_while_infos_are_read_one_by_one_is_transient() {
    let api = TronApi::start();
    let (n, spec) = busy_block(&api);
    api.pad_answers(INFOS, LIMIT);
    let c = chain(&api, LIMIT);
    let before = c.scan_block(n).await.unwrap().unwrap();

    // Block n is replaced by a block with the same transactions (so every info still answers
    // with block number n) in the middle of the one-by-one reads.
    api.replace_after(INFO, 10, n, spec);
    let e = c.scan_block(n).await.unwrap_err();
    assert_eq!(e.retry, Retry::Transient, "{e}");
    assert!(e.message.contains("changed while"), "{e}");

    let after = c.scan_block(n).await.unwrap().unwrap();
    assert_ne!(after.header.hash, before.header.hash);
    assert_eq!(after.header.hash, api.block(n).unwrap().hash);
    assert_eq!(after.transfers, before.transfers);

    // Replaced by a block without them: their infos are gone, also transient.
    api.replace_after(INFO, 5, n, BlockSpec::new().trc20(USDT, A0, A1, 5));
    let e = c.scan_block(n).await.unwrap_err();
    assert_eq!(e.retry, Retry::Transient, "{e}");
    let last = c.scan_block(n).await.unwrap().unwrap();
    assert_eq!(last.transfers.len(), 1);
    assert_eq!(last.transfers[0].amount.units(), 5);
}
