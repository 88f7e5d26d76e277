//! A streamed `ExecuteResponse` decoded without its `session` field, its
//! rows read in place.
//!
//! The session comes back to the caller as the server's bytes
//! ([`super::RawSession`], decoded once there); decoding it a second time
//! into `ExecuteResponse.session`, which nobody reads, cost every point
//! select a full `Session` decode (its strings and system-variable map).

use bytes::Bytes;

use crate::api::pb;
use crate::api::row_view::ResultView;

/// A streamed `psdb.v1alpha1.ExecuteResponse` without field 1
/// (`session`), which prost skips as an unknown field, and 4 (`timing`,
/// unset in a stream).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Streamed {
    #[prost(message, optional, tag = "2")]
    pub result: Option<ResultView>,
    #[prost(message, optional, tag = "3")]
    pub error: Option<pb::RpcError>,
    /// The backend asks for the client's file (our gateway's extension,
    /// to a request that said `local_infile`).
    #[prost(message, optional, tag = "1012")]
    pub local_infile_request: Option<pb::LocalInfileRequest>,
}

impl From<pb::ExecuteResponse> for Streamed {
    /// The message as a stream's would decode (its session dropped).
    fn from(message: pb::ExecuteResponse) -> Self {
        Self {
            result: message.result.map(ResultView::from),
            error: message.error,
            local_infile_request: message.local_infile_request,
        }
    }
}

/// Decodes a streamed message.
///
/// Decoded from the payload's `Bytes`, so each row (its `lengths` and its
/// `values`) is a view of the payload, not allocations and copies of its
/// own (250 rows per medium SELECT): rows are written to the client and
/// dropped with the message. The fields are copied out: a result set's, a
/// cursor's or a prepared statement's columns outlive the message, which
/// a view would keep whole (up to 256 KiB) for as long.
pub(super) fn decode_without_session(payload: Bytes) -> Result<Streamed, prost::DecodeError> {
    let mut message: Streamed = prost::Message::decode(payload)?;
    if let Some(result) = &mut message.result {
        own_fields(&mut result.head.fields);
    }
    Ok(message)
}

/// The fields' bytes, all in one allocation of their own: one copy per
/// message rather than one per name (six per field), each of which also
/// took a second allocation when first cloned (`Bytes` makes a shared
/// header for a vector it was made from on its first clone).
fn own_fields(fields: &mut [pb::Field]) {
    let total: usize = fields
        .iter_mut()
        .flat_map(field_bytes)
        .map(|b| b.len())
        .sum();
    if total == 0 {
        return;
    }
    let mut all = Vec::with_capacity(total);
    for bytes in fields.iter_mut().flat_map(field_bytes) {
        all.extend_from_slice(bytes);
    }
    let all = Bytes::from(all);
    let mut at = 0;
    for bytes in fields.iter_mut().flat_map(field_bytes) {
        let len = bytes.len();
        *bytes = all.slice(at..at + len);
        at += len;
    }
}

/// A field's `bytes` members.
fn field_bytes(field: &mut pb::Field) -> [&mut Bytes; 6] {
    [
        &mut field.name,
        &mut field.table,
        &mut field.org_table,
        &mut field.database,
        &mut field.org_name,
        &mut field.extended_metadata,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Everything but the session decodes as the full message does.
    #[test]
    fn the_same_message_but_its_session() {
        let full = pb::ExecuteResponse {
            session: Some(pb::Session {
                signature: b"sig".to_vec().into(),
                vitess_session: Some(pb::VitessSession {
                    in_transaction: true,
                    ..Default::default()
                }),
            }),
            result: Some(pb::QueryResult {
                rows_affected: 3,
                rows: vec![pb::Row {
                    lengths: vec![1],
                    values: b"1".to_vec().into(),
                }],
                ..Default::default()
            }),
            error: Some(pb::RpcError {
                message: "boom".into(),
                ..Default::default()
            }),
            timing: 0.0,
            // The gateway's ask for a file, with a name that is not UTF-8.
            local_infile_request: Some(pb::LocalInfileRequest {
                name: b"f\xff.tsv".to_vec().into(),
                load: b"id".to_vec().into(),
            }),
        };
        let decoded = decode_without_session(full.encode_to_vec().into()).unwrap();
        assert_eq!(decoded, Streamed::from(full));
        assert!(decode_without_session(Bytes::from_static(&[0x12, 0x05, 0x08])).is_err());
    }

    /// Rows are views of the payload, so no allocation per row (their
    /// lengths too: `row_view`'s tests); the
    /// fields, which may outlive the message, are copies of their own.
    #[test]
    fn rows_are_views_of_the_payload_and_fields_are_not() {
        let full = pb::ExecuteResponse {
            result: Some(pb::QueryResult {
                fields: vec![pb::Field {
                    name: b"c".to_vec().into(),
                    table: b"t".to_vec().into(),
                    org_table: b"t0".to_vec().into(),
                    database: b"d".to_vec().into(),
                    org_name: b"c0".to_vec().into(),
                    extended_metadata: b"\x01\x04json".to_vec().into(),
                    ..Default::default()
                }],
                rows: vec![pb::Row {
                    lengths: vec![5, -1, 0],
                    values: b"hello".to_vec().into(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let payload = Bytes::from(full.encode_to_vec());
        let within = |b: &Bytes| payload.as_ptr_range().contains(&b.as_ptr());
        let decoded = decode_without_session(payload.clone()).unwrap();
        assert_eq!(decoded, Streamed::from(full));
        let result = decoded.result.unwrap();
        assert!(within(result.rows[0].values()));
        let field = &result.head.fields[0];
        for bytes in [
            &field.name,
            &field.table,
            &field.org_table,
            &field.database,
            &field.org_name,
            &field.extended_metadata,
        ] {
            assert!(!within(bytes), "{bytes:?} is a view of the message");
        }
    }
}
