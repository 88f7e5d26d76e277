//! A client connection's psdb session, as the sidecar sees it: the opaque
//! cookie it echoes back, plus the flags it reads for MySQL status.

use bytes::Bytes;
use prost::Message;

use crate::api::pb;
use crate::client::RawSession;
use crate::mysql::StatusFlags;
use crate::translate::sql_text::{Charset, Dialect};

#[derive(Default)]
pub struct Session {
    /// `None` until the first response: the server creates the session
    /// on first use, so connecting costs no round trip. Before that it
    /// may hold a request for a default database (see [`Session::in`]).
    cookie: Option<RawSession>,
    /// The default database asked for in the first request, until its
    /// response says whether the gateway selected it.
    asked_target: Option<String>,
    /// The gateway did not select the asked-for database.
    target_refused: bool,
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

    /// A session whose first request asks the gateway to create it in
    /// `database` (`target_string`), so selecting the database the client
    /// named at login costs no request of its own. The gateway reports
    /// the database back in the session it returns, or leaves it out if
    /// it could not select it.
    pub fn in_database(database: &str) -> Self {
        let mut s = Self::new();
        s.cookie = Some(target_request(database));
        s.asked_target = Some(database.to_string());
        s
    }

    pub fn cookie(&self) -> Option<&RawSession> {
        self.cookie.as_ref()
    }

    /// The default database: the one asked for at login until the gateway
    /// has answered, then the one its session reports (`None` if it
    /// reports none, as a psdb server without targets does).
    pub fn database(&self) -> Option<String> {
        if let Some(asked) = &self.asked_target {
            return Some(asked.clone());
        }
        let target = &self
            .cookie
            .as_ref()?
            .view()
            .vitess_session
            .as_ref()?
            .target_string;
        (!target.is_empty()).then(|| target.clone())
    }

    /// Takes the cookie (to close the session upstream) and starts over.
    /// A request for a database made no session yet: nothing to close.
    pub fn reset(&mut self) -> Option<RawSession> {
        let was_asking = self.asked_target.is_some();
        let cookie = std::mem::replace(self, Self::new()).cookie;
        cookie.filter(|_| !was_asking)
    }

    /// Replaces the cookie with the one a response returned.
    pub fn update(&mut self, cookie: RawSession) {
        if let Some(v) = &cookie.view().vitess_session {
            self.in_transaction = v.in_transaction;
            self.autocommit = v.autocommit;
            self.warnings = u16::try_from(v.warnings.len()).unwrap_or(u16::MAX);
            // The gateway answers a target it could not select with none.
            // Any other name is where the first statement moved the
            // session (`USE`), as a Vitess session's target follows it.
            // (A first statement that drops the login database also
            // leaves none, and ends the connection after its answer.)
            if self.asked_target.take().is_some() {
                self.target_refused = v.target_string.is_empty();
            }
        }
        self.cookie = Some(cookie);
    }

    /// Whether the database asked for at login turned out not to be
    /// selected (the response to the first request said so). The client
    /// has then had the gateway's error for its command, and the
    /// connection ends, as one to a MySQL server with an unknown default
    /// database never opens.
    pub fn target_refused(&self) -> bool {
        self.target_refused
    }

    /// Server status flags for OK/EOF packets. Drivers read
    /// `NO_BACKSLASH_ESCAPES` to choose how they escape strings (quote
    /// doubling instead of backslashes): a flag missing here makes their
    /// escaping wrong for the server, which is an injection.
    pub fn status(&self) -> StatusFlags {
        let mut s = StatusFlags::empty();
        if self.autocommit {
            s |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if self.in_transaction {
            s |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        if !self.dialect(Charset::AsciiSafe).backslash_escapes {
            s |= StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES;
        }
        s
    }

    /// How the backend reads this session's SQL: the character set and
    /// `sql_mode` the gateway reports in the session's system variables,
    /// or `login` (the handshake's character set) until it has.
    pub fn dialect(&self, login: Charset) -> Dialect {
        let variables = self
            .cookie
            .as_ref()
            .and_then(|c| c.view().vitess_session.as_ref())
            .map(|v| &v.system_variables);
        let variable = |name: &str| variables.and_then(|v| v.get(name)).map(String::as_str);
        let mut dialect =
            Dialect::from_variables(variable("character_set_client"), variable("sql_mode"));
        if variable("character_set_client").is_none() {
            dialect.charset = login;
        }
        dialect
    }
}

/// A session naming no session (no `SessionUUID`, no signature), only
/// the database to create one in: the gateway treats it as a request for
/// a new session, like no session at all.
pub fn target_request(database: &str) -> RawSession {
    let session = pb::Session {
        signature: Bytes::new(),
        vitess_session: Some(pb::VitessSession {
            target_string: database.to_string(),
            autocommit: true,
            ..Default::default()
        }),
    };
    RawSession::from_bytes(session.encode_to_vec().into()).expect("a valid Session")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(target: &str) -> RawSession {
        let session = pb::Session {
            signature: Bytes::from_static(b"signed"),
            vitess_session: Some(pb::VitessSession {
                target_string: target.into(),
                autocommit: true,
                ..Default::default()
            }),
        };
        RawSession::from_bytes(session.encode_to_vec().into()).unwrap()
    }

    #[test]
    fn the_database_follows_the_gateway_after_the_login_one() {
        let mut s = Session::in_database("app");
        assert_eq!(s.database().as_deref(), Some("app"));
        // The first statement was `USE other`: no refusal.
        s.update(answer("other"));
        assert!(!s.target_refused());
        assert_eq!(s.database().as_deref(), Some("other"));
        // A later empty target (database dropped) is no refusal either.
        s.update(answer(""));
        assert!(!s.target_refused());
        assert_eq!(s.database(), None);
    }

    #[test]
    fn an_empty_first_answer_refuses_the_login_database() {
        let mut s = Session::in_database("nope");
        s.update(answer(""));
        assert!(s.target_refused());
        // Nothing upstream yet to close for a request that only asked.
        assert!(Session::in_database("app").reset().is_none());
    }
}
