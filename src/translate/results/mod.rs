//! A streamed psdb result → MySQL result packets, written as the messages
//! arrive so rows flow through with bounded memory.
//!
//! The sidecar runs each COM_QUERY / COM_STMT_EXECUTE as one psdb
//! `StreamExecute`. Our gateway shapes the stream thus:
//! - a `QueryResult` with `fields` starts a new result set;
//! - one with `rows` continues the current set;
//! - one with neither ends the open set if there is one, and otherwise is
//!   an OK result (`rows_affected`, `insert_id`, `info`).
//!
//! Another psdb server (PlanetScale) sends a set's fields in its first
//! message and no end marker ([`ResultWriter::with_marked_ends`]`(false)`):
//! there a message with neither fields nor rows is always an OK result (a
//! procedure's final OK), and a second result set — which such a stream
//! cannot delimit for certain — ends the answer with an error.
//!
//! A finished result's terminator (EOF / OK-0xfe for a set, OK for an OK
//! result) is held back until we know whether another result follows: then
//! it carries `SERVER_MORE_RESULTS_EXISTS`; at [`ResultWriter::finish`] it
//! carries the final status and warning count — which only the end of the
//! stream knows.
//!
//! Our gateway's end markers say how the backend ended each result
//! ([`Ending`]: `server_status`, `warning_count`): an intermediate
//! terminator is the server's, the last one the session's status with the
//! flags the server set for the statement (`SERVER_QUERY_NO_INDEX_USED`,
//! …). Without them (another psdb server, a backend connection the
//! gateway's relay does not follow) intermediate terminators carry the
//! session's status and no warnings.
//!
//! The writer is one state machine: [`ResultWriter`], the state it keeps
//! between messages and its public API are here, and its transitions are
//! split by what they write (the end of the stream with the terminators):
//! - `sets`: a result set's column count, definitions and rows;
//! - `terminators`: how each result ends — the terminator held back until
//!   the next result or the end of the stream ([`ResultWriter::finish`]),
//!   its status and warnings, and OK results;
//! - `statements`: which statement of a multi-statement or `CALL` the next
//!   result comes from, and so whether a set's column EOF says
//!   MORE_RESULTS;
//! - `out_param_set`: a prepared `CALL`'s one-row set, held back until it
//!   is known whether it holds the OUT parameters.
//!
//! Each file's tests sit at its end; `test_client` (tests only) builds the
//! psdb messages they feed and decodes the packets as a client would.

mod out_param_set;
mod sets;
mod statements;
mod terminators;
#[cfg(test)]
mod test_client;

use std::sync::Arc;

use bytes::Bytes;

use crate::api::pb;
use crate::api::row_view::{ResultView, RowView};
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::response::ColumnStyle;
use crate::mysql::{CapabilityFlags, StatusFlags};
use crate::translate::connection_status::{ConnectionStatus, StatusColumns};
use crate::translate::statement::Answers;

/// How rows are encoded: text for COM_QUERY, binary for COM_STMT_EXECUTE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    Text,
    Binary,
}

/// How the backend ended a result: the status flags and warning count
/// of the packet after its rows (or of its OK), where the stream says,
/// and the session-state information the server put in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ending {
    status: Option<StatusFlags>,
    warnings: Option<u16>,
    /// The server's own session-state information (our gateway's relay:
    /// empty where the server reported no change). Written as it is to a
    /// client that tracks session state, in place of what the sidecar
    /// rebuilds.
    state: Option<Bytes>,
}

impl Ending {
    fn of(result: &pb::QueryResult) -> Self {
        Self {
            state: result.session_state_info.clone(),
            status: result
                .server_status
                .and_then(|s| u16::try_from(s).ok())
                .map(StatusFlags::from_bits_retain),
            warnings: result
                .warning_count
                .map(|w| u16::try_from(w).unwrap_or(u16::MAX)),
        }
    }
}

