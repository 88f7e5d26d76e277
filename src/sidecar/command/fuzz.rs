//! Random input through the command core, as a hostile client and a
//! broken upstream would send it: no input may panic, and every answer is
//! whole, well-framed packets.
//!
//! Structure-aware but without coverage feedback (stable Rust, no
//! libFuzzer): commands are drawn from every command byte, with payloads
//! built from SQL-ish tokens, multibyte and escape bytes, statement ids
//! the core handed out and raw noise; every upstream call gets a random
//! reply (result sets of random shapes, malformed rows, errors, failed
//! calls). `MQ_FUZZ_ITERATIONS` and `MQ_FUZZ_SEED` change the run:
//!
//! ```sh
//! MQ_FUZZ_ITERATIONS=10000000 cargo test --lib fuzz_long -- --ignored --nocapture
//! ```

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::transport::HttpVersion;

type Phase = CommandPhase<()>;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The smoke run every `cargo test` makes.
#[test]
fn random_commands_and_replies_never_panic() {
    let n = env_u64("MQ_FUZZ_ITERATIONS").unwrap_or(20_000);
    let steps = fuzz(env_u64("MQ_FUZZ_SEED").unwrap_or(1), n);
    // The run reached every kind of step, deep ones included.
    for kind in [
        "answered", "execute", "prepare", "prepared", "fetch", "cursor", "reset",
    ] {
        assert!(
            steps.get(kind).copied().unwrap_or(0) > 0,
            "no {kind}: {steps:?}"
        );
    }
}

/// The long run (see the module documentation); prints its rate.
#[test]
#[ignore]
fn fuzz_long() {
    let n = env_u64("MQ_FUZZ_ITERATIONS").unwrap_or(10_000_000);
    let seed = env_u64("MQ_FUZZ_SEED").unwrap_or_else(|| rand::rng().random());
    let start = Instant::now();
    let steps = fuzz(seed, n);
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz: {n} commands (seed {seed}) in {secs:.1} s, {:.0}/s, no panic; steps: {steps:?}",
        n as f64 / secs
    );
}

/// Runs `iterations` commands; how many of each kind of step came of them.
fn fuzz(seed: u64, iterations: u64) -> std::collections::BTreeMap<&'static str, u64> {
    let mut steps = std::collections::BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut phase = new_phase(&mut rng);
    let mut ids: Vec<u32> = Vec::new();
    for i in 0..iterations {
        // A fresh connection now and then, with other capabilities.
        if rng.random_ratio(1, 500) {
            phase = new_phase(&mut rng);
            ids.clear();
        }
        let payload = command_payload(&mut rng, &ids);
        let mut out = Packets::reply_to(0);
        let step = phase.command(
            Packet {
                seq: 0,
                payload: payload.clone(),
            },
            &mut out,
        );
        if step.uses_session() {
            read_ahead(&mut rng, &mut phase);
        }
        *steps.entry(kind(&step)).or_insert(0) += 1;
        let prepared = ids.len();
        let cursors = phase.cursors_reading().len();
        drive(&mut rng, &mut phase, step, &mut out, &mut ids);
        if ids.len() > prepared {
            *steps.entry("prepared").or_insert(0) += 1;
        }
        if phase.cursors_reading().len() > cursors {
            *steps.entry("cursor").or_insert(0) += 1;
        }
        assert_well_framed(&out, || {
            format!("iteration {i} (seed {seed}), command {payload:?}")
        });
    }
    steps
}

fn kind(step: &Step) -> &'static str {
    match step {
        Step::Answered(_) => "answered",
        Step::Execute(_) | Step::KillOrExecute { .. } => "execute",
        Step::Kill { .. } => "kill",
        Step::Prepare(_) => "prepare",
        Step::FieldList(_) => "field_list",
        Step::Reset { .. } => "reset",
        Step::ChangeUser { .. } => "change_user",
        Step::Fetch { .. } => "fetch",
        Step::Statistics => "statistics",
    }
}

