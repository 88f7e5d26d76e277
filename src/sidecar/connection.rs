//! One client connection's command phase on its socket: reads each
//! command, lets `command::CommandPhase` decide the answer, and makes the
//! upstream calls it names on the shared upstream connection, writing
//! rows back while they stream in. Cancellation (a hang-up, `KILL`, the
//! drain) and the session's idle timeout live here; every protocol rule
//! lives in the core.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::FutureExt;
use tracing::Instrument;

use crate::api::row_view::RowView;
use crate::client::{CallError, Client, ExecuteStream, RawSession};
use crate::mysql::MysqlError;
use crate::mysql::auth::{Authenticated, Handshake};
use crate::mysql::packet::{Packet, Packets};
use crate::mysql::{CapabilityFlags, response};
use crate::telemetry::TraceId;
use crate::translate::connection_status::ConnectionStatus;
use crate::translate::errors::from_rpc_message;
use crate::translate::statement;
use crate::translate::statistics;

use super::Shared;
use super::command::{self, CommandPhase, Execute, FetchStep, Flow, Next, Step};
use super::errors;
use super::io::{Framed, IoError};
use super::login;
use super::registry::{KillOutcome, Registration};
use super::session::NewSession;

/// How long a closing connection waits for the gateway to close its
/// session.
const CLOSE_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Packets are written to the client once this much is buffered.
const WRITE_CHUNK: usize = 64 * 1024;

pub struct Connection {
    io: Framed,
    shared: Arc<Shared>,
    registration: Registration,
    handshake: Handshake,
    /// The gateway credential of the logged-in account: every request of
    /// its sessions carries it (a session is never used under another).
    upstream: Client,
    /// Everything the connection remembers between commands, and every
    /// answer's rules.
    core: CommandPhase<ExecuteStream>,
    /// The login's database, taken as known without a request (as
    /// remembered: with its credential): forgotten if its first request
    /// finds it gone.
    unchecked_database: Option<(String, String)>,
}

impl Connection {
    pub fn new(
        io: Framed,
        shared: Arc<Shared>,
        registration: Registration,
        handshake: Handshake,
        login: &Authenticated,
    ) -> Self {
        // Only a gateway that takes session requests (ours) is asked.
        let new_session = NewSession {
            found_rows: shared.upstream_targets.load(Ordering::Relaxed).then(|| {
                login
                    .capabilities
                    .contains(CapabilityFlags::CLIENT_FOUND_ROWS)
            }),
            tracks_state: login
                .capabilities
                .contains(CapabilityFlags::CLIENT_SESSION_TRACK),
            connect_attrs: login.attrs.clone().into(),
            connect_attrs_collation: login.charset,
        };
        let mariadb =
            (shared.auth.read().expect("not poisoned").server_version).contains("MariaDB");
        let budget = shared.memory.connection(shared.memory_per_connection);
        let mut io = io;
        io.charge_to(&budget);
        let core = CommandPhase::new(
            command::Login::new(
                login,
                mariadb,
                shared.max_packet,
                new_session,
                shared.client.is_myquic_gateway(),
            )
            .with_local_infile(shared.local_infile),
        )
        .with_budget(budget)
        .with_connection_status(match io.tls() {
            Some(negotiated) => {
                ConnectionStatus::tls(negotiated.clone(), shared.offered_tls.clone())
            }
            None => ConnectionStatus::plain(),
        });
        let upstream = shared.upstreams.for_user(&login.user).clone();
        Self {
            io,
            shared,
            registration,
            handshake,
            upstream,
            core,
            unchecked_database: None,
        }
    }