/// A finished result whose terminator has not been written yet.
#[derive(Debug)]
enum Held {
    /// The end of a result set's rows.
    EndOfRows(Ending),
    /// A statement without a result set.
    Ok {
        affected_rows: u64,
        insert_id: u64,
        info: String,
        ending: Ending,
    },
}

impl Held {
    fn ending(&self) -> Ending {
        match self {
            Self::EndOfRows(ending) | Self::Ok { ending, .. } => ending.clone(),
        }
    }
}

#[derive(Debug)]
enum State {
    /// Nothing written yet.
    Empty,
    /// A result set's rows are flowing; its fields decode binary rows.
    Open { fields: Vec<pb::Field> },
    /// A one-row set of a prepared CALL that may hold its OUT parameters,
    /// held back unwritten: its column EOF says `SERVER_PS_OUT_PARAMS`
    /// before the rows. It does if the server flagged its end so, or,
    /// where the stream does not say, if it looks like them (see
    /// [`out_params`](crate::translate::out_params)) and the CALL's final
    /// OK comes next (`ended`: its end, once seen).
    MaybeOutParams {
        fields: Vec<pb::Field>,
        rows: Vec<RowView>,
        ended: Option<Ending>,
    },
    /// The last result is complete but its terminator waits.
    Held(Held),
}

/// Writes one statement's (or multi-statement's) results as MySQL packets.
///
/// If [`message`](Self::message) fails (a row the client could not be
/// sent), pass that error to [`finish`](Self::finish): the ERR then takes
/// the place of the open set's terminator.
#[derive(Debug)]
pub struct ResultWriter {
    caps: CapabilityFlags,
    format: RowFormat,
    style: ColumnStyle,
    /// Status for terminators before the last one.
    status: StatusFlags,
    state: State,
    /// Session-state changes for the final OK (see
    /// [`ResultWriter::session_state`]).
    session_state: Vec<u8>,
    /// The server's session-state changes of a set's end that a classic
    /// EOF could not carry, for the next OK.
    kept_state: Vec<u8>,
    /// The stream marks where each result ends (our gateway's).
    marked_ends: bool,
    /// The statement is a `CALL` of this routine: a server says
    /// MORE_RESULTS in every EOF while a procedure runs, and flags the
    /// OUT parameters' set of a prepared one (see
    /// [`out_params`](crate::translate::out_params)).
    call_of: Option<Vec<u8>>,
    /// The open or last result set holds OUT parameters: its EOFs carry
    /// `SERVER_PS_OUT_PARAMS`.
    out_params: bool,
    /// A multi-statement's statements (see [`ResultWriter::in_statements`]).
    statements: Vec<Answers>,
    /// Which of them the next result comes from; `None` once that is not
    /// known (after a statement whose results cannot be counted).
    statement: Option<usize>,
    /// The index flags the server set so far in the running procedure
    /// call (see [`INDEX_FLAGS`](statements::INDEX_FLAGS)).
    call_flags: StatusFlags,
    /// The client connection's own status variables, written in place of
    /// the backend connection's (see [`crate::translate::connection_status`]).
    connection: Option<Arc<ConnectionStatus>>,
    /// The open set's columns of status variables' names and values.
    status_columns: Option<StatusColumns>,
}

impl ResultWriter {
    /// `status` goes into intermediate terminators (the session's status
    /// while the statement runs, e.g. IN_TRANS).
    pub fn new(caps: CapabilityFlags, format: RowFormat, status: StatusFlags) -> Self {
        Self {
            caps,
            format,
            style: ColumnStyle::default(),
            status: status - StatusFlags::SERVER_MORE_RESULTS_EXISTS,
            state: State::Empty,
            session_state: Vec::new(),
            kept_state: Vec::new(),
            marked_ends: true,
            call_of: None,
            out_params: false,
            statements: Vec::new(),
            statement: None,
            call_flags: StatusFlags::empty(),
            connection: None,
            status_columns: None,
        }
    }

