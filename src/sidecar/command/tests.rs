//! The command phase's rules, without a socket or a gateway.

use bytes::{BufMut, Bytes, BytesMut};

use super::*;
use crate::transport::HttpVersion;

pub(super) type Phase = CommandPhase<()>;

pub(super) fn phase() -> Phase {
    CommandPhase::new(Login {
        // A client that did not ask for multi-statements.
        caps: crate::mysql::server_capabilities() - CapabilityFlags::CLIENT_MULTI_STATEMENTS,
        style: ColumnStyle::default(),
        collation: 45,
        mariadb: true,
        max_packet: 1 << 20,
        new_session: NewSession::default(),
        marked_ends: true,
        local_infile: false,
    })
}

fn packet(payload: &[u8]) -> Packet {
    Packet {
        seq: 0,
        payload: Bytes::copy_from_slice(payload),
    }
}

pub(super) fn command(phase: &mut Phase, payload: &[u8]) -> (Step, Packets) {
    let mut out = Packets::reply_to(0);
    let step = phase.command(packet(payload), &mut out);
    (step, out)
}

/// The error code of the single ERR packet in `out`.
pub(super) fn err_code(out: &Packets) -> u16 {
    let payload = first_payload(out);
    assert_eq!(payload[0], 0xff, "not an ERR: {payload:?}");
    u16::from_le_bytes([payload[1], payload[2]])
}

pub(super) fn first_payload(out: &Packets) -> Vec<u8> {
    let len = u32::from_le_bytes([out.buf[0], out.buf[1], out.buf[2], 0]) as usize;
    out.buf[4..4 + len].to_vec()
}

pub(super) fn reply<M>(message: impl Into<M>) -> Reply<M> {
    Reply {
        message: message.into(),
        session: None,
        transport: HttpVersion::Http2,
    }
}

/// Prepares `sql` with `params` placeholders and `columns` result columns.
pub(super) fn prepare(phase: &mut Phase, sql: &str, params: u32, columns: usize) -> u32 {
    let mut payload = vec![0x16];
    payload.extend_from_slice(sql.as_bytes());
    let (step, _) = command(phase, &payload);
    let Step::Prepare(sql) = step else {
        panic!("not a prepare: {step:?}")
    };
    let fields = (0..columns)
        .map(|i| pb::Field {
            name: format!("c{i}").into(),
            r#type: pb::Type::Int32 as i32,
            ..pb::Field::default()
        })
        .collect();
    let mut out = Packets::reply_to(0);
    let answer = pb::PrepareResponse {
        params_count: params,
        fields,
        ..Default::default()
    };
    assert_eq!(phase.prepared(sql, reply(answer), &mut out), Next::Continue);
    let ok = first_payload(&out);
    assert_eq!(ok[0], 0, "prepare OK");
    u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]])
}

fn execute_payload(id: u32, flags: u8) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(0x17);
    b.put_u32_le(id);
    b.put_u8(flags);
    b.put_u32_le(1);
    b.to_vec()
}

#[test]
fn quit_closes_and_ping_answers_ok() {
    let mut p = phase();
    let (step, _) = command(&mut p, &[0x01]);
    assert!(matches!(step, Step::Answered(Next::Close)));
    let (step, out) = command(&mut p, &[0x0e]);
    assert!(matches!(step, Step::Answered(Next::Continue)));
    assert_eq!(first_payload(&out)[0], 0x00);
}

#[test]
fn an_owed_error_answers_the_next_command_and_closes() {
    let mut p = phase();
    p.owe_error(errors::unknown_database(b"gone"));
    let (step, out) = command(&mut p, &[0x0e]);
    assert!(matches!(step, Step::Answered(Next::Close)));
    assert_eq!(err_code(&out), 1049);
    // Owed once.
    let (step, _) = command(&mut p, &[0x0e]);
    assert!(matches!(step, Step::Answered(Next::Continue)));
}

