//! Store conformance tests on a real SQLite file.

use std::collections::BTreeSet;
use std::sync::Arc;

use custody_core::auth::{Credential, Scope, StoredCredential};
use custody_core::error::{CoreError, ErrorCode, Refusal};
use custody_core::idempotency::{self, Outcome, StoredResponse};
use custody_core::ports::store::{read, write};
use custody_core::secret::Secret;
use custody_core::time::Timestamp;
use custody_core::vault::{SealingKey, Vault};
use custody_testkit::CountingEntropy;
use uuid::Uuid;

use super::*;

fn open(dir: &tempfile::TempDir, _key: u8, options: StoreOptions) -> SqliteStore {
    SqliteStore::open(&dir.path().join("custody.db"), options).unwrap()
}

/// The core's vault: it seals what the store keeps.
fn vault(key: u8) -> Vault {
    Vault::new(
        SealingKey::from_bytes([key; 32]),
        Arc::new(CountingEntropy::new(1)),
    )
}

fn credential(api_key: &str) -> StoredCredential {
    plain_credential(api_key).seal(&vault(7))
}

fn plain_credential(api_key: &str) -> Credential {
    Credential {
        id: Uuid::new_v4(),
        api_key: api_key.into(),
        tenant: custody_core::TenantId::parse("acme").unwrap(),
        scopes: BTreeSet::from([Scope::CatalogRead, Scope::WalletsRead]),
        admin: false,
        rate_limit: 600,
        hmac_secret: Secret::new(b"s3cret".to_vec()),
        pin_hash: None,
        totp_secret: Some(Secret::new(vec![1, 2, 3])),
        totp_last_step: None,
        created_at: Timestamp::from_unix_millis(1_000),
        revoked_at: None,
    }
}

#[tokio::test]
async fn credentials_are_sealed_and_need_the_right_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 7, StoreOptions::default());
    let c = credential("ck_one");
    let c2 = c.clone();
    write(&store, move |tx| Ok(tx.insert_credential(&c2)?))
        .await
        .unwrap();
    let back = read(&store, |tx| {
        Ok(custody_core::auth::load_credential(
            tx,
            &vault(7),
            "ck_one",
        )?)
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(back.hmac_secret.expose(), b"s3cret");
    assert_eq!(back.totp_secret.unwrap().expose(), &vec![1, 2, 3]);
    assert_eq!(back.scopes, c.scopes);
    store.close();
    drop(store);

    let raw = std::fs::read(dir.path().join("custody.db")).unwrap();
    assert!(
        !raw.windows(6).any(|w| w == b"s3cret"),
        "the secret must not be stored in clear"
    );

    // Another key (a wrong passphrase) opens nothing: the store never had the secret.
    let reopened = open(&dir, 8, StoreOptions::default());
    let err = read(&reopened, |tx| {
        Ok(custody_core::auth::load_credential(
            tx,
            &vault(8),
            "ck_one",
        )?)
    })
    .await
    .unwrap_err();
    assert!(matches!(err, CoreError::Port(_)));
}

/// A read job sees one snapshot from its first statement to its last, though it opens no
/// `BEGIN` (`read_in` holds the credentials version's statement open instead): a commit by
/// another connection in the middle of the job, and statements of the job that run to their
/// end, change nothing it reads, and the version it reports is its snapshot's.
#[tokio::test]
async fn a_read_job_reads_one_snapshot_whatever_commits_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 7, StoreOptions::default());
    let path = dir.path().join("custody.db");

    for quick in [false, true] {
        let c = credential("ck_one");
        write(&store, move |tx| Ok(tx.insert_credential(&c)?))
            .await
            .unwrap();
        let before = store.credentials_version().await.unwrap().unwrap();
        let path = path.clone();
        let job = move |tx: &mut dyn custody_core::ports::store::ReadTx| {
            let version = tx.credentials_version()?;
            let seen = tx.credential_by_api_key("ck_one")?.is_some();
            // Another process removes every credential: its trigger bumps the version.
            let other = rusqlite::Connection::open(&path).unwrap();
            other.execute("DELETE FROM credentials", []).unwrap();
            drop(other);
            let listed = tx.list_credentials()?.len();
            let seen_after = tx.credential_by_api_key("ck_one")?.is_some();
            Ok((version, seen, listed, seen_after, tx.credentials_version()?))
        };
        let found = if quick {
            custody_core::ports::store::read_quick(&store, job).await
        } else {
            read(&store, job).await
        }
        .unwrap();
        assert_eq!(
            found,
            (Some(before), true, 1, true, Some(before)),
            "quick read: {quick}"
        );
        let now = read(&store, |tx| {
            Ok((tx.credentials_version()?, tx.list_credentials()?.len()))
        })
        .await
        .unwrap();
        assert_eq!(now, (Some(before + 1), 0), "a new read sees the commit");
        assert_eq!(store.credentials_version().await.unwrap(), Some(before + 1));
    }
}

