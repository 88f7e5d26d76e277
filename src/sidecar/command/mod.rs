//! The command phase as a state machine without I/O.
//!
//! [`CommandPhase`] holds everything a client connection remembers between
//! commands — the upstream session, prepared statements, open cursors, an
//! error owed to the next command, the client's options — and decides
//! every answer. It never awaits: a command either is answered at once
//! ([`Step::Answered`]) or names the upstream call it needs ([`Step`]'s
//! other variants); the socket loop (`super::connection`) makes that call
//! and hands each reply back to a method here, which writes the MySQL
//! packets. So each rule of the protocol is a unit test below, with no
//! socket, gateway or clock.
//!
//! Open cursors hold their statement's stream (`S`, opaque here): the
//! session is busy until it is read to its end, so before any step that
//! needs the session ([`Step::uses_session`]) the loop reads the cursors
//! ahead ([`CommandPhase::read_ahead_stream`]).

mod cursors;
mod execution;
mod infile;
mod statements;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::api::pb;
use crate::client::{CallError, RawSession, Reply};
use crate::mysql::CapabilityFlags;
use crate::mysql::MysqlError;
use crate::mysql::auth::Authenticated;
use crate::mysql::command::{self, Command};
use crate::mysql::packet::{Packet, Packets};
use crate::mysql::response::{self, ColumnStyle};
use crate::translate::connection_status::ConnectionStatus;
use crate::translate::errors::from_rpc_message;
use crate::translate::results::RowFormat;
use crate::translate::sql_text::{Charset, Dialect};
use crate::translate::statement::Answers;
use crate::translate::to_mysql;
use crate::translate::{out_params, params, statement};

use super::budget::ConnectionBudget;
use super::errors;
use super::session::{NewSession, Session};

pub use cursors::FetchStep;
pub use execution::{Execution, Flow};
pub use infile::{PACKET_TIMEOUT, read_timeout};
use statements::{LongDataLimits, Prepared, Statements};

/// Whether the connection goes on after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Close,
}

/// A statement to run upstream as a `StreamExecute`, its answer written
/// while it streams ([`CommandPhase::begin_execution`]).
#[derive(Debug)]
pub struct Execute {
    /// The client's bytes, in its character set.
    pub sql: Bytes,
    pub binds: HashMap<String, pb::BindVariable>,
    pub format: RowFormat,
    /// With a statement id: open a cursor on its first result set.
    pub cursor: Option<u32>,
    /// Ask the gateway to run it as a prepared statement at the backend
    /// (`ExecuteRequest.prepared`): where literals or text rows would
    /// lose something (see `backend_prepare`).
    pub prepared: bool,
    /// A single `CALL` of this routine: its results' status flags are a
    /// procedure's (`ResultWriter::in_call_of`).
    pub call_of: Option<Vec<u8>>,
    /// A multi-statement's statements, by how each answers (empty for one
    /// statement): its column EOFs' MORE_RESULTS
    /// (`ResultWriter::in_statements`).
    pub statements: Vec<Answers>,
    /// The client can send a file the backend may ask for (a `LOAD DATA
    /// LOCAL INFILE` first in the text): the request says so
    /// (`ExecuteRequest.local_infile`).
    pub local_infile: bool,
}

/// What a command needs done before its answer is complete.
#[derive(Debug)]
pub enum Step {
    /// The answer is written.
    Answered(Next),
    Execute(Execute),
    /// `KILL [QUERY|CONNECTION] id`: of one of the sidecar's connections,
    /// if `id` is one (the socket loop asks the registry); otherwise `id` is a
    /// backend thread id and the statement runs upstream.
    KillOrExecute {
        id: u64,
        query_only: bool,
        statement: Execute,
    },
    /// `COM_PROCESS_KILL`: of one of the sidecar's connections, or ERR.
    Kill {
        id: u64,
    },
    /// `COM_STMT_PREPARE`: answer with [`CommandPhase::prepared`].
    Prepare(Bytes),
    /// `COM_FIELD_LIST` as this statement: answer with
    /// [`CommandPhase::field_list_answered`].
    FieldList(Bytes),
    /// `COM_RESET_CONNECTION`, after [`CommandPhase::reset`]: the
    /// upstream session to close, then a new one in the same database and
    /// collation; answer with [`CommandPhase::ok`].
    Reset {
        close: Option<Box<RawSession>>,
        database: Option<String>,
        collation: u16,
    },
    /// `COM_CHANGE_USER`: the authentication exchange on the socket, then
    /// [`CommandPhase::user_changed`].
    ChangeUser {
        seq: u8,
        payload: Bytes,
    },
    /// `COM_STMT_FETCH`: rows of an open cursor, read from upstream as
    /// needed ([`CommandPhase::begin_fetch`]).
    Fetch {
        id: u32,
        rows: u32,
    },
    /// `COM_STATISTICS`: a line about the sidecar itself.
    Statistics,
}

