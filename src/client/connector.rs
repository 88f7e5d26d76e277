//! The one connection to the gateway, kept up by a background task.
//!
//! The supervisor connects (HTTP/3 first in `auto`, HTTP/2 if the QUIC
//! handshake does not complete in time), publishes the connection for
//! requests to share, watches it, and replaces it when it dies or when a
//! request finds it unusable. On HTTP/2 in `auto` it keeps probing HTTP/3
//! and switches new requests over when a probe succeeds; requests already
//! on HTTP/2 finish there, and the HTTP/2 connection closes when the last of
//! them lets go of it.
//!
//! In `auto` it also watches the HTTP/3 path ([`super::silence`]): once
//! packets have gone unanswered for a few round trips (at least 300 ms) it
//! stops handing the connection out, and if the silence lasts
//! `h3_silence_timeout` (1 s) it connects HTTP/2 — well before QUIC's idle
//! timeout (3 s) would declare the connection dead. Requests not yet
//! written wait for whichever transport proves itself first, so they are
//! not written into a black hole; requests already written stay where they
//! are (answered if the path comes back, lost — never re-sent — if not).
//!
//! Requests never wait on the supervisor itself: they wait (bounded by
//! `connect_timeout`) for a published connection in a `watch` channel.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::transport::HttpVersion;
use crate::transport::client::{ConnectOptions, Connection};

use super::config::{ClientConfig, TransportPreference, jitter_between};
use super::error::CallError;
use super::silence::{path_heard, path_silent};
use super::tier::Tier;

/// Event counters, for metrics and tests.
#[derive(Debug, Default)]
pub(super) struct Counters {
    requests: AtomicU64,
    fallbacks: AtomicU64,
    returns: AtomicU64,
    reconnects: AtomicU64,
    compressed_requests: AtomicU64,
    streamed_requests: AtomicU64,
    compressed_responses: AtomicU64,
    /// Whether the gateway has ever answered a request with success.
    answered: AtomicBool,
}

impl Counters {
    pub(super) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn answered(&self) {
        self.answered.store(true, Ordering::Relaxed);
    }

    pub(super) fn has_answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    pub(super) fn compressed_request(&self) {
        self.compressed_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn streamed_request(&self) {
        self.streamed_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn compressed_response(&self) {
        self.compressed_responses.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            requests: get(&self.requests),
            fallbacks: get(&self.fallbacks),
            returns: get(&self.returns),
            reconnects: get(&self.reconnects),
            compressed_requests: get(&self.compressed_requests),
            streamed_requests: get(&self.streamed_requests),
            compressed_responses: get(&self.compressed_responses),
        }
    }
}

/// Counters since the client was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests a connection took (any method; one that never left is
    /// not counted, one retried on a new connection counts once).
    pub requests: u64,
    /// Times `auto` settled on HTTP/2 because HTTP/3 did not connect
    /// (at start, or after an HTTP/3 connection died).
    pub fallbacks: u64,
    /// Times a background probe moved `auto` from HTTP/2 back to HTTP/3.
    pub returns: u64,
    /// Connections established after a previous one was lost.
    pub reconnects: u64,
    /// Request bodies sent compressed.
    pub compressed_requests: u64,
    /// Of those, bodies compressed as they were sent (prepared for it:
    /// a request retried on another connection counts once).
    pub streamed_requests: u64,
    /// Response bodies (or stream messages) received compressed.
    pub compressed_responses: u64,
}

/// A published connection. The generation tells one connection from the
/// next, so a request that failed on one can wait for a newer one.
#[derive(Clone)]
pub(super) struct Live {
    pub conn: Connection,
    pub generation: u64,
}

/// State shared by the supervisor and the requests.
pub(super) struct Connector {
    config: ClientConfig,
    /// Where connections may go: every gateway of the tier.
    tier: Tier,
    current: watch::Sender<Option<Live>>,
    /// The highest generation a request found unusable.
    broken: watch::Sender<u64>,
    last_error: Mutex<Option<String>>,
    pub(super) counters: Arc<Counters>,
}