fn stored_wallet(id: u128, tenant: &str) -> custody_core::wallet::Wallet {
    custody_core::wallet::Wallet {
        id: Uuid::from_u128(id),
        tenant: custody_core::TenantId::parse(tenant).unwrap(),
        external_user_id: format!("user{id}"),
        network: custody_core::Network::Bsc,
        address: format!("0x{id:040x}"),
        account: 0,
        index: u32::try_from(id).unwrap(),
        created_at: Timestamp::from_unix_millis(1_000),
        previous_addresses: Vec::new(),
    }
}

/// A wallet by id, through a quick read and a pool read (both must agree).
async fn wallet_now(store: &SqliteStore, id: u128) -> Option<custody_core::wallet::Wallet> {
    let tenant = custody_core::TenantId::parse("acme").unwrap();
    let t = tenant.clone();
    let quick = custody_core::ports::store::read_quick(store, move |tx| {
        Ok(tx.wallet_by_id(&t, Uuid::from_u128(id))?)
    })
    .await
    .unwrap();
    let pooled = read(store, move |tx| {
        Ok(tx.wallet_by_id(&tenant, Uuid::from_u128(id))?)
    })
    .await
    .unwrap();
    assert_eq!(quick, pooled);
    quick
}

/// Wallets read by id are kept by `wallets_version`, and every change another process can make
/// to what a wallet reads as (as `custody wallets migrate` does, through its own connection)
/// raises it: the next read answers the change.
#[tokio::test]
async fn a_kept_wallet_is_read_again_after_another_process_changes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1, StoreOptions::default());
    // Another process, or a tool that checks no foreign keys.
    let other = rusqlite::Connection::open(dir.path().join("custody.db")).unwrap();
    other.pragma_update(None, "foreign_keys", "OFF").unwrap();
    let id_text = Uuid::from_u128(1).to_string();
    for id in [1, 2] {
        let w = stored_wallet(id, "acme");
        write(&store, move |tx| Ok(tx.insert_wallet(&w)?))
            .await
            .unwrap();
    }
    let mut expected = stored_wallet(1, "acme");
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));
    assert_eq!(store.wallets.len(), 1, "the wallet read is kept");

    // A new wallet leaves the version alone, and the kept one stands.
    let version = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT n FROM wallets_version", [], |r| r.get(0))
            .unwrap()
    };
    let before = version(&other);
    let w = stored_wallet(3, "acme");
    write(&store, move |tx| Ok(tx.insert_wallet(&w)?))
        .await
        .unwrap();
    assert_eq!(version(&other), before);
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // The wallet's row changes.
    other
        .execute(
            "UPDATE wallets SET external_user_id = 'alice2' WHERE id = ?1",
            [&id_text],
        )
        .unwrap();
    expected.external_user_id = "alice2".into();
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // An address inserted already retired joins its previous addresses.
    other
        .execute(
            "INSERT INTO wallet_addresses (wallet_id, network, address, account, address_index, \
             retired_at) VALUES (?1, 'BSC', '0xold', 9, 9, 5000)",
            [&id_text],
        )
        .unwrap();
    let previous = |retired_ms| custody_core::wallet::PreviousAddress {
        address: "0xold".into(),
        account: 9,
        index: 9,
        retired_at: Timestamp::from_unix_millis(retired_ms),
    };
    expected.previous_addresses = vec![previous(5_000)];
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // An address of its log changes.
    other
        .execute(
            "UPDATE wallet_addresses SET retired_at = 6000 WHERE address = '0xold'",
            [],
        )
        .unwrap();
    expected.previous_addresses = vec![previous(6_000)];
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // A REPLACE gives that address to another wallet, not retired: it leaves alice's log.
    other
        .execute(
            "INSERT OR REPLACE INTO wallet_addresses (wallet_id, network, address, account, \
             address_index) VALUES (?1, 'BSC', '0xold', 9, 9)",
            [Uuid::from_u128(2).to_string()],
        )
        .unwrap();
    expected.previous_addresses.clear();
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // An entry of its log is removed.
    other
        .execute(
            "INSERT INTO wallet_addresses (wallet_id, network, address, account, address_index, \
             retired_at) VALUES (?1, 'BSC', '0xold2', 8, 8, 7000)",
            [&id_text],
        )
        .unwrap();
    assert_eq!(
        wallet_now(&store, 1)
            .await
            .map(|w| w.previous_addresses.len()),
        Some(1)
    );
    other
        .execute("DELETE FROM wallet_addresses WHERE address = '0xold2'", [])
        .unwrap();
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // A REPLACE (no delete trigger fires for it without recursive_triggers) puts another
    // tenant's wallet under the kept id: acme no longer finds it.
    other
        .execute(
            "INSERT OR REPLACE INTO wallets (id, tenant, external_user_id, network, address, \
             account, address_index, created_at) \
             SELECT id, 'evil', external_user_id, network, address, account, address_index, \
             created_at FROM wallets WHERE id = ?1",
            [&id_text],
        )
        .unwrap();
    assert_eq!(wallet_now(&store, 1).await, None);
    other
        .execute(
            "UPDATE wallets SET tenant = 'acme' WHERE id = ?1",
            [&id_text],
        )
        .unwrap();
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&expected));

    // Its row is removed, its log left.
    other
        .execute("DELETE FROM wallets WHERE id = ?1", [&id_text])
        .unwrap();
    assert_eq!(wallet_now(&store, 1).await, None);
    assert_eq!(
        wallet_now(&store, 2).await,
        Some(stored_wallet(2, "acme")),
        "another wallet is unaffected"
    );
}

