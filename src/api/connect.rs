//! The Connect protocol's framing, without I/O: content types, message
//! codecs (protobuf and proto3 JSON) and the streaming envelope.
//!
//! Spec: connectrpc.com `docs/protocol.md`; psdb-protocol.md §5.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Serialize, de::DeserializeOwned};

use super::compression::{Encoding, ZSTD_LEVEL};
use super::effort::Effort;
use super::error::{ApiError, Code};

/// How a message body is serialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Proto,
    Json,
}

/// Unary bodies are bare messages; streaming bodies are enveloped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Unary,
    Streaming,
}

/// Envelope flag: the message is compressed with the negotiated encoding.
pub const FLAG_COMPRESSED: u8 = 0x01;
/// Envelope flag: this is the end-of-stream message (JSON, always).
pub const FLAG_END_STREAM: u8 = 0x02;
/// Size of an envelope header: flags byte + big-endian u32 length.
pub const ENVELOPE_HEADER: usize = 5;

impl Codec {
    /// Parses a `Content-Type`; `None` means 415 Unsupported Media Type.
    pub fn from_content_type(value: &str) -> Option<(Self, Framing)> {
        let mut parts = value.split(';');
        let media = parts.next()?.trim();
        // Only a UTF-8 charset parameter is acceptable for JSON. Compared
        // in place: this runs on every request and response.
        let charset_ok = parts.all(|p| {
            let p = p.trim();
            p.is_empty() || p.eq_ignore_ascii_case("charset=utf-8")
        });
        if !charset_ok {
            return None;
        }
        const KNOWN: [(&str, Codec, Framing); 5] = [
            ("application/proto", Codec::Proto, Framing::Unary),
            ("application/protobuf", Codec::Proto, Framing::Unary),
            ("application/json", Codec::Json, Framing::Unary),
            (
                "application/connect+proto",
                Codec::Proto,
                Framing::Streaming,
            ),
            ("application/connect+json", Codec::Json, Framing::Streaming),
        ];
        KNOWN
            .iter()
            .find(|(name, _, _)| media.eq_ignore_ascii_case(name))
            .map(|&(_, codec, framing)| (codec, framing))
    }

    pub fn content_type(self, framing: Framing) -> &'static str {
        match (self, framing) {
            (Self::Proto, Framing::Unary) => "application/proto",
            (Self::Json, Framing::Unary) => "application/json",
            (Self::Proto, Framing::Streaming) => "application/connect+proto",
            (Self::Json, Framing::Streaming) => "application/connect+json",
        }
    }

    /// Decodes one message. A zero-length body is the empty message in
    /// both codecs (connect-go rejects it for JSON; we are lenient).
    pub fn decode<M>(self, body: &[u8]) -> Result<M, ApiError>
    where
        M: prost::Message + DeserializeOwned + Default,
    {
        if body.is_empty() {
            return Ok(M::default());
        }
        match self {
            Self::Proto => M::decode(body).map_err(|e| {
                ApiError::new(
                    Code::InvalidArgument,
                    format!("invalid protobuf message: {e}"),
                )
            }),
            Self::Json => serde_json::from_slice(body).map_err(|e| {
                ApiError::new(Code::InvalidArgument, format!("invalid JSON message: {e}"))
            }),
        }
    }

    pub fn encode<M>(self, message: &M) -> Bytes
    where
        M: prost::Message + Serialize,
    {
        match self {
            Self::Proto => message.encode_to_vec().into(),
            Self::Json => serde_json::to_vec(message)
                .expect("generated messages always serialise")
                .into(),
        }
    }
}

/// Frames one streaming message.
pub fn envelope(flags: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(ENVELOPE_HEADER + payload.len());
    put_envelope(&mut out, flags, payload);
    out.freeze()
}

/// The header of an envelope of `len` bytes (its payload sent after it).
pub fn envelope_header(flags: u8, len: usize) -> [u8; ENVELOPE_HEADER] {
    let len = u32::try_from(len).expect("messages are bounded well below 4 GiB");
    let [a, b, c, d] = len.to_be_bytes();
    [flags, a, b, c, d]
}

/// Appends an envelope to `out` (several make one write).
pub fn put_envelope(out: &mut BytesMut, flags: u8, payload: &[u8]) {
    out.reserve(ENVELOPE_HEADER + payload.len());
    out.put_u8(flags);
    out.put_u32(u32::try_from(payload.len()).expect("messages are bounded well below 4 GiB"));
    out.put_slice(payload);
}

