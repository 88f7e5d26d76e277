//! How each result ends: a message with neither fields nor rows, the
//! terminator held back until it is known whether another result follows
//! (EOF / OK-0xfe after a set's rows, or an OK result), its status flags
//! and warning count, and the end of the stream.

use crate::api::pb;
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::response;
use crate::mysql::{CapabilityFlags, StatusFlags};
use crate::translate::{out_params, session_track};

use super::{Ending, Held, ResultWriter, State};

/// Flags the sidecar answers for itself whatever the backend said: the
/// session's (its final status, from the session the gateway reports),
/// whether more results follow (the stream's shape), and session-state
/// tracking (which the sidecar rebuilds for its own client).
const OWN_FLAGS: StatusFlags = StatusFlags::SERVER_STATUS_IN_TRANS
    .union(StatusFlags::SERVER_STATUS_AUTOCOMMIT)
    .union(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
    .union(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES)
    .union(StatusFlags::SERVER_SESSION_STATE_CHANGED);

impl ResultWriter {
    /// End of the stream: the last terminator with the final status and
    /// warnings, or the ERR that ended the stream.
    pub fn finish(
        mut self,
        error: Option<&MysqlError>,
        status: StatusFlags,
        warnings: u16,
        out: &mut Packets,
    ) {
        let status = status - StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        // A set held back as maybe OUT parameters, then the end: it was not.
        let candidate_error = self.release_candidate(false, 0, out).err();
        let error = error.or(candidate_error.as_ref());
        let state = std::mem::replace(&mut self.state, State::Empty);
        match (state, error) {
            // Rows were cut off: the ERR replaces the set's terminator.
            (State::Open { .. } | State::Empty | State::MaybeOutParams { .. }, Some(error)) => {
                response::err(out, error)
            }
            // A complete result, then a failing statement (MySQL's shape
            // for a multi-statement whose second statement fails).
            (State::Held(held), Some(error)) => {
                let (status, warnings) = self.intermediate(&held);
                self.write_held(out, &held, status, warnings, &[]);
                response::err(out, error);
            }
            (State::Open { .. } | State::MaybeOutParams { .. }, None) => write_held_tracked(
                out,
                self.caps,
                &Held::EndOfRows(Ending::default()),
                status,
                warnings,
                &[],
            ),
            (State::Held(held), None) => {
                let status = last_status(status, held.ending());
                let rebuilt = std::mem::take(&mut self.session_state);
                self.write_held(out, &held, status, warnings, &rebuilt);
            }
            (State::Empty, None) => response::ok_tracked(
                out,
                self.caps,
                0,
                0,
                status,
                warnings,
                "",
                &self.session_state,
            ),
        }
    }

    /// A message with neither fields nor rows.
    pub(super) fn end_result(
        &mut self,
        result: &pb::QueryResult,
        out: &mut Packets,
    ) -> Result<(), MysqlError> {
        let ending = Ending::of(result);
        if self.marked_ends && matches!(self.state, State::Open { .. }) {
            self.result_ended(false, &ending);
            self.state = State::Held(Held::EndOfRows(ending));
            return Ok(());
        }
        match &mut self.state {
            State::MaybeOutParams {
                fields,
                rows,
                ended,
            } if self.marked_ends && ended.is_none() => {
                let maybe = match ending.status {
                    Some(status) => status.contains(StatusFlags::SERVER_PS_OUT_PARAMS),
                    None => self
                        .call_of
                        .as_deref()
                        .is_some_and(|routine| out_params::is_out_params(fields, routine)),
                };
                *ended = Some(ending.clone());
                if maybe && rows.len() == 1 {
                    // Written once the final OK is here: the column EOF
                    // of OUT parameters has its warning count.
                    return Ok(());
                }
                // An ordinary set of the procedure, its column EOF with
                // the flags the server ended it with.
                self.release_candidate(false, 0, out)?;
                self.result_ended(false, &ending);
                return Ok(());
            }
            // The CALL's final OK follows a one-row candidate: it is the
            // OUT parameters' set.
            State::MaybeOutParams { rows, .. } => {
                let is_out = rows.len() == 1;
                self.release_candidate(is_out, ending.warnings.unwrap_or(0), out)?;
            }
            _ => {}
        }
        self.flush_previous(out)?;
        let found_rows = self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS);
        self.state = State::Held(Held::Ok {
            affected_rows: update_counts(&result.info).map_or(
                result.rows_affected,
                |(matched, changed)| {
                    if found_rows { matched } else { changed }
                },
            ),
            insert_id: result.insert_id,
            info: result.info.clone(),
            ending: ending.clone(),
        });
        self.result_ended(true, &ending);
        Ok(())
    }

    /// Writes the terminator of whatever result is complete or open, with
    /// MORE_RESULTS_EXISTS: a new result follows.
    pub(super) fn flush_previous(&mut self, out: &mut Packets) -> Result<(), MysqlError> {
        // Another result follows a candidate: it was a procedure's set
        // (unless the server said otherwise).
        self.release_candidate(false, 0, out)?;
        let held = match std::mem::replace(&mut self.state, State::Empty) {
            State::Empty => return Ok(()),
            State::Open { .. } | State::MaybeOutParams { .. } => Held::EndOfRows(Ending::default()),
            State::Held(held) => held,
        };
        let (status, warnings) = self.intermediate(&held);
        self.write_held(out, &held, status, warnings, &[]);
        Ok(())
    }

    /// The status and warning count of a terminator a result follows:
    /// the server's, or the session's status and none.
    pub(super) fn intermediate(&self, held: &Held) -> (StatusFlags, u16) {
        let ending = held.ending();
        let status = match (ending.status, held) {
            (Some(status), _) => intermediate_status(status),
            (None, Held::EndOfRows(_)) => self.status | self.out_params_flags(),
            (None, Held::Ok { .. }) => self.status,
        };
        (status | more(), ending.warnings.unwrap_or(0))
    }
}

