//! One client connection's command phase: each MySQL command becomes a
//! psdb request on the shared upstream connection, and each answer is
//! written back as MySQL packets while it streams in.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::api::pb;
use crate::client::{CallError, ExecuteStream};
use crate::mysql::command::{self, Command};
use crate::mysql::packet::{Packet, Packets};
use crate::mysql::params::StatementParams;
use crate::mysql::{CapabilityFlags, response};
use crate::translate::errors::{MysqlError, from_rpc_message};
use crate::translate::results::{ResultWriter, RowFormat};
use crate::translate::statement;

use crate::mysql::auth::{Authenticated, Handshake};

use super::Shared;
use super::errors;
use super::io::{Framed, IoError};
use super::registry::Registration;
use super::session::Session;

/// Whether the connection goes on after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Close,
}

/// Packets are written to the client once this much is buffered.
const WRITE_CHUNK: usize = 64 * 1024;

/// A prepared statement: the text, and what its parameters were bound to.
struct Prepared {
    sql: String,
    params: StatementParams,
}

pub struct Connection {
    pub io: Framed,
    pub shared: Arc<Shared>,
    pub registration: Registration,
    pub handshake: Handshake,
    pub caps: CapabilityFlags,
    pub session: Session,
    /// An error owed to the client's next command (its default database
    /// could not be selected after the login), which then closes.
    pending_error: Option<MysqlError>,
    statements: HashMap<u32, Prepared>,
    next_statement: u32,
    multi_statements: bool,
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
        Self {
            io,
            shared,
            registration,
            handshake,
            multi_statements: caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
            caps,
            session: Session::new(),
            pending_error: None,
            statements: HashMap::new(),
            next_statement: 1,
        }
    }

    /// Serves commands until the client quits, breaks the protocol, or
    /// the session cannot go on. Closes the upstream session at the end.
    pub async fn run(mut self) {
        loop {
            let handle = self.registration.handle.clone();
            let packet = tokio::select! {
                p = self.io.read() => p,
                () = handle.kill.notified() => break,
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
                None => self.dispatch(packet, &mut out).await,
            };
            if self.io.write(&mut out).await.is_err() || self.io.flush().await.is_err() {
                break;
            }
            if next == Next::Close
                || self.session.target_refused()
                || self.registration.handle.is_killed()
            {
                break;
            }
        }
        self.close_upstream();
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
        match command {
            Command::Quit => Next::Close,
            Command::Ping => self.ok(out),
            Command::Query(sql) => {
                let sql = String::from_utf8_lossy(&sql).into_owned();
                self.query(sql, out).await
            }
            Command::InitDb(db) => {
                let db = String::from_utf8_lossy(&db).replace('`', "``");
                self.run_statement(format!("USE `{db}`"), HashMap::new(), RowFormat::Text, out)
                    .await
            }
            Command::FieldList { table, .. } => self.field_list(&table, out).await,
            Command::ResetConnection => {
                self.close_upstream();
                self.statements.clear();
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
            Command::StmtPrepare(sql) => {
                let sql = String::from_utf8_lossy(&sql).into_owned();
                self.prepare(sql, out).await
            }
            Command::StmtExecute {
                stmt_id, params, ..
            } => self.execute(stmt_id, params, out).await,
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
                Next::Continue
            }
            Command::StmtReset(id) => match self.statements.get_mut(&id) {
                Some(stmt) => {
                    stmt.params.reset();
                    self.ok(out)
                }
                None => {
                    response::err(out, &errors::unknown_statement(id, "mysqld_stmt_reset"));
                    Next::Continue
                }
            },
            Command::StmtFetch { .. } => {
                // Cursors are never opened (execute answers with all rows
                // and no SERVER_STATUS_CURSOR_EXISTS), so there is nothing
                // to fetch from.
                response::err(out, &errors::no_cursor());
                Next::Continue
            }
            Command::Unsupported(unsupported) => {
                response::err(out, &unsupported.to_mysql());
                Next::Continue
            }
        }
    }

    fn ok(&self, out: &mut Packets) -> Next {
        response::ok(out, self.caps, 0, 0, self.session.status(), 0, "");
        Next::Continue
    }

    async fn query(&mut self, sql: String, out: &mut Packets) -> Next {
        // A KILL naming none of ours names a backend thread id
        // (CONNECTION_ID()), which the backend itself handles.
        if let Some(kill) = command::parse_kill(&sql)
            && self.shared.registry.kill(kill.id, kill.query_only)
        {
            return self.ok(out);
        }
        if !self.multi_statements && statement::is_multi_statement(&sql) {
            response::err(out, &errors::multi_statements_disabled());
            return Next::Continue;
        }
        self.run_statement(sql, HashMap::new(), RowFormat::Text, out)
            .await
    }

    async fn prepare(&mut self, sql: String, out: &mut Packets) -> Next {
        let reply = match self
            .shared
            .client
            .prepare(self.session.cookie(), &sql)
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
            },
        );
        Next::Continue
    }

    async fn execute(&mut self, id: u32, params: bytes::Bytes, out: &mut Packets) -> Next {
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
        self.run_statement(sql, binds, RowFormat::Binary, out).await
    }

    async fn field_list(&mut self, table: &[u8], out: &mut Packets) -> Next {
        let table = String::from_utf8_lossy(table).replace('`', "``");
        let sql = format!("SELECT * FROM `{table}` LIMIT 0");
        let reply = match self
            .shared
            .client
            .execute(self.session.cookie(), &sql, HashMap::new())
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
                response::field_list(out, self.caps, &fields, self.session.status());
            }
        }
        Next::Continue
    }

    /// Makes `db`, which the client named at login, the default database.
    /// The login itself stays local. A gateway that takes a target
    /// database with the first request gets it there, at no cost;
    /// otherwise a `USE` goes first. Either way a failure (unknown
    /// database) is the answer to the client's first command, and ends
    /// the connection.
    pub async fn start_in(&mut self, db: &str) {
        if self.shared.upstream_targets.load(Ordering::Relaxed) {
            self.session = Session::in_database(db);
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

    async fn change_user(&mut self, seq: u8, payload: bytes::Bytes, out: &mut Packets) -> Next {
        match super::login::change_user(self, seq, payload, out).await {
            Ok(login) => {
                self.close_upstream();
                self.statements.clear();
                if let Some(db) = login.database {
                    self.start_in(&db).await;
                }
                Next::Continue
            }
            Err(()) => Next::Close,
        }
    }

    fn kill(&self, id: u64, query_only: bool, out: &mut Packets) -> Next {
        if self.shared.registry.kill(id, query_only) {
            self.ok(out)
        } else {
            response::err(out, &errors::unknown_thread(id));
            Next::Continue
        }
    }

    /// Runs one statement (or multi-statement) as a `StreamExecute`,
    /// writing rows to the client as they arrive. A client that hangs up,
    /// or a `KILL QUERY` from another connection, cancels it upstream
    /// (dropping the stream resets it, and the gateway kills the
    /// statement at the backend).
    async fn run_statement(
        &mut self,
        sql: String,
        binds: HashMap<String, pb::BindVariable>,
        format: RowFormat,
        out: &mut Packets,
    ) -> Next {
        let was_in_transaction = self.session.in_transaction;
        let mut writer = ResultWriter::new(self.caps, format, self.session.status());
        let stream = self
            .shared
            .client
            .stream_execute(self.session.cookie(), &sql, binds)
            .await;
        let mut stream: ExecuteStream = match stream {
            Ok(s) => s,
            Err(e) => return self.call_failed(e, was_in_transaction, out),
        };
        let handle = self.registration.handle.clone();
        let mut error: Option<MysqlError> = None;
        loop {
            let next = tokio::select! {
                m = stream.next() => m,
                () = handle.cancel_query.notified() => {
                    drop(stream);
                    writer.finish(Some(&errors::interrupted()), self.session.status(), 0, out);
                    return Next::Continue;
                }
                () = handle.kill.notified() => {
                    return Next::Close;
                }
                _ = self.io.hangup() => {
                    // Dropping the stream cancels the statement upstream.
                    return Next::Close;
                }
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
