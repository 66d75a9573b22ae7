//! Paging of the admin listings: newest first, a keyset on `(created_at, id)` descending.
//!
//! A cursor is the id of the last row of the previous page (`starting_after`), not an offset:
//! rows written while an operator pages (alerts, audit records keep coming) shift offsets but
//! not keys, so no row is shown twice or skipped.

use uuid::Uuid;

use crate::time::Timestamp;

/// What one page asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// At most this many rows.
    pub limit: usize,
    /// Only rows older than this one, in `(created_at, id)` order; `None` for the first page.
    pub starting_after: Option<Uuid>,
}

impl Page {
    /// The first `limit` rows.
    pub fn first(limit: usize) -> Self {
        Self {
            limit,
            starting_after: None,
        }
    }

    pub fn after(limit: usize, id: Uuid) -> Self {
        Self {
            limit,
            starting_after: Some(id),
        }
    }
}

/// A store's answer to a [`Page`]: `None` when `starting_after` names no row of the listing
/// (the caller answers 422), else the rows, newest first.
pub type Paged<T> = Option<Vec<T>>;

/// The page of `rows` (in any order) that `page` asks for, by the key `(created_at, id)`
/// descending. For stores that hold their rows in memory; SQL stores run the same keyset in
/// their query.
pub fn select<T: Clone>(rows: &[T], key: impl Fn(&T) -> (Timestamp, Uuid), page: Page) -> Paged<T> {
    let bound = match page.starting_after {
        None => None,
        Some(id) => Some(rows.iter().map(&key).find(|k| k.1 == id)?),
    };
    let mut out: Vec<&T> = rows
        .iter()
        .filter(|r| bound.is_none_or(|b| key(r) < b))
        .collect();
    out.sort_by_key(|r| std::cmp::Reverse(key(r)));
    Some(out.into_iter().take(page.limit).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_by_time_then_id_and_refuses_an_unknown_cursor() {
        let id = |n: u128| Uuid::from_u128(n);
        let at = Timestamp::from_unix_millis;
        // Two rows share a millisecond: the id breaks the tie.
        let rows = vec![
            (at(1), id(1)),
            (at(2), id(3)),
            (at(2), id(2)),
            (at(3), id(4)),
        ];
        let key = |r: &(Timestamp, Uuid)| *r;
        let p1 = select(&rows, key, Page::first(2)).unwrap();
        assert_eq!(p1, vec![(at(3), id(4)), (at(2), id(3))]);
        let p2 = select(&rows, key, Page::after(2, id(3))).unwrap();
        assert_eq!(p2, vec![(at(2), id(2)), (at(1), id(1))]);
        assert!(select(&rows, key, Page::after(2, id(1)))
            .unwrap()
            .is_empty());
        assert_eq!(select(&rows, key, Page::after(2, id(9))), None);
    }
}
