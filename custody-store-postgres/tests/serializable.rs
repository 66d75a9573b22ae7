//! The store port's contract with many writers: two `PgStore`s (as two instances would have)
//! on one schema, many jobs at once. SERIALIZABLE transactions, re-run when they lose a
//! conflict, must make every job behave as if it ran alone: no balance spent twice, no nonce
//! accepted twice, watch-set positions in commit order.

use std::sync::Arc;

use custody_core::error::{CoreError, ErrorCode};
use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
use custody_core::ports::store::{read, write, Store};
use custody_core::time::Timestamp;
use custody_core::{Amount, AssetId, Network};
use custody_store_postgres::testing::TestSchema;
use custody_store_postgres::{PgStore, StoreOptions};
use uuid::Uuid;

fn two_instances(schema: &TestSchema) -> (Arc<PgStore>, Arc<PgStore>) {
    let options = StoreOptions {
        writers: 4,
        readers: 2,
        ..StoreOptions::default()
    };
    let a = PgStore::open(&schema.url(), options.clone()).expect("instance a opens");
    let b = PgStore::open(&schema.url(), options).expect("instance b opens");
    (Arc::new(a), Arc::new(b))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_spends_on_two_instances_spend_exactly_the_balance() {
    let schema = TestSchema::new();
    let (a, b) = two_instances(&schema);
    write(a.as_ref(), |tx| {
        ledger::credit_deposit(tx, &meta(1), &alice(), Amount::from_units(100))?;
        Ok(())
    })
    .await
    .unwrap();

    // 2 × 64 transfers of 1 unit each to distinct recipients, half through each instance.
    let mut spends = Vec::new();
    for i in 0..128u128 {
        let store: Arc<dyn Store> = if i % 2 == 0 { a.clone() } else { b.clone() };
        spends.push(tokio::spawn(async move {
            write(store.as_ref(), move |tx| {
                ledger::transfer(
                    tx,
                    &meta(1_000 + i),
                    &alice(),
                    &format!("bob-{i}"),
                    Amount::from_units(1),
                )?;
                Ok(())
            })
            .await
        }));
    }
    let (mut ok, mut refused) = (0, 0);
    for s in spends {
        match s.await.unwrap() {
            Ok(()) => ok += 1,
            Err(CoreError::Refused(r)) if r.code == ErrorCode::InsufficientBalance => refused += 1,
            Err(other) => panic!("a spend failed otherwise: {other:?}"),
        }
    }
    assert_eq!((ok, refused), (100, 28));

    let (left, report) = read(b.as_ref(), |tx| {
        let left = ledger::user_balance(tx, &alice())?.available;
        Ok((left, ledger::reconcile(tx)?))
    })
    .await
    .unwrap();
    assert_eq!(left, Amount::ZERO);
    assert!(report.balanced, "{:?}", report.discrepancies);
    assert_eq!(report.transactions, 101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nonce_raced_on_two_instances_is_accepted_once() {
    let schema = TestSchema::new();
    let (a, b) = two_instances(&schema);
    let credential = Uuid::from_u128(7);
    let expires = Timestamp::from_unix_millis(i64::MAX / 2);
    for round in 0..20 {
        let nonce = format!("nonce-{round:04}");
        let mut racers = Vec::new();
        for i in 0..8 {
            let store: Arc<dyn Store> = if i % 2 == 0 { a.clone() } else { b.clone() };
            let nonce = nonce.clone();
            racers.push(tokio::spawn(async move {
                write(store.as_ref(), move |tx| {
                    Ok(tx.use_nonce(credential, &nonce, expires)?)
                })
                .await
                .unwrap()
            }));
        }
        let mut accepted = 0;
        for r in racers {
            accepted += usize::from(r.await.unwrap());
        }
        assert_eq!(accepted, 1, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_set_positions_are_dense_and_in_commit_order_across_instances() {
    use custody_core::wallet::Wallet;

    let schema = TestSchema::new();
    let (a, b) = two_instances(&schema);
    let mut creates = Vec::new();
    for i in 0..40u32 {
        let store: Arc<dyn Store> = if i % 2 == 0 { a.clone() } else { b.clone() };
        creates.push(tokio::spawn(async move {
            write(store.as_ref(), move |tx| {
                let wallet = Wallet {
                    id: Uuid::from_u128(u128::from(i) + 1),
                    tenant: custody_core::TenantId::parse("acme").unwrap(),
                    external_user_id: format!("user-{i}"),
                    network: Network::Bsc,
                    address: format!("0x{:040x}", i + 1),
                    account: 0,
                    index: i,
                    created_at: Timestamp::from_unix_millis(1_000),
                    previous_addresses: Vec::new(),
                };
                tx.insert_wallet(&wallet)?;
                Ok(())
            })
            .await
        }));
    }
    for c in creates {
        c.await.unwrap().unwrap();
    }
    let seen = read(a.as_ref(), |tx| {
        Ok(tx.wallet_addresses_after(Network::Bsc, 0, 1_000)?)
    })
    .await
    .unwrap();
    let positions: Vec<u64> = seen.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(positions, (1..=40).collect::<Vec<u64>>());
}

#[test]
fn instances_starting_together_migrate_once() {
    let schema = TestSchema::new();
    let url = schema.url();
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let options = StoreOptions {
                    writers: 1,
                    readers: 1,
                    ..StoreOptions::default()
                };
                PgStore::open(&url, options).map(|s| s.close())
            })
        })
        .collect();
    for o in opened {
        o.join().unwrap().expect("every instance opens");
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let versions: Vec<i64> = client
        .query(
            "SELECT version FROM custody_schema_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        versions,
        (1..=i64::try_from(custody_store_postgres::schema_version()).unwrap()).collect::<Vec<_>>()
    );
}
