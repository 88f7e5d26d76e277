//! The connection's prepared statements, by the ids the client was given.

use std::collections::HashMap;

use bytes::Bytes;

use crate::mysql::params::StatementParams;

/// A prepared statement: the text, and what its parameters were bound to.
pub struct Prepared {
    /// The client's bytes, in its character set.
    pub sql: Bytes,
    pub params: StatementParams,
    /// Columns of its result set (0: none), as the prepare reported them:
    /// only a statement with a result set opens a cursor.
    pub columns: usize,
    /// Some result column is a FLOAT (see `backend_prepare`).
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