    /// Serves commands until the client quits, breaks the protocol, or
    /// the session cannot go on. Closes the upstream session at the end.
    pub async fn run(mut self) {
        loop {
            let handle = self.registration.handle.clone();
            let drain_may_close = self.core.drain_may_close();
            if handle.is_draining() && drain_may_close {
                break;
            }
            // Idle past the session's wait_timeout: the server would close
            // the connection (MariaDB without a word); so does the sidecar.
            let idle = self.core.session().idle_timeout();
            let read = async {
                match idle {
                    Some(limit) => tokio::time::timeout(limit, self.io.read()).await.ok(),
                    None => Some(self.io.read().await),
                }
            };
            let packet = tokio::select! {
                p = read => match p {
                    Some(p) => p,
                    None => {
                        tracing::debug!(?idle, "idle past wait_timeout: closing");
                        break;
                    }
                },
                () = handle.kill.notified() => {
                    if handle.is_cut() {
                        // Unprompted, as mysqld does at shutdown: the
                        // client reads it in place of its next answer.
                        let mut out = Packets::default();
                        response::err(&mut out, &errors::shutdown_in_progress());
                        let _ = self.io.write(&mut out).await;
                        let _ = self.io.flush().await;
                    }
                    break;
                }
                () = handle.drain.notified(), if drain_may_close => break,
            };
            let packet = match packet {
                Ok(p) => p,
                Err(IoError::Packet(e)) => {
                    let mut out = Packets::reply_to(0);
                    response::err(&mut out, &errors::packet_too_large(&e));
                    let _ = self.io.write(&mut out).await;
                    let _ = self.io.flush().await;
                    break;
                }
                // A server that cannot allocate a packet's buffer answers
                // 1041 and ends the connection (the rest of the packet
                // cannot be read past).
                Err(IoError::OverBudget(e)) => {
                    let mut out = Packets::reply_to(0);
                    response::err(&mut out, &e.process_refused());
                    let _ = self.io.write(&mut out).await;
                    let _ = self.io.flush().await;
                    break;
                }
                Err(_) => break,
            };
            let seq = packet.seq;
            let mut out = Packets::reply_to(seq);
            // One trace id per command, sent with each of its requests
            // and logged by the gateway, when our log shows commands (debug):
            // otherwise the span, its id and the header are work per query
            // that nobody reads.
            let span = tracing::debug_span!("command", trace_id = tracing::field::Empty);
            let command = self.dispatch(packet, &mut out);
            // No input may panic; if a bug does, the connection must still
            // end the way every other end does: its session closed below,
            // its transaction rolled back at once rather than holding locks
            // until the gateway's idle timeout.
            let outcome = if span.is_disabled() {
                AssertUnwindSafe(command).catch_unwind().await
            } else {
                let trace = TraceId::random();
                span.record("trace_id", tracing::field::display(trace));
                AssertUnwindSafe(trace.scope(command.instrument(span)))
                    .catch_unwind()
                    .await
            };
            let next = match outcome {
                Ok(next) => next,
                Err(_) => {
                    tracing::error!("a command panicked; closing the connection");
                    out = Packets::reply_to(seq);
                    response::err(&mut out, &errors::internal_failure());
                    Next::Close
                }
            };
            if self.io.write(&mut out).await.is_err() || self.io.flush().await.is_err() {
                break;
            }
            let refused = self.core.session().target_refused();
            if refused && let Some((credential, db)) = self.unchecked_database.take() {
                // It was selected once, and is gone now (or this
                // credential lost its rights to it).
                self.shared.known.forget_database(&credential, &db);
            }
            if self.core.take_account_refused() {
                // The backend account was dropped, or its password
                // changed, since it last logged in: the next login under
                // the credential is checked again.
                let credential = self.upstream.credential().username();
                self.shared.known.forget(credential);
            }
            if next == Next::Close || refused || self.registration.handle.is_killed() {
                break;
            }
        }
        // Close the client's socket first, then the session (rolling back
        // an open transaction), awaited: a draining sidecar must not exit
        // before the gateway has heard it.
        drop(self.io);
        if let Some(cookie) = self.core.session_mut().reset() {
            let client = &self.upstream;
            let close = async {
                // A statement just cancelled may still hold the session at
                // the gateway (it answers `aborted` until the statement is
                // killed): try again shortly.
                while let Err(CallError::Api(e)) = client.close_session(&cookie).await
                    && e.code == crate::api::Code::Aborted
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            let _ = tokio::time::timeout(CLOSE_SESSION_TIMEOUT, close).await;
        }
    }

    /// Ends an upstream session in the background (rolling back an open
    /// transaction); the client is not kept waiting for it.
    fn close_in_background(&self, cookie: Option<RawSession>) {
        if let Some(cookie) = cookie {
            let client = self.upstream.clone();
            tokio::spawn(async move {
                let _ = client.close_session(&cookie).await;
            });
        }
    }

    /// One command: the core answers it, or names the upstream call it
    /// needs, made here.
    async fn dispatch(&mut self, packet: Packet, out: &mut Packets) -> Next {
        // Known from any answer; a connection made before the first one
        // learns it here.
        self.core
            .set_marked_ends(self.shared.client.is_myquic_gateway());
        (self.core).set_request_limit(self.shared.client.max_request_bytes());
        let step = self.core.command(packet, out);
        if step.uses_session() {
            self.read_cursors_ahead().await;
        }
        match step {
            Step::Answered(next) => next,
            Step::Execute(statement) => self.execute(statement, out).await,
            Step::KillOrExecute { id, query_only, .. } if id == u64::from(self.registration.id) => {
                // A statement that kills its own connection's query, or
                // the connection, is itself interrupted: the server
                // answers it with an ERR (1317, or 1927 and a close), as
                // it answers a statement killed from elsewhere.
                self.registration.kill(id, query_only);
                let error = if query_only {
                    errors::interrupted()
                } else {
                    errors::connection_killed()
                };
                response::err(out, &error);
                Next::Continue
            }
            Step::KillOrExecute {
                id,
                query_only,
                statement,
            } => match self.kill_local(id, query_only, out) {
                Some(next) => next,
                // Not ours: a backend thread id (CONNECTION_ID()), which
                // the backend itself handles.
                None => self.execute(statement, out).await,
            },
            Step::Kill { id } => self
                .kill_local(id, false, out)
                .unwrap_or_else(|| self.core.no_such_thread(id, out)),
            Step::Prepare(sql) => {
                let cookie = self.core.session().cookie();
                match self.upstream.prepare(cookie, sql.clone()).await {
                    Ok(reply) => self.core.prepared(sql, reply, out),
                    Err(e) => self.core.call_failed(&e, false, out),
                }
            }
            Step::FieldList(sql) => {
                let cookie = self.core.session().cookie();
                match self.upstream.execute(cookie, sql, HashMap::new()).await {
                    Ok(reply) => self.core.field_list_answered(reply, out),
                    Err(e) => self.core.call_failed(&e, false, out),
                }
            }
            Step::Reset {
                close,
                database,
                collation,
            } => {
                self.close_in_background(close.map(|cookie| *cookie));
                if let Some(db) = database {
                    self.start_in(&db).await;
                }
                self.set_collation(collation).await;
                self.core.ok(out)
            }
            Step::ChangeUser { seq, payload } => {
                let changed =
                    login::change_user(&mut self.io, &mut self.handshake, seq, payload, out).await;
                let Ok(login) = changed else {
                    return Next::Close;
                };
                // KILL ownership follows the connection's new user.
                self.registration.logged_in(&login.user);
                let old = self
                    .core
                    .user_changed(login.charset, login.attrs.clone().into());
                // The old session under its own credential; the new user's
                // sessions under the new user's (a server's change of user
                // resets the session; so does the new credential's).
                self.close_in_background(old);
                self.upstream = self.shared.upstreams.for_user(&login.user).clone();
                if let Some(db) = login.database {
                    self.start_in_named(&db, login.charset).await;
                }
                self.set_collation(login.charset).await;
                Next::Continue
            }
            Step::Fetch { id, rows } => self.fetch(id, rows, out).await,
            Step::Statistics => {
                let upstream = self.upstream.clone();
                match server_statistics(&upstream, self.core.is_mariadb()).await {
                    Ok(line) => out.push_payload(line.as_bytes()),
                    Err(e) => response::err(out, &e),
                }
                Next::Continue
            }
        }
    }

    /// Checks a login with the gateway before its OK, unless it is known
    /// to succeed: `Err` refuses it as a server does — the backend's 1045
    /// (its account does not exist, yet, or takes another password), or
    /// its 1049 or 1044 for the default database `db`. A login the
    /// sidecar can vouch for (its credential's backend account has logged
    /// in, and the gateway has selected `db` for it before) costs nothing
    /// now: `db` rides on the first request. Another costs one request,
    /// whose session the connection goes on with.
    pub async fn check_login(&mut self, db: Option<&str>) -> Result<(), MysqlError> {
        let credential = self.upstream.credential().username().to_string();
        if let Some(db) = db {
            if !self.shared.upstream_targets.load(Ordering::Relaxed) {
                // A psdb server that takes no target: `USE`, now.
                self.use_database(db).await;
                let used = self.core.take_owed_error().map_or(Ok(()), Err);
                self.learn_login(&credential, None, used.as_ref().err());
                return used;
            }
            self.core.start_in(db);
        }
        if self.shared.known.knows(&credential, db) {
            self.unchecked_database = db.map(|db| (credential, db.to_string()));
            return Ok(());
        }
        if db.is_none() && self.upstream.transport().is_none() {
            // No connection to the gateway (down, or not reached yet): a
            // login without a database stays local rather than wait for
            // one; its first command gets the connection's error, and the
            // next login under the credential is checked.
            return Ok(());
        }
        let mut reply = self
            .upstream
            .execute(self.core.session().cookie(), "DO 0", HashMap::new())
            .await
            .map_err(|e| errors::from_call(&e, false))?;
        self.core.update_session(&mut reply);
        if self.core.session().target_refused() || reply.message.error.is_some() {
            // The gateway made a session anyway: it must not wait for its
            // idle timeout.
            let cookie = self.core.session_mut().reset();
            self.close_in_background(cookie);
            let e = reply.message.error.map_or_else(
                || errors::unknown_database(db.unwrap_or_default().as_bytes()),
                |e| from_rpc_message(&e.message),
            );
            self.learn_login(&credential, None, Some(&e));
            return Err(e);
        }
        self.learn_login(&credential, db, None);
        Ok(())
    }

    /// What a login's request under `credential` showed: its backend
    /// account logs in (in `db`), unless the backend refused it (1045),
    /// which forgets the credential.
    fn learn_login(&self, credential: &str, db: Option<&str>, refused: Option<&MysqlError>) {
        match refused {
            None => self.shared.known.learned(credential, db),
            Some(e) if e.code == errors::ACCESS_DENIED => self.shared.known.forget(credential),
            Some(_) => {}
        }
    }

    /// Sends the login's last packets, or the refusal of its database in
    /// place of its OK; `None` when the connection must end.
    pub async fn finish_login(
        &mut self,
        ok: Packets,
        database: Result<(), MysqlError>,
    ) -> Option<()> {
        login::finish(&mut self.io, ok, database).await
    }

    /// Makes `db`, which the client named at login, the default database.
    /// The login itself stays local. A gateway that takes a target
    /// database with the first request gets it there, at no cost;
    /// otherwise a `USE` goes first. Either way a failure (unknown
    /// database) is the answer to the client's first command, and ends
    /// the connection.
    async fn start_in(&mut self, db: &str) {
        if self.shared.upstream_targets.load(Ordering::Relaxed) {
            self.core.start_in(db);
        } else {
            self.use_database(db).await;
        }
    }

    /// [`start_in`](Self::start_in) a database named by the client's
    /// bytes: a name that is not UTF-8 cannot be a session's target (text
    /// in the API), so it is selected with a `USE` in the client's
    /// character set (the collation is set first), which the server reads
    /// as it reads a handshake's name; a refusal answers the client's
    /// first command, as for any login database.
    async fn start_in_named(&mut self, db: &[u8], collation: u16) {
        match std::str::from_utf8(db) {
            Ok(db) => self.start_in(db).await,
            Err(_) => {
                if let Err(e) = self.open_login_database_in_charset(db, collation).await {
                    self.core.owe_error(e);
                }
            }
        }
    }

    /// A login database whose name is not UTF-8, before the login's OK:
    /// the collation, then `USE` with the name's bytes; the server's own
    /// refusal (1049, or 1044 to an account without rights) if it fails.
    pub async fn open_login_database_in_charset(
        &mut self,
        db: &[u8],
        collation: u16,
    ) -> Result<(), MysqlError> {
        self.set_collation(collation).await;
        let charset = crate::translate::sql_text::Charset::from_collation(collation);
        let sql = statement::use_database(db, charset);
        let mut reply = self
            .upstream
            .execute(self.core.session().cookie(), sql, HashMap::new())
            .await
            .map_err(|e| errors::from_call(&e, false))?;
        self.core.update_session(&mut reply);
        let used = reply
            .message
            .error
            .map_or(Ok(()), |e| Err(from_rpc_message(&e.message)));
        let credential = self.upstream.credential().username().to_string();
        self.learn_login(&credential, None, used.as_ref().err());
        used
    }

    async fn use_database(&mut self, db: &str) {
        let sql = format!("USE `{}`", db.replace('`', "``"));
        let reply = self
            .upstream
            .execute(self.core.session().cookie(), sql, HashMap::new())
            .await;
        match reply {
            Ok(mut reply) => {
                self.core.update_session(&mut reply);
                if let Some(e) = reply.message.error {
                    self.core.owe_error(from_rpc_message(&e.message));
                }
            }
            Err(e) => self.core.owe_error(errors::from_call(&e, false)),
        }
    }

    /// Gives the upstream session the collation the client named in its
    /// handshake, as a server does: it decides the character set of
    /// results and the collation number in column definitions (mysql2
    /// asks for utf8mb4_unicode_ci, 224). The gateway's sessions start
    /// with utf8mb4_general_ci (45), so only other collations cost a
    /// request. A collation the backend does not know is ignored, as
    /// MariaDB ignores it in a handshake (it keeps its default).
    pub async fn set_collation(&mut self, id: u16) {
        if id == u16::from(crate::mysql::auth::DEFAULT_CHARSET) {
            return;
        }
        let Some(sql) = statement::set_names(id) else {
            return;
        };
        let Ok(mut reply) = self
            .upstream
            .execute(self.core.session().cookie(), sql, HashMap::new())
            .await
        else {
            return;
        };
        self.core.update_session(&mut reply);
        // This request carried the login database (see `start_in`): if the
        // gateway could not select it, the client's first command gets that
        // error and the connection ends, as without a collation request.
        if self.core.session().target_refused()
            && let Some(e) = reply.message.error
        {
            self.core.owe_error(from_rpc_message(&e.message));
        }
    }

    /// A KILL of one of the sidecar's connections, if `id` is one: only
    /// this connection's user's own (ERR 1095 otherwise, as MariaDB).
    fn kill_local(&self, id: u64, query_only: bool, out: &mut Packets) -> Option<Next> {
        match self.registration.kill(id, query_only) {
            KillOutcome::Killed => Some(self.core.ok(out)),
            KillOutcome::NotOwner => Some(self.core.not_owner(id, out)),
            KillOutcome::NoSuchConnection => None,
        }
    }

    /// Runs one statement (or multi-statement) as a `StreamExecute`,
    /// writing rows to the client as they arrive (or, with a cursor,
    /// keeping the stream for `COM_STMT_FETCH`). A `KILL QUERY` from
    /// another connection cancels it upstream (dropping the stream resets
    /// it, and the gateway kills the statement at the backend).
    ///
    /// A client that hangs up is treated as MariaDB treats it: the server
    /// notices only when it writes to the socket, so a statement runs on
    /// (an autocommit write commits) until its answer outgrows the network
    /// buffer. The sidecar reads on likewise, discarding, and cancels the
    /// statement once its answer reaches [`WRITE_CHUNK`] bytes.
    async fn execute(&mut self, statement: Execute, out: &mut Packets) -> Next {
        let Execute {
            sql,
            binds,
            format,
            cursor,
            prepared,
            call_of,
            statements,
            local_infile,
        } = statement;
        let mut exec = self
            .core
            .begin_execution(format, cursor)
            .in_call_of(call_of)
            .in_statements(statements);
        let handle = self.registration.handle.clone();
        // Made before the request is written and kept to the statement's
        // end: `KILL QUERY` wakes only the waiters that exist when it
        // comes (no permit is stored), so one made later — after the
        // response head, or again after each message — would miss a KILL
        // that came while the head was awaited or rows were written, and
        // the statement would run on at the backend.
        let cancelled = handle.cancel_query.notified();
        tokio::pin!(cancelled);
        let opening = self.upstream.stream_execute_with(
            self.core.session().cookie(),
            sql,
            binds,
            prepared,
            local_infile,
        );
        // The head may take as long as the statement's first rows (a
        // gateway may send them together): a KILL meanwhile drops the
        // request, which cancels the statement upstream as below.
        let opened = tokio::select! {
            biased;
            () = handle.kill.notified() => Err(Stopped::Killed),
            () = cancelled.as_mut() => Err(Stopped::Cancelled),
            stream = opening => Ok(stream),
        };
        let mut stream = match opened {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return self.core.call_failed(&e, exec.was_in_transaction(), out);
            }
            Err(why) => return self.stopped(why, exec, out),
        };
        let mut hung_up = false;
        // Rows waiting to be written: at most WRITE_CHUNK and one message,
        // but a message may hold one row as large as the backend allows.
        let mut buffered = self.core.budget().process_charge();
        loop {
            // The read of the next message is kept across a hang-up (it
            // is not cancel-safe: a half-read message would be lost).
            let next = {
                let pending = stream.next();
                tokio::pin!(pending);
                loop {
                    // Biased: a connection killed (or cut by the drain) while
                    // its statement is also cancelled answers as killed, the
                    // same every time. Returning drops the stream, which
                    // kills the statement upstream; the session is closed
                    // (rolled back) after the command loop.
                    tokio::select! {
                        biased;
                        () = handle.kill.notified() => {
                            return self.stopped(Stopped::Killed, exec, out);
                        }
                        () = cancelled.as_mut() => {
                            return self.stopped(Stopped::Cancelled, exec, out);
                        }
                        _ = self.io.hangup(), if !hung_up => {
                            hung_up = true;
                        }
                        m = &mut pending => break m,
                    }
                }
            };
            match next {
                Ok(Some(reply)) => match self.core.on_reply(&mut exec, reply, out) {
                    Flow::More => {}
                    Flow::Stop => break,
                    Flow::Cursor(new) => return self.core.open_cursor(new, stream),
                    Flow::Infile(request) => {
                        if let Err(next) = self.send_file(request, out).await {
                            // Dropping the stream cancels the statement
                            // upstream (the load was abandoned first).
                            return next;
                        }
                    }
                },
                Ok(None) => break,
                Err(e) => return self.core.execution_failed(exec, &e, out),
            }
            if out.buf.len() >= WRITE_CHUNK {
                if let Err(e) = buffered.set(out.buf.len()) {
                    // As a server that cannot allocate a row's buffer: the
                    // statement ends in an error (dropping the stream
                    // cancels it upstream); the connection goes on.
                    self.core.execution_stopped(exec, &e.process_refused(), out);
                    return if hung_up { Next::Close } else { Next::Continue };
                }
                if hung_up || self.io.write(out).await.is_err() {
                    // Dropping the stream cancels the statement upstream.
                    return Next::Close;
                }
                let _ = buffered.set(0);
            }
        }
        let next = self.core.finish_execution(exec, out);
        if hung_up { Next::Close } else { next }
    }

