//! The gateway's and sidecar's S2 decompression of a body from the network
//! (the stream format Go's klauspost/compress/s2 writes, what PlanetScale's
//! Go client sends): bounded output, corrupt input refused, never a panic.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use myquic::api::Encoding;

fuzz_target!(|data: &[u8]| {
    let limit = 1 << 20;
    if let Ok(out) = Encoding::S2.decompress(Bytes::copy_from_slice(data), limit) {
        assert!(out.len() <= limit, "decompressed past the limit");
    }
});
