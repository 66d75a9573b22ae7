//! One `postgres::Client` behind the shared repositories' [`Backend`]: prepared statements
//! cached per connection, parameters converted from borrowed values, rows read in place.
//!
//! What it adds to the client:
//! - `?N` placeholders become PostgreSQL's `$N` (outside quoted text), once per statement text.
//! - Parameters are dynamically typed values ([`Value`]) converted to whatever type PostgreSQL
//!   inferred for the placeholder, and columns are read by the column's actual type, so a
//!   BIGINT column reads as `i64`, `u32` or `bool` alike, as in SQLite.
//! - Every error is inspected: a serialization failure or deadlock (40001, 40P01) marks the
//!   connection, so the store runs the whole job again even when the job turned the error into
//!   something else.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error as StdError;

use custody_store_sql::sql::{self, Backend, Dialect, Row, RowSource, Value};
use postgres::error::SqlState;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::{Client, Statement};

/// A statement error, from the server or from converting a value.
#[derive(Debug)]
pub enum Error {
    Db(postgres::Error),
    /// `query_row` found no row (`optional()` turns it into `None`).
    QueryReturnedNoRows,
    Conversion(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Db(e) => match e.as_db_error() {
                Some(db) => write!(
                    f,
                    "{}: {} ({})",
                    db.severity(),
                    db.message(),
                    db.code().code()
                ),
                // A value the client could not pass says why only in its source.
                None => match e.source() {
                    Some(why) => write!(f, "{e}: {why}"),
                    None => write!(f, "{e}"),
                },
            },
            Error::QueryReturnedNoRows => f.write_str("query returned no rows"),
            Error::Conversion(m) => f.write_str(m),
        }
    }
}

impl StdError for Error {}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        Error::Db(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn code(&self) -> Option<&SqlState> {
        match self {
            Error::Db(e) => e.code(),
            _ => None,
        }
    }

    /// The transaction lost a conflict with another one; run the job again.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self.code(),
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        )
    }

    /// The connection, not the statement, failed (closed, I/O, server shutting down).
    pub fn is_connection(&self) -> bool {
        match self {
            Error::Db(e) => {
                e.is_closed()
                    || e.source().is_some_and(|s| s.is::<std::io::Error>())
                    || matches!(e.code(), Some(c) if c.code().starts_with("08") || c.code().starts_with("57P"))
            }
            _ => false,
        }
    }
}

/// A parameter as the client passes it.
#[derive(Debug)]
struct Param<'a>(Value<'a>);

fn type_error(value: &Value<'_>, ty: &Type) -> Box<dyn StdError + Sync + Send> {
    format!("cannot pass {value:?} as {ty}").into()
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let value = &self.0;
        match *value {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => i.to_string().to_sql(ty, out),
                _ => Err(type_error(value, ty)),
            },
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    s.to_sql(ty, out)
                }
                _ => Err(type_error(value, ty)),
            },
            Value::OutOfRange(n) => {
                Err(format!("{n} does not fit a BIGINT (at most {})", i64::MAX).into())
            }
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => Err(type_error(value, ty)),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Runs `f` with `args` as the client takes parameters.
fn with_params<T>(args: &[Value<'_>], f: impl FnOnce(&[&(dyn ToSql + Sync)]) -> T) -> T {
    let params: Vec<Param<'_>> = args.iter().map(|v| Param(*v)).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    f(&refs)
}

/// Rewrites `?N` placeholders as `$N`, leaving quoted text and identifiers alone.
pub fn translate(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    out.push(c);
                }
                '?' => out.push('$'),
                _ => out.push(c),
            },
        }
    }
    out
}

/// One row as the client read it.
struct PgRow<'r>(&'r postgres::Row);

impl PgRow<'_> {
    fn read(&self, idx: usize) -> std::result::Result<Value<'_>, postgres::Error> {
        let row = self.0;
        let Some(column) = row.columns().get(idx) else {
            return Ok(Value::Null);
        };
        let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
        Ok(match *column.type_() {
            Type::INT8 => int(row.try_get::<_, Option<i64>>(idx)?),
            Type::INT4 => int(row.try_get::<_, Option<i32>>(idx)?.map(i64::from)),
            Type::INT2 => int(row.try_get::<_, Option<i16>>(idx)?.map(i64::from)),
            Type::BOOL => int(row.try_get::<_, Option<bool>>(idx)?.map(i64::from)),
            Type::BYTEA => row
                .try_get::<_, Option<&[u8]>>(idx)?
                .map_or(Value::Null, Value::Blob),
            _ => row
                .try_get::<_, Option<&str>>(idx)?
                .map_or(Value::Null, Value::Text),
        })
    }
}

