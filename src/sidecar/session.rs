//! A client connection's psdb session, as the sidecar sees it: the opaque
//! cookie it echoes back, plus the flags it reads for MySQL status.

use crate::client::RawSession;
use crate::mysql::StatusFlags;

#[derive(Default)]
pub struct Session {
    /// `None` until the first response: the server creates the session
    /// on first use, so connecting costs no round trip.
    cookie: Option<RawSession>,
    pub in_transaction: bool,
    pub autocommit: bool,
    pub warnings: u16,
}

impl Session {
    pub fn new() -> Self {
        Self {
            autocommit: true,
            ..Self::default()
        }
    }

    pub fn cookie(&self) -> Option<&RawSession> {
        self.cookie.as_ref()
    }

    /// Takes the cookie (to close the session upstream) and starts over.
    pub fn reset(&mut self) -> Option<RawSession> {
        std::mem::replace(self, Self::new()).cookie
    }

    /// Replaces the cookie with the one a response returned.
    pub fn update(&mut self, cookie: RawSession) {
        if let Some(v) = &cookie.view().vitess_session {
            self.in_transaction = v.in_transaction;
            self.autocommit = v.autocommit;
            self.warnings = u16::try_from(v.warnings.len()).unwrap_or(u16::MAX);
        }
        self.cookie = Some(cookie);
    }

    /// Server status flags for OK/EOF packets.
    pub fn status(&self) -> StatusFlags {
        let mut s = StatusFlags::empty();
        if self.autocommit {
            s |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if self.in_transaction {
            s |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        s
    }
}
