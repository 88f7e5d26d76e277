//! One client connection's command phase: each MySQL command becomes a
//! psdb request on the shared upstream connection, and each answer is
//! written back as MySQL packets while it streams in.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures_util::FutureExt;
use tracing::Instrument;

use crate::api::pb;
use crate::client::{CallError, ExecuteStream};
use crate::mysql::command::{self, Command};
use crate::mysql::packet::{Packet, Packets};
use crate::mysql::params::StatementParams;
use crate::mysql::response::ColumnStyle;
use crate::mysql::{CapabilityFlags, response};
use crate::translate::cursor::Cursor;
use crate::translate::errors::{MysqlError, from_rpc_message};
use crate::translate::results::{ResultWriter, RowFormat};
use crate::translate::sql_text::{Charset, Dialect};
use crate::translate::statement;

use crate::mysql::auth::{Authenticated, Handshake};
use crate::telemetry::TraceId;

use super::Shared;
use super::errors;
use super::io::{Framed, IoError};
use super::registry::{KillOutcome, Registration};
use super::session::{NewSession, Session};

/// Whether the connection goes on after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Close,
}

/// How long a closing connection waits for the gateway to close its
/// session.
const CLOSE_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Most login databases remembered as selectable (see
/// [`Connection::open_login_database`]).
const KNOWN_DATABASES_MAX: usize = 1024;

/// Packets are written to the client once this much is buffered.
const WRITE_CHUNK: usize = 64 * 1024;

/// A prepared statement: the text, and what its parameters were bound to.
struct Prepared {
    /// The client's bytes, in its character set.
    sql: Bytes,
    params: StatementParams,
    /// Columns of its result set (0: none), as the prepare reported them:
    /// only a statement with a result set opens a cursor.
    columns: usize,
}

/// An open server-side cursor: its rows, and the statement's stream while
/// rows remain upstream.
struct OpenCursor {
    cursor: Cursor,
    stream: Option<ExecuteStream>,
    /// Set when the rest of the result could not be kept (see
    /// [`CURSOR_BUFFER_LIMIT`]) or its stream failed: the next fetch gets
    /// it.
    failed: Option<MysqlError>,
    /// The failure also ended the upstream session: the connection closes
    /// after that fetch, as after any statement whose session is gone.
    session_lost: bool,
}

/// Most bytes of row values an open cursor buffers when the session must
/// run another statement before the cursor is read to its end (the
/// gateway's session is busy while a result streams, so the rest of the
/// result is read ahead). A larger remainder fails the cursor's next fetch
/// with a clear error rather than growing without bound.
const CURSOR_BUFFER_LIMIT: usize = 64 << 20;

pub struct Connection {
    pub io: Framed,
    pub shared: Arc<Shared>,
    pub registration: Registration,
    pub handshake: Handshake,
    pub caps: CapabilityFlags,
    /// How column definitions describe JSON (server flavour, and whether
    /// the client took MariaDB's extended metadata).
    pub style: ColumnStyle,
    pub session: Session,
    /// The collation the client named at login: `COM_RESET_CONNECTION`
    /// restores it, as MariaDB does.
    charset: u16,
    /// An error owed to the client's next command (its default database
    /// could not be selected after the login), which then closes.
    pending_error: Option<MysqlError>,
    statements: HashMap<u32, Prepared>,
    cursors: HashMap<u32, OpenCursor>,
    next_statement: u32,
    multi_statements: bool,
    /// What each new upstream session is asked for.
    new_session: NewSession,
    /// The login's database, taken as known without a request: forgotten
    /// if its first request finds it gone.
    unchecked_database: Option<String>,
}

impl Connection {
    pub fn new(
        io: Framed,
        shared: Arc<Shared>,
        registration: Registration,
        handshake: Handshake,
        login: &Authenticated,
    ) -> Self {
        let caps = login.capabilities;
        // Only a gateway that takes session requests (ours) is asked.
        let new_session = NewSession {
            found_rows: shared
                .upstream_targets
                .load(Ordering::Relaxed)
                .then(|| caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS)),
        };
        Self {
            io,
            shared,
            registration,
            handshake,
            multi_statements: caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
            caps,
            style: login.column_style,
            session: Session::new(new_session),
            new_session,
            unchecked_database: None,
            charset: login.charset,
            pending_error: None,
            statements: HashMap::new(),
            cursors: HashMap::new(),
            next_statement: 1,
        }
    }

    /// Serves commands until the client quits, breaks the protocol, or
    /// the session cannot go on. Closes the upstream session at the end.
    pub async fn run(mut self) {
        loop {
            let handle = self.registration.handle.clone();
            if handle.is_draining() && !self.session.in_transaction {
                break;
            }
            // Idle past the session's wait_timeout: the server would close
            // the connection (MariaDB without a word); so does the sidecar.
            let idle = self.session.idle_timeout();
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
                () = handle.drain.notified(), if !self.session.in_transaction => break,
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
                Err(_) => break,
            };
            let mut out = Packets::reply_to(packet.seq);
            let next = match self.pending_error.take() {
                Some(e) => {
                    response::err(&mut out, &e);
                    Next::Close
                }
                None => {
                    // One trace id per command, sent with each of its
                    // requests and logged by the gateway.
                    let trace = TraceId::random();
                    let span = tracing::info_span!("command", trace_id = %trace);
                    let seq = packet.seq;
                    let command = trace.scope(self.dispatch(packet, &mut out).instrument(span));
                    // No input may panic; if a bug does, the connection
                    // must still end the way every other end does: its
                    // session closed below, its transaction rolled back
                    // at once rather than holding locks until the
                    // gateway's idle timeout.
                    match AssertUnwindSafe(command).catch_unwind().await {
                        Ok(next) => next,
                        Err(_) => {
                            tracing::error!("a command panicked; closing the connection");
                            out = Packets::reply_to(seq);
                            response::err(&mut out, &errors::internal_failure());
                            Next::Close
                        }
                    }
                }
            };
            if self.io.write(&mut out).await.is_err() || self.io.flush().await.is_err() {
                break;
            }
            if self.session.target_refused()
                && let Some(db) = self.unchecked_database.take()
            {
                // It was selected once, and is gone now.
                self.shared
                    .known_databases
                    .lock()
                    .expect("not poisoned")
                    .remove(&db);
            }
            if next == Next::Close
                || self.session.target_refused()
                || self.registration.handle.is_killed()
            {
                break;
            }
        }
        // Close the client's socket first, then the session (rolling back
        // an open transaction), awaited: a draining sidecar must not exit
        // before the gateway has heard it.
        drop(self.io);
        if let Some(cookie) = self.session.reset() {
            let client = &self.shared.client;
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

    /// Ends the upstream session in the background (rolling back an open
    /// transaction); the client is not kept waiting for it.
    fn close_upstream(&mut self) {
        if let Some(cookie) = self.session.reset() {
            let client = self.shared.client.clone();
            tokio::spawn(async move {
                let _ = client.close_session(&cookie).await;
            });
        }
    }

    async fn dispatch(&mut self, packet: Packet, out: &mut Packets) -> Next {
        let command = match command::parse(packet.payload) {
            Ok(c) => c,
            Err(e) => {
                response::err(out, &e.to_mysql());
                return Next::Close;
            }
        };
        self.before_command(&command).await;
        match command {
            Command::Quit => Next::Close,
            Command::Ping => self.ok(out),
            Command::Query(sql) => self.query(sql, out).await,
            Command::InitDb(db) => {
                let sql = quoted_statement(&self.dialect(), b"USE ", &db, b"");
                self.run_statement(sql, HashMap::new(), RowFormat::Text, out)
                    .await
            }
            Command::FieldList { table, .. } => self.field_list(&table, out).await,
            Command::ResetConnection => {
                // A fresh session, as the server's reset gives, but in the
                // same default database and the login's collation: a
                // reset keeps both (pools reset every connection they
                // take back, and the app still expects its database).
                let database = self.session.database();
                self.close_upstream();
                self.statements.clear();
                self.cursors.clear();
                if let Some(db) = database {
                    self.start_in(&db).await;
                }
                self.set_collation(self.charset).await;
                self.ok(out)
            }
            Command::ChangeUser(payload) => self.change_user(packet.seq, payload, out).await,
            Command::SetOption(option) => {
                match option {
                    0 => self.multi_statements = true,
                    1 => self.multi_statements = false,
                    _ => {
                        response::err(
                            out,
                            &errors::unknown_command("COM_SET_OPTION with this option"),
                        );
                        return Next::Continue;
                    }
                }
                response::eof(out, self.caps, self.session.status(), 0);
                Next::Continue
            }
            Command::Statistics => {
                let text = format!(
                    "Threads: {}  Transport: {}",
                    self.shared.registry.len(),
                    self.shared
                        .client
                        .transport()
                        .map_or("none".to_string(), |t| format!("{t:?}"))
                );
                out.push_payload(text.as_bytes());
                Next::Continue
            }
            Command::ProcessKill(id) => self.kill(u64::from(id), false, out),
            Command::StmtPrepare(sql) => self.prepare(sql, out).await,
            Command::StmtExecute {
                stmt_id,
                params,
                flags,
                ..
            } => {
                let cursor = flags & command::CURSOR_TYPE_READ_ONLY != 0;
                self.execute(stmt_id, params, cursor, out).await
            }
            Command::StmtSendLongData {
                stmt_id,
                param_id,
                data,
            } => {
                // No response, by protocol; errors surface at execute.
                let max = self.io.max_packet();
                if let Some(stmt) = self.statements.get_mut(&stmt_id) {
                    stmt.params.send_long_data(param_id, &data, max);
                }
                out.seq = packet.seq; // nothing is written
                Next::Continue
            }
            Command::StmtClose(id) => {
                self.statements.remove(&id);
                self.cursors.remove(&id);
                Next::Continue
            }
            Command::StmtReset(id) => match self.statements.get_mut(&id) {
                Some(stmt) => {
                    self.cursors.remove(&id);
                    stmt.params.reset();
                    self.ok(out)
                }
                None => {
                    response::err(out, &errors::unknown_statement(id, "mysqld_stmt_reset"));
                    Next::Continue
                }
            },
            Command::StmtFetch { stmt_id, rows } => self.fetch(stmt_id, rows, out).await,
            Command::Unsupported(unsupported) => {
                response::err(out, &unsupported.to_mysql());
                Next::Continue
            }
        }
    }

    /// How the backend reads this connection's SQL text.
    fn dialect(&self) -> Dialect {
        self.session.dialect(Charset::from_collation(self.charset))
    }

    fn ok(&self, out: &mut Packets) -> Next {
        response::ok(out, self.caps, 0, 0, self.session.status(), 0, "");
        Next::Continue
    }

    async fn query(&mut self, sql: Bytes, out: &mut Packets) -> Next {
        // A KILL naming none of ours names a backend thread id
        // (CONNECTION_ID()), which the backend itself handles. (A KILL
        // statement is ASCII; other text cannot be one.)
        if let Some(kill) = std::str::from_utf8(&sql).ok().and_then(command::parse_kill)
            && !kill.by_query_id
            && let Some(next) = self.kill_local(kill.id, kill.query_only, out)
        {
            return next;
        }
        if !self.multi_statements
            && let Some(second) = statement::second_statement(&sql, &self.dialect())
        {
            let auth = self.shared.auth.read().expect("not poisoned").clone();
            let mariadb = auth.server_version.contains("MariaDB");
            response::err(
                out,
                &errors::multi_statements_disabled(&sql, second, mariadb),
            );
            return Next::Continue;
        }
        self.run_statement(sql, HashMap::new(), RowFormat::Text, out)
            .await
    }

    async fn prepare(&mut self, sql: Bytes, out: &mut Packets) -> Next {
        let reply = match self
            .shared
            .client
            .prepare(self.session.cookie(), sql.clone())
            .await
        {
            Ok(reply) => reply,
            Err(e) => return self.call_failed(e, false, out),
        };
        if let Some(cookie) = reply.session {
            self.session.update(cookie);
        }
        let prepared = reply.message;
        if let Some(error) = prepared.error {
            response::err(out, &from_rpc_message(&error.message));
            return Next::Continue;
        }
        let Ok(params) = u16::try_from(prepared.params_count) else {
            response::err(out, &errors::too_many_placeholders());
            return Next::Continue;
        };
        let id = self.next_statement;
        self.next_statement = self.next_statement.wrapping_add(1).max(1);
        response::prepare_ok(
            out,
            self.caps,
            self.style,
            id,
            params,
            &prepared.fields,
            0,
            self.session.status(),
        );
        self.statements.insert(
            id,
            Prepared {
                sql,
                params: StatementParams::new(params),
                columns: prepared.fields.len(),
            },
        );
        Next::Continue
    }

    async fn execute(
        &mut self,
        id: u32,
        params: bytes::Bytes,
        cursor: bool,
        out: &mut Packets,
    ) -> Next {
        let Some(stmt) = self.statements.get_mut(&id) else {
            response::err(out, &errors::unknown_statement(id, "mysqld_stmt_execute"));
            return Next::Continue;
        };
        let binds = match stmt.params.bind(&params) {
            Ok(b) => b,
            Err(e) => {
                response::err(out, &e);
                return Next::Continue;
            }
        };
        let sql = stmt.sql.clone();
        // As in MySQL, the cursor flag on a statement without a result set
        // (or a CALL, whose prepare reports no columns) is ignored.
        let cursor = (cursor && stmt.columns > 0).then_some(id);
        self.run_with_cursor(sql, binds, RowFormat::Binary, cursor, out)
            .await
    }

    async fn field_list(&mut self, table: &[u8], out: &mut Packets) -> Next {
        let sql = quoted_statement(&self.dialect(), b"SELECT * FROM ", table, b" LIMIT 0");
        let reply = match self
            .shared
            .client
            .execute(self.session.cookie(), sql, HashMap::new())
            .await
        {
            Ok(r) => r,
            Err(e) => return self.call_failed(e, false, out),
        };
        if let Some(cookie) = reply.session {
            self.session.update(cookie);
        }
        match (reply.message.error, reply.message.result) {
            (Some(e), _) => response::err(out, &from_rpc_message(&e.message)),
            (None, result) => {
                let fields = result.map(|r| r.fields).unwrap_or_default();
                response::field_list(out, self.caps, self.style, &fields, self.session.status());
            }
        }
        Next::Continue
    }

    /// Makes `db`, which the client named at login, the default database,
    /// before the login's OK: `Err` (the backend's 1049 or 1044) refuses
    /// the login, as a server does. A database the gateway has selected
    /// for an earlier login costs nothing now (it rides on the first
    /// request); another costs one request, once per database.
    pub async fn open_login_database(&mut self, db: &str) -> Result<(), MysqlError> {
        if !self.shared.upstream_targets.load(Ordering::Relaxed) {
            // A psdb server that takes no target: `USE`, now.
            self.use_database(db).await;
            return self.pending_error.take().map_or(Ok(()), Err);
        }
        self.session = Session::in_database(db, self.new_session);
        let known = (self.shared.known_databases.lock())
            .expect("not poisoned")
            .contains(db);
        if known {
            self.unchecked_database = Some(db.to_string());
            return Ok(());
        }
        let reply = self
            .shared
            .client
            .execute(self.session.cookie(), "DO 0", HashMap::new())
            .await
            .map_err(|e| errors::from_call(&e, false))?;
        if let Some(cookie) = reply.session {
            self.session.update(cookie);
        }
        if self.session.target_refused() {
            // The gateway made a session anyway: it must not wait for its
            // idle timeout.
            self.close_upstream();
            return Err(reply.message.error.map_or_else(
                || errors::unknown_database(db),
                |e| from_rpc_message(&e.message),
            ));
        }
        let mut known = self.shared.known_databases.lock().expect("not poisoned");
        if known.len() < KNOWN_DATABASES_MAX {
            known.insert(db.to_string());
        }
        Ok(())
    }

    /// Sends the login's last packets, or the refusal of its database in
    /// place of its OK; `None` when the connection must end.
    pub async fn finish_login(
        &mut self,
        ok: Packets,
        database: Result<(), MysqlError>,
    ) -> Option<()> {
        super::login::finish(&mut self.io, ok, database).await
    }

    /// Makes `db`, which the client named at login, the default database.
    /// The login itself stays local. A gateway that takes a target
    /// database with the first request gets it there, at no cost;
    /// otherwise a `USE` goes first. Either way a failure (unknown
    /// database) is the answer to the client's first command, and ends
    /// the connection.
    pub async fn start_in(&mut self, db: &str) {
        if self.shared.upstream_targets.load(Ordering::Relaxed) {
            self.session = Session::in_database(db, self.new_session);
        } else {
            self.use_database(db).await;
        }
    }

    async fn use_database(&mut self, db: &str) {
        let sql = format!("USE `{}`", db.replace('`', "``"));
        let reply = self
            .shared
            .client
            .execute(self.session.cookie(), sql, HashMap::new())
            .await;
        match reply {
            Ok(reply) => {
                if let Some(cookie) = reply.session {
                    self.session.update(cookie);
                }
                if let Some(e) = reply.message.error {
                    self.pending_error = Some(from_rpc_message(&e.message));
                }
            }
            Err(e) => self.pending_error = Some(errors::from_call(&e, false)),
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
        let Ok(reply) = self
            .shared
            .client
            .execute(self.session.cookie(), sql, HashMap::new())
            .await
        else {
            return;
        };
        if let Some(cookie) = reply.session {
            self.session.update(cookie);
        }
        // This request carried the login database (see `start_in`): if the
        // gateway could not select it, the client's first command gets that
        // error and the connection ends, as without a collation request.
        if self.session.target_refused()
            && let Some(e) = reply.message.error
        {
            self.pending_error = Some(from_rpc_message(&e.message));
        }
    }

    async fn change_user(&mut self, seq: u8, payload: bytes::Bytes, out: &mut Packets) -> Next {
        match super::login::change_user(self, seq, payload, out).await {
            Ok(login) => {
                self.close_upstream();
                self.statements.clear();
                self.charset = login.charset;
                if let Some(db) = login.database {
                    self.start_in(&db).await;
                }
                self.set_collation(login.charset).await;
                Next::Continue
            }
            Err(()) => Next::Close,
        }
    }

    fn kill(&self, id: u64, query_only: bool, out: &mut Packets) -> Next {
        self.kill_local(id, query_only, out).unwrap_or_else(|| {
            response::err(out, &errors::unknown_thread(id));
            Next::Continue
        })
    }

    /// A KILL of one of the sidecar's connections, if `id` is one: only
    /// this connection's user's own (ERR 1095 otherwise, as MariaDB).
    fn kill_local(&self, id: u64, query_only: bool, out: &mut Packets) -> Option<Next> {
        match self.registration.kill(id, query_only) {
            KillOutcome::Killed => Some(self.ok(out)),
            KillOutcome::NotOwner => {
                response::err(out, &errors::not_owner(id));
                Some(Next::Continue)
            }
            KillOutcome::NoSuchConnection => None,
        }
    }

    /// Runs one statement (or multi-statement) as a `StreamExecute`,
    /// writing rows to the client as they arrive. A client that hangs up,
    /// or a `KILL QUERY` from another connection, cancels it upstream
    /// (dropping the stream resets it, and the gateway kills the
    /// statement at the backend).
    async fn run_statement(
        &mut self,
        sql: Bytes,
        binds: HashMap<String, pb::BindVariable>,
        format: RowFormat,
        out: &mut Packets,
    ) -> Next {
        self.run_with_cursor(sql, binds, format, None, out).await
    }

    /// [`run_statement`](Self::run_statement), or with `cursor` (a
    /// statement id) the opening of a cursor: when the first result set
    /// starts, its columns are answered and the stream is kept for
    /// `COM_STMT_FETCH`.
    async fn run_with_cursor(
        &mut self,
        sql: Bytes,
        binds: HashMap<String, pb::BindVariable>,
        format: RowFormat,
        cursor: Option<u32>,
        out: &mut Packets,
    ) -> Next {
        let was_in_transaction = self.session.in_transaction;
        let mut writer =
            ResultWriter::new(self.caps, format, self.session.status()).with_style(self.style);
        let stream = self
            .shared
            .client
            .stream_execute(self.session.cookie(), sql, binds)
            .await;
        let mut stream: ExecuteStream = match stream {
            Ok(s) => s,
            Err(e) => return self.call_failed(e, was_in_transaction, out),
        };
        let handle = self.registration.handle.clone();
        let mut error: Option<MysqlError> = None;
        loop {
            // Biased: a connection killed (or cut by the drain) while
            // its statement is also cancelled answers as killed, the
            // same every time.
            let next = tokio::select! {
                biased;
                () = handle.kill.notified() => {
                    if handle.is_cut() {
                        // Dropping the stream kills the statement; the
                        // session is closed (rolled back) after the loop.
                        drop(stream);
                        let error = errors::shutdown_in_progress();
                        writer.finish(Some(&error), self.session.status(), 0, out);
                    }
                    return Next::Close;
                }
                () = handle.cancel_query.notified() => {
                    drop(stream);
                    writer.finish(Some(&errors::interrupted()), self.session.status(), 0, out);
                    return Next::Continue;
                }
                _ = self.io.hangup() => {
                    // Dropping the stream cancels the statement upstream.
                    return Next::Close;
                }
                m = stream.next() => m,
            };
            match next {
                Ok(Some(reply)) => {
                    if let Some(cookie) = reply.session {
                        self.session.update(cookie);
                    }
                    let message = reply.message;
                    if let Some(e) = message.error {
                        error = Some(from_rpc_message(&e.message));
                    }
                    if let Some(id) = cursor
                        && error.is_none()
                        && writer.is_empty()
                        && let Some(result) = &message.result
                        && !result.fields.is_empty()
                    {
                        let mut open = OpenCursor {
                            cursor: Cursor::open(
                                self.caps,
                                self.style,
                                result.fields.clone(),
                                self.session.status(),
                                out,
                            ),
                            stream: Some(stream),
                            failed: None,
                            session_lost: false,
                        };
                        let rows = pb::QueryResult {
                            rows: result.rows.clone(),
                            ..Default::default()
                        };
                        if !rows.rows.is_empty() {
                            open.failed = open.cursor.push(&rows).err();
                        }
                        self.cursors.insert(id, open);
                        return Next::Continue;
                    }
                    if let Some(result) = &message.result
                        && error.is_none()
                        && let Err(e) = writer.message(result, out)
                    {
                        error = Some(e);
                        break;
                    }
                    if out.buf.len() >= WRITE_CHUNK && self.io.write(out).await.is_err() {
                        return Next::Close;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    // Rows may already be out: the ERR ends them, and the
                    // connection closes if the statement may have run or
                    // the session is gone (a session the gateway refuses
                    // arrives here, in the stream's end: streaming calls
                    // answer 200 first).
                    writer.finish(
                        Some(&errors::from_call(&e, was_in_transaction)),
                        self.session.status(),
                        0,
                        out,
                    );
                    return if errors::call_ends_session(&e) {
                        Next::Close
                    } else {
                        Next::Continue
                    };
                }
            }
        }
        let lost = error.as_ref().is_some_and(errors::is_session_lost);
        writer.session_state(self.session.take_state_changes());
        writer.finish(
            error.as_ref(),
            self.session.status(),
            self.session.warnings,
            out,
        );
        if lost {
            // The gateway rolled the transaction back: this connection's
            // state is gone, as if the server had restarted.
            self.session.reset();
            return Next::Close;
        }
        Next::Continue
    }

    /// Open cursors hold the session's stream: before a command that
    /// needs the session, they read the rest of their results ahead
    /// (bounded, see [`CURSOR_BUFFER_LIMIT`]). A new execute of a
    /// statement closes its own cursor, as in MySQL.
    async fn before_command(&mut self, command: &Command) {
        if self.cursors.is_empty() {
            return;
        }
        match command {
            Command::StmtFetch { .. }
            | Command::StmtClose(_)
            | Command::StmtReset(_)
            | Command::StmtSendLongData { .. }
            | Command::Ping
            | Command::Quit
            | Command::Statistics
            | Command::ProcessKill(_)
            | Command::SetOption(_) => return,
            Command::ResetConnection | Command::ChangeUser(_) => {
                self.cursors.clear();
                return;
            }
            Command::StmtExecute { stmt_id, .. } => {
                self.cursors.remove(stmt_id);
            }
            _ => {}
        }
        let ids: Vec<u32> = self.cursors.keys().copied().collect();
        for id in ids {
            let Some(mut open) = self.cursors.remove(&id) else {
                continue;
            };
            while open.stream.is_some() && open.failed.is_none() {
                if open.cursor.buffered() > CURSOR_BUFFER_LIMIT {
                    // Dropping the stream cancels the statement upstream.
                    open.stream = None;
                    open.failed = Some(errors::cursor_too_large(CURSOR_BUFFER_LIMIT));
                    break;
                }
                Self::pull(&mut open, &mut self.session).await;
            }
            self.cursors.insert(id, open);
        }
    }

    /// Reads the next message of a cursor's stream into it.
    async fn pull(open: &mut OpenCursor, session: &mut Session) {
        let Some(stream) = open.stream.as_mut() else {
            return;
        };
        match stream.next().await {
            Ok(Some(reply)) => {
                if let Some(cookie) = reply.session {
                    session.update(cookie);
                }
                if let Some(e) = reply.message.error {
                    open.failed = Some(from_rpc_message(&e.message));
                    open.stream = None;
                } else if let Some(result) = &reply.message.result
                    && let Err(e) = open.cursor.push(result)
                {
                    open.failed = Some(e);
                    open.stream = None;
                }
            }
            Ok(None) => {
                open.cursor.upstream_done();
                open.stream = None;
            }
            Err(e) => {
                open.failed = Some(errors::from_call(&e, session.in_transaction));
                open.session_lost = errors::call_ends_session(&e);
                open.stream = None;
            }
        }
    }

    /// `COM_STMT_FETCH`: up to `rows` rows of the statement's cursor,
    /// read from upstream as needed.
    async fn fetch(&mut self, id: u32, rows: u32, out: &mut Packets) -> Next {
        let Some(mut open) = self.cursors.remove(&id) else {
            response::err(out, &errors::no_cursor());
            return Next::Continue;
        };
        let mut remaining = rows;
        loop {
            if let Err(e) = open.cursor.write_rows(&mut remaining, out) {
                response::err(out, &e);
                return Next::Continue;
            }
            if let Some(e) = open.failed.take() {
                // Rows already written are followed by the ERR, which ends
                // the cursor (MySQL's shape for a fetch that fails).
                response::err(out, &e);
                return if open.session_lost {
                    Next::Close
                } else {
                    Next::Continue
                };
            }
            // Keep reading after a satisfied fetch only to see the end of
            // a set that is complete (the end of its stream follows).
            if open.stream.is_none() || (remaining == 0 && !open.cursor.is_complete()) {
                break;
            }
            let handle = self.registration.handle.clone();
            tokio::select! {
                () = Self::pull(&mut open, &mut self.session) => {}
                () = handle.kill.notified() => return Next::Close,
                _ = self.io.hangup() => return Next::Close,
            }
            if out.buf.len() >= WRITE_CHUNK && self.io.write(out).await.is_err() {
                return Next::Close;
            }
        }
        let exhausted = open.cursor.end_fetch(
            self.caps,
            remaining,
            self.session.status(),
            self.session.warnings,
            out,
        );
        if !exhausted {
            self.cursors.insert(id, open);
        }
        Next::Continue
    }

    /// A request that failed as a whole: an ERR, and the connection closes
    /// when the statement may have run or the session is gone.
    fn call_failed(&mut self, e: CallError, in_transaction: bool, out: &mut Packets) -> Next {
        response::err(out, &errors::from_call(&e, in_transaction));
        if errors::call_ends_session(&e) {
            Next::Close
        } else {
            Next::Continue
        }
    }
}

/// `prefix`, `name` as a backtick-quoted identifier, then `suffix`: the
/// statement a command that names a database or table stands for. The
/// name's bytes are the client's, in its character set, unaltered but for
/// doubled backticks — counted by character, since in gbk or sjis a
/// character may end in the byte of a backtick.
fn quoted_statement(dialect: &Dialect, prefix: &[u8], name: &[u8], suffix: &[u8]) -> Bytes {
    let mut sql = Vec::with_capacity(prefix.len() + name.len() + suffix.len() + 4);
    sql.extend_from_slice(prefix);
    sql.push(b'`');
    let mut i = 0;
    while i < name.len() {
        let next = dialect.next(name, i);
        if name[i..next] == *b"`" {
            sql.push(b'`');
        }
        sql.extend_from_slice(&name[i..next]);
        i = next;
    }
    sql.push(b'`');
    sql.extend_from_slice(suffix);
    Bytes::from(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_names_double_backticks_by_character() {
        let utf8 = Dialect::default();
        assert_eq!(
            &quoted_statement(&utf8, b"USE ", b"a`b", b"")[..],
            b"USE `a``b`"
        );
        // 0x8160 is one gbk character: its 0x60 is no backtick.
        let gbk = Dialect {
            charset: Charset::Gbk,
            ..Dialect::default()
        };
        assert_eq!(
            &quoted_statement(&gbk, b"USE ", b"\x81\x60`", b"")[..],
            b"USE `\x81\x60```"
        );
    }
}