/// While `wallets_version` stands, a kept wallet is answered from memory, not read again: a
/// change made with the triggers dropped is not seen until the version moves.
#[tokio::test]
async fn a_kept_wallet_is_answered_from_memory_while_the_version_stands() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1, StoreOptions::default());
    let other = rusqlite::Connection::open(dir.path().join("custody.db")).unwrap();
    let w = stored_wallet(1, "acme");
    write(&store, move |tx| Ok(tx.insert_wallet(&w)?))
        .await
        .unwrap();
    let kept = stored_wallet(1, "acme");
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&kept));
    other
        .execute_batch(
            "DROP TRIGGER wallets_version_wallet_update;
             UPDATE wallets SET external_user_id = 'changed';",
        )
        .unwrap();
    assert_eq!(wallet_now(&store, 1).await.as_ref(), Some(&kept));
    other
        .execute("UPDATE wallets_version SET n = n + 1", [])
        .unwrap();
    assert_eq!(
        wallet_now(&store, 1).await.map(|w| w.external_user_id),
        Some("changed".into())
    );
    // Another tenant's read of the kept wallet answers none, as the statement does.
    let found = read(&store, |tx| {
        Ok(tx.wallet_by_id(
            &custody_core::TenantId::parse("other").unwrap(),
            Uuid::from_u128(1),
        )?)
    })
    .await
    .unwrap();
    assert_eq!(found, None);
}

#[tokio::test]
async fn a_nonce_is_accepted_once_and_pruned_after_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1, StoreOptions::default());
    let id = Uuid::new_v4();
    let exp = Timestamp::from_unix_millis(10_000);
    assert!(write(&store, move |tx| Ok(tx.use_nonce(
        id,
        "n-0000000000000001",
        exp
    )?))
    .await
    .unwrap());
    assert!(!write(&store, move |tx| Ok(tx.use_nonce(
        id,
        "n-0000000000000001",
        exp
    )?))
    .await
    .unwrap());
    let pruned = write(&store, |tx| {
        Ok(tx.prune_nonces(Timestamp::from_unix_millis(10_001), 100)?)
    });
    assert_eq!(pruned.await.unwrap(), 1);
    assert!(write(&store, move |tx| Ok(tx.use_nonce(
        id,
        "n-0000000000000001",
        exp
    )?))
    .await
    .unwrap());
}

