//! TRON: evidence from block contents that no attempt of a payment is in a block, before the
//! engine signs another one or fails the payment.
//!
//! A lookup by id answering "not found" is no such evidence: a lagging backend behind a
//! load-balanced URL, or an endpoint that lies, answers it for a transaction that is in a block
//! (issue 31, F2: the destination was paid twice). Blocks read by number are what the scanner
//! trusts for deposits, so they are what the engine trusts here: every block from the one after
//! the newest attempt's reference block through the first block past its expiration, linked by
//! parent hashes, agreeing with the hashes the scanner recorded, ending on a block the scanner
//! recorded and at confirmation depth, lists none of the attempts. Anything less (a read that
//! failed, a block missing, a hash that disagrees) is no evidence and the engine waits.
//!
//! Earlier attempts were proven absent the same way before the next one was signed, through a
//! final block past their own expiration, so only the newest attempt's window is read (every
//! attempt's id is looked for in it).

use std::collections::BTreeMap;

use crate::network::Network;
use crate::ports::sender::{BlockListing, Inclusion, TxLookup};

use super::{Included, OutgoingTx};

/// Most blocks one window may span. A window is the reference depth plus the lifetime of a
/// transaction plus one block (about 41 blocks on the defaults); reading stops at the first
/// block past the expiration, so a window ends this far after its start at the latest,
/// however far the head has moved on since (an outage, a stopped service).
pub const MAX_WINDOW_BLOCKS: u64 = 1_200;

/// The blocks to read for an absence proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanWindow {
    /// The first block that could include the newest attempt (the one after its reference).
    pub from: u64,
    /// The newest block no reorganization shallower than the confirmation depth can replace.
    pub final_block: u64,
    /// The newest attempt's expiration: the window ends at the first block after it.
    pub expires_at_ms: i64,
    /// The id of every attempt.
    pub hashes: Vec<String>,
}

impl ScanWindow {
    /// The attempt `listing` lists, if any.
    pub fn listed<'a>(&'a self, listing: &BlockListing) -> Option<&'a str> {
        self.hashes
            .iter()
            .find(|h| listing.txids.iter().any(|t| t.eq_ignore_ascii_case(h)))
            .map(String::as_str)
    }

    /// Whether reading can stop after `listing`: it lists an attempt, or it is past the newest
    /// attempt's expiration (no later block can include any attempt).
    pub fn ends_with(&self, listing: &BlockListing) -> bool {
        listing.header.timestamp_ms > self.expires_at_ms || self.listed(listing).is_some()
    }
}

/// What the blocks read by number say about the attempts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BlockScan {
    /// Not read, or no conclusion (a block missing, a read failed, hashes disagree).
    #[default]
    NotRead,
    /// Blocks `from..=through` were read by number, link by parent hashes, agree with the
    /// scanner's records (`through` among them) and list none of the attempts; `through` is
    /// past the newest attempt's expiration.
    Absent {
        from: u64,
        through: u64,
        through_time_ms: i64,
    },
    /// Attempt `hash` is listed in block `block_number`, read by number. `inclusion`: its
    /// receipt read from that block's infos, `None` when it could not be read.
    Listed {
        hash: String,
        block_number: u64,
        inclusion: Option<Inclusion>,
    },
}

/// The window whose blocks prove `tx` void, when the engine would otherwise consider it: TRON,
/// nothing recorded as included, every lookup `Unknown`, and the block at confirmation depth
/// (`final_time_ms`) past the newest attempt's expiration. `None` too when the newest attempt
/// has no recorded reference block (stored before it was kept): see [`decide`](super::decide).
pub fn scan_window(
    tx: &OutgoingTx,
    head_number: u64,
    final_time_ms: Option<i64>,
    lookups: &[TxLookup],
    confirmations: u32,
) -> Option<ScanWindow> {
    if tx.network != Network::Tron || tx.included.is_some() {
        return None;
    }
    if !lookups.iter().all(|l| matches!(l, TxLookup::Unknown)) {
        return None;
    }
    let latest = tx.latest()?;
    let expires_at_ms = latest.expires_at_ms?;
    if final_time_ms.is_none_or(|t| t <= expires_at_ms) {
        return None;
    }
    let from = latest.reference_block?.checked_add(1)?;
    let final_block = final_block(head_number, confirmations)?;
    if final_block < from {
        return None;
    }
    // Bounded from its start, not from the head: a payment whose expiration fell during a
    // long outage is still proven void by the same few blocks.
    let final_block = final_block.min(from + MAX_WINDOW_BLOCKS - 1);
    Some(ScanWindow {
        from,
        final_block,
        expires_at_ms,
        hashes: tx.attempts.iter().map(|a| a.hash.clone()).collect(),
    })
}