    /// The backend asks for the client's file: asks the client, and sends
    /// what it sends to the gateway a part at a time (each once the last
    /// is taken), up to the client's empty packet; the statement's answer
    /// then follows in its stream. A client that goes away, breaks the
    /// protocol or stalls mid-file has the load abandoned (the gateway
    /// kills it, never ends the file: nothing of it is loaded) and the
    /// connection closes, after the server's error where it would send one.
    async fn send_file(
        &mut self,
        request: crate::api::pb::LocalInfileRequest,
        out: &mut Packets,
    ) -> Result<(), Next> {
        let mut infile = self.core.ask_for_file(request, out);
        let handle = self.registration.handle.clone();
        let written = async {
            self.io.write(out).await?;
            self.io.flush().await
        };
        let mut failed = written.await.err().map(|_| None);
        while failed.is_none() {
            let packet = tokio::select! {
                biased;
                () = handle.kill.notified() => Err(None),
                read = tokio::time::timeout(command::PACKET_TIMEOUT, self.io.read()) => match read {
                    Err(_) => Err(Some(command::read_timeout())),
                    Ok(Ok(packet)) => Ok(packet),
                    // A packet over max_allowed_packet or the budget: the
                    // server's error and a close; gone: nothing.
                    Ok(Err(IoError::Packet(e))) => Err(Some(errors::packet_too_large(&e))),
                    Ok(Err(IoError::OverBudget(e))) => Err(Some(e.process_refused())),
                    Ok(Err(_)) => Err(None),
                },
            };
            let packet = match packet {
                Ok(packet) => packet,
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            };
            if let Err(e) = infile.on_packet(packet) {
                failed = Some(Some(e));
                break;
            }
            while let Some(part) = infile.next_part() {
                let sent = self
                    .upstream
                    .local_infile_data(self.core.session().cookie(), part)
                    .await;
                if let Ok(reply) = &sent
                    && reply.message.error.is_none()
                {
                    continue;
                }
                // The load is gone upstream (its statement's stream says
                // why): the rest of the file cannot be sent.
                tracing::warn!(
                    ?sent,
                    "a part of a LOAD DATA LOCAL INFILE file was not taken"
                );
                return Err(Next::Close);
            }
            if infile.is_finished() {
                out.seq = infile.answer_seq();
                return Ok(());
            }
        }
        let _ = self
            .upstream
            .local_infile_data(self.core.session().cookie(), infile.abort())
            .await;
        if let Some(Some(error)) = failed {
            out.seq = infile.answer_seq();
            response::err(out, &error);
            let _ = self.io.write(out).await;
        }
        Err(Next::Close)
    }

