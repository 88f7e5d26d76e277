//! HTTP → Connect → RPC: parses and authenticates a request, runs the
//! method, and renders the answer. Every API error of the gateway is
//! rendered here and nowhere else.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::field::{Empty, display};
use tracing::{Instrument, Span, debug, debug_span, info_span};

use crate::admin::metrics::{Gauge, Metric};
use crate::telemetry::TraceId;

use crate::api::compression::SUPPORTED;
use crate::api::connect::{ENVELOPE_HEADER, take_whole_envelope};
use crate::api::stream_coding::BodyDecoder;
use crate::api::strict_text::StrictText;
use crate::api::{
    ApiError, BODY_ENCODING_HEADER, Code, Codec, Encoding, Framing, MAX_REQUEST_BYTES_HEADER,
    Method, RAW_TEXT_HEADER,
};
use crate::transport::run_to_end::RunToEnd;
use crate::transport::{Body, BodyError, Chunks, Handler, Request, RequestBody, Response};

use super::auth::{Account, Accounts};
use super::rpc::Rpc;
use super::series;
use super::stream::StreamSink;
use crate::api::connect::encode_message_with;
use crate::api::effort::effort_within;
use crate::transport::link::Link;

/// A refused request's body is read and dropped when it declares at most
/// this many bytes, within this long (see `Service::dispatch`).
const REFUSED_BODY_DRAIN_BYTES: usize = 64 << 10;
const REFUSED_BODY_DRAIN_TIME: Duration = Duration::from_secs(1);

/// Envelopes in flight between the statement and the transport.
const STREAM_BUFFER: usize = 2;

pub struct Service {
    pub accounts: Accounts,
    pub rpc: Rpc,
    /// Requests being served (the drain waits for them to finish).
    pub in_flight: Arc<Metric<Gauge>>,
    /// How long an authenticated request's body may take to arrive.
    pub request_body_timeout: Duration,
}

/// A new [`Service::in_flight`], as it is exported.
pub fn in_flight_gauge() -> Arc<Metric<Gauge>> {
    Arc::new(Metric::new(
        "myquic_gateway_requests_in_flight",
        "Requests being served now.",
        Gauge::new(),
    ))
}

/// How the client wants its answer.
#[derive(Clone, Copy)]
struct Wire {
    codec: Codec,
    framing: Framing,
    response_encoding: Encoding,
    /// The client takes text fields with bytes that are not UTF-8
    /// ([`RAW_TEXT_HEADER`]); JSON can never carry them.
    raw_text: bool,
}

impl Handler for Arc<Service> {
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Response> + Send>> {
        let service = self.clone();
        let span = request_span(&request);
        let method = Method::from_path(request.path());
        let version = request.version;
        let streaming = method.is_some_and(Method::is_streaming);
        Box::pin(
            async move {
                let started = Instant::now();
                // Streams count themselves in flight while they run.
                let _in_flight = (!streaming).then(|| InFlight::new(&service.in_flight));
                let response = service.serve(request).await;
                let outcome = if response.status == StatusCode::OK {
                    "ok"
                } else {
                    Code::from_http_status(response.status.as_u16()).as_str()
                };
                series::count_request(method, version, outcome);
                if let Body::Full(body) = &response.body {
                    series::bytes_sent().add(body.len() as u64);
                }
                if !streaming {
                    series::observe(method, version, started.elapsed());
                }
                debug!(status = response.status.as_u16(), "answered");
                response
            }
            .instrument(span),
        )
    }
}

/// The request's span. A caller that traces (the sidecar sends
/// `traceparent` for the commands it logs) gets one at info, so the two
/// logs join at the gateway's default level. Otherwise it is a debug
/// span, whose fields are formatted, and trace id made, only when it is
/// logged: at info they were work on every request for no line.
fn request_span(request: &Request) -> Span {
    let version = request.version.as_str();
    if let Some(trace) =
        header_str(&request.headers, "traceparent").and_then(TraceId::from_traceparent)
    {
        return info_span!("request", trace_id = %trace, path = %request.path(), version);
    }
    let span = debug_span!("request", trace_id = Empty, path = %request.path(), version);
    if !span.is_disabled() {
        span.record("trace_id", display(TraceId::random()));
    }
    span
}