fn new_phase(rng: &mut SmallRng) -> Phase {
    let mut caps = crate::mysql::server_capabilities();
    for flag in [
        CapabilityFlags::CLIENT_DEPRECATE_EOF,
        CapabilityFlags::CLIENT_MULTI_STATEMENTS,
        CapabilityFlags::CLIENT_SESSION_TRACK,
    ] {
        if rng.random_bool(0.5) {
            caps -= flag;
        }
    }
    let style = [
        ColumnStyle::Mysql,
        ColumnStyle::Mariadb,
        ColumnStyle::MariadbExtended,
    ][rng.random_range(0..3)];
    CommandPhase::new(Login {
        caps,
        style,
        // utf8mb4, gbk, big5, sjis, latin1, binary, or anything.
        collation: [45, 28, 1, 13, 8, 63, rng.random()][rng.random_range(0..7)],
        mariadb: rng.random_bool(0.5),
        max_packet: 1 << 16,
        new_session: NewSession::default(),
        marked_ends: rng.random_bool(0.8),
        local_infile: rng.random_bool(0.5),
    })
}

/// Tokens that steer the SQL scanners into their corners.
const TOKENS: &[&[u8]] = &[
    b"SELECT ",
    b"KILL ",
    b"QUERY ",
    b"ID ",
    b"CONNECTION ",
    b"USE ",
    b"CALL ",
    b"LIMIT ",
    b"1",
    b"42 ",
    b"18446744073709551616",
    b"'",
    b"\"",
    b"`",
    b"\\",
    b";",
    b"--",
    b"-- ",
    b"#",
    b"/*",
    b"*/",
    b"/*!",
    b"?",
    b" ",
    b"\n",
    b"\x00",
    b"\xbf\x5c",
    b"\x81\x60",
    b"\xe5\x81",
    b"\xff",
    b"\xc3\xa9",
    b"_binary",
    b"X'",
    b"0x",
];

fn sql(rng: &mut SmallRng) -> Vec<u8> {
    let mut text = Vec::new();
    for _ in 0..rng.random_range(0..12) {
        text.extend_from_slice(TOKENS[rng.random_range(0..TOKENS.len())]);
    }
    text
}

fn noise(rng: &mut SmallRng, max: usize) -> Vec<u8> {
    let len = rng.random_range(0..=max);
    (0..len).map(|_| rng.random()).collect()
}

fn statement_id(rng: &mut SmallRng, ids: &[u32]) -> u32 {
    if !ids.is_empty() && rng.random_bool(0.8) {
        ids[rng.random_range(0..ids.len())]
    } else {
        rng.random()
    }
}

fn command_payload(rng: &mut SmallRng, ids: &[u32]) -> Bytes {
    const COMMANDS: &[u8] = &[
        0x01, 0x02, 0x03, 0x04, 0x09, 0x0c, 0x0e, 0x11, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c,
        0x1f,
    ];
    let mut b = BytesMut::new();
    let code = if rng.random_ratio(1, 20) {
        rng.random()
    } else {
        COMMANDS[rng.random_range(0..COMMANDS.len())]
    };
    if rng.random_ratio(1, 100) {
        // An empty packet: not even a command byte.
        return Bytes::new();
    }
    b.put_u8(code);
    match code {
        0x03 | 0x16 | 0x02 | 0x04 => b.extend_from_slice(&sql(rng)),
        0x17 => {
            b.put_u32_le(statement_id(rng, ids));
            b.put_u8(rng.random_range(0..4)); // flags: cursor or not
            b.put_u32_le(1);
            // Parameters: a NULL bitmap, maybe types, values.
            b.extend_from_slice(&noise(rng, 24));
        }
        0x18 => {
            b.put_u32_le(statement_id(rng, ids));
            b.put_u16_le(rng.random_range(0..4));
            b.extend_from_slice(&noise(rng, 64));
        }
        0x19 | 0x1a => b.put_u32_le(statement_id(rng, ids)),
        0x1c => {
            b.put_u32_le(statement_id(rng, ids));
            b.put_u32_le(rng.random_range(0..5));
        }
        0x1b => b.put_u16_le(rng.random_range(0..3)),
        _ => b.extend_from_slice(&noise(rng, 16)),
    }
    if rng.random_ratio(1, 10) {
        // Truncated or with trailing bytes.
        let keep = rng.random_range(0..=b.len());
        b.truncate(keep);
        b.extend_from_slice(&noise(rng, 4));
    }
    b.freeze()
}

