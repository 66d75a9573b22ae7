//! The statement layer the repositories are written against: the part of rusqlite's shape they
//! use (`prepare_cached`, `query_row`, `query_map`, `optional`, `params!`) over a [`Backend`]
//! that each store implements for its connection. A backend moves values and rows; it decides
//! nothing about what a repository means.
//!
//! Values are borrowed ([`Value`]): a statement's parameters are passed to the backend without
//! copying a string, and a column is read from the backend's own row buffer. Integers above
//! `i64::MAX` are refused (no column holds them) instead of stored as another number.

/// Which SQL the connection speaks, for the few statements that cannot be written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The statement written for this dialect, where one text cannot serve both.
    pub fn pick(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }
}

/// A statement error, from the database or from converting a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The database refused the statement; `transient` when a retry may pass (a lost conflict,
    /// a busy file, a lost connection). `message` names the database.
    Db {
        message: String,
        transient: bool,
    },
    /// `query_row` found no row (`optional()` turns it into `None`).
    QueryReturnedNoRows,
    Conversion(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Db { message, .. } => f.write_str(message),
            Error::QueryReturnedNoRows => f.write_str("query returned no rows"),
            Error::Conversion(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A parameter or a column: dynamically typed, as SQLite has them, and borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
    /// An unsigned integer above `i64::MAX`, which no BIGINT column holds: passing it fails the
    /// statement with a conversion error instead of storing another number.
    OutOfRange(u128),
}

impl Value<'_> {
    /// What kind of value this is, without the value (error texts are logged).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
            Value::OutOfRange(_) => "an integer out of range",
        }
    }
}

/// What may be passed as a parameter.
pub trait ToValue {
    fn to_value(&self) -> Value<'_>;
}

macro_rules! int_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value<'_> {
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
    fn to_value(&self) -> Value<'_> {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value<'_> {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value<'_> {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

impl ToValue for Value<'_> {
    fn to_value(&self) -> Value<'_> {
        *self
    }
}

/// Parameters a statement takes on the stack, without an allocation (every repository
/// statement but the nonce log's batch insert).
const INLINE_ARGS: usize = 16;

/// Hands `values` to `f` as one slice: on the stack up to [`INLINE_ARGS`], so a statement's
/// parameters cost no allocation and no copy on their way to the backend.
fn with_collected<'a>(
    values: impl ExactSizeIterator<Item = Value<'a>>,
    f: &mut dyn FnMut(&[Value<'_>]),
) {
    if values.len() > INLINE_ARGS {
        let all: Vec<Value<'a>> = values.collect();
        return f(&all);
    }
    let mut inline = [Value::Null; INLINE_ARGS];
    let mut n = 0;
    for (slot, v) in inline.iter_mut().zip(values) {
        *slot = v;
        n += 1;
    }
    f(&inline[..n]);
}

/// The parameters of one statement.
pub trait Params {
    /// Calls `f` once with the parameters' values.
    fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>]));
}

/// Runs `run` with the values of `params`.
fn bound<T>(params: &impl Params, run: impl FnOnce(&[Value<'_>]) -> Result<T>) -> Result<T> {
    let mut run = Some(run);
    let mut out = None;
    params.with_values(&mut |args| {
        if let Some(run) = run.take() {
            out = Some(run(args));
        }
    });
    out.unwrap_or_else(|| {
        Err(Error::Conversion(
            "the parameters were never handed over".into(),
        ))
    })
}

impl<T: ToValue> Params for &[T] {
    fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>])) {
        with_collected(self.iter().map(ToValue::to_value), f)
    }
}

impl<T: ToValue> Params for &Vec<T> {
    fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>])) {
        with_collected(self.iter().map(ToValue::to_value), f)
    }
}

impl Params for [&dyn ToValue; 0] {
    fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>])) {
        f(&[])
    }
}

macro_rules! array_params {
    ($($n:literal),*) => {$(
        impl<T: ToValue> Params for [T; $n] {
            fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>])) {
                with_collected(self.iter().map(ToValue::to_value), f)
            }
        }
        impl<T: ToValue> Params for &[T; $n] {
            fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>])) {
                with_collected(self.iter().map(ToValue::to_value), f)
            }
        }
    )*};
}
array_params!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);

