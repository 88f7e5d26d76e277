//! A request body compressed and decompressed piece by piece, so that
//! neither end holds the link up: the sidecar sends each compressed piece
//! while it compresses the next, and the gateway decompresses each piece
//! as it arrives (`benches/results/profiles/wan.md`, "Streamed request
//! bodies"). Only zstd streams; other encodings are compressed whole and
//! decompressed at the body's end, as before.
//!
//! A streamed body is one zstd frame that states its size (the encoder is
//! told it up front), flushed after every piece: what arrives can always
//! be decoded at once, and the frame is the same one a whole-body
//! compression would make, to within a few bytes per piece.

use bytes::{Bytes, BytesMut};
use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective as EndDirective;
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, InBuffer, OutBuffer};

use super::compression::{Encoding, ZSTD_LEVEL, corrupt, too_large};
use super::error::ApiError;

/// Input compressed per piece. At level 1 (~4 ms/MB on our machines) a
/// piece takes ~0.5 ms, far less than its output takes on a WAN link, and
/// is large enough that the flush after it costs nothing measurable in
/// ratio.
pub const PIECE: usize = 128 << 10;

/// Whether a body of `len` bytes compressed as a stream with `encoding`
/// could never take more than `limit` bytes on the wire: zstd's worst case
/// for it (incompressible input) fits. A body that might not is compressed
/// whole instead, where an incompressible body is sent as it is.
pub fn fits_streamed(encoding: Encoding, len: usize, limit: usize) -> bool {
    encoding == Encoding::Zstd && zstd_safe::compress_bound(len) <= limit
}

/// Compresses `parts` (read in order, as one body) piece by piece: each
/// call of [`Iterator::next`] compresses the next [`PIECE`] and returns
/// what it produced, flushed, so it can be sent at once.
pub struct StreamCompressor {
    cctx: CCtx<'static>,
    parts: Vec<Bytes>,
    /// The part being read, and how far.
    part: usize,
    offset: usize,
    done: bool,
}

impl StreamCompressor {
    /// zstd at the default level; the frame header states the total size.
    pub fn zstd(parts: Vec<Bytes>) -> Self {
        let total: usize = parts.iter().map(Bytes::len).sum();
        let mut cctx = CCtx::create();
        // Neither call can fail on a fresh context with a valid level.
        let _ = cctx.set_parameter(CParameter::CompressionLevel(ZSTD_LEVEL));
        let _ = cctx.set_pledged_src_size(Some(total as u64));
        Self {
            cctx,
            parts,
            part: 0,
            offset: 0,
            done: false,
        }
    }

    /// Runs the compressor over `input` with `directive` until it has
    /// taken all of it and, for a flush or the end, written all it owes.
    fn run(&mut self, input: &[u8], directive: EndDirective, out: &mut Vec<u8>) {
        let mut src = InBuffer::around(input);
        loop {
            if out.capacity() - out.len() < CCtx::out_size() {
                out.reserve(CCtx::out_size());
            }
            let pos = out.len();
            let mut dst = OutBuffer::around_pos(out, pos);
            let owed = self
                .cctx
                .compress_stream2(&mut dst, &mut src, directive)
                .expect("zstd streaming compression into memory cannot fail");
            let all_taken = src.pos() == input.len();
            let finished = match directive {
                EndDirective::ZSTD_e_continue => all_taken,
                _ => all_taken && owed == 0,
            };
            if finished {
                return;
            }
        }
    }
}

impl Iterator for StreamCompressor {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = Vec::new();
        let mut budget = PIECE;
        while budget > 0 && self.part < self.parts.len() {
            let part = self.parts[self.part].clone();
            let end = part.len().min(self.offset + budget);
            self.run(
                &part[self.offset..end],
                EndDirective::ZSTD_e_continue,
                &mut out,
            );
            budget -= end - self.offset;
            self.offset = end;
            if self.offset == part.len() {
                self.part += 1;
                self.offset = 0;
            }
        }
        if self.part == self.parts.len() {
            self.done = true;
            self.run(&[], EndDirective::ZSTD_e_end, &mut out);
        } else {
            self.run(&[], EndDirective::ZSTD_e_flush, &mut out);
        }
        Some(out.into())
    }
}

