//! The OUT and INOUT parameters of a prepared `CALL`: a server answers
//! their values, after the procedure's own results, as one more result
//! set whose column-count EOF and terminator carry
//! `SERVER_PS_OUT_PARAMS` (with `SERVER_MORE_RESULTS_EXISTS`): that flag
//! is how drivers (Connector/J's `CallableStatement`, libmysqlclient's
//! `mysql_stmt_next_result`) tell it from a result set.
//!
//! Our gateway says how the server ended each result
//! (`QueryResult.server_status`), flag included, where its relay follows
//! the backend connection. Where no status flags cross (another psdb
//! server; a backend connection the relay does not follow: TLS, a remote
//! server), the set is recognised by what MariaDB writes in its column
//! definitions
//! (`sp_head::execute_procedure`): every column is a parameter of the
//! called routine — its table and original table are the routine's name,
//! its database the routine's, its name and original name the
//! parameter's. A procedure's own `SELECT` from a table of the same name
//! as the procedure, of unaliased columns, looks the same; nothing else
//! does.

use crate::api::pb;
use crate::translate::statement::leading_keyword;

/// The routine a `CALL` statement names (without its database), `None`
/// for any other statement.
pub fn called_routine(sql: &[u8]) -> Option<Vec<u8>> {
    let keyword = leading_keyword(sql)?;
    if !keyword.eq_ignore_ascii_case(b"CALL") {
        return None;
    }
    // `leading_keyword` borrows from `sql`: the keyword's end is where the
    // name's search starts.
    let mut i = keyword.as_ptr() as usize - sql.as_ptr() as usize + keyword.len();
    let mut name = identifier(sql, &mut i)?;
    skip_blanks(sql, &mut i);
    if sql.get(i) == Some(&b'.') {
        i += 1;
        name = identifier(sql, &mut i)?;
    }
    Some(name)
}

/// Whether a result set of a prepared `CALL` of `routine` is the set of
/// its OUT parameters (see the module's comment).
pub fn is_out_params(fields: &[pb::Field], routine: &[u8]) -> bool {
    !fields.is_empty()
        && fields.iter().all(|f| {
            f.table.eq_ignore_ascii_case(routine)
                && f.org_table.eq_ignore_ascii_case(routine)
                && !f.database.is_empty()
                && !f.name.is_empty()
                && f.name == f.org_name
        })
}

fn skip_blanks(sql: &[u8], i: &mut usize) {
    loop {
        while sql.get(*i).is_some_and(|c| c.is_ascii_whitespace()) {
            *i += 1;
        }
        let rest = &sql[(*i).min(sql.len())..];
        if rest.starts_with(b"/*") && !rest.starts_with(b"/*!") && !rest.starts_with(b"/*M!") {
            match rest[2..].windows(2).position(|w| w == b"*/") {
                Some(end) => *i += 2 + end + 2,
                None => *i = sql.len(),
            }
        } else {
            return;
        }
    }
}

/// A bare or backquoted identifier at `*i` (after blanks), moving past it.
fn identifier(sql: &[u8], i: &mut usize) -> Option<Vec<u8>> {
    skip_blanks(sql, i);
    if sql.get(*i) == Some(&b'`') {
        let mut name = Vec::new();
        let mut j = *i + 1;
        loop {
            match (sql.get(j), sql.get(j + 1)) {
                (Some(b'`'), Some(b'`')) => {
                    name.push(b'`');
                    j += 2;
                }
                (Some(b'`'), _) => {
                    *i = j + 1;
                    return Some(name);
                }
                (Some(&c), _) => {
                    name.push(c);
                    j += 1;
                }
                (None, _) => return None,
            }
        }
    }
    let start = *i;
    while sql
        .get(*i)
        .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80)
    {
        *i += 1;
    }
    (*i > start).then(|| sql[start..*i].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_called_routine_is_found_however_it_is_written() {
        let name =
            |sql: &str| called_routine(sql.as_bytes()).map(|n| String::from_utf8(n).unwrap());
        assert_eq!(name("CALL p(?, ?)").as_deref(), Some("p"));
        assert_eq!(name("  call  app.get_it (?)").as_deref(), Some("get_it"));
        assert_eq!(
            name("/* x */ CALL /* y */ `my db` . `we``ird`(?)").as_deref(),
            Some("we`ird")
        );
        assert_eq!(name("CALL p").as_deref(), Some("p"));
        assert_eq!(name("SELECT 1"), None);
        assert_eq!(name("CALL `unterminated"), None);
        assert_eq!(name("CALL"), None);
        assert_eq!(name("CALL ("), None);
    }

    fn field(db: &str, table: &str, org_table: &str, name: &str, org_name: &str) -> pb::Field {
        pb::Field {
            database: db.to_string().into(),
            table: table.to_string().into(),
            org_table: org_table.to_string().into(),
            name: name.to_string().into(),
            org_name: org_name.to_string().into(),
            ..Default::default()
        }
    }

    #[test]
    fn out_parameters_are_columns_of_the_routine() {
        let out = [
            field("app", "p", "p", "x", "x"),
            field("app", "p", "p", "y", "y"),
        ];
        assert!(is_out_params(&out, b"P"));
        assert!(!is_out_params(&out, b"q"));
        assert!(!is_out_params(&[], b"p"));
        // A procedure's own SELECTs: of variables and expressions, of
        // another table, or aliased.
        assert!(!is_out_params(&[field("", "", "", "x", "")], b"p"));
        assert!(!is_out_params(&[field("app", "t", "t", "x", "x")], b"p"));
        assert!(!is_out_params(&[field("app", "p", "p", "a", "x")], b"p"));
    }
}
