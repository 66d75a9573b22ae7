//! A connection lost during `COMMIT`: the store asks the server what became of the transaction
//! instead of answering "did not happen" blindly (a job that did commit, answered as failed,
//! is done twice by whoever retries it with fresh ids, e.g. `custody ledger adjust`).
//!
//! The faults are armed process-wide, so this binary's store tests run one after the other.

use std::time::Duration;

use custody_core::error::{CoreError, Retry};
use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
use custody_core::ports::store::{read, write};
use custody_core::time::Timestamp;
use custody_core::{Amount, AssetId, Network};
use custody_store_postgres::commit_outcome::{resolve, Outcome};
use custody_store_postgres::testing::commit_fault::{arm, CommitFault};
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgStore, StoreOptions};
use uuid::Uuid;

fn config(schema: &TestSchema) -> postgres::Config {
    schema.url().parse().expect("the test url parses")
}

fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("no panic")
}

#[test]
fn resolve_tells_committed_from_aborted_transactions() {
    let schema = TestSchema::new();
    let cfg = config(&schema);
    let mut c = cfg.connect(postgres::NoTls).unwrap();
    let xid = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT txid_current()", &[]).unwrap().get(0)
    };

    c.batch_execute("BEGIN").unwrap();
    let committed = xid(&mut c);
    c.batch_execute("COMMIT").unwrap();
    assert_eq!(
        resolve(&cfg, committed, Duration::from_secs(5)),
        Outcome::Committed
    );

    c.batch_execute("BEGIN").unwrap();
    let rolled_back = xid(&mut c);
    c.batch_execute("ROLLBACK").unwrap();
    assert_eq!(
        resolve(&cfg, rolled_back, Duration::from_secs(5)),
        Outcome::Aborted
    );

    // Still open on another session: neither, until the patience runs out.
    c.batch_execute("BEGIN").unwrap();
    let open = xid(&mut c);
    match resolve(&cfg, open, Duration::from_millis(300)) {
        Outcome::Unknown(why) => assert!(why.contains("in progress"), "{why}"),
        other => panic!("an open transaction is not {other:?}"),
    }
    c.batch_execute("ROLLBACK").unwrap();
}

fn meta(n: u128) -> TxMeta {
    TxMeta {
        id: Uuid::from_u128(n),
        reference_type: ReferenceType::InternalTransfer,
        reference_id: Uuid::from_u128(n),
        created_at: Timestamp::from_unix_millis(1_000),
    }
}

fn alice() -> UserAccount {
    UserAccount::new("acme", "alice", AssetId::new(Network::Bsc, "USDT"))
}

async fn credit(store: &PgStore, n: u128) -> Result<(), CoreError> {
    write(store, move |tx| {
        ledger::credit_deposit(tx, &meta(n), &alice(), Amount::from_units(10))?;
        Ok(())
    })
    .await
}

async fn balance(store: &PgStore) -> Amount {
    read(
        store,
        |tx| Ok(ledger::user_balance(tx, &alice())?.available),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_answered_by_what_the_server_did() {
    let schema = TestSchema::new();
    let url = schema.url();
    let options = StoreOptions {
        writers: 1,
        readers: 1,
        ..StoreOptions::default()
    };
    let store = on_thread(move || PgStore::open(&url, options)).unwrap();

    // The server committed, the answer was lost: the job happened, so Ok.
    arm(CommitFault::LoseReplyAfterCommit);
    credit(&store, 1)
        .await
        .expect("a committed job is answered Ok");
    assert_eq!(balance(&store).await, Amount::from_units(10));

    // The server died before the COMMIT: the job did not happen, a transient error.
    arm(CommitFault::KillBeforeCommit);
    match credit(&store, 2).await {
        Err(CoreError::Port(e)) => {
            assert_eq!(e.retry, Retry::Transient, "{e:?}");
            assert!(
                e.message.contains("rolled the transaction back"),
                "{}",
                e.message
            );
        }
        other => panic!("a job that did not commit is not {other:?}"),
    }
    assert_eq!(balance(&store).await, Amount::from_units(10));

    // The worker reconnects and goes on.
    credit(&store, 3).await.unwrap();
    assert_eq!(balance(&store).await, Amount::from_units(20));
    drop(store);
}