/// The rows an UPDATE matched and changed, from the server's info text
/// (`Rows matched: 3  Changed: 2  Warnings: 0`). A client's
/// `CLIENT_FOUND_ROWS` decides which one is the affected-row count; a psdb
/// server whose session could not be asked for the client's choice
/// (PlanetScale counts matched rows) still says both here. `None` for any
/// other text (other statements, or a server whose messages are not in
/// English).
fn update_counts(info: &str) -> Option<(u64, u64)> {
    let rest = info.strip_prefix("Rows matched: ")?;
    let (matched, rest) = rest.split_once("  Changed: ")?;
    let (changed, _) = rest.split_once("  Warnings: ")?;
    Some((matched.parse().ok()?, changed.parse().ok()?))
}

pub(super) fn more() -> StatusFlags {
    StatusFlags::SERVER_MORE_RESULTS_EXISTS
}

/// A terminator the server wrote before a later result: its own status,
/// but for session-state tracking, which the sidecar answers itself.
pub(super) fn intermediate_status(server: StatusFlags) -> StatusFlags {
    server - StatusFlags::SERVER_SESSION_STATE_CHANGED
}

/// The last terminator's status: the session's (`session`), with the
/// flags the server set for the statement.
pub(super) fn last_status(session: StatusFlags, ending: Ending) -> StatusFlags {
    session | (ending.status.unwrap_or_default() - OWN_FLAGS)
}

impl ResultWriter {
    /// Writes a held terminator with the session-state changes the server
    /// reported in it (our gateway's relay), as a server writes them in
    /// each result's OK, with its `SERVER_SESSION_STATE_CHANGED`; where
    /// the stream carries none, with `rebuilt` (the sidecar's own, for
    /// the last terminator). A classic EOF has no room for them: the
    /// server keeps them for the next OK, and so does the writer
    /// ([`session_track::merge`]).
    pub(super) fn write_held(
        &mut self,
        out: &mut Packets,
        held: &Held,
        status: StatusFlags,
        warnings: u16,
        rebuilt: &[u8],
    ) {
        let ending = held.ending();
        let Some(server) = ending.state.as_deref() else {
            return write_held_tracked(out, self.caps, held, status, warnings, rebuilt);
        };
        let tracks = self.caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK);
        let changed = ending
            .status
            .filter(|_| tracks)
            .map_or(StatusFlags::empty(), |s| {
                s & StatusFlags::SERVER_SESSION_STATE_CHANGED
            });
        let status = status | changed;
        let classic = !self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
        match held {
            Held::EndOfRows(_) if classic => {
                self.kept_state = session_track::merge(&self.kept_state, server);
                write_held_tracked(out, self.caps, held, status, warnings, &[]);
            }
            Held::Ok { .. } => {
                let kept = std::mem::take(&mut self.kept_state);
                let state = session_track::merge(&kept, server);
                write_held_tracked(out, self.caps, held, status, warnings, &state);
            }
            Held::EndOfRows(_) => {
                write_held_tracked(out, self.caps, held, status, warnings, server)
            }
        }
    }
}

