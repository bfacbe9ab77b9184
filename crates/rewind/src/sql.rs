//! One small interface over the two database engines: SQLite (a file) and PostgreSQL (a
//! `postgres://` URL).
//!
//! Every query is written once, in the SQL both engines speak, with numbered `?N` parameters
//! (rewritten to `$N` for PostgreSQL). Values cross as [`Value`]: integers, text, bytes or
//! NULL, which is all the schema stores. A [`Conn`] is one transaction of either engine; rows
//! are read whole into [`Row`]s.

use crate::error::DbError;
use std::cell::RefCell;
use std::collections::HashMap;

/// The result of a statement.
pub(crate) type SqlResult<T> = std::result::Result<T, DbError>;

/// A value of a column or a parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Text(_) => "text",
            Value::Blob(_) => "bytes",
        }
    }
}

/// A type that can be a parameter.
pub(crate) trait ToValue {
    fn to_value(&self) -> Value;
}

/// A type that can be read from a column.
pub(crate) trait FromValue: Sized {
    fn from_value(v: Value) -> std::result::Result<Self, String>;
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, T::to_value)
    }
}

impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
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

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

impl FromValue for i64 {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(i),
            v => Err(format!("expected an integer, found {}", v.type_name())),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        i64::from_value(v).map(|i| i != 0)
    }
}

impl FromValue for String {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s),
            v => Err(format!("expected text, found {}", v.type_name())),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b),
            Value::Text(s) => Ok(s.into_bytes()),
            v => Err(format!("expected bytes, found {}", v.type_name())),
        }
    }
}

/// The parameters of a statement: `params![a, b]`, an array of one type, or `()`.
pub(crate) trait Params {
    fn values(&self) -> Vec<Value>;
}

impl Params for () {
    fn values(&self) -> Vec<Value> {
        Vec::new()
    }
}

impl Params for &[&dyn ToValue] {
    fn values(&self) -> Vec<Value> {
        self.iter().map(|v| v.to_value()).collect()
    }
}

impl<T: ToValue, const N: usize> Params for [T; N] {
    fn values(&self) -> Vec<Value> {
        self.iter().map(ToValue::to_value).collect()
    }
}

/// Parameters of several types: `params![thread, now, bytes]`.
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        &[$(&$p as &dyn $crate::sql::ToValue),*] as &[&dyn $crate::sql::ToValue]
    };
}
pub(crate) use params;

/// A column index (only numbers: queries name their columns by position).
pub(crate) trait ColIndex {
    fn index(self) -> usize;
}

impl ColIndex for usize {
    fn index(self) -> usize {
        self
    }
}

/// One row of a result.
#[derive(Debug)]
pub(crate) struct Row(Vec<Value>);

impl Row {
    /// The value of column `idx`.
    pub(crate) fn get<I: ColIndex, T: FromValue>(&self, idx: I) -> SqlResult<T> {
        let idx = idx.index();
        let v = self.0.get(idx).cloned().ok_or_else(|| DbError::Value {
            column: idx,
            message: "no such column".into(),
        })?;
        T::from_value(v).map_err(|message| DbError::Value {
            column: idx,
            message,
        })
    }
}

/// Turns "no row" into `None`, as `rusqlite::OptionalExtension` does.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> SqlResult<Option<T>>;
}

impl<T> OptionalExtension<T> for SqlResult<T> {
    fn optional(self) -> SqlResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A PostgreSQL session and the statements it has prepared.
pub(crate) struct PgClient {
    pub(crate) client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
    in_transaction: bool,
    /// The server's clock minus this machine's, in milliseconds.
    pub(crate) clock_offset_ms: i64,
}

impl PgClient {
    pub(crate) fn new(client: postgres::Client) -> Self {
        PgClient {
            client,
            statements: HashMap::new(),
            in_transaction: false,
            clock_offset_ms: 0,
        }
    }