/// Counts a request in flight (the drain waits for these) while alive.
struct InFlight(Arc<Metric<Gauge>>);

impl InFlight {
    fn new(gauge: &Arc<Metric<Gauge>>) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Service {
    async fn serve(self: Arc<Self>, request: Request) -> Response {
        if request.method != http::Method::POST {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only POST is supported\n");
            response
                .headers
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        let Some(method) = Method::from_path(request.path()) else {
            return render_error(
                None,
                &ApiError::new(
                    Code::NotFound,
                    format!("no such method: {}", request.path()),
                ),
            );
        };
        let content_type =
            header_str(&request.headers, header::CONTENT_TYPE.as_str()).unwrap_or("");
        let Some((codec, framing)) = Codec::from_content_type(content_type)
            .filter(|(_, f)| (*f == Framing::Streaming) == method.is_streaming())
        else {
            let mut response = plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported content type\n",
            );
            let accept = if method.is_streaming() {
                "application/connect+proto, application/connect+json"
            } else {
                "application/proto, application/json"
            };
            response
                .headers
                .insert("accept-post", HeaderValue::from_static(accept));
            return response;
        };
        let (encoding_header, accept_header) = match framing {
            Framing::Unary => ("content-encoding", "accept-encoding"),
            Framing::Streaming => ("connect-content-encoding", "connect-accept-encoding"),
        };
        let mut wire = Wire {
            codec,
            framing,
            response_encoding: Encoding::Identity,
            raw_text: codec == Codec::Proto
                && header_str(&request.headers, RAW_TEXT_HEADER) == Some("1"),
        };
        let request_encoding =
            match Encoding::from_header(header_str(&request.headers, encoding_header)) {
                Ok(e) => e,
                Err(e) => return render_error(Some(wire), &e),
            };
        // A unary body is its message; a streaming body may also be coded
        // as a whole, envelope and all (see BODY_ENCODING_HEADER).
        let codings = match framing {
            Framing::Unary => Ok(Codings {
                body: request_encoding,
                message: Encoding::Identity,
            }),
            Framing::Streaming => {
                Encoding::from_header(header_str(&request.headers, "content-encoding")).map(
                    |body| Codings {
                        body,
                        message: request_encoding,
                    },
                )
            }
        };
        let codings = match codings {
            Ok(codings) => codings,
            Err(e) => return render_error(Some(wire), &e),
        };
        wire.response_encoding = Encoding::negotiate(
            request_encoding,
            header_str(&request.headers, accept_header),
        );
        let mut response = match self.clone().dispatch(method, wire, codings, request).await {
            Ok(response) => response,
            Err(e) => render_error(Some(wire), &e),
        };
        // What a client may send, so that it can refuse a larger request
        // itself instead of uploading it (the sidecar does).
        let limit = self
            .rpc
            .backend_packet
            .request_limit_header(self.rpc.limits.max_request_bytes);
        response.headers.insert(MAX_REQUEST_BYTES_HEADER, limit);
        response
            .headers
            .insert(BODY_ENCODING_HEADER, HeaderValue::from_static(SUPPORTED));
        response
    }

    /// The largest request body `account` may send: `max_request_bytes`,
    /// or by default what the backend takes plus headroom (asked of the
    /// backend the first time).
    async fn request_limit(&self, account: &Account) -> usize {
        let configured = self.rpc.limits.max_request_bytes;
        if configured == 0 {
            self.rpc
                .backend_packet
                .learn(account.pool(), self.rpc.connect_timeout)
                .await;
        }
        self.rpc.backend_packet.request_limit(configured)
    }

    async fn dispatch(
        self: Arc<Self>,
        method: Method,
        wire: Wire,
        codings: Codings,
        request: Request,
    ) -> Result<Response, ApiError> {
        // Authenticate from the headers, before reading any of the body:
        // an anonymous caller gets nothing but a 401 from us, and the body
        // it may still be sending is never buffered.
        let authorization = header_str(&request.headers, header::AUTHORIZATION.as_str());
        let account = match self.accounts.authenticate(authorization) {
            Ok(account) => account,
            Err(refused) => {
                // A small body that says its size is read (and dropped)
                // first, briefly: a request cut off under a complete
                // response makes strict clients (curl) throw the response
                // away. Anything larger is never read; nor is an HTTP/3
                // body, whose declared size nothing below us enforces.
                let declared = header_str(&request.headers, header::CONTENT_LENGTH.as_str())
                    .and_then(|v| v.parse::<usize>().ok());
                if request.version != crate::transport::HttpVersion::Http3
                    && declared.is_some_and(|n| n <= REFUSED_BODY_DRAIN_BYTES)
                {
                    let _ = request
                        .body
                        .read(REFUSED_BODY_DRAIN_BYTES, REFUSED_BODY_DRAIN_TIME)
                        .await;
                }
                return Err(refused);
            }
        };
        request.peer.release();
        let limit = self.request_limit(&account).await;
        // An enveloped message may be as large as the limit.
        let decoded_limit = match wire.framing {
            Framing::Unary => limit,
            Framing::Streaming => limit.saturating_add(ENVELOPE_HEADER),
        };
        let body = read_decoded(
            request.body,
            codings.body,
            limit,
            decoded_limit,
            self.request_body_timeout,
        )
        .await?;
        let message = match wire.framing {
            Framing::Unary => body,
            Framing::Streaming => single_envelope(body, codings.message, limit)
                .map_err(|e| after_decompression(e, limit))?,
        };
        let rpc = &self.rpc;
        let link = self.link_of(&request.link);
        match method {
            Method::CreateSession => {
                let _: crate::api::pb::CreateSessionRequest = wire.codec.decode(&message)?;
                Ok(self.unary(wire, &link, &rpc.create_session(&account)?))
            }
            Method::CloseSession => {
                let req = wire.codec.decode(&message)?;
                Ok(self.unary(wire, &link, &rpc.close_session(&account, req).await?))
            }
            Method::Execute => {
                let req = wire.codec.decode(&message)?;
                let service = self.clone();
                let response =
                    detached(async move { service.rpc.execute(account, req).await }).await?;
                Ok(self.unary(wire, &link, &response))
            }
            Method::Prepare => {
                let req = wire.codec.decode(&message)?;
                let service = self.clone();
                let response =
                    detached(async move { service.rpc.prepare(account, req).await }).await?;
                Ok(self.unary(wire, &link, &response))
            }
            Method::StreamExecute => {
                let req: crate::api::pb::ExecuteRequest = wire.codec.decode(&message)?;
                let (tx, rx) = mpsc::channel(STREAM_BUFFER);
                let limits = &rpc.limits;
                let sink = StreamSink::new(
                    wire.codec,
                    wire.response_encoding,
                    limits.compress_min_bytes,
                    limits.stream_message_bytes,
                    tx,
                )
                .raw_text(wire.raw_text)
                .link(link)
                .near_rtt(limits.near_rtt);
                let service = self.clone();
                let version = request.version;
                let in_flight = InFlight::new(&self.in_flight);
                // The statement runs as the transport reads the body (on
                // its task), and to its end even if the client goes.
                let producer = RunToEnd::new(
                    async move {
                        let started = Instant::now();
                        service.rpc.stream_execute(account, req, sink).await;
                        series::observe(Some(Method::StreamExecute), version, started.elapsed());
                        drop(in_flight);
                    }
                    .in_current_span(),
                );
                let mut response = stream_response(wire, rx);
                // The head is returned at once, never held for the first
                // rows: a client may need it to go on (the sidecar once
                // heard `KILL QUERY` only after it). Driving the statement
                // here first, to send a body that is already made with the
                // head, found none for a point select and split HTTP/2's
                // shared writes at 32 streams (0.7 -> 1.3-1.5 writev per
                // query): see benches/results/profiles/gateway.md.
                if let Body::Stream(chunks) = response.body {
                    response.body = Body::Stream(chunks.with_producer(producer));
                }
                Ok(response)
            }
        }
    }

    /// The link a response's compression follows: its connection's, or
    /// with `compression_by_link` off one that knows nothing (level 1).
    fn link_of(&self, link: &Link) -> Link {
        if self.rpc.limits.compression_by_link {
            link.clone()
        } else {
            Link::default()
        }
    }

    fn unary<M: prost::Message + serde::Serialize + StrictText>(
        &self,
        wire: Wire,
        link: &Link,
        message: &M,
    ) -> Response {
        let min = self.rpc.limits.compress_min_bytes;
        let strict = if wire.raw_text {
            None
        } else {
            message.strict_text()
        };
        let message = strict.as_ref().unwrap_or(message);
        let near_rtt = self.rpc.limits.near_rtt;
        let effort = || effort_within(link.estimate(), near_rtt);
        let (body, compressed) =
            encode_message_with(wire.codec, wire.response_encoding, min, effort, message);
        let mut headers = base_headers(wire);
        if compressed {
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(wire.response_encoding.as_str()),
            );
        }
        Response {
            status: StatusCode::OK,
            headers,
            body: Body::Full(body),
        }
    }
}

