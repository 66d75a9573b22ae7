//! A small statement layer over one `postgres::Client`, shaped like the part of rusqlite the
//! SQLite store's repositories use (`prepare_cached`, `query_row`, `query_map`, `optional`,
//! `params!`). The repositories of both stores then read alike, which is what keeps them
//! behaving alike: a method ported from one store to the other changes its SQL dialect, not its
//! logic.
//!
//! What it adds to the client:
//! - `?N` placeholders become PostgreSQL's `$N` (outside quoted text), once per statement text;
//!   prepared statements are cached per connection.
//! - Parameters are dynamically typed values ([`Value`]) converted to whatever type PostgreSQL
//!   inferred for the placeholder, and columns are read into Rust types by the column's actual
//!   type, so a BIGINT column reads as `i64`, `u32` or `bool` alike, as in SQLite.
//! - Every error is inspected: a serialization failure or deadlock (40001, 40P01) marks the
//!   connection, so the store runs the whole job again even when the job turned the error into
//!   something else.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error as StdError;

use postgres::error::SqlState;
use postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
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
                None => write!(f, "{e}"),
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

/// A dynamically typed parameter, as SQLite has them.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
    /// An unsigned integer above `i64::MAX`, which no BIGINT column holds: passing it fails the
    /// statement with a conversion error instead of storing another number.
    OutOfRange(u128),
}

/// What may be passed as a parameter.
pub trait ToValue {
    fn to_value(&self) -> Value;
}

macro_rules! int_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value {
                match i64::try_from(*self) {
                    Ok(i) => Value::Int(i),
                    // Only unsigned types get here, and none is wider than u128.
                    Err(_) => Value::OutOfRange(u128::try_from(*self).unwrap_or(u128::MAX)),
                }
            }
        }
    )*};
}
int_to_value!(i64, i32, i16, u8, u16, u32, u64, usize);

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

fn type_error(value: &Value, ty: &Type) -> Box<dyn StdError + Sync + Send> {
    format!("cannot pass {value:?} as {ty}").into()
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => i.to_string().to_sql(ty, out),
                _ => Err(type_error(self, ty)),
            },
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    s.to_sql(ty, out)
                }
                _ => Err(type_error(self, ty)),
            },
            Value::OutOfRange(n) => {
                Err(format!("{n} does not fit a BIGINT (at most {})", i64::MAX).into())
            }
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => Err(type_error(self, ty)),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The parameters of one statement.
pub trait Params {
    fn values(self) -> Vec<Value>;
}

impl Params for &[&dyn ToValue] {
    fn values(self) -> Vec<Value> {
        self.iter().map(|v| v.to_value()).collect()
    }
}

impl Params for [&dyn ToValue; 0] {
    fn values(self) -> Vec<Value> {
        Vec::new()
    }
}

macro_rules! array_params {
    ($($n:literal),*) => {$(
        impl<T: ToValue> Params for [T; $n] {
            fn values(self) -> Vec<Value> {
                self.iter().map(ToValue::to_value).collect()
            }
        }
        impl<T: ToValue> Params for &[T; $n] {
            fn values(self) -> Vec<Value> {
                self.iter().map(ToValue::to_value).collect()
            }
        }
    )*};
}
array_params!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);

macro_rules! tuple_params {
    ($(($($t:ident $i:tt),+)),*) => {$(
        impl<$($t: ToValue),+> Params for ($($t,)+) {
            fn values(self) -> Vec<Value> {
                vec![$(self.$i.to_value()),+]
            }
        }
    )*};
}
tuple_params!(
    (A 0),
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5)
);

/// `params![a, b, c]`: parameters of different types.
macro_rules! params {
    () => { &[] as &[&dyn $crate::sql::ToValue] };
    ($($p:expr),+ $(,)?) => { &[$(&$p as &dyn $crate::sql::ToValue),+] as &[&dyn $crate::sql::ToValue] };
}
pub(crate) use params;

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

/// A column value that is NULL or not, whatever its type.
struct Present;

impl<'a> FromSql<'a> for Present {
    fn from_sql(
        _: &Type,
        _: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Present)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// What a column may be read as.
pub trait FromColumn: Sized {
    fn from_column(row: &postgres::Row, idx: usize) -> Result<Self>;
}

fn conversion(row: &postgres::Row, idx: usize, to: &str) -> Error {
    let ty = row.columns().get(idx).map(|c| c.type_().to_string());
    Error::Conversion(format!(
        "column {idx} of type {ty:?} cannot be read as {to}"
    ))
}

fn read_i64(row: &postgres::Row, idx: usize) -> Result<Option<i64>> {
    let ty = row
        .columns()
        .get(idx)
        .map(|c| c.type_().clone())
        .ok_or_else(|| Error::Conversion(format!("no column {idx}")))?;
    Ok(match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(idx)?,
        Type::INT4 => row.try_get::<_, Option<i32>>(idx)?.map(i64::from),
        Type::INT2 => row.try_get::<_, Option<i16>>(idx)?.map(i64::from),
        Type::BOOL => row.try_get::<_, Option<bool>>(idx)?.map(i64::from),
        _ => return Err(conversion(row, idx, "an integer")),
    })
}

