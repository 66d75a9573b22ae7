//! New-address derivation rate: one public child derivation from the cached external-chain key
//! (what wallet creation does) against the full five-level walk from the master key.
//!
//! Run with `cargo bench -p custody-core --bench derive`. Plain `std::time::Instant`, no harness.

use std::hint::black_box;
use std::time::{Duration, Instant};

use custody_core::keys::{derive_address, HdKeys, Mnemonic};
use custody_core::ports::signer::HdPath;
use custody_core::Network;

const CACHED_ADDRESSES: u32 = 10_000;
const ROOT_ADDRESSES: u32 = 1_000;

fn per_second(count: u32, elapsed: Duration) -> u128 {
    u128::from(count) * 1_000_000_000 / elapsed.as_nanos().max(1)
}

fn main() {
    // A fixed, public test mnemonic: the benchmark needs no secret.
    let mnemonic = Mnemonic::from_entropy(&[7u8; 32]);
    let keys = HdKeys::from_mnemonic(&mnemonic).expect("keys from a valid mnemonic");

    for network in Network::ALL {
        let (pubkey, chain_code) = keys
            .external_chain_public_key(network, 0)
            .expect("account 0 is in range");

        let start = Instant::now();
        for index in 0..CACHED_ADDRESSES {
            black_box(
                derive_address(network, black_box(&pubkey), &chain_code, index)
                    .expect("index is in range"),
            );
        }
        let cached = start.elapsed();

        let start = Instant::now();
        for index in 0..ROOT_ADDRESSES {
            let path = HdPath {
                network,
                account: 0,
                index,
            };
            black_box(
                keys.address_from_root(black_box(&path))
                    .expect("path is in range"),
            );
        }
        let from_root = start.elapsed();

        let cached_rate = per_second(CACHED_ADDRESSES, cached);
        let root_rate = per_second(ROOT_ADDRESSES, from_root);
        println!(
            "{network}: cached external-chain key: {CACHED_ADDRESSES} addresses in {cached:?} \
             = {cached_rate} addresses/s"
        );
        println!(
            "{network}: full walk from master key: {ROOT_ADDRESSES} addresses in {from_root:?} \
             = {root_rate} addresses/s"
        );
        let ratio_x100 = cached_rate * 100 / root_rate.max(1);
        println!(
            "{network}: cached / from-root = {}.{:02}x",
            ratio_x100 / 100,
            ratio_x100 % 100
        );
    }
}
