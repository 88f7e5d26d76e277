//! Connect body compression: `identity`, `gzip`, `zstd`, `snappy` (the
//! Snappy *framing* format, as klauspost/connect-compress sends it) and
//! `s2` (the S2 stream format, [`super::s2_stream`]: what PlanetScale's Go
//! client sends on every request).
//!
//! Decompression is bounded: a small compressed body must not expand past
//! the configured request or response limit (a "zip bomb").
//!
//! zstd contexts are kept per thread: a fresh one costs more to set up
//! (allocating and clearing its tables) than compressing a 50 KB result.

use std::cell::RefCell;
use std::io::{Read, Write};

use bytes::Bytes;

use super::error::{ApiError, Code};
use super::s2_stream::{self, S2Error};

/// A body encoding we can both produce and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Zstd,
    Snappy,
    S2,
}

/// Names we accept, most preferred first; advertised in `Accept-Encoding`.
/// S2 before snappy: a smaller body (0.22 vs 0.25 of it in
/// benches/codec.rs), and what PlanetScale's clients send and ask for.
pub const SUPPORTED: &str = "zstd, s2, snappy, gzip";

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
            Self::Snappy => "snappy",
            Self::S2 => "s2",
        }
    }

    /// Parses one encoding name; `None` if we do not support it.
    pub fn from_name(name: &str) -> Option<Self> {
        // Compared in place: this runs on every request and response.
        let name = name.trim();
        let is = |known: &str| name.eq_ignore_ascii_case(known);
        if name.is_empty() || is("identity") {
            Some(Self::Identity)
        } else if is("gzip") || is("x-gzip") {
            Some(Self::Gzip)
        } else if is("zstd") {
            Some(Self::Zstd)
        } else if is("snappy") {
            Some(Self::Snappy)
        } else if is("s2") {
            Some(Self::S2)
        } else {
            None
        }
    }

    /// A `Content-Encoding` (or `Connect-Content-Encoding`) header, on a
    /// request or a response: absent means identity, an unsupported one is
    /// `unimplemented` (Connect spec).
    pub fn from_header(header: Option<&str>) -> Result<Self, ApiError> {
        let name = header.unwrap_or("identity");
        Self::from_name(name).ok_or_else(|| {
            ApiError::new(
                Code::Unimplemented,
                format!("unsupported compression {name:?}; supported: identity, {SUPPORTED}"),
            )
        })
    }

    /// Chooses the response encoding: the request's own if it was
    /// compressed (connect-go's rule), else the first supported entry of
    /// `Accept-Encoding` (q-values are ignored, as in Connect).
    pub fn negotiate(request: Self, accept: Option<&str>) -> Self {
        if request != Self::Identity {
            return request;
        }
        accept
            .into_iter()
            .flat_map(|list| list.split(','))
            .map(|item| item.split(';').next().unwrap_or(""))
            .filter_map(Self::from_name)
            .find(|e| *e != Self::Identity)
            .unwrap_or(Self::Identity)
    }

    pub fn compress(self, data: &[u8]) -> Bytes {
        self.compress_at(data, ZSTD_LEVEL)
    }

    /// [`compress`](Self::compress), with zstd at `zstd_level` (chosen per
    /// link by [`super::effort`]); the other encodings have one level.
    pub fn compress_at(self, data: &[u8], zstd_level: i32) -> Bytes {
        match self {
            Self::Identity => Bytes::copy_from_slice(data),
            Self::Gzip => {
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                enc.write_all(data).expect("writing to a Vec cannot fail");
                enc.finish().expect("writing to a Vec cannot fail").into()
            }
            Self::Zstd => ZSTD
                .with_borrow_mut(|z| {
                    if z.level != zstd_level {
                        z.compressor.set_compression_level(zstd_level)?;
                        z.level = zstd_level;
                    }
                    z.compressor.compress(data)
                })
                .expect("zstd compression into memory cannot fail")
                .into(),
            Self::Snappy => {
                let mut enc = snap::write::FrameEncoder::new(Vec::new());
                enc.write_all(data).expect("writing to a Vec cannot fail");
                enc.into_inner()
                    .expect("flushing into a Vec cannot fail")
                    .into()
            }
            Self::S2 => s2_stream::compress(data).into(),
        }
    }

    /// Decompresses at most `limit` bytes; more is `resource_exhausted`,
    /// corrupt input is `invalid_argument`.
    pub fn decompress(self, data: Bytes, limit: usize) -> Result<Bytes, ApiError> {
        if self == Self::Identity || data.is_empty() {
            return Ok(data);
        }
        if self == Self::Zstd
            && let Some(size) = single_zstd_frame_size(&data)
        {
            if size > limit {
                return Err(too_large(limit));
            }
            return ZSTD
                .with_borrow_mut(|z| z.decompressor.decompress(&data, size))
                .map(Bytes::from)
                .map_err(|e| corrupt(self, &e.to_string()));
        }
        if self == Self::S2 {
            return match s2_stream::decompress(&data, limit) {
                Ok(out) => Ok(out.into()),
                Err(S2Error::TooLarge) => Err(too_large(limit)),
                Err(S2Error::Corrupt(detail)) => Err(corrupt(self, detail)),
            };
        }
        let reader: Box<dyn Read + '_> = match self {
            Self::Identity | Self::S2 => unreachable!("handled above"),
            Self::Gzip => Box::new(flate2::read::GzDecoder::new(&data[..])),
            Self::Zstd => Box::new(
                zstd::stream::read::Decoder::new(&data[..])
                    .map_err(|e| corrupt(self, &e.to_string()))?,
            ),
            Self::Snappy => Box::new(snap::read::FrameDecoder::new(&data[..])),
        };
        let mut out = Vec::new();
        reader
            .take((limit as u64).saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| corrupt(self, &e.to_string()))?;
        if out.len() > limit {
            return Err(too_large(limit));
        }
        Ok(out.into())
    }
}

