//! Sessions as opaque bytes.
//!
//! The session is the server's cookie: the client must hand back exactly
//! what it received. Decoding it into `pb::Session` and re-encoding would
//! drop every field our copy of the proto does not know (prost discards
//! unknown fields), and a newer psdb server's state with them. So the
//! session is kept as the raw bytes of field 1 (field 4 in
//! `CreateSessionResponse`), found by a scan of the response's top-level
//! fields, and spliced into requests as raw bytes. A decoded
//! [`pb::Session`] is kept beside them only for reading flags.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;
use prost::encoding::{WireType, decode_varint, encode_varint};

use crate::api::pb;

/// The session field of `ExecuteRequest`, `PrepareRequest`,
/// `CloseSessionRequest` and of their responses.
pub(crate) const SESSION_FIELD: u32 = 1;
/// The session field of `CreateSessionResponse` (3 is retired).
pub(crate) const CREATE_SESSION_FIELD: u32 = 4;

/// A session exactly as the server encoded it, plus a decoded view.
#[derive(Clone, Debug, PartialEq)]
pub struct RawSession {
    bytes: Bytes,
    view: pb::Session,
}

impl RawSession {
    /// Wraps encoded `Session` bytes; `Err` if they are not a valid
    /// `Session` message.
    pub fn from_bytes(bytes: Bytes) -> Result<Self, prost::DecodeError> {
        let view = pb::Session::decode(&bytes[..])?;
        Ok(Self { bytes, view })
    }

    /// The bytes to send back, unchanged.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// A decoded copy, for reading (fields unknown to our proto are
    /// missing from it, never from [`RawSession::as_bytes`]).
    pub fn view(&self) -> &pb::Session {
        &self.view
    }

    fn vitess(&self) -> Option<&pb::VitessSession> {
        self.view.vitess_session.as_ref()
    }

    /// Inside an explicit transaction (`BEGIN` … `COMMIT`).
    pub fn in_transaction(&self) -> bool {
        self.vitess().is_some_and(|v| v.in_transaction)
    }

    pub fn autocommit(&self) -> bool {
        self.vitess().is_some_and(|v| v.autocommit)
    }

    /// Warnings of the last statement.
    pub fn warnings(&self) -> &[pb::QueryWarning] {
        self.vitess().map(|v| &v.warnings[..]).unwrap_or(&[])
    }
}

/// Encodes `message` (whose own session field must be unset) with
/// `session`'s raw bytes as its field 1. Field order does not matter in
/// protobuf, so the session goes first.
pub(crate) fn encode_with_session<M: Message>(session: Option<&RawSession>, message: &M) -> Bytes {
    let Some(session) = session else {
        return message.encode_to_vec().into();
    };
    let raw = session.as_bytes();
    let mut out = BytesMut::with_capacity(raw.len() + message.encoded_len() + 11);
    let key = (SESSION_FIELD << 3) | WireType::LengthDelimited as u32;
    encode_varint(u64::from(key), &mut out);
    encode_varint(raw.len() as u64, &mut out);
    out.put_slice(raw);
    message
        .encode(&mut out)
        .expect("a BytesMut grows as needed");
    out.freeze()
}

/// The raw bytes of length-delimited field `field` at the top level of an
/// encoded message; `Ok(None)` if absent. A message field that occurs more
/// than once is, by protobuf's rules, the merge of all occurrences — which
/// is what their concatenation decodes to.
pub(crate) fn extract_field(message: &[u8], field: u32) -> Result<Option<Bytes>, String> {
    let mut buf = message;
    let mut found: Option<BytesMut> = None;
    while buf.has_remaining() {
        let key = decode_varint(&mut buf).map_err(|e| e.to_string())?;
        let number = key >> 3;
        let wire = WireType::try_from(key & 7).map_err(|e| e.to_string())?;
        if number == 0 {
            return Err("field number 0".into());
        }
        if number == u64::from(field) && wire == WireType::LengthDelimited {
            let value = take_len_delimited(&mut buf)?;
            found.get_or_insert_with(BytesMut::new).put_slice(value);
        } else {
            skip_field(&mut buf, wire, number, 0)?;
        }
    }
    Ok(found.map(BytesMut::freeze))
}

/// The session in a response, if any.
pub(crate) fn extract_session(message: &[u8], field: u32) -> Result<Option<RawSession>, String> {
    match extract_field(message, field)? {
        None => Ok(None),
        Some(bytes) => RawSession::from_bytes(bytes)
            .map(Some)
            .map_err(|e| format!("invalid session: {e}")),
    }
}

fn take_len_delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = decode_varint(buf).map_err(|e| e.to_string())?;
    let len = usize::try_from(len).map_err(|_| "length overflow".to_string())?;
    if len > buf.len() {
        return Err("truncated field".into());
    }
    let (value, rest) = buf.split_at(len);
    *buf = rest;
    Ok(value)
}

