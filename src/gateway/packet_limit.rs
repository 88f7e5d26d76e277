//! The backend's `max_allowed_packet`, and the limits that follow from it.
//!
//! The backend takes statements up to its `max_allowed_packet` (one
//! command packet, split or not); mysql_async refuses to send a larger one
//! and drops the connection when asked to. So the gateway learns the value
//! (once, from a pooled connection, then at every backend check) and:
//!
//! - refuses a statement that would not fit, unrun, with the server's own
//!   ER_NET_PACKET_TOO_LARGE (1153) naming that limit, the session intact;
//! - takes request bodies up to that size plus room for the rest of the
//!   request (`max_request_bytes = 0`, the default), so that whatever the
//!   backend would run gets to it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::HeaderValue;

use mysql_async::prelude::Queryable;

use crate::mysql::MysqlError;

/// Room in a request for what is not the statement: the session cookie,
/// bind variables' names and types, the protobuf framing.
pub const REQUEST_HEADROOM: usize = 1 << 20;

/// `max_allowed_packet` assumed until the backend has told: MariaDB's
/// default (MySQL 8's is 64 MiB).
pub const ASSUMED_BACKEND_PACKET: usize = 16 << 20;

/// The protocol's ceiling for `max_allowed_packet` (1 GiB).
pub const MAX_BACKEND_PACKET: usize = 1 << 30;

/// What the gateway knows of the backend's `max_allowed_packet`.
#[derive(Debug, Default)]
pub struct BackendPacket {
    /// 0 until learned.
    learned: AtomicUsize,
    /// [`BackendPacket::request_limit`] as the header every response
    /// carries, made again only when the limit changes: formatting it was
    /// an allocation per request.
    limit_header: Mutex<Option<(usize, HeaderValue)>>,
    /// Held by the one request asking the backend: until the value is
    /// known every request asks, each over a pooled connection that no
    /// backend share (`shares`) bounds — 160 at a fresh gateway opened
    /// 160 connections at once, past MariaDB's `max_connections` (its 1040
    /// to every credential) and its socket's backlog (2013 for a
    /// statement). The others wait for its answer.
    asking: tokio::sync::Mutex<()>,
}

impl BackendPacket {
    /// The value, if the backend has told it.
    pub fn get(&self) -> Option<usize> {
        match self.learned.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    /// Records a value the backend reported (bounded to what the protocol
    /// allows).
    pub fn set(&self, value: u64) {
        let value = usize::try_from(value)
            .unwrap_or(MAX_BACKEND_PACKET)
            .clamp(1024, MAX_BACKEND_PACKET);
        self.learned.store(value, Ordering::Relaxed);
    }

    /// The value, asked of the backend over `pool` the first time (within
    /// `within`), by one request at a time. `None` if it does not answer
    /// (nothing can be run then anyway).
    pub async fn learn(&self, pool: &mysql_async::Pool, within: Duration) -> Option<usize> {
        if let Some(known) = self.get() {
            return Some(known);
        }
        let ask = async {
            let _asking = self.asking.lock().await;
            if let Some(known) = self.get() {
                return Some(known);
            }
            let mut conn = pool.get_conn().await.ok()?;
            self.query(&mut conn).await
        };
        tokio::time::timeout(within, ask).await.ok().flatten()
    }

    /// Asks the backend over `conn` and records the answer.
    pub async fn query(&self, conn: &mut mysql_async::Conn) -> Option<usize> {
        let value: Option<u64> = conn
            .query_first("SELECT @@max_allowed_packet")
            .await
            .ok()
            .flatten();
        self.set(value?);
        self.get()
    }

    /// The largest request body the gateway takes: `configured`, or with
    /// 0 (the default) the backend's `max_allowed_packet` plus headroom.
    pub fn request_limit(&self, configured: usize) -> usize {
        if configured != 0 {
            return configured;
        }
        self.get().unwrap_or(ASSUMED_BACKEND_PACKET) + REQUEST_HEADROOM
    }

    /// [`BackendPacket::request_limit`] as a header value (a clone of the
    /// one made for that limit: no allocation).
    pub fn request_limit_header(&self, configured: usize) -> HeaderValue {
        let limit = self.request_limit(configured);
        let mut cached = self
            .limit_header
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*cached {
            Some((made_for, value)) if *made_for == limit => value.clone(),
            _ => {
                let value = HeaderValue::from(limit);
                *cached = Some((limit, value.clone()));
                value
            }
        }
    }

    /// ER_NET_PACKET_TOO_LARGE for a statement of `len` bytes (with its
    /// bind variables in place) that the backend would refuse; `None` if
    /// it fits, or while the limit is unknown (mysql_async still checks).
    pub fn check_statement(&self, len: usize) -> Option<MysqlError> {
        let max = self.get()?;
        // The command byte, then the text: one logical packet.
        let packet = len.saturating_add(1);
        (packet > max).then(|| too_large(packet, max))
    }
}

/// The server's own error for a packet over its `max_allowed_packet`,
/// saying which limit and that nothing ran.
pub fn too_large(packet: usize, max: usize) -> MysqlError {
    MysqlError {
        code: 1153,
        state: "08S01".into(),
        message: format!(
            "Got a packet bigger than 'max_allowed_packet' bytes: the statement with its parameters in place is {packet} bytes, more than the backend's max_allowed_packet ({max} bytes); it was not run"
        ).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_backend_unless_configured() {
        let b = BackendPacket::default();
        assert_eq!(b.check_statement(1 << 30), None, "unknown: not judged");
        assert_eq!(b.request_limit(0), (16 << 20) + REQUEST_HEADROOM);
        assert_eq!(b.request_limit(4096), 4096);
        b.set(64 << 20);
        assert_eq!(b.request_limit(0), (64 << 20) + REQUEST_HEADROOM);
        assert_eq!(b.check_statement((64 << 20) - 1), None);
        let e = b.check_statement(64 << 20).unwrap();
        assert_eq!((e.code, e.state.as_str()), (1153, "08S01"));
        assert!(e.message.contains("max_allowed_packet (67108864 bytes)"));
        b.set(u64::MAX);
        assert_eq!(b.get(), Some(MAX_BACKEND_PACKET));
        b.set(0);
        assert_eq!(b.get(), Some(1024));
    }

    /// The header follows the limit, also when it changes (learned, or
    /// configured), and reads as the number.
    #[test]
    fn the_limit_header_follows_the_limit() {
        let b = BackendPacket::default();
        let header = |configured| b.request_limit_header(configured);
        let assumed = ((16 << 20) + REQUEST_HEADROOM).to_string();
        assert_eq!(header(0), assumed.as_str());
        assert_eq!(header(0), assumed.as_str(), "taken from the cache");
        assert_eq!(header(4096), "4096");
        b.set(64 << 20);
        let learned = ((64 << 20) + REQUEST_HEADROOM).to_string();
        assert_eq!(header(0), learned.as_str());
        assert_eq!(header(4096), "4096");
    }
}
