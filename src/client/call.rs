//! One call on the wire: the Connect request (headers, compression,
//! envelope) and the reading of its answer, unary or streamed.
//!
//! Only the proto codec is spoken: it is the smaller and cheaper one, and
//! the session splicing in [`super::session`] works on its bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use prost::Message;
use tracing::debug;

use crate::admin::metrics::metrics;
use crate::api::connect::{
    ENVELOPE_HEADER, FLAG_COMPRESSED, end_stream_error, envelope, envelope_header,
};
use crate::api::stream_coding::{self, StreamCompressor};
use crate::api::{
    ApiError, BODY_ENCODING_HEADER, Code, Codec, Encoding, Framing, MAX_REQUEST_BYTES_HEADER,
    Method, RAW_TEXT_HEADER,
};
use crate::telemetry::TraceId;
use crate::transport::HttpVersion;
use crate::transport::client::{ClientError, Outgoing, ResponseStream};

use super::connector::Counters;
use super::credential::Credential;
use super::envelopes::Envelopes;
use super::error::CallError;
use super::execute_reply::{Streamed, decode_without_session};
use super::session::{RawSession, SESSION_FIELD, extract_session};

/// Streaming requests from this size on are compressed as they are sent
/// (when the gateway takes it): below it, compressing one takes under a
/// millisecond and the whole-message path is simpler for both ends.
const STREAM_MIN: usize = 2 * stream_coding::PIECE;

/// Error bodies are small JSON objects; a larger one is not worth reading.
const MAX_ERROR_BODY: usize = 64 << 10;

/// How long the end of the HTTP stream may lag behind the Connect
/// end-of-stream message before the stream is given up (cancelled). A
/// server sends both together; only a busy one lets them drift apart.
const HTTP_END_GRACE: Duration = Duration::from_secs(1);

/// A decoded reply and the session it carries.
#[derive(Clone, Debug)]
pub struct Reply<M> {
    /// The message as our proto knows it. Its `session` field is a lossy
    /// copy: send back [`Reply::session`] instead.
    pub message: M,
    /// The session exactly as the server sent it, for the next request.
    pub session: Option<RawSession>,
    /// Which HTTP version carried the call.
    pub transport: HttpVersion,
}

/// A request ready to be sent, and sent again on another connection if
/// the first one never took it.
pub(super) struct Prepared {
    method: Method,
    headers: HeaderMap,
    body: Body,
    /// The message's size before compression (the gateway bounds both).
    decoded_len: usize,
}

/// A request body as it is kept for (re)sending.
enum Body {
    /// Made whole before sending (compressed or not).
    Whole(Bytes),
    /// A streaming request's envelope header and message, compressed with
    /// zstd as they are sent (the whole body's HTTP `Content-Encoding`, an
    /// extension of our gateway's: see [`BODY_ENCODING_HEADER`]).
    Streamed(Bytes, Bytes),
}

impl Prepared {
    pub(super) fn build(&self, uri: http::Uri) -> http::Request<Outgoing> {
        let body = match &self.body {
            Body::Whole(bytes) => Outgoing::Full(bytes.clone()),
            Body::Streamed(header, message) => Outgoing::Pieces(Box::new(Counted::new(
                StreamCompressor::zstd(vec![header.clone(), message.clone()]),
                self.decoded_len,
            ))),
        };
        let mut request = http::Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.headers_mut() = self.headers.clone();
        // The trace of the command this request serves, so the gateway's
        // log of it can be joined with ours (a new span id per attempt).
        // None when our log would not show it: then the header is only
        // bytes to encode and parse on each side.
        if let Some(trace) = TraceId::current() {
            request.headers_mut().insert(
                "traceparent",
                HeaderValue::from_str(&trace.traceparent()).expect("hex and dashes"),
            );
        }
        *request.uri_mut() = uri;
        request
    }

    pub(super) fn method(&self) -> Method {
        self.method
    }

