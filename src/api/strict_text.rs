//! What a protobuf client that validates strings may be sent.
//!
//! Our proto has `bytes` where the published one has `string` (a `Field`'s
//! names, error and warning messages), so that text in any character set
//! crosses unaltered. The wire form is the same, but a client generated
//! from the published proto that checks UTF-8 — Go's standard protobuf
//! codec does, for every proto3 `string` — refuses a whole response
//! holding one string that is not valid UTF-8, and one that does not check
//! (PlanetScale's `psdb` client's generated decoder) hands on a string
//! that is not one (`tests/compat/psdb-go`: latin1Text).
//! So the gateway sends such bytes unchanged only to a client that asks
//! for them ([`RAW_TEXT_HEADER`](super::RAW_TEXT_HEADER): the sidecar);
//! every other client gets them with U+FFFD, as JSON clients do.

use bytes::Bytes;

use super::pb::{
    CloseSessionResponse, CreateSessionResponse, ExecuteResponse, Field, PrepareResponse,
    QueryWarning, RpcError, Session,
};

/// A response whose `bytes` text fields may hold bytes that are not UTF-8.
pub trait StrictText: Clone {
    /// Whether every text field is valid UTF-8 (the usual case: checked
    /// without copying anything).
    fn text_is_valid(&self) -> bool;

    /// Replaces every byte sequence that is not UTF-8 with U+FFFD.
    fn make_text_valid(&mut self);

    /// A copy a strict client can read, or `None` when this one already
    /// is.
    fn strict_text(&self) -> Option<Self> {
        if self.text_is_valid() {
            return None;
        }
        let mut copy = self.clone();
        copy.make_text_valid();
        Some(copy)
    }
}

fn valid(text: &Bytes) -> bool {
    std::str::from_utf8(text).is_ok()
}

fn make_valid(text: &mut Bytes) {
    if !valid(text) {
        *text = Bytes::from(String::from_utf8_lossy(text).into_owned());
    }
}

fn field_is_valid(f: &Field) -> bool {
    [&f.name, &f.table, &f.org_table, &f.database, &f.org_name]
        .into_iter()
        .all(valid)
}

fn make_field_valid(f: &mut Field) {
    for text in [
        &mut f.name,
        &mut f.table,
        &mut f.org_table,
        &mut f.database,
        &mut f.org_name,
    ] {
        make_valid(text);
    }
}

fn error_is_valid(e: Option<&RpcError>) -> bool {
    e.is_none_or(|e| valid(&e.message))
}

fn make_error_valid(e: Option<&mut RpcError>) {
    if let Some(e) = e {
        make_valid(&mut e.message);
    }
}

fn warnings(session: Option<&Session>) -> &[QueryWarning] {
    session
        .and_then(|s| s.vitess_session.as_ref())
        .map_or(&[], |v| &v.warnings[..])
}

fn session_is_valid(session: Option<&Session>) -> bool {
    warnings(session).iter().all(|w| valid(&w.message))
}

fn make_session_valid(session: Option<&mut Session>) {
    if let Some(v) = session.and_then(|s| s.vitess_session.as_mut()) {
        for w in &mut v.warnings {
            make_valid(&mut w.message);
        }
    }
}

impl StrictText for ExecuteResponse {
    fn text_is_valid(&self) -> bool {
        error_is_valid(self.error.as_ref())
            && session_is_valid(self.session.as_ref())
            && self
                .result
                .as_ref()
                .is_none_or(|r| r.fields.iter().all(field_is_valid))
    }

    fn make_text_valid(&mut self) {
        make_error_valid(self.error.as_mut());
        make_session_valid(self.session.as_mut());
        if let Some(r) = &mut self.result {
            r.fields.iter_mut().for_each(make_field_valid);
        }
    }
}

impl StrictText for PrepareResponse {
    fn text_is_valid(&self) -> bool {
        error_is_valid(self.error.as_ref())
            && session_is_valid(self.session.as_ref())
            && self.fields.iter().all(field_is_valid)
            && self.param_fields.iter().all(field_is_valid)
    }

    fn make_text_valid(&mut self) {
        make_error_valid(self.error.as_mut());
        make_session_valid(self.session.as_mut());
        self.fields.iter_mut().for_each(make_field_valid);
        self.param_fields.iter_mut().for_each(make_field_valid);
    }
}

impl StrictText for CloseSessionResponse {
    fn text_is_valid(&self) -> bool {
        error_is_valid(self.error.as_ref()) && session_is_valid(self.session.as_ref())
    }

    fn make_text_valid(&mut self) {
        make_error_valid(self.error.as_mut());
        make_session_valid(self.session.as_mut());
    }
}

impl StrictText for CreateSessionResponse {
    fn text_is_valid(&self) -> bool {
        session_is_valid(self.session.as_ref())
    }

    fn make_text_valid(&mut self) {
        make_session_valid(self.session.as_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pb::{QueryResult, VitessSession};

    fn response(text: &'static [u8]) -> ExecuteResponse {
        ExecuteResponse {
            session: Some(Session {
                signature: Bytes::from_static(b"\xff\xfe signatures are bytes"),
                vitess_session: Some(VitessSession {
                    warnings: vec![QueryWarning {
                        code: 1265,
                        message: Bytes::from_static(text),
                    }],
                    ..Default::default()
                }),
            }),
            result: Some(QueryResult {
                fields: vec![Field {
                    name: Bytes::from_static(text),
                    org_table: Bytes::from_static(text),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            error: Some(RpcError {
                message: Bytes::from_static(text),
                code: 3,
            }),
            timing: 0.0,
            local_infile_request: None,
        }
    }

    #[test]
    fn valid_text_is_sent_as_it_is() {
        assert_eq!(response("café".as_bytes()).strict_text(), None);
        assert_eq!(PrepareResponse::default().strict_text(), None);
    }

    #[test]
    fn every_text_field_that_is_not_utf8_gets_replacement_characters() {
        let strict = response(b"caf\xe9").strict_text().expect("needs fixing");
        assert_eq!(strict, response("caf\u{fffd}".as_bytes()));
        // One invalid field is enough to need a copy.
        let mut one = response(b"ok");
        one.result.as_mut().unwrap().fields[0].database = Bytes::from_static(b"\xe9");
        let fixed = one.strict_text().unwrap();
        assert_eq!(
            &fixed.result.unwrap().fields[0].database[..],
            "\u{fffd}".as_bytes()
        );
        let prepare = PrepareResponse {
            fields: vec![Field {
                table: Bytes::from_static(b"\xa9"),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            &prepare.strict_text().unwrap().fields[0].table[..],
            "\u{fffd}".as_bytes()
        );
        // A parameter named by a latin1 alias.
        let parameter = PrepareResponse {
            param_fields: vec![Field {
                name: Bytes::from_static(b"caf\xe9"),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            &parameter.strict_text().unwrap().param_fields[0].name[..],
            "caf\u{fffd}".as_bytes()
        );
        let close = CloseSessionResponse {
            error: Some(RpcError {
                message: Bytes::from_static(b"\xc3"),
                code: 2,
            }),
            ..Default::default()
        };
        assert_eq!(
            &close.strict_text().unwrap().error.unwrap().message[..],
            "\u{fffd}".as_bytes()
        );
    }
}
