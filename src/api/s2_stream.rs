//! The S2 *stream* format (klauspost/compress/s2's `Writer`/`Reader`, what
//! klauspost/connect-compress puts on the wire for `s2`, and so what
//! PlanetScale's Go client sends): the stream identifier `S2sTwO`, then
//! chunks of a type byte, a 24-bit little-endian length and, for data,
//! a masked CRC-32C of the decoded bytes. It is the Snappy framing format
//! with S2 blocks of up to 4 MiB.
//!
//! Blocks are `minlz`'s (binary compatible with Go's s2); the chunk walk
//! and the checksum are ours. `minlz::s2::Reader` is not used for reading
//! untrusted bodies: it recurses once per skippable chunk (a body of 4-byte
//! padding chunks overflows the stack) and decodes a block before checking
//! its size. Here a block's decoded size is known from its header, so the
//! limit is enforced before any of it is allocated. Its `Writer` is not
//! used either: its byte-at-a-time CRC-32C costs more than the compression.

/// S2's largest block (klauspost's `maxBlockSize`); Go's reader refuses
/// larger ones by default, so no conforming writer sends them.
const MAX_BLOCK: usize = 4 << 20;
/// The block size Go's `s2.NewWriter` uses by default.
const WRITE_BLOCK: usize = 1 << 20;
const IDENTIFIER_CHUNK: &[u8] = b"\xff\x06\x00\x00S2sTwO";

/// CRC-32C, masked as the Snappy framing format says (section 3).
fn checksum(data: &[u8]) -> u32 {
    const CRC32C: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
    CRC32C
        .checksum(data)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8)
}

const STREAM_IDENTIFIER: u8 = 0xff;
const COMPRESSED: u8 = 0x00;
const UNCOMPRESSED: u8 = 0x01;
/// 0x02..=0x7f are reserved and must not be skipped; 0x80..=0xfe (padding,
/// S2's index, others) carry nothing for us.
const FIRST_SKIPPABLE: u8 = 0x80;

/// Why a body is not a stream we read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum S2Error {
    /// More than the caller's limit would come out.
    TooLarge,
    /// Not an S2 (or Snappy-framed) stream, or damaged.
    Corrupt(&'static str),
}