    /// Rows of status variables that describe the connection itself say
    /// `status`'s values (see [`crate::translate::connection_status`]).
    pub fn with_connection_status(mut self, status: Option<Arc<ConnectionStatus>>) -> Self {
        self.connection = status;
        self
    }

    /// The statement is a multi-statement of these statements: a result
    /// set's column EOF says MORE_RESULTS while a later one remains, as
    /// the server's does. Results are counted to statements as they end
    /// (one each; a `CALL`'s up to its own OK); after a statement whose
    /// results cannot be counted (`Answers::Unknown`), later sets' column
    /// EOFs go without the flag, as a single statement's.
    pub fn in_statements(mut self, statements: Vec<Answers>) -> Self {
        self.statement = (!statements.is_empty()).then_some(0);
        self.statements = statements;
        self
    }

    /// The statement is a single `CALL` of `routine`: every set's column
    /// EOF says MORE_RESULTS (the server sets it for the whole call), and
    /// in the binary protocol the OUT parameters' set is flagged as a
    /// server flags it.
    pub fn in_call_of(mut self, routine: Option<Vec<u8>>) -> Self {
        self.call_of = routine;
        self
    }

    /// Whether the stream marks where each result ends (our gateway's
    /// do; a plain psdb server's do not).
    pub fn with_marked_ends(mut self, marked: bool) -> Self {
        self.marked_ends = marked;
        self
    }

    /// Session-state changes (encoded tracker entries) that the final OK
    /// reports, as the server reports them on the OK of the statement
    /// that made them.
    pub fn session_state(&mut self, state: Vec<u8>) {
        self.session_state = state;
    }

    /// How column definitions describe JSON (MySQL's by default).
    pub fn with_style(mut self, style: ColumnStyle) -> Self {
        self.style = style;
        self
    }

    /// One streamed message's result, in order.
    pub fn message(&mut self, result: &ResultView, out: &mut Packets) -> Result<(), MysqlError> {
        if !result.head.fields.is_empty() {
            if !self.marked_ends && !self.is_empty() {
                return Err(unmarked_results());
            }
            self.start_set(&result.head.fields, out)?;
        } else if result.rows.is_empty() {
            return self.end_result(&result.head, out);
        }
        self.rows(&result.rows, out)
    }

    /// Nothing written yet: the stream has not started a result.
    pub fn is_empty(&self) -> bool {
        matches!(self.state, State::Empty)
    }

    /// Writes a complete unary `Execute` result (one `QueryResult`): a
    /// result set or an OK, or an ERR if a row cannot be encoded.
    pub fn unary(
        caps: CapabilityFlags,
        format: RowFormat,
        result: &ResultView,
        status: StatusFlags,
        warnings: u16,
        out: &mut Packets,
    ) {
        let mut writer = Self::new(caps, format, status);
        let error = writer.message(result, out).err();
        writer.finish(error.as_ref(), status, warnings, out);
    }
}