impl RowSource for PgRow<'_> {
    fn column(&self, idx: usize) -> sql::Result<Value<'_>> {
        if idx >= self.0.len() {
            return Err(sql::Error::Conversion(format!("no column {idx}")));
        }
        self.read(idx).map_err(|e| {
            let ty = self.0.columns().get(idx).map(|c| c.type_().to_string());
            sql::Error::Conversion(format!("column {idx} of type {ty:?} cannot be read: {e}"))
        })
    }

    fn column_index(&self, name: &str) -> sql::Result<usize> {
        self.0
            .columns()
            .iter()
            .position(|c| c.name() == name)
            .ok_or_else(|| sql::Error::Conversion(format!("no column {name:?}")))
    }
}

impl From<Error> for sql::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Conversion(m) => sql::Error::Conversion(m),
            e => sql::Error::Db {
                transient: e.is_conflict() || e.is_connection(),
                message: format!("postgres: {e}"),
            },
        }
    }
}

/// One connection, with its statement cache and what the current transaction ran into.
pub struct Conn {
    client: RefCell<Client>,
    cache: RefCell<HashMap<String, Statement>>,
    conflict: Cell<bool>,
}

impl Conn {
    pub fn new(client: Client) -> Self {
        Conn {
            client: RefCell::new(client),
            cache: RefCell::new(HashMap::new()),
            conflict: Cell::new(false),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }

    /// Whether a statement of the current transaction lost a conflict; clears the mark.
    pub fn take_conflict(&self) -> bool {
        self.conflict.replace(false)
    }

    fn note<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if e.is_conflict() {
                self.conflict.set(true);
            }
        }
        r
    }

    /// Runs statements without parameters (transaction control, savepoints, migrations).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        let r = self
            .client
            .borrow_mut()
            .batch_execute(sql)
            .map_err(Error::from);
        self.note(r)
    }

    /// Runs `begin` (a `BEGIN ...`) and takes the transaction's id in the same round trip: the
    /// id is what tells, after a connection lost during `COMMIT`, whether it committed.
    pub fn begin_with_xid(&self, begin: &str) -> Result<i64> {
        let r = self
            .client
            .borrow_mut()
            .simple_query(&format!("{begin}; SELECT txid_current()"))
            .map_err(Error::from);
        let messages = self.note(r)?;
        messages
            .iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => row.get(0),
                _ => None,
            })
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Conversion("txid_current() answered no number".into()))
    }

    /// The server process serving this connection (tests terminate it to lose the connection).
    #[cfg(feature = "test-utils")]
    pub fn backend_pid(&self) -> Result<i32> {
        let r = self
            .client
            .borrow_mut()
            .query_one("SELECT pg_backend_pid()", &[])
            .map_err(Error::from);
        Ok(self.note(r)?.get(0))
    }

    fn statement(&self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.cache.borrow().get(sql) {
            return Ok(s.clone());
        }
        let r = self
            .client
            .borrow_mut()
            .prepare(&translate(sql))
            .map_err(Error::from);
        let stmt = self.note(r)?;
        self.cache.borrow_mut().insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    fn rows(&self, sql: &str, args: &[Value<'_>]) -> Result<Vec<postgres::Row>> {
        let stmt = self.statement(sql)?;
        let r = with_params(args, |refs| self.client.borrow_mut().query(&stmt, refs))
            .map_err(Error::from);
        self.note(r)
    }
}

impl Backend for Conn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&self, sql: &str, args: &[Value<'_>]) -> sql::Result<usize> {
        let stmt = self.statement(sql)?;
        let r = with_params(args, |refs| self.client.borrow_mut().execute(&stmt, refs))
            .map_err(Error::from);
        let n = self.note(r)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn query(
        &self,
        sql: &str,
        args: &[Value<'_>],
        each: &mut dyn FnMut(&Row<'_>) -> sql::Result<bool>,
    ) -> sql::Result<()> {
        for row in &self.rows(sql, args)? {
            if !each(&Row::new(&PgRow(row)))? {
                break;
            }
        }
        Ok(())
    }

    fn run(&self, sql: &str) -> sql::Result<()> {
        Ok(self.execute_batch(sql)?)
    }
}

#[cfg(test)]
mod tests {
    use super::{translate, Param};
    use custody_store_sql::sql::ToValue;
    use postgres::types::{ToSql, Type};

    #[test]
    fn integers_above_i64_max_are_refused_not_clamped() {
        let mut out = bytes::BytesMut::new();
        let refused = Param(u64::MAX.to_value()).to_sql(&Type::INT8, &mut out);
        assert!(refused.is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn placeholders_become_dollars_outside_quotes() {
        assert_eq!(
            translate("SELECT '?1', \"a?\" FROM t WHERE a = ?1 AND b = ?12"),
            "SELECT '?1', \"a?\" FROM t WHERE a = $1 AND b = $12"
        );
    }
}