fn reply<M>(message: impl Into<M>) -> Reply<M> {
    Reply {
        message: message.into(),
        session: None,
        transport: HttpVersion::Http3,
    }
}

fn random_fields(rng: &mut SmallRng) -> Vec<pb::Field> {
    (0..rng.random_range(0..4))
        .map(|i| pb::Field {
            name: format!("c{i}").into(),
            r#type: rng.random_range(0..2100),
            charset: rng.random_range(0..300),
            flags: rng.random(),
            decimals: rng.random_range(0..40),
            column_length: rng.random(),
            ..pb::Field::default()
        })
        .collect()
}

fn random_row(rng: &mut SmallRng, columns: usize) -> pb::Row {
    let mut lengths = Vec::new();
    let mut values = Vec::new();
    for _ in 0..columns {
        if rng.random_ratio(1, 5) {
            lengths.push(-1);
        } else {
            let value = if rng.random_bool(0.5) {
                // Text a number or date column might hold, or not.
                [
                    &b"1"[..],
                    b"-7",
                    b"3.5e3",
                    b"2024-02-29 13:14:15.5",
                    b"-838:59:59",
                    b"x",
                    b"",
                ][rng.random_range(0..7)]
                .to_vec()
            } else {
                noise(rng, 12)
            };
            lengths.push(value.len() as i64);
            values.extend_from_slice(&value);
        }
    }
    if rng.random_ratio(1, 20) {
        // Lengths that do not add up.
        lengths.push(rng.random_range(-3..30));
    }
    pb::Row {
        lengths,
        values: values.into(),
    }
}

fn random_result(rng: &mut SmallRng) -> pb::ExecuteResponse {
    let fields = if rng.random_bool(0.4) {
        random_fields(rng)
    } else {
        Vec::new()
    };
    let columns = if fields.is_empty() {
        rng.random_range(0..3)
    } else {
        fields.len()
    };
    let rows = (0..rng.random_range(0..3))
        .map(|_| random_row(rng, columns))
        .collect();
    let suffix: &[u8] = [
        &b" (errno 1064) (sqlstate 42000)"[..],
        b" (errno 1927) (sqlstate 70100)",
        b"",
    ][rng.random_range(0..3)];
    let error = rng.random_ratio(1, 8).then(|| pb::RpcError {
        // Any bytes: the message is the server's, in any character set.
        message: [&sql(rng)[..], suffix].concat().into(),
        code: 0,
    });
    pb::ExecuteResponse {
        result: Some(pb::QueryResult {
            fields,
            rows,
            rows_affected: rng.random(),
            insert_id: rng.random(),
            ..Default::default()
        }),
        error,
        ..Default::default()
    }
}

fn random_failure(rng: &mut SmallRng) -> CallError {
    match rng.random_range(0..4) {
        0 => CallError::Lost("reset".into()),
        1 => CallError::Unavailable {
            waited: std::time::Duration::from_secs(1),
            last_error: None,
        },
        2 => CallError::Protocol("garbage".into()),
        _ => CallError::Api(crate::api::ApiError {
            code: [
                crate::api::Code::PermissionDenied,
                crate::api::Code::ResourceExhausted,
                crate::api::Code::Internal,
            ][rng.random_range(0..3)],
            message: "refused".into(),
        }),
    }
}

/// What the next read of a stream brings.
fn pulled(rng: &mut SmallRng) -> cursors::Pulled {
    match rng.random_range(0..10) {
        0 => Ok(None),
        1 => Err(random_failure(rng)),
        _ => Ok(Some(reply(random_result(rng)))),
    }
}

fn read_ahead(rng: &mut SmallRng, phase: &mut Phase) {
    for id in phase.cursors_reading() {
        for _ in 0..rng.random_range(0..4) {
            if phase.read_ahead_stream(id).is_none() {
                break;
            }
            phase.read_ahead_pulled(id, (), pulled(rng));
        }
    }
}

