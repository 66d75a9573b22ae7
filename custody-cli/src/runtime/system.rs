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
        let mut random = [0u8; 10];
        OsRng.fill_bytes(&mut random);
        uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
    }
}