impl Connector {
    pub(super) fn new(config: ClientConfig, counters: Arc<Counters>) -> Arc<Self> {
        let members = std::iter::once(config.gateway.clone())
            .chain(config.tier.iter().cloned())
            .collect();
        Arc::new(Self {
            tier: Tier::new(members),
            config,
            current: watch::Sender::new(None),
            broken: watch::Sender::new(0),
            last_error: Mutex::new(None),
            counters,
        })
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        self.config.connect_timeout
    }

    /// The HTTP version of the current connection, if one is up.
    pub(super) fn transport(&self) -> Option<HttpVersion> {
        self.current
            .borrow()
            .as_ref()
            .filter(|live| live.conn.is_open())
            .map(|live| live.conn.version())
    }

    /// Waits until `deadline` for an open connection newer than `after`.
    pub(super) async fn acquire(
        &self,
        deadline: Instant,
        after: Option<u64>,
    ) -> Result<Live, CallError> {
        let mut rx = self.current.subscribe();
        let usable = |state: &Option<Live>| {
            state.as_ref().is_some_and(|live| {
                live.conn.is_open() && after.is_none_or(|g| live.generation > g)
            })
        };
        match timeout_at(deadline, rx.wait_for(usable)).await {
            Ok(Ok(state)) => Ok(state.clone().expect("usable() checked it")),
            // Timed out, or the supervisor is gone (cannot happen while a
            // Client exists, but is no reason to panic).
            _ => Err(CallError::Unavailable {
                waited: self.config.connect_timeout,
                last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
            }),
        }
    }

    /// A request could not use connection `generation`: replace it.
    pub(super) fn report_broken(&self, generation: u64) {
        self.broken.send_if_modified(|g| {
            let newer = generation > *g;
            if newer {
                *g = generation;
            }
            newer
        });
    }

