//! `PgExclusive`: one holder per name among the processes on a schema, passed on when the
//! holder's connection closes.

use custody_core::ports::Exclusive;
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgStore, StoreOptions};

fn store(schema: &TestSchema) -> PgStore {
    let options = StoreOptions {
        writers: 1,
        readers: 1,
        ..StoreOptions::default()
    };
    PgStore::open(&schema.url(), options).unwrap()
}

#[tokio::test]
async fn one_holder_per_name_and_a_dead_holders_work_passes_on() {
    let schema = TestSchema::new();
    let (sa, sb) = (store(&schema), store(&schema));
    let (a, b) = (sa.exclusive(), sb.exclusive());
    assert!(a.hold("scanner:BSC").await);
    assert!(!b.hold("scanner:BSC").await, "held by a");
    assert!(a.hold("scanner:BSC").await, "still a's");
    assert!(b.hold("scanner:TRON").await, "another name is free");
    assert!(!a.hold("scanner:TRON").await);

    // Another deployment (schema) on the same server has its own names.
    let other = TestSchema::new();
    let so = store(&other);
    assert!(so.exclusive().hold("scanner:BSC").await);

    // a's process dies: its session ends, and b takes the work on its next ask.
    drop(a);
    assert!(b.hold("scanner:BSC").await);
}