impl Step {
    /// Whether the step makes a request on the upstream session, which
    /// open cursors' streams hold until read to their end. Every step says
    /// so explicitly: a new one must decide.
    pub fn uses_session(&self) -> bool {
        match self {
            Step::Execute(_)
            | Step::KillOrExecute { .. }
            | Step::Prepare(_)
            | Step::FieldList(_) => true,
            // A reset and a change of user close every cursor first, and
            // then start a new session; a fetch reads its own stream.
            Step::Reset { .. }
            | Step::ChangeUser { .. }
            | Step::Fetch { .. }
            | Step::Answered(_)
            | Step::Kill { .. }
            | Step::Statistics => false,
        }
    }
}

/// One client connection's state between commands (see the module
/// documentation). `S` is an open cursor's upstream stream.
pub struct CommandPhase<S> {
    caps: CapabilityFlags,
    /// How column definitions describe JSON (server flavour, and whether
    /// the client took MariaDB's extended metadata).
    style: ColumnStyle,
    /// The collation the client named at login (or at its last
    /// `COM_CHANGE_USER`): `COM_RESET_CONNECTION` restores it, as MariaDB
    /// does.
    collation: u16,
    /// The server the sidecar stands for is MariaDB (its error texts).
    mariadb: bool,
    /// Most bytes a packet may have (long data is bounded by it).
    max_packet: usize,
    /// The largest request the gateway takes (0: not known yet); long
    /// data beyond it could never be sent.
    max_request: usize,
    /// What this connection's statements and cursors may hold.
    budget: ConnectionBudget,
    session: Session,
    /// An error owed to the client's next command (its default database
    /// could not be selected after the login), which then closes.
    pending_error: Option<MysqlError>,
    statements: Statements,
    cursors: cursors::Cursors<S>,
    multi_statements: bool,
    /// What each new upstream session is asked for.
    new_session: NewSession,
    /// The upstream marks where each result of a stream ends (our
    /// gateway); without markers only one result per statement can be
    /// carried exactly.
    marked_ends: bool,
    /// A request was refused with the backend's 1045: the credential's
    /// backend account no longer logs in (see
    /// [`CommandPhase::take_account_refused`]).
    account_refused: bool,
    /// What the client's own connection says of itself in status
    /// variables (its TLS session), in place of the backend connection's.
    connection_status: Arc<ConnectionStatus>,
    /// The client's files are carried to the backend (`sidecar.local_infile`,
    /// our gateway, and the client's `CLIENT_LOCAL_FILES`); else `LOAD DATA
    /// LOCAL` gets the server's 4166, unrun.
    local_infile: bool,
}

/// What a connection starts with, from its login.
pub struct Login {
    pub caps: CapabilityFlags,
    pub style: ColumnStyle,
    pub collation: u16,
    pub mariadb: bool,
    pub max_packet: usize,
    pub new_session: NewSession,
    /// See [`CommandPhase`]'s `marked_ends`.
    pub marked_ends: bool,
    /// `sidecar.local_infile`: `LOAD DATA LOCAL INFILE` is carried (with
    /// our gateway, to a client with `CLIENT_LOCAL_FILES`).
    pub local_infile: bool,
}