macro_rules! tuple_params {
    ($(($($t:ident $i:tt),+)),*) => {$(
        impl<$($t: ToValue),+> Params for ($($t,)+) {
            fn with_values(&self, f: &mut dyn FnMut(&[Value<'_>])) {
                f(&[$(self.$i.to_value()),+])
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
#[macro_export]
macro_rules! params {
    () => { &[] as &[&dyn $crate::sql::ToValue] };
    ($($p:expr),+ $(,)?) => { &[$(&$p as &dyn $crate::sql::ToValue),+] as &[&dyn $crate::sql::ToValue] };
}
pub use params;

/// One row as a backend holds it.
pub trait RowSource {
    /// The column at `idx`, borrowed from the row.
    fn column(&self, idx: usize) -> Result<Value<'_>>;
    /// The position of the column named `name`.
    fn column_index(&self, name: &str) -> Result<usize>;
}

/// One row of a result.
#[derive(Clone, Copy)]
pub struct Row<'r> {
    source: &'r dyn RowSource,
}

impl<'r> Row<'r> {
    pub fn new(source: &'r dyn RowSource) -> Self {
        Row { source }
    }

    /// The column at `idx`, a position or a name, read as `T`.
    pub fn get<I: ColumnIndex, T: FromColumn>(&self, idx: I) -> Result<T> {
        let at = idx.position(self.source)?;
        let value = self.source.column(at)?;
        // The value's kind only: a column may hold a key or a sealed secret, and this error is
        // logged.
        T::from_value(value)
            .map_err(|why| Error::Conversion(format!("column {at} ({}): {why}", value.kind())))
    }

    /// The column at `idx` as the backend holds it.
    pub fn get_ref(&self, idx: usize) -> Result<Value<'_>> {
        self.source.column(idx)
    }
}

/// A column's position or name.
pub trait ColumnIndex {
    fn position(&self, row: &dyn RowSource) -> Result<usize>;
}

impl ColumnIndex for usize {
    fn position(&self, _: &dyn RowSource) -> Result<usize> {
        Ok(*self)
    }
}

impl ColumnIndex for &str {
    fn position(&self, row: &dyn RowSource) -> Result<usize> {
        row.column_index(self)
    }
}

/// What a column may be read as.
pub trait FromColumn: Sized {
    fn from_value(value: Value<'_>) -> Result<Self, &'static str>;
}

impl<T: FromColumn> FromColumn for Option<T> {
    fn from_value(value: Value<'_>) -> Result<Self, &'static str> {
        match value {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

macro_rules! int_from_column {
    ($($t:ty),*) => {$(
        impl FromColumn for $t {
            fn from_value(value: Value<'_>) -> Result<Self, &'static str> {
                match value {
                    Value::Int(i) => <$t>::try_from(i).map_err(|_| concat!("out of range for ", stringify!($t))),
                    Value::Null => Err("it is NULL"),
                    _ => Err(concat!("not an integer (", stringify!($t), ")")),
                }
            }
        }
    )*};
}
int_from_column!(i64, i32, u8, u16, u32, u64, usize);

impl FromColumn for bool {
    fn from_value(value: Value<'_>) -> Result<Self, &'static str> {
        i64::from_value(value).map(|v| v != 0)
    }
}

impl FromColumn for String {
    fn from_value(value: Value<'_>) -> Result<Self, &'static str> {
        match value {
            Value::Text(s) => Ok(s.to_owned()),
            Value::Null => Err("it is NULL"),
            _ => Err("not text"),
        }
    }
}

impl FromColumn for Vec<u8> {
    fn from_value(value: Value<'_>) -> Result<Self, &'static str> {
        match value {
            Value::Blob(b) => Ok(b.to_vec()),
            Value::Null => Err("it is NULL"),
            _ => Err("not a blob"),
        }
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

/// What a store implements for one connection, already inside the transaction a job runs in.
/// Statements are cached per connection by their text.
pub trait Backend {
    fn dialect(&self) -> Dialect;
    /// Runs `sql`; the number of rows it changed.
    fn execute(&self, sql: &str, args: &[Value<'_>]) -> Result<usize>;
    /// Runs `sql` and hands each row to `each` until it answers `false` or the rows end.
    fn query(
        &self,
        sql: &str,
        args: &[Value<'_>],
        each: &mut dyn FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()>;
    /// Runs a statement without parameters or rows (savepoints).
    fn run(&self, sql: &str) -> Result<()>;
    /// The rowid the connection's last INSERT gave, where the database has one (SQLite):
    /// cheaper there than `RETURNING`, which buffers the statement's rows before the first.
    fn last_insert_rowid(&self) -> Option<i64> {
        None
    }
}

/// A connection as the repositories see it.
#[derive(Clone, Copy)]
pub struct Db<'c> {
    backend: &'c dyn Backend,
}

impl<'c> Db<'c> {
    pub fn new(backend: &'c dyn Backend) -> Self {
        Db { backend }
    }

    pub fn dialect(&self) -> Dialect {
        self.backend.dialect()
    }

    /// A statement; it reaches the backend (and its cache) when it runs.
    pub fn prepare_cached<'s>(&self, sql: &'s str) -> Result<Stmt<'c, 's>> {
        Ok(Stmt {
            backend: self.backend,
            sql,
        })
    }

    pub fn prepare<'s>(&self, sql: &'s str) -> Result<Stmt<'c, 's>> {
        self.prepare_cached(sql)
    }

    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        bound(&params, |args| self.backend.execute(sql, args))
    }

    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        Stmt {
            backend: self.backend,
            sql,
        }
        .query_row(params, f)
    }

    /// Runs a statement without parameters or rows.
    pub fn run(&self, sql: &str) -> Result<()> {
        self.backend.run(sql)
    }

    /// See [`Backend::last_insert_rowid`].
    pub fn last_insert_rowid(&self) -> Option<i64> {
        self.backend.last_insert_rowid()
    }
}

/// A statement of a [`Db`].
pub struct Stmt<'c, 's> {
    backend: &'c dyn Backend,
    sql: &'s str,
}

impl Stmt<'_, '_> {
    pub fn execute(&mut self, params: impl Params) -> Result<usize> {
        bound(&params, |args| self.backend.execute(self.sql, args))
    }

    /// The first row, read by `f`.
    pub fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut f = Some(f);
        let mut out = None;
        bound(&params, |args| {
            self.backend.query(self.sql, args, &mut |row| {
                if let Some(f) = f.take() {
                    out = Some(f(row));
                }
                Ok(false)
            })
        })?;
        out.unwrap_or(Err(Error::QueryReturnedNoRows))
    }

    /// Every row, read by `f`.
    pub fn query_map<T>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let mut out = Vec::new();
        bound(&params, |args| {
            self.backend.query(self.sql, args, &mut |row| {
                out.push(f(row));
                Ok(true)
            })
        })?;
        Ok(out.into_iter())
    }

    /// Hands every row to `f` as it is read, stopping at `f`'s first error.
    pub fn for_each<E: From<Error>>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut failed = None;
        bound(&params, |args| {
            self.backend.query(self.sql, args, &mut |row| match f(row) {
                Ok(()) => Ok(true),
                Err(e) => {
                    failed = Some(e);
                    Ok(false)
                }
            })
        })?;
        failed.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::{FromColumn, Params, ToValue, Value};

    #[test]
    fn integers_above_i64_max_are_refused_not_clamped() {
        assert_eq!(u64::MAX.to_value(), Value::OutOfRange(u128::from(u64::MAX)));
        assert_eq!((i64::MAX as u64).to_value(), Value::Int(i64::MAX));
        assert_eq!(usize::MAX.to_value(), Value::OutOfRange(usize::MAX as u128));
    }

    #[test]
    fn columns_read_as_their_type_or_refuse() {
        assert_eq!(u32::from_value(Value::Int(7)), Ok(7));
        assert!(u32::from_value(Value::Int(-1)).is_err());
        assert!(u32::from_value(Value::Null).is_err());
        assert_eq!(Option::<u32>::from_value(Value::Null), Ok(None));
        assert_eq!(bool::from_value(Value::Int(1)), Ok(true));
        assert_eq!(String::from_value(Value::Text("a")), Ok("a".to_owned()));
        assert!(String::from_value(Value::Int(1)).is_err());
    }

    struct OneText(&'static str);

    impl super::RowSource for OneText {
        fn column(&self, _: usize) -> super::Result<Value<'_>> {
            Ok(Value::Text(self.0))
        }
        fn column_index(&self, _: &str) -> super::Result<usize> {
            Ok(0)
        }
    }

    /// A column read as the wrong type is an error naming the column and the value's kind,
    /// never the value: it may be a key, and the error is logged.
    #[test]
    fn a_conversion_error_never_shows_the_value() {
        let source = OneText("k-secret-api-key");
        let err = super::Row::new(&source).get::<_, i64>(0).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("k-secret"), "{text}");
        assert!(text.contains("column 0 (text)"), "{text}");
    }

    #[test]
    fn parameters_borrow_their_values() {
        let id = String::from("abc");
        let p = params![id, 5_u64, None::<i64>];
        let mut seen = 0;
        p.with_values(&mut |v| {
            assert_eq!(v, [Value::Text("abc"), Value::Int(5), Value::Null]);
            seen += 1;
        });
        <[&dyn ToValue; 0] as Params>::with_values(&[], &mut |v| {
            assert!(v.is_empty());
            seen += 1;
        });
        let many: Vec<u32> = (0..40).collect();
        (&many).with_values(&mut |v| {
            assert_eq!(v.len(), 40);
            assert_eq!(v[39], Value::Int(39));
            seen += 1;
        });
        assert_eq!(seen, 3);
    }
}