/// Runs a statement-executing call on the request's task, but to its end:
/// a client that hangs up must not cancel it halfway and leave the session
/// torn (see [`RunToEnd`]).
async fn detached<T: Send + 'static>(
    call: impl Future<Output = Result<T, ApiError>> + Send + 'static,
) -> Result<T, ApiError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    RunToEnd::new(
        async move {
            let _ = tx.send(call.await);
        }
        .in_current_span(),
    )
    .await;
    rx.await
        .map_err(|_| ApiError::new(Code::Internal, "the call ended without an answer"))?
}

/// The one place gateway API errors become HTTP: unary calls get the
/// Connect status and JSON body, streaming calls a 200 whose end-of-stream
/// envelope carries the error.
fn render_error(wire: Option<Wire>, error: &ApiError) -> Response {
    tracing::info!(code = error.code.as_str(), "request refused");
    match wire {
        Some(wire) if wire.framing == Framing::Streaming => {
            let (tx, rx) = mpsc::channel(1);
            tx.try_send(crate::api::connect::end_stream(Some(error)))
                .expect("a fresh channel has room");
            stream_response(wire, rx)
        }
        _ => {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Response {
                status: StatusCode::from_u16(error.code.http_status()).expect("valid status"),
                headers,
                body: Body::Full(error.to_json().into()),
            }
        }
    }
}