/// [`write_held`], with these session-state changes.
pub(super) fn write_held_tracked(
    out: &mut Packets,
    caps: CapabilityFlags,
    held: &Held,
    status: StatusFlags,
    warnings: u16,
    state: &[u8],
) {
    match held {
        Held::EndOfRows(_) => response::end_of_rows_tracked(out, caps, status, warnings, state),
        Held::Ok {
            affected_rows,
            insert_id,
            info,
            ..
        } => response::ok_tracked(
            out,
            caps,
            *affected_rows,
            *insert_id,
            status,
            warnings,
            info,
            state,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::results::RowFormat;
    use crate::translate::results::test_client::{
        FINAL, Seen, bytes, classic, columns, end_msg, ended, field, fields_msg, id_name, modern,
        more, ok_msg, row, rows_msg, run,
    };
    use mysql_common::Value;

    #[test]
    fn ok_results() {
        assert_eq!(
            run(
                modern(),
                RowFormat::Text,
                &[ok_msg(2, 9, "Rows matched: 2")],
                None
            ),
            vec![Seen::Ok(2, 9, FINAL, 3, "Rows matched: 2".into())]
        );
        // Nothing at all: one OK with 0 rows.
        assert_eq!(
            run(modern(), RowFormat::Text, &[], None),
            vec![Seen::Ok(0, 0, FINAL, 3, String::new())]
        );
    }

    #[test]
    fn multi_results_carry_more_results_exists() {
        for caps in [modern(), classic()] {
            let messages = [
                ok_msg(1, 5, ""),
                fields_msg(id_name(), vec![row(&[Some("1"), Some("a")])]),
                end_msg(),
                fields_msg(vec![field("x", 3, 0)], vec![]),
                rows_msg(vec![row(&[Some("7")])]),
                end_msg(),
                ok_msg(4, 0, "done"),
            ];
            assert_eq!(
                run(caps, RowFormat::Text, &messages, None),
                vec![
                    Seen::Ok(1, 5, more(), 0, String::new()),
                    columns(),
                    Seen::Row(vec![bytes("1"), bytes("a")]),
                    Seen::End(more(), 0),
                    Seen::Columns(vec!["x".into()]),
                    Seen::Row(vec![bytes("7")]),
                    Seen::End(more(), 0),
                    Seen::Ok(4, 0, FINAL, 3, "done".into()),
                ]
            );
        }
    }

    /// Where the stream says how the server ended each result, a
    /// terminator a result follows is the server's (but for the session
    /// tracking flag, the sidecar's own), and the last is the session's
    /// status with the flags the server set for the statement.
    #[test]
    fn terminators_are_the_servers_where_the_stream_says() {
        const NO_INDEX: StatusFlags = StatusFlags::SERVER_STATUS_NO_INDEX_USED;
        let server_mid = StatusFlags::SERVER_STATUS_AUTOCOMMIT
            | StatusFlags::SERVER_MORE_RESULTS_EXISTS
            | NO_INDEX
            | StatusFlags::SERVER_SESSION_STATE_CHANGED;
        let a = || fields_msg(vec![field("a", 3, 0)], vec![row(&[Some("1")])]);
        let messages = [
            a(),
            ended(end_msg(), server_mid, 1),
            ended(ok_msg(2, 0, ""), server_mid, 4),
            a(),
            // The session's flags of the last are the session's.
            ended(end_msg(), StatusFlags::SERVER_STATUS_IN_TRANS | NO_INDEX, 3),
        ];
        let mid = server_mid - StatusFlags::SERVER_SESSION_STATE_CHANGED;
        for format in [RowFormat::Text, RowFormat::Binary] {
            assert_eq!(
                run(modern(), format, &messages, None),
                vec![
                    Seen::Columns(vec!["a".into()]),
                    Seen::Row(vec![row_value(format, "1")]),
                    Seen::End(mid, 1),
                    Seen::Ok(2, 0, mid, 4, String::new()),
                    Seen::Columns(vec!["a".into()]),
                    Seen::Row(vec![row_value(format, "1")]),
                    Seen::End(FINAL | NO_INDEX, 3),
                ]
            );
        }
        // Warnings alone (a backend connection the relay does not follow).
        let messages = [
            a(),
            pb::QueryResult {
                warning_count: Some(1),
                ..end_msg()
            },
            a(),
            end_msg(),
        ];
        assert_eq!(
            run(modern(), RowFormat::Text, &messages, None)[2],
            Seen::End(more(), 1)
        );
    }

    fn row_value(format: RowFormat, text: &str) -> Value {
        match format {
            RowFormat::Text => bytes(text),
            RowFormat::Binary => Value::Int(text.parse().unwrap()),
        }
    }

    #[test]
    fn a_new_set_ends_an_unterminated_one() {
        let messages = [
            fields_msg(vec![field("a", 3, 0)], vec![row(&[Some("1")])]),
            fields_msg(vec![field("b", 3, 0)], vec![row(&[Some("2")])]),
        ];
        assert_eq!(
            run(modern(), RowFormat::Binary, &messages, None),
            vec![
                Seen::Columns(vec!["a".into()]),
                Seen::Row(vec![Value::Int(1)]),
                Seen::End(more(), 0),
                Seen::Columns(vec!["b".into()]),
                Seen::Row(vec![Value::Int(2)]),
                Seen::End(FINAL, 3),
            ]
        );
    }

    /// An UPDATE's affected rows follow the client's CLIENT_FOUND_ROWS,
    /// read from the info text, whatever the server's session counted.
    #[test]
    fn update_counts_follow_the_clients_found_rows() {
        let info = "Rows matched: 3  Changed: 2  Warnings: 0";
        let found = modern() | CapabilityFlags::CLIENT_FOUND_ROWS;
        let changed = modern() - CapabilityFlags::CLIENT_FOUND_ROWS;
        for (caps, want) in [(found, 3), (changed, 2)] {
            let seen = run(caps, RowFormat::Text, &[ok_msg(3, 0, info)], None);
            assert_eq!(seen, vec![Seen::Ok(want, 0, FINAL, 3, info.into())]);
        }
        assert_eq!(
            update_counts("Records: 2  Duplicates: 0  Warnings: 0"),
            None
        );
        assert_eq!(
            update_counts("Rows matched: x  Changed: 2  Warnings: 0"),
            None
        );
    }

    fn boom() -> MysqlError {
        MysqlError {
            code: 1317,
            state: "70100".into(),
            message: "Query execution was interrupted".into(),
        }
    }

    #[test]
    fn error_cuts_off_an_open_set() {
        for caps in [modern(), classic()] {
            let messages = [fields_msg(id_name(), vec![row(&[Some("1"), Some("a")])])];
            assert_eq!(
                run(caps, RowFormat::Text, &messages, Some(&boom())),
                vec![
                    columns(),
                    Seen::Row(vec![bytes("1"), bytes("a")]),
                    Seen::Err(1317, boom().message.to_string()),
                ]
            );
        }
    }

    #[test]
    fn error_after_a_complete_result() {
        let messages = [fields_msg(id_name(), vec![]), end_msg()];
        assert_eq!(
            run(modern(), RowFormat::Text, &messages, Some(&boom())),
            vec![
                columns(),
                Seen::End(more(), 0),
                Seen::Err(1317, boom().message.to_string())
            ]
        );
        assert_eq!(
            run(
                classic(),
                RowFormat::Text,
                &[ok_msg(1, 0, "")],
                Some(&boom())
            ),
            vec![
                Seen::Ok(1, 0, more(), 0, String::new()),
                Seen::Err(1317, boom().message.to_string())
            ]
        );
        assert_eq!(
            run(modern(), RowFormat::Text, &[], Some(&boom())),
            vec![Seen::Err(1317, boom().message.to_string())]
        );
    }
}