#[test]
fn a_second_statement_needs_multi_statements() {
    let mut p = phase();
    let (step, out) = command(&mut p, b"\x03SELECT 1; SELECT 2");
    assert!(matches!(step, Step::Answered(Next::Continue)));
    assert_eq!(err_code(&out), 1064);
    // COM_SET_OPTION(MYSQL_OPTION_MULTI_STATEMENTS_ON) answers EOF, then
    // the same text goes upstream.
    let (_, out) = command(&mut p, &[0x1b, 0, 0]);
    assert_eq!(first_payload(&out)[0], 0xfe);
    let (step, _) = command(&mut p, b"\x03SELECT 1; SELECT 2");
    assert!(matches!(
        step,
        Step::Execute(Execute {
            format: RowFormat::Text,
            ..
        })
    ));
}

#[test]
fn a_kill_statement_names_a_connection_or_goes_upstream() {
    let mut p = phase();
    let (step, _) = command(&mut p, b"\x03KILL QUERY 7");
    assert!(matches!(
        step,
        Step::KillOrExecute {
            id: 7,
            query_only: true,
            ..
        }
    ));
    // KILL QUERY ID names a query, never one of ours.
    let (step, _) = command(&mut p, b"\x03KILL QUERY ID 7");
    assert!(matches!(step, Step::Execute(_)));
}

#[test]
fn init_db_doubles_backticks_of_its_name() {
    let mut p = phase();
    let (step, _) = command(&mut p, b"\x02a`b");
    let Step::Execute(e) = step else {
        panic!("{step:?}")
    };
    assert_eq!(&e.sql[..], b"USE `a``b`");
}

#[test]
fn quoted_names_double_backticks_by_character() {
    let utf8 = Dialect::default();
    assert_eq!(
        &quoted_statement(&utf8, b"USE ", b"a`b", b"")[..],
        b"USE `a``b`"
    );
    // 0x8160 is one gbk character: its 0x60 is no backtick.
    let gbk = Dialect {
        charset: Charset::Gbk,
        ..Dialect::default()
    };
    assert_eq!(
        &quoted_statement(&gbk, b"USE ", b"\x81\x60`", b"")[..],
        b"USE `\x81\x60```"
    );
}

#[test]
fn statements_get_distinct_nonzero_ids_and_close_forgets_them() {
    let mut p = phase();
    let a = prepare(&mut p, "SELECT 1", 0, 1);
    let b = prepare(&mut p, "SELECT 2", 0, 1);
    assert!(a != 0 && b != 0 && a != b);
    let mut close = vec![0x19];
    close.extend_from_slice(&a.to_le_bytes());
    let (step, out) = command(&mut p, &close);
    assert!(matches!(step, Step::Answered(Next::Continue)));
    assert!(out.buf.is_empty(), "COM_STMT_CLOSE has no answer");
    let (_, out) = command(&mut p, &execute_payload(a, 0));
    assert_eq!(err_code(&out), 1243);
    let (step, _) = command(&mut p, &execute_payload(b, 0));
    assert!(matches!(
        step,
        Step::Execute(Execute {
            format: RowFormat::Binary,
            ..
        })
    ));
}

#[test]
fn reset_of_an_unknown_statement_is_1243() {
    let mut p = phase();
    let (_, out) = command(&mut p, &[0x1a, 9, 0, 0, 0]);
    assert_eq!(err_code(&out), 1243);
}

#[test]
fn the_cursor_flag_opens_a_cursor_only_with_a_result_set() {
    let mut p = phase();
    let select = prepare(&mut p, "SELECT 1", 0, 1);
    let update = prepare(&mut p, "UPDATE t SET a = 1", 0, 0);
    let (step, _) = command(&mut p, &execute_payload(select, 1));
    assert!(matches!(step, Step::Execute(Execute { cursor: Some(id), .. }) if id == select));
    let (step, _) = command(&mut p, &execute_payload(update, 1));
    assert!(matches!(step, Step::Execute(Execute { cursor: None, .. })));
}

