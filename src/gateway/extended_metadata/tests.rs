//! The relay's reading of a conversation, packet by packet.

use super::answers::{Answers, Ending, Lost, MAX_PAYLOAD, Record};
use super::wire::Framing;

const JSON: &[u8] = b"\x01\x04json";

/// A column definition named `name` with `info` as its extended info
/// (`None`: as a client without extended metadata gets it).
fn definition(name: &str, info: Option<&[u8]>) -> Vec<u8> {
    let mut d = Vec::new();
    for part in [
        &b"def"[..],
        b"test",
        b"t",
        b"t",
        name.as_bytes(),
        name.as_bytes(),
    ] {
        d.push(part.len() as u8);
        d.extend_from_slice(part);
    }
    if let Some(info) = info {
        d.push(info.len() as u8);
        d.extend_from_slice(info);
    }
    d.extend_from_slice(&[
        0x0c, 0xe0, 0, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x90, 0, 0, 0, 0,
    ]);
    d
}

/// An OK (0x00) or end-of-rows OK (0xfe) with `status`.
fn ok(header: u8, status: u16) -> Vec<u8> {
    let mut p = vec![header, 0, 0];
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&[0, 0]);
    p
}

fn eof(status: u16) -> Vec<u8> {
    let mut p = vec![0xfe, 0, 0];
    p.extend_from_slice(&status.to_le_bytes());
    p
}

/// Feeds the server's packets; what each became, and the records.
fn feed(answers: &mut Answers, packets: &[Vec<u8>]) -> Result<(Vec<Vec<u8>>, Vec<Record>), Lost> {
    let mut done = Vec::new();
    let mut out = Vec::new();
    for p in packets {
        out.push(
            answers
                .server_packet(p, &mut done)?
                .unwrap_or_else(|| p.clone()),
        );
    }
    Ok((out, done))
}

fn logged_in(deprecate_eof: bool, cache_metadata: bool) -> Answers {
    let mut answers = Answers::new(Framing {
        deprecate_eof,
        cache_metadata,
    });
    let mut done = Vec::new();
    assert_eq!(answers.server_packet(&ok(0, 2), &mut done), Ok(None));
    answers
}

#[test]
fn a_text_result_loses_its_extended_info_and_keeps_it() {
    let mut answers = logged_in(true, false);
    answers.client_packet(0, b"\x03SELECT j, t FROM t");
    let row_like_a_definition = definition("x", Some(JSON));
    let (out, done) = feed(
        &mut answers,
        &[
            vec![2],
            definition("j", Some(JSON)),
            definition("t", Some(b"")),
            row_like_a_definition.clone(),
            ok(0xfe, 2),
        ],
    )
    .unwrap();
    assert_eq!(out[1], definition("j", None));
    assert_eq!(out[2], definition("t", None));
    assert_eq!(out[3], row_like_a_definition, "rows pass untouched");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].infos, vec![JSON.to_vec(), Vec::new()]);
    assert_eq!(done[0].columns[0].name_ref(), b"j");
    // Back to waiting for a command: an unasked packet passes.
    assert_eq!(
        feed(&mut answers, &[definition("k", Some(JSON))])
            .unwrap()
            .1,
        vec![]
    );
}

#[test]
fn several_results_with_eof_packets() {
    let mut answers = logged_in(false, false);
    answers.client_packet(0, b"\x03CALL p()");
    let (_, done) = feed(
        &mut answers,
        &[
            vec![1],
            definition("a", Some(JSON)),
            eof(2 | 8),
            b"\x01x".to_vec(),
            eof(2 | 8),
            vec![1],
            definition("b", Some(b"\x00\x05inet6")),
            eof(2 | 8),
            eof(2 | 8),
            ok(0, 2),
        ],
    )
    .unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!(done[1].infos, vec![b"\x00\x05inet6".to_vec()]);
    // Then a ping's OK, and a query again.
    answers.client_packet(0, b"\x0e");
    answers.client_packet(0, b"\x03SELECT 1");
    let (_, done) = feed(
        &mut answers,
        &[
            ok(0, 2),
            vec![1],
            definition("c", Some(b"")),
            eof(2),
            eof(2),
        ],
    )
    .unwrap();
    assert_eq!(done.len(), 1);
}