/// The newest block at confirmation depth (`head − confirmations + 1`), `None` below it.
pub fn final_block(head_number: u64, confirmations: u32) -> Option<u64> {
    head_number.checked_sub(u64::from(confirmations.max(1)) - 1)
}

/// Judges the blocks read for `window`, in order from `window.from` (reading stopped at the
/// first [`ScanWindow::ends_with`] block), against the hashes the scanner recorded
/// (`recorded`: number → hash, where it keeps one).
pub fn assess(
    window: &ScanWindow,
    listings: &[BlockListing],
    recorded: &BTreeMap<u64, String>,
) -> BlockScan {
    // A block listing an attempt is a reason never to sign another, whatever else is read.
    for l in listings {
        if let Some(hash) = window.listed(l) {
            return BlockScan::Listed {
                hash: hash.to_owned(),
                block_number: l.header.number,
                inclusion: None,
            };
        }
    }
    let Some(last) = listings.last() else {
        return BlockScan::NotRead;
    };
    let contiguous = listings.first().map(|l| l.header.number) == Some(window.from)
        && listings.windows(2).all(|p| {
            p[1].header.number == p[0].header.number + 1
                && p[1]
                    .header
                    .parent_hash
                    .eq_ignore_ascii_case(&p[0].header.hash)
        });
    let agrees = listings.iter().all(|l| {
        recorded
            .get(&l.header.number)
            .is_none_or(|h| h.eq_ignore_ascii_case(&l.header.hash))
    });
    let anchored = recorded.contains_key(&last.header.number);
    let complete =
        last.header.timestamp_ms > window.expires_at_ms && last.header.number <= window.final_block;
    if contiguous && agrees && anchored && complete {
        BlockScan::Absent {
            from: window.from,
            through: last.header.number,
            through_time_ms: last.header.timestamp_ms,
        }
    } else {
        BlockScan::NotRead
    }
}

/// TRON: the recorded inclusion of `tx` to check against its block's contents, when no lookup
/// finds any attempt in a block (a reorganization, or an endpoint that hides it).
pub fn recorded_to_check<'a>(tx: &'a OutgoingTx, lookups: &[TxLookup]) -> Option<&'a Included> {
    let found = lookups.iter().any(|l| matches!(l, TxLookup::Included(_)));
    (tx.network == Network::Tron && !found)
        .then_some(tx.included.as_ref())
        .flatten()
}