#[tokio::test]
async fn a_failing_job_rolls_back_alone_inside_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir, 1, StoreOptions::default()));
    let mut handles = Vec::new();
    for i in 0..200u32 {
        let store = Arc::clone(&store);
        handles.push(tokio::spawn(async move {
            write(store.as_ref(), move |tx| {
                tx.use_nonce(
                    Uuid::nil(),
                    &format!("nonce-{i:012}"),
                    Timestamp::from_unix_millis(1),
                )?;
                if i % 3 == 0 {
                    return Err(Refusal::new(ErrorCode::InsufficientBalance, "no").into());
                }
                Ok(i)
            })
            .await
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.await.unwrap().is_ok(), i % 3 != 0);
    }
    // A job whose nonce was rolled back can use it now; a committed one cannot.
    for i in 0..200u32 {
        let fresh = write(store.as_ref(), move |tx| {
            Ok(tx.use_nonce(
                Uuid::nil(),
                &format!("nonce-{i:012}"),
                Timestamp::from_unix_millis(1),
            )?)
        })
        .await
        .unwrap();
        assert_eq!(fresh, i % 3 == 0, "nonce {i}");
    }
}

#[tokio::test]
async fn a_panicking_job_is_an_error_and_the_writer_survives() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(
        &dir,
        1,
        StoreOptions {
            batch_max: 1,
            ..StoreOptions::default()
        },
    );
    let r: Result<(), _> = write(&store, |tx| {
        tx.use_nonce(
            Uuid::nil(),
            "panic-nonce-000001",
            Timestamp::from_unix_millis(1),
        )?;
        panic!("boom")
    })
    .await;
    assert!(matches!(r, Err(CoreError::Invariant(_))));
    let fresh = write(&store, |tx| {
        Ok(tx.use_nonce(
            Uuid::nil(),
            "panic-nonce-000001",
            Timestamp::from_unix_millis(1),
        )?)
    });
    assert!(
        fresh.await.unwrap(),
        "the panicking job's write was rolled back"
    );
}

#[tokio::test]
async fn idempotent_commands_replay_conflict_and_store_business_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1, StoreOptions::default());
    let now = Timestamp::from_unix_millis(5_000);
    let run = |fp: [u8; 32], refuse: bool| {
        write(&store, move |tx| {
            idempotency::run_in_tx(
                tx,
                &custody_core::TenantId::parse("acme").unwrap(),
                "key-00000001",
                fp,
                now,
                |tx| {
                    tx.use_nonce(Uuid::nil(), "side-effect-00001", now)?;
                    if refuse {
                        return Err(Refusal::new(ErrorCode::InsufficientBalance, "no").into());
                    }
                    Ok(StoredResponse {
                        status: 201,
                        body: b"{\"ok\":true}".to_vec(),
                    })
                },
                |r| StoredResponse {
                    status: 409,
                    body: r.code.as_str().as_bytes().to_vec(),
                },
            )
        })
    };
    // A stored business refusal: the side effect rolled back, the refusal is kept.
    let first = run([1; 32], true).await.unwrap();
    assert_eq!(
        first,
        Outcome::Executed(StoredResponse {
            status: 409,
            body: b"INSUFFICIENT_BALANCE".to_vec()
        })
    );
    let replay = run([1; 32], false).await.unwrap();
    assert_eq!(
        replay,
        Outcome::Replayed(StoredResponse {
            status: 409,
            body: b"INSUFFICIENT_BALANCE".to_vec()
        })
    );
    let other = run([2; 32], false).await.unwrap_err();
    assert!(matches!(other, CoreError::Refused(r) if r.code == ErrorCode::IdempotencyConflict));
    let unused = write(&store, move |tx| {
        Ok(tx.use_nonce(Uuid::nil(), "side-effect-00001", now)?)
    });
    assert!(
        unused.await.unwrap(),
        "the refused command's write was rolled back"
    );
}

