//! The psdb client the sidecar uses: `psdb.v1alpha1.Database` calls over
//! one long-lived connection to a gateway, HTTP/3 when UDP gets through and
//! HTTP/2 over TLS when it does not.
//!
//! - `connector`: the background task that keeps the connection up,
//!   falls back to HTTP/2 and returns to HTTP/3.
//! - `call`: one request on the wire (headers, compression, envelopes)
//!   and the reading of its answer.
//! - `credential`: the API credential a handle's requests carry.
//! - `session`: sessions as the server's opaque bytes.
//! - `tier`: the gateways a connection may go to, and in which order.
//!
//! The rule that shapes the error handling: a request is sent again on
//! another connection only if it was never written. Once it may have
//! reached the gateway, a failure is [`CallError::Lost`] — re-running a
//! statement the gateway already ran (an `INSERT`, a `COMMIT`) would be
//! worse than reporting the lost connection.

mod call;
mod config;
mod connector;
mod credential;
mod envelopes;
mod error;
mod execute_reply;
mod session;
mod silence;
mod tier;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::debug;

pub use call::{ExecuteStream, Reply};
pub use config::{Backoff, ClientConfig, ConfigError, TransportPreference, defaults};
pub use connector::Stats;
pub use credential::Credential;
pub use error::CallError;
pub use execute_reply::Streamed;
pub use session::RawSession;

use crate::api::{Method, pb};
use crate::transport::HttpVersion;
use crate::transport::client::{ClientError, ResponseStream};
use call::{Prepared, Wire};
use connector::{Connector, Counters};
use session::{CREATE_SESSION_FIELD, SESSION_FIELD, encode_with_session};

/// A psdb client. Cheap to clone: clones share the connection, and many
/// calls run on it concurrently, one HTTP stream each. The connection is
/// closed when the last clone is dropped. Each handle carries one API
/// credential; [`Client::with_credential`] makes a handle of another one
/// on the same connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    credential: Credential,
}

struct Inner {
    connector: Arc<Connector>,
    wire: Wire,
    /// Each method's request URI, parsed once: a request clones its
    /// (reference-counted) parts instead of formatting and parsing text.
    uris: Vec<(Method, http::Uri)>,
    /// Stops the supervisor when the last clone goes.
    _stop: DropGuard,
}

