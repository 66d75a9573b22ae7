//! The claim fairness rule: which due events a worker leases next. One tenant with a backlog or
//! a slow endpoint may hold at most `tenant_max` events in flight, so the others keep flowing.

use std::collections::BTreeMap;

use super::Claim;
use crate::time::Timestamp;

/// A pending event the store found due and unleased, before the rule decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCandidate<K> {
    /// The store's key of the event (a row id).
    pub key: K,
    pub tenant: String,
    pub due_at: Timestamp,
}

/// How many more events a tenant with `in_flight` leased events may have claimed now. A store
/// need not read more candidates of a tenant than this.
pub fn tenant_room(claim: &Claim, in_flight: usize) -> usize {
    claim.tenant_max.saturating_sub(in_flight).min(claim.limit)
}

/// Picks what to lease: per tenant the oldest due events up to its room, then the oldest due
/// overall (ties by key), at most `claim.limit`.
pub fn choose_claims<K: Ord>(
    claim: &Claim,
    in_flight: &BTreeMap<String, usize>,
    mut candidates: Vec<ClaimCandidate<K>>,
) -> Vec<K> {
    candidates.sort_by(|a, b| (a.due_at, &a.key).cmp(&(b.due_at, &b.key)));
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut chosen = Vec::new();
    for c in candidates {
        if chosen.len() >= claim.limit {
            break;
        }
        let room = tenant_room(claim, in_flight.get(&c.tenant).copied().unwrap_or(0));
        let used = taken.entry(c.tenant).or_insert(0);
        if *used < room {
            *used += 1;
            chosen.push(c.key);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(limit: usize, tenant_max: usize) -> Claim {
        let now = Timestamp::from_unix_millis(1_000);
        Claim {
            now,
            lease_until: now.plus_millis(60_000),
            limit,
            tenant_max,
        }
    }

    fn candidate(key: u32, tenant: &str, due: i64) -> ClaimCandidate<u32> {
        ClaimCandidate {
            key,
            tenant: tenant.into(),
            due_at: Timestamp::from_unix_millis(due),
        }
    }

    #[test]
    fn a_backlogged_tenant_cannot_take_the_whole_claim() {
        let mut all: Vec<_> = (0..50).map(|k| candidate(k, "big", i64::from(k))).collect();
        all.push(candidate(100, "small", 999));
        let chosen = choose_claims(&claim(10, 4), &BTreeMap::new(), all);
        assert_eq!(chosen, vec![0, 1, 2, 3, 100]);
    }

    #[test]
    fn events_in_flight_count_against_the_room() {
        let in_flight = BTreeMap::from([("a".to_owned(), 3), ("b".to_owned(), 4)]);
        let all = vec![
            candidate(1, "a", 5),
            candidate(2, "a", 6),
            candidate(3, "b", 1),
        ];
        assert_eq!(choose_claims(&claim(10, 4), &in_flight, all), vec![1]);
    }

    #[test]
    fn the_oldest_due_go_first_up_to_the_limit() {
        let all = vec![
            candidate(9, "a", 30),
            candidate(8, "b", 10),
            candidate(7, "c", 20),
        ];
        assert_eq!(
            choose_claims(&claim(2, 4), &BTreeMap::new(), all),
            vec![8, 7]
        );
    }
}
