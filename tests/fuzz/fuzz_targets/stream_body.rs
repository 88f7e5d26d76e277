//! The gateway's decoding of a zstd request body as it arrives
//! (`api::stream_coding::BodyDecoder`, a large `StreamExecute` sent while
//! the sidecar compresses it): any bytes, cut into any pieces, give the
//! decoded body within its limit or an error, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use myquic::api::Encoding;
use myquic::api::stream_coding::BodyDecoder;

/// A zstd skippable frame larger than the size from which a body is
/// decoded as it arrives: what follows it takes that path.
fn skippable_frame() -> Vec<u8> {
    let len = 300u32 << 10;
    let mut frame = vec![0x50, 0x2a, 0x4d, 0x18];
    frame.extend_from_slice(&len.to_le_bytes());
    frame.resize(8 + len as usize, 0);
    frame
}

fuzz_target!(|data: &[u8]| {
    let limit = 1 << 20;
    // The first bytes choose the pieces' sizes, in turn.
    let (cuts, body) = data.split_at(data.len().min(4));
    let mut decoder = BodyDecoder::new(Encoding::Zstd, limit);
    if decoder.push(&skippable_frame()).is_err() {
        return;
    }
    let mut rest = body;
    for &cut in cuts.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let n = (usize::from(cut) + 1).min(rest.len());
        if decoder.push(&rest[..n]).is_err() {
            return;
        }
        rest = &rest[n..];
    }
    if !rest.is_empty() && decoder.push(rest).is_err() {
        return;
    }
    if let Ok(out) = decoder.finish() {
        assert!(out.len() <= limit, "decoded past the limit");
    }
});
