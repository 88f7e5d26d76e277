//! A client connection's psdb session, as the sidecar sees it: the opaque
//! cookie it echoes back, plus the flags it reads for MySQL status.

use std::time::Duration;

use bytes::Bytes;
use prost::Message;

use crate::api::pb;
use crate::client::RawSession;
use crate::mysql::StatusFlags;
use crate::mysql::reader::Reader;
use crate::mysql::response::session_track_schema;
use crate::translate::sql_text::{Charset, Dialect};
use crate::translate::well_formed::Strings;

#[derive(Default)]
pub struct Session {
    /// `None` until the first response: the server creates the session
    /// on first use, so connecting costs no round trip. Before that it
    /// may hold a request for a new session ([`session_request`]: a
    /// default database, how to count affected rows).
    cookie: Option<RawSession>,
    /// The cookie is only such a request: nothing upstream to close.
    requested: bool,
    /// What every new session of this connection asks for.
    options: NewSession,
    /// The default database asked for in the first request, until its
    /// response says whether the gateway selected it.
    asked_target: Option<String>,
    /// The gateway did not select the asked-for database.
    target_refused: bool,
    pub in_transaction: bool,
    pub autocommit: bool,
    pub warnings: u16,
    /// The default database moved (to this), not yet told to the client
    /// (session-state tracking).
    moved_to: Option<String>,
    /// The request under way selects a database (`USE`, `COM_INIT_DB`):
    /// the server reports the schema after it even when it is the one the
    /// session was in.
    selecting: bool,
    /// The session variables the last response reported.
    reported: Reported,
    /// The system variables the last request set that the session tracks
    /// (encoded session-state entries, from the gateway's
    /// `session_state_changes`), not yet told to the client.
    variables_set: Bytes,
}

/// What a connection asks of each new upstream session, in its first
/// request (only of a gateway that takes such requests: see
/// `Shared::upstream_targets`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewSession {
    /// The client's `CLIENT_FOUND_ROWS`: affected rows of an UPDATE count
    /// the rows matched, not only those changed. `None`: the server's
    /// default (a psdb server that takes no requests).
    pub found_rows: Option<bool>,
    /// The client reads session-state tracking (`CLIENT_SESSION_TRACK`):
    /// the gateway reports the system variables a statement sets.
    pub tracks_state: bool,
    /// The client's connection-attribute block as it sent it (empty:
    /// none), for the gateway to give the session's backend connections
    /// (`ExecuteOptions.connect_attrs`), and the collation its handshake
    /// (or `COM_CHANGE_USER`) named, in which the server reads it.
    pub connect_attrs: Bytes,
    pub connect_attrs_collation: u16,
}

impl Session {
    pub fn new(options: NewSession) -> Self {
        let request = options
            .found_rows
            .is_some()
            .then(|| session_request(None, &options));
        Self {
            autocommit: true,
            requested: request.is_some(),
            cookie: request,
            options,
            ..Self::default()
        }
    }

    /// A session whose first request asks the gateway to create it in
    /// `database` (`target_string`), so selecting the database the client
    /// named at login costs no request of its own. The gateway reports
    /// the database back in the session it returns, or leaves it out if
    /// it could not select it.
    pub fn in_database(database: &str, options: NewSession) -> Self {
        let request = session_request(Some(database), &options);
        let mut s = Self::new(options);
        s.cookie = Some(request);
        s.requested = true;
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
        let fresh = Self::new(self.options.clone());
        let old = std::mem::replace(self, fresh);
        old.cookie.filter(|_| !old.requested)
    }

