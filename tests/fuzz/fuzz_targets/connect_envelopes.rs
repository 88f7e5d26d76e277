//! A Connect request body as the gateway reads it: envelopes, compressed
//! ones decompressed (bounded), each message decoded as every request type
//! in both codecs; an end-of-stream envelope's JSON error as the sidecar
//! reads it.
//!
//! Input: 1 byte (the encoding of compressed envelopes), then the body.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use myquic::api::connect::{end_stream_error, take_envelope};
use myquic::api::pb;
use myquic::api::{Codec, Encoding};

const LIMIT: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, body)) = data.split_first() else {
        return;
    };
    let encoding = [
        Encoding::Zstd,
        Encoding::Snappy,
        Encoding::Gzip,
        Encoding::Identity,
        Encoding::S2,
    ][usize::from(knob % 5)];
    let mut buf = BytesMut::from(body);
    while let Ok(Some(envelope)) = take_envelope(&mut buf, LIMIT) {
        if envelope.is_end_stream() {
            let _ = end_stream_error(&envelope.payload);
            continue;
        }
        let message = if envelope.is_compressed() {
            match encoding.decompress(envelope.payload, LIMIT) {
                Ok(message) => message,
                Err(_) => continue,
            }
        } else {
            envelope.payload
        };
        assert!(message.len() <= LIMIT, "a message over the limit");
        for codec in [Codec::Proto, Codec::Json] {
            let _ = codec.decode::<pb::ExecuteRequest>(&message);
            let _ = codec.decode::<pb::PrepareRequest>(&message);
            let _ = codec.decode::<pb::CreateSessionRequest>(&message);
            let _ = codec.decode::<pb::CloseSessionRequest>(&message);
        }
    }
});
