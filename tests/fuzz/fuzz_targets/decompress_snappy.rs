//! The gateway's and sidecar's snappy decompression of a body from the
//! network: bounded output, corrupt input refused, never a panic.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use myquic::api::Encoding;

fuzz_target!(|data: &[u8]| {
    let limit = 1 << 20;
    if let Ok(out) = Encoding::Snappy.decompress(Bytes::copy_from_slice(data), limit) {
        assert!(out.len() <= limit, "decompressed past the limit");
    }
});
