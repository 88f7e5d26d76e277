//! Which statement of a multi-statement, or which part of a procedure
//! call, the next result comes from: whether a set's column EOF says
//! MORE_RESULTS, and the index flags a call keeps.

use crate::mysql::StatusFlags;
use crate::translate::statement::Answers;

use super::{Ending, ResultWriter};

/// Within a procedure, the server keeps the index flags of a statement
/// for the rest of the call: a later set's column EOF still says them.
const INDEX_FLAGS: StatusFlags =
    StatusFlags::SERVER_STATUS_NO_GOOD_INDEX_USED.union(StatusFlags::SERVER_STATUS_NO_INDEX_USED);

/// The flags that stay with the session from one statement to the next.
const SESSION_FLAGS: StatusFlags = StatusFlags::SERVER_STATUS_IN_TRANS
    .union(StatusFlags::SERVER_STATUS_AUTOCOMMIT)
    .union(StatusFlags::SERVER_STATUS_IN_TRANS_READONLY)
    .union(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES);

impl ResultWriter {
    /// Whether the server's EOF after a set's column definitions says
    /// MORE_RESULTS: within a procedure call, and while a later statement
    /// of a multi-statement remains.
    pub(super) fn more_at_columns(&self) -> bool {
        if self.in_call() {
            return true;
        }
        let Some(i) = self.statement else {
            return false;
        };
        match self.statements.get(i) {
            Some(Answers::Call) => true,
            // An `EXECUTE` as the last statement may be a `CALL`'s (set)
            // or not (unset): taken as not, the more common.
            Some(Answers::One | Answers::Unknown) => i + 1 < self.statements.len(),
            None => false,
        }
    }

    /// Whether the next result comes from a procedure call.
    fn in_call(&self) -> bool {
        self.call_of.is_some()
            || self
                .statement
                .is_some_and(|i| self.statements.get(i) == Some(&Answers::Call))
    }

    /// A result ended thus (`ok`: an OK result): the index flags the
    /// server keeps for the rest of a call, and the statement of a
    /// multi-statement the next result comes from.
    pub(super) fn result_ended(&mut self, ok: bool, ending: &Ending) {
        // A later set's column EOF has the session's flags as this result
        // left them (`SET autocommit=0; SELECT 1`: no AUTOCOMMIT there).
        if let Some(status) = ending.status {
            self.status = (self.status - SESSION_FLAGS) | (status & SESSION_FLAGS);
        }
        if self.in_call() {
            self.call_flags |= ending.status.unwrap_or_default() & INDEX_FLAGS;
        }
        self.count_result(ok);
        if !self.in_call() {
            self.call_flags = StatusFlags::empty();
        }
    }

    fn count_result(&mut self, ok: bool) {
        let Some(i) = self.statement else {
            return;
        };
        self.statement = match self.statements.get(i) {
            Some(Answers::One) => Some(i + 1),
            Some(Answers::Call) => Some(if ok { i + 1 } else { i }),
            Some(Answers::Unknown) | None => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::packet::Packets;
    use crate::mysql::packet::decode;
    use crate::translate::results::test_client::{
        FINAL, MID, classic, end_msg, field, fields_msg, ok_msg, row,
    };
    use crate::translate::results::{ResultWriter, RowFormat};

    /// The MORE_RESULTS flag of each EOF after column definitions.
    fn column_eofs_say_more(out: &mut Packets) -> Vec<bool> {
        let mut buf = out.take();
        let mut after_definition = false;
        let mut more = Vec::new();
        while let Some(p) = decode(&mut buf, usize::MAX).unwrap() {
            let p = p.payload;
            if after_definition && p[0] == 0xfe && p.len() == 5 {
                let status = StatusFlags::from_bits_truncate(u16::from_le_bytes([p[3], p[4]]));
                more.push(status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS));
            }
            after_definition = p.starts_with(b"\x03def");
        }
        more
    }

    /// As MariaDB: a set's column EOF says MORE_RESULTS while a later
    /// statement remains, and in every set of a `CALL`.
    #[test]
    fn column_eofs_say_more_while_a_statement_remains() {
        use Answers::{Call, One, Unknown};
        // `results`: S a result set, O an OK result.
        let eofs = |plan: Vec<Answers>, results: &str| {
            let mut out = Packets::reply_to(0);
            let mut writer = ResultWriter::new(classic(), RowFormat::Text, MID).in_statements(plan);
            for r in results.chars() {
                let messages = match r {
                    'S' => vec![
                        fields_msg(vec![field("x", 3, 0)], vec![row(&[Some("1")])]),
                        end_msg(),
                    ],
                    _ => vec![ok_msg(0, 0, "")],
                };
                for m in &messages {
                    writer.message(&m.clone().into(), &mut out).unwrap();
                }
            }
            writer.finish(None, FINAL, 0, &mut out);
            column_eofs_say_more(&mut out)
        };
        assert_eq!(eofs(vec![One, One], "SS"), [true, false]);
        assert_eq!(eofs(vec![One, One, One], "SOS"), [true, false]);
        assert_eq!(eofs(vec![One, One], "OS"), [false]);
        assert_eq!(eofs(vec![One, One], "SO"), [true]);
        // A CALL's sets, then the statements after its own OK.
        assert_eq!(eofs(vec![Call, One], "SSOS"), [true, true, false]);
        assert_eq!(eofs(vec![One, Call], "SSSO"), [true, true, true]);
        assert_eq!(eofs(vec![One, Call, One], "SOS"), [true, false]);
        // An EXECUTE's results cannot be counted: later sets' EOFs go as
        // a single statement's.
        assert_eq!(eofs(vec![Unknown, One, One], "SSS"), [true, false, false]);
        assert_eq!(eofs(vec![One, Unknown], "SS"), [true, false]);
        // One statement (no plan): never.
        assert_eq!(eofs(vec![], "S"), [false]);
    }
}