/// The stream of `data`, as one message (S2 stream format, default level:
/// what Go's `s2.NewWriter` without options writes).
pub(super) fn compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    out.extend_from_slice(IDENTIFIER_CHUNK);
    for block in data.chunks(WRITE_BLOCK) {
        let packed = minlz::s2::encode(block);
        // Go's rule: a block that does not shrink by 1/32 goes as it is.
        let (kind, payload) = if packed.len() <= block.len() - block.len() / 32 - 5 {
            (COMPRESSED, &packed[..])
        } else {
            (UNCOMPRESSED, block)
        };
        let len = (payload.len() + 4) as u32;
        out.push(kind);
        out.extend_from_slice(&len.to_le_bytes()[..3]);
        out.extend_from_slice(&checksum(block).to_le_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// Decodes a whole stream, refusing to produce more than `limit` bytes.
/// Snappy-framed streams (`sNaPpY`) are read too, as Go's S2 reader does.
pub(super) fn decompress(mut body: &[u8], limit: usize) -> Result<Vec<u8>, S2Error> {
    let mut out = Vec::new();
    let mut identified = false;
    while !body.is_empty() {
        let [kind, a, b, c, ..] = *body else {
            return Err(S2Error::Corrupt("truncated chunk header"));
        };
        let len = usize::from(a) | usize::from(b) << 8 | usize::from(c) << 16;
        let chunk = body
            .get(4..4 + len)
            .ok_or(S2Error::Corrupt("truncated chunk"))?;
        body = &body[4 + len..];
        match kind {
            STREAM_IDENTIFIER => {
                if chunk != b"S2sTwO" && chunk != b"sNaPpY" {
                    return Err(S2Error::Corrupt("not an S2 stream"));
                }
                identified = true;
            }
            _ if !identified => return Err(S2Error::Corrupt("no stream identifier")),
            COMPRESSED | UNCOMPRESSED => {
                let (crc, payload) = chunk
                    .split_first_chunk::<4>()
                    .ok_or(S2Error::Corrupt("data chunk without a checksum"))?;
                let start = out.len();
                let size = match kind {
                    COMPRESSED => {
                        minlz::s2::decode_len(payload)
                            .map_err(|_| S2Error::Corrupt("bad block header"))?
                            .0
                    }
                    _ => payload.len(),
                };
                if size > MAX_BLOCK {
                    return Err(S2Error::Corrupt("block larger than 4 MiB"));
                }
                if size > limit - start {
                    return Err(S2Error::TooLarge);
                }
                out.resize(start + size, 0);
                if kind == COMPRESSED {
                    minlz::s2::decode_into(&mut out[start..], payload)
                        .map_err(|_| S2Error::Corrupt("bad block"))?;
                } else {
                    out[start..].copy_from_slice(payload);
                }
                if checksum(&out[start..]) != u32::from_le_bytes(*crc) {
                    return Err(S2Error::Corrupt("checksum mismatch"));
                }
            }
            _ if kind >= FIRST_SKIPPABLE => {}
            _ => return Err(S2Error::Corrupt("reserved chunk type")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input of [`GO_STREAM`].
    fn go_input() -> Vec<u8> {
        (0..48)
            .map(|i| format!("row {i}: value {}\n", i * i % 97))
            .collect::<String>()
            .into_bytes()
    }

    /// Go's `s2.NewWriter(w, s2.WriterConcurrency(1))` (how connect-compress
    /// builds its S2 writer; klauspost/compress v1.16.7, psdb's pin) for
    /// [`go_input`]: S2 blocks with repeat offsets, which Snappy cannot read.
    const GO_STREAM: &[u8] = b"\
        \xff\x06\x00\x00\x53\x32\x73\x54\x77\x4f\x00\x95\x01\x00\x25\x8b\x20\xbf\x9e\x06\
        \x38\x72\x6f\x77\x20\x30\x3a\x20\x76\x61\x6c\x75\x65\x20\x30\x0a\x01\x0f\x00\x31\
        \x11\x00\x00\x31\x05\x00\x00\x32\x11\x00\x00\x34\x05\x00\x00\x33\x11\x00\x00\x39\
        \x05\x00\x00\x34\x11\x00\x04\x31\x36\x05\x10\x00\x35\x11\x00\x04\x32\x35\x05\x10\
        \x00\x36\x11\x00\x00\x33\x09\x20\x00\x37\x11\x00\x00\x34\x09\x40\x00\x38\x11\x00\
        \x00\x36\x09\x5f\x00\x39\x11\x00\x00\x38\x09\x7e\x04\x31\x30\x11\x11\x00\x33\x09\
        \x10\x15\x9e\x00\x32\x09\x31\x00\x31\x19\xa0\x00\x37\x09\x11\x15\xa2\x04\x37\x32\
        \x09\x11\x15\xa4\x0d\x10\x15\xa4\x04\x33\x31\x05\x00\x04\x31\x36\x11\x43\x04\x36\
        \x32\x09\x00\x00\x37\x11\x00\x00\x39\x09\xc6\x00\x31\x15\xa7\x04\x33\x33\x05\x00\
        \x00\x31\x15\xa8\x04\x37\x30\x05\x00\x00\x32\x15\xa8\x00\x31\x09\x44\x04\x32\x31\
        \x11\x00\x00\x35\x09\x33\x04\x32\x32\x11\x00\x04\x39\x36\x09\x11\x15\xa9\x04\x34\
        \x34\x05\x00\x00\x32\x15\xa9\x00\x39\x09\x99\x04\x32\x35\x11\x00\x00\x34\x0d\x44\
        \x15\xaa\x04\x39\x34\x05\x00\x00\x32\x15\xaa\x00\x35\x0d\x88\x15\xaa\x00\x38\x09\
        \x10\x15\xa9\x04\x36\x35\x05\x00\x00\x33\x15\xa9\x00\x32\x29\x30\x04\x33\x31\x11\
        \x00\x00\x38\x09\x33\x04\x33\x32\x11\x00\x00\x35\x09\x65\x04\x33\x33\x11\x00\x00\
        \x32\x09\xdc\x04\x33\x34\x11\x00\x04\x38\x39\x09\x11\x15\xa9\x04\x36\x31\x05\x00\
        \x00\x33\x15\xa9\x00\x33\x0d\x77\x15\xa9\x04\x31\x31\x05\x00\x00\x33\x19\xa9\x29\
        \x0f\x04\x33\x39\x11\x00\x00\x36\x09\x11\x04\x34\x30\x11\x00\x00\x34\x09\x99\x04\
        \x34\x31\x11\x00\x00\x33\x09\x88\x04\x34\x32\x11\x00\x00\x31\x0d\x22\x15\xaa\x0d\
        \x43\x15\xa9\x04\x39\x33\x05\x00\x00\x34\x15\xa9\x00\x38\x09\x98\x04\x34\x36\x11\
        \x00\x00\x37\x09\xcb\x30\x34\x37\x3a\x20\x76\x61\x6c\x75\x65\x20\x37\x35\x0a";

    #[test]
    fn reads_what_go_writes_and_writes_the_stream_format() {
        let plain = go_input();
        assert_eq!(decompress(GO_STREAM, plain.len()).unwrap(), plain);
        // Not Snappy: its decoder cannot read S2's repeat offsets.
        assert!(
            snap::raw::Decoder::new()
                .decompress_vec(&GO_STREAM[18..])
                .is_err()
        );
        // Ours, as minlz's reference-compatible reader reads it: compressed
        // and uncompressed blocks, several of them.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        assert_eq!(compress(&noise)[10], UNCOMPRESSED, "noise does not shrink");
        for data in [plain, b"psdb ".repeat(500_000), noise] {
            let ours = compress(&data);
            assert_eq!(&ours[..10], IDENTIFIER_CHUNK);
            let mut read = Vec::new();
            std::io::Read::read_to_end(&mut minlz::s2::Reader::new(&ours[..]), &mut read).unwrap();
            assert_eq!(read, data);
            assert_eq!(decompress(&ours, data.len()).unwrap(), data);
        }
    }

    #[test]
    fn the_limit_holds_before_a_block_is_decoded() {
        let plain = vec![7u8; 3 << 20];
        let stream = compress(&plain);
        assert!(stream.len() < 1 << 10, "a bomb: {} bytes", stream.len());
        assert_eq!(decompress(&stream, 1 << 20), Err(S2Error::TooLarge));
        assert_eq!(decompress(&stream, plain.len()).unwrap().len(), plain.len());
    }

    #[test]
    fn damaged_and_hostile_streams_are_refused_without_panics() {
        let stream = compress(&b"hello s2 ".repeat(500));
        for cut in 1..stream.len() {
            let _ = decompress(&stream[..cut], usize::MAX);
        }
        let mut flipped = stream.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x55;
        assert!(matches!(
            decompress(&flipped, usize::MAX),
            Err(S2Error::Corrupt(_))
        ));
        // A million padding chunks: skipped in a loop, not by recursion.
        let mut padded = b"\xff\x06\x00\x00S2sTwO".to_vec();
        padded.extend(std::iter::repeat_n(*b"\xfe\x00\x00\x00", 1 << 20).flatten());
        assert_eq!(decompress(&padded, 10).unwrap(), b"");
        // Data before the identifier, reserved chunks, oversized blocks.
        assert!(decompress(b"\x01\x05\x00\x00abcd\x00", 10).is_err());
        assert!(decompress(b"\xff\x06\x00\x00S2sTwO\x02\x00\x00\x00", 10).is_err());
        let mut huge = b"\xff\x06\x00\x00S2sTwO\x00\x09\x00\x00\0\0\0\0".to_vec();
        huge.extend_from_slice(&[0x80, 0x80, 0x80, 0x04, 0]); // declares 8 MiB
        assert_eq!(
            decompress(&huge, usize::MAX),
            Err(S2Error::Corrupt("block larger than 4 MiB"))
        );
    }
}
