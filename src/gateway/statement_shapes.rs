//! What a backend prepare said of a client's prepared statement text:
//! whether its result columns can show a parameter's type, and whether
//! text rows would lose a value. Learned once, it lets later executes of
//! the same text run without a prepare of their own (`binary`).
//!
//! A statement the gateway prepares at the backend is closed after its
//! execute, as a client's own statement would be before it runs another:
//! a statement kept prepared on a pooled connection counts against the
//! session's `max_session_mem_used` and the server's
//! `max_prepared_stmt_count` (shared with every other client of the
//! server), which a direct client never sees. So the gateway keeps what
//! it learned, not the statement.
//!
//! Whether a result column is made of a parameter depends on the text
//! (where its `?`s are); whether it is a FLOAT depends on the tables the
//! text names, which DDL changes: answers are per API user, default
//! database and dialect, trusted for a short time, and forgotten after a
//! statement that may change a schema runs through the gateway.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mysql_async::Column;
use mysql_async::consts::ColumnType;

use crate::translate::sql_text::Dialect;
use crate::translate::statement::is_call;

/// How long an answer is trusted (DDL from other clients).
const TTL: Duration = Duration::from_secs(10);
/// Past this many texts, expired answers are dropped before adding one,
/// and if none has expired, all of them.
const MAX_TEXTS: usize = 4096;
/// Longer texts are not remembered (each execute prepares): a key holds
/// its text.
const MAX_TEXT: usize = 2048;

/// What a statement's result columns are, from its prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// It has result columns, every one a table's own (its definition
    /// names schema, table and column), none a FLOAT, and it is no
    /// `CALL`: no parameter's type shows in a column, and text rows lose
    /// nothing.
    pub table_columns_only: bool,
    /// A result column is a FLOAT, whose text-protocol digits are fewer
    /// than its value's.
    pub has_float: bool,
}

impl Shape {
    /// The shape of `sql`, whose prepare described `columns`.
    pub fn of(sql: &[u8], columns: &[Column]) -> Self {
        let has_float = columns
            .iter()
            .any(|c| c.column_type() == ColumnType::MYSQL_TYPE_FLOAT);
        let table_columns_only = !is_call(sql)
            && !has_float
            && !columns.is_empty()
            && columns.iter().all(|c| {
                !c.schema_ref().is_empty()
                    && !c.org_table_ref().is_empty()
                    && !c.org_name_ref().is_empty()
            });
        Shape {
            table_columns_only,
            has_float,
        }
    }
}

/// Whose answer it is and how its text is read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    account: String,
    database: Option<String>,
    /// The dialect's quoting rules (where a `?` is a parameter).
    backslash_escapes: bool,
    ansi_quotes: bool,
    charset: String,
    text: Vec<u8>,
}

impl Key {
    /// `None` for a text too long to remember.
    pub fn new(
        account: &str,
        database: Option<&str>,
        dialect: &Dialect,
        charset: &str,
        text: &[u8],
    ) -> Option<Self> {
        (text.len() <= MAX_TEXT).then(|| Key {
            account: account.to_owned(),
            database: database.map(str::to_owned),
            backslash_escapes: dialect.backslash_escapes,
            ansi_quotes: dialect.ansi_quotes,
            charset: charset.to_owned(),
            text: text.to_vec(),
        })
    }
}

/// Recently learned shapes, by [`Key`].
#[derive(Default)]
pub struct StatementShapes {
    texts: Mutex<HashMap<Key, (Instant, Shape)>>,
}

impl StatementShapes {
    /// The shape learned for `key` within the last [`TTL`].
    pub fn get(&self, key: &Key) -> Option<Shape> {
        let texts = self.texts.lock().expect("not poisoned");
        let (at, shape) = texts.get(key)?;
        (at.elapsed() < TTL).then_some(*shape)
    }

    pub fn learn(&self, key: Key, shape: Shape) {
        let mut texts = self.texts.lock().expect("not poisoned");
        if texts.len() >= MAX_TEXTS && !texts.contains_key(&key) {
            texts.retain(|_, (at, _)| at.elapsed() < TTL);
            if texts.len() >= MAX_TEXTS {
                texts.clear();
            }
        }
        texts.insert(key, (Instant::now(), shape));
    }

