//! A streamed `ExecuteResponse` decoded without its `session` field.
//!
//! The session comes back to the caller as the server's bytes
//! ([`super::RawSession`], decoded once there); decoding it a second time
//! into `ExecuteResponse.session`, which nobody reads, cost every point
//! select a full `Session` decode (its strings and system-variable map).

use crate::api::pb;

/// `psdb.v1alpha1.ExecuteResponse` without field 1 (`session`), which
/// prost skips as an unknown field, and 4 (`timing`, unset in a stream).
#[derive(Clone, PartialEq, prost::Message)]
struct WithoutSession {
    #[prost(message, optional, tag = "2")]
    result: Option<pb::QueryResult>,
    #[prost(message, optional, tag = "3")]
    error: Option<pb::RpcError>,
}

/// Decodes a streamed message; its `session` is left `None`.
pub(super) fn decode_without_session(
    payload: &[u8],
) -> Result<pb::ExecuteResponse, prost::DecodeError> {
    let WithoutSession { result, error } = prost::Message::decode(payload)?;
    Ok(pb::ExecuteResponse {
        session: None,
        result,
        error,
        timing: 0.0,
    })
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
        };
        let decoded = decode_without_session(&full.encode_to_vec()).unwrap();
        assert_eq!(
            decoded,
            pb::ExecuteResponse {
                session: None,
                ..full
            }
        );
        assert!(decode_without_session(&[0x12, 0x05, 0x08]).is_err());
    }
}