/// The end-of-stream envelope: `{}` or `{"error":{code,message}}`.
pub fn end_stream(error: Option<&ApiError>) -> Bytes {
    let Some(e) = error else {
        // Every successful stream ends so: no JSON to build.
        return Bytes::from_static(&[FLAG_END_STREAM, 0, 0, 0, 2, b'{', b'}']);
    };
    let body = serde_json::json!({"error": {"code": e.code.as_str(), "message": e.message}});
    envelope(
        FLAG_END_STREAM,
        &serde_json::to_vec(&body).expect("JSON value"),
    )
}

/// One decoded envelope.
#[derive(Debug, PartialEq, Eq)]
pub struct Envelope {
    pub flags: u8,
    pub payload: Bytes,
}

impl Envelope {
    pub fn is_end_stream(&self) -> bool {
        self.flags & FLAG_END_STREAM != 0
    }

    pub fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSED != 0
    }
}

/// Takes one whole envelope off the front of `buf`; `Ok(None)` means more
/// bytes are needed. Envelopes larger than `limit` are refused before any
/// of their payload is buffered.
pub fn take_envelope(buf: &mut BytesMut, limit: usize) -> Result<Option<Envelope>, ApiError> {
    let Some((flags, len)) = envelope_head(buf, limit)? else {
        return Ok(None);
    };
    buf.advance(ENVELOPE_HEADER);
    let payload = buf.split_to(len).freeze();
    Ok(Some(Envelope { flags, payload }))
}

/// [`take_envelope`] from a body already whole: the payload is a view of
/// `buf`, not a copy.
pub fn take_whole_envelope(buf: &mut Bytes, limit: usize) -> Result<Option<Envelope>, ApiError> {
    let Some((flags, len)) = envelope_head(buf, limit)? else {
        return Ok(None);
    };
    buf.advance(ENVELOPE_HEADER);
    let payload = buf.split_to(len);
    Ok(Some(Envelope { flags, payload }))
}

/// The flags and payload length of the envelope at the start of `buf`,
/// once all of it is there.
fn envelope_head(buf: &[u8], limit: usize) -> Result<Option<(u8, usize)>, ApiError> {
    if buf.len() < ENVELOPE_HEADER {
        return Ok(None);
    }
    let flags = buf[0];
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > limit {
        return Err(ApiError::new(
            Code::ResourceExhausted,
            format!("message of {len} bytes exceeds the limit of {limit} bytes"),
        ));
    }
    if buf.len() < ENVELOPE_HEADER + len {
        return Ok(None);
    }
    Ok(Some((flags, len)))
}

/// Parses an end-of-stream payload into its error, if it carries one.
pub fn end_stream_error(payload: &[u8]) -> Option<ApiError> {
    let value: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let error = value.get("error")?;
    let code = error.get("code")?.as_str()?;
    let message = error.get("message").and_then(|m| m.as_str()).unwrap_or("");
    Some(ApiError::new(Code::from_name(code), message))
}

/// Encodes one message for a body: compressed with `encoding` (the flag
/// says so) when it is at least `compress_min` bytes.
pub fn encode_message<M>(
    codec: Codec,
    encoding: Encoding,
    compress_min: usize,
    message: &M,
) -> (Bytes, bool)
where
    M: prost::Message + Serialize,
{
    encode_message_with(
        codec,
        encoding,
        compress_min,
        || Effort::Zstd(ZSTD_LEVEL),
        message,
    )
}

/// [`encode_message`] with the effort chosen for the link (asked only for a
/// message large enough to compress): [`Effort::None`] sends it as it is,
/// its flag clear, whatever the negotiated encoding.
pub fn encode_message_with<M>(
    codec: Codec,
    encoding: Encoding,
    compress_min: usize,
    effort: impl FnOnce() -> Effort,
    message: &M,
) -> (Bytes, bool)
where
    M: prost::Message + Serialize,
{
    let raw = codec.encode(message);
    if encoding == Encoding::Identity || raw.len() < compress_min {
        return (raw, false);
    }
    match effort() {
        Effort::None => (raw, false),
        Effort::Zstd(level) => (encoding.compress_at(&raw, level), true),
    }
}