impl Login {
    pub fn new(
        login: &Authenticated,
        mariadb: bool,
        max_packet: usize,
        new_session: NewSession,
        marked_ends: bool,
    ) -> Self {
        Self {
            caps: login.capabilities,
            style: login.column_style,
            collation: login.charset,
            mariadb,
            max_packet,
            new_session,
            marked_ends,
            local_infile: false,
        }
    }

    /// See [`Login::local_infile`].
    pub fn with_local_infile(mut self, on: bool) -> Self {
        self.local_infile = on;
        self
    }
}

impl<S> CommandPhase<S> {
    pub fn new(login: Login) -> Self {
        Self {
            caps: login.caps,
            style: login.style,
            collation: login.collation,
            mariadb: login.mariadb,
            max_packet: login.max_packet,
            max_request: 0,
            budget: ConnectionBudget::unlimited(),
            multi_statements: login
                .caps
                .contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
            session: Session::new(login.new_session.clone()),
            new_session: login.new_session,
            marked_ends: login.marked_ends,
            local_infile: login.local_infile
                && login.marked_ends
                && login.caps.contains(CapabilityFlags::CLIENT_LOCAL_FILES),
            pending_error: None,
            account_refused: false,
            statements: Statements::default(),
            cursors: cursors::Cursors::default(),
            connection_status: Arc::new(ConnectionStatus::plain()),
        }
    }

    /// The client's connection is `status` (its TLS session): rows of
    /// status variables that describe a connection say it.
    #[must_use]
    pub fn with_connection_status(mut self, status: ConnectionStatus) -> Self {
        self.connection_status = Arc::new(status);
        self
    }

    /// Charges what the connection holds to `budget`.
    #[must_use]
    pub fn with_budget(mut self, budget: ConnectionBudget) -> Self {
        self.budget = budget;
        self
    }

    /// What this connection may hold.
    pub fn budget(&self) -> &ConnectionBudget {
        &self.budget
    }

