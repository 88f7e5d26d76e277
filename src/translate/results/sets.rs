//! A result set's start, column definitions and rows.

use crate::api::pb;
use crate::api::row_view::RowView;
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::response;
use crate::mysql::{CapabilityFlags, StatusFlags};
use crate::translate::connection_status::{self, StatusColumns};
use crate::translate::out_params;
use crate::translate::to_mysql::{self, binary_row, text_row};

use super::terminators::{intermediate_status, more};
use super::{ResultWriter, RowFormat, State};

impl ResultWriter {
    /// Column count, definitions and (classic clients) their EOF. Whatever
    /// came before is complete, so its terminator goes out now.
    pub(super) fn start_set(
        &mut self,
        fields: &[pb::Field],
        out: &mut Packets,
    ) -> Result<(), MysqlError> {
        self.flush_previous(out)?;
        self.out_params = false;
        self.status_columns = self
            .connection
            .as_ref()
            .and_then(|_| StatusColumns::of(fields));
        // Our gateway's streams say at each set's end whether the server
        // flagged it (else the guess), so any one-row set may be; another
        // psdb server's say nothing: a set that looks like them.
        let maybe_out_params = self.format == RowFormat::Binary
            && self.call_of.as_deref().is_some_and(|routine| {
                self.marked_ends || out_params::is_out_params(fields, routine)
            });
        if maybe_out_params {
            self.state = State::MaybeOutParams {
                fields: fields.to_vec(),
                rows: Vec::new(),
                ended: None,
            };
            return Ok(());
        }
        self.write_columns(fields, None, 0, out);
        Ok(())
    }

    /// A set's column count, definitions and (classic clients) their EOF:
    /// with the status the server ended the set with (`ended`) where it is
    /// known before they are written (a held-back set), and `warnings`.
    pub(super) fn write_columns(
        &mut self,
        fields: &[pb::Field],
        ended: Option<StatusFlags>,
        warnings: u16,
        out: &mut Packets,
    ) {
        response::result_set_header(out, fields.len() as u64);
        for field in fields {
            to_mysql::column_definition(out, self.style, field);
        }
        if !self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF) {
            let more_follow = if self.more_at_columns() {
                more()
            } else {
                StatusFlags::empty()
            };
            let status = match ended {
                Some(status) => intermediate_status(status) | more_follow,
                None => self.status | more_follow | self.out_params_flags() | self.call_flags,
            };
            response::eof(out, self.caps, status, warnings);
        }
        self.state = State::Open {
            fields: fields.to_vec(),
        };
    }

    pub(super) fn rows(&mut self, rows: &[RowView], out: &mut Packets) -> Result<(), MysqlError> {
        if let State::MaybeOutParams { rows: held, .. } = &mut self.state {
            if held.len() + rows.len() <= 1 {
                held.extend_from_slice(rows);
                return Ok(());
            }
            // OUT parameters are one row: this is a result set.
            self.release_candidate(false, 0, out)?;
        }
        let State::Open { fields } = &self.state else {
            if rows.is_empty() {
                return Ok(());
            }
            return Err(MysqlError {
                code: 1105,
                state: "HY000".into(),
                message: "Malformed result from the gateway: rows without columns".into(),
            });
        };
        for row in rows {
            let rewritten = match (self.status_columns, &self.connection) {
                (Some(columns), Some(status)) => {
                    connection_status::rewritten_row(row, columns, status)
                }
                _ => None,
            };
            let row = rewritten.as_ref().unwrap_or(row);
            match self.format {
                RowFormat::Text => {
                    if row.len() != fields.len() {
                        return Err(MysqlError {
                            code: 1105,
                            state: "HY000".into(),
                            message: format!(
                                "Malformed row from the gateway: {} values for {} columns",
                                row.len(),
                                fields.len()
                            )
                            .into(),
                        });
                    }
                    text_row(out, row)?;
                }
                RowFormat::Binary => binary_row(out, fields, row)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::results::test_client::{
        FINAL, Seen, bytes, classic, columns, end_msg, fields_msg, id_name, modern, row, rows_msg,
        run,
    };
    use mysql_common::Value;

    #[test]
    fn one_streamed_set_text_and_binary() {
        for caps in [modern(), classic()] {
            let messages = [
                fields_msg(id_name(), vec![row(&[Some("1"), Some("a")])]),
                rows_msg(vec![row(&[Some("2"), None]), row(&[None, Some("😀")])]),
                end_msg(),
            ];
            assert_eq!(
                run(caps, RowFormat::Text, &messages, None),
                vec![
                    columns(),
                    Seen::Row(vec![bytes("1"), bytes("a")]),
                    Seen::Row(vec![bytes("2"), Value::NULL]),
                    Seen::Row(vec![Value::NULL, bytes("😀")]),
                    Seen::End(FINAL, 3),
                ]
            );
            assert_eq!(
                run(caps, RowFormat::Binary, &messages, None),
                vec![
                    columns(),
                    Seen::Row(vec![Value::Int(1), bytes("a")]),
                    Seen::Row(vec![Value::Int(2), Value::NULL]),
                    Seen::Row(vec![Value::NULL, bytes("😀")]),
                    Seen::End(FINAL, 3),
                ]
            );
        }
    }

    #[test]
    fn empty_result_set() {
        let messages = [fields_msg(id_name(), vec![]), end_msg()];
        assert_eq!(
            run(classic(), RowFormat::Binary, &messages, None),
            vec![columns(), Seen::End(FINAL, 3)]
        );
    }

    #[test]
    fn unencodable_rows_end_in_err() {
        // A binary row whose INT value is not a number.
        let messages = [
            fields_msg(id_name(), vec![row(&[Some("1"), Some("a")])]),
            rows_msg(vec![row(&[Some("x"), Some("b")])]),
        ];
        let seen = run(modern(), RowFormat::Binary, &messages, None);
        assert_eq!(seen.len(), 3);
        assert!(
            matches!(&seen[2], Seen::Err(1105, m) if m.contains("'id'")),
            "{seen:?}"
        );
        // A text row with the wrong number of values.
        let messages = [fields_msg(id_name(), vec![row(&[Some("1")])])];
        let seen = run(classic(), RowFormat::Text, &messages, None);
        assert!(matches!(&seen[1], Seen::Err(1105, _)), "{seen:?}");
        // Rows before any columns.
        let seen = run(
            modern(),
            RowFormat::Text,
            &[rows_msg(vec![row(&[Some("1")])])],
            None,
        );
        assert!(matches!(&seen[0], Seen::Err(1105, _)), "{seen:?}");
    }
}