/// [`encode_message_with`], appended to `out` as an envelope; returns the
/// payload's size. A protobuf message sent as it is is encoded in place:
/// no buffer of its own and no copy (a point select's stream is four
/// such messages).
pub fn put_message_with<M>(
    out: &mut BytesMut,
    codec: Codec,
    encoding: Encoding,
    compress_min: usize,
    effort: impl FnOnce() -> Effort,
    message: &M,
) -> usize
where
    M: prost::Message + Serialize,
{
    if codec == Codec::Proto {
        let len = message.encoded_len();
        let effort = if encoding == Encoding::Identity || len < compress_min {
            Effort::None
        } else {
            effort()
        };
        let Effort::Zstd(level) = effort else {
            out.reserve(ENVELOPE_HEADER + len);
            out.put_u8(0);
            out.put_u32(u32::try_from(len).expect("messages are bounded well below 4 GiB"));
            message.encode(out).expect("room was reserved");
            return len;
        };
        let payload = encoding.compress_at(&message.encode_to_vec(), level);
        put_envelope(out, FLAG_COMPRESSED, &payload);
        return payload.len();
    }
    let (payload, compressed) = encode_message_with(codec, encoding, compress_min, effort, message);
    put_envelope(out, if compressed { FLAG_COMPRESSED } else { 0 }, &payload);
    payload.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pb;

    #[test]
    fn content_types() {
        assert_eq!(
            Codec::from_content_type("application/json; charset=utf-8"),
            Some((Codec::Json, Framing::Unary))
        );
        assert_eq!(
            Codec::from_content_type("application/connect+proto"),
            Some((Codec::Proto, Framing::Streaming))
        );
        assert_eq!(Codec::from_content_type("text/plain"), None);
        assert_eq!(
            Codec::from_content_type("application/json; charset=latin1"),
            None
        );
        // Media types and parameters are case-insensitive (RFC 9110).
        assert_eq!(
            Codec::from_content_type(" Application/Connect+JSON ; Charset=UTF-8"),
            Some((Codec::Json, Framing::Streaming))
        );
        assert_eq!(
            Codec::from_content_type("APPLICATION/PROTOBUF"),
            Some((Codec::Proto, Framing::Unary))
        );
        assert_eq!(Codec::from_content_type("application/proto2"), None);
    }

    #[test]
    fn envelopes_split_across_reads() {
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&envelope(0, b"abc"));
        wire.extend_from_slice(&end_stream(None));
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for byte in wire {
            buf.put_u8(byte);
            while let Some(env) = take_envelope(&mut buf, 1024).unwrap() {
                got.push(env);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(&got[0].payload[..], b"abc");
        assert!(got[1].is_end_stream());
        assert_eq!(end_stream_error(&got[1].payload), None);
        assert_eq!(&got[1].payload[..], b"{}");
    }

    /// In place or through a buffer of its own, a message is framed the
    /// same: every codec, compressed or not.
    #[test]
    fn messages_put_in_place_are_framed_as_encoded() {
        let message = pb::ExecuteResponse {
            timing: 1.5,
            result: Some(pb::QueryResult {
                rows_affected: 7,
                info: "x".repeat(2000),
                ..Default::default()
            }),
            ..Default::default()
        };
        for codec in [Codec::Proto, Codec::Json] {
            for encoding in [Encoding::Identity, Encoding::Zstd, Encoding::S2] {
                for min in [0, 1 << 20] {
                    for effort in [Effort::None, Effort::Zstd(1)] {
                        let (payload, compressed) =
                            encode_message_with(codec, encoding, min, || effort, &message);
                        let mut expected = BytesMut::from(&b"before"[..]);
                        put_envelope(
                            &mut expected,
                            if compressed { FLAG_COMPRESSED } else { 0 },
                            &payload,
                        );
                        let mut out = BytesMut::from(&b"before"[..]);
                        let len =
                            put_message_with(&mut out, codec, encoding, min, || effort, &message);
                        assert_eq!(out, expected, "{codec:?} {encoding:?} {min} {effort:?}");
                        assert_eq!(len, payload.len());
                    }
                }
            }
        }
    }

    /// A whole body gives the same envelopes as one read in pieces.
    #[test]
    fn whole_bodies_give_the_same_envelopes() {
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&envelope(FLAG_COMPRESSED, b"abc"));
        wire.extend_from_slice(&end_stream(None));
        let mut whole = wire.clone().freeze();
        let mut pieces = wire;
        for _ in 0..2 {
            assert_eq!(
                take_whole_envelope(&mut whole, 1024).unwrap(),
                take_envelope(&mut pieces, 1024).unwrap()
            );
        }
        assert!(whole.is_empty());
        assert_eq!(take_whole_envelope(&mut whole, 1024).unwrap(), None);
        let mut cut = envelope(0, b"abc").slice(..6);
        assert_eq!(take_whole_envelope(&mut cut, 1024).unwrap(), None);
        let mut big = envelope(0, &[0u8; 100]);
        let err = take_whole_envelope(&mut big, 10).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted);
    }

    #[test]
    fn oversized_envelope_is_refused_early() {
        let mut buf = BytesMut::from(&envelope(0, &[0u8; 100])[..6]);
        let err = take_envelope(&mut buf, 10).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted);
    }

    /// The proto3 JSON mapping as `@planetscale/database` sends and reads it.
    #[test]
    fn json_mapping_matches_planetscale() {
        let req: pb::ExecuteRequest = Codec::Json
            .decode(br#"{"query":"SELECT 1 from dual;","session":null}"#)
            .unwrap();
        assert_eq!(req.query, "SELECT 1 from dual;");
        assert!(req.session.is_none());

        let result = pb::QueryResult {
            fields: vec![
                pb::Field {
                    name: ":vtg1".into(),
                    r#type: pb::Type::Int64 as i32,
                    ..Default::default()
                },
                pb::Field {
                    name: "null".into(),
                    ..Default::default()
                },
            ],
            rows: vec![pb::Row {
                lengths: vec![1, -1],
                values: Bytes::from_static(b"1"),
            }],
            rows_affected: 0,
            insert_id: 7,
            ..Default::default()
        };
        let json: serde_json::Value = serde_json::from_slice(&Codec::Json.encode(&result)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "fields": [{"name": ":vtg1", "type": "INT64"}, {"name": "null"}],
                "rows": [{"lengths": ["1", "-1"], "values": "MQ=="}],
                "insertId": "7"
            })
        );

        let session = pb::VitessSession {
            in_transaction: true,
            ddl_strategy: "direct".into(),
            session_uuid: "abc".into(),
            row_count: -1,
            ..Default::default()
        };
        let json: serde_json::Value =
            serde_json::from_slice(&Codec::Json.encode(&session)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"inTransaction": true, "DDLStrategy": "direct",
                               "SessionUUID": "abc", "rowCount": "-1"})
        );
    }
    /// Random and mangled request bodies through the decoders a gateway
    /// runs before anything else (`MQ_FUZZ_ITERATIONS` for a long run):
    /// envelopes, decompression, both codecs. No input may panic.
    #[test]
    fn random_bodies_never_panic() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let n: u64 = std::env::var("MQ_FUZZ_ITERATIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5_000);
        let mut rng = SmallRng::seed_from_u64(11);
        let request = pb::ExecuteRequest {
            query: bytes::Bytes::from_static(b"SELECT :v1"),
            ..Default::default()
        };
        let mut valid = BytesMut::new();
        put_envelope(&mut valid, 0, &Codec::Proto.encode(&request));
        put_envelope(&mut valid, 0, &Codec::Json.encode(&request));
        for _ in 0..n {
            let mut body = valid.to_vec();
            for _ in 0..rng.random_range(0..8) {
                let at = rng.random_range(0..body.len());
                body[at] = rng.random();
            }
            body.truncate(rng.random_range(0..=body.len()));
            body.extend((0..rng.random_range(0..16)).map(|_| rng.random::<u8>()));
            let mut buf = BytesMut::from(&body[..]);
            while let Ok(Some(envelope)) = take_envelope(&mut buf, 1 << 16) {
                let message = if envelope.flags & FLAG_COMPRESSED != 0 {
                    let encoding = [
                        Encoding::Zstd,
                        Encoding::Snappy,
                        Encoding::Gzip,
                        Encoding::S2,
                    ][rng.random_range(0..4)];
                    match encoding.decompress(envelope.payload, 1 << 16) {
                        Ok(m) => m,
                        Err(_) => continue,
                    }
                } else {
                    envelope.payload
                };
                let _ = Codec::Proto.decode::<pb::ExecuteRequest>(&message);
                let _ = Codec::Json.decode::<pb::ExecuteRequest>(&message);
            }
        }
    }
}