    /// The largest request the gateway takes, as it last said (0: not
    /// known).
    pub fn set_request_limit(&mut self, max_request: usize) {
        self.max_request = max_request;
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Whether the upstream marks where each result ends (see
    /// [`Login::marked_ends`]).
    pub fn set_marked_ends(&mut self, marked: bool) {
        self.marked_ends = marked;
    }

    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// Starts over in `database` (the login's): the first request asks
    /// the gateway to select it.
    pub fn start_in(&mut self, database: &str) {
        self.session = Session::in_database(database, self.new_session.clone());
    }

    /// Whether a drain may close the connection between commands: not in
    /// the middle of a transaction, which it lets finish.
    pub fn drain_may_close(&self) -> bool {
        !self.session.in_transaction
    }

    /// The client's next command gets `error`, and the connection closes.
    pub fn owe_error(&mut self, error: MysqlError) {
        self.pending_error = Some(error);
    }

    pub fn take_owed_error(&mut self) -> Option<MysqlError> {
        self.pending_error.take()
    }

    /// An upstream error as the client gets it, noting a refusal of the
    /// backend account itself.
    fn upstream_error(&mut self, message: &[u8]) -> MysqlError {
        let e = from_rpc_message(message);
        self.account_refused |= e.code == errors::ACCESS_DENIED;
        e
    }

    /// Whether a request since the last call was refused with the
    /// backend's 1045 (`ER_ACCESS_DENIED_ERROR`: the account was dropped
    /// or its password changed, found when the gateway opened a backend
    /// connection for it): logins under the credential are then checked
    /// again before their OK.
    pub fn take_account_refused(&mut self) -> bool {
        std::mem::take(&mut self.account_refused)
    }

    /// Takes in a reply's session cookie.
    pub fn update_session<M>(&mut self, reply: &mut Reply<M>) {
        if let Some(cookie) = reply.session.take() {
            self.session.update(cookie);
        }
    }

    /// How the backend reads this connection's SQL text.
    /// The server the sidecar stands for is MariaDB.
    pub fn is_mariadb(&self) -> bool {
        self.mariadb
    }

    pub fn dialect(&self) -> Dialect {
        self.session
            .dialect(Charset::from_collation(self.collation))
    }

    pub fn ok(&self, out: &mut Packets) -> Next {
        response::ok(out, self.caps, 0, 0, self.session.status(), 0, "");
        Next::Continue
    }

    /// The answer to one command packet, or the upstream call it needs.
    pub fn command(&mut self, packet: Packet, out: &mut Packets) -> Step {
        if let Some(e) = self.pending_error.take() {
            response::err(out, &e);
            return Step::Answered(Next::Close);
        }
        let command = match command::parse(packet.payload) {
            Ok(c) => c,
            Err(e) => {
                response::err(out, &e.to_mysql());
                return Step::Answered(Next::Close);
            }
        };
        match command {
            Command::Quit => Step::Answered(Next::Close),
            Command::Ping => Step::Answered(self.ok(out)),
            Command::Query(sql) => self.query(sql, out),
            Command::InitDb(db) => {
                self.session.selects_database();
                Step::Execute(Execute {
                    sql: quoted_statement(&self.dialect(), b"USE ", &db, b""),
                    binds: HashMap::new(),
                    format: RowFormat::Text,
                    cursor: None,
                    prepared: false,
                    call_of: None,
                    statements: Vec::new(),
                    local_infile: false,
                })
            }
            Command::FieldList { table, .. } => Step::FieldList(quoted_statement(
                &self.dialect(),
                b"SELECT * FROM ",
                &table,
                b" LIMIT 0",
            )),
            Command::ResetConnection => self.reset(),
            Command::ChangeUser(payload) => {
                self.cursors.clear();
                Step::ChangeUser {
                    seq: packet.seq,
                    payload,
                }
            }
            Command::SetOption(option) => {
                match option {
                    0 => self.multi_statements = true,
                    1 => self.multi_statements = false,
                    _ => {
                        response::err(
                            out,
                            &errors::unknown_command("COM_SET_OPTION with this option"),
                        );
                        return Step::Answered(Next::Continue);
                    }
                }
                response::eof(out, self.caps, self.session.status(), 0);
                Step::Answered(Next::Continue)
            }
            Command::Statistics => Step::Statistics,
            // As the FLUSH it is (PHP's mysqli::refresh): the server's
            // own RELOAD check, and the same work where it passes.
            Command::Refresh(options) => match statement::refresh_as_flush(options) {
                Some(sql) => self.query(Bytes::from(sql), out),
                None => {
                    response::err(
                        out,
                        &errors::unknown_command("COM_REFRESH with these options"),
                    );
                    Step::Answered(Next::Continue)
                }
            },
            Command::ProcessKill(id) => Step::Kill { id: u64::from(id) },
            Command::StmtPrepare(sql) => Step::Prepare(sql),
            Command::StmtExecute {
                stmt_id,
                params,
                flags,
                ..
            } => {
                // A new execute of a statement closes its own cursor, as
                // in MySQL.
                self.cursors.close(stmt_id);
                let cursor = flags & command::CURSOR_TYPE_READ_ONLY != 0;
                self.execute(stmt_id, &params, cursor, out)
            }
            Command::StmtSendLongData {
                stmt_id,
                param_id,
                data,
            } => {
                // No response, by protocol; errors surface at execute.
                let limits = LongDataLimits {
                    max_packet: self.max_packet,
                    max_request: self.max_request,
                };
                if let Some(stmt) = self.statements.get_mut(stmt_id) {
                    stmt.send_long_data(param_id, &data, limits);
                }
                out.seq = packet.seq; // nothing is written
                Step::Answered(Next::Continue)
            }
            Command::StmtClose(id) => {
                self.statements.remove(id);
                self.cursors.close(id);
                Step::Answered(Next::Continue)
            }
            Command::StmtReset(id) => match self.statements.get_mut(id) {
                Some(stmt) => {
                    stmt.params.reset();
                    stmt.settle();
                    self.cursors.close(id);
                    Step::Answered(self.ok(out))
                }
                None => {
                    response::err(out, &errors::unknown_statement(id, "mysqld_stmt_reset"));
                    Step::Answered(Next::Continue)
                }
            },
            Command::StmtFetch { stmt_id, rows } => Step::Fetch { id: stmt_id, rows },
            Command::Unsupported(unsupported) => {
                response::err(out, &unsupported.to_mysql());
                Step::Answered(Next::Continue)
            }
        }
    }

    fn query(&mut self, sql: Bytes, out: &mut Packets) -> Step {
        if (!self.multi_statements || !self.marked_ends)
            && let Some(second) = statement::second_statement(&sql, &self.dialect())
        {
            let refusal = if self.multi_statements {
                errors::multi_statements_unmarked()
            } else {
                errors::multi_statements_disabled(&sql, second, self.mariadb)
            };
            response::err(out, &refusal);
            return Step::Answered(Next::Continue);
        }
        let load_local = statement::is_load_local(&sql);
        if load_local && !self.marked_ends {
            // A psdb server that is not our gateway cannot carry the file
            // (nor refuse it as a server): the answer of a server with
            // local_infile off, unrun. Our gateway raises it at the
            // backend, so that SHOW WARNINGS shows it as directly.
            response::err(out, &crate::translate::errors::local_infile_disabled());
            return Step::Answered(Next::Continue);
        }
        if statement::leading_keyword(&sql).is_some_and(|k| k.eq_ignore_ascii_case(b"USE")) {
            self.session.selects_database();
        }
        // A KILL statement is ASCII; other text cannot be one.
        let kill = std::str::from_utf8(&sql)
            .ok()
            .and_then(command::parse_kill)
            .filter(|kill| !kill.by_query_id);
        let call_of = out_params::called_routine(&sql)
            .filter(|_| !statement::is_multi_statement(&sql, &self.dialect()));
        // Only the EOF after a set's column definitions needs the
        // statements, which a client with CLIENT_DEPRECATE_EOF never gets:
        // its statements are not scanned again. (Only a client that
        // enabled multi-statements gets here with one.)
        let statements = if self.multi_statements
            && !self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF)
        {
            statement::multi_statement_answers(&sql, &self.dialect()).unwrap_or_default()
        } else {
            Vec::new()
        };
        // Only a LOAD first in its text: one behind another statement's
        // result set would be asked for before that result's end reached
        // the gateway's stream (the driver reads the next result's first
        // packet first), so the client would see 0xFB too early. It gets
        // an empty file instead (README, Known limits).
        let local_infile = self.local_infile && load_local;
        let statement = Execute {
            sql,
            binds: HashMap::new(),
            format: RowFormat::Text,
            cursor: None,
            prepared: false,
            call_of,
            statements,
            local_infile,
        };
        match kill {
            Some(kill) => Step::KillOrExecute {
                id: kill.id,
                query_only: kill.query_only,
                statement,
            },
            None => Step::Execute(statement),
        }
    }

    fn execute(&mut self, id: u32, params: &Bytes, cursor: bool, out: &mut Packets) -> Step {
        let Some(stmt) = self.statements.get_mut(id) else {
            response::err(out, &errors::unknown_statement(id, "mysqld_stmt_execute"));
            return Step::Answered(Next::Continue);
        };
        let read = stmt.params.read(params);
        // The long data is consumed, whatever the outcome.
        stmt.settle();
        let binds =
            match read.and_then(|values| params::bind_variables(values, stmt.params.types())) {
                Ok(b) => b,
                Err(e) => {
                    response::err(out, &e);
                    return Step::Answered(Next::Continue);
                }
            };
        // As in MySQL, the cursor flag on a statement without a result set
        // (or a CALL, whose prepare reports no columns) is ignored.
        let cursor = (cursor && stmt.columns > 0).then_some(id);
        let call_of = out_params::called_routine(&stmt.sql);
        let (is_call, float_columns, sql) =
            (call_of.is_some(), stmt.float_columns, stmt.sql.clone());
        let prepared = statements::needs_backend_prepare(is_call, float_columns, &binds);
        Step::Execute(Execute {
            sql,
            binds,
            format: RowFormat::Binary,
            cursor,
            prepared,
            call_of,
            statements: Vec::new(),
            local_infile: false,
        })
    }

    /// `COM_RESET_CONNECTION`: a fresh session, as the server's reset
    /// gives, but in the same default database and the login's collation:
    /// a reset keeps both (pools reset every connection they take back,
    /// and the app still expects its database).
    fn reset(&mut self) -> Step {
        let database = self.session.database();
        self.statements.clear();
        self.cursors.clear();
        Step::Reset {
            close: self.session.reset().map(Box::new),
            database,
            collation: self.collation,
        }
    }

    /// After a successful `COM_CHANGE_USER` (whose OK is written) to a
    /// user with `collation`: the old session to close; the new user's
    /// database and collation follow as after a login.
    pub fn user_changed(&mut self, collation: u16, connect_attrs: Bytes) -> Option<RawSession> {
        self.statements.clear();
        self.cursors.clear();
        self.collation = collation;
        // The server reads the new attributes in the new collation; the
        // next session carries them.
        self.new_session.connect_attrs = connect_attrs;
        self.new_session.connect_attrs_collation = collation;
        let old = self.session.reset();
        self.session = Session::new(self.new_session.clone());
        old
    }

    /// The answer to `KILL` when `id` is none of the sidecar's
    /// connections (`COM_PROCESS_KILL`): ERR 1094.
    pub fn no_such_thread(&self, id: u64, out: &mut Packets) -> Next {
        response::err(out, &errors::unknown_thread(id));
        Next::Continue
    }

    /// The answer to a `KILL` of a connection this user does not own.
    pub fn not_owner(&self, id: u64, out: &mut Packets) -> Next {
        response::err(out, &errors::not_owner(id));
        Next::Continue
    }

    /// `COM_PREPARE`'s answer: the statement is kept under a new id.
    pub fn prepared(
        &mut self,
        sql: Bytes,
        mut reply: Reply<pb::PrepareResponse>,
        out: &mut Packets,
    ) -> Next {
        self.update_session(&mut reply);
        let prepared = reply.message;
        if let Some(error) = prepared.error {
            let e = self.upstream_error(&error.message);
            response::err(out, &e);
            return Next::Continue;
        }
        let Ok(params) = u16::try_from(prepared.params_count) else {
            response::err(out, &errors::too_many_placeholders());
            return Next::Continue;
        };
        let float_columns = prepared
            .fields
            .iter()
            .any(|f| f.r#type == pb::Type::Float32 as i32);
        let statement = match Prepared::new(
            &sql,
            params,
            prepared.fields.len(),
            float_columns,
            &self.budget,
        ) {
            Ok(statement) => statement,
            Err(e) => {
                response::err(out, &e);
                return Next::Continue;
            }
        };
        let id = self.statements.insert(statement);
        to_mysql::prepare_ok(
            out,
            self.caps,
            self.style,
            id,
            to_mysql::Parameters::new(params, &prepared.param_fields),
            &prepared.fields,
            0,
            self.session.status(),
        );
        Next::Continue
    }

    /// `COM_FIELD_LIST`'s answer, from its `SELECT … LIMIT 0`.
    pub fn field_list_answered(
        &mut self,
        mut reply: Reply<pb::ExecuteResponse>,
        out: &mut Packets,
    ) -> Next {
        self.update_session(&mut reply);
        match (reply.message.error, reply.message.result) {
            (Some(e), _) => {
                let e = self.upstream_error(&e.message);
                response::err(out, &e);
            }
            (None, result) => {
                let fields = result.map(|r| r.fields).unwrap_or_default();
                to_mysql::field_list(out, self.caps, self.style, &fields, self.session.status());
            }
        }
        Next::Continue
    }

    /// A request that failed as a whole: an ERR, and the connection closes
    /// when the statement may have run or the session is gone.
    pub fn call_failed(&mut self, e: &CallError, in_transaction: bool, out: &mut Packets) -> Next {
        let error = errors::from_call(e, in_transaction);
        self.account_refused |= error.code == errors::ACCESS_DENIED;
        response::err(out, &error);
        if errors::call_ends_session(e) {
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
mod budget_tests;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