    /// Runs `sql` (in the `?N` dialect) and returns its rows, or the number of rows changed.
    fn run(&mut self, sql: &str, params: Vec<Value>, rows: bool) -> SqlResult<(Vec<Row>, u64)> {
        let stmt = match self.statements.get(sql) {
            Some(s) => s.clone(),
            None => {
                let s = self.client.prepare(&dollar_params(sql))?;
                self.statements.insert(sql.to_string(), s.clone());
                s
            }
        };
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|v| v as &(dyn postgres::types::ToSql + Sync))
            .collect();
        if !rows {
            return Ok((Vec::new(), self.client.execute(&stmt, &refs)?));
        }
        let out = self
            .client
            .query(&stmt, &refs)?
            .into_iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<usize, Value>(i))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map(Row)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let n = out.len() as u64;
        Ok((out, n))
    }

    /// Begins a transaction with `sql`, first rolling back one a panic left open.
    pub(crate) fn begin(&mut self, sql: &str) -> SqlResult<()> {
        if self.in_transaction {
            self.in_transaction = false;
            self.client.batch_execute("ROLLBACK")?;
        }
        self.client.batch_execute(sql)?;
        self.in_transaction = true;
        Ok(())
    }

    /// Ends the transaction with `sql` (`COMMIT` or `ROLLBACK`).
    pub(crate) fn end(&mut self, sql: &str) -> SqlResult<()> {
        self.in_transaction = false;
        Ok(self.client.batch_execute(sql)?)
    }

    /// Runs `sql` (any dialect; no parameters) outside the statement cache.
    pub(crate) fn batch(&mut self, sql: &str) -> SqlResult<()> {
        Ok(self.client.batch_execute(sql)?)
    }

    /// The rows of `sql` with `params`.
    pub(crate) fn query(&mut self, sql: &str, params: impl Params) -> SqlResult<Vec<Row>> {
        self.run(sql, params.values(), true).map(|(rows, _)| rows)
    }
}

/// One transaction (or, for a few statements, one connection) of either engine.
pub(crate) enum Conn<'a> {
    Sqlite(&'a rusqlite::Connection),
    Pg(RefCell<&'a mut PgClient>),
}

impl<'a> Conn<'a> {
    /// The time now in milliseconds since the epoch, by the database's clock: this machine's
    /// for SQLite, the server's for PostgreSQL (this machine's corrected by the offset measured
    /// when connecting), so that leases written by several machines compare on one clock.
    pub(crate) fn now_ms(&self) -> i64 {
        let local = cairn_store::fsutil::now_ms();
        match self {
            Conn::Sqlite(_) => local,
            Conn::Pg(c) => local + c.borrow().clock_offset_ms,
        }
    }

    /// An expression for the JSON text of the member `key` of the JSON object in the text
    /// column `column` (NULL when it has none). The one place the two dialects differ.
    pub(crate) fn json_field(&self, column: &str, key: &str) -> String {
        match self {
            Conn::Sqlite(_) => format!("{column} -> '$.{key}'"),
            Conn::Pg(_) => format!("(CAST({column} AS jsonb) -> '{key}')::text"),
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: impl Params) -> SqlResult<usize> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute(sql, rusqlite::params_from_iter(params.values()))?),
            Conn::Pg(c) => {
                let (_, n) = c.borrow_mut().run(sql, params.values(), false)?;
                Ok(usize::try_from(n).unwrap_or(usize::MAX))
            }
        }
    }

    /// Every row of a query.
    pub(crate) fn rows(&self, sql: &str, params: impl Params) -> SqlResult<Vec<Row>> {
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let n = stmt.column_count();
                let mut rows = stmt.query(rusqlite::params_from_iter(params.values()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    let mut values = Vec::with_capacity(n);
                    for i in 0..n {
                        values.push(sqlite_value(r.get_ref(i)?, i)?);
                    }
                    out.push(Row(values));
                }
                Ok(out)
            }
            Conn::Pg(c) => c.borrow_mut().query(sql, params),
        }
    }

    /// The first row of a query, mapped by `f`; [`DbError::NoRows`] when there is none.
    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row) -> SqlResult<T>,
    ) -> SqlResult<T> {
        match self.rows(sql, params)?.first() {
            Some(r) => f(r),
            None => Err(DbError::NoRows),
        }
    }

    /// A statement to run with [`Stmt::query_map`].
    pub(crate) fn prepare(&self, sql: &str) -> SqlResult<Stmt<'_, 'a>> {
        Ok(Stmt {
            conn: self,
            sql: sql.to_string(),
        })
    }
}

