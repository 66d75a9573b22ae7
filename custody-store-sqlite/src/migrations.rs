//! Versioned schema migrations. `PRAGMA user_version` holds the number of migrations applied;
//! each one runs in its own transaction together with the version bump, so a crash leaves the
//! schema at a whole version.

use rusqlite::Connection;

/// In order; never edit one that has shipped, add a new one.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_foundation",
        include_str!("../migrations/0001_foundation.sql"),
    ),
    (
        "0002_ledger_wallets",
        include_str!("../migrations/0002_ledger_wallets.sql"),
    ),
    (
        "0003_webhooks",
        include_str!("../migrations/0003_webhooks.sql"),
    ),
    (
        "0004_deposits",
        include_str!("../migrations/0004_deposits.sql"),
    ),
    (
        "0005_alerts_controls",
        include_str!("../migrations/0005_alerts_controls.sql"),
    ),
    (
        "0006_deposit_shortfall",
        include_str!("../migrations/0006_deposit_shortfall.sql"),
    ),
    (
        "0007_second_factor_attempts",
        include_str!("../migrations/0007_second_factor_attempts.sql"),
    ),
    (
        "0008_outgoing",
        include_str!("../migrations/0008_outgoing.sql"),
    ),
    (
        "0009_withdrawals",
        include_str!("../migrations/0009_withdrawals.sql"),
    ),
    (
        "0010_withdrawals_newest_first",
        include_str!("../migrations/0010_withdrawals_newest_first.sql"),
    ),
    ("0011_swaps", include_str!("../migrations/0011_swaps.sql")),
    ("0012_sweeps", include_str!("../migrations/0012_sweeps.sql")),
    (
        "0013_outgoing_order",
        include_str!("../migrations/0013_outgoing_order.sql"),
    ),
    (
        "0014_reconciliations",
        include_str!("../migrations/0014_reconciliations.sql"),
    ),
    (
        "0015_wallet_migrations",
        include_str!("../migrations/0015_wallet_migrations.sql"),
    ),
    (
        "0016_alert_acks_and_pages",
        include_str!("../migrations/0016_alert_acks_and_pages.sql"),
    ),
    // 0017 was never used: the number was reserved for a branch that needed no migration.
    (
        "0018_seed_generations",
        include_str!("../migrations/0018_seed_generations.sql"),
    ),
    (
        "0019_nonce_fence_credentials_version",
        include_str!("../migrations/0019_nonce_fence_credentials_version.sql"),
    ),
    (
        "0020_outbox_unused_indexes",
        include_str!("../migrations/0020_outbox_unused_indexes.sql"),
    ),
    (
        "0021_idempotency_rowid",
        include_str!("../migrations/0021_idempotency_rowid.sql"),
    ),
    (
        "0022_nonce_log",
        include_str!("../migrations/0022_nonce_log.sql"),
    ),
    // 0023's triggers keep readers' kept wallets true (`custody_store_sql::wallet_cache`): a migration that
    // rebuilds `wallets` or `wallet_addresses` (which drops their triggers) must create them
    // again and raise `wallets_version`.
    (
        "0023_wallets_version",
        include_str!("../migrations/0023_wallets_version.sql"),
    ),
    (
        "0024_check_without_in_lists",
        include_str!("../migrations/0024_check_without_in_lists.sql"),
    ),
    (
        "0025_deposits_pending_by_user",
        include_str!("../migrations/0025_deposits_pending_by_user.sql"),
    ),
    (
        "0026_ledger_entries_by_position",
        include_str!("../migrations/0026_ledger_entries_by_position.sql"),
    ),
    (
        "0027_hot_time_indexes_ascending",
        include_str!("../migrations/0027_hot_time_indexes_ascending.sql"),
    ),
    (
        "0028_hot_wallets",
        include_str!("../migrations/0028_hot_wallets.sql"),
    ),
];

pub fn latest_version() -> usize {
    MIGRATIONS.len()
}