/// The packet that ends each result is noted, in order, with its status
/// flags and warning count: an end of rows (EOF or OK), an OK result;
/// not a column EOF, a prepare's OK or the login's.
#[test]
fn how_each_result_ended_is_noted() {
    let ending = |status, warnings| Ending {
        status,
        warnings,
        state: None,
    };
    let warned = |mut p: Vec<u8>, at: usize| {
        p[at] = 3;
        p
    };
    for deprecate_eof in [false, true] {
        let mut answers = logged_in(deprecate_eof, false);
        answers.client_packet(0, b"\x03CALL p()");
        // Each command clears what the last one's answer noted.
        assert!(std::mem::take(&mut answers.new_command));
        let end = |status| {
            if deprecate_eof {
                ok(0xfe, status)
            } else {
                eof(status)
            }
        };
        let mut packets = vec![vec![1], definition("a", Some(b""))];
        if !deprecate_eof {
            packets.push(eof(0x0a));
        }
        // Warnings: the fourth byte of an EOF, the sixth of these OKs.
        let at = if deprecate_eof { 5 } else { 1 };
        packets.extend([
            b"\x01x".to_vec(),
            warned(end(0x2a), at),
            warned(ok(0, 0x22), 5),
        ]);
        feed(&mut answers, &packets).unwrap();
        assert_eq!(
            answers.endings,
            vec![ending(0x2a, 3), ending(0x22, 3)],
            "deprecate_eof {deprecate_eof}"
        );
    }
    let mut answers = logged_in(true, false);
    answers.client_packet(1, b"more of a command");
    assert!(!answers.new_command);
    answers.client_packet(0, b"\x16SELECT 1");
    feed(
        &mut answers,
        &[b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec()],
    )
    .unwrap();
    assert!(answers.endings.is_empty());
}

#[test]
fn a_prepared_statement_and_a_binary_result_without_metadata() {
    let mut answers = logged_in(true, true);
    answers.client_packet(0, b"\x16SELECT j FROM t WHERE id = ?");
    // id 1, one column, one parameter.
    let prepare_ok = vec![0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0];
    let (out, done) = feed(
        &mut answers,
        &[
            prepare_ok,
            definition("?", Some(b"")),
            definition("j", Some(JSON)),
        ],
    )
    .unwrap();
    assert_eq!(out[1], definition("?", None), "parameters lose it too");
    assert_eq!(done.len(), 1, "only the columns are kept");
    assert_eq!(done[0].infos, vec![JSON.to_vec()]);
    // COM_STMT_SEND_LONG_DATA and COM_STMT_CLOSE are not answered.
    answers.client_packet(0, b"\x18\x01\x00\x00\x00\x00\x00data");
    answers.client_packet(0, b"\x17\x01\x00\x00\x00\x00\x01\x00\x00\x00");
    // The column count, then "metadata does not follow": no definitions.
    let (out, done) = feed(
        &mut answers,
        &[vec![1, 0], vec![0, 0, 1, b'x'], ok(0xfe, 2)],
    )
    .unwrap();
    assert!(done.is_empty());
    assert_eq!(out[1], vec![0, 0, 1, b'x']);
    answers.client_packet(0, b"\x19\x01\x00\x00\x00");
    answers.client_packet(0, b"\x03DO 1");
    assert_eq!(feed(&mut answers, &[ok(0, 2)]).unwrap().1, vec![]);
}