    /// The body's size on the wire, as far as it is known before sending:
    /// a streamed one is bounded by its decoded size (see
    /// [`Wire::streamed_encoding`]).
    fn wire_len(&self) -> usize {
        match &self.body {
            Body::Whole(bytes) => bytes.len(),
            Body::Streamed(..) => 0,
        }
    }
}

/// Counts a streamed body's bytes as they go, like a whole one's.
struct Counted<I> {
    pieces: I,
    wire: usize,
    decoded: usize,
}

impl<I> Counted<I> {
    fn new(pieces: I, decoded: usize) -> Self {
        Self {
            pieces,
            wire: 0,
            decoded,
        }
    }
}

impl<I: Iterator<Item = Bytes>> Iterator for Counted<I> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        let piece = self.pieces.next();
        match &piece {
            Some(piece) => self.wire += piece.len(),
            None => count_bytes("sent", self.wire, self.decoded),
        }
        piece
    }
}

/// The per-client wire settings, and what it has learned of the gateway.
pub(super) struct Wire {
    accept: HeaderValue,
    offer: Vec<Encoding>,
    compress_min: usize,
    max_message: usize,
    /// Encodings the gateway said it accepts (bit per [`Encoding`]), from
    /// the `Accept-Encoding` / `Connect-Accept-Encoding` of its last
    /// answer that had one. Zero until then: requests go uncompressed until
    /// the gateway has spoken, since a codec it lacks would fail the call.
    server_accepts: AtomicU8,
    /// The largest request the gateway takes, from its
    /// [`MAX_REQUEST_BYTES_HEADER`]; 0 until it has said (or if it never
    /// does: a psdb server other than ours).
    max_request: AtomicUsize,
    /// Encodings the gateway takes for a whole streaming request body
    /// ([`BODY_ENCODING_HEADER`], bit per [`Encoding`]); zero from any
    /// server but ours.
    body_accepts: AtomicU8,
    counters: Arc<Counters>,
}

fn bit(encoding: Encoding) -> u8 {
    match encoding {
        Encoding::Identity => 0,
        Encoding::Gzip => 1,
        Encoding::Zstd => 2,
        Encoding::Snappy => 4,
        Encoding::S2 => 8,
    }
}

impl Wire {
    pub(super) fn new(
        offer: Vec<Encoding>,
        compress_min: usize,
        max_message: usize,
        counters: Arc<Counters>,
    ) -> Self {
        let names: Vec<&str> = offer.iter().map(|e| e.as_str()).collect();
        let accept = if names.is_empty() {
            HeaderValue::from_static("identity")
        } else {
            HeaderValue::from_str(&names.join(", ")).expect("encoding names are tokens")
        };
        Self {
            accept,
            offer,
            compress_min,
            max_message,
            server_accepts: AtomicU8::new(0),
            max_request: AtomicUsize::new(0),
            body_accepts: AtomicU8::new(0),
            counters,
        }
    }

    /// Our most preferred encoding that the gateway accepts.
    fn request_encoding(&self) -> Encoding {
        let accepted = self.server_accepts.load(Ordering::Relaxed);
        self.offer
            .iter()
            .copied()
            .find(|e| accepted & bit(*e) != 0)
            .unwrap_or(Encoding::Identity)
    }

    fn learn(&self, headers: &HeaderMap, framing: Framing) {
        self.learn_request_limit(headers);
        let name = match framing {
            Framing::Unary => "accept-encoding",
            Framing::Streaming => "connect-accept-encoding",
        };
        if let Some(accepted) = encoding_bits(headers, name) {
            self.server_accepts.store(accepted, Ordering::Relaxed);
        }
        let body = encoding_bits(headers, BODY_ENCODING_HEADER).unwrap_or(0);
        self.body_accepts.store(body, Ordering::Relaxed);
    }

