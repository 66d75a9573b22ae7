//! An EVM nonce allocator seeded from the chain: any nonce a BIGINT holds is kept as it is, and
//! one above it is refused, never stored as another number.

use custody_core::ports::store::write;
use custody_core::Network;
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgStore, StoreOptions};

const SENDER: &str = "0x00000000000000000000000000000000000000aa";

#[tokio::test]
async fn nonces_beyond_32_bits_are_kept_and_beyond_a_bigint_refused() {
    let schema = TestSchema::new();
    let store = PgStore::open(&schema.url(), StoreOptions::default()).expect("the store opens");
    let seed = 1_u64 << 40;
    let (first, second) = write(&store, move |tx| {
        let first = tx.allocate_nonce(Network::Bsc, SENDER, seed)?;
        let second = tx.allocate_nonce(Network::Bsc, SENDER, seed)?;
        Ok((first, second))
    })
    .await
    .unwrap();
    assert_eq!((first, second), (seed, seed + 1));
    let refused = write(&store, |tx| {
        Ok(tx.allocate_nonce(
            Network::Bsc,
            "0x00000000000000000000000000000000000000bb",
            u64::MAX,
        )?)
    })
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("BIGINT"), "{refused}");
    let advanced = write(&store, |tx| {
        Ok(tx.advance_nonce(Network::Bsc, SENDER, u64::MAX)?)
    })
    .await
    .unwrap_err();
    assert!(advanced.to_string().contains("BIGINT"), "{advanced}");
    store.close();
}
