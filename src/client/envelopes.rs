//! The Connect envelopes of a streamed answer, taken from its body's
//! chunks without copying where a chunk holds whole envelopes.
//!
//! A point select's answer is one small envelope in one chunk (one HTTP/2
//! DATA frame, one HTTP/3 DATA frame): its payload is then a view of the
//! chunk. Only an envelope split across chunks (a large message) is put
//! together in a buffer, as before.

use bytes::{Bytes, BytesMut};

use crate::api::ApiError;
use crate::api::connect::{Envelope, take_envelope, take_whole_envelope};

/// Envelopes not yet taken: at most one of the two fields holds bytes.
#[derive(Default)]
pub(super) struct Envelopes {
    /// The chunk in hand, while no envelope is split across chunks.
    whole: Bytes,
    /// An envelope split across chunks, being put together.
    partial: BytesMut,
}

impl Envelopes {
    /// Adds the body's next chunk.
    pub(super) fn push(&mut self, chunk: Bytes) {
        if self.whole.is_empty() && self.partial.is_empty() {
            self.whole = chunk;
            return;
        }
        // The rest of the chunk before ends an envelope only with this one.
        self.partial.extend_from_slice(&self.whole);
        self.whole = Bytes::new();
        self.partial.extend_from_slice(&chunk);
    }

    /// The next whole envelope, `None` until one is there; an envelope
    /// announcing more than `limit` bytes is refused from its header.
    pub(super) fn next(&mut self, limit: usize) -> Result<Option<Envelope>, ApiError> {
        if !self.whole.is_empty() {
            return take_whole_envelope(&mut self.whole, limit);
        }
        take_envelope(&mut self.partial, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::connect::envelope;

    fn drain(envelopes: &mut Envelopes) -> Vec<(u8, Bytes)> {
        let mut out = Vec::new();
        while let Some(env) = envelopes.next(1 << 20).unwrap() {
            out.push((env.flags, env.payload));
        }
        out
    }

    /// Whatever the chunking, the same envelopes come out, in order; an
    /// envelope inside one chunk is a view of it.
    #[test]
    fn any_chunking_gives_the_same_envelopes() {
        let messages: Vec<Bytes> = [&b""[..], b"a", b"hello world", &[7u8; 300]]
            .iter()
            .map(|m| Bytes::copy_from_slice(m))
            .collect();
        let mut body = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            body.extend_from_slice(&envelope(i as u8, m));
        }
        let body = Bytes::from(body);
        for size in [1, 2, 4, 5, 6, 13, 100, 301, body.len()] {
            let mut envelopes = Envelopes::default();
            let mut got = Vec::new();
            for chunk in body.chunks(size) {
                envelopes.push(body.slice_ref(chunk));
                got.extend(drain(&mut envelopes));
            }
            let want: Vec<(u8, Bytes)> = (messages.iter().enumerate())
                .map(|(i, m)| (i as u8, m.clone()))
                .collect();
            assert_eq!(got, want, "chunks of {size}");
            assert!(envelopes.whole.is_empty() && envelopes.partial.is_empty());
        }
        let mut envelopes = Envelopes::default();
        envelopes.push(body.clone());
        let (_, first_nonempty) = drain(&mut envelopes).swap_remove(1);
        assert_eq!(
            first_nonempty.as_ptr(),
            body[10..].as_ptr(),
            "a view of the chunk, not a copy"
        );
    }

    #[test]
    fn an_envelope_over_the_limit_is_refused_from_its_header() {
        let mut envelopes = Envelopes::default();
        envelopes.push(Bytes::from_static(&[0, 0, 0, 1, 0, b'x']));
        assert!(envelopes.next(255).is_err());
        let mut envelopes = Envelopes::default();
        envelopes.push(Bytes::from_static(&[0, 0, 0]));
        envelopes.push(Bytes::from_static(&[1, 0]));
        assert!(envelopes.next(255).is_err());
    }
}
