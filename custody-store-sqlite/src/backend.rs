//! rusqlite behind the shared repositories' [`Backend`]: statements through the connection's
//! statement cache, parameters bound from borrowed values, rows read in place.

use custody_core::error::PortError;
use custody_store_sql::sql::{self, Backend, Dialect, Row, RowSource, Value};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{CachedStatement, Connection};

/// How many prepared statements a connection keeps. Every repository's statements fit, so a
/// request never compiles SQL after the first use of its statements (rusqlite keeps 16).
pub(crate) const STATEMENT_CACHE: usize = 512;

/// One connection as the repositories see it. Statements go through the connection's cache,
/// so SQL is compiled once per connection rather than on every call (compiling costs more than
/// running most of these statements).
///
/// `in_tx` is set in the writer's transaction: once SQLite has rolled that transaction back on
/// its own (an I/O error, a full disk, `RAISE(ROLLBACK)`), every further statement is refused,
/// so a job that ignored the failing statement's error cannot go on writing outside any
/// transaction, where each statement would commit by itself.
pub(crate) struct SqliteDb<'c> {
    conn: &'c Connection,
    in_tx: bool,
}

impl<'c> SqliteDb<'c> {
    /// The writer's transaction.
    pub(crate) fn in_transaction(conn: &'c Connection) -> Self {
        SqliteDb { conn, in_tx: true }
    }

    /// A reader's snapshot: held by a statement, not by BEGIN, so SQLite reports it in
    /// autocommit mode, and it cannot write anyway (query_only).
    pub(crate) fn in_snapshot(conn: &'c Connection) -> Self {
        SqliteDb { conn, in_tx: false }
    }

    fn statement(&self, sql: &str) -> sql::Result<CachedStatement<'c>> {
        if self.in_tx && self.conn.is_autocommit() {
            return Err(sql::Error::Db {
                message: "sqlite: the store transaction was rolled back by SQLite; nothing more \
                          runs in it"
                    .into(),
                transient: false,
            });
        }
        self.conn.prepare_cached(sql).map_err(sql_err)
    }

    fn bound(&self, sql: &str, args: &[Value<'_>]) -> sql::Result<CachedStatement<'c>> {
        let mut stmt = self.statement(sql)?;
        let expected = stmt.parameter_count();
        if expected != args.len() {
            return Err(sql::Error::Conversion(format!(
                "the statement takes {expected} parameters, {} were given",
                args.len()
            )));
        }
        for (i, value) in args.iter().enumerate() {
            let value = match *value {
                Value::Null => ValueRef::Null,
                Value::Int(n) => ValueRef::Integer(n),
                Value::Text(s) => ValueRef::Text(s.as_bytes()),
                Value::Blob(b) => ValueRef::Blob(b),
                Value::OutOfRange(n) => {
                    return Err(sql::Error::Conversion(format!(
                        "{n} does not fit an INTEGER (at most {})",
                        i64::MAX
                    )))
                }
            };
            stmt.raw_bind_parameter(i + 1, ToSqlOutput::Borrowed(value))
                .map_err(sql_err)?;
        }
        Ok(stmt)
    }
}

impl Backend for SqliteDb<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&self, sql: &str, args: &[Value<'_>]) -> sql::Result<usize> {
        self.bound(sql, args)?.raw_execute().map_err(sql_err)
    }

    fn query(
        &self,
        sql: &str,
        args: &[Value<'_>],
        each: &mut dyn FnMut(&Row<'_>) -> sql::Result<bool>,
    ) -> sql::Result<()> {
        let mut stmt = self.bound(sql, args)?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next().map_err(sql_err)? {
            if !each(&Row::new(&SqliteRow(row)))? {
                break;
            }
        }
        Ok(())
    }

    fn run(&self, sql: &str) -> sql::Result<()> {
        self.statement(sql)?
            .execute([])
            .map(|_| ())
            .map_err(sql_err)
    }

    fn last_insert_rowid(&self) -> Option<i64> {
        Some(self.conn.last_insert_rowid())
    }
}

struct SqliteRow<'a, 'r>(&'a rusqlite::Row<'r>);

impl RowSource for SqliteRow<'_, '_> {
    fn column(&self, idx: usize) -> sql::Result<Value<'_>> {
        Ok(match self.0.get_ref(idx).map_err(sql_err)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Int(n),
            ValueRef::Text(b) => Value::Text(
                std::str::from_utf8(b)
                    .map_err(|e| sql::Error::Conversion(format!("column {idx}: {e}")))?,
            ),
            ValueRef::Blob(b) => Value::Blob(b),
            ValueRef::Real(f) => {
                return Err(sql::Error::Conversion(format!(
                    "column {idx} is a REAL ({f}), which no repository reads"
                )))
            }
        })
    }

    fn column_index(&self, name: &str) -> sql::Result<usize> {
        self.0.as_ref().column_index(name).map_err(sql_err)
    }
}

/// Whether a SQLite error may pass on a retry: busy/locked and I/O conditions may; the rest
/// will not get better by retrying.
fn transient(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode as C;
    matches!(
        e.sqlite_error_code(),
        Some(C::DatabaseBusy | C::DatabaseLocked | C::SystemIoFailure | C::DiskFull)
    )
}

fn sql_err(e: rusqlite::Error) -> sql::Error {
    sql::Error::Db {
        transient: transient(&e),
        message: format!("sqlite: {e}"),
    }
}

/// Maps a SQLite error of the store's own statements (BEGIN, COMMIT, the snapshot's) to a port
/// error.
pub(crate) fn db_err(e: rusqlite::Error) -> PortError {
    custody_store_sql::db_err(sql_err(e))
}
