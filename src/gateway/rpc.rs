//! The five psdb methods, over sessions and the backend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use crate::api::ApiError;
use crate::api::pb::{self, RpcError, VtCode};
use crate::api::row_batch::Cells;
use crate::config::Limits;
use crate::mysql::MysqlError;
use crate::translate::errors::to_rpc_error;
use crate::translate::rows::{cells_size, pack};
use crate::translate::sql_text::Dialect;
use crate::translate::{bind, session_track, statement};

use super::auth::Account;
use super::backend::{self, BackendError, Flow, JsonLookup, Outcome, ResultSink, Summary};
use super::binary;
use super::connect_attrs::ConnectAttrs;
use super::extended_metadata::{ExtendedMetadata, Identify};
use super::fresh_connections::{self, FreshConnections};
use super::json_columns::JsonColumns;
use super::local_infile::{self, Asker, Loads};
use super::packet_limit::BackendPacket;
use super::session_reads;
use super::session_state;
use super::sessions::{Lease, Refusal, Sessions};
use super::statement_shapes::{self, Memo, StatementShapes};
use super::stream::StreamSink;
use super::vitess;

/// Shared by every request.
pub struct Rpc {
    pub sessions: Arc<Sessions>,
    pub limits: Limits,
    pub connect_timeout: Duration,
    /// Which LONGTEXT columns are MariaDB JSON, per table.
    pub json_columns: JsonColumns,
    /// What backend prepares said of prepared statements' texts.
    pub statement_shapes: StatementShapes,
    /// MariaDB's extended column metadata, relayed from the backend.
    pub extended_metadata: Arc<ExtendedMetadata>,
    /// The backend's max_allowed_packet, once learned.
    pub backend_packet: BackendPacket,
    /// Each credential's share of the backend connections sessions hold.
    pub backend_shares: Arc<super::shares::BackendShares>,
    /// Which pooled connections a new session must not get as they are.
    pub fresh: FreshConnections,
    /// LOAD DATA LOCAL INFILE statements waiting for their client's file.
    pub loads: Arc<Loads>,
}

/// What one statement produced, besides what went to the sink.
struct Ran {
    outcome: Option<Outcome>,
    error: Option<RpcError>,
}

/// The variable that turns state-change tracking on.
const STATE_CHANGE: &str = "session_track_state_change";

/// MariaDB's default `session_track_system_variables`, for a session that
/// has not read its own yet.
const DEFAULT_TRACKED: &[u8] =
    b"autocommit,character_set_client,character_set_connection,character_set_results,time_zone";

/// No backend connection for a request, which therefore never ran:
/// CR_CONN_HOST_ERROR (a client library's number, which the sidecar sends
/// as ER_NET_READ_ERROR, 08S01, with this message).
fn not_connected(detail: &str) -> MysqlError {
    MysqlError {
        code: 2003,
        state: "HY000".into(),
        message: format!(
            "Can't connect to the backend MySQL server ({detail}); the statement was not run"
        )
        .into(),
    }
}

/// A session still held by another request (which `leased` waited for).
fn busy() -> ApiError {
    ApiError::new(
        crate::api::Code::Aborted,
        "session is already in use by another request; a session runs one request at a time",
    )
}

impl Rpc {
    pub fn create_session(&self, account: &Account) -> Result<pb::CreateSessionResponse, ApiError> {
        let lease = self.lease(account, None)?;
        Ok(pb::CreateSessionResponse {
            branch: "myquic".into(),
            user: Some(pb::User {
                username: account.username.clone(),
                psid: String::new(),
                role: 2, // readwriter: the backend account's grants decide.
            }),
            session: Some(self.sessions.cookie(&lease.slot, &lease.state)),
        })
    }

    pub async fn close_session(
        &self,
        account: &Account,
        request: pb::CloseSessionRequest,
    ) -> Result<pb::CloseSessionResponse, ApiError> {
        match self
            .leased(&account.username, request.session.as_ref())
            .await
        {
            Ok(lease) => self.sessions.close(lease),
            Err(Refusal::TransactionLost(fresh, _)) => self.sessions.close(fresh),
            Err(Refusal::Api(e)) => return Err(e),
            Err(Refusal::Busy(_)) => return Err(busy()),
        }
        Ok(pb::CloseSessionResponse::default())
    }

