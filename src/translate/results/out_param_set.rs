//! The one-row set of a prepared `CALL` that may hold its OUT parameters,
//! held back until it is known whether it does (see
//! [`State::MaybeOutParams`]).

use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::{CapabilityFlags, StatusFlags};

use super::terminators::more;
use super::{Held, ResultWriter, State};

impl ResultWriter {
    /// Writes a held-back candidate set (see [`State::MaybeOutParams`]),
    /// as OUT parameters (its column EOF with `warnings`, the CALL's) or
    /// as an ordinary set — as the server flagged it, where the stream
    /// said; nothing otherwise. Its state becomes what writing it as it
    /// came would have left.
    pub(super) fn release_candidate(
        &mut self,
        out_params: bool,
        warnings: u16,
        out: &mut Packets,
    ) -> Result<(), MysqlError> {
        let state = std::mem::replace(&mut self.state, State::Empty);
        let State::MaybeOutParams {
            fields,
            rows,
            ended,
        } = state
        else {
            self.state = state;
            return Ok(());
        };
        let flagged = ended.as_ref().and_then(|ending| ending.status);
        self.out_params = flagged.map_or(out_params, |s| {
            s.contains(StatusFlags::SERVER_PS_OUT_PARAMS)
        });
        // A server sends OUT parameters only to a client that said it
        // reads them (`Protocol_binary::send_out_parameters`); the
        // gateway's driver did, so a client that did not (PHP's mysqlnd)
        // gets the procedure's results and its final OK alone, as
        // directly — the set would be unreadable to it.
        if self.out_params && !self.caps.contains(CapabilityFlags::CLIENT_PS_MULTI_RESULTS) {
            self.out_params = false;
            return Ok(());
        }
        let warnings = if self.out_params { warnings } else { 0 };
        self.write_columns(&fields, flagged, warnings, out);
        self.state = State::Open { fields };
        self.rows(&rows, out)?;
        if let Some(ending) = ended {
            self.state = State::Held(Held::EndOfRows(ending));
        }
        Ok(())
    }