/// Skips one field's value; groups (deprecated, but legal) nest.
fn skip_field(buf: &mut &[u8], wire: WireType, number: u64, depth: u32) -> Result<(), String> {
    let skip = |buf: &mut &[u8], n: usize| {
        if buf.len() < n {
            return Err("truncated field".to_string());
        }
        buf.advance(n);
        Ok(())
    };
    match wire {
        WireType::Varint => decode_varint(buf).map(drop).map_err(|e| e.to_string()),
        WireType::SixtyFourBit => skip(buf, 8),
        WireType::ThirtyTwoBit => skip(buf, 4),
        WireType::LengthDelimited => take_len_delimited(buf).map(drop),
        WireType::StartGroup => {
            if depth >= 100 {
                return Err("groups nested too deeply".into());
            }
            loop {
                if !buf.has_remaining() {
                    return Err("unterminated group".into());
                }
                let key = decode_varint(buf).map_err(|e| e.to_string())?;
                let inner = WireType::try_from(key & 7).map_err(|e| e.to_string())?;
                if inner == WireType::EndGroup {
                    return if key >> 3 == number {
                        Ok(())
                    } else {
                        Err("mismatched end of group".into())
                    };
                }
                skip_field(buf, inner, key >> 3, depth + 1)?;
            }
        }
        WireType::EndGroup => Err("unexpected end of group".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session as a newer server might send it: known fields plus field
    /// 99 (unknown to us) at the top level and inside `vitess_session`.
    fn future_session() -> Bytes {
        let known = pb::Session {
            signature: Bytes::from_static(b"sig"),
            vitess_session: Some(pb::VitessSession {
                in_transaction: true,
                autocommit: true,
                ..Default::default()
            }),
        };
        let mut bytes = BytesMut::new();
        known.encode(&mut bytes).unwrap();
        // vitess_session again (merges): an unknown varint field 99 = 7.
        let mut inner = BytesMut::new();
        encode_varint((99 << 3) as u64, &mut inner);
        encode_varint(7, &mut inner);
        encode_varint(((2 << 3) | 2) as u64, &mut bytes);
        encode_varint(inner.len() as u64, &mut bytes);
        bytes.put_slice(&inner);
        // Top-level unknown string field 99.
        encode_varint(((99 << 3) | 2) as u64, &mut bytes);
        encode_varint(3, &mut bytes);
        bytes.put_slice(b"new");
        bytes.freeze()
    }

    #[test]
    fn unknown_fields_survive_the_round_trip() {
        let raw = future_session();
        let response = {
            let mut out = BytesMut::new();
            // result (field 2) before the session, then timing (fixed64).
            pb::ExecuteResponse {
                result: Some(pb::QueryResult {
                    rows_affected: 3,
                    ..Default::default()
                }),
                timing: 0.5,
                ..Default::default()
            }
            .encode(&mut out)
            .unwrap();
            encode_varint(((1 << 3) | 2) as u64, &mut out);
            encode_varint(raw.len() as u64, &mut out);
            out.put_slice(&raw);
            out.freeze()
        };
        let session = extract_session(&response, SESSION_FIELD).unwrap().unwrap();
        assert_eq!(session.as_bytes(), &raw, "bytes kept verbatim");
        assert!(session.in_transaction() && session.autocommit());
        assert_eq!(session.view().signature, Bytes::from_static(b"sig"));
        // What prost alone would have sent back is shorter: lossy.
        assert!(session.view().encoded_len() < raw.len());

        let request = pb::ExecuteRequest {
            query: "SELECT 1".into(),
            ..Default::default()
        };
        let wire = encode_with_session(Some(&session), &request);
        assert_eq!(
            extract_field(&wire, SESSION_FIELD).unwrap().unwrap(),
            raw,
            "spliced verbatim"
        );
        let decoded = pb::ExecuteRequest::decode(&wire[..]).unwrap();
        assert_eq!(decoded.query, "SELECT 1");
        assert_eq!(decoded.session.as_ref(), Some(session.view()));
    }

    #[test]
    fn repeated_occurrences_merge_and_absence_is_none() {
        let a = pb::Session {
            signature: Bytes::from_static(b"a"),
            vitess_session: None,
        };
        let b = pb::Session {
            signature: Bytes::new(),
            vitess_session: Some(pb::VitessSession {
                autocommit: true,
                ..Default::default()
            }),
        };
        let mut msg = BytesMut::new();
        for s in [&a, &b] {
            pb::CloseSessionResponse {
                session: Some(s.clone()),
                error: None,
            }
            .encode(&mut msg)
            .unwrap();
        }
        let session = extract_session(&msg, SESSION_FIELD).unwrap().unwrap();
        assert_eq!(session.view().signature, Bytes::from_static(b"a"));
        assert!(session.autocommit());
        assert_eq!(extract_field(b"", SESSION_FIELD).unwrap(), None);
        let create = pb::CreateSessionResponse {
            branch: "main".into(),
            session: Some(a.clone()),
            ..Default::default()
        }
        .encode_to_vec();
        // Field 1 of CreateSessionResponse is the branch, not the session.
        assert_eq!(
            extract_field(&create, SESSION_FIELD).unwrap().as_deref(),
            Some(&b"main"[..])
        );
        assert_eq!(
            extract_session(&create, CREATE_SESSION_FIELD)
                .unwrap()
                .unwrap()
                .view(),
            &a
        );
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &[0x0a, 0x05, 1][..],          // length past the end
            &[0x08][..],                   // varint missing
            &[0x0b][..],                   // unterminated group
            &[0x0c][..],                   // stray end of group
            &[0x0f][..],                   // wire type 7
            &[0x00, 0x00][..],             // field 0
            &[0x09, 1, 2, 3][..],          // truncated fixed64
            &[0x0b, 0x14, 0x0c][..],       // group ended by another number
            &[0x0a, 0x02, 0xff, 0xff][..], // session that is not a Session
        ] {
            assert!(extract_session(bad, SESSION_FIELD).is_err(), "{bad:?}");
        }
        let group = [0x13, 0x08, 0x01, 0x14, 0x0a, 0x00];
        assert_eq!(
            extract_field(&group, SESSION_FIELD).unwrap(),
            Some(Bytes::new())
        );
    }
}