    /// Our gateway says on every answer how large a request it takes.
    fn learn_request_limit(&self, headers: &HeaderMap) {
        if let Some(limit) = headers
            .get(MAX_REQUEST_BYTES_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
        {
            self.max_request.store(limit, Ordering::Relaxed);
        }
    }

    /// Whether the server has shown itself to be a myquic gateway (its
    /// request-limit header, which no other psdb server sends).
    pub(super) fn is_myquic_gateway(&self) -> bool {
        self.max_request.load(Ordering::Relaxed) > 0
    }

    /// The largest request the gateway said it takes (0: not said).
    pub(super) fn max_request_bytes(&self) -> usize {
        self.max_request.load(Ordering::Relaxed)
    }

    /// Refuses, unsent, a request larger than the gateway said it takes
    /// (as the gateway itself would, after the upload): the caller gets
    /// the gateway's own `resource_exhausted` refusal.
    pub(super) fn check_size(&self, prepared: &Prepared) -> Result<(), CallError> {
        let limit = self.max_request.load(Ordering::Relaxed);
        let size = prepared.wire_len().max(prepared.decoded_len);
        if limit == 0 || size <= limit {
            return Ok(());
        }
        Err(CallError::Api(ApiError::new(
            Code::ResourceExhausted,
            format!(
                "a request of {size} bytes is larger than the gateway's max_request_bytes ({limit} bytes); not sent"
            ),
        )))
    }

    fn base_headers(&self, framing: Framing, credential: &Credential) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(7);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(Codec::Proto.content_type(framing)),
        );
        headers.insert(header::AUTHORIZATION, credential.authorization().clone());
        // No `Connect-Protocol-Version`: clients "should" send it, psdb
        // servers do not require it (`@planetscale/database` never sends
        // it), and over HTTP/3 its literal name is Huffman-coded by QPACK
        // on both sides of every request.
        let accept = match framing {
            Framing::Unary => header::ACCEPT_ENCODING,
            Framing::Streaming => http::HeaderName::from_static("connect-accept-encoding"),
        };
        headers.insert(accept, self.accept.clone());
        // Error messages and names as the backend sent them, in any
        // character set: they go into MySQL packets unchanged.
        headers.insert(RAW_TEXT_HEADER, HeaderValue::from_static("1"));
        headers
    }

    /// A unary request: the bare message, compressed as a whole.
    pub(super) fn unary(
        &self,
        method: Method,
        message: Bytes,
        credential: &Credential,
    ) -> Prepared {
        let mut headers = self.base_headers(Framing::Unary, credential);
        let decoded_len = message.len();
        let (body, encoding) = self.maybe_compress(message);
        if encoding != Encoding::Identity {
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(encoding.as_str()),
            );
        }
        Prepared {
            method,
            headers,
            body: Body::Whole(body),
            decoded_len,
        }
    }

    /// A server-streaming request: one envelope, compressed per message —
    /// or, when it is large and the gateway takes it, the whole body
    /// compressed as it is sent.
    pub(super) fn streaming(
        &self,
        method: Method,
        message: Bytes,
        credential: &Credential,
    ) -> Prepared {
        let mut headers = self.base_headers(Framing::Streaming, credential);
        let decoded_len = message.len();
        if let Some(encoding) = self.streamed_encoding(decoded_len) {
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(encoding.as_str()),
            );
            self.counters.compressed_request();
            self.counters.streamed_request();
            let header = Bytes::copy_from_slice(&envelope_header(0, decoded_len));
            return Prepared {
                method,
                headers,
                body: Body::Streamed(header, message),
                decoded_len,
            };
        }
        let (payload, encoding) = self.maybe_compress(message);
        let mut flags = 0;
        if encoding != Encoding::Identity {
            flags = FLAG_COMPRESSED;
            headers.insert(
                "connect-content-encoding",
                HeaderValue::from_static(encoding.as_str()),
            );
        }
        Prepared {
            method,
            headers,
            body: Body::Whole(envelope(flags, &payload)),
            decoded_len,
        }
    }

    /// The encoding a streaming request of `len` bytes is compressed with
    /// as it is sent, if it is: a body large enough that compressing it
    /// takes time the link could use ([`STREAM_MIN`]), zstd chosen and
    /// taken for whole bodies by the gateway, and a worst case (nothing
    /// compresses) within the request size the gateway announced — so the
    /// size check before sending stays exact, and no streamed body can
    /// turn out too large midway.
    fn streamed_encoding(&self, len: usize) -> Option<Encoding> {
        if len < STREAM_MIN {
            return None;
        }
        let encoding = self.request_encoding();
        let taken = self.body_accepts.load(Ordering::Relaxed) & bit(encoding) != 0;
        let limit = self.max_request.load(Ordering::Relaxed);
        (taken && stream_coding::fits_streamed(encoding, len + ENVELOPE_HEADER, limit))
            .then_some(encoding)
    }

    fn maybe_compress(&self, message: Bytes) -> (Bytes, Encoding) {
        let decoded = message.len();
        let (body, encoding) = self.compress(message);
        count_bytes("sent", body.len(), decoded);
        (body, encoding)
    }

    fn compress(&self, message: Bytes) -> (Bytes, Encoding) {
        let encoding = self.request_encoding();
        if encoding == Encoding::Identity || message.len() < self.compress_min {
            return (message, Encoding::Identity);
        }
        let packed = encoding.compress(&message);
        if packed.len() >= message.len() {
            return (message, Encoding::Identity);
        }
        self.counters.compressed_request();
        (packed, encoding)
    }

    /// Reads a unary answer into `M` and the session at `session_field`.
    pub(super) async fn read_unary<M: Message + Default>(
        &self,
        response: ResponseStream,
        session_field: u32,
        transport: HttpVersion,
        started: Instant,
    ) -> Result<Reply<M>, CallError> {
        if response.head.status != http::StatusCode::OK {
            return Err(self.read_error(response).await);
        }
        self.counters.answered();
        self.learn(&response.head.headers, Framing::Unary);
        let (head, body) = response
            .collect(self.max_message)
            .await
            .map_err(body_error)?;
        check_content_type(&head.headers, Framing::Unary)?;
        let encoding = response_encoding(&head.headers, header::CONTENT_ENCODING.as_str())?;
        let wire_len = body.len();
        if encoding != Encoding::Identity {
            self.counters.compressed_response();
        }
        let body = self.decompress(encoding, body)?;
        count_bytes("received", wire_len, body.len());
        let message = M::decode(&body[..])
            .map_err(|e| CallError::Protocol(format!("undecodable response: {e}")))?;
        let session = extract_session(&body, session_field).map_err(CallError::Protocol)?;
        debug!(
            version = transport.as_str(),
            wire_len,
            len = body.len(),
            encoding = encoding.as_str(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "reply"
        );
        Ok(Reply {
            message,
            session,
            transport,
        })
    }

    /// A non-200 answer: the Connect error in its JSON body, or one
    /// inferred from the status.
    async fn read_error(&self, response: ResponseStream) -> CallError {
        let status = response.head.status;
        self.learn_request_limit(&response.head.headers);
        let inferred = || {
            ApiError::new(
                Code::from_http_status(status.as_u16()),
                format!("HTTP status {status}"),
            )
        };
        let encoding = response_encoding(&response.head.headers, header::CONTENT_ENCODING.as_str())
            .unwrap_or(Encoding::Identity);
        let error = match response.collect(MAX_ERROR_BODY).await {
            Ok((_, body)) => encoding
                .decompress(body, MAX_ERROR_BODY)
                .ok()
                .and_then(|body| ApiError::from_json(&body))
                .unwrap_or_else(inferred),
            Err(ClientError::TooLarge(_)) => inferred(),
            Err(e) => return body_error(e),
        };
        debug!(
            status = status.as_u16(),
            code = error.code.as_str(),
            "error reply"
        );
        CallError::Api(error)
    }

    /// Checks a streaming answer's head and wraps its body.
    pub(super) async fn open_stream(
        &self,
        response: ResponseStream,
        transport: HttpVersion,
        started: Instant,
    ) -> Result<ExecuteStream, CallError> {
        if response.head.status != http::StatusCode::OK {
            return Err(self.read_error(response).await);
        }
        self.counters.answered();
        self.learn(&response.head.headers, Framing::Streaming);
        check_content_type(&response.head.headers, Framing::Streaming)?;
        let encoding = response_encoding(&response.head.headers, "connect-content-encoding")?;
        Ok(ExecuteStream {
            response,
            envelopes: Envelopes::default(),
            encoding,
            limit: self.max_message,
            transport,
            done: false,
            counters: self.counters.clone(),
            started: Some(started),
        })
    }

    fn decompress(&self, encoding: Encoding, body: Bytes) -> Result<Bytes, CallError> {
        decompress(encoding, body, self.max_message)
    }
}