#[test]
fn a_long_row_is_not_read_for_its_end() {
    let mut answers = logged_in(true, false);
    answers.client_packet(0, b"\x03SELECT repeat('x', 1 << 24)");
    let mut long = vec![0xfe];
    long.resize(MAX_PAYLOAD, 0xfe);
    // The row's rest starts with 0xfe and is short: not an end.
    let (_, done) = feed(
        &mut answers,
        &[
            vec![1],
            definition("r", Some(b"")),
            long,
            eof(2),
            ok(0xfe, 2),
        ],
    )
    .unwrap();
    assert_eq!(done.len(), 1);
    // The result ended with the OK after it: the next answer is a new one.
    answers.client_packet(0, b"\x03SELECT 1");
    assert_eq!(
        feed(&mut answers, &[vec![1], definition("s", Some(JSON))])
            .unwrap()
            .1
            .len(),
        1
    );
}

#[test]
fn a_split_command_is_one_command() {
    let mut answers = logged_in(true, false);
    let mut long = vec![0x03];
    long.resize(MAX_PAYLOAD, b' ');
    answers.client_packet(0, &long);
    // Its continuation has sequence id 1; an empty one would too.
    answers.client_packet(1, b"\x03SELECT 1");
    assert_eq!(feed(&mut answers, &[ok(0, 2)]).unwrap().1, vec![]);
    // Only one answer was expected: this packet is unasked.
    assert_eq!(feed(&mut answers, &[vec![1]]).unwrap().0, vec![vec![1]]);
}

#[test]
fn what_does_not_fit_is_lost() {
    let mut answers = logged_in(true, false);
    answers.client_packet(0, b"\x03SELECT j FROM t");
    let mut broken = definition("j", Some(JSON));
    broken.truncate(20);
    assert!(feed(&mut answers, &[vec![1], broken]).is_err());
}

#[test]
fn authentication_runs_until_its_ok_or_err() {
    let mut answers = Answers::new(Framing {
        deprecate_eof: true,
        cache_metadata: false,
    });
    // An auth switch, then caching_sha2's "fast auth" marker, then OK.
    let (out, done) = feed(
        &mut answers,
        &[b"\xfemysql_native_password\0".to_vec(), vec![1, 3]],
    )
    .unwrap();
    assert_eq!(out.len(), 2);
    assert!(done.is_empty());
    answers.client_packet(3, b"scramble");
    feed(&mut answers, &[ok(0, 2)]).unwrap();
    answers.client_packet(0, b"\x11root\0");
    feed(
        &mut answers,
        &[b"\xfemysql_native_password\0".to_vec(), ok(0, 2)],
    )
    .unwrap();
    answers.client_packet(0, b"\x03SELECT 1");
    assert_eq!(
        feed(&mut answers, &[vec![1], definition("a", Some(b""))])
            .unwrap()
            .1
            .len(),
        1
    );
}

#[test]
fn any_bytes_are_read_without_panicking() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    for _ in 0..2000 {
        let mut answers = Answers::new(Framing {
            deprecate_eof: rng.random(),
            cache_metadata: rng.random(),
        });
        let mut done = Vec::new();
        for _ in 0..20 {
            let len = rng.random_range(0..40);
            let mut packet: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            // Often a known first byte, so every state is reached.
            if let Some(first) = packet.first_mut() {
                *first = [0x00, 0x01, 0x03, 0x16, 0x17, 0xfe, 0xff, 0xfb, *first]
                    [rng.random_range(0..9)];
            }
            if rng.random_bool(0.4) {
                answers.client_packet(rng.random_range(0..2), &packet);
            } else if answers.server_packet(&packet, &mut done).is_err() {
                break;
            }
        }
    }
}

