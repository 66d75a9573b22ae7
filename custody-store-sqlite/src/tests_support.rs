//! Shared pieces of the store tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use custody_core::ports::Entropy;
use custody_core::vault::SealingKey;

use crate::{SqliteStore, StoreOptions};

pub const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

/// Distinct, repeatable bytes: enough for ids and nonces in tests.
pub struct TestEntropy(AtomicU64);

impl Entropy for TestEntropy {
    fn fill(&self, buf: &mut [u8]) {
        let n = self.0.fetch_add(1, Ordering::Relaxed).to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = n[i % 8] ^ u8::try_from(i % 251).unwrap_or(0);
        }
    }
}

pub fn open_store() -> (SqliteStore, tempfile::TempDir, Arc<TestEntropy>) {
    let dir = tempfile::tempdir().unwrap();
    let entropy = Arc::new(TestEntropy(AtomicU64::new(1)));
    let store = SqliteStore::open(
        &dir.path().join("custody.db"),
        SealingKey::from_bytes([3; 32]),
        Arc::clone(&entropy) as Arc<dyn Entropy>,
        StoreOptions::default(),
    )
    .unwrap();
    (store, dir, entropy)
}
