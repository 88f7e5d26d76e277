//! Which LONGTEXT columns are MariaDB JSON columns, for backend
//! connections the relay does not read (TLS, a backend across a network:
//! `extended_metadata`); relayed ones get the server's own metadata.
//!
//! MariaDB's JSON is LONGTEXT with a `json_valid()` column check: on the
//! wire it is a BLOB, and only MariaDB's extended column metadata
//! (`format=json`, which `mysql_async` never asks for) says it is JSON.
//! The gateway asks `information_schema.CHECK_CONSTRAINTS` instead, on a
//! separate pooled connection of the session's account (the session's
//! connection is in the middle of a result), and keeps the answer per
//! account and table for a short time (an account sees only the
//! constraints of tables it has rights on: another's answer may not be
//! its own); statements that may change a schema, run through the
//! gateway, forget it all.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mysql_async::prelude::Queryable;
use tracing::debug;

use crate::api::pb;
use crate::translate::types::BINARY_CHARSET;

/// How long a table's answer is trusted (DDL from other clients).
const TTL: Duration = Duration::from_secs(10);
/// A lookup that cannot get a connection this fast is skipped: the
/// column then stays LONGTEXT rather than holding up the result.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// (schema, table), as the names' bytes: two names that differ only in
/// bytes that are not UTF-8 are two tables.
type Table = (Bytes, Bytes);
/// Past this many tables, expired answers are dropped before adding one.
const MAX_TABLES: usize = 1024;
/// A table's JSON columns, and when they were looked up.
type Entry = (Instant, Arc<HashSet<Vec<u8>>>);

/// The JSON columns of recently seen tables, by the API user that looked
/// them up and the table.
#[derive(Default)]
pub struct JsonColumns {
    tables: Mutex<HashMap<(String, Table), Entry>>,
}

impl JsonColumns {
    /// Forgets every table (after a statement that may have changed one).
    pub fn clear(&self) {
        self.tables.lock().expect("not poisoned").clear();
    }

    /// Gives the fields that are JSON columns the Vitess type JSON, as
    /// `account` (whose `pool` looks them up) sees them.
    pub async fn mark(&self, account: &str, pool: &mysql_async::Pool, fields: &mut [pb::Field]) {
        let mut wanted: Vec<Table> = fields
            .iter()
            .filter(|f| may_be_json(f))
            .map(table_of)
            .collect();
        if wanted.is_empty() {
            return;
        }
        wanted.sort();
        wanted.dedup();
        let mut known = HashMap::new();
        for table in wanted {
            let key = (account.to_string(), table);
            if let Some(columns) = self.cached(&key) {
                known.insert(key.1, columns);
            } else if let Some(columns) = lookup(pool, &key.1).await {
                let columns = Arc::new(columns);
                let mut tables = self.tables.lock().expect("not poisoned");
                if tables.len() >= MAX_TABLES {
                    tables.retain(|_, (at, _)| at.elapsed() < TTL);
                }
                tables.insert(key.clone(), (Instant::now(), columns.clone()));
                known.insert(key.1, columns);
            }
        }
        for field in fields.iter_mut().filter(|f| may_be_json(f)) {
            let table = table_of(field);
            if known
                .get(&table)
                .is_some_and(|columns| columns.contains(&field.org_name[..]))
            {
                field.r#type = pb::Type::Json as i32;
            }
        }
    }

    fn cached(&self, key: &(String, Table)) -> Option<Arc<HashSet<Vec<u8>>>> {
        let tables = self.tables.lock().expect("not poisoned");
        let (at, columns) = tables.get(key)?;
        (at.elapsed() < TTL).then(|| columns.clone())
    }
}

/// The table a field's column belongs to, by the names' bytes (in the
/// session's `character_set_results`; `information_schema` is searched for
/// the same bytes, so a name that is not UTF-8 finds no JSON columns).
fn table_of(field: &pb::Field) -> Table {
    (field.database.clone(), field.org_table.clone())
}

