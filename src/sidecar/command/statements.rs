//! The connection's prepared statements, by the ids the client was given,
//! each charged to the connection's memory budget for what it holds: its
//! text, its parameters' types and its long data.

use std::collections::HashMap;

use bytes::Bytes;

use crate::api::pb::BindVariable;
use crate::mysql::MysqlError;
use crate::mysql::params::{ParamType, StatementParams};
use crate::sidecar::budget::{Charge, ConnectionBudget};

/// What keeping a statement costs besides its text and parameter types:
/// its place in the table, its parameter state, its id. A guess on the
/// high side, so that many small statements are bounded too.
const STATEMENT_OVERHEAD: usize = 512;

/// A prepared statement: the text, and what its parameters were bound to.
pub struct Prepared {
    /// The client's bytes, in its character set (a copy: a slice would
    /// keep the whole packet it came in alive).
    pub sql: Bytes,
    pub params: StatementParams,
    /// Columns of its result set (0: none), as the prepare reported them:
    /// only a statement with a result set opens a cursor.
    pub columns: usize,
    /// Some result column is a FLOAT (see [`needs_backend_prepare`]).
    pub float_columns: bool,
    /// Its memory, charged to the connection (given back when dropped).
    charge: Charge,
}

/// How much long data one statement may hold (all its parameters
/// together: one request carries them all).
#[derive(Clone, Copy, Debug)]
pub struct LongDataLimits {
    /// The sidecar's `max_allowed_packet`.
    pub max_packet: usize,
    /// The largest request the gateway takes (0: not known).
    pub max_request: usize,
}

impl Prepared {
    /// The statement, charged to `budget`; refused (1461, or 1041 when the
    /// process is out of budget) if it does not fit.
    pub fn new(
        sql: &[u8],
        params: u16,
        columns: usize,
        float_columns: bool,
        budget: &ConnectionBudget,
    ) -> Result<Self, MysqlError> {
        let mut charge = budget.charge();
        let cost =
            STATEMENT_OVERHEAD + sql.len() + usize::from(params) * std::mem::size_of::<ParamType>();
        charge.set(cost).map_err(|e| e.statement_refused())?;
        Ok(Self {
            sql: Bytes::copy_from_slice(sql),
            params: StatementParams::new(params),
            columns,
            float_columns,
            charge,
        })
    }

    /// COM_STMT_SEND_LONG_DATA. Refusals wait for the next execute (the
    /// command has no answer): more than the gateway takes in a request
    /// (1153 naming its limit), more than `max_allowed_packet` (MariaDB's
    /// 1105), more than the connection's budget (1153) or the process's
    /// (1041). The data is charged before it is kept.
    pub fn send_long_data(&mut self, param: u16, data: &[u8], limits: LongDataLimits) {
        if self.params.long_data_refused() {
            return;
        }
        let held = self.params.long_data_len().saturating_add(data.len());
        if limits.max_request > 0
            && limits.max_request < limits.max_packet
            && held > limits.max_request
        {
            self.params
                .refuse_long_data(too_large_for_gateway(param, held, limits.max_request));
        } else if let Err(e) = self.charge.set(self.base_cost().saturating_add(held)) {
            let what = format!(
                "the statement's long data ({held} bytes with this part of parameter {param})"
            );
            self.params.refuse_long_data(e.value_refused(&what));
        } else {
            self.params.send_long_data(param, data, limits.max_packet);
        }
        self.settle();
    }

    /// Charges what is held now (after an execute consumed the long data,
    /// or a reset dropped it: never more than before).
    pub fn settle(&mut self) {
        let held = self.base_cost() + self.params.long_data_len();
        if held <= self.charge.bytes() {
            let _ = self.charge.set(held);
        }
    }

    fn base_cost(&self) -> usize {
        STATEMENT_OVERHEAD
            + self.sql.len()
            + usize::from(self.params.count()) * std::mem::size_of::<ParamType>()
    }
}

/// ER_NET_PACKET_TOO_LARGE for long data that no request could carry.
fn too_large_for_gateway(param: u16, held: usize, limit: usize) -> MysqlError {
    MysqlError {
        code: 1153,
        state: "08S01".into(),
        message: format!(
            "Got a packet bigger than 'max_allowed_packet' bytes: the statement's long data ({held} bytes with this part of parameter {param}) is larger than the gateway's max_request_bytes ({limit} bytes); not sent, and the statement was not run"
        ).into(),
    }
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
/// statement at the backend (`ExecuteRequest.prepared`): every one with a
/// parameter, a `CALL` (its OUT arguments must be parameters) and one with
/// FLOAT columns (their text has ~6 digits). The server types a result
/// column made of a parameter by the parameter's type (`SELECT CAST(? AS
/// SIGNED)` of an INT is a nullable BIGINT of length 11) and one made of a
/// literal by its text (a NOT NULL INT of length 2), so only a parameter
/// answers as directly. Our gateway keeps every parameter a parameter
/// where its relay puts the client's types back, and prepares each text
/// once per backend connection (`gateway::binary::run_cached`);
/// elsewhere it keeps those literals would lose (see `gateway::binary`).
pub fn needs_backend_prepare(
    is_call: bool,
    float_columns: bool,
    binds: &HashMap<String, BindVariable>,
) -> bool {
    is_call || float_columns || !binds.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pb::Type;

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
    fn every_execute_with_a_parameter_is_prepared_at_the_backend() {
        let one = binds(&[(Type::Int64, "1")]);
        let none = binds(&[]);
        assert!(needs_backend_prepare(false, false, &one));
        assert!(!needs_backend_prepare(false, false, &none));
        assert!(needs_backend_prepare(true, false, &none));
        assert!(needs_backend_prepare(false, true, &none));
    }
}