/// Level 1 where nothing chooses another (requests, and responses before
/// their link is measured: see [`super::effort`]). On the benchmark's rows (`cargo bench --bench codec --
/// --levels`, README "Codec") it compresses 256 KiB pieces — the size rows
/// are streamed in — *smaller* than level 3 (2.76× against 2.66×) in half
/// the time (4.2 against 7.7 ms/MB); a whole message ends up 2–3 % larger,
/// which is worth level 3's extra CPU only on links below ~10–15 Mbit/s.
/// Higher levels save at most 7 % more below level 12 and cost 6–60×
/// the CPU: they pay off only below ~5 Mbit/s. snappy-class codecs stay
/// near 2×.
pub const ZSTD_LEVEL: i32 = 1;

struct ZstdContexts {
    compressor: zstd::bulk::Compressor<'static>,
    /// The compressor's level now (a context keeps its tables across
    /// messages; only the parameter changes).
    level: i32,
    decompressor: zstd::bulk::Decompressor<'static>,
}

thread_local! {
    static ZSTD: RefCell<ZstdContexts> = RefCell::new(ZstdContexts {
        compressor: zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("a zstd context"),
        level: ZSTD_LEVEL,
        decompressor: zstd::bulk::Decompressor::new().expect("a zstd context"),
    });
}

/// The decompressed size of `data` if it is exactly one zstd frame that
/// states its size (ours do): it is then decompressed in one call into a
/// buffer of that size. Anything else takes the streaming path.
fn single_zstd_frame_size(data: &[u8]) -> Option<usize> {
    let frame = zstd::zstd_safe::find_frame_compressed_size(data).ok()?;
    if frame != data.len() {
        return None;
    }
    let size = zstd::zstd_safe::get_frame_content_size(data).ok()??;
    usize::try_from(size).ok()
}

/// A decoded body over `limit` (shared with `stream_coding`).
pub(super) fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        Code::ResourceExhausted,
        format!("message larger than {limit} bytes after decompression"),
    )
}