/// The encodings a header lists, as bits; `None` if it is absent.
fn encoding_bits(headers: &HeaderMap, name: &str) -> Option<u8> {
    let list = headers.get(name).and_then(|v| v.to_str().ok())?;
    Some(
        list.split(',')
            .filter_map(|item| Encoding::from_name(item.split(';').next().unwrap_or("")))
            .fold(0, |bits, e| bits | bit(e)),
    )
}

fn decompress(encoding: Encoding, body: Bytes, limit: usize) -> Result<Bytes, CallError> {
    encoding.decompress(body, limit).map_err(|e| match e.code {
        Code::ResourceExhausted => CallError::TooLarge { limit },
        _ => CallError::Protocol(e.message),
    })
}

/// Message bytes as they cross the wire (`form="wire"`, compressed when
/// negotiated) and decoded (`form="decoded"`); their ratio is what
/// compression saves.
fn count_bytes(direction: &str, wire: usize, decoded: usize) {
    let bytes = &metrics().upstream.bytes;
    bytes.with(&[direction, "wire"]).add(wire as u64);
    bytes.with(&[direction, "decoded"]).add(decoded as u64);
}

/// Counts one finished request and its latency.
pub(super) fn record(
    method: Method,
    transport: Option<HttpVersion>,
    outcome: &str,
    started: Instant,
) {
    let m = metrics();
    let transport = transport.map_or("none", HttpVersion::as_str);
    m.upstream
        .requests
        .with(&[method.name(), transport, outcome])
        .inc();
    m.upstream
        .duration
        .with(&[method.name(), transport])
        .observe(started.elapsed());
}