#[tokio::test]
async fn second_factor_attempts_round_trip_and_reservations_are_atomic() {
    use custody_core::auth::second_factor::{self, Attempts, Verdict};
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir, 3, StoreOptions::default()));
    let mut c = plain_credential("ck_sf");
    c.pin_hash = Some(Secret::new("$argon2id$not-checked-here".into()));
    let c2 = c.seal(&vault(7));
    write(store.as_ref(), move |tx| Ok(tx.insert_credential(&c2)?))
        .await
        .unwrap();
    let id = c.id;
    let fresh = write(store.as_ref(), move |tx| Ok(tx.second_factor_attempts(id)?))
        .await
        .unwrap();
    assert_eq!(fresh, Attempts::default());

    // Sixty reservations race through the writer: exactly five are granted.
    let now = Timestamp::from_unix_millis(5_000_000);
    let tasks: Vec<_> = (0..60)
        .map(|_| {
            let (store, c) = (Arc::clone(&store), c.clone());
            tokio::spawn(async move {
                write(store.as_ref(), move |tx| {
                    second_factor::reserve(tx, &c, now)
                })
                .await
            })
        })
        .collect();
    let mut granted = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => granted += 1,
            Err(CoreError::Refused(r)) => assert_eq!(r.code, ErrorCode::RateLimited),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(granted, 5);

    for _ in 0..5 {
        let passed = write(store.as_ref(), move |tx| {
            Ok(second_factor::record(tx, id, Verdict::Failed, now)?)
        })
        .await
        .unwrap();
        assert!(!passed);
    }
    let stored = write(store.as_ref(), move |tx| Ok(tx.second_factor_attempts(id)?))
        .await
        .unwrap();
    assert_eq!(stored.failures, 5);
    assert_eq!(stored.in_flight, 0);
    assert_eq!(stored.in_flight_until, None);
    assert_eq!(
        stored.locked_until,
        Some(now.plus_seconds(second_factor::LOCKOUT_S))
    );
}

/// The triggers that keep readers' kept wallets true are in the latest schema: a migration that
/// rebuilds `wallets` or `wallet_addresses` drops them with the table.
#[tokio::test]
async fn the_wallets_version_triggers_are_in_the_latest_schema() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(&dir, 1, StoreOptions::default()));
    let conn = rusqlite::Connection::open(dir.path().join("custody.db")).unwrap();
    let triggers: Vec<(String, String)> = conn
        .prepare(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' \
             AND name LIKE 'wallets_version_%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected: Vec<(String, String)> = [
        ("wallets_version_address_delete", "wallet_addresses"),
        ("wallets_version_address_insert", "wallet_addresses"),
        ("wallets_version_address_replace", "wallet_addresses"),
        ("wallets_version_address_update", "wallet_addresses"),
        ("wallets_version_wallet_delete", "wallets"),
        ("wallets_version_wallet_replace", "wallets"),
        ("wallets_version_wallet_update", "wallets"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(triggers, expected);
}

#[tokio::test]
async fn reopening_keeps_data_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir, 1, StoreOptions::default());
        let c = credential("ck_two");
        write(&store, move |tx| Ok(tx.insert_credential(&c)?))
            .await
            .unwrap();
    }
    let store = open(&dir, 1, StoreOptions::default());
    let all = read(&store, |tx| Ok(tx.list_credentials()?)).await.unwrap();
    assert_eq!(all.len(), 1);
    // A read job gets a `ReadTx`, which has no write method; the reader connections are
    // `query_only` as well, in case a repository's read method ever wrote.
}

#[cfg(unix)]
#[tokio::test]
async fn the_database_files_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1, StoreOptions::default());
    write(&store, |tx| {
        Ok(tx.use_nonce(
            Uuid::nil(),
            "perm-nonce-000001",
            Timestamp::from_unix_millis(1),
        )?)
    })
    .await
    .unwrap();
    for name in ["custody.db", "custody.db-wal", "custody.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{name}");
    }
}

/// The query plan SQLite makes for `sql` with `args`, its steps joined by "; ".
pub(crate) fn query_plan(conn: &Connection, sql: &str, args: impl rusqlite::Params) -> String {
    conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap()
        .query_map(args, |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
        .join("; ")
}

/// Every index of the outbox is written by each event (two per internal transfer), so the
/// outbox keeps only those its queries read: the deliverer's per-tenant claim and the
/// newest-first listing, each of which SQLite must still plan through its index.
#[tokio::test]
async fn the_outbox_keeps_only_the_indexes_its_queries_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1, StoreOptions::default());
    store.close();
    let conn = Connection::open(dir.path().join("custody.db")).unwrap();
    let indexes: BTreeSet<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'outbox'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected: BTreeSet<String> = [
        "outbox_claimed",
        "outbox_by_time",
        "outbox_due_by_tenant",
        "sqlite_autoindex_outbox_1",
    ]
    .map(String::from)
    .into();
    assert_eq!(indexes, expected);
    let plan = |sql: &str, args: &[&dyn rusqlite::ToSql]| query_plan(&conn, sql, args);
    let claim = plan(
        "SELECT rowid, next_attempt_at FROM outbox \
         WHERE tenant = 'acme' AND status = 'pending' AND next_attempt_at <= 5 \
           AND (leased_until IS NULL OR leased_until <= 5) \
         ORDER BY next_attempt_at, rowid LIMIT 10",
        &[],
    );
    assert!(claim.contains("outbox_due_by_tenant"), "{claim}");
    let page = plan(
        &format!(
            "SELECT id FROM outbox WHERE {}",
            custody_store_sql::PAGE_CLAUSE
        ),
        &[&10_i64, &None::<i64>, &None::<String>],
    );
    // The ascending index (0027), scanned backwards: no sort.
    assert!(page.contains("outbox_by_time"), "{page}");
    assert!(!page.contains("TEMP B-TREE"), "{page}");
    // The metrics' and the dashboard's count by status: a covering scan in index order, no sort
    // of every row (the outbox is never pruned).
    let counts = plan(
        "SELECT status, COUNT(*) FROM outbox GROUP BY tenant, status",
        &[],
    );
    assert!(counts.contains("COVERING INDEX"), "{counts}");
    assert!(!counts.contains("TEMP B-TREE"), "{counts}");
}