/// Applies every migration not yet applied. Refuses a database newer than this binary.
pub fn migrate(conn: &mut Connection) -> Result<usize, String> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Applies the migrations not yet applied up to version `target` (tests stop early to put rows
/// in an older schema).
fn migrate_to(conn: &mut Connection, target: usize) -> Result<usize, String> {
    let mut applied = 0;
    loop {
        // The version is read under the write lock (IMMEDIATE), in the transaction that applies
        // the next migration: two processes opening the file at once take turns, and the second
        // finds the first's work done instead of applying it again.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        let current: usize = tx
            .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .map_err(|e| e.to_string())
            .and_then(|v| usize::try_from(v).map_err(|e| e.to_string()))?;
        if current > MIGRATIONS.len() {
            return Err(format!(
                "the database is at schema version {current}, newer than this binary ({})",
                MIGRATIONS.len()
            ));
        }
        if current >= target {
            return Ok(applied);
        }
        let (name, sql) = MIGRATIONS[current];
        tx.execute_batch(sql)
            .map_err(|e| format!("migration {name}: {e}"))?;
        tx.pragma_update(
            None,
            "user_version",
            i64::try_from(current + 1).unwrap_or(i64::MAX),
        )
        .map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
        applied += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::query_plan as plan;

    /// A new database file in `dir`, migrated up to (not including) the migration `name`;
    /// returns it with that migration's position.
    fn before_migration(dir: &tempfile::TempDir, name: &str) -> (Connection, usize) {
        let mut conn = Connection::open(dir.path().join("custody.db")).unwrap();
        crate::configure(&conn, 1_000).unwrap();
        let before = MIGRATIONS.iter().position(|(n, _)| *n == name).unwrap();
        migrate_to(&mut conn, before).unwrap();
        assert_eq!(version(&conn), i64::try_from(before).unwrap());
        (conn, before)
    }

    fn version(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    }

    /// 0021 moves idempotency records into a rowid table: records stored before it are still
    /// found by (tenant, key), and the key stays unique.
    #[test]
    fn idempotency_records_survive_the_move_to_a_rowid_table() {
        let dir = tempfile::tempdir().unwrap();
        // Every migration before 0021: the records go into the WITHOUT ROWID table.
        let (mut conn, before) = before_migration(&dir, "0021_idempotency_rowid");
        let old_schema: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'idempotency'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(old_schema.contains("WITHOUT ROWID"), "{old_schema}");
        for (key, body) in [("key-0001", "first"), ("key-0002", "second")] {
            conn.execute(
                "INSERT INTO idempotency (tenant, key, fingerprint, status, body, created_at, \
                 expires_at) VALUES ('acme', ?1, x'01', 201, ?2, 5, 10)",
                rusqlite::params![key, body.as_bytes()],
            )
            .unwrap();
        }
        assert_eq!(migrate_to(&mut conn, before + 1).unwrap(), 1);
        let body: Vec<u8> = conn
            .query_row(
                "SELECT body FROM idempotency WHERE tenant = 'acme' AND key = 'key-0002'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(body, b"second");
        let again = conn.execute(
            "INSERT INTO idempotency (tenant, key, fingerprint, status, body, created_at, \
             expires_at) VALUES ('acme', 'key-0001', x'02', 201, x'00', 6, 11)",
            [],
        );
        assert!(again.is_err(), "(tenant, key) must stay unique");
        let without_rowid: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'idempotency' \
                 AND sql LIKE '%WITHOUT ROWID%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(without_rowid, 0);
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT body FROM idempotency WHERE tenant = 'a' AND key = 'b'",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("sqlite_autoindex_idempotency"), "{plan}");
    }

    /// 0026 keeps ledger entries in one b-tree keyed by (tx_seq, idx), without an index of
    /// their ids: entries written before it stay, in order, with their ids and history rows;
    /// the position stays unique; the reads' plans use the key and the history index.
    #[test]
    fn ledger_entries_move_to_a_table_keyed_by_position() {
        let dir = tempfile::tempdir().unwrap();
        let (mut conn, before) = before_migration(&dir, "0026_ledger_entries_by_position");
        conn.execute_batch(
            "INSERT INTO ledger_accounts VALUES ('u:acme:alice', '0', '5', '0', '0'),                  ('s:deposits', '5', '0', '0', '0');              INSERT INTO ledger_transactions (id, kind, reference_type, reference_id, created_at)                  VALUES ('tx-1', 'deposit', 'deposit', 'dep-1', 7);              INSERT INTO ledger_entries (id, tx_seq, idx, account_id, direction, phase, amount,                  balance_after, history_direction, tenant, external_user_id, network) VALUES                  ('entry-b', 1, 1, 'u:acme:alice', 'credit', 'posted', '5', '5', 'credit',                   'acme', 'alice', 'BSC'),                  ('entry-a', 1, 0, 's:deposits', 'debit', 'posted', '5', NULL, NULL, NULL,                   NULL, NULL);",
        )
        .unwrap();
        assert_eq!(migrate_to(&mut conn, before + 1).unwrap(), 1);
        let rows: Vec<(i64, String, String, Option<String>)> = conn
            .prepare("SELECT idx, id, account_id, tenant FROM ledger_entries WHERE tx_seq = 1")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                (0, "entry-a".into(), "s:deposits".into(), None),
                (
                    1,
                    "entry-b".into(),
                    "u:acme:alice".into(),
                    Some("acme".into())
                ),
            ]
        );
        let again = conn.execute(
            "INSERT INTO ledger_entries (id, tx_seq, idx, account_id, direction, phase, amount)              VALUES ('entry-c', 1, 1, 's:deposits', 'debit', 'posted', '1')",
            [],
        );
        assert!(again.is_err(), "(tx_seq, idx) must stay unique");
        let bad_direction = conn.execute(
            "INSERT INTO ledger_entries (id, tx_seq, idx, account_id, direction, phase, amount)              VALUES ('entry-d', 1, 2, 's:deposits', 'sideways', 'posted', '1')",
            [],
        );
        assert!(bad_direction.is_err(), "the direction CHECK stays");
        let indexes: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_entries'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(indexes, vec!["ledger_entries_history".to_string()]);
        let load = plan(
            &conn,
            "SELECT id FROM ledger_entries WHERE tx_seq = ?1 ORDER BY idx",
            [1],
        );
        assert!(load.contains("USING PRIMARY KEY"), "{load}");
        assert!(!load.contains("TEMP B-TREE"), "{load}");
        let history = plan(
            &conn,
            "SELECT e.id FROM ledger_entries e JOIN ledger_transactions t ON t.seq = e.tx_seq \
             WHERE e.tenant = ?1 AND e.external_user_id = ?2 AND e.network = ?3 \
             AND e.history_direction IS NOT NULL ORDER BY e.tx_seq DESC, e.idx DESC LIMIT 5",
            ["acme", "alice", "BSC"],
        );
        assert!(history.contains("ledger_entries_history"), "{history}");
        assert!(!history.contains("TEMP B-TREE"), "{history}");
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let orphans: i64 = conn
            .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(orphans, 0);
    }

    /// 0026 on a file whose entries outgrow SQLite's journal spill size many times over: the
    /// copy frees the old table's pages and the new index reuses them, so its statement journal
    /// spills to a temporary file (a build with a 1 MiB spill size failed here with "database or
    /// disk is full" from about 40,000 entries).
    #[test]
    fn ledger_entries_move_on_a_large_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut conn, before) = before_migration(&dir, "0026_ledger_entries_by_position");
        conn.execute_batch(
            "INSERT INTO ledger_accounts VALUES ('u:acme:alice', '0', '0', '0', '0'); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000) \
             INSERT INTO ledger_transactions (id, kind, reference_type, reference_id, created_at) \
                 SELECT 'tx-' || i, 'deposit', 'deposit', 'dep-' || i, i FROM n; \
             INSERT INTO ledger_entries (id, tx_seq, idx, account_id, direction, phase, amount, \
                 balance_after, history_direction, tenant, external_user_id, network) \
                 SELECT lower(hex(randomblob(16))), seq, k.idx, 'u:acme:alice', 'credit', 'posted', \
                     '1000000000000000000', '1000000000000000000', 'credit', 'acme', 'alice', 'BSC' \
                 FROM ledger_transactions, (SELECT 0 AS idx UNION ALL SELECT 1) k;",
        )
        .unwrap();
        let entries = |conn: &Connection| -> i64 {
            conn.query_row("SELECT COUNT(*) FROM ledger_entries", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(entries(&conn), 60_000);
        migrate(&mut conn).expect("0026 and the migrations after it");
        assert_eq!(entries(&conn), 60_000);
        assert_eq!(version(&conn), i64::try_from(MIGRATIONS.len()).unwrap());
        assert!(before < MIGRATIONS.len());
    }

    /// 0027: the listings of the two tables every transfer writes page through ascending
    /// indexes scanned backwards, with no sort.
    #[test]
    fn hot_listings_scan_ascending_indexes_backwards() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("custody.db")).unwrap();
        crate::configure(&conn, 1_000).unwrap();
        migrate(&mut conn).unwrap();
        for (table, index) in [
            ("outbox", "outbox_by_time"),
            ("ledger_transactions", "ledger_transactions_by_time"),
        ] {
            let page = plan(
                &conn,
                &format!(
                    "SELECT * FROM {table} WHERE {}",
                    custody_store_sql::PAGE_CLAUSE
                ),
                rusqlite::params![10_i64, 5_i64, "x"],
            );
            assert!(page.contains(index), "{table}: {page}");
            assert!(!page.contains("TEMP B-TREE"), "{table}: {page}");
            let sql: String = conn
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE name = ?1",
                    [index],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(!sql.contains("DESC"), "{sql}");
        }
    }

    /// Processes opening a new file at once take turns: each finds the others' migrations
    /// done, none applies one twice (0025's CREATE INDEX would refuse the second time).
    #[test]
    fn processes_migrating_at_once_take_turns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("custody.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "journal_mode", "WAL")
            .unwrap();
        let applied: Vec<usize> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut conn = Connection::open(&path).unwrap();
                        crate::configure(&conn, 10_000).unwrap();
                        migrate(&mut conn).unwrap()
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert_eq!(
            applied.iter().sum::<usize>(),
            MIGRATIONS.len(),
            "{applied:?}"
        );
        let conn = Connection::open(&path).unwrap();
        assert_eq!(version(&conn), i64::try_from(MIGRATIONS.len()).unwrap());
    }

    /// Whether running `sql` builds a temporary b-tree (`OpenEphemeral`), as `x IN (a, b, c)`
    /// does each time, in a CHECK constraint too.
    fn builds_a_temporary_btree(conn: &Connection, sql: &str) -> bool {
        let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let unbound = vec![rusqlite::types::Null; explain.parameter_count()];
        let opcodes: Vec<String> = explain
            .query_map(rusqlite::params_from_iter(unbound), |r| r.get(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        opcodes.iter().any(|op| op == "OpenEphemeral")
    }

    const OUTBOX_INSERT: &str = "INSERT INTO outbox (id, tenant, event_type, body, created_at, \
         next_attempt_at, updated_at, status) VALUES (?1, 'acme', 'balance.updated', x'7b7d', 5, 5, 5, ?2)";
    const HOLD_INSERT: &str = "INSERT INTO ledger_holds (id, purpose, user_account_id, \
         counter_account_id, amount, reference_type, reference_id, reserve_tx_id, created_at, state) \
         VALUES (?1, 'withdrawal', 'u', 'c', '1', 'withdrawal', 'r', 't', 5, ?2)";

    /// 0024 states the outbox's and the holds' CHECK constraints as comparisons, edited in place:
    /// rows written before it stay, the constraints still refuse what they refused, and an
    /// insert or a status change no longer builds a temporary b-tree for them.
    #[test]
    fn checks_on_statuses_refuse_the_same_values_without_a_temporary_btree() {
        let dir = tempfile::tempdir().unwrap();
        let (mut conn, before) = before_migration(&dir, "0024_check_without_in_lists");
        assert!(builds_a_temporary_btree(&conn, OUTBOX_INSERT));
        conn.execute(OUTBOX_INSERT, rusqlite::params!["event-old", "pending"])
            .unwrap();
        conn.execute(HOLD_INSERT, rusqlite::params!["hold-old", "pending"])
            .unwrap();
        assert_eq!(migrate_to(&mut conn, before + 1).unwrap(), 1);
        // The migrating connection reads the new definitions at once: no temporary b-tree, and
        // a column added afterwards lands in the right place of the edited text.
        assert!(!builds_a_temporary_btree(&conn, OUTBOX_INSERT));
        assert!(!builds_a_temporary_btree(&conn, HOLD_INSERT));
        conn.execute_batch(
            "ALTER TABLE outbox ADD COLUMN probe TEXT; ALTER TABLE ledger_holds ADD COLUMN probe TEXT",
        )
        .unwrap();
        drop(conn);

        let conn = Connection::open(dir.path().join("custody.db")).unwrap();
        crate::configure(&conn, 1_000).unwrap();
        for (table, check) in [
            (
                "outbox",
                "CHECK (status = 'pending' OR status = 'delivered' OR status = 'dead_lettered')",
            ),
            (
                "ledger_holds",
                "CHECK (state = 'pending' OR state = 'settled' OR state = 'released')",
            ),
        ] {
            let sql: String = conn
                .query_row(
                    "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                    [table],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(sql.contains(check), "{sql}");
            assert!(!sql.contains(" IN ("), "{sql}");
        }
        for sql in [
            OUTBOX_INSERT,
            HOLD_INSERT,
            "UPDATE outbox SET status = ?1 WHERE id = ?2",
            "UPDATE ledger_holds SET state = ?1 WHERE id = ?2",
        ] {
            assert!(!builds_a_temporary_btree(&conn, sql), "{sql}");
        }
        for (i, status) in ["pending", "delivered", "dead_lettered"].iter().enumerate() {
            conn.execute(
                OUTBOX_INSERT,
                rusqlite::params![format!("event-{i}"), status],
            )
            .unwrap();
        }
        for (i, state) in ["pending", "settled", "released"].iter().enumerate() {
            conn.execute(HOLD_INSERT, rusqlite::params![format!("hold-{i}"), state])
                .unwrap();
        }
        for bad in ["Pending", "", "failed"] {
            let e = conn
                .execute(OUTBOX_INSERT, rusqlite::params!["event-bad", bad])
                .unwrap_err();
            assert!(e.to_string().contains("CHECK constraint failed"), "{e}");
            assert!(conn
                .execute(HOLD_INSERT, rusqlite::params!["hold-bad", bad])
                .is_err());
            assert!(conn
                .execute(
                    "UPDATE outbox SET status = ?1 WHERE id = 'event-old'",
                    [bad]
                )
                .is_err());
        }
        let old: (String, String) = conn
            .query_row(
                "SELECT o.status, h.state FROM outbox o, ledger_holds h \
                 WHERE o.id = 'event-old' AND h.id = 'hold-old'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(old, ("pending".to_owned(), "pending".to_owned()));
        let integrity: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(integrity, "ok");
        let leftover: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'schema_cookie_0024'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(leftover, 0);
    }

    /// Nonces written before 0022, into the nonces table, come back at the next start with
    /// those logged after it: an upgrade reopens no replay.
    #[tokio::test]
    async fn nonces_used_before_the_log_existed_come_back_at_start() {
        use custody_core::ports::store::{read, write};
        use custody_core::time::Timestamp;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("custody.db");
        {
            let (conn, _) = before_migration(&dir, "0022_nonce_log");
            conn.execute(
                "INSERT INTO nonces (credential_id, nonce, expires_at) VALUES (?1, 'old-nonce-0001', 900000)",
                [uuid::Uuid::from_u128(1).to_string()],
            )
            .unwrap();
        }
        let store = crate::SqliteStore::open(&path, crate::StoreOptions::default()).unwrap();
        let s: &dyn custody_core::ports::store::Store = &store;
        write(s, |tx| {
            Ok(tx.log_nonce(
                uuid::Uuid::from_u128(1),
                "new-nonce-0001",
                Timestamp::from_unix_millis(950_000),
            )?)
        })
        .await
        .unwrap();
        let kept = read(s, |tx| {
            let mut kept = Vec::new();
            tx.visit_nonces(Timestamp::from_unix_millis(0), &mut |_, n, e| {
                kept.push((n.to_owned(), e.unix_millis()));
            })?;
            Ok(kept)
        })
        .await
        .unwrap();
        assert_eq!(
            kept,
            vec![
                ("old-nonce-0001".to_owned(), 900_000),
                ("new-nonce-0001".to_owned(), 950_000)
            ]
        );
    }
}