    fn set_last_error(&self, error: String) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(error);
        }
    }

    fn options(&self) -> ConnectOptions {
        ConnectOptions {
            congestion: self.config.congestion,
            tcp_congestion: self.config.tcp_congestion,
            keep_alive: self.config.keep_alive,
            idle_timeout: self.config.idle_timeout,
        }
    }

    /// One HTTP/3 handshake to `addr`, bounded by `limit`.
    async fn connect_h3(&self, addr: SocketAddr, limit: Duration) -> Result<Connection, String> {
        let options = self.options();
        let attempt = Connection::connect_h3_with(
            addr,
            &self.config.server_name,
            self.config.tls.clone(),
            &options,
        );
        match timeout(limit, attempt).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(format!("HTTP/3 to {addr}: {e}")),
            Err(_) => Err(format!("HTTP/3 to {addr}: no handshake within {limit:?}")),
        }
    }

    /// One HTTP/2 connection to `addr`, bounded by `connect_timeout`.
    async fn connect_h2(&self, addr: SocketAddr) -> Result<Connection, String> {
        let options = self.options();
        let attempt = Connection::connect_h2_with(
            addr,
            &self.config.server_name,
            self.config.tls.clone(),
            &options,
        );
        match timeout(self.config.connect_timeout, attempt).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(format!("HTTP/2 to {addr}: {e}")),
            Err(_) => Err(format!("HTTP/2 to {addr}: timed out")),
        }
    }

    /// HTTP/2 to each address of the tier in turn, the current gateway
    /// first (its HTTP/3 path went silent: UDP may be what failed).
    async fn connect_h2_any(&self) -> Result<Connection, String> {
        let mut last = String::new();
        for addr in self
            .tier
            .addresses(self.config.connect_timeout, true)
            .await?
        {
            match self.connect_h2(addr).await {
                Ok(conn) => {
                    self.tier.settled_on(addr);
                    return Ok(conn);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// One round of connection attempts over the tier, a gateway at a time
    /// (the one just lost last), each as the preference says.
    async fn establish(&self) -> Result<Connection, String> {
        let mut errors = Vec::new();
        for addr in self
            .tier
            .addresses(self.config.connect_timeout, false)
            .await?
        {
            match self.establish_to(addr).await {
                Ok(conn) => {
                    self.tier.settled_on(addr);
                    return Ok(conn);
                }
                Err(e) => errors.push(e),
            }
        }
        Err(errors.join("; "))
    }

    async fn establish_to(&self, addr: SocketAddr) -> Result<Connection, String> {
        match self.config.transport {
            TransportPreference::Http2 => self.connect_h2(addr).await,
            TransportPreference::Http3 => {
                let limit = self
                    .config
                    .connect_timeout
                    .max(self.config.h3_handshake_timeout);
                self.connect_h3(addr, limit).await
            }
            TransportPreference::Auto => {
                let h3_error = match self
                    .connect_h3(addr, self.config.h3_handshake_timeout)
                    .await
                {
                    Ok(conn) => return Ok(conn),
                    Err(e) => e,
                };
                match self.connect_h2(addr).await {
                    Ok(conn) => {
                        self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
                        warn!(reason = %h3_error, "HTTP/3 unavailable, using HTTP/2");
                        Ok(conn)
                    }
                    Err(h2_error) => Err(format!("{h3_error}; {h2_error}")),
                }
            }
        }
    }

    fn publish(&self, conn: Connection, generation: &mut u64) -> Live {
        *generation += 1;
        let live = Live {
            conn,
            generation: *generation,
        };
        self.current.send_replace(Some(live.clone()));
        live
    }

    /// Keeps a connection up until `stop` is cancelled.
    pub(super) async fn supervise(self: Arc<Self>, stop: CancellationToken) {
        let mut generation = 0;
        let mut failures = 0u32;
        let mut ever_connected = false;
        loop {
            let attempt = tokio::select! {
                () = stop.cancelled() => return,
                r = self.establish() => r,
            };
            let conn = match attempt {
                Ok(conn) => conn,
                Err(e) => {
                    let delay = self.config.reconnect_backoff.delay(failures);
                    failures = failures.saturating_add(1);
                    debug!(error = %e, ?delay, "gateway connection attempt failed");
                    if failures == 1 || failures.is_multiple_of(10) {
                        warn!(error = %e, failures, "cannot reach the gateway");
                    }
                    self.set_last_error(e);
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(delay) => continue,
                    }
                }
            };
            if ever_connected {
                self.counters.reconnects.fetch_add(1, Ordering::Relaxed);
            }
            ever_connected = true;
            failures = 0;
            let version = conn.version();
            let addr = self
                .tier
                .current()
                .map(|a| a.to_string())
                .unwrap_or_default();
            info!(version = version.as_str(), gateway = %self.config.gateway, %addr, "connected to the gateway");
            let live = self.publish(conn, &mut generation);
            if !self.hold(live, &mut generation, &stop).await {
                self.current.send_replace(None);
                return;
            }
            // Lost: stop handing it out, and do not reconnect in lockstep
            // with every other client of a gateway that just restarted.
            self.current.send_replace(None);
            let delay = jitter_between(Duration::ZERO, self.config.reconnect_backoff.min);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Watches the published connection (switching HTTP/2 to HTTP/3 when a
    /// probe succeeds, and HTTP/3 to HTTP/2 when its path goes silent)
    /// until it is lost (`true`) or the client is gone (`false`).
    async fn hold(&self, mut live: Live, generation: &mut u64, stop: &CancellationToken) -> bool {
        let mut broken = self.broken.subscribe();
        loop {
            let auto = self.config.transport == TransportPreference::Auto;
            let probing = auto && live.conn.version() == HttpVersion::Http2;
            let probe = async {
                if !probing {
                    return std::future::pending().await;
                }
                let interval = self.config.probe_interval;
                tokio::time::sleep(jitter_between(interval / 2, interval * 3 / 2)).await;
                // HTTP/3 to the gateway HTTP/2 is on: the probe tests the
                // path, not the tier.
                let Some(addr) = self.tier.current() else {
                    return Err("no gateway address yet".to_string());
                };
                self.connect_h3(addr, self.config.h3_handshake_timeout)
                    .await
            };
            let watched = live.conn.clone();
            let silence = async {
                if !auto || watched.version() != HttpVersion::Http3 {
                    return std::future::pending().await;
                }
                path_silent(&watched, self.config.h3_silence_timeout).await
            };
            let current = live.generation;
            let silent = tokio::select! {
                () = stop.cancelled() => return false,
                () = live.conn.closed() => {
                    info!(version = live.conn.version().as_str(), "gateway connection lost");
                    self.set_last_error("the connection was lost".into());
                    return true;
                }
                _ = broken.wait_for(|g| *g >= current) => {
                    // Not closed: it may only refuse new streams (GOAWAY)
                    // while finishing those in flight, which hold their
                    // own handles to it.
                    info!(version = live.conn.version().as_str(), "gateway connection refuses requests, replacing it");
                    return true;
                }
                probed = probe => {
                    match probed {
                        Ok(h3) => {
                            self.counters.returns.fetch_add(1, Ordering::Relaxed);
                            info!("HTTP/3 reachable again; new requests use it");
                            // In-flight HTTP/2 requests keep their own
                            // handle; the connection closes after the last.
                            live = self.publish(h3, generation);
                        }
                        Err(e) => debug!(error = %e, "HTTP/3 probe failed"),
                    }
                    continue;
                }
                silent = silence => silent,
            };
            // Requests not yet written wait (in `acquire`) for the path to
            // answer or for HTTP/2; those already written stay on the QUIC
            // connection, which answers them if the path comes back and
            // fails them as lost if it dies.
            debug!(silent_for = ?silent, "HTTP/3 path silent; new requests wait");
            self.current.send_replace(None);
            let race_at = Instant::now() + self.config.h3_silence_timeout.saturating_sub(silent);
            match self.ride_out_silence(&live.conn, race_at, stop).await {
                Race::Http2(h2) => {
                    self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
                    warn!("HTTP/3 path silent, using HTTP/2");
                    live = self.publish(h2, generation);
                }
                Race::Http3Answered => {
                    debug!("HTTP/3 path answered again; new requests use it");
                    self.current.send_replace(Some(live.clone()));
                }
                Race::Lost => return true,
                Race::Stopped => return false,
            }
        }
    }

    /// Waits, while new requests are held, for the silent HTTP/3 path to
    /// answer; if it is still silent at `race_at`, races HTTP/2 against it.
    async fn ride_out_silence(
        &self,
        h3: &Connection,
        race_at: Instant,
        stop: &CancellationToken,
    ) -> Race {
        tokio::select! {
            () = stop.cancelled() => return Race::Stopped,
            () = path_heard(h3) => return Race::Http3Answered,
            () = tokio::time::sleep_until(race_at) => {}
        }
        warn!(
            silent_for = ?self.config.h3_silence_timeout,
            "HTTP/3 path silent; connecting HTTP/2"
        );
        self.race_http2(h3, stop).await
    }

    /// HTTP/2 against the silent HTTP/3 connection `h3`: whichever shows
    /// it works first. An HTTP/3 connection that dies meanwhile does not
    /// stop the HTTP/2 attempt.
    async fn race_http2(&self, h3: &Connection, stop: &CancellationToken) -> Race {
        let h2_error = tokio::select! {
            () = stop.cancelled() => return Race::Stopped,
            () = path_heard(h3) => return Race::Http3Answered,
            connected = self.connect_h2_any() => match connected {
                Ok(h2) => return Race::Http2(h2),
                Err(e) => e,
            },
        };
        warn!(error = %h2_error, "HTTP/3 path silent and HTTP/2 unavailable");
        self.set_last_error(h2_error);
        tokio::select! {
            () = stop.cancelled() => Race::Stopped,
            () = path_heard(h3) => Race::Http3Answered,
            () = h3.closed() => Race::Lost,
        }
    }
}

/// How a race of HTTP/2 against a silent HTTP/3 path ended.
enum Race {
    /// HTTP/2 connected first: new requests use it.
    Http2(Connection),
    /// The HTTP/3 path answered before HTTP/2 connected: it stays.
    Http3Answered,
    /// HTTP/2 failed and the HTTP/3 connection died: reconnect.
    Lost,
    /// The client is gone.
    Stopped,
}
