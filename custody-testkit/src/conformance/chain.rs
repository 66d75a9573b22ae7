//! [`ChainRepo`](custody_core::chain::ChainRepo): the cursor and the recorded block hashes.

use std::sync::Arc;

use custody_core::chain::ChainCursor;
use custody_core::ports::store::Store;
use custody_core::Network;

use super::{r, suite, w};

suite!(
    /// The chain cursor and recorded blocks, per network.
    chain_suite {
        recorded_blocks_move_the_cursor,
        a_rewind_forgets_the_blocks_above_and_moves_the_cursor_back,
        pruning_forgets_old_blocks_only,
    }
);

fn cursor(number: u64, hash: &str) -> Option<ChainCursor> {
    Some(ChainCursor {
        number,
        hash: hash.to_owned(),
    })
}

async fn record(s: &dyn Store, network: Network, blocks: &[(u64, &'static str)]) {
    let blocks = blocks.to_vec();
    w(s, move |tx| {
        blocks.iter().try_for_each(|&(n, hash)| {
            tx.record_block(network, n, hash, &format!("parent-of-{hash}"))
        })
    })
    .await
    .unwrap();
}

async fn hashes(s: &dyn Store, network: Network, numbers: Vec<u64>) -> Vec<Option<String>> {
    r(s, move |tx| {
        numbers
            .iter()
            .map(|&n| tx.recorded_block_hash(network, n))
            .collect()
    })
    .await
}

async fn recorded_blocks_move_the_cursor(store: Arc<dyn Store>) {
    let s = store.as_ref();
    assert_eq!(r(s, |tx| tx.chain_cursor(Network::Bsc)).await, None);
    record(s, Network::Bsc, &[(10, "a10"), (11, "a11")]).await;
    record(s, Network::Tron, &[(500, "t500")]).await;
    let cursors = r(s, |tx| {
        Ok((
            tx.chain_cursor(Network::Bsc)?,
            tx.chain_cursor(Network::Tron)?,
        ))
    })
    .await;
    assert_eq!(cursors, (cursor(11, "a11"), cursor(500, "t500")));
    assert_eq!(
        hashes(s, Network::Bsc, vec![10, 11, 12, 500]).await,
        [Some("a10".into()), Some("a11".into()), None, None]
    );
    // Recording a number again replaces its hash; the cursor goes where it is told.
    record(s, Network::Bsc, &[(10, "b10")]).await;
    assert_eq!(
        r(s, |tx| tx.chain_cursor(Network::Bsc)).await,
        cursor(10, "b10")
    );
    assert_eq!(
        hashes(s, Network::Bsc, vec![10, 11]).await,
        [Some("b10".into()), Some("a11".into())]
    );
}

async fn a_rewind_forgets_the_blocks_above_and_moves_the_cursor_back(store: Arc<dyn Store>) {
    let s = store.as_ref();
    record(
        s,
        Network::Bsc,
        &[(10, "a10"), (11, "a11"), (12, "a12"), (13, "a13")],
    )
    .await;
    record(s, Network::Tron, &[(12, "t12")]).await;
    w(s, |tx| tx.rewind_blocks(Network::Bsc, 11)).await.unwrap();
    assert_eq!(
        r(s, |tx| tx.chain_cursor(Network::Bsc)).await,
        cursor(11, "a11")
    );
    assert_eq!(
        hashes(s, Network::Bsc, vec![10, 11, 12, 13]).await,
        [Some("a10".into()), Some("a11".into()), None, None]
    );
    assert_eq!(
        r(s, |tx| tx.chain_cursor(Network::Tron)).await,
        cursor(12, "t12"),
        "other networks keep theirs"
    );
    // Back to a block no longer recorded: no cursor (the scanner starts over from its config).
    w(s, |tx| {
        tx.prune_blocks(Network::Bsc, 11)?;
        tx.rewind_blocks(Network::Bsc, 10)
    })
    .await
    .unwrap();
    assert_eq!(r(s, |tx| tx.chain_cursor(Network::Bsc)).await, None);
    assert_eq!(hashes(s, Network::Bsc, vec![10, 11]).await, [None, None]);
    // A rewind moves a cursor; it never creates one, even to a block still recorded.
    record(s, Network::Bsc, &[(5, "c5"), (7, "c7")]).await;
    w(s, |tx| tx.rewind_blocks(Network::Bsc, 6)).await.unwrap();
    assert_eq!(r(s, |tx| tx.chain_cursor(Network::Bsc)).await, None);
    w(s, |tx| tx.rewind_blocks(Network::Bsc, 5)).await.unwrap();
    assert_eq!(r(s, |tx| tx.chain_cursor(Network::Bsc)).await, None);
    assert_eq!(
        hashes(s, Network::Bsc, vec![5, 7]).await,
        [Some("c5".into()), None]
    );
}

async fn pruning_forgets_old_blocks_only(store: Arc<dyn Store>) {
    let s = store.as_ref();
    record(s, Network::Bsc, &[(10, "a10"), (11, "a11"), (12, "a12")]).await;
    record(s, Network::Tron, &[(10, "t10")]).await;
    w(s, |tx| tx.prune_blocks(Network::Bsc, 12)).await.unwrap();
    assert_eq!(
        hashes(s, Network::Bsc, vec![10, 11, 12]).await,
        [None, None, Some("a12".into())]
    );
    assert_eq!(
        hashes(s, Network::Tron, vec![10]).await,
        [Some("t10".into())]
    );
    assert_eq!(
        r(s, |tx| tx.chain_cursor(Network::Bsc)).await,
        cursor(12, "a12"),
        "the cursor stays"
    );
    w(s, |tx| tx.prune_blocks(Network::Bsc, 100)).await.unwrap();
    assert_eq!(
        r(s, |tx| tx.chain_cursor(Network::Bsc)).await,
        cursor(12, "a12")
    );
    assert_eq!(hashes(s, Network::Bsc, vec![12]).await, [None]);
}