/// Whether block `listing` is still the recorded one and lists the recorded attempt.
pub fn still_listed(recorded: &Included, listing: &BlockListing) -> bool {
    listing.header.number == recorded.block_number
        && listing
            .header
            .hash
            .eq_ignore_ascii_case(&recorded.block_hash)
        && listing
            .txids
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&recorded.hash))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::chain::BlockHeader;

    fn block(number: u64, time: i64, txids: &[&str]) -> BlockListing {
        BlockListing {
            header: BlockHeader {
                number,
                hash: format!("{number:064x}"),
                parent_hash: format!("{:064x}", number - 1),
                timestamp_ms: time,
            },
            txids: txids.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn window() -> ScanWindow {
        ScanWindow {
            from: 11,
            final_block: 40,
            expires_at_ms: 60_000,
            hashes: vec!["aa".into(), "bb".into()],
        }
    }

    /// Blocks 11.. every 3 s from 33 s: block 21 (63 s) is the first past 60 s.
    fn blocks_through(last: u64) -> Vec<BlockListing> {
        (11..=last)
            .map(|n| block(n, 33_000 + (n as i64 - 11) * 3_000, &[]))
            .collect()
    }

    fn recorded(numbers: &[u64]) -> BTreeMap<u64, String> {
        numbers.iter().map(|n| (*n, format!("{n:064x}"))).collect()
    }

    #[test]
    fn a_window_after_a_long_outage_is_bounded_from_its_start_not_dropped() {
        use crate::outgoing::{Attempt, Bid, OutgoingTx, Purpose};
        let mut tx = OutgoingTx::new(
            uuid::Uuid::from_u128(1),
            Network::Tron,
            Purpose::Withdrawal,
            uuid::Uuid::from_u128(2),
            "sender".into(),
            crate::ports::signer::HdPath {
                network: Network::Tron,
                account: 2_147_483_647,
                index: 0,
            },
            crate::ports::sender::Payment::Native {
                to: "to".into(),
                amount: crate::Amount::from_units(5),
            },
            None,
            crate::Timestamp::from_unix_millis(0),
        );
        tx.attempts.push(Attempt {
            hash: "aa".into(),
            raw: vec![1],
            bid: Bid::FeeLimit { sun: 1 },
            expires_at_ms: Some(60_000),
            signed_at: crate::Timestamp::from_unix_millis(0),
            sent_at: Some(crate::Timestamp::from_unix_millis(0)),
            last_answer: None,
            plan: None,
            reference_block: Some(10),
            void: false,
        });
        // The head a day later: the window still starts after the reference block and ends
        // MAX_WINDOW_BLOCKS after it at the latest (reading stops past the expiration).
        let w = scan_window(&tx, 30_000, Some(86_400_000), &[TxLookup::Unknown], 19).unwrap();
        assert_eq!((w.from, w.final_block), (11, 11 + MAX_WINDOW_BLOCKS - 1));
    }

    #[test]
    fn absence_needs_every_block_linked_through_a_recorded_one_past_the_expiration() {
        let w = window();
        let all = blocks_through(21);
        assert!(w.ends_with(&all[10]) && !w.ends_with(&all[9]));
        assert_eq!(
            assess(&w, &all, &recorded(&[21])),
            BlockScan::Absent {
                from: 11,
                through: 21,
                through_time_ms: 63_000
            }
        );
        // Stopped before the expiration (a block missing on the node).
        assert_eq!(assess(&w, &all[..10], &recorded(&[20])), BlockScan::NotRead);
        // The last block is not one the scanner recorded (it lags): no anchor.
        assert_eq!(assess(&w, &all, &recorded(&[20])), BlockScan::NotRead);
        // A block left out of the middle.
        let mut gap = all.clone();
        gap.remove(4);
        assert_eq!(assess(&w, &gap, &recorded(&[21])), BlockScan::NotRead);
        // Not from the window's first block.
        assert_eq!(assess(&w, &all[1..], &recorded(&[21])), BlockScan::NotRead);
        // A block of another fork (its parent is not the block read before it).
        let mut fork = all.clone();
        fork[5].header.parent_hash = "ff".repeat(32);
        assert_eq!(assess(&w, &fork, &recorded(&[21])), BlockScan::NotRead);
        // A block whose hash the scanner recorded otherwise.
        let mut other = recorded(&[21]);
        other.insert(15, "ee".repeat(32));
        assert_eq!(assess(&w, &all, &other), BlockScan::NotRead);
        // Not final yet.
        let shallow = ScanWindow {
            final_block: 20,
            ..window()
        };
        assert_eq!(assess(&shallow, &all, &recorded(&[21])), BlockScan::NotRead);
        assert_eq!(assess(&w, &[], &recorded(&[21])), BlockScan::NotRead);
    }

    #[test]
    fn a_listed_attempt_is_found_whatever_else_is_read() {
        let w = window();
        let mut all = blocks_through(21);
        all[3].txids.push("BB".into());
        assert!(w.ends_with(&all[3]));
        let found = BlockScan::Listed {
            hash: "bb".into(),
            block_number: 14,
            inclusion: None,
        };
        assert_eq!(assess(&w, &all[..4], &BTreeMap::new()), found);
        assert_eq!(assess(&w, &all, &recorded(&[21])), found);
    }

    #[test]
    fn the_final_block_is_at_confirmation_depth() {
        assert_eq!(final_block(100, 19), Some(82));
        assert_eq!(final_block(100, 1), Some(100));
        assert_eq!(final_block(100, 0), Some(100));
        assert_eq!(final_block(5, 19), None);
    }
}
