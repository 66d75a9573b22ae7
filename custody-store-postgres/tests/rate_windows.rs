//! `PgRateLimiter`: one credential's window counted across two stores (two instances).

use std::sync::Arc;

use custody_core::auth::RateLimit;
use custody_core::time::Timestamp;
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgRateLimiter, PgStore, StoreOptions};
use uuid::Uuid;

fn limiter(schema: &TestSchema) -> PgRateLimiter {
    let options = StoreOptions {
        writers: 2,
        readers: 1,
        ..StoreOptions::default()
    };
    PgRateLimiter::new(Arc::new(PgStore::open(&schema.url(), options).unwrap()))
}

#[tokio::test]
async fn one_window_is_shared_refused_requests_do_not_count_and_refunds_give_back() {
    let schema = TestSchema::new();
    let (a, b) = (limiter(&schema), limiter(&schema));
    let credential = Uuid::from_u128(1);
    let now = Timestamp::from_unix_millis(1_000_000_040_000);
    let mut allowed = 0;
    for i in 0..8 {
        let l = if i % 2 == 0 { &a } else { &b };
        allowed += usize::from(l.check(credential, 5, now).await.allowed);
    }
    assert_eq!(allowed, 5);
    let seen = b.peek(credential, 5, now).await;
    assert_eq!((seen.allowed, seen.remaining), (false, 0));
    assert_eq!(seen.reset_after_s, 40);

    a.refund(credential, now).await;
    assert_eq!(b.peek(credential, 5, now).await.remaining, 1);
    assert!(b.check(credential, 5, now).await.allowed);
    assert!(!a.check(credential, 5, now).await.allowed);

    // Another credential, and the next window, start afresh.
    assert_eq!(a.check(Uuid::from_u128(2), 5, now).await.remaining, 4);
    let next = Timestamp::from_unix_millis(1_000_000_100_000);
    assert_eq!(b.check(credential, 5, next).await.remaining, 4);
}

#[tokio::test]
async fn a_limit_of_zero_refuses_and_counts_nothing() {
    let schema = TestSchema::new();
    let l = limiter(&schema);
    let credential = Uuid::from_u128(2);
    let now = Timestamp::from_unix_millis(1_000_000_040_000);
    for _ in 0..3 {
        let d = l.check(credential, 0, now).await;
        assert_eq!((d.allowed, d.remaining), (false, 0));
    }
    // Raised to 5 within the window: the refused requests used none of it.
    assert_eq!(l.peek(credential, 5, now).await.remaining, 5);
}