    /// Replaces the cookie with the one a response returned.
    pub fn update(&mut self, cookie: RawSession) {
        let before = self.database();
        self.reported = Reported::of(&cookie);
        if let Some(v) = &cookie.view().vitess_session {
            self.in_transaction = v.in_transaction;
            self.autocommit = v.autocommit;
            self.warnings = u16::try_from(v.warnings.len()).unwrap_or(u16::MAX);
            self.variables_set = v.session_state_changes.clone();
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
        self.requested = false;
        // A refused login database is an error, not a move. (A psdb
        // server that reports no target reports no moves.)
        let after = self.database();
        let selected = std::mem::take(&mut self.selecting);
        if let Some(db) = &after
            && (after != before || selected)
            && !self.target_refused
        {
            self.moved_to = Some(db.clone());
        }
    }

    /// The next request selects a database: its answer reports the
    /// schema, moved or not, as the server's session tracking does.
    pub fn selects_database(&mut self) {
        self.selecting = true;
    }

    /// The session-state changes to report on the next OK: the tracked
    /// system variables the statement set, then the default database if
    /// it moved since the last one (the server's order).
    pub fn take_state_changes(&mut self) -> Vec<u8> {
        // A request that got no session back (a transport error) selected
        // nothing.
        self.selecting = false;
        let mut changes = std::mem::take(&mut self.variables_set).to_vec();
        if let Some(db) = self.moved_to.take() {
            let at = variables_end(&changes);
            changes.splice(at..at, session_track_schema(db.as_bytes()));
        }
        changes
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
        if !self.reported.dialect.backslash_escapes {
            s |= StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES;
        }
        s
    }

    /// How long the backend lets this session idle (`wait_timeout`, as
    /// the gateway last reported it): the sidecar closes an idle client
    /// after it, as the server closes its connection.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.reported.idle_timeout
    }

    /// How the backend reads this session's SQL: the character set and
    /// `sql_mode` the gateway reports in the session's system variables,
    /// or `login` (the handshake's character set) until it has.
    pub fn dialect(&self, login: Charset) -> Dialect {
        let mut dialect = self.reported.dialect;
        if !self.reported.charset {
            dialect.charset = login;
        }
        dialect
    }

    /// How the backend checks this session's strings: by its reported
    /// `character_set_client`, else by the login's (`login`).
    pub fn strings(&self, login: Strings) -> Strings {
        self.reported.strings.unwrap_or(login)
    }
}

/// Where the system-variable entries at the start of encoded session-state
/// changes end: the schema goes there, before a state change, as the
/// server orders its trackers. Entries that cannot be read end it.
fn variables_end(changes: &[u8]) -> usize {
    let mut entries = Reader::new(changes);
    let mut end = 0;
    // An entry is a kind byte (0: system variable) and its length-encoded
    // data.
    while entries.u8() == Some(0) && entries.lenenc_bytes().is_some() {
        end = changes.len() - entries.remaining();
    }
    end
}

/// The session variables the gateway reports (`system_variables`), read
/// once per response rather than per packet.
#[derive(Clone, Copy, Debug, Default)]
struct Reported {
    dialect: Dialect,
    /// `character_set_client` was among them.
    charset: bool,
    /// How strings of that character set are checked.
    strings: Option<Strings>,
    idle_timeout: Option<Duration>,
}

impl Reported {
    fn of(cookie: &RawSession) -> Self {
        let Some(variables) = cookie
            .view()
            .vitess_session
            .as_ref()
            .map(|v| &v.system_variables)
        else {
            return Self::default();
        };
        let variable = |name: &str| variables.get(name).map(String::as_str);
        Self {
            dialect: Dialect::from_variables(
                variable("character_set_client"),
                variable("sql_mode"),
            ),
            charset: variable("character_set_client").is_some(),
            strings: variable("character_set_client").map(Strings::from_name),
            idle_timeout: variable("wait_timeout")
                .and_then(|v| v.parse::<u64>().ok())
                .map(|seconds| Duration::from_secs(seconds.max(1))),
        }
    }
}

/// A session naming no session (no `SessionUUID`, no signature), only
/// the database to create one in: the gateway treats it as a request for
/// a new session, like no session at all.
pub fn target_request(database: &str) -> RawSession {
    session_request(Some(database), &NewSession::default())
}