fn stream_response(wire: Wire, rx: mpsc::Receiver<Bytes>) -> Response {
    let mut headers = base_headers(wire);
    if wire.response_encoding != Encoding::Identity {
        headers.insert(
            "connect-content-encoding",
            HeaderValue::from_static(wire.response_encoding.as_str()),
        );
    }
    Response {
        status: StatusCode::OK,
        headers,
        body: Body::Stream(
            Chunks::new(rx).with_keepalive(KEEPALIVE, keepalive_message(wire.codec)),
        ),
    }
}

/// How long a response stream may stay silent (a slow statement) before
/// the gateway writes an empty message (the default `ExecuteResponse`,
/// which changes nothing): only a write tells HTTP/3 that the client
/// stopped reading, and a failed one stops the statement (the gateway
/// kills it).
const KEEPALIVE: std::time::Duration = std::time::Duration::from_millis(500);

fn keepalive_message(codec: Codec) -> Bytes {
    match codec {
        Codec::Proto => crate::api::connect::envelope(0, b""),
        Codec::Json => crate::api::connect::envelope(0, b"{}"),
    }
}

fn base_headers(wire: Wire) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(wire.codec.content_type(wire.framing)),
    );
    let accept = match wire.framing {
        Framing::Unary => "accept-encoding",
        Framing::Streaming => "connect-accept-encoding",
    };
    headers.insert(accept, HeaderValue::from_static(SUPPORTED));
    headers
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Response {
        status,
        headers,
        body: Body::Full(Bytes::from_static(text.as_bytes())),
    }
}