/// A LONGTEXT column of a real table: MariaDB's JSON looks exactly so.
/// Its collation (utf8mb4_bin) sets BINARY_FLAG, which makes it a Vitess
/// BLOB; the character set is what tells text from bytes.
fn may_be_json(field: &pb::Field) -> bool {
    (field.r#type == pb::Type::Text as i32 || field.r#type == pb::Type::Blob as i32)
        && field.column_type.is_empty()
        && field.column_length == u32::MAX
        && field.charset != u32::from(BINARY_CHARSET)
        && !field.database.is_empty()
        && !field.org_table.is_empty()
        && !field.org_name.is_empty()
}

/// The columns of `table` that carry MariaDB's JSON check, whose
/// constraint is named after the column; `None` if that could not be
/// found out (the answer is then not cached).
async fn lookup(pool: &mysql_async::Pool, (schema, table): &Table) -> Option<HashSet<Vec<u8>>> {
    let result = tokio::time::timeout(LOOKUP_TIMEOUT, async {
        let mut conn = pool.get_conn().await?;
        conn.exec::<(Vec<u8>, Vec<u8>), _, _>(
            "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS \
             WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ? AND LEVEL = 'Column' \
             AND CHECK_CLAUSE LIKE 'json_valid(%'",
            (&schema[..], &table[..]),
        )
        .await
    })
    .await;
    match result {
        Ok(Ok(rows)) => Some(
            rows.into_iter()
                .filter(|(column, clause)| *clause == json_check(column))
                .map(|(column, _)| column)
                .collect(),
        ),
        // A server without MariaDB's CHECK_CONSTRAINTS columns (MySQL,
        // whose JSON has a wire type of its own) answers with an error:
        // remembered as "no JSON columns" so it is not asked every time.
        Ok(Err(mysql_async::Error::Server(e))) => {
            debug!(error = %e, "JSON column lookup refused");
            Some(HashSet::new())
        }
        Ok(Err(e)) => {
            debug!(error = %e, "JSON column lookup failed");
            None
        }
        Err(_) => {
            debug!("JSON column lookup timed out");
            None
        }
    }
}

/// The check MariaDB adds to a JSON column, as it shows it.
fn json_check(column: &[u8]) -> Vec<u8> {
    let mut check = b"json_valid(`".to_vec();
    for &b in column {
        check.push(b);
        if b == b'`' {
            check.push(b'`');
        }
    }
    check.extend_from_slice(b"`)");
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn longtext() -> pb::Field {
        pb::Field {
            name: "j".into(),
            org_name: "j".into(),
            table: "t".into(),
            org_table: "t".into(),
            database: "app".into(),
            r#type: pb::Type::Blob as i32,
            column_length: u32::MAX,
            charset: 224,
            flags: 144,
            ..pb::Field::default()
        }
    }

    #[test]
    fn only_longtext_table_columns_are_looked_up() {
        assert!(may_be_json(&longtext()));
        let expression = pb::Field {
            org_table: bytes::Bytes::new(),
            ..longtext()
        };
        let blob = pb::Field {
            r#type: pb::Type::Blob as i32,
            charset: 63,
            ..longtext()
        };
        let mediumtext = pb::Field {
            column_length: 16_777_215,
            ..longtext()
        };
        let varchar = pb::Field {
            r#type: pb::Type::Varchar as i32,
            ..longtext()
        };
        let null_variable = pb::Field {
            column_type: "longtext".into(),
            ..longtext()
        };
        for f in [expression, blob, mediumtext, varchar, null_variable] {
            assert!(!may_be_json(&f), "{f:?}");
        }
    }

    #[test]
    fn the_check_is_matched_exactly() {
        assert_eq!(json_check(b"j"), b"json_valid(`j`)");
        assert_eq!(json_check(b"a`b"), b"json_valid(`a``b`)");
    }

    #[test]
    fn tables_are_told_apart_by_their_bytes() {
        let latin1 = |table: &'static [u8]| pb::Field {
            org_table: bytes::Bytes::from_static(table),
            ..longtext()
        };
        // Both would read as `caf\u{fffd}`.
        assert_ne!(table_of(&latin1(b"caf\xe9")), table_of(&latin1(b"caf\xe8")));
    }
}