    pub async fn execute(
        &self,
        account: Arc<Account>,
        mut request: pb::ExecuteRequest,
    ) -> Result<pb::ExecuteResponse, ApiError> {
        let started = Instant::now();
        if let Some(data) = request.local_infile_data.take() {
            // A part of a file a running statement asked for: not a
            // statement, and its session is that statement's.
            let fed = self.loads.feed(&account.username, data).await;
            return Ok(pb::ExecuteResponse {
                session: request.session,
                error: fed.err().map(|e| to_rpc_error(&e)),
                ..Default::default()
            });
        }
        let mut lease = match self
            .lease_or_lost(&account, request.session.as_ref())
            .await?
        {
            Ok(lease) => lease,
            Err(lost) => return Ok(lost),
        };
        let mut sink = Collect {
            limit: self.limits.max_result_bytes,
            ..Collect::default()
        };
        let ran = self.run(&account, &mut lease, &request, &mut sink).await;
        let mut error = ran.error;
        let result = ran.outcome.map(|outcome| {
            if sink.overflow {
                error = Some(to_rpc_error(&MysqlError {
                    code: 1153,
                    state: "08S01".into(),
                    message: format!(
                        "result larger than the gateway's max_result_bytes ({} bytes); use StreamExecute",
                        self.limits.max_result_bytes
                    ).into(),
                }));
            }
            pb::QueryResult {
                fields: sink.fields,
                rows_affected: outcome.rows_affected,
                insert_id: outcome.insert_id,
                rows: sink.rows,
                info: outcome.info,
                insert_id_changed: outcome.insert_id != 0,
                ..Default::default()
            }
        });
        let session = self.finish(lease);
        Ok(pb::ExecuteResponse {
            session: Some(session),
            result: if error.is_some() { None } else { result },
            error,
            timing: started.elapsed().as_secs_f64(),
            local_infile_request: None,
        })
    }

    /// Streams the result as bounded messages into `out` (already-framed
    /// envelopes). Rows are read from the backend only as fast as the
    /// client takes them.
    pub async fn stream_execute(
        &self,
        account: Arc<Account>,
        request: pb::ExecuteRequest,
        mut sink: StreamSink,
    ) {
        let mut lease = match self.lease_or_lost(&account, request.session.as_ref()).await {
            Ok(Ok(lease)) => lease,
            Ok(Err(lost)) => return sink.finish(Some(lost), None).await,
            Err(e) => return sink.finish(None, Some(e)).await,
        };
        // A single result can leave in one write; where a statement ends
        // depends on the session's character set and sql_mode.
        sink.set_single_result(statement::has_one_result(
            &request.query,
            &lease.state.dialect(),
        ));
        // Every result (and its figures) went out as it ended; the last
        // message carries the session and any error.
        let ran = self.run(&account, &mut lease, &request, &mut sink).await;
        let mut last = pb::ExecuteResponse {
            error: ran.error,
            ..Default::default()
        };
        sink.flush().await;
        last.session = Some(self.finish(lease));
        sink.finish(Some(last), None).await;
    }

    pub async fn prepare(
        &self,
        account: Arc<Account>,
        request: pb::PrepareRequest,
    ) -> Result<pb::PrepareResponse, ApiError> {
        let mut lease = match self
            .lease_or_lost(&account, request.session.as_ref())
            .await?
        {
            Ok(lease) => lease,
            Err(lost) => {
                return Ok(pb::PrepareResponse {
                    session: lost.session,
                    error: lost.error,
                    ..Default::default()
                });
            }
        };
        lease.state.state_changes.clear();
        let mut response = pb::PrepareResponse::default();
        self.backend_packet
            .learn(account.pool(), self.connect_timeout)
            .await;
        let too_large = self.backend_packet.check_statement(request.query.len());
        match self.connection(&account, &mut lease).await {
            Ok(_) if let Some(e) = too_large => response.error = Some(to_rpc_error(&e)),
            Err(e) => response.error = Some(to_rpc_error(&e)),
            Ok(conn) => {
                self.fresh.sent(conn, request.query.len());
                match backend::prepare(conn, self.json(&account), &request.query).await {
                    Ok(prepared) => {
                        self.memo(&account, &lease, &request.query)
                            .learn(prepared.shape);
                        response.fields = prepared.columns;
                        response.param_fields = prepared.params;
                        response.params_count = prepared.params_count;
                    }
                    Err(e) => {
                        response.error = Some(to_rpc_error(&e.to_mysql()));
                        if matches!(e, BackendError::Connection(_)) {
                            lease.state.conn = None;
                        }
                    }
                }
            }
        }
        response.session = Some(self.finish(lease));
        Ok(response)
    }