/// Opens a cursor on `id` whose first message had `rows` rows.
fn open_cursor(p: &mut Phase, id: u32, rows: usize) {
    let (step, _) = command(p, &execute_payload(id, 1));
    let Step::Execute(e) = step else {
        panic!("{step:?}")
    };
    let mut exec = p.begin_execution(e.format, e.cursor);
    let mut out = Packets::reply_to(1);
    let result = pb::QueryResult {
        fields: vec![pb::Field {
            name: "n".into(),
            r#type: pb::Type::Int32 as i32,
            ..pb::Field::default()
        }],
        rows: (0..rows)
            .map(|i| pb::Row {
                lengths: vec![1],
                values: format!("{}", i % 10).into_bytes().into(),
            })
            .collect(),
        ..Default::default()
    };
    let message = pb::ExecuteResponse {
        result: Some(result),
        ..Default::default()
    };
    let Flow::Cursor(new) = p.on_reply(&mut exec, reply(message), &mut out) else {
        panic!("no cursor")
    };
    assert_eq!(p.open_cursor(new, ()), Next::Continue);
}

#[test]
fn fetch_serves_held_rows_and_reads_on_only_when_short() {
    let mut p = phase();
    let id = prepare(&mut p, "SELECT n FROM t", 0, 1);
    open_cursor(&mut p, id, 3);
    let mut out = Packets::reply_to(0);
    let mut fetch = p.begin_fetch(id, 2, &mut out).expect("open");
    // Two of the three rows are held: no read.
    assert_eq!(p.fetch_rows(&mut fetch, &mut out), FetchStep::End);
    assert_eq!(p.end_fetch(fetch, &mut out), Next::Continue);
    // Two more: one held, then the stream must be read.
    let mut fetch = p.begin_fetch(id, 2, &mut out).expect("still open");
    assert_eq!(p.fetch_rows(&mut fetch, &mut out), FetchStep::Pull);
    // The stream ends: the cursor is exhausted and closes.
    p.fetch_pulled(&mut fetch, Ok(None));
    assert_eq!(p.fetch_rows(&mut fetch, &mut out), FetchStep::End);
    p.end_fetch(fetch, &mut out);
    let mut out = Packets::reply_to(0);
    assert!(p.begin_fetch(id, 1, &mut out).is_err());
    assert_eq!(err_code(&out), 1421);
}

#[test]
fn executing_a_statement_again_closes_its_own_cursor_only() {
    let mut p = phase();
    let a = prepare(&mut p, "SELECT n FROM t", 0, 1);
    let b = prepare(&mut p, "SELECT n FROM u", 0, 1);
    open_cursor(&mut p, a, 1);
    open_cursor(&mut p, b, 1);
    let (step, _) = command(&mut p, &execute_payload(a, 0));
    assert!(step.uses_session());
    // b still reads ahead before the statement; a is gone.
    assert_eq!(p.cursors_reading(), vec![b]);
}

#[test]
fn reading_ahead_stops_at_the_buffer_limit_and_the_fetch_gets_the_error() {
    let mut p = phase();
    let id = prepare(&mut p, "SELECT n FROM t", 0, 1);
    open_cursor(&mut p, id, 0);
    let big = pb::Row {
        lengths: vec![(cursors::CURSOR_BUFFER_LIMIT + 1) as i64],
        values: vec![b'x'; cursors::CURSOR_BUFFER_LIMIT + 1].into(),
    };
    p.read_ahead_stream(id).expect("a stream to read");
    let message = pb::ExecuteResponse {
        result: Some(pb::QueryResult {
            rows: vec![big],
            ..Default::default()
        }),
        ..Default::default()
    };
    p.read_ahead_pulled(id, (), Ok(Some(reply(message))));
    assert!(p.read_ahead_stream(id).is_none(), "over the limit");
    let mut out = Packets::reply_to(0);
    let mut fetch = p.begin_fetch(id, 10, &mut out).expect("open");
    let mut out = Packets::reply_to(0);
    // The held row cannot be written as an INT: an ERR either way; the
    // point is that the fetch ends with an ERR and the cursor is gone.
    assert!(matches!(
        p.fetch_rows(&mut fetch, &mut out),
        FetchStep::Answered(Next::Continue)
    ));
    assert!(!p.cursors_reading().contains(&id));
}

