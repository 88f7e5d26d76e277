//! The command phase's memory rules: what prepared statements and long
//! data are charged, and the refusals when a budget or the gateway's
//! request limit is reached.

use super::tests::{Phase, command, err_code, first_payload, phase, prepare};
use super::*;
use crate::sidecar::budget::ProcessBudget;

fn send_long_data(phase: &mut Phase, id: u32, param: u16, data: &[u8]) {
    let mut payload = vec![0x18];
    payload.extend_from_slice(&id.to_le_bytes());
    payload.extend_from_slice(&param.to_le_bytes());
    payload.extend_from_slice(data);
    let (step, out) = command(phase, &payload);
    assert!(matches!(step, Step::Answered(Next::Continue)), "{step:?}");
    assert!(out.buf.is_empty(), "long data has no answer");
}

/// `COM_STMT_EXECUTE` of statement `id` whose one parameter (a BLOB) was
/// sent as long data: the ERR it got, if any.
fn execute_long_data(phase: &mut Phase, id: u32) -> Option<(u16, String)> {
    let mut payload = vec![0x17];
    payload.extend_from_slice(&id.to_le_bytes());
    payload.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0xfc, 0]);
    let (step, out) = command(phase, &payload);
    match step {
        Step::Execute(_) => None,
        Step::Answered(Next::Continue) => {
            let message = String::from_utf8_lossy(&first_payload(&out)[9..]).into_owned();
            Some((err_code(&out), message))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_data_beyond_the_gateways_request_limit_is_dropped_at_once() {
    let mut phase = phase();
    phase.set_request_limit(1000);
    let id = prepare(&mut phase, "SELECT ?", 1, 1);
    send_long_data(&mut phase, id, 0, &[b'x'; 600]);
    send_long_data(&mut phase, id, 0, &[b'x'; 600]);
    // Nothing more is kept once refused (a statement in its error state).
    send_long_data(&mut phase, id, 0, b"more");
    let stmt = phase.statements.get_mut(id).unwrap();
    assert_eq!(stmt.params.long_data_len(), 0);
    let (code, message) = execute_long_data(&mut phase, id).expect("refused");
    assert_eq!(code, 1153, "{message}");
    assert!(message.contains("max_request_bytes"), "{message}");
    // The next value that fits goes through.
    send_long_data(&mut phase, id, 0, &[b'x'; 600]);
    assert_eq!(execute_long_data(&mut phase, id), None);
}

#[test]
fn statements_and_long_data_are_charged_and_given_back() {
    let process = ProcessBudget::new(64 << 10);
    let budget = process.connection(8 << 10);
    let mut phase = phase().with_budget(budget.clone());
    let id = prepare(&mut phase, "SELECT ?", 1, 1);
    let statement = budget.used();
    assert!(statement > 0);
    send_long_data(&mut phase, id, 0, &[b'x'; 4096]);
    assert_eq!(budget.used(), statement + 4096);
    // Over the connection's budget: 1153, and the data is given back.
    send_long_data(&mut phase, id, 0, &[b'x'; 4096]);
    assert_eq!(budget.used(), statement);
    let (code, message) = execute_long_data(&mut phase, id).expect("refused");
    assert_eq!(code, 1153, "{message}");
    assert!(message.contains("memory_per_connection"), "{message}");
    // An execute consumes what it used.
    send_long_data(&mut phase, id, 0, &[b'x'; 4096]);
    assert_eq!(execute_long_data(&mut phase, id), None);
    assert_eq!(budget.used(), statement);
    // Statements until the budget is full: 1461; a close gives back.
    let mut ids = vec![id];
    let refused = loop {
        let mut payload = vec![0x16];
        payload.extend_from_slice(b"SELECT ?");
        let (Step::Prepare(sql), _) = command(&mut phase, &payload) else {
            panic!("a prepare");
        };
        let mut out = Packets::reply_to(0);
        let answer = pb::PrepareResponse {
            params_count: 1,
            ..Default::default()
        };
        phase.prepared(sql, super::tests::reply(answer), &mut out);
        if first_payload(&out)[0] == 0xff {
            break out;
        }
        ids.push(u32::from_le_bytes(
            first_payload(&out)[1..5].try_into().unwrap(),
        ));
    };
    assert_eq!(err_code(&refused), 1461);
    assert!(ids.len() > 2, "{} statements fit", ids.len());
    for id in ids {
        let mut close = vec![0x19];
        close.extend_from_slice(&id.to_le_bytes());
        command(&mut phase, &close);
    }
    assert_eq!((budget.used(), process.used()), (0, 0));
}

#[test]
fn a_reset_gives_everything_back() {
    let budget = ProcessBudget::new(1 << 20).connection(1 << 20);
    let mut phase = phase().with_budget(budget.clone());
    let id = prepare(&mut phase, "SELECT ?", 1, 1);
    send_long_data(&mut phase, id, 0, b"held");
    assert!(budget.used() > 0);
    command(&mut phase, &[0x1f]); // COM_RESET_CONNECTION
    assert_eq!(budget.used(), 0);
}