    /// Open cursors hold the session's stream: before a command that
    /// needs the session, they read the rest of their results ahead
    /// (bounded: see `command::cursors::CURSOR_BUFFER_LIMIT`).
    /// Ends a statement stopped by a KILL. Returning drops its stream,
    /// which kills it upstream; `KILL [CONNECTION]` closes the connection
    /// (with an error only if the drain cut it), `KILL QUERY` answers
    /// 1317 and the connection goes on.
    fn stopped(&mut self, why: Stopped, exec: command::Execution, out: &mut Packets) -> Next {
        match why {
            Stopped::Killed => {
                if self.registration.handle.is_cut() {
                    self.core
                        .execution_stopped(exec, &errors::shutdown_in_progress(), out);
                }
                Next::Close
            }
            Stopped::Cancelled => {
                self.core
                    .execution_stopped(exec, &errors::interrupted(), out);
                Next::Continue
            }
        }
    }

    async fn read_cursors_ahead(&mut self) {
        for id in self.core.cursors_reading() {
            while let Some(mut stream) = self.core.read_ahead_stream(id) {
                let next = stream.next().await;
                self.core.read_ahead_pulled(id, stream, next);
            }
        }
    }

    /// `COM_STMT_FETCH`: up to `rows` rows of the statement's cursor,
    /// read from upstream as needed.
    async fn fetch(&mut self, id: u32, rows: u32, out: &mut Packets) -> Next {
        let mut fetch = match self.core.begin_fetch(id, rows, out) {
            Ok(fetch) => fetch,
            Err(next) => return next,
        };
        let handle = self.registration.handle.clone();
        loop {
            match self.core.fetch_rows(&mut fetch, out) {
                FetchStep::Pull => {}
                FetchStep::End => break,
                FetchStep::Answered(next) => return next,
            }
            let Some(stream) = fetch.stream() else {
                break;
            };
            let next = tokio::select! {
                m = stream.next() => m,
                () = handle.kill.notified() => return Next::Close,
                _ = self.io.hangup() => return Next::Close,
            };
            self.core.fetch_pulled(&mut fetch, next);
            if out.buf.len() >= WRITE_CHUNK && self.io.write(out).await.is_err() {
                return Next::Close;
            }
        }
        self.core.end_fetch(fetch, out)
    }
}

