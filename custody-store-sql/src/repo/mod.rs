//! One file per repository trait of the core, all implemented on [`crate::tx::SqlTx`].

mod alerts_controls;
mod audit;
pub(crate) mod credentials;
pub(crate) mod deposits;
mod hot_wallets;
mod idempotency;
mod ledger;
mod outbox;
mod outgoing;
mod reconciliations;
mod seeds;
mod swaps;
mod sweeps;
mod wallet_migrations;
mod wallets;
mod webhooks;
mod withdrawals;

use custody_core::error::PortError;
use custody_core::time::Timestamp;
use uuid::Uuid;

pub(crate) fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

pub(crate) fn parse_uuid(s: &str) -> Result<Uuid, PortError> {
    Uuid::parse_str(s).map_err(|e| PortError::permanent("store", format!("bad uuid {s:?}: {e}")))
}

pub(crate) fn amount(s: &str) -> Result<custody_core::Amount, PortError> {
    custody_core::Amount::parse_units(s)
        .map_err(|e| PortError::permanent("store", format!("bad amount {s:?}: {e}")))
}

pub(crate) fn bad(what: &str, value: &str) -> PortError {
    PortError::permanent("store", format!("bad stored {what} {value:?}"))
}

/// The arguments of [`PAGE_CLAUSE`]: the limit, then the cursor row's `created_at` and `id`.
pub(crate) type PageArgs = (i64, Option<i64>, Option<String>);

/// The keyset of an admin page over `table`, whose rows have `id` (TEXT, a lowercase UUID, so
/// text order is UUID order) and `created_at` (unix ms): the three arguments of [`PAGE_CLAUSE`]
/// (limit, the cursor row's `created_at` and `id`, both NULL on the first page), or `None` when
/// `starting_after` names no row of the table.
pub(crate) fn page_args(
    conn: crate::sql::Db<'_>,
    table: &str,
    page: custody_core::page::Page,
) -> Result<Option<PageArgs>, PortError> {
    use crate::sql::OptionalExtension;
    let limit = i64::try_from(page.limit).unwrap_or(i64::MAX);
    let Some(after) = page.starting_after else {
        return Ok(Some((limit, None, None)));
    };
    let id = after.to_string();
    let at: Option<i64> = conn
        .prepare_cached(&format!("SELECT created_at FROM {table} WHERE id = ?1"))
        .map_err(crate::tx::db_err)?
        .query_row([&id], |r| r.get(0))
        .optional()
        .map_err(crate::tx::db_err)?;
    Ok(at.map(|at| (limit, Some(at), Some(id))))
}

/// The condition and order of an admin page, over the arguments of `page_args` as ?1, ?2, ?3:
/// rows strictly below the cursor in (`created_at`, `id`) descending order. Written as an OR
/// rather than a row value so that SQLite can use the `(created_at, id)` indexes.
pub const PAGE_CLAUSE: &str =
    "(CAST(?2 AS BIGINT) IS NULL OR created_at < ?2 OR (created_at = ?2 AND id < ?3)) \
     ORDER BY created_at DESC, id DESC LIMIT ?1";
