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

use crate::api::pb;
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::response::{self, ColumnStyle};
use crate::mysql::{CapabilityFlags, StatusFlags};
use crate::translate::out_params;
use crate::translate::statement::Answers;
use crate::translate::to_mysql::{self, binary_row, text_row};

/// How rows are encoded: text for COM_QUERY, binary for COM_STMT_EXECUTE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    Text,
    Binary,
}

/// How the backend ended a result: the status flags and warning count
/// of the packet after its rows (or of its OK), where the stream says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ending {
    status: Option<StatusFlags>,
    warnings: Option<u16>,
}

impl Ending {
    fn of(result: &pb::QueryResult) -> Self {
        Self {
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

/// Flags the sidecar answers for itself whatever the backend said: the
/// session's (its final status, from the session the gateway reports),
/// whether more results follow (the stream's shape), and session-state
/// tracking (which the sidecar rebuilds for its own client).
const OWN_FLAGS: StatusFlags = StatusFlags::SERVER_STATUS_IN_TRANS
    .union(StatusFlags::SERVER_STATUS_AUTOCOMMIT)
    .union(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
    .union(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES)
    .union(StatusFlags::SERVER_SESSION_STATE_CHANGED);

/// Within a procedure, the server keeps the index flags of a statement
/// for the rest of the call: a later set's column EOF still says them.
const INDEX_FLAGS: StatusFlags =
    StatusFlags::SERVER_STATUS_NO_GOOD_INDEX_USED.union(StatusFlags::SERVER_STATUS_NO_INDEX_USED);

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
            Self::EndOfRows(ending) | Self::Ok { ending, .. } => *ending,
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
    /// [`out_params`]) and the CALL's final OK comes next (`ended`: its
    /// end, once seen).
    MaybeOutParams {
        fields: Vec<pb::Field>,
        rows: Vec<pb::Row>,
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
    /// The stream marks where each result ends (our gateway's).
    marked_ends: bool,
    /// The statement is a `CALL` of this routine: a server says
    /// MORE_RESULTS in every EOF while a procedure runs, and flags the
    /// OUT parameters' set of a prepared one (see [`out_params`]).
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
    /// call (see [`INDEX_FLAGS`]).
    call_flags: StatusFlags,
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
            marked_ends: true,
            call_of: None,
            out_params: false,
            statements: Vec::new(),
            statement: None,
            call_flags: StatusFlags::empty(),
        }
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
    pub fn message(
        &mut self,
        result: &pb::QueryResult,
        out: &mut Packets,
    ) -> Result<(), MysqlError> {
        if !result.fields.is_empty() {
            if !self.marked_ends && !self.is_empty() {
                return Err(unmarked_results());
            }
            self.start_set(&result.fields, out)?;
        } else if result.rows.is_empty() {
            return self.end_result(result, out);
        }
        self.rows(&result.rows, out)
    }

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
                write_held(out, self.caps, &held, status, warnings);
                response::err(out, error);
            }
            (State::Open { .. } | State::MaybeOutParams { .. }, None) => write_held(
                out,
                self.caps,
                &Held::EndOfRows(Ending::default()),
                status,
                warnings,
            ),
            (State::Held(held), None) => {
                let status = last_status(status, held.ending());
                write_held_tracked(out, self.caps, &held, status, warnings, &self.session_state)
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

    /// Nothing written yet: the stream has not started a result.
    pub fn is_empty(&self) -> bool {
        matches!(self.state, State::Empty)
    }

    /// Writes a complete unary `Execute` result (one `QueryResult`): a
    /// result set or an OK, or an ERR if a row cannot be encoded.
    pub fn unary(
        caps: CapabilityFlags,
        format: RowFormat,
        result: &pb::QueryResult,
        status: StatusFlags,
        warnings: u16,
        out: &mut Packets,
    ) {
        let mut writer = Self::new(caps, format, status);
        let error = writer.message(result, out).err();
        writer.finish(error.as_ref(), status, warnings, out);
    }

    /// Column count, definitions and (classic clients) their EOF. Whatever
    /// came before is complete, so its terminator goes out now.
    fn start_set(&mut self, fields: &[pb::Field], out: &mut Packets) -> Result<(), MysqlError> {
        self.flush_previous(out)?;
        self.out_params = false;
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
    fn write_columns(
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

    /// Whether the server's EOF after a set's column definitions says
    /// MORE_RESULTS: within a procedure call, and while a later statement
    /// of a multi-statement remains.
    fn more_at_columns(&self) -> bool {
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
    fn result_ended(&mut self, ok: bool, ending: Ending) {
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

    /// A message with neither fields nor rows.
    fn end_result(
        &mut self,
        result: &pb::QueryResult,
        out: &mut Packets,
    ) -> Result<(), MysqlError> {
        let ending = Ending::of(result);
        if self.marked_ends && matches!(self.state, State::Open { .. }) {
            self.state = State::Held(Held::EndOfRows(ending));
            self.result_ended(false, ending);
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
                *ended = Some(ending);
                if maybe && rows.len() == 1 {
                    // Written once the final OK is here: the column EOF
                    // of OUT parameters has its warning count.
                    return Ok(());
                }
                // An ordinary set of the procedure, its column EOF with
                // the flags the server ended it with.
                self.release_candidate(false, 0, out)?;
                self.result_ended(false, ending);
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
            ending,
        });
        self.result_ended(true, ending);
        Ok(())
    }

    fn rows(&mut self, rows: &[pb::Row], out: &mut Packets) -> Result<(), MysqlError> {
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
            match self.format {
                RowFormat::Text => {
                    if row.lengths.len() != fields.len() {
                        return Err(MysqlError {
                            code: 1105,
                            state: "HY000".into(),
                            message: format!(
                                "Malformed row from the gateway: {} values for {} columns",
                                row.lengths.len(),
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

    /// Writes the terminator of whatever result is complete or open, with
    /// MORE_RESULTS_EXISTS: a new result follows.
    fn flush_previous(&mut self, out: &mut Packets) -> Result<(), MysqlError> {
        // Another result follows a candidate: it was a procedure's set
        // (unless the server said otherwise).
        self.release_candidate(false, 0, out)?;
        let held = match std::mem::replace(&mut self.state, State::Empty) {
            State::Empty => return Ok(()),
            State::Open { .. } | State::MaybeOutParams { .. } => Held::EndOfRows(Ending::default()),
            State::Held(held) => held,
        };
        let (status, warnings) = self.intermediate(&held);
        write_held(out, self.caps, &held, status, warnings);
        Ok(())
    }

    /// The status and warning count of a terminator a result follows:
    /// the server's, or the session's status and none.
    fn intermediate(&self, held: &Held) -> (StatusFlags, u16) {
        let ending = held.ending();
        let status = match (ending.status, held) {
            (Some(status), _) => intermediate_status(status),
            (None, Held::EndOfRows(_)) => self.status | self.out_params_flags(),
            (None, Held::Ok { .. }) => self.status,
        };
        (status | more(), ending.warnings.unwrap_or(0))
    }

    /// Writes a held-back candidate set (see [`State::MaybeOutParams`]),
    /// as OUT parameters (its column EOF with `warnings`, the CALL's) or
    /// as an ordinary set — as the server flagged it, where the stream
    /// said; nothing otherwise. Its state becomes what writing it as it
    /// came would have left.
    fn release_candidate(
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
        let flagged = ended.and_then(|ending| ending.status);
        self.out_params = flagged.map_or(out_params, |s| {
            s.contains(StatusFlags::SERVER_PS_OUT_PARAMS)
        });
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
    fn out_params_flags(&self) -> StatusFlags {
        if self.out_params {
            StatusFlags::SERVER_PS_OUT_PARAMS | more()
        } else {
            StatusFlags::empty()
        }
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

fn more() -> StatusFlags {
    StatusFlags::SERVER_MORE_RESULTS_EXISTS
}

/// A terminator the server wrote before a later result: its own status,
/// but for session-state tracking, which the sidecar answers itself.
fn intermediate_status(server: StatusFlags) -> StatusFlags {
    server - StatusFlags::SERVER_SESSION_STATE_CHANGED
}

/// The last terminator's status: the session's (`session`), with the
/// flags the server set for the statement.
fn last_status(session: StatusFlags, ending: Ending) -> StatusFlags {
    session | (ending.status.unwrap_or_default() - OWN_FLAGS)
}

fn write_held(
    out: &mut Packets,
    caps: CapabilityFlags,
    held: &Held,
    status: StatusFlags,
    warnings: u16,
) {
    write_held_tracked(out, caps, held, status, warnings, &[]);
}

/// [`write_held`], with session-state changes for an OK (the final one).
fn write_held_tracked(
    out: &mut Packets,
    caps: CapabilityFlags,
    held: &Held,
    status: StatusFlags,
    warnings: u16,
    state: &[u8],
) {
    match held {
        Held::EndOfRows(_) => response::end_of_rows(out, caps, status, warnings),
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
    use crate::mysql::packet::decode;
    use crate::translate::rows::pack_row;
    use crate::translate::types::vitess_type;
    use mysql_common::Value;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{
        Column, CommonOkPacket, ErrPacket, OkPacketDeserializer, OldEofPacket, ResultSetTerminator,
    };
    use mysql_common::proto::{Binary, Text};
    use mysql_common::row::RowDeserializer;
    use mysql_common::value::ServerSide;
    use std::sync::Arc;

    fn modern() -> CapabilityFlags {
        crate::mysql::server_capabilities()
    }

    fn classic() -> CapabilityFlags {
        modern() - CapabilityFlags::CLIENT_DEPRECATE_EOF
    }

    const MID: StatusFlags = StatusFlags::SERVER_STATUS_IN_TRANS;
    const FINAL: StatusFlags = StatusFlags::SERVER_STATUS_AUTOCOMMIT;

    /// What a client sees, decoded with mysql_common.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Columns(Vec<String>),
        Row(Vec<Value>),
        /// End of rows: status, warnings.
        End(StatusFlags, u16),
        Ok(u64, u64, StatusFlags, u16, String),
        Err(u16, String),
    }

    /// A minimal client state machine over the framed output.
    fn client(out: &mut Packets, caps: CapabilityFlags, format: RowFormat) -> Vec<Seen> {
        let mut buf = out.take();
        let mut packets = Vec::new();
        while let Some(p) = decode(&mut buf, usize::MAX).unwrap() {
            packets.push(p.payload);
        }
        assert!(buf.is_empty());
        let deprecate = caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
        let mut seen = Vec::new();
        let mut it = packets.into_iter();
        while let Some(p) = it.next() {
            match p[0] {
                0x00 => {
                    let ok = ParseBuf(&p)
                        .parse::<OkPacketDeserializer<CommonOkPacket>>(caps)
                        .unwrap()
                        .into_inner();
                    let info = ok.info_str().unwrap_or_default().into_owned();
                    let more = ok
                        .status_flags()
                        .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                    seen.push(Seen::Ok(
                        ok.affected_rows(),
                        ok.last_insert_id().unwrap_or(0),
                        ok.status_flags(),
                        ok.warnings(),
                        info,
                    ));
                    if !more {
                        break;
                    }
                }
                0xff => {
                    let e = ParseBuf(&p).parse::<ErrPacket>(caps).unwrap();
                    let se = e.server_error();
                    seen.push(Seen::Err(se.error_code(), se.message_str().into_owned()));
                    break;
                }
                _ => {
                    let count = p[0] as usize;
                    let columns: Vec<Column> = (0..count)
                        .map(|_| ParseBuf(&it.next().unwrap()).parse(()).unwrap())
                        .collect();
                    seen.push(Seen::Columns(
                        columns.iter().map(|c| c.name_str().into_owned()).collect(),
                    ));
                    if !deprecate {
                        let eof = it.next().unwrap();
                        assert_eq!(&eof[..], &[0xfe, 0, 0, MID.bits() as u8, 0][..]);
                    }
                    let columns: Arc<[Column]> = columns.into();
                    let more = loop {
                        let p = it.next().unwrap();
                        if p[0] == 0xfe && p.len() < 9 {
                            let end = if deprecate {
                                ParseBuf(&p)
                                    .parse::<OkPacketDeserializer<ResultSetTerminator>>(caps)
                                    .unwrap()
                                    .into_inner()
                            } else {
                                ParseBuf(&p)
                                    .parse::<OkPacketDeserializer<OldEofPacket>>(caps)
                                    .unwrap()
                                    .into_inner()
                            };
                            seen.push(Seen::End(end.status_flags(), end.warnings()));
                            break end
                                .status_flags()
                                .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                        }
                        if p[0] == 0xff {
                            let e = ParseBuf(&p).parse::<ErrPacket>(caps).unwrap();
                            let se = e.server_error();
                            seen.push(Seen::Err(se.error_code(), se.message_str().into_owned()));
                            break false;
                        }
                        let values = match format {
                            RowFormat::Text => ParseBuf(&p)
                                .parse::<RowDeserializer<ServerSide, Text>>(columns.clone())
                                .unwrap()
                                .into_inner()
                                .unwrap(),
                            RowFormat::Binary => ParseBuf(&p)
                                .parse::<RowDeserializer<ServerSide, Binary>>(columns.clone())
                                .unwrap()
                                .into_inner()
                                .unwrap(),
                        };
                        seen.push(Seen::Row(values));
                    };
                    if !more {
                        break;
                    }
                }
            }
        }
        assert!(it.next().is_none(), "packets after the last result");
        seen
    }

    fn field(name: &str, mysql: u8, flags: u16) -> pb::Field {
        pb::Field {
            name: bytes::Bytes::copy_from_slice(name.as_bytes()),
            r#type: vitess_type(mysql, flags) as i32,
            charset: 63,
            flags: u32::from(flags),
            ..pb::Field::default()
        }
    }

    fn fields_msg(fields: Vec<pb::Field>, rows: Vec<pb::Row>) -> pb::QueryResult {
        pb::QueryResult {
            fields,
            rows,
            ..pb::QueryResult::default()
        }
    }

    fn rows_msg(rows: Vec<pb::Row>) -> pb::QueryResult {
        fields_msg(vec![], rows)
    }

    fn end_msg() -> pb::QueryResult {
        pb::QueryResult::default()
    }

    fn ok_msg(affected: u64, id: u64, info: &str) -> pb::QueryResult {
        pb::QueryResult {
            rows_affected: affected,
            insert_id: id,
            info: info.into(),
            ..pb::QueryResult::default()
        }
    }

    fn row(cells: &[Option<&str>]) -> pb::Row {
        pack_row(cells.iter().map(|c| c.map(str::as_bytes)))
    }

    fn run(
        caps: CapabilityFlags,
        format: RowFormat,
        messages: &[pb::QueryResult],
        error: Option<&MysqlError>,
    ) -> Vec<Seen> {
        run_marked(true, caps, format, messages, error)
    }

    fn run_marked(
        marked: bool,
        caps: CapabilityFlags,
        format: RowFormat,
        messages: &[pb::QueryResult],
        error: Option<&MysqlError>,
    ) -> Vec<Seen> {
        let mut out = Packets::reply_to(0);
        let mut writer = ResultWriter::new(caps, format, MID).with_marked_ends(marked);
        let mut error = error.cloned();
        for m in messages {
            if let Err(e) = writer.message(m, &mut out) {
                error = Some(e);
                break;
            }
        }
        writer.finish(error.as_ref(), FINAL, 3, &mut out);
        client(&mut out, caps, format)
    }

    fn bytes(s: &str) -> Value {
        Value::Bytes(s.as_bytes().to_vec())
    }

    fn more() -> StatusFlags {
        MID | StatusFlags::SERVER_MORE_RESULTS_EXISTS
    }

    fn id_name() -> Vec<pb::Field> {
        vec![field("id", 8, 0), field("name", 253, 0)]
    }

    fn columns() -> Seen {
        Seen::Columns(vec!["id".into(), "name".into()])
    }

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

    #[test]
    fn empty_result_set() {
        let messages = [fields_msg(id_name(), vec![]), end_msg()];
        assert_eq!(
            run(classic(), RowFormat::Binary, &messages, None),
            vec![columns(), Seen::End(FINAL, 3)]
        );
    }

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
                    writer.message(m, &mut out).unwrap();
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
        let call = |messages: &[pb::QueryResult]| {
            let mut out = Packets::reply_to(0);
            let mut writer =
                ResultWriter::new(modern(), RowFormat::Binary, MID).in_call_of(Some(b"P".to_vec()));
            for m in messages {
                writer.message(m, &mut out).unwrap();
            }
            writer.finish(None, FINAL, 3, &mut out);
            client(&mut out, modern(), RowFormat::Binary)
        };
        let flagged = more() | StatusFlags::SERVER_PS_OUT_PARAMS;
        let x = || Seen::Columns(vec!["x".into()]);
        let final_ok = || Seen::Ok(0, 0, FINAL, 3, String::new());
        let one = || fields_msg(vec![param("x")], vec![row(&[Some("6")])]);
        assert_eq!(
            call(&[one(), end_msg(), ok_msg(0, 0, "")]),
            vec![
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(flagged, 0),
                final_ok()
            ]
        );
        // Rows in their own messages, as a long result streams.
        assert_eq!(
            call(&[
                fields_msg(vec![param("x")], vec![]),
                rows_msg(vec![row(&[Some("6")])]),
                end_msg(),
                ok_msg(0, 0, "")
            ]),
            vec![
                x(),
                Seen::Row(vec![Value::Int(6)]),
                Seen::End(flagged, 0),
                final_ok()
            ]
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

    /// An end marker that says how the server ended the result.
    fn ended(result: pb::QueryResult, status: StatusFlags, warnings: u32) -> pb::QueryResult {
        pb::QueryResult {
            server_status: Some(status.bits().into()),
            warning_count: Some(warnings),
            ..result
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

    /// A prepared CALL's set is its OUT parameters because the server
    /// flagged it, where the stream says: a set that looks like them is
    /// not, and one that does not look like them is.
    #[test]
    fn out_parameters_are_the_set_the_server_flagged() {
        let call = |messages: &[pb::QueryResult]| {
            let mut out = Packets::reply_to(0);
            let mut writer =
                ResultWriter::new(modern(), RowFormat::Binary, MID).in_call_of(Some(b"p".to_vec()));
            for m in messages {
                writer.message(m, &mut out).unwrap();
            }
            writer.finish(None, FINAL, 3, &mut out);
            client(&mut out, modern(), RowFormat::Binary)
        };
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
        ResultWriter::unary(modern(), RowFormat::Binary, &result, FINAL, 1, &mut out);
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
            &ok_msg(3, 0, ""),
            FINAL,
            0,
            &mut out,
        );
        assert_eq!(
            client(&mut out, classic(), RowFormat::Text),
            vec![Seen::Ok(3, 0, FINAL, 0, String::new())]
        );
        let bad = fields_msg(vec![field("n", 1, 0)], vec![row(&[Some("300")])]);
        ResultWriter::unary(modern(), RowFormat::Binary, &bad, FINAL, 0, &mut out);
        let seen = client(&mut out, modern(), RowFormat::Binary);
        assert!(matches!(&seen[1], Seen::Err(1105, _)), "{seen:?}");
    }

    #[test]
    fn sequence_ids_run_on_across_messages() {
        let mut out = Packets::reply_to(0);
        let mut writer = ResultWriter::new(modern(), RowFormat::Text, MID);
        writer
            .message(&fields_msg(id_name(), vec![]), &mut out)
            .unwrap();
        let first = out.take();
        writer
            .message(&rows_msg(vec![row(&[Some("1"), Some("a")])]), &mut out)
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
