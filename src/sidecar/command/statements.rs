//! The connection's prepared statements, by the ids the client was given.

use std::collections::HashMap;

use bytes::Bytes;

use crate::api::pb::{BindVariable, Type};
use crate::mysql::params::StatementParams;
use crate::mysql::temporal::DateTime;

/// A prepared statement: the text, and what its parameters were bound to.
pub struct Prepared {
    /// The client's bytes, in its character set.
    pub sql: Bytes,
    pub params: StatementParams,
    /// Columns of its result set (0: none), as the prepare reported them:
    /// only a statement with a result set opens a cursor.
    pub columns: usize,
    /// Some result column is a FLOAT (see [`needs_backend_prepare`]).
    pub float_columns: bool,
}

pub struct Statements {
    by_id: HashMap<u32, Prepared>,
    /// The id the next statement gets: never 0, which clients take for
    /// "no statement".
    next_id: u32,
}

impl Default for Statements {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
            next_id: 1,
        }
    }
}

impl Statements {
    /// Keeps `statement` and returns its id.
    pub fn insert(&mut self, statement: Prepared) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.by_id.insert(id, statement);
        id
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut Prepared> {
        self.by_id.get_mut(&id)
    }

    pub fn remove(&mut self, id: u32) {
        self.by_id.remove(&id);
    }

    pub fn clear(&mut self) {
        self.by_id.clear();
    }
}

/// Whether a COM_STMT_EXECUTE asks the gateway to run it as a prepared
/// statement at the backend (`ExecuteRequest.prepared`), which costs a
/// prepare there per execute: where literals and text rows would lose
/// something. A `CALL` (its OUT arguments must be parameters), FLOAT
/// columns (their text has ~6 digits), FLOAT and DOUBLE parameters (a
/// literal is a DOUBLE of another length), DATETIME/TIMESTAMP/TIME ones
/// (a parameter is nullable, a literal is not; zero and invalid dates),
/// and a zero DATE, which no literal can say. Everything else is exact as
/// literals and text.
pub fn needs_backend_prepare(
    is_call: bool,
    float_columns: bool,
    binds: &HashMap<String, BindVariable>,
) -> bool {
    let needs = |v: &BindVariable| match Type::try_from(v.r#type) {
        Ok(Type::Float32 | Type::Float64 | Type::Datetime | Type::Timestamp | Type::Time) => true,
        Ok(Type::Date) => DateTime::is_zero_in_date(&v.value),
        _ => false,
    };
    is_call || float_columns || binds.values().any(needs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binds(list: &[(Type, &str)]) -> HashMap<String, BindVariable> {
        list.iter()
            .enumerate()
            .map(|(i, &(ty, value))| {
                let var = BindVariable {
                    r#type: ty as i32,
                    value: Bytes::copy_from_slice(value.as_bytes()),
                    values: Vec::new(),
                };
                (format!("v{}", i + 1), var)
            })
            .collect()
    }

    #[test]
    fn only_what_text_would_lose_is_prepared_at_the_backend() {
        let exact = binds(&[
            (Type::Int64, "1"),
            (Type::Varchar, "x"),
            (Type::Varbinary, "\0"),
            (Type::Decimal, "1.5"),
            (Type::Date, "2024-02-29"),
            (Type::Date, "2023-02-29"),
        ]);
        assert!(!needs_backend_prepare(false, false, &exact));
        assert!(needs_backend_prepare(true, false, &exact));
        assert!(needs_backend_prepare(false, true, &exact));
        for (ty, value) in [
            (Type::Float32, "1e0"),
            (Type::Float64, "1e0"),
            (Type::Datetime, "2024-02-29 00:00:00"),
            (Type::Timestamp, "2024-02-29 00:00:00"),
            (Type::Time, "1:00:00"),
            (Type::Date, "0000-00-00"),
            (Type::Date, "2024-00-10"),
        ] {
            assert!(
                needs_backend_prepare(false, false, &binds(&[(ty, value)])),
                "{ty:?} {value}"
            );
        }
    }
}