/// A body its encoding cannot decode (shared with `stream_coding`).
pub(super) fn corrupt(encoding: Encoding, detail: &str) -> ApiError {
    ApiError::new(
        Code::InvalidArgument,
        format!("invalid {} body: {detail}", encoding.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_case_insensitive_and_trimmed() {
        assert_eq!(Encoding::from_name(" ZSTD "), Some(Encoding::Zstd));
        assert_eq!(Encoding::from_name("X-Gzip"), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_name("Snappy"), Some(Encoding::Snappy));
        assert_eq!(Encoding::from_name(""), Some(Encoding::Identity));
        assert_eq!(Encoding::from_name("IDENTITY"), Some(Encoding::Identity));
        assert_eq!(Encoding::from_name("br"), None);
        assert_eq!(Encoding::from_name("zstd2"), None);
    }

    #[test]
    fn every_encoding_round_trips() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for enc in [
            Encoding::Identity,
            Encoding::Gzip,
            Encoding::Zstd,
            Encoding::Snappy,
            Encoding::S2,
        ] {
            let packed = enc.compress(&data);
            let back = enc.decompress(packed, data.len()).unwrap();
            assert_eq!(&back[..], &data[..], "{enc:?}");
        }
    }

    #[test]
    fn every_chosen_zstd_level_round_trips_on_one_context() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        // Levels change between messages on the same thread's context.
        for level in [1, -3, 6, -3, 19, 1] {
            let packed = Encoding::Zstd.compress_at(&data, level);
            let back = Encoding::Zstd.decompress(packed, data.len()).unwrap();
            assert_eq!(&back[..], &data[..], "level {level}");
        }
    }

    #[test]
    fn zstd_bodies_without_a_stated_size_or_in_several_frames_are_read() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 97) as u8).collect();
        // A streaming encoder states no content size.
        let unsized_frame = zstd::stream::encode_all(&data[..], 3).unwrap();
        assert_eq!(single_zstd_frame_size(&unsized_frame), None);
        let mut two = Encoding::Zstd.compress(&data[..20_000]).to_vec();
        two.extend_from_slice(&Encoding::Zstd.compress(&data[20_000..]));
        assert_eq!(single_zstd_frame_size(&two), None);
        for body in [unsized_frame, two] {
            let back = Encoding::Zstd.decompress(body.into(), data.len()).unwrap();
            assert_eq!(&back[..], &data[..]);
        }
        // A truncated frame is corrupt, not a panic or a short message.
        let whole = Encoding::Zstd.compress(&data);
        let cut = whole.slice(..whole.len() - 10);
        let err = Encoding::Zstd.decompress(cut, data.len()).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
    }

    #[test]
    fn snappy_uses_the_framing_format() {
        let packed = Encoding::Snappy.compress(b"hello");
        assert_eq!(&packed[4..10], b"sNaPpY");
    }

    #[test]
    fn decompression_is_bounded() {
        for enc in [
            Encoding::Zstd,
            Encoding::Gzip,
            Encoding::Snappy,
            Encoding::S2,
        ] {
            let bomb = enc.compress(&vec![0u8; 10 << 20]);
            assert!(bomb.len() < 1 << 20, "{enc:?}: {} bytes", bomb.len());
            let err = enc.decompress(bomb, 1 << 20).unwrap_err();
            assert_eq!(err.code, Code::ResourceExhausted, "{enc:?}");
        }
        let err = Encoding::S2
            .decompress(Bytes::from_static(b"\xff\x06\x00\x00sNaPpX"), 100)
            .unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        let err = Encoding::Gzip
            .decompress(Bytes::from_static(b"not gzip"), 100)
            .unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
    }

    #[test]
    fn an_unbounded_limit_does_not_wrap() {
        let packed = Encoding::Snappy.compress(b"data");
        assert_eq!(
            &Encoding::Snappy.decompress(packed, usize::MAX).unwrap()[..],
            b"data"
        );
    }

    #[test]
    fn negotiation_follows_connect() {
        assert_eq!(
            Encoding::from_header(Some("br")).unwrap_err().code,
            Code::Unimplemented
        );
        assert_eq!(
            Encoding::negotiate(Encoding::Snappy, Some("gzip")),
            Encoding::Snappy
        );
        // PlanetScale's Go client: S2 requests, `s2, gzip` accepted back.
        assert_eq!(
            Encoding::negotiate(Encoding::from_header(Some("s2")).unwrap(), Some("s2, gzip")),
            Encoding::S2
        );
        assert_eq!(
            Encoding::negotiate(Encoding::Identity, Some("s2, gzip")),
            Encoding::S2
        );
        assert_eq!(
            Encoding::negotiate(Encoding::Identity, Some("br, gzip;q=0.5, zstd")),
            Encoding::Gzip
        );
        assert_eq!(
            Encoding::negotiate(Encoding::Identity, None),
            Encoding::Identity
        );
    }
}
