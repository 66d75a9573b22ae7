//! Where a block may go, and where a reorganization forked: pure functions over recorded hashes
//! and what a node answered, in the manner of BDK's `apply_update`/`CannotConnect`.

use std::collections::BTreeMap;

use super::ChainCursor;
use crate::ports::chain::BlockHeader;

/// Whether `header` may be applied on top of `cursor`: the very next height, and its parent is
/// the cursor's block. With no cursor yet any block is a start.
pub fn connects(cursor: Option<&ChainCursor>, header: &BlockHeader) -> bool {
    match cursor {
        None => true,
        Some(c) => header.number == c.number.wrapping_add(1) && header.parent_hash == c.hash,
    }
}

/// The next step of the search for the newest block both we and the node hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkSearch {
    /// Our cursor block is still the node's: nothing to undo.
    NoFork,
    /// The node's header at this height is needed to go on.
    Fetch(u64),
    /// The newest common block: everything above it is rewound.
    Ancestor(u64),
    /// The node lacks a block we need, or its answers do not link up (a lagging or
    /// load-balanced endpoint): a missing block means "not yet", never "fork". Try again later.
    Wait,
    /// The fork is deeper than the hashes we keep: stop and ask an operator.
    TooDeep,
}

/// Decides the next step of the fork search, walking down from `cursor` to `floor`.
///
/// `recorded` holds our block hashes by height; `fetched` what the node answered so far
/// (`None`: it has no such block). A height is only taken as the common ancestor when the
/// node's block above it names it as parent, so answers from two nodes on different branches
/// never make a fork point up.
pub fn find_fork(
    cursor: u64,
    floor: u64,
    recorded: &BTreeMap<u64, String>,
    fetched: &BTreeMap<u64, Option<BlockHeader>>,
) -> ForkSearch {
    let mut n = cursor;
    loop {
        let Some(ours) = recorded.get(&n) else {
            return ForkSearch::TooDeep;
        };
        match fetched.get(&n) {
            None => return ForkSearch::Fetch(n),
            Some(None) => return ForkSearch::Wait,
            Some(Some(theirs)) if theirs.hash == *ours => {
                if n == cursor {
                    return ForkSearch::NoFork;
                }
                return match fetched.get(&(n + 1)) {
                    Some(Some(above)) if above.parent_hash == *ours => ForkSearch::Ancestor(n),
                    _ => ForkSearch::Wait,
                };
            }
            Some(Some(_)) => {}
        }
        if n <= floor {
            return ForkSearch::TooDeep;
        }
        n -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(n: u64, fork: u8, parent_fork: u8) -> BlockHeader {
        BlockHeader {
            number: n,
            hash: format!("{fork:02x}{n:062x}"),
            parent_hash: format!("{parent_fork:02x}{:062x}", n.saturating_sub(1)),
            timestamp_ms: 0,
        }
    }

    fn recorded(from: u64, to: u64) -> BTreeMap<u64, String> {
        (from..=to).map(|n| (n, header(n, 0, 0).hash)).collect()
    }

    /// Runs the search against a node serving `node(n)`, as the scanner does.
    fn search(
        cursor: u64,
        floor: u64,
        rec: &BTreeMap<u64, String>,
        node: impl Fn(u64) -> Option<BlockHeader>,
    ) -> ForkSearch {
        let mut fetched = BTreeMap::new();
        loop {
            match find_fork(cursor, floor, rec, &fetched) {
                ForkSearch::Fetch(n) => {
                    fetched.insert(n, node(n));
                }
                other => return other,
            }
        }
    }

    #[test]
    fn the_cursor_block_still_on_the_node_is_no_fork() {
        let rec = recorded(0, 10);
        assert_eq!(
            search(10, 0, &rec, |n| Some(header(n, 0, 0))),
            ForkSearch::NoFork
        );
    }

    #[test]
    fn a_fork_is_found_at_the_newest_common_block() {
        let rec = recorded(0, 10);
        // The node's chain branches after block 6.
        let node = |n: u64| {
            Some(if n <= 6 {
                header(n, 0, 0)
            } else {
                header(n, 1, u8::from(n > 7))
            })
        };
        assert_eq!(search(10, 0, &rec, node), ForkSearch::Ancestor(6));
    }

    #[test]
    fn a_node_that_lacks_a_block_means_wait_never_fork() {
        let rec = recorded(0, 10);
        assert_eq!(
            search(10, 0, &rec, |n| (n < 8).then(|| header(n, 0, 0))),
            ForkSearch::Wait
        );
        // Lacking a block half-way down the walk is no fork either.
        let node = |n: u64| match n {
            9 | 10 => Some(header(n, 1, 1)),
            _ => None,
        };
        assert_eq!(search(10, 0, &rec, node), ForkSearch::Wait);
    }

    #[test]
    fn answers_that_do_not_link_up_mean_wait() {
        let rec = recorded(0, 10);
        // Block 7 differs, block 6 agrees, but the node's block 7 does not descend from our 6:
        // two endpoints on two branches answered; no rewind on that.
        let node = |n: u64| {
            Some(if n <= 6 {
                header(n, 0, 0)
            } else {
                header(n, 1, 1)
            })
        };
        assert_eq!(search(10, 0, &rec, node), ForkSearch::Wait);
    }

    #[test]
    fn deeper_than_what_we_keep_is_too_deep() {
        let rec = recorded(5, 10);
        assert_eq!(
            search(10, 5, &rec, |n| Some(header(n, 1, 1))),
            ForkSearch::TooDeep
        );
        assert_eq!(
            search(10, 0, &rec, |n| Some(header(n, 1, 1))),
            ForkSearch::TooDeep
        );
    }

    #[test]
    fn connects_needs_the_next_height_and_the_cursor_as_parent() {
        let c = ChainCursor {
            number: 4,
            hash: header(4, 0, 0).hash,
        };
        assert!(connects(Some(&c), &header(5, 0, 0)));
        assert!(!connects(Some(&c), &header(5, 1, 1)));
        assert!(!connects(Some(&c), &header(6, 0, 0)));
        assert!(connects(None, &header(9, 3, 3)));
    }
}