impl Client {
    /// Starts connecting in the background and returns at once: a gateway
    /// that is down delays calls (up to `connect_timeout`), not this. Fails
    /// only on a configuration that cannot work. Must be called inside a
    /// tokio runtime.
    pub fn new(config: ClientConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let counters = Arc::new(Counters::default());
        let credential = Credential::basic(&config.username, &config.password);
        let wire = Wire::new(
            config.accept_encodings.clone(),
            config.compress_min_bytes,
            config.max_message_bytes,
            counters.clone(),
        );
        let uris = Method::ALL
            .into_iter()
            .map(|method| {
                let uri = format!("https://{}{}", config.gateway, method.path());
                uri.parse::<http::Uri>().map(|uri| (method, uri))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ConfigError::Client {
                field: "gateway",
                reason: format!("{:?} is not a valid authority", config.gateway),
            })?;
        let connector = Connector::new(config, counters);
        let stop = CancellationToken::new();
        tokio::spawn(connector.clone().supervise(stop.clone()));
        Ok(Self {
            inner: Arc::new(Inner {
                connector,
                wire,
                uris,
                _stop: stop.drop_guard(),
            }),
            credential,
        })
    }

    /// A handle on the same connection whose requests carry `credential`
    /// instead. Sessions are the credential's: the gateway refuses one
    /// created under another (their cookies are signed for their user).
    pub fn with_credential(&self, credential: Credential) -> Self {
        Self {
            inner: self.inner.clone(),
            credential,
        }
    }

    /// The credential this handle's requests carry.
    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// The HTTP version new calls use now; `None` while disconnected.
    pub fn transport(&self) -> Option<HttpVersion> {
        self.inner.connector.transport()
    }

    /// Waits (up to `connect_timeout`) until a connection is up.
    pub async fn ready(&self) -> Result<HttpVersion, CallError> {
        let deadline = Instant::now() + self.connect_timeout();
        let live = self.inner.connector.acquire(deadline, None).await?;
        Ok(live.conn.version())
    }

    /// Whether the gateway has answered a request successfully at least
    /// once (the sidecar's readiness).
    pub fn has_answered(&self) -> bool {
        self.inner.connector.counters.has_answered()
    }

    /// Fallback, return, reconnect and compression counters.
    pub fn stats(&self) -> Stats {
        self.inner.connector.counters.snapshot()
    }

    /// `CreateSession`: a fresh session (the gateway also creates one on
    /// the first `Execute` without a session).
    /// Whether the server has shown itself to be a myquic gateway, whose
    /// streams mark where each result ends (any answer tells); a plain
    /// psdb server's do not, so several results cannot be told apart.
    pub fn is_myquic_gateway(&self) -> bool {
        self.inner.wire.is_myquic_gateway()
    }

    /// The largest request the gateway takes, as it last said (0: not
    /// said yet, or not our gateway).
    pub fn max_request_bytes(&self) -> usize {
        self.inner.wire.max_request_bytes()
    }

    pub async fn create_session(&self) -> Result<Reply<pb::CreateSessionResponse>, CallError> {
        let body = encode_with_session(None, &pb::CreateSessionRequest {});
        let prepared = self
            .inner
            .wire
            .unary(Method::CreateSession, body, &self.credential);
        self.unary(prepared, CREATE_SESSION_FIELD).await
    }

    /// `Execute`: runs `query` (SQL text as bytes, in the session's
    /// character set, sent unaltered) in `session` (a new session if `None`) and
    /// returns the whole result. SQL errors come back in
    /// `message.error`, with the updated session.
    pub async fn execute(
        &self,
        session: Option<&RawSession>,
        query: impl Into<bytes::Bytes>,
        bind_variables: HashMap<String, pb::BindVariable>,
    ) -> Result<Reply<pb::ExecuteResponse>, CallError> {
        let body = execute_body(session, query.into(), bind_variables, false, false);
        let prepared = self
            .inner
            .wire
            .unary(Method::Execute, body, &self.credential);
        self.unary(prepared, SESSION_FIELD).await
    }

    /// `StreamExecute`: like [`Client::execute`], with the result read one
    /// message at a time. The last message carries the session.
    pub async fn stream_execute(
        &self,
        session: Option<&RawSession>,
        query: impl Into<bytes::Bytes>,
        bind_variables: HashMap<String, pb::BindVariable>,
    ) -> Result<ExecuteStream, CallError> {
        self.stream_execute_as(session, query, bind_variables, false)
            .await
    }

    /// [`Client::stream_execute`] with `ExecuteRequest.prepared`: the
    /// statement is a MySQL prepared statement's (our gateway then runs it
    /// as one at the backend; another psdb server may ignore it).
    pub async fn stream_execute_as(
        &self,
        session: Option<&RawSession>,
        query: impl Into<bytes::Bytes>,
        bind_variables: HashMap<String, pb::BindVariable>,
        prepared: bool,
    ) -> Result<ExecuteStream, CallError> {
        self.stream_execute_with(session, query, bind_variables, prepared, false)
            .await
    }

    /// [`Client::stream_execute_as`], saying whether the caller can send a
    /// file the backend asks for (`ExecuteRequest.local_infile`): then a
    /// `LOAD DATA LOCAL INFILE` streams a `local_infile_request` and waits
    /// for the file ([`Client::local_infile_data`]).
    pub async fn stream_execute_with(
        &self,
        session: Option<&RawSession>,
        query: impl Into<bytes::Bytes>,
        bind_variables: HashMap<String, pb::BindVariable>,
        prepared: bool,
        local_infile: bool,
    ) -> Result<ExecuteStream, CallError> {
        let body = execute_body(
            session,
            query.into(),
            bind_variables,
            prepared,
            local_infile,
        );
        let prepared = self
            .inner
            .wire
            .streaming(Method::StreamExecute, body, &self.credential);
        let started = Instant::now();
        let (response, transport) = match self.send(&prepared).await {
            Ok(sent) => sent,
            Err(e) => {
                call::record(Method::StreamExecute, None, e.outcome(), started);
                return Err(e);
            }
        };
        let stream = self
            .inner
            .wire
            .open_stream(response, transport, started)
            .await;
        if let Err(e) = &stream {
            call::record(Method::StreamExecute, Some(transport), e.outcome(), started);
        }
        debug!(
            version = transport.as_str(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            ok = stream.is_ok(),
            "StreamExecute opened"
        );
        stream
    }

    /// A part of the file a running `LOAD DATA LOCAL INFILE` asked for
    /// (`local_infile_data`): answered once the gateway has taken it.
    pub async fn local_infile_data(
        &self,
        session: Option<&RawSession>,
        data: pb::LocalInfileData,
    ) -> Result<Reply<pb::ExecuteResponse>, CallError> {
        let request = pb::ExecuteRequest {
            local_infile_data: Some(data),
            ..Default::default()
        };
        let body = encode_with_session(session, &request);
        let prepared = self
            .inner
            .wire
            .unary(Method::Execute, body, &self.credential);
        self.unary(prepared, SESSION_FIELD).await
    }

    /// `Prepare`: the columns and parameter count of `query`, without
    /// running it.
    pub async fn prepare(
        &self,
        session: Option<&RawSession>,
        query: impl Into<bytes::Bytes>,
    ) -> Result<Reply<pb::PrepareResponse>, CallError> {
        let request = pb::PrepareRequest {
            session: None,
            query: query.into(),
            bind_variables: HashMap::new(),
        };
        let body = encode_with_session(session, &request);
        let prepared = self
            .inner
            .wire
            .unary(Method::Prepare, body, &self.credential);
        self.unary(prepared, SESSION_FIELD).await
    }

    /// `CloseSession`: ends `session` (rolling back an open transaction)
    /// and frees its backend connection.
    pub async fn close_session(
        &self,
        session: &RawSession,
    ) -> Result<Reply<pb::CloseSessionResponse>, CallError> {
        let body = encode_with_session(Some(session), &pb::CloseSessionRequest { session: None });
        let prepared = self
            .inner
            .wire
            .unary(Method::CloseSession, body, &self.credential);
        self.unary(prepared, SESSION_FIELD).await
    }

    fn uri(&self, method: Method) -> http::Uri {
        let (_, uri) = (self.inner.uris.iter())
            .find(|(m, _)| *m == method)
            .expect("every method's URI is made in Client::new");
        uri.clone()
    }

    fn connect_timeout(&self) -> std::time::Duration {
        self.inner.connector.connect_timeout()
    }

    async fn unary<M: prost::Message + Default>(
        &self,
        prepared: Prepared,
        session_field: u32,
    ) -> Result<Reply<M>, CallError> {
        let started = Instant::now();
        let method = prepared.method();
        let (response, transport) = match self.send(&prepared).await {
            Ok(sent) => sent,
            Err(e) => {
                call::record(method, None, e.outcome(), started);
                return Err(e);
            }
        };
        let reply = self
            .inner
            .wire
            .read_unary(response, session_field, transport, started)
            .await;
        let outcome = reply.as_ref().err().map_or("ok", CallError::outcome);
        call::record(method, Some(transport), outcome, started);
        reply
    }

    /// Sends on the current connection; a request that connection never
    /// took goes to the next one, until `connect_timeout` has passed.
    async fn send(&self, prepared: &Prepared) -> Result<(ResponseStream, HttpVersion), CallError> {
        self.inner.wire.check_size(prepared)?;
        let connector = &self.inner.connector;
        let deadline = Instant::now() + self.connect_timeout();
        let mut after = None;
        loop {
            let live = connector.acquire(deadline, after).await?;
            let version = live.conn.version();
            debug!(
                method = prepared.method().name(),
                version = version.as_str(),
                "request"
            );
            match live
                .conn
                .send_body(prepared.build(self.uri(prepared.method())))
                .await
            {
                Ok(response) => {
                    connector.counters.request();
                    return Ok((response, version));
                }
                Err(ClientError::NotSent(e) | ClientError::Connect(e)) => {
                    debug!(error = %e, version = version.as_str(), "request not sent; trying the next connection");
                    connector.report_broken(live.generation);
                    after = Some(live.generation);
                }
                Err(e @ (ClientError::Broken(_) | ClientError::TooLarge(_))) => {
                    return Err(CallError::Lost(e.to_string()));
                }
            }
        }
    }
}

/// The body of an `Execute` or `StreamExecute` request (the same message).
fn execute_body(
    session: Option<&RawSession>,
    query: bytes::Bytes,
    bind_variables: HashMap<String, pb::BindVariable>,
    prepared: bool,
    local_infile: bool,
) -> bytes::Bytes {
    let request = pb::ExecuteRequest {
        session: None,
        query,
        bind_variables,
        prepared,
        local_infile,
        local_infile_data: None,
    };
    encode_with_session(session, &request)
}