    /// What is known of a prepared statement text `query` run in `lease`'s
    /// session (`statement_shapes`).
    fn memo(&self, account: &Account, lease: &Lease, query: &[u8]) -> Memo<'_> {
        let state = &lease.state;
        Memo {
            shapes: &self.statement_shapes,
            key: statement_shapes::Key::new(
                &account.username,
                state.target.as_deref(),
                &state.dialect(),
                state.charset_name(),
                query,
            ),
        }
    }

    fn json<'a>(&'a self, account: &'a Account) -> JsonLookup<'a> {
        JsonLookup {
            relayed: &self.extended_metadata,
            columns: &self.json_columns,
            account: &account.username,
            pool: account.pool(),
        }
    }

    /// A session's lease, waiting (bounded) for a request still holding it
    /// (so never [`Refusal::Busy`]).
    async fn leased(&self, owner: &str, cookie: Option<&pb::Session>) -> Result<Lease, Refusal> {
        match self.sessions.lease(owner, cookie) {
            Err(Refusal::Busy(slot)) => {
                let lease = self.sessions.wait_for(slot).await?;
                if self.sessions.is_live(&lease.slot) {
                    return Ok(lease);
                }
                // The request waited for ended the session (its backend
                // connection, and so its transaction, lost — as when vtgate
                // refuses to kill a cancelled statement): this one is told
                // so as a new request would be, never run on what is left.
                drop(lease);
                self.sessions.lease(owner, cookie)
            }
            other => other,
        }
    }

    /// A new session's lease (no cookie: never busy).
    fn lease(&self, account: &Account, cookie: Option<&pb::Session>) -> Result<Lease, ApiError> {
        match self.sessions.lease(&account.username, cookie) {
            Ok(lease) => Ok(lease),
            Err(Refusal::Api(e)) => Err(e),
            Err(Refusal::Busy(_)) => Err(busy()),
            Err(Refusal::TransactionLost(fresh, why)) => {
                self.sessions.close(fresh);
                Err(ApiError::new(crate::api::Code::Aborted, why))
            }
        }
    }

    /// A lease, or the response telling the client its transaction is gone
    /// (with a fresh session, so it can go on).
    async fn lease_or_lost(
        &self,
        account: &Account,
        cookie: Option<&pb::Session>,
    ) -> Result<Result<Lease, pb::ExecuteResponse>, ApiError> {
        match self.leased(&account.username, cookie).await {
            Ok(lease) => Ok(Ok(lease)),
            Err(Refusal::Api(e)) => Err(e),
            Err(Refusal::Busy(_)) => Err(busy()),
            Err(Refusal::TransactionLost(fresh, why)) => Ok(Err(pb::ExecuteResponse {
                session: Some(self.sessions.cookie(&fresh.slot, &fresh.state)),
                error: Some(lost_transaction(why)),
                ..Default::default()
            })),
        }
    }

    /// Runs one statement on the session's connection and updates the
    /// session from what happened.
    async fn run<S: ResultSink>(
        &self,
        account: &Account,
        lease: &mut Lease,
        request: &pb::ExecuteRequest,
        sink: &mut S,
    ) -> Ran {
        // Tracking entries belong to the answer of the statement that made them.
        lease.state.state_changes.clear();
        let dialect = lease.state.dialect();
        // Owned: the execute may be bound again once the connection is
        // known (see `all` below).
        let charset = lease.state.charset_name().to_owned();
        let charset = charset.as_str();
        // A MySQL prepared statement runs as one at the backend (binary.rs).
        let bound = if request.prepared {
            binary::statement(
                &request.query,
                &request.bind_variables,
                false,
                &dialect,
                charset,
            )
            .map(|(sql, params)| (sql, Some(params)))
        } else {
            bind::substitute(&request.query, &request.bind_variables, &dialect, charset)
                .map(|sql| (sql, None))
        };
        let (sql, params) = match bound {
            Ok(bound) => bound,
            Err(e) => {
                return Ran {
                    outcome: None,
                    error: Some(to_rpc_error(&e.to_mysql())),
                };
            }
        };
        // For the log only: what runs is `sql`'s bytes.
        debug!(sql = %String::from_utf8_lossy(&sql), "execute");
        // The client of a stream that says it can send a file is asked
        // for it when the backend asks (`local_infile`); others get the
        // server's answer to a client that cannot, unrun — raised at the
        // backend (`local_infile::REFUSAL`), so that its diagnostics area
        // holds it as directly (`SHOW WARNINGS`, `@@error_count`).
        let side = sink.side().filter(|_| request.local_infile);
        let sql = match (&side, &params) {
            (None, None) if statement::is_load_local(&sql) => local_infile::REFUSAL.into(),
            (None, Some(_)) if statement::is_load_local(&sql) => {
                return Ran {
                    outcome: None,
                    error: Some(to_rpc_error(&local_infile::disabled())),
                };
            }
            _ => sql,
        };
        // mysql_async drops the connection rather than send a packet over
        // the backend's max_allowed_packet: refuse it here, unrun.
        self.backend_packet
            .learn(account.pool(), self.connect_timeout)
            .await;
        if let Some(e) = self.backend_packet.check_statement(sql.len()) {
            return Ran {
                outcome: None,
                error: Some(to_rpc_error(&e)),
            };
        }
        // Pinned before it runs: even a failed statement may have left
        // state at the backend (a multi-statement's first part).
        let effect = session_state::classify(&sql, &dialect);
        if let Some(why) = effect.pins {
            lease.state.pin(why);
        }
        let memo = match &params {
            Some(_) => self.memo(account, lease, &request.query),
            None => Memo {
                shapes: &self.statement_shapes,
                key: None,
            },
        };
        let timeout = self.limits.query_timeout;
        let conn = match self.connection(account, lease).await {
            Ok(conn) => conn,
            Err(e) => {
                return Ran {
                    outcome: None,
                    error: Some(to_rpc_error(&e)),
                };
            }
        };
        let conn_id = conn.id();
        // An over-estimate (the text, and every bound value as if it were
        // a parameter too): a connection it grows goes to no new session.
        let values: usize = request.bind_variables.values().map(|v| v.value.len()).sum();
        // A file's packets grow the buffer too (the driver sends each part
        // the client sent as one packet; the sidecar's are 1 MiB).
        let file = if side.is_some() && statement::is_load_local(&sql) {
            local_infile::PART_HINT
        } else {
            0
        };
        self.fresh.sent(conn, sql.len() + values + file);
        // Where the relay follows the connection, it puts the client's
        // types back on every parameter: all stay parameters, so a result
        // column made of one is typed as directly (not as its literal).
        let all = params
            .as_ref()
            .filter(|_| self.extended_metadata.follows(conn_id))
            .and_then(|_| {
                binary::statement(
                    &request.query,
                    &request.bind_variables,
                    true,
                    &dialect,
                    charset,
                )
                .ok()
            });
        let gone = sink.gone();
        let asker = side.map(|side| Asker {
            owner: account.username.clone(),
            loads: self.loads.clone(),
            side,
            gone: Box::pin(sink.gone()),
            pool: account.pool().clone(),
            conn_id,
        });
        let result = {
            let json = self.json(account);
            let running = Asker::scope(asker, async {
                match (all, params) {
                    (Some((client_sql, all)), Some(params)) => {
                        let literal = (&sql[..], params);
                        binary::run_all(conn, json, &memo, (&client_sql, all), literal, sink).await
                    }
                    (None, Some(params)) => {
                        let bound = (&sql[..], params);
                        binary::run_unrelayed(conn, json, &memo, &request.query, bound, sink).await
                    }
                    (_, None) => backend::run(conn, json, &sql, sink).await,
                }
            });
            tokio::pin!(running);
            let why = tokio::select! {
                r = &mut running => Ok(r),
                () = tokio::time::sleep(timeout) => Err(format!(
                    "the statement exceeded the gateway's query_timeout ({timeout:?}) and was killed"
                )),
                () = gone => Err("the client went away (cancelled the request)".to_string()),
            };
            match why {
                Ok(r) => Ok(r),
                Err(why) => match backend::kill_query(account.pool(), conn_id).await {
                    // MariaDB answers some killed statements (SLEEP,
                    // BENCHMARK) with an ordinary-looking result, so the
                    // backend's answer is never passed on as a success.
                    Ok(()) => Ok(match running.await {
                        Err(e @ BackendError::Connection(_)) => Err(e),
                        _ => Err(BackendError::Sql(MysqlError {
                            code: 1317,
                            state: "70100".into(),
                            message: format!(
                                "Query execution was interrupted: {why}; it may have partially completed"
                            ).into(),
                        })),
                    }),
                    // vtgate refuses KILL: waiting for the statement could
                    // take as long as it runs, so its connection is given
                    // up below, once the statement is dropped.
                    Err(refused) => Err((why, refused.to_mysql())),
                },
            }
        };
        let result = match result {
            Ok(result) => result,
            Err((why, refused)) => {
                warn!(error = ?refused, "could not kill a statement: its backend connection is given up");
                let error = vitess::abandon(&mut lease.state, &why, &refused);
                return Ran {
                    outcome: None,
                    error: Some(to_rpc_error(&error)),
                };
            }
        };
        // DDL may turn a column into JSON or back.
        if statement::may_change_schema(&sql, &dialect) {
            self.json_columns.clear();
            self.statement_shapes.clear();
        }
        let ran = self.session_after(lease, result, &sql, &dialect).await;
        if fresh_connections::may_set_globals(&sql, &dialect)
            && let Some(conn) = lease.state.conn.as_ref()
        {
            match self.fresh.globals_changed(conn).await {
                Ok(mut probe) => {
                    // The gateway's own limit follows `max_allowed_packet`.
                    self.backend_packet.query(&mut probe).await;
                    tokio::spawn(probe.disconnect());
                }
                Err(e) => {
                    warn!(error = ?e, "could not open a connection after SET GLOBAL: older ones stay in use")
                }
            }
        }
        match session_reads::set_names(&sql) {
            Some(names) if ran.error.is_none() => names.record(&mut lease.state),
            _ => self.track_replayable(lease, &effect.sets).await,
        }
        // Where the relay carries the server's own tracking in each
        // result's ending, nothing is read back.
        let relayed = lease
            .state
            .conn
            .as_ref()
            .is_some_and(|conn| self.extended_metadata.tracks_session(conn.id()));
        if ran.error.is_none() && lease.state.tracks_session_state && !relayed {
            self.read_state_changes(lease, &sql, &dialect).await;
        }
        ran
    }

    /// Updates the session from what a statement did.
    async fn session_after(
        &self,
        lease: &mut Lease,
        result: Result<Outcome, BackendError>,
        sql: &[u8],
        dialect: &crate::translate::sql_text::Dialect,
    ) -> Ran {
        let state = &mut *lease.state;
        match result {
            Ok(outcome) => {
                if outcome.insert_id != 0 {
                    state.last_insert_id = outcome.insert_id;
                }
                if outcome.had_rows {
                    state.found_rows = outcome.rows_read;
                    state.row_count = -1;
                } else {
                    state.row_count = outcome.rows_affected as i64;
                }
                let conn = state
                    .conn
                    .as_mut()
                    .expect("connection present while leased");
                state.warnings = if outcome.warnings > 0 {
                    backend::warnings(conn).await.unwrap_or_default()
                } else {
                    Vec::new()
                };
                // The OK packet tells the transaction and autocommit
                // (with autocommit off even a SELECT opens a transaction).
                // The rest of what `session_facts` reads is asked for only
                // after a statement that may have changed it, or when the
                // packet's NO_BACKSLASH_ESCAPES disagrees with the session's
                // belief (a mode set by the server's default): every query
                // of ours is visible to the client (the row number of its
                // next warning, `Com_select`, the optimizer trace).
                let status = backend::ok_status(conn);
                if let Some(status) = status {
                    state.in_transaction = status.in_transaction;
                    state.autocommit = status.autocommit;
                }
                let escapes_moved =
                    status.is_some_and(|s| s.no_backslash_escapes == dialect.backslash_escapes);
                // `SET NAMES` is read from its text (`Rpc::run`).
                let changed = session_reads::set_names(sql).is_none()
                    && session_reads::may_change_followed(sql, dialect, outcome.had_rows);
                if status.is_none() || escapes_moved || changed {
                    self.refresh_session_state(lease).await;
                }
                Ran {
                    outcome: Some(outcome),
                    error: None,
                }
            }
            Err(BackendError::Sql(e)) => {
                state.warnings.clear();
                // An error packet carries no status. Deadlocks and lock
                // timeouts can roll a transaction back, a routine may have
                // opened one before failing: a `COM_PING`'s OK packet tells,
                // unless a failed data statement outside any transaction
                // could have changed none of it. A multi-statement may
                // have run a `USE` before the part that failed: ask.
                let unchanged = state.autocommit
                    && !state.in_transaction
                    && statement::keeps_session_state(sql, dialect);
                if !unchanged {
                    self.status_after_error(lease).await;
                }
                if session_reads::may_change_followed(sql, dialect, false) {
                    self.refresh_session_state(lease).await;
                }
                Ran {
                    outcome: None,
                    error: Some(to_rpc_error(&e)),
                }
            }
            Err(e @ BackendError::Connection(_)) => {
                warn!(error = ?e, "backend connection lost");
                state.conn = None;
                Ran {
                    outcome: None,
                    error: Some(to_rpc_error(&e.to_mysql())),
                }
            }
        }
    }

    /// Reads back the replayable variables a statement set, so that
    /// another backend connection (here or on another gateway) can be set
    /// up the same; a value that cannot be replayed pins the session.
    async fn track_replayable(&self, lease: &mut Lease, sets: &[&'static str]) {
        let state = &mut *lease.state;
        if sets.is_empty() || state.pinned.is_some() {
            return;
        }
        let Some(conn) = state.conn.as_mut() else {
            return;
        };
        match session_state::read_back(conn, sets).await {
            Ok(Ok(values)) => state.replayed.extend(values),
            Ok(Err(why)) => state.pin(why),
            Err(BackendError::Connection(_)) => state.conn = None,
            Err(BackendError::Sql(_)) => state.pin("session variables that could not be read back"),
        }
    }

    /// The session-state tracking entries of a statement that ran, for a
    /// client that reads them: the variables a `SET` assigned that the
    /// session tracks, with their values as the backend shows them now,
    /// then the state change, if the session tracks those.
    async fn read_state_changes(&self, lease: &mut Lease, sql: &[u8], dialect: &Dialect) {
        let names = session_reads::tracked_variables(sql, dialect);
        let follow = session_reads::sets_state_change_tracking(sql, dialect);
        let state = &mut *lease.state;
        // `SET NAMES 'cs' [COLLATE 'co']` (what a sidecar sends for a
        // handshake collation) is read from its text, as without tracking:
        // a read would show in the client's `Com_select`.
        let set_names = session_reads::set_names(sql);
        if let Some(set) = &set_names {
            let list = state.tracked_list.as_deref().unwrap_or(DEFAULT_TRACKED);
            let values: Vec<(String, Vec<u8>)> = names
                .iter()
                .map(|n| (n.clone(), set.charset.as_bytes().to_vec()))
                .collect();
            state.state_changes = session_track::entries(list, &names, &values);
        } else {
            let mut read = names.clone();
            if follow {
                read.push(STATE_CHANGE.into());
            }
            if let Some(conn) = state.conn.as_mut().filter(|_| !read.is_empty()) {
                match session_state::read_tracked(conn, &read).await {
                    Ok((list, values)) => {
                        state.state_changes = session_track::entries(&list, &names, &values);
                        state.tracked_list = Some(list);
                        if follow {
                            state.tracks_state_change = values
                                .iter()
                                .any(|(n, v)| n == STATE_CHANGE && v.eq_ignore_ascii_case(b"ON"));
                        }
                    }
                    Err(BackendError::Connection(_)) => state.conn = None,
                    Err(BackendError::Sql(e)) => {
                        debug!(code = e.code, "tracked variables unavailable")
                    }
                }
            }
        }
        // Only sessions that track state changes pay for the scan.
        if state.tracks_state_change
            && (set_names.is_some() || session_reads::marks_state_change(sql, dialect))
        {
            let changes = std::mem::take(&mut state.state_changes);
            state.state_changes = session_track::with_state_change(changes);
        }
    }

    /// The transaction and autocommit after a statement that failed, from
    /// the status flags of a `COM_PING`'s OK packet: unlike a query, a
    /// ping leaves the diagnostics area (the client's `SHOW WARNINGS`,
    /// the row number of its next warning) and the statement counters as
    /// they were.
    async fn status_after_error(&self, lease: &mut Lease) {
        use mysql_async::prelude::Queryable;
        let state = &mut *lease.state;
        let Some(conn) = state.conn.as_mut() else {
            return;
        };
        match conn.ping().await {
            Ok(()) => {
                if let Some(status) = backend::ok_status(conn) {
                    state.in_transaction = status.in_transaction;
                    state.autocommit = status.autocommit;
                }
            }
            Err(e) => {
                warn!(error = ?e, "backend connection lost");
                state.conn = None;
            }
        }
    }

    /// Asks the backend what the last statement may have changed. The
    /// default database becomes the session's target, as `USE` changes a
    /// Vitess session's `target_string`: the cookie tells the client where
    /// it is (a sidecar keeps it across `COM_RESET_CONNECTION`), and a
    /// replacement backend connection starts there too.
    async fn refresh_session_state(&self, lease: &mut Lease) {
        let state = &mut *lease.state;
        let Some(conn) = state.conn.as_mut() else {
            return;
        };
        match backend::session_facts(conn).await {
            Ok(facts) => {
                if facts.database.is_some() {
                    self.fresh.moved(conn);
                }
                state.in_transaction = facts.in_transaction;
                state.autocommit = facts.autocommit;
                state.target = facts.database;
                state.charset = facts.charset;
                state.sql_mode = facts.sql_mode;
                state.wait_timeout = facts.wait_timeout;
            }
            Err(BackendError::Connection(_)) => state.conn = None,
            Err(BackendError::Sql(e)) => debug!(code = e.code, "session state unavailable"),
        }
    }

    /// The session's pinned connection, taken from the pool at first use
    /// (and switched to the session's target database, if it names one).
    async fn connection<'a>(
        &self,
        account: &Account,
        lease: &'a mut Lease,
    ) -> Result<&'a mut mysql_async::Conn, MysqlError> {
        let state = &mut *lease.state;
        if state.conn.is_none() {
            if state.backend_share.is_none() {
                // Waits (up to connect_timeout) while the credential is
                // over its share and others need connections.
                let share = (self.backend_shares)
                    .acquire(&account.username, self.connect_timeout)
                    .await?;
                state.backend_share = Some(share);
            }
            let pool = account.pool_for(state.client_found_rows);
            // A session without a database finds none, as on a fresh
            // connection (with one, it is selected below).
            let clear_database = state.target.is_none() && account.database.is_none();
            let mut conn = tokio::time::timeout(
                self.connect_timeout,
                self.fresh_conn(
                    &account.username,
                    pool,
                    clear_database,
                    state.connect_attrs.as_ref(),
                ),
            )
            .await
            .map_err(|_| not_connected("timed out waiting for a backend connection"))?
            .map_err(|e| match e {
                // Nothing was sent: not "lost during query", which tells
                // a client the statement may have run.
                BackendError::Connection(detail) => not_connected(&detail),
                sql => sql.to_mysql(),
            })?;
            // A pooled connection has the pool's character set and the
            // server's default mode, whatever the last one had.
            state.charset = None;
            state.sql_mode = None;
            state.wait_timeout = None;
            if let Some(target) = &state.target {
                match backend::select_database(&mut conn, target).await {
                    Ok(()) => self.fresh.moved(&conn),
                    // Unknown database, or no grant: the request fails
                    // without running, the session goes on in the
                    // account's default database (as after a failed
                    // `USE`), and the cookie no longer names the target.
                    Err(BackendError::Sql(e)) => {
                        state.target = None;
                        state.conn = Some(conn);
                        return Err(e);
                    }
                    Err(e @ BackendError::Connection(_)) => return Err(e.to_mysql()),
                }
            }
            let replay = session_state::replay_statement(
                &state.replayed,
                state.autocommit,
                state.last_insert_id,
            );
            if let Some(replay) = replay {
                use mysql_async::prelude::Queryable;
                // Refused (a time zone this server does not know): the
                // request fails unrun rather than run with other settings.
                conn.query_drop(replay)
                    .await
                    .map_err(|e| BackendError::from(e).to_mysql())?;
                let variable =
                    |name: &str| state.replayed.get(name).map(|v| session_state::unquote(v));
                state.charset = variable("character_set_client").filter(|v| v != "NULL");
                state.sql_mode = variable("sql_mode");
            }
            state.conn = Some(conn);
        }
        Ok(state.conn.as_mut().expect("set above"))
    }

    /// A pooled connection opened after the last `SET GLOBAL` (older ones
    /// are closed as they come up), with `clear_database`, without a
    /// default database (`COM_CHANGE_USER` clears one a session left; a
    /// backend that refuses it, as vtgate does, gets such connections
    /// closed instead), and carrying the client's connection attributes
    /// `attrs` where the relay can give them (`connect_attrs`: the same
    /// `COM_CHANGE_USER`, with the attributes written in by the relay; a
    /// connection that already carries them is taken as it is).
    async fn fresh_conn(
        &self,
        account: &str,
        pool: &mysql_async::Pool,
        clear_database: bool,
        attrs: Option<&ConnectAttrs>,
    ) -> Result<mysql_async::Conn, BackendError> {
        loop {
            let mut conn = pool.get_conn().await?;
            if self.fresh.is_stale(&conn) {
                tokio::spawn(conn.disconnect());
                continue;
            }
            // A change of user resets the session too.
            let first_use = self.fresh.first_use(&conn);
            let clear = self.fresh.take_moved(&conn) && clear_database;
            let follows = self.extended_metadata.can_identify(conn.id());
            let reidentify = follows && !self.fresh.attrs.matches(conn.id(), attrs);
            if (clear || reidentify) && self.fresh.change_user_works(account) {
                // Each change of user carries the session's attributes (or
                // none), whether or not it is made for them.
                let identify = attrs.map(|a| Identify {
                    block: a.block.clone(),
                    collation: a.collation,
                });
                self.extended_metadata.identify(conn.id(), identify);
                match conn.change_user(Default::default()).await {
                    Ok(()) => {
                        self.fresh.attrs.set(conn.id(), attrs.filter(|_| follows));
                        return Ok(conn);
                    }
                    Err(mysql_async::Error::Server(e)) => {
                        self.extended_metadata.identify(conn.id(), None);
                        warn!(
                            code = e.code,
                            user = account,
                            "the backend refuses COM_CHANGE_USER: this credential's connections left in a database are closed instead, and keep the connection attributes they have"
                        );
                        self.fresh.change_user_refused(account);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            if !clear {
                if first_use {
                    conn.reset().await?;
                }
                // Where the attributes cannot be changed, the connection
                // keeps those it has.
                return Ok(conn);
            }
            tokio::spawn(conn.disconnect());
        }
    }

    /// Ends a request: a session whose connection broke is discarded (and
    /// remembered if it held a transaction), others stay for the next.
    fn finish(&self, lease: Lease) -> pb::Session {
        let cookie = self.sessions.cookie(&lease.slot, &lease.state);
        // Draining: no later request can reach this gateway, so a pinned
        // session ends now (its connection returns to the pool, which
        // rolls it back) rather than hold its locks to the end of the drain.
        let ended = lease.state.conn.is_none() || self.sessions.is_draining();
        if ended && lease.state.is_pinned() {
            self.sessions.discard(lease, true);
        }
        cookie
    }
}

/// ER_CONNECTION_KILLED, which the sidecar answers and then closes the
/// client's connection, as a server whose connection died would.
fn lost_transaction(why: &str) -> RpcError {
    let mut e = to_rpc_error(&MysqlError {
        code: 1927,
        state: "70100".into(),
        message: why.into(),
    });
    e.code = VtCode::Aborted as i32;
    e
}

/// Collects a unary result, up to a size limit.
#[derive(Default)]
struct Collect {
    fields: Vec<pb::Field>,
    rows: Vec<pb::Row>,
    bytes: usize,
    limit: usize,
    overflow: bool,
    has_fields: bool,
}

impl ResultSink for Collect {
    async fn fields(&mut self, fields: Vec<pb::Field>) -> Flow {
        // A unary result carries one result set: the first.
        if self.has_fields {
            return Flow::Discard;
        }
        self.has_fields = true;
        self.fields = fields;
        Flow::Continue
    }

    async fn end(&mut self, _summary: Summary) {}

    async fn row(&mut self, row: &dyn Cells) -> Flow {
        self.bytes += cells_size(row);
        if self.bytes > self.limit {
            self.overflow = true;
            self.rows = Vec::new();
            return Flow::Discard;
        }
        self.rows.push(pack(row));
        Flow::Continue
    }
}
