//! What a MySQL client sees of a statement's answer, as one comparable
//! string: the differential tests run the same statements directly and
//! through the sidecar and compare these.

use mysql_async::prelude::*;
use mysql_async::{Conn, Value};

/// Column metadata a client sees, every attribute.
pub fn columns(cols: &[mysql_async::Column]) -> Vec<String> {
    cols.iter()
        .map(|c| {
            format!(
                "{}.{}.{} (org {}.{}) type={:?} flags={:?} charset={} len={} decimals={}",
                c.schema_str(),
                c.table_str(),
                c.name_str(),
                c.org_table_str(),
                c.org_name_str(),
                c.column_type(),
                c.flags(),
                c.character_set(),
                c.column_length(),
                c.decimals()
            )
        })
        .collect()
}

/// Every result of a text query: columns, rows, affected rows, insert id,
/// warnings — or the error.
pub async fn text_results(conn: &mut Conn, sql: &str) -> String {
    let mut out = String::new();
    let mut result = match conn.query_iter(sql).await {
        Ok(r) => r,
        Err(e) => return format!("error: {e}"),
    };
    loop {
        let cols = result.columns().map(|c| columns(&c)).unwrap_or_default();
        let rows: Result<Vec<mysql_async::Row>, _> = result.collect().await;
        match rows {
            Ok(rows) => {
                let values: Vec<Vec<Value>> = rows.into_iter().map(|r| r.unwrap()).collect();
                out.push_str(&format!(
                    "cols={cols:#?} rows={values:?} affected={} insert_id={:?} warnings={}\n",
                    result.affected_rows(),
                    result.last_insert_id(),
                    result.warnings()
                ));
            }
            Err(e) => {
                out.push_str(&format!("error: {e}\n"));
                break;
            }
        }
        if result.is_empty() {
            break;
        }
    }
    out
}

/// A prepared statement's result (binary protocol).
pub async fn binary_results(conn: &mut Conn, sql: &str, params: Vec<Value>) -> String {
    let stmt = match conn.prep(sql).await {
        Ok(s) => s,
        Err(e) => return format!("prepare error: {e}"),
    };
    let params = if params.is_empty() {
        mysql_async::Params::Empty
    } else {
        mysql_async::Params::Positional(params)
    };
    let mut result = match conn.exec_iter(&stmt, params).await {
        Ok(r) => r,
        Err(e) => return format!("execute error: {e}"),
    };
    let cols = result.columns().map(|c| columns(&c)).unwrap_or_default();
    let rows: Vec<mysql_async::Row> = match result.collect().await {
        Ok(rows) => rows,
        Err(e) => return format!("error: {e}"),
    };
    let values: Vec<Vec<Value>> = rows.into_iter().map(|r| r.unwrap()).collect();
    let summary = format!(
        "cols={cols:#?} rows={values:?} affected={} insert_id={:?}",
        result.affected_rows(),
        result.last_insert_id()
    );
    drop(result);
    conn.close(stmt).await.unwrap();
    summary
}
