//! MySQL packet framing: whatever bytes a client sends, in whatever pieces,
//! `decode` yields whole packets or a refusal, never a panic, and never
//! more payload than it was given.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use myquic::mysql::packet::decode;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, stream)) = data.split_first() else {
        return;
    };
    // The two limits the sidecar uses: 16 KiB before login, 64 MiB after
    // (a small one here too, so that the refusal path is reached).
    let max = if knobs & 1 == 0 { 16 << 10 } else { 64 << 20 };
    // The bytes arrive as the socket delivers them: in pieces.
    let piece = usize::from(knobs >> 1).max(1);
    let mut buf = BytesMut::new();
    let mut payload_bytes = 0usize;
    for chunk in stream.chunks(piece) {
        buf.extend_from_slice(chunk);
        loop {
            match decode(&mut buf, max) {
                Ok(Some(packet)) => {
                    assert!(packet.payload.len() <= max, "a packet over the limit");
                    payload_bytes += packet.payload.len();
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert!(
        payload_bytes + buf.len() <= stream.len(),
        "payload out of thin air"
    );
});