#[test]
fn a_result_is_paired_with_the_record_of_the_same_columns() {
    use super::ExtendedMetadata;
    let record = |names: &[&str], info: &[u8]| {
        let mut answers = logged_in(true, false);
        answers.client_packet(0, b"\x03SELECT");
        let mut packets = vec![vec![names.len() as u8]];
        packets.extend(names.iter().map(|n| definition(n, Some(info))));
        feed(&mut answers, &packets).unwrap().1.remove(0)
    };
    // The gateway's own read (never paired), the client's result, and a
    // later one.
    let own = record(&["@@in_transaction"], b"");
    let wanted = record(&["j"], JSON);
    let later = record(&["k"], JSON);
    let metadata = ExtendedMetadata::with_records(7, vec![own, wanted.clone(), later.clone()]);
    assert_eq!(
        metadata.infos(7, &wanted.columns),
        Some(vec![JSON.to_vec()])
    );
    // Not relayed: the caller looks JSON columns up instead.
    assert_eq!(metadata.infos(8, &later.columns), None);
    // A result no record matches gets no info, and passed-over records
    // are gone.
    let unmatched = record(&["x", "y"], JSON);
    assert_eq!(
        metadata.infos(7, &unmatched.columns),
        Some(vec![Vec::new(), Vec::new()])
    );
    assert_eq!(metadata.infos(7, &later.columns), Some(vec![Vec::new()]));
}

/// With `CLIENT_SESSION_TRACK` asked by the relay, each OK's session-state
/// information goes into its ending and out of the packet, with
/// `SERVER_SESSION_STATE_CHANGED`: the driver gets the OK a server writes
/// to a client without tracking (its info kept only when not empty). An
/// OK without the flag passes as it is, its ending with an empty state;
/// a cut one loses the connection, never a panic.
#[test]
fn session_state_is_taken_out_of_each_ok() {
    let state = b"\x00\x11\x09time_zone\x06+05:00";
    // header, affected 1, insert id 0, status, warnings, info, state.
    let tracked = |header: u8, info: &[u8]| {
        let mut p = vec![header, 1, 0, 0x02, 0x40, 0, 0, info.len() as u8];
        p.extend_from_slice(info);
        p.push(state.len() as u8);
        p.extend_from_slice(state);
        p
    };
    let mut answers = logged_in(true, false);
    answers.session_track = true;
    answers.client_packet(0, b"\x03SET time_zone = '+05:00'");
    let (out, _) = feed(&mut answers, &[tracked(0, b"")]).unwrap();
    assert_eq!(out, vec![vec![0, 1, 0, 0x02, 0, 0, 0]]);
    answers.client_packet(0, b"\x03SELECT 1; UPDATE t SET a = 1");
    let mut end = tracked(0xfe, b"");
    end[3] |= 0x08;
    let (out, _) = feed(
        &mut answers,
        &[
            vec![1],
            definition("a", Some(b"")),
            b"\x011".to_vec(),
            end,
            tracked(0, b"Rows matched: 1"),
        ],
    )
    .unwrap();
    assert_eq!(out[3], [0xfe, 1, 0, 0x0a, 0, 0, 0]);
    assert_eq!(out[4][..7], [0, 1, 0, 0x02, 0, 0, 0]);
    assert_eq!(&out[4][7..], b"\x0fRows matched: 1");
    let endings = std::mem::take(&mut answers.endings);
    assert_eq!(endings.len(), 3);
    assert!(
        endings
            .iter()
            .all(|e| e.state.as_deref() == Some(&state[..]))
    );
    // No change: as it is, and an empty state.
    answers.client_packet(0, b"\x03DO 1");
    let (out, _) = feed(&mut answers, &[ok(0, 2)]).unwrap();
    assert_eq!(out, vec![ok(0, 2)]);
    assert_eq!(answers.endings[0].state.as_deref(), Some(&[][..]));
    // Cut anywhere in its info or state: lost, not a panic.
    let whole = tracked(0, b"info");
    for end in 7..whole.len() {
        let mut answers = logged_in(true, false);
        answers.session_track = true;
        answers.client_packet(0, b"\x03SET @a = 1");
        assert!(
            feed(&mut answers, &[whole[..end].to_vec()]).is_err(),
            "{end}"
        );
    }
    // Not asked by the relay (the driver's own): untouched, no state.
    let mut answers = logged_in(true, false);
    answers.client_packet(0, b"\x03SET time_zone = '+05:00'");
    let (out, _) = feed(&mut answers, &[tracked(0, b"")]).unwrap();
    assert_eq!(out, vec![tracked(0, b"")]);
    assert_eq!(answers.endings[0].state, None);
}