/// How a request's bytes are coded: the whole body (HTTP
/// `Content-Encoding`), and a streaming request's message inside its
/// envelope (`Connect-Content-Encoding`).
#[derive(Clone, Copy)]
struct Codings {
    body: Encoding,
    message: Encoding,
}

/// Reads the request body, decoding it as it arrives (zstd a piece at a
/// time: the last piece is decoded moments after it lands, not the whole
/// body after all of it has), refused past `limit` bytes on the wire or
/// `decoded_limit` decoded.
async fn read_decoded(
    body: RequestBody,
    encoding: Encoding,
    limit: usize,
    decoded_limit: usize,
    deadline: Duration,
) -> Result<Bytes, ApiError> {
    let mut wire = 0;
    let decoded = if encoding == Encoding::Identity {
        let read = body.read(limit, deadline).await;
        wire = read.as_ref().map_or(0, Bytes::len);
        read.map_err(|e| body_error(e, limit))
    } else {
        let mut decoder = BodyDecoder::new(encoding, decoded_limit);
        let mut refused = None;
        let read = body
            .read_with(limit, deadline, |piece| {
                wire += piece.len();
                match decoder.push(&piece) {
                    Ok(()) => true,
                    Err(e) => {
                        refused = Some(e);
                        false
                    }
                }
            })
            .await;
        match read {
            Ok(()) => decoder.finish().map_err(|e| after_decompression(e, limit)),
            Err(BodyError::Stopped) => Err(after_decompression(
                refused.unwrap_or_else(|| {
                    ApiError::new(Code::Internal, "request body stopped without a reason")
                }),
                limit,
            )),
            Err(e) => Err(body_error(e, limit)),
        }
    };
    series::bytes_received().add(wire as u64);
    decoded
}

/// A decoded body or message over the limit, named as the limit a client
/// can find in our configuration.
fn after_decompression(e: ApiError, limit: usize) -> ApiError {
    match e.code {
        Code::ResourceExhausted => ApiError::new(
            Code::ResourceExhausted,
            format!(
                "request body larger than max_request_bytes ({limit} bytes) after decompression"
            ),
        ),
        _ => e,
    }
}

fn body_error(e: BodyError, limit: usize) -> ApiError {
    match e {
        BodyError::TooLarge { limit } => ApiError::new(
            Code::ResourceExhausted,
            format!("request body larger than max_request_bytes ({limit} bytes)"),
        ),
        BodyError::TimedOut { after } => ApiError::new(
            Code::DeadlineExceeded,
            format!("request body not received within gateway.timeouts.request_body ({after:?})"),
        ),
        BodyError::Broken(detail) => {
            ApiError::new(Code::Canceled, format!("request body: {detail}"))
        }
        BodyError::Stopped => ApiError::new(
            Code::ResourceExhausted,
            format!("request body refused (max_request_bytes {limit} bytes)"),
        ),
    }
}

/// A streaming request body is exactly one enveloped message.
fn single_envelope(body: Bytes, encoding: Encoding, limit: usize) -> Result<Bytes, ApiError> {
    let mut buf = body;
    let envelope = take_whole_envelope(&mut buf, limit)?
        .ok_or_else(|| ApiError::new(Code::InvalidArgument, "truncated request envelope"))?;
    if !buf.is_empty() || envelope.is_end_stream() {
        return Err(ApiError::new(
            Code::InvalidArgument,
            "StreamExecute takes exactly one request message",
        ));
    }
    if envelope.is_compressed() {
        encoding.decompress(envelope.payload, limit)
    } else {
        Ok(envelope.payload)
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