macro_rules! int_from_column {
    ($($t:ty),*) => {$(
        impl FromColumn for Option<$t> {
            fn from_column(row: &postgres::Row, idx: usize) -> Result<Self> {
                read_i64(row, idx)?
                    .map(|v| <$t>::try_from(v).map_err(|_| conversion(row, idx, stringify!($t))))
                    .transpose()
            }
        }
        impl FromColumn for $t {
            fn from_column(row: &postgres::Row, idx: usize) -> Result<Self> {
                Option::<$t>::from_column(row, idx)?.ok_or_else(|| conversion(row, idx, "a value (it is NULL)"))
            }
        }
    )*};
}
int_from_column!(i64, i32, u8, u16, u32, u64, usize);

impl FromColumn for Option<bool> {
    fn from_column(row: &postgres::Row, idx: usize) -> Result<Self> {
        Ok(read_i64(row, idx)?.map(|v| v != 0))
    }
}

impl FromColumn for bool {
    fn from_column(row: &postgres::Row, idx: usize) -> Result<Self> {
        Option::<bool>::from_column(row, idx)?
            .ok_or_else(|| conversion(row, idx, "a value (it is NULL)"))
    }
}

macro_rules! direct_from_column {
    ($($t:ty),*) => {$(
        impl FromColumn for Option<$t> {
            fn from_column(row: &postgres::Row, idx: usize) -> Result<Self> {
                if row.try_get::<_, Option<Present>>(idx)?.is_none() {
                    return Ok(None);
                }
                row.try_get::<_, $t>(idx).map(Some).map_err(|_| conversion(row, idx, stringify!($t)))
            }
        }
        impl FromColumn for $t {
            fn from_column(row: &postgres::Row, idx: usize) -> Result<Self> {
                Option::<$t>::from_column(row, idx)?.ok_or_else(|| conversion(row, idx, "a value (it is NULL)"))
            }
        }
    )*};
}
direct_from_column!(String, Vec<u8>);

/// One row of a result.
pub struct Row<'r> {
    inner: &'r postgres::Row,
}

impl Row<'_> {
    /// The column at `idx`, a position or a name (rusqlite's two type parameters, so call
    /// sites read alike).
    pub fn get<I: ColumnIndex, T: FromColumn>(&self, idx: I) -> Result<T> {
        T::from_column(self.inner, idx.position(self.inner)?)
    }
}

/// A column's position or name.
pub trait ColumnIndex {
    fn position(&self, row: &postgres::Row) -> Result<usize>;
}

impl ColumnIndex for usize {
    fn position(&self, _: &postgres::Row) -> Result<usize> {
        Ok(*self)
    }
}

impl ColumnIndex for &str {
    fn position(&self, row: &postgres::Row) -> Result<usize> {
        row.columns()
            .iter()
            .position(|c| c.name() == *self)
            .ok_or_else(|| Error::Conversion(format!("no column {self:?}")))
    }
}

/// The rows of a query, read by `next` as rusqlite's are.
pub struct Rows {
    rows: std::vec::IntoIter<postgres::Row>,
    current: Option<postgres::Row>,
}

impl Rows {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Row<'_>>> {
        self.current = self.rows.next();
        Ok(self.current.as_ref().map(|inner| Row { inner }))
    }
}

/// `query_row(...).optional()`: no row is `None`, not an error.
pub trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => Err(e),
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

    pub fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>> {
        if let Some(s) = self.cache.borrow().get(sql) {
            return Ok(Stmt {
                conn: self,
                stmt: s.clone(),
            });
        }
        let r = self
            .client
            .borrow_mut()
            .prepare(&translate(sql))
            .map_err(Error::from);
        let stmt = self.note(r)?;
        self.cache.borrow_mut().insert(sql.to_owned(), stmt.clone());
        Ok(Stmt { conn: self, stmt })
    }

    pub fn prepare(&self, sql: &str) -> Result<Stmt<'_>> {
        self.prepare_cached(sql)
    }

    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// A prepared statement of a [`Conn`].
pub struct Stmt<'c> {
    conn: &'c Conn,
    stmt: Statement,
}

impl Stmt<'_> {
    fn run(&self, params: impl Params) -> Result<Vec<postgres::Row>> {
        let values = params.values();
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let r = self
            .conn
            .client
            .borrow_mut()
            .query(&self.stmt, &refs)
            .map_err(Error::from);
        self.conn.note(r)
    }

    pub fn execute(&mut self, params: impl Params) -> Result<usize> {
        let values = params.values();
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let r = self
            .conn
            .client
            .borrow_mut()
            .execute(&self.stmt, &refs)
            .map_err(Error::from);
        let n = self.conn.note(r)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        let rows = self.run(params)?;
        let first = rows.first().ok_or(Error::QueryReturnedNoRows)?;
        f(&Row { inner: first })
    }

    pub fn query_map<T>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.run(params)?;
        Ok(rows
            .iter()
            .map(|inner| f(&Row { inner }))
            .collect::<Vec<_>>()
            .into_iter())
    }

    pub fn query(&mut self, params: impl Params) -> Result<Rows> {
        Ok(Rows {
            rows: self.run(params)?.into_iter(),
            current: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{translate, ToValue, Value};
    use postgres::types::{ToSql, Type};

    #[test]
    fn integers_above_i64_max_are_refused_not_clamped() {
        assert_eq!(u64::MAX.to_value(), Value::OutOfRange(u128::from(u64::MAX)));
        assert_eq!((i64::MAX as u64).to_value(), Value::Int(i64::MAX));
        assert_eq!(usize::MAX.to_value(), Value::OutOfRange(usize::MAX as u128));
        let mut out = bytes::BytesMut::new();
        let refused = u64::MAX.to_value().to_sql(&Type::INT8, &mut out);
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