fn drive(rng: &mut SmallRng, phase: &mut Phase, step: Step, out: &mut Packets, ids: &mut Vec<u32>) {
    match step {
        Step::Answered(_) | Step::Statistics => {}
        Step::Execute(e) | Step::KillOrExecute { statement: e, .. } => {
            if rng.random_ratio(1, 10) {
                phase.call_failed(&random_failure(rng), rng.random(), out);
                return;
            }
            let mut exec = phase
                .begin_execution(e.format, e.cursor)
                .in_call_of(e.call_of)
                .in_statements(e.statements);
            for _ in 0..rng.random_range(0..6) {
                match pulled(rng) {
                    Ok(Some(r)) => match phase.on_reply(&mut exec, r, out) {
                        Flow::More => continue,
                        Flow::Stop => break,
                        Flow::Cursor(new) => {
                            phase.open_cursor(new, ());
                            return;
                        }
                        Flow::Infile(request) => {
                            phase.ask_for_file(request, out);
                            continue;
                        }
                    },
                    Ok(None) => break,
                    Err(e) => {
                        phase.execution_failed(exec, &e, out);
                        return;
                    }
                }
            }
            if rng.random_ratio(1, 20) {
                phase.execution_stopped(exec, &errors::interrupted(), out);
            } else {
                phase.finish_execution(exec, out);
            }
        }
        Step::Kill { id } => {
            phase.no_such_thread(id, out);
        }
        Step::Prepare(sql) => {
            let answer = pb::PrepareResponse {
                params_count: [0, 1, 3, 70_000, rng.random()][rng.random_range(0..5)],
                fields: random_fields(rng),
                // As many as the count or not (the count then decides).
                param_fields: random_fields(rng),
                error: rng.random_ratio(1, 8).then(|| pb::RpcError {
                    message: "no (errno 1064) (sqlstate 42000)".into(),
                    code: 0,
                }),
                ..Default::default()
            };
            let before = out.buf.len();
            phase.prepared(sql, reply(answer), out);
            if out.buf.len() > before + 4 && out.buf[before + 4] == 0 {
                // A prepare OK: remember its id for later commands.
                let at = before + 5;
                ids.push(u32::from_le_bytes([
                    out.buf[at],
                    out.buf[at + 1],
                    out.buf[at + 2],
                    out.buf[at + 3],
                ]));
            }
        }
        Step::FieldList(_) => {
            phase.field_list_answered(reply(random_result(rng)), out);
        }
        Step::Reset { .. } => {
            phase.ok(out);
        }
        Step::ChangeUser { .. } => {
            phase.user_changed(rng.random(), Bytes::new());
            ids.clear();
        }
        Step::Fetch { id, rows } => {
            let Ok(mut fetch) = phase.begin_fetch(id, rows, out) else {
                return;
            };
            for _ in 0..8 {
                match phase.fetch_rows(&mut fetch, out) {
                    FetchStep::Pull => phase.fetch_pulled(&mut fetch, pulled(rng)),
                    FetchStep::End => {
                        phase.end_fetch(fetch, out);
                        return;
                    }
                    FetchStep::Answered(_) => return,
                }
            }
            // Still pulling after eight reads: end as the stream would.
            phase.fetch_pulled(&mut fetch, Ok(None));
            if phase.fetch_rows(&mut fetch, out) == FetchStep::End {
                phase.end_fetch(fetch, out);
            }
        }
    }
}

/// `out` is whole packets with consecutive sequence ids.
fn assert_well_framed(out: &Packets, context: impl Fn() -> String) {
    let mut buf = BytesMut::from(&out.buf[..]);
    let mut seq = None::<u8>;
    loop {
        match crate::mysql::packet::decode(&mut buf, usize::MAX) {
            Ok(Some(p)) => {
                if let Some(prev) = seq {
                    assert_eq!(p.seq, prev.wrapping_add(1), "{}", context());
                }
                seq = Some(p.seq);
            }
            Ok(None) => break,
            Err(e) => panic!("{}: {e}", context()),
        }
    }
    assert!(buf.is_empty(), "a partial packet: {}", context());
}
