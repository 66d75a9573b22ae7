//! Numbered schema migrations (`migrations/NNNN_name.sql`), applied at start. All pending ones
//! run in one transaction that first takes an advisory lock on the schema's name, so two
//! instances starting together do not both migrate: the second waits, then finds nothing to do.
//! PostgreSQL's DDL is transactional, so a crash leaves the schema at a whole version.

use postgres::Client;

/// In order; never edit one that has shipped, add a new one.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_schema", include_str!("../migrations/0001_schema.sql")),
    (
        "0002_rate_windows",
        include_str!("../migrations/0002_rate_windows.sql"),
    ),
    (
        "0003_seed_generations",
        include_str!("../migrations/0003_seed_generations.sql"),
    ),
    (
        "0004_nonce_fence",
        include_str!("../migrations/0004_nonce_fence.sql"),
    ),
    (
        "0005_deployment",
        include_str!("../migrations/0005_deployment.sql"),
    ),
    (
        "0006_hot_wallets",
        include_str!("../migrations/0006_hot_wallets.sql"),
    ),
];

pub fn latest_version() -> usize {
    MIGRATIONS.len()
}

/// Applies every migration not yet applied; answers how many. Refuses a database newer than
/// this binary.
pub fn migrate(client: &mut Client) -> Result<usize, String> {
    let mut tx = client.transaction().map_err(|e| e.to_string())?;
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('custody-migrations:' || current_schema(), 0));
         CREATE TABLE IF NOT EXISTS custody_schema_migrations (
             version    BIGINT PRIMARY KEY,
             name       TEXT   NOT NULL,
             applied_at BIGINT NOT NULL
         );",
    )
    .map_err(|e| format!("cannot lock the schema for migrations: {e}"))?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM custody_schema_migrations",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .map_err(|e| e.to_string())?;
    let current = usize::try_from(current).map_err(|e| e.to_string())?;
    if current > MIGRATIONS.len() {
        return Err(format!(
            "the database is at schema version {current}, newer than this binary ({})",
            MIGRATIONS.len()
        ));
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.batch_execute(sql)
            .map_err(|e| format!("migration {name}: {e}"))?;
        tx.execute(
            "INSERT INTO custody_schema_migrations (version, name, applied_at) \
             VALUES ($1, $2, (extract(epoch from clock_timestamp()) * 1000)::BIGINT)",
            &[&i64::try_from(i + 1).unwrap_or(i64::MAX), name],
        )
        .map_err(|e| e.to_string())?;
    }
    tx.commit().map_err(|e| e.to_string())?;
    Ok(MIGRATIONS.len() - current)
}