/// A second result in a stream that does not mark result ends.
fn unmarked_results() -> MysqlError {
    MysqlError {
        code: 1235,
        state: "42000".into(),
        message: "This version of myquic doesn't yet support 'several result sets through a psdb \
                  server other than a myquic gateway (its results carry no end markers)'"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::test_client::{
        FINAL, MID, Seen, bytes, classic, client, columns, field, fields_msg, id_name, modern,
        more, ok_msg, row, rows_msg, run, run_marked,
    };
    use super::*;
    use crate::mysql::packet::decode;
    use mysql_common::Value;

    #[test]
    fn a_plain_psdb_stream_without_end_message() {
        let messages = [
            fields_msg(id_name(), vec![]),
            rows_msg(vec![row(&[Some("1"), Some("a")])]),
        ];
        assert_eq!(
            run(modern(), RowFormat::Text, &messages, None),
            vec![
                columns(),
                Seen::Row(vec![bytes("1"), bytes("a")]),
                Seen::End(FINAL, 3),
            ]
        );
    }

    /// A plain psdb server's stream: no end markers, so a message without
    /// fields or rows is an OK result, and a second result set cannot be
    /// told from the first's continuation with certainty: an error.
    #[test]
    fn unmarked_streams_carry_one_set_and_fail_a_second_clearly() {
        let set_then_ok = [
            fields_msg(id_name(), vec![]),
            rows_msg(vec![row(&[Some("1"), Some("a")])]),
            ok_msg(0, 0, ""),
        ];
        assert_eq!(
            run_marked(false, modern(), RowFormat::Text, &set_then_ok, None),
            vec![
                columns(),
                Seen::Row(vec![bytes("1"), bytes("a")]),
                Seen::End(more(), 0),
                Seen::Ok(0, 0, FINAL, 3, String::new()),
            ]
        );
        let two_sets = [
            fields_msg(vec![field("a", 3, 0)], vec![row(&[Some("1")])]),
            fields_msg(vec![field("b", 3, 0)], vec![row(&[Some("2")])]),
        ];
        let seen = run_marked(false, modern(), RowFormat::Binary, &two_sets, None);
        assert_eq!(
            seen[..2],
            [
                Seen::Columns(vec!["a".into()]),
                Seen::Row(vec![Value::Int(1)])
            ]
        );
        assert!(
            matches!(&seen[2], Seen::Err(1235, m) if m.contains("psdb server")),
            "{seen:?}"
        );
    }

    #[test]
    fn unary_results() {
        let mut out = Packets::reply_to(0);
        let result = fields_msg(
            vec![field("d", 12, 0), field("n", 8, 32)],
            vec![row(&[
                Some("2024-01-02 03:04:05.000006"),
                Some("18446744073709551615"),
            ])],
        );
        ResultWriter::unary(
            modern(),
            RowFormat::Binary,
            &result.into(),
            FINAL,
            1,
            &mut out,
        );
        assert_eq!(
            client(&mut out, modern(), RowFormat::Binary),
            vec![
                Seen::Columns(vec!["d".into(), "n".into()]),
                Seen::Row(vec![
                    Value::Date(2024, 1, 2, 3, 4, 5, 6),
                    Value::UInt(u64::MAX)
                ]),
                Seen::End(FINAL, 1),
            ]
        );
        ResultWriter::unary(
            classic(),
            RowFormat::Text,
            &ok_msg(3, 0, "").into(),
            FINAL,
            0,
            &mut out,
        );
        assert_eq!(
            client(&mut out, classic(), RowFormat::Text),
            vec![Seen::Ok(3, 0, FINAL, 0, String::new())]
        );
        let bad = fields_msg(vec![field("n", 1, 0)], vec![row(&[Some("300")])]);
        ResultWriter::unary(modern(), RowFormat::Binary, &bad.into(), FINAL, 0, &mut out);
        let seen = client(&mut out, modern(), RowFormat::Binary);
        assert!(matches!(&seen[1], Seen::Err(1105, _)), "{seen:?}");
    }

    #[test]
    fn sequence_ids_run_on_across_messages() {
        let mut out = Packets::reply_to(0);
        let mut writer = ResultWriter::new(modern(), RowFormat::Text, MID);
        writer
            .message(&fields_msg(id_name(), vec![]).into(), &mut out)
            .unwrap();
        let first = out.take();
        writer
            .message(
                &rows_msg(vec![row(&[Some("1"), Some("a")])]).into(),
                &mut out,
            )
            .unwrap();
        writer.finish(None, FINAL, 0, &mut out);
        let mut all = first;
        all.extend_from_slice(&out.take());
        let mut seq = 1u8;
        while let Some(p) = decode(&mut all, usize::MAX).unwrap() {
            assert_eq!(p.seq, seq);
            seq += 1;
        }
        // header, 2 columns, 1 row, terminator.
        assert_eq!(seq, 6);
    }
}