#[test]
fn reset_and_change_user_drop_statements_and_cursors() {
    let mut p = phase();
    let id = prepare(&mut p, "SELECT n FROM t", 0, 1);
    open_cursor(&mut p, id, 1);
    let (step, _) = command(&mut p, &[0x1f]);
    let Step::Reset { collation, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(collation, 45);
    assert!(
        p.cursors_reading().is_empty(),
        "the reset closed the cursor"
    );
    let (_, out) = command(&mut p, &execute_payload(id, 0));
    assert_eq!(err_code(&out), 1243);
}

#[test]
fn a_statement_error_ends_the_answer_with_err() {
    let mut p = phase();
    let (step, _) = command(&mut p, b"\x03SELECT nope");
    let Step::Execute(e) = step else {
        panic!("{step:?}")
    };
    let mut exec = p.begin_execution(e.format, e.cursor);
    let mut out = Packets::reply_to(1);
    let message = pb::ExecuteResponse {
        error: Some(pb::RpcError {
            message: "Unknown column 'nope' in 'field list' (errno 1054) (sqlstate 42S22)".into(),
            code: 0,
        }),
        ..Default::default()
    };
    assert!(matches!(
        p.on_reply(&mut exec, reply(message), &mut out),
        Flow::More
    ));
    assert_eq!(p.finish_execution(exec, &mut out), Next::Continue);
    assert_eq!(err_code(&out), 1054);
    assert!(!p.take_account_refused(), "only a 1045 refuses the account");
}

#[test]
fn a_refused_backend_account_is_noted_once() {
    let mut p = phase();
    let (step, _) = command(&mut p, b"\x03SELECT 1");
    let Step::Execute(e) = step else {
        panic!("{step:?}")
    };
    let mut exec = p.begin_execution(e.format, e.cursor);
    let mut out = Packets::reply_to(1);
    let message = pb::ExecuteResponse {
        error: Some(pb::RpcError {
            message: "Access denied for user 'writer'@'localhost' (using password: NO) (errno 1045) (sqlstate 28000)".into(),
            code: 0,
        }),
        ..Default::default()
    };
    let _ = p.on_reply(&mut exec, reply(message), &mut out);
    assert_eq!(p.finish_execution(exec, &mut out), Next::Continue);
    assert_eq!(err_code(&out), 1045);
    assert!(p.take_account_refused());
    assert!(!p.take_account_refused(), "taken");
}

#[test]
fn unknown_commands_get_an_error_and_the_connection_goes_on() {
    let mut p = phase();
    // COM_BINLOG_DUMP
    let (step, out) = command(&mut p, &[0x12, 0, 0, 0, 0]);
    assert!(matches!(step, Step::Answered(Next::Continue)));
    assert_eq!(err_code(&out), 1047);
}

// ---- A scripted upstream: each statement's stream is a list of replies,
// driven through the core as the socket loop drives it.

use crate::api::ApiError;
use crate::client::RawSession;
use crate::mysql::StatusFlags;
use prost::Message;

/// A cookie for a session in (or out of) a transaction.
fn cookie(in_transaction: bool) -> RawSession {
    let session = pb::Session {
        vitess_session: Some(pb::VitessSession {
            in_transaction,
            autocommit: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    RawSession::from_bytes(session.encode_to_vec().into()).expect("a valid session")
}

fn result_message(fields: usize, rows: &[&str]) -> pb::ExecuteResponse {
    pb::ExecuteResponse {
        result: Some(pb::QueryResult {
            fields: (0..fields)
                .map(|i| pb::Field {
                    name: format!("c{i}").into(),
                    r#type: pb::Type::Varchar as i32,
                    charset: 45,
                    ..pb::Field::default()
                })
                .collect(),
            rows: rows
                .iter()
                .map(|r| pb::Row {
                    lengths: vec![r.len() as i64],
                    values: Bytes::copy_from_slice(r.as_bytes()),
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The end of a result set: neither fields nor rows.
fn end_of_set() -> pb::ExecuteResponse {
    pb::ExecuteResponse {
        result: Some(pb::QueryResult::default()),
        ..Default::default()
    }
}

/// Runs `sql` as a COM_QUERY against a stream that yields `script`, as
/// `connection::execute` does; returns how the connection goes on and
/// the packets' payloads.
fn run_query(p: &mut Phase, sql: &str, script: Vec<Pulled>) -> (Next, Vec<Vec<u8>>) {
    let mut payload = vec![0x03];
    payload.extend_from_slice(sql.as_bytes());
    let (step, _) = command(p, &payload);
    let Step::Execute(e) = step else {
        panic!("{step:?}")
    };
    let mut out = Packets::reply_to(1);
    let mut exec = p.begin_execution(e.format, e.cursor);
    let mut next = None;
    for pulled in script {
        match pulled {
            Ok(Some(reply)) => match p.on_reply(&mut exec, reply, &mut out) {
                Flow::More => continue,
                Flow::Stop => break,
                Flow::Cursor(_) => panic!("no cursor asked for"),
                Flow::Infile(_) => panic!("no file asked for"),
            },
            Ok(None) => break,
            Err(e) => {
                next = Some(p.execution_failed(exec, &e, &mut out));
                return (next.unwrap(), payloads(&out));
            }
        }
    }
    let next = next.unwrap_or_else(|| p.finish_execution(exec, &mut out));
    (next, payloads(&out))
}

type Pulled = Result<Option<Reply<crate::client::Streamed>>, CallError>;

fn payloads(out: &Packets) -> Vec<Vec<u8>> {
    let mut buf = BytesMut::from(&out.buf[..]);
    let mut all = Vec::new();
    while let Some(p) = crate::mysql::packet::decode(&mut buf, usize::MAX).unwrap() {
        all.push(p.payload.to_vec());
    }
    all
}

/// The status flags of a terminator (an OK-form EOF, 0xfe, or an OK).
fn terminator_status(payload: &[u8]) -> StatusFlags {
    assert!(matches!(payload[0], 0x00 | 0xfe), "{payload:?}");
    // Header, then affected rows and insert id (one byte each here).
    StatusFlags::from_bits_truncate(u16::from_le_bytes([payload[3], payload[4]]))
}

#[test]
fn two_result_sets_say_more_results_between_them() {
    let mut p = phase();
    let (next, packets) = run_query(
        &mut p,
        "CALL two_sets()",
        vec![
            Ok(Some(reply(result_message(1, &["a", "b"])))),
            Ok(Some(reply(end_of_set()))),
            Ok(Some(reply(result_message(1, &["c"])))),
            Ok(Some(reply(end_of_set()))),
            Ok(None),
        ],
    );
    assert_eq!(next, Next::Continue);
    // count, column, 2 rows, terminator; count, column, row, terminator;
    // then the CALL's final OK.
    let terminators: Vec<_> = packets
        .iter()
        .filter(|p| p[0] == 0xfe && p.len() < 0xffffff)
        .map(|p| terminator_status(p))
        .collect();
    assert!(terminators[0].contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS));
    let last = terminator_status(packets.last().unwrap());
    assert!(!last.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS));
}

#[test]
fn a_lost_gateway_after_rows_ends_them_with_1158_and_closes() {
    let mut p = phase();
    let (next, packets) = run_query(
        &mut p,
        "SELECT c FROM t",
        vec![
            Ok(Some(reply(result_message(1, &["a"])))),
            Err(CallError::Lost("reset".into())),
        ],
    );
    assert_eq!(next, Next::Close, "the statement may have run");
    let err = packets.last().unwrap();
    assert_eq!(err[0], 0xff);
    assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1158);
    assert_eq!(&err[4..9], b"08S01");
}

#[test]
fn an_unavailable_gateway_is_1105_and_the_connection_goes_on() {
    let mut p = phase();
    let mut out = Packets::reply_to(1);
    let e = CallError::Unavailable {
        waited: std::time::Duration::from_secs(1),
        last_error: None,
    };
    assert_eq!(p.call_failed(&e, false, &mut out), Next::Continue);
    assert_eq!(err_code(&out), 1105);
}

#[test]
fn a_session_the_gateway_forgot_ends_the_connection() {
    let mut p = phase();
    let forgotten = CallError::Api(ApiError {
        code: crate::api::Code::PermissionDenied,
        message: "unknown session".into(),
    });
    let (next, packets) = run_query(&mut p, "SELECT 1", vec![Err(forgotten)]);
    assert_eq!(next, Next::Close);
    assert_eq!(packets.len(), 1);
    assert_eq!(u16::from_le_bytes([packets[0][1], packets[0][2]]), 1158);
}

#[test]
fn a_rolled_back_session_closes_after_its_error() {
    let mut p = phase();
    let lost = pb::ExecuteResponse {
        error: Some(pb::RpcError {
            message: "Connection was killed (errno 1927) (sqlstate 70100)".into(),
            code: 0,
        }),
        ..Default::default()
    };
    let (next, packets) = run_query(
        &mut p,
        "UPDATE t SET a = 1",
        vec![Ok(Some(reply(lost))), Ok(None)],
    );
    assert_eq!(next, Next::Close);
    assert_eq!(u16::from_le_bytes([packets[0][1], packets[0][2]]), 1927);
}

#[test]
fn kill_query_ends_the_answer_with_1317_and_the_connection_goes_on() {
    let mut p = phase();
    let (step, _) = command(&mut p, b"\x03SELECT SLEEP(10)");
    let Step::Execute(e) = step else {
        panic!("{step:?}")
    };
    let exec = p.begin_execution(e.format, e.cursor);
    let mut out = Packets::reply_to(1);
    p.execution_stopped(exec, &errors::interrupted(), &mut out);
    assert_eq!(err_code(&out), 1317);
}

#[test]
fn a_prepare_the_backend_refuses_keeps_no_statement() {
    let mut p = phase();
    let (step, _) = command(&mut p, b"\x16SELECT nope");
    let Step::Prepare(sql) = step else {
        panic!("{step:?}")
    };
    let refused = pb::PrepareResponse {
        error: Some(pb::RpcError {
            message: "Unknown column 'nope' in 'field list' (errno 1054) (sqlstate 42S22)".into(),
            code: 0,
        }),
        ..Default::default()
    };
    let mut out = Packets::reply_to(1);
    assert_eq!(p.prepared(sql, reply(refused), &mut out), Next::Continue);
    assert_eq!(err_code(&out), 1054);
    // The first id is still free: a refused prepare took none.
    assert_eq!(prepare(&mut p, "SELECT 1", 0, 1), 1);
}

#[test]
fn a_drain_waits_for_the_transaction_to_end() {
    let mut p = phase();
    assert!(p.drain_may_close());
    let mut begun = reply(pb::ExecuteResponse::default());
    begun.session = Some(cookie(true));
    let (next, packets) = run_query(&mut p, "BEGIN", vec![Ok(Some(begun)), Ok(None)]);
    assert_eq!(next, Next::Continue);
    assert!(terminator_status(&packets[0]).contains(StatusFlags::SERVER_STATUS_IN_TRANS));
    assert!(!p.drain_may_close());
    let mut committed = reply(pb::ExecuteResponse::default());
    committed.session = Some(cookie(false));
    run_query(&mut p, "COMMIT", vec![Ok(Some(committed)), Ok(None)]);
    assert!(p.drain_may_close());
}

#[test]
fn change_user_forgets_statements_and_closes_the_old_session() {
    let mut p = phase();
    let id = prepare(&mut p, "SELECT 1", 0, 1);
    let mut answered = reply(pb::ExecuteResponse::default());
    answered.session = Some(cookie(false));
    run_query(&mut p, "DO 1", vec![Ok(Some(answered)), Ok(None)]);
    let (step, _) = command(&mut p, &[0x11, b'u', 0]);
    assert!(matches!(step, Step::ChangeUser { .. }));
    assert!(!step.uses_session());
    assert!(
        p.user_changed(8, Bytes::new()).is_some(),
        "the old session is closed"
    );
    let (_, out) = command(&mut p, &execute_payload(id, 0));
    assert_eq!(err_code(&out), 1243);
    // A reset now keeps the new user's collation.
    let (step, _) = command(&mut p, &[0x1f]);
    assert!(matches!(step, Step::Reset { collation: 8, .. }));
}