/// A failure while reading a response body: the request went out.
fn body_error(e: ClientError) -> CallError {
    match e {
        ClientError::TooLarge(limit) => CallError::TooLarge { limit },
        other => CallError::Lost(other.to_string()),
    }
}

fn check_content_type(headers: &HeaderMap, framing: Framing) -> Result<(), CallError> {
    let value = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match Codec::from_content_type(value) {
        Some((Codec::Proto, f)) if f == framing => Ok(()),
        _ => Err(CallError::Protocol(format!(
            "unexpected content type {value:?}"
        ))),
    }
}

fn response_encoding(headers: &HeaderMap, name: &str) -> Result<Encoding, CallError> {
    let value = headers.get(name).map(|v| v.to_str().unwrap_or("?"));
    Encoding::from_header(value).map_err(|e| CallError::Protocol(e.message))
}

/// The messages of a `StreamExecute`, read one envelope at a time: memory
/// stays at one message however large the result. Dropping it before the
/// end cancels the HTTP stream (HTTP/3 STOP_SENDING, HTTP/2 RST_STREAM),
/// so the gateway stops reading the result.
pub struct ExecuteStream {
    response: ResponseStream,
    envelopes: Envelopes,
    encoding: Encoding,
    limit: usize,
    transport: HttpVersion,
    done: bool,
    counters: Arc<Counters>,
    /// When the request was sent; taken when its outcome is recorded.
    started: Option<Instant>,
}

impl Drop for ExecuteStream {
    /// A stream dropped before its end was cancelled by the caller (a
    /// client that hung up, `KILL QUERY`).
    fn drop(&mut self) {
        if let Some(started) = self.started.take() {
            record(
                Method::StreamExecute,
                Some(self.transport),
                "cancelled",
                started,
            );
        }
    }
}