/// A table of `pages` pages (one row per page), every row changed once inside an open
/// transaction, so that a later statement changing every row again must journal them all.
fn table_changed_in_a_transaction(conn: &Connection, pages: usize) {
    conn.execute_batch(
        "CREATE TABLE big (id INTEGER PRIMARY KEY, pad BLOB NOT NULL CHECK (length(pad) > 0));",
    )
    .unwrap();
    conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
         INSERT INTO big SELECT i, randomblob(3000) FROM n",
        [pages],
    )
    .unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE big SET pad = randomblob(3000);")
        .unwrap();
}

/// Journals of a statement or a savepoint larger than SQLite's spill size work, on the
/// migrating connection (temporary files) and on the writer's (memory). SQLite copies a
/// journal that outgrows the spill size to a file in chunks of that size, one write call each,
/// and its Unix VFS masks each write's length to 17 bits: this workspace once built SQLite with
/// a 1 MiB spill size, and every journal past 1 MiB failed with "database or disk is full" (a
/// migration rebuilding a large table, a job changing 256 or more existing pages).
#[test]
fn journals_past_the_spill_size_do_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        sub_journal_spill_bytes(&Connection::open_in_memory().unwrap()).unwrap() <= UNIX_WRITE_MAX
    );
    // 600 pages of 4 KiB: 2.4 MiB of journal.
    let temp_store =
        |c: &Connection| -> i64 { c.query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap() };
    let migrating = Connection::open(dir.path().join("migrating.db")).unwrap();
    configure(&migrating, 1_000).unwrap();
    assert_eq!(temp_store(&migrating), 0, "migrations use temporary files");
    table_changed_in_a_transaction(&migrating, 600);
    migrating
        .execute_batch("SAVEPOINT step; UPDATE big SET pad = randomblob(2900); RELEASE step;")
        .expect("a savepoint journal of 2.4 MiB on the migrating connection");
    migrating.execute_batch("COMMIT").unwrap();

    let writer = Connection::open(dir.path().join("writer.db")).unwrap();
    configure(&writer, 1_000).unwrap();
    configure_writer(&writer).unwrap();
    assert_eq!(
        temp_store(&writer),
        2,
        "the writer keeps its journals in memory"
    );
    table_changed_in_a_transaction(&writer, 600);
    writer
        .execute_batch("SAVEPOINT job; UPDATE big SET pad = randomblob(2900);")
        .expect("a savepoint journal of 2.4 MiB on the writer");
    writer
        .execute_batch("ROLLBACK TO job; RELEASE job; COMMIT;")
        .unwrap();
    let pads: i64 = writer
        .query_row(
            "SELECT COUNT(*) FROM big WHERE length(pad) = 3000",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        pads, 600,
        "the savepoint rolled back to the transaction's own changes"
    );
}

#[test]
fn this_build_gives_each_connection_its_own_page_cache() {
    // .cargo/config.toml builds SQLite without SQLITE_ENABLE_MEMORY_MANAGEMENT (libsqlite3-sys
    // sets it): with it, every connection's page cache shares one group under a process-wide
    // mutex, which the runtime's readers and the writer contended for at every page.
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("t.db")).unwrap();
    let mut options = conn.prepare("PRAGMA compile_options").unwrap();
    let options: Vec<String> = options
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
        "{options:?}"
    );
    assert!(
        !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
        "{options:?}"
    );
}