/// Why a statement was given up before its end, while its response head
/// was awaited or its rows were read.
enum Stopped {
    /// `KILL [CONNECTION]` (or the drain's cut) of this connection.
    Killed,
    /// `KILL QUERY` of this connection's statement.
    Cancelled,
}

/// `COM_STATISTICS`'s line, made from the backend's global status read
/// in a session of its own: a statement in the client's session would
/// change what it reads next (`ROW_COUNT()`, `FOUND_ROWS()`, its
/// warnings), where the command changes nothing.
async fn server_statistics(upstream: &Client, mariadb: bool) -> Result<String, MysqlError> {
    let reply = upstream
        .execute(None, statistics::STATUS_QUERY, HashMap::new())
        .await
        .map_err(|e| errors::from_call(&e, false))?;
    if let Some(session) = reply.session.clone() {
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let _ = upstream.close_session(&session).await;
        });
    }
    if let Some(e) = &reply.message.error {
        return Err(from_rpc_message(&e.message));
    }
    let mut status = HashMap::new();
    for row in reply.message.result.iter().flat_map(|r| &r.rows) {
        let row = RowView::from(row);
        let Some(mut cells) = row.cells() else {
            continue;
        };
        if let (Some(Some(name)), Some(Some(value))) = (cells.next(), cells.next())
            && let (Ok(name), Some(value)) = (
                std::str::from_utf8(name),
                std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()),
            )
        {
            status.insert(name.to_string(), value);
        }
    }
    Ok(statistics::line(&status, mariadb))
}