    /// `SERVER_PS_OUT_PARAMS` (with MORE_RESULTS, as a server sets both)
    /// for the EOFs of an OUT-parameter result set.
    pub(super) fn out_params_flags(&self) -> StatusFlags {
        if self.out_params {
            StatusFlags::SERVER_PS_OUT_PARAMS | more()
        } else {
            StatusFlags::empty()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pb;
    use crate::translate::results::RowFormat;
    use crate::translate::results::test_client::{
        FINAL, MID, Seen, client, end_msg, ended, field, fields_msg, modern, more, ok_msg, row,
        rows_msg,
    };
    use mysql_common::Value;

    /// What a client sees of a prepared `CALL` of `routine` answered with
    /// `messages`.
    fn prepared_call(routine: &[u8], messages: &[pb::QueryResult]) -> Vec<Seen> {
        let mut out = Packets::reply_to(0);
        let mut writer =
            ResultWriter::new(modern(), RowFormat::Binary, MID).in_call_of(Some(routine.to_vec()));
        for m in messages {
            writer.message(&m.clone().into(), &mut out).unwrap();
        }
        writer.finish(None, FINAL, 3, &mut out);
        client(&mut out, modern(), RowFormat::Binary)
    }

    /// A prepared CALL's set whose columns are the routine's parameters is
    /// flagged SERVER_PS_OUT_PARAMS when it is the last (the final OK
    /// follows) and one row; otherwise it is the procedure's own.
    #[test]
    fn out_parameters_are_flagged_only_as_the_last_one_row_set() {
        let param = |name: &str| pb::Field {
            database: "app".into(),
            table: "p".into(),
            org_table: "p".into(),
            org_name: bytes::Bytes::copy_from_slice(name.as_bytes()),
            ..field(name, 3, 0)
        };
        let call = |messages: &[pb::QueryResult]| prepared_call(b"P", messages);
        let flagged = more() | StatusFlags::SERVER_PS_OUT_PARAMS;
        let x = || Seen::Columns(vec!["x".into()]);
        let final_ok = || Seen::Ok(0, 0, FINAL, 3, String::new());
        let one = || fields_msg(vec![param("x")], vec![row(&[Some("6")])]);
        // The one-row set, flagged as OUT parameters, then the final OK.
        let out_params = || {
            vec![
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(flagged, 0),
                final_ok(),
            ]
        };
        assert_eq!(call(&[one(), end_msg(), ok_msg(0, 0, "")]), out_params());
        // Rows in their own messages, as a long result streams.
        assert_eq!(
            call(&[
                fields_msg(vec![param("x")], vec![]),
                rows_msg(vec![row(&[Some("6")])]),
                end_msg(),
                ok_msg(0, 0, "")
            ]),
            out_params()
        );
        // Another set follows: the procedure's own.
        assert_eq!(
            call(&[one(), end_msg(), one(), end_msg(), ok_msg(0, 0, "")]),
            vec![
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(more(), 0),
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(flagged, 0),
                final_ok()
            ]
        );
        // Two rows, or none: the procedure's own.
        let two = fields_msg(vec![param("x")], vec![row(&[Some("1")]), row(&[Some("2")])]);
        assert_eq!(
            call(&[two, end_msg(), ok_msg(0, 0, "")]),
            vec![
                x(),
                Seen::Row(vec![Value::Int(1)]),
                Seen::Row(vec![Value::Int(2)]),
                Seen::End(more(), 0),
                final_ok()
            ]
        );
        let none = fields_msg(vec![param("x")], vec![]);
        assert_eq!(
            call(&[none, end_msg(), ok_msg(0, 0, "")]),
            vec![x(), Seen::End(more(), 0), final_ok()]
        );
    }

    /// A client without CLIENT_PS_MULTI_RESULTS (PHP's mysqlnd) gets no
    /// OUT parameters, flagged or guessed: a server sends them only to
    /// clients that read them.
    #[test]
    fn out_parameters_go_only_to_clients_that_read_them() {
        let caps = modern() - CapabilityFlags::CLIENT_PS_MULTI_RESULTS;
        let param = pb::Field {
            database: "app".into(),
            table: "p".into(),
            org_table: "p".into(),
            org_name: "x".into(),
            ..field("x", 3, 0)
        };
        let server_more =
            StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        let flagged = server_more | StatusFlags::SERVER_PS_OUT_PARAMS;
        let own = || fields_msg(vec![field("a", 3, 0)], vec![row(&[Some("5")])]);
        let out_params = || fields_msg(vec![param.clone()], vec![row(&[Some("6")])]);
        let final_ok = || ended(ok_msg(0, 0, ""), StatusFlags::SERVER_STATUS_AUTOCOMMIT, 3);
        for messages in [
            // Flagged by the server.
            vec![
                own(),
                ended(end_msg(), server_more, 0),
                out_params(),
                ended(end_msg(), flagged, 0),
                final_ok(),
            ],
            // Recognised where the stream does not say.
            vec![own(), end_msg(), out_params(), end_msg(), ok_msg(0, 0, "")],
        ] {
            let mut out = Packets::reply_to(0);
            let mut writer =
                ResultWriter::new(caps, RowFormat::Binary, MID).in_call_of(Some(b"p".to_vec()));
            for m in &messages {
                writer.message(&m.clone().into(), &mut out).unwrap();
            }
            writer.finish(None, FINAL, 3, &mut out);
            let seen = client(&mut out, caps, RowFormat::Binary);
            assert_eq!(seen.len(), 4, "{seen:?}");
            assert_eq!(seen[0], Seen::Columns(vec!["a".into()]));
            assert_eq!(seen[1], Seen::Row(vec![Value::Int(5)]));
            assert!(
                matches!(&seen[2], Seen::End(s, 0) if s.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)),
                "{seen:?}"
            );
            assert!(matches!(&seen[3], Seen::Ok(0, 0, _, 3, _)), "{seen:?}");
        }
    }

    /// A prepared CALL's set is its OUT parameters because the server
    /// flagged it, where the stream says: a set that looks like them is
    /// not, and one that does not look like them is.
    #[test]
    fn out_parameters_are_the_set_the_server_flagged() {
        let call = |messages: &[pb::QueryResult]| prepared_call(b"p", messages);
        let look_alike = pb::Field {
            database: "app".into(),
            table: "p".into(),
            org_table: "p".into(),
            org_name: "x".into(),
            ..field("x", 3, 0)
        };
        let server_more =
            StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        let flagged = server_more | StatusFlags::SERVER_PS_OUT_PARAMS;
        let final_ok = || ended(ok_msg(0, 0, ""), StatusFlags::SERVER_STATUS_AUTOCOMMIT, 3);
        let x = || Seen::Columns(vec!["x".into()]);
        assert_eq!(
            call(&[
                fields_msg(vec![look_alike], vec![row(&[Some("6")])]),
                ended(end_msg(), server_more, 0),
                final_ok(),
            ]),
            vec![
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(server_more, 0),
                Seen::Ok(0, 0, FINAL, 3, String::new())
            ]
        );
        assert_eq!(
            call(&[
                fields_msg(vec![field("x", 3, 0)], vec![row(&[Some("6")])]),
                ended(end_msg(), flagged, 0),
                final_ok(),
            ]),
            vec![
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(flagged, 0),
                Seen::Ok(0, 0, FINAL, 3, String::new())
            ]
        );
    }
}