    /// Forgets every text (after a statement that may have changed a
    /// table).
    pub fn clear(&self) {
        self.texts.lock().expect("not poisoned").clear();
    }
}

/// One execute's view of [`StatementShapes`]: its key, if its text can be
/// remembered.
pub struct Memo<'a> {
    pub shapes: &'a StatementShapes,
    pub key: Option<Key>,
}

impl Memo<'_> {
    pub fn known(&self) -> Option<Shape> {
        self.shapes.get(self.key.as_ref()?)
    }

    pub fn learn(&self, shape: Shape) {
        if let Some(key) = &self.key {
            self.shapes.learn(key.clone(), shape);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ty: ColumnType) -> Column {
        Column::new(ty)
            .with_schema(b"db")
            .with_org_table(b"t")
            .with_org_name(b"c")
    }

    #[test]
    fn only_columns_of_tables_can_go_as_text() {
        let long = table(ColumnType::MYSQL_TYPE_LONG);
        let select = b"SELECT c FROM t WHERE c = ?";
        let shape = |sql: &[u8], columns: &[Column]| Shape::of(sql, columns).table_columns_only;
        assert!(shape(select, &[long.clone(), long.clone()]));
        assert!(!shape(select, &[]), "no result set");
        assert!(!shape(b"call p(?)", std::slice::from_ref(&long)));
        let float = table(ColumnType::MYSQL_TYPE_FLOAT);
        assert!(!shape(select, &[long.clone(), float.clone()]));
        assert!(Shape::of(select, &[long.clone(), float]).has_float);
        // An expression; a derived table's column (no schema).
        let expr = Column::new(ColumnType::MYSQL_TYPE_LONGLONG);
        assert!(!shape(select, &[long.clone(), expr]));
        let derived = Column::new(ColumnType::MYSQL_TYPE_LONG)
            .with_org_table(b"d")
            .with_org_name(b"x");
        assert!(!shape(select, &[long.clone(), derived]));
        assert!(!Shape::of(select, &[long]).has_float);
    }

    #[test]
    fn answers_are_per_user_database_and_dialect() {
        let shapes = StatementShapes::default();
        let dialect = Dialect::default();
        let key = |account, db, dialect: &Dialect| {
            Key::new(
                account,
                db,
                dialect,
                "utf8mb4",
                b"SELECT c FROM t WHERE c = ?",
            )
            .unwrap()
        };
        let shape = Shape {
            table_columns_only: true,
            has_float: false,
        };
        shapes.learn(key("app", Some("a"), &dialect), shape);
        assert_eq!(shapes.get(&key("app", Some("a"), &dialect)), Some(shape));
        assert_eq!(shapes.get(&key("other", Some("a"), &dialect)), None);
        assert_eq!(shapes.get(&key("app", Some("b"), &dialect)), None);
        assert_eq!(shapes.get(&key("app", None, &dialect)), None);
        let ansi = Dialect {
            ansi_quotes: true,
            ..dialect
        };
        assert_eq!(shapes.get(&key("app", Some("a"), &ansi)), None);
        shapes.clear();
        assert_eq!(shapes.get(&key("app", Some("a"), &dialect)), None);
    }

    #[test]
    fn long_texts_and_many_texts_are_bounded() {
        let dialect = Dialect::default();
        let long = vec![b'x'; MAX_TEXT + 1];
        assert!(Key::new("app", None, &dialect, "utf8mb4", &long).is_none());
        let shapes = StatementShapes::default();
        let shape = Shape {
            table_columns_only: false,
            has_float: false,
        };
        for i in 0..=MAX_TEXTS {
            let text = format!("SELECT {i}");
            let key = Key::new("app", None, &dialect, "utf8mb4", text.as_bytes()).unwrap();
            shapes.learn(key, shape);
        }
        assert!(shapes.texts.lock().unwrap().len() <= MAX_TEXTS);
    }
}