impl ExecuteStream {
    /// The next message; `Ok(None)` after the gateway's clean end of
    /// stream. An error (including an end-of-stream error, as
    /// [`CallError::Api`]) ends the stream: later calls return `Ok(None)`.
    pub async fn next(&mut self) -> Result<Option<Reply<Streamed>>, CallError> {
        if self.done {
            return Ok(None);
        }
        let result = self.read().await;
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
            if let Some(started) = self.started.take() {
                let outcome = result.as_ref().err().map_or("ok", CallError::outcome);
                record(
                    Method::StreamExecute,
                    Some(self.transport),
                    outcome,
                    started,
                );
            }
        }
        result
    }

    /// Which HTTP version carries the stream.
    pub fn transport(&self) -> HttpVersion {
        self.transport
    }

    /// Reads up to the end of the HTTP stream once the answer is complete.
    /// Dropping the body before its end would cancel the stream
    /// (RST_STREAM / STOP_SENDING) although nothing is wrong, and a busy
    /// connection pays for every such cancel: HTTP/2 has to answer each
    /// frame still on its way for a stream it gave up, and h2 counts those
    /// answers against a per-connection limit (1024) past which it tears
    /// the whole connection down, with every request on it. The answer is
    /// already whole, so what happens here cannot change it: a failure or
    /// a late end only means the stream is cancelled after all.
    async fn read_http_end(&mut self) {
        let end = tokio::time::timeout(HTTP_END_GRACE, async {
            loop {
                match self.response.chunk().await {
                    Ok(Some(chunk)) if chunk.is_empty() => continue,
                    other => return other,
                }
            }
        })
        .await;
        match end {
            Ok(Ok(None)) => {}
            Ok(Ok(Some(_))) => {
                debug!("data after the end-of-stream message; cancelling the stream")
            }
            Ok(Err(e)) => debug!(error = %e, "the stream failed after its end-of-stream message"),
            Err(_) => {
                debug!(grace = ?HTTP_END_GRACE, "no end of the HTTP stream after the end-of-stream message; cancelling it")
            }
        }
    }

    async fn read(&mut self) -> Result<Option<Reply<Streamed>>, CallError> {
        loop {
            let taken = self.envelopes.next(self.limit).map_err(|e| match e.code {
                Code::ResourceExhausted => CallError::TooLarge { limit: self.limit },
                _ => CallError::Protocol(e.message),
            })?;
            if let Some(env) = taken {
                let end_stream = env.is_end_stream();
                let wire_len = env.payload.len();
                let payload = if env.is_compressed() {
                    if self.encoding == Encoding::Identity {
                        return Err(CallError::Protocol(
                            "compressed message without Connect-Content-Encoding".into(),
                        ));
                    }
                    self.counters.compressed_response();
                    decompress(self.encoding, env.payload, self.limit)?
                } else {
                    env.payload
                };
                count_bytes("received", wire_len, payload.len());
                if !end_stream && payload.is_empty() {
                    // The gateway's keep-alive during a slow statement.
                    continue;
                }
                if end_stream {
                    self.read_http_end().await;
                    return match end_stream_error(&payload) {
                        Some(error) => Err(CallError::Api(error)),
                        None => Ok(None),
                    };
                }
                let message = decode_without_session(payload.clone())
                    .map_err(|e| CallError::Protocol(format!("undecodable message: {e}")))?;
                let session =
                    extract_session(&payload, SESSION_FIELD).map_err(CallError::Protocol)?;
                return Ok(Some(Reply {
                    message,
                    session,
                    transport: self.transport,
                }));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.envelopes.push(chunk),
                Ok(None) => {
                    return Err(CallError::Lost(
                        "the stream ended without an end-of-stream message".into(),
                    ));
                }
                Err(e) => return Err(body_error(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(offer: Vec<Encoding>) -> Wire {
        Wire::new(offer, 100, 1 << 20, Arc::new(Counters::default()))
    }

    fn user() -> Credential {
        Credential::basic("u", "p")
    }

    impl Prepared {
        fn whole(&self) -> &Bytes {
            match &self.body {
                Body::Whole(bytes) => bytes,
                Body::Streamed(..) => panic!("a streamed body"),
            }
        }
    }

    fn accepting(name: &'static str, value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn compresses_only_once_the_gateway_accepts_a_codec_we_offer() {
        let w = wire(vec![Encoding::Zstd, Encoding::Snappy]);
        let big = Bytes::from(vec![b'a'; 1000]);
        let request = w.unary(Method::Execute, big.clone(), &user());
        assert_eq!(request.headers.get(header::CONTENT_ENCODING), None);
        assert_eq!(request.headers[header::ACCEPT_ENCODING], "zstd, snappy");
        assert_eq!(request.whole(), &big, "nothing learned yet: identity");

        w.learn(
            &accepting("accept-encoding", "gzip, snappy"),
            Framing::Unary,
        );
        let request = w.unary(Method::Execute, big.clone(), &user());
        assert_eq!(request.headers[header::CONTENT_ENCODING], "snappy");
        assert_eq!(
            Encoding::Snappy
                .decompress(request.whole().clone(), 1 << 20)
                .unwrap(),
            big
        );
        // Small bodies stay as they are.
        let small = w.unary(Method::Execute, Bytes::from_static(b"tiny"), &user());
        assert_eq!(small.headers.get(header::CONTENT_ENCODING), None);

        // The streaming header counts for streams, and zstd is preferred.
        w.learn(
            &accepting("connect-accept-encoding", "snappy, zstd"),
            Framing::Streaming,
        );
        let request = w.streaming(Method::StreamExecute, big.clone(), &user());
        assert_eq!(request.headers["connect-content-encoding"], "zstd");
        assert_eq!(request.headers["connect-accept-encoding"], "zstd, snappy");
        assert_eq!(request.whole()[0], FLAG_COMPRESSED);
        assert_eq!(w.counters.snapshot().compressed_requests, 2);
        let built = request.build(
            "https://gw:443/psdb.v1alpha1.Database/StreamExecute"
                .parse()
                .unwrap(),
        );
        assert!(built.headers()[header::AUTHORIZATION].is_sensitive());
    }

    /// Against PlanetScale's endpoint (`s2, gzip`, no zstd) the sidecar's
    /// default offer sends S2, which that server reads.
    #[test]
    fn the_default_offer_uses_s2_where_zstd_is_not_taken() {
        let w = wire(vec![Encoding::Zstd, Encoding::S2, Encoding::Snappy]);
        w.learn(&accepting("accept-encoding", "s2, gzip"), Framing::Unary);
        let big = Bytes::from(b"SELECT 1 /* padding */ ".repeat(100));
        let request = w.unary(Method::Execute, big.clone(), &user());
        assert_eq!(request.headers[header::CONTENT_ENCODING], "s2");
        assert_eq!(&request.whole()[4..10], b"S2sTwO");
        assert_eq!(
            Encoding::S2
                .decompress(request.whole().clone(), 1 << 20)
                .unwrap(),
            big
        );
    }

    /// A request over the limit the gateway announced is refused unsent,
    /// compressed or not (the gateway bounds both sizes); before the
    /// gateway has said, or from a server that never says, nothing is.
    #[test]
    fn requests_over_the_gateways_announced_limit_are_not_sent() {
        let w = wire(vec![Encoding::Zstd]);
        let big = Bytes::from(vec![b'a'; 5000]);
        assert!(
            w.check_size(&w.unary(Method::Execute, big.clone(), &user()))
                .is_ok()
        );
        w.learn(&accepting(MAX_REQUEST_BYTES_HEADER, "4096"), Framing::Unary);
        w.learn(&accepting("accept-encoding", "zstd"), Framing::Unary);
        let packed = w.unary(Method::Execute, big.clone(), &user());
        assert!(packed.whole().len() < 4096, "compressed, yet too large");
        match w.check_size(&packed) {
            Err(CallError::Api(e)) => {
                assert_eq!(e.code, Code::ResourceExhausted);
                assert!(e.message.contains("max_request_bytes (4096 bytes)"));
            }
            other => panic!("{other:?}"),
        }
        let fits = w.streaming(
            Method::StreamExecute,
            Bytes::from(vec![b'a'; 4000]),
            &user(),
        );
        assert!(w.check_size(&fits).is_ok());
        // A nonsense value is ignored; the last good one stays.
        w.learn(&accepting(MAX_REQUEST_BYTES_HEADER, "lots"), Framing::Unary);
        assert!(w.check_size(&packed).is_err());
    }

    #[test]
    fn a_codec_we_do_not_offer_is_never_sent() {
        let w = wire(vec![Encoding::Snappy]);
        w.learn(&accepting("accept-encoding", "zstd, gzip"), Framing::Unary);
        let request = w.unary(Method::Execute, Bytes::from(vec![0u8; 1000]), &user());
        assert_eq!(request.headers.get(header::CONTENT_ENCODING), None);
        let request = w.streaming(Method::StreamExecute, Bytes::from(vec![0u8; 1000]), &user());
        assert_eq!(request.whole()[0], 0, "envelope not flagged");
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    /// A large streaming request is compressed as it is sent — only once
    /// our gateway has said it takes a whole-body coding, and only when
    /// even an incompressible body would fit its limit; the pieces make
    /// exactly the enveloped message.
    #[test]
    fn large_streaming_requests_are_compressed_as_they_are_sent_where_taken() {
        let w = wire(vec![Encoding::Zstd]);
        let big: Bytes = (0..3 * stream_coding::PIECE as u32)
            .map(|i| (i / 7 % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        let whole = |p: &Prepared| matches!(p.body, Body::Whole(_));
        w.learn(
            &headers(&[
                ("connect-accept-encoding", "zstd"),
                (MAX_REQUEST_BYTES_HEADER, "67108864"),
            ]),
            Framing::Streaming,
        );
        assert!(
            whole(&w.streaming(Method::StreamExecute, big.clone(), &user())),
            "not announced"
        );
        w.learn(
            &headers(&[
                ("connect-accept-encoding", "zstd"),
                (MAX_REQUEST_BYTES_HEADER, "67108864"),
                (BODY_ENCODING_HEADER, "zstd, s2"),
            ]),
            Framing::Streaming,
        );
        let streamed = w.streaming(Method::StreamExecute, big.clone(), &user());
        assert!(!whole(&streamed));
        assert_eq!(streamed.headers[header::CONTENT_ENCODING], "zstd");
        assert_eq!(streamed.headers.get("connect-content-encoding"), None);
        assert!(w.check_size(&streamed).is_ok());
        assert_eq!(w.counters.snapshot().streamed_requests, 1);
        let uri: http::Uri = "https://gw/psdb.v1alpha1.Database/StreamExecute"
            .parse()
            .unwrap();
        let Outgoing::Pieces(pieces) = streamed.build(uri.clone()).into_body() else {
            panic!("a whole body");
        };
        let pieces: Vec<Bytes> = pieces.collect();
        assert!(pieces.len() > 1, "sent in pieces");
        let joined: Vec<u8> = pieces.iter().flatten().copied().collect();
        let decoded = Encoding::Zstd.decompress(joined.into(), 64 << 20).unwrap();
        assert_eq!(decoded, envelope(0, &big));
        // Built again (a retry on another connection), it is made afresh.
        assert!(matches!(
            streamed.build(uri).into_body(),
            Outgoing::Pieces(_)
        ));

        let small = Bytes::from(vec![b'a'; stream_coding::PIECE]);
        assert!(
            whole(&w.streaming(Method::StreamExecute, small, &user())),
            "small"
        );
        assert!(
            whole(&w.unary(Method::Execute, big.clone(), &user())),
            "unary"
        );
        // A limit an incompressible body of this size might pass.
        let tight = (big.len() + 64).to_string();
        w.learn(
            &headers(&[
                ("connect-accept-encoding", "zstd"),
                (MAX_REQUEST_BYTES_HEADER, &tight),
                (BODY_ENCODING_HEADER, "zstd"),
            ]),
            Framing::Streaming,
        );
        let near = w.streaming(Method::StreamExecute, big.clone(), &user());
        assert!(
            whole(&near),
            "whole, where incompressible data could go too large"
        );
        assert!(w.check_size(&near).is_ok());
    }
}