/// A request for a new session: its database (`target_string`) and
/// options (`options.client_found_rows`, as a Vitess session carries the
/// client's flag; the client's connection attributes).
pub fn session_request(database: Option<&str>, new: &NewSession) -> RawSession {
    let options = new
        .found_rows
        .map(|found_rows| pb::vitess::query::v22::ExecuteOptions {
            client_found_rows: found_rows,
            session_state_tracking: new.tracks_state,
            connect_attrs: new.connect_attrs.clone(),
            connect_attrs_collation: u32::from(new.connect_attrs_collation),
            ..Default::default()
        });
    let session = pb::Session {
        signature: Bytes::new(),
        vitess_session: Some(pb::VitessSession {
            target_string: database.unwrap_or_default().to_string(),
            options,
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
    fn the_schema_goes_between_the_variables_and_a_state_change() {
        use crate::mysql::response::{session_track_state_change, session_track_system_variable};
        let var = session_track_system_variable(b"time_zone", b"+01:00");
        let long = session_track_system_variable(b"sql_mode", &[b'A'; 300]);
        let mut changes = var.clone();
        changes.extend(&long);
        assert_eq!(variables_end(&changes), changes.len());
        changes.extend(session_track_state_change());
        assert_eq!(variables_end(&changes), var.len() + long.len());
        assert_eq!(variables_end(&[]), 0);
        // Cut short or garbage: nothing is skipped past what is readable.
        assert_eq!(variables_end(&var[..var.len() - 1]), 0);
        assert_eq!(variables_end(&[0, 0xff]), 0);
    }

    #[test]
    fn the_database_follows_the_gateway_after_the_login_one() {
        let mut s = Session::in_database("app", NewSession::default());
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

    fn with_variables(variables: &[(&str, &str)]) -> RawSession {
        let session = pb::Session {
            signature: Bytes::from_static(b"signed"),
            vitess_session: Some(pb::VitessSession {
                autocommit: true,
                system_variables: variables
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }),
        };
        RawSession::from_bytes(session.encode_to_vec().into()).unwrap()
    }

    #[test]
    fn reported_variables_decide_flags_scanning_and_idle_time() {
        let mut s = Session::new(NewSession::default());
        assert_eq!(
            s.dialect(Charset::Gbk).charset,
            Charset::Gbk,
            "login's until told"
        );
        assert!(
            !s.status()
                .contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES)
        );
        s.update(with_variables(&[
            ("sql_mode", "'STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'"),
            ("character_set_client", "'big5'"),
            ("wait_timeout", "2"),
        ]));
        assert!(
            s.status()
                .contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES)
        );
        let d = s.dialect(Charset::Gbk);
        assert_eq!((d.charset, d.backslash_escapes), (Charset::Big5, false));
        assert_eq!(s.idle_timeout(), Some(Duration::from_secs(2)));
        s.update(with_variables(&[]));
        assert!(
            !s.status()
                .contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES)
        );
        assert_eq!(s.idle_timeout(), None);
    }

    #[test]
    fn an_empty_first_answer_refuses_the_login_database() {
        let mut s = Session::in_database("nope", NewSession::default());
        s.update(answer(""));
        assert!(s.target_refused());
        // Nothing upstream yet to close for a request that only asked.
        assert!(
            Session::in_database("app", NewSession::default())
                .reset()
                .is_none()
        );
        let asking = NewSession {
            found_rows: Some(false),
            ..NewSession::default()
        };
        assert!(Session::new(asking.clone()).reset().is_none());
        let mut s = Session::new(asking);
        s.update(answer(""));
        assert!(s.reset().is_some(), "a real session is closed");
    }

    #[test]
    fn every_new_session_asks_for_the_clients_attributes() {
        let options = NewSession {
            found_rows: Some(false),
            connect_attrs: Bytes::from_static(b"\x01k\x04caf\xe9"),
            connect_attrs_collation: 8,
            ..NewSession::default()
        };
        let asked = |s: &Session| {
            let options = s
                .cookie()
                .unwrap()
                .view()
                .vitess_session
                .clone()
                .unwrap()
                .options;
            let options = options.unwrap();
            (options.connect_attrs, options.connect_attrs_collation)
        };
        let want = (options.connect_attrs.clone(), 8);
        let mut s = Session::in_database("app", options.clone());
        assert_eq!(asked(&s), want);
        s.update(answer("app"));
        // A reset's new session asks again; the gateway's cookies never
        // carry them.
        assert!(s.reset().is_some());
        assert_eq!(asked(&s), want);
        assert_eq!(asked(&Session::new(options)), want);
    }
}