/// zstd bodies up to this size are gathered and decompressed whole, on the
/// thread's kept context (see [`Encoding::decompress`]): a new streaming
/// context per request would cost more than such a body's decoding, and
/// its decoding is short next to its transfer.
const STREAM_FROM: usize = 2 * PIECE;

/// Decodes a request body as it arrives, refusing to produce more than
/// `limit` bytes: zstd a piece at a time once it is large; other
/// encodings are gathered and decompressed at the end.
pub struct BodyDecoder {
    encoding: Encoding,
    limit: usize,
    state: State,
}

enum State {
    Gathering(BytesMut),
    Zstd {
        dctx: DCtx<'static>,
        out: Vec<u8>,
        /// Whether a frame has begun and not ended (the decoder's hint is
        /// nonzero): a body that stops there was cut short.
        open: bool,
    },
}

impl BodyDecoder {
    pub fn new(encoding: Encoding, limit: usize) -> Self {
        Self {
            encoding,
            limit,
            state: State::Gathering(BytesMut::new()),
        }
    }

    /// Takes the next piece of the body. An error ends the body: the
    /// caller stops reading it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        let encoding = self.encoding;
        match &mut self.state {
            State::Gathering(body) => {
                // Compressed, the transport bounds it; as it is, this does.
                if encoding == Encoding::Identity && body.len() + chunk.len() > self.limit {
                    return Err(too_large(self.limit));
                }
                if encoding != Encoding::Zstd || body.len() + chunk.len() <= STREAM_FROM {
                    body.extend_from_slice(chunk);
                    return Ok(());
                }
                // Large: decoded from here on as it arrives.
                let gathered = std::mem::take(body);
                self.state = State::Zstd {
                    dctx: DCtx::create(),
                    out: Vec::new(),
                    open: false,
                };
                self.push(&gathered)?;
                self.push(chunk)
            }
            State::Zstd { dctx, out, open } => {
                let mut src = InBuffer::around(chunk);
                loop {
                    if out.len() > self.limit {
                        return Err(too_large(self.limit));
                    }
                    // Grow by doubling, never past one byte over the limit
                    // (that byte is how a body over it is seen).
                    if out.len() == out.capacity() {
                        let want = (out.capacity() * 2).max(64 << 10);
                        let cap = want.min(self.limit.saturating_add(1));
                        out.reserve_exact(cap.saturating_sub(out.len()).max(1));
                    }
                    let room = out.capacity() - out.len();
                    let pos = out.len();
                    let mut dst = OutBuffer::around_pos(out, pos);
                    let hint = dctx
                        .decompress_stream(&mut dst, &mut src)
                        .map_err(|code| corrupt(encoding, zstd_safe::get_error_name(code)))?;
                    let wrote = dst.pos() - pos;
                    *open = hint != 0;
                    // Done with this piece once all of it is taken and the
                    // decoder had room to spare (nothing left inside it).
                    if src.pos() == chunk.len() && wrote < room {
                        break;
                    }
                }
                if out.len() > self.limit {
                    return Err(too_large(self.limit));
                }
                Ok(())
            }
        }
    }

    /// The whole decoded body, once its last piece has been pushed.
    pub fn finish(self) -> Result<Bytes, ApiError> {
        match self.state {
            State::Gathering(body) => self.encoding.decompress(body.freeze(), self.limit),
            State::Zstd { open: true, .. } => Err(corrupt(self.encoding, "truncated frame")),
            State::Zstd { out, .. } => Ok(out.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::error::Code;

    /// Random and repetitive runs, every byte value.
    fn sample(len: usize) -> Vec<u8> {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if seed.is_multiple_of(3) {
                out.extend(std::iter::repeat_n(
                    (seed >> 8) as u8,
                    (seed % 500) as usize,
                ));
            } else {
                out.extend((0..=255u8).map(|b| b ^ (seed as u8)));
            }
        }
        out.truncate(len);
        out
    }

    /// Bytes zstd cannot shrink.
    fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn decode_in(encoding: Encoding, pieces: &[Bytes], limit: usize) -> Result<Bytes, ApiError> {
        let mut decoder = BodyDecoder::new(encoding, limit);
        for piece in pieces {
            // Arrival is cut anywhere, not where the pieces were made.
            for part in piece.chunks(7_777) {
                decoder.push(part)?;
            }
        }
        decoder.finish()
    }

    #[test]
    fn a_streamed_body_decodes_to_its_bytes_as_whole_zstd_does() {
        let mut data = sample(3 * PIECE + 12_345);
        data.extend_from_slice(&noise(3 * PIECE));
        let head = Bytes::from_static(&[0, 1, 2, 3, 4]);
        let parts = vec![head.clone(), Bytes::from(data.clone())];
        let pieces: Vec<Bytes> = StreamCompressor::zstd(parts).collect();
        assert_eq!(
            pieces.len(),
            7,
            "one piece per PIECE of input, the last ends the frame"
        );
        let mut whole = head.to_vec();
        whole.extend_from_slice(&data);
        // The pieces are one frame our whole-body reader takes too.
        let joined: Vec<u8> = pieces.iter().flatten().copied().collect();
        let back = Encoding::Zstd
            .decompress(joined.into(), whole.len())
            .unwrap();
        assert_eq!(back, whole);
        assert_eq!(
            decode_in(Encoding::Zstd, &pieces, whole.len()).unwrap(),
            whole
        );
    }

    #[test]
    fn an_empty_body_is_one_small_frame() {
        let pieces: Vec<Bytes> = StreamCompressor::zstd(vec![Bytes::new()]).collect();
        assert_eq!(pieces.len(), 1);
        assert!(decode_in(Encoding::Zstd, &pieces, 0).unwrap().is_empty());
    }

    #[test]
    fn a_body_over_the_limit_is_refused_while_it_arrives() {
        let data = Bytes::from(noise(8 << 20));
        let pieces: Vec<Bytes> = StreamCompressor::zstd(vec![data]).collect();
        let mut decoder = BodyDecoder::new(Encoding::Zstd, 1 << 20);
        let mut refused_after = None;
        for (i, piece) in pieces.iter().enumerate() {
            if let Err(e) = decoder.push(piece) {
                assert_eq!(e.code, Code::ResourceExhausted);
                refused_after = Some(i);
                break;
            }
        }
        let at = refused_after.expect("refused");
        assert!(
            at < pieces.len() - 1,
            "refused at piece {at}, before the end"
        );
    }

    #[test]
    fn a_cut_body_or_garbage_is_corrupt_not_short() {
        // Cut while gathered, and cut once decoded as it arrives.
        for data in [sample(PIECE * 2), noise(PIECE * 8)] {
            let len = data.len();
            let data = Bytes::from(data);
            let pieces: Vec<Bytes> = StreamCompressor::zstd(vec![data]).collect();
            let cut = &pieces[..pieces.len() - 1];
            let err = decode_in(Encoding::Zstd, cut, usize::MAX).unwrap_err();
            assert_eq!(err.code, Code::InvalidArgument, "{len}");
        }
        let err = decode_in(Encoding::Zstd, &[Bytes::from_static(b"not zstd")], 100).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
    }

    #[test]
    fn other_encodings_are_gathered_and_decoded_whole() {
        let data = sample(100_000);
        for encoding in [
            Encoding::Identity,
            Encoding::Gzip,
            Encoding::S2,
            Encoding::Snappy,
        ] {
            let packed = encoding.compress(&data);
            let back = decode_in(encoding, std::slice::from_ref(&packed), data.len()).unwrap();
            assert_eq!(back, data, "{encoding:?}");
            let err = decode_in(encoding, &[packed], data.len() - 1).unwrap_err();
            assert_eq!(err.code, Code::ResourceExhausted, "{encoding:?}");
        }
    }

    #[test]
    fn only_zstd_streams_and_only_when_its_worst_case_fits() {
        assert!(fits_streamed(Encoding::Zstd, 1 << 20, 2 << 20));
        assert!(!fits_streamed(Encoding::Zstd, 1 << 20, 1 << 20));
        assert!(!fits_streamed(Encoding::S2, 1 << 20, 2 << 20));
    }
}