/// A query of a [`Conn`].
pub(crate) struct Stmt<'c, 'a> {
    conn: &'c Conn<'a>,
    sql: String,
}

impl Stmt<'_, '_> {
    /// Every row of the query, mapped by `f`.
    pub(crate) fn query_map<T>(
        &self,
        params: impl Params,
        f: impl FnMut(&Row) -> SqlResult<T>,
    ) -> SqlResult<std::vec::IntoIter<SqlResult<T>>> {
        let rows = self.conn.rows(&self.sql, params)?;
        Ok(rows.iter().map(f).collect::<Vec<_>>().into_iter())
    }
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>, column: usize) -> SqlResult<Value> {
    use rusqlite::types::ValueRef;
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Text(t) => Value::Text(
            std::str::from_utf8(t)
                .map_err(|e| DbError::Value {
                    column,
                    message: e.to_string(),
                })?
                .to_string(),
        ),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        ValueRef::Real(_) => {
            return Err(DbError::Value {
                column,
                message: "a floating-point number where the schema has none".into(),
            })
        }
    })
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, BoxError> {
        use postgres::types::Type;
        match (self, ty) {
            (Value::Null, _) => Ok(postgres::types::IsNull::Yes),
            (Value::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Value::Int(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Value::Int(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Value::Int(i), _) => i.to_string().to_sql(ty, out),
            (Value::Text(s), &Type::BYTEA) => s.as_bytes().to_sql(ty, out),
            (Value::Text(s), _) => s.to_sql(ty, out),
            (Value::Blob(b), &Type::BYTEA) => b.to_sql(ty, out),
            (Value::Blob(_), _) => Err(format!("bytes cannot be stored as {ty}").into()),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

impl<'a> postgres::types::FromSql<'a> for Value {
    fn from_sql(ty: &postgres::types::Type, raw: &'a [u8]) -> std::result::Result<Self, BoxError> {
        use postgres::types::Type;
        Ok(match *ty {
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
            Type::BOOL => Value::Int(bool::from_sql(ty, raw)?.into()),
            Type::BYTEA => Value::Blob(raw.to_vec()),
            _ => Value::Text(String::from_sql(ty, raw)?),
        })
    }

    fn from_sql_null(_: &postgres::types::Type) -> std::result::Result<Self, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        use postgres::types::{FromSql, Type};
        matches!(
            *ty,
            Type::INT8 | Type::INT4 | Type::INT2 | Type::BOOL | Type::BYTEA
        ) || <String as FromSql>::accepts(ty)
    }
}

/// Rewrites the `?N` parameters of `sql` as PostgreSQL's `$N` (outside quoted strings).
pub(crate) fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\'' => {
                quoted = !quoted;
                out.push(ch);
            }
            '?' if !quoted && chars.peek().is_some_and(|c| c.is_ascii_digit()) => out.push('$'),
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::dollar_params;

    #[test]
    fn numbered_parameters_become_dollar_parameters_outside_quotes() {
        assert_eq!(
            dollar_params("SELECT '?1' FROM t WHERE a = ?1 AND b IN (?2, ?10)"),
            "SELECT '?1' FROM t WHERE a = $1 AND b IN ($2, $10)"
        );
    }
}
