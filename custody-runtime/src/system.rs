//! The real clock and the operating system's randomness, for the assembled service.

use custody_core::ports::{Clock, Entropy};
use custody_core::Timestamp;
use rand_core::{OsRng, RngCore};

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp::from_unix_millis(ms)
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&self, buf: &mut [u8]) {
        // OsRng panics rather than return predictable bytes, as the port requires.
        OsRng.fill_bytes(buf);
    }

    /// Version 7: ids made one after the other sort together, so the store's inserts touch the
    /// last page of each id index rather than a random one (profiled: the pages a group commit
    /// writes to the WAL were most of a transfer's cost).
    fn new_id(&self) -> uuid::Uuid {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        uuid::Builder::from_unix_timestamp_millis(millis, &id_bytes()).into_uuid()
    }
}

/// Bytes of an id's random part drawn from the system's generator, fetched for many ids at a
/// time: ids are public (they name records in answers and URLs), so holding a few hundred
/// bytes of them ahead is harmless, while one `getrandom` call per id was 1.5% of a signed
/// GET's CPU (each request gets an id). Secrets still come from [`Entropy::fill`], unbuffered.
fn id_bytes() -> [u8; ID_RANDOM] {
    thread_local! {
        static POOL: std::cell::RefCell<([u8; ID_POOL], usize)> =
            const { std::cell::RefCell::new(([0; ID_POOL], ID_POOL)) };
    }
    POOL.with_borrow_mut(|(pool, used)| {
        if *used + ID_RANDOM > ID_POOL {
            OsRng.fill_bytes(pool);
            *used = 0;
        }
        let mut out = [0u8; ID_RANDOM];
        out.copy_from_slice(&pool[*used..*used + ID_RANDOM]);
        // Never handed out twice.
        pool[*used..*used + ID_RANDOM].fill(0);
        *used += ID_RANDOM;
        out
    })
}

/// The random bytes of a version 7 UUID (74 random bits, in 10 bytes).
const ID_RANDOM: usize = 10;
/// 32 ids per system call.
const ID_POOL: usize = ID_RANDOM * 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_version_7_with_fresh_random_bytes_each() {
        let e = OsEntropy;
        let ids: Vec<uuid::Uuid> = (0..1_000).map(|_| e.new_id()).collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        assert!(ids.iter().all(|id| id.get_version_num() == 7));
        // Each id's random part is fresh: no two share their 10 random bytes.
        let randoms: std::collections::HashSet<[u8; 10]> = ids
            .iter()
            .map(|id| id.as_bytes()[6..].try_into().unwrap())
            .collect();
        assert_eq!(randoms.len(), ids.len());
    }
}
