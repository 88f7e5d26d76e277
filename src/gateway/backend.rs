//! The MySQL/MariaDB backend: connection pools and running statements,
//! with rows handed to a sink as they arrive so memory does not grow with
//! the size of a result.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use mysql_async::prelude::Queryable;
use mysql_async::{Column, Conn, OptsBuilder, PoolConstraints, PoolOpts, SslOpts};

use crate::api::pb;
use crate::api::row_batch::Cells;
use crate::config::BackendConfig;
use crate::mysql::MysqlError;
use crate::translate::types::{blob_subtype_name, vitess_type};

use super::error_text::with_server_bytes;
use super::extended_metadata::{self, ExtendedMetadata, RowTap, Tapped};
use super::json_columns::JsonColumns;
use super::statement_shapes::Shape;
use super::text_rows::{BadRow, TextRows};
use super::vitess::{MAX_WARNINGS, WARNINGS_QUERY};

/// How a backend call failed.
#[derive(Debug)]
pub enum BackendError {
    /// The server rejected the statement; the connection is fine.
    Sql(MysqlError),
    /// The connection is unusable; the statement may or may not have run.
    Connection(String),
}

impl From<mysql_async::Error> for BackendError {
    fn from(e: mysql_async::Error) -> Self {
        match e {
            mysql_async::Error::Server(s) => Self::Sql(MysqlError {
                code: s.code,
                state: s.state,
                message: s.message.into(),
            }),
            other => Self::Connection(other.to_string()),
        }
    }
}

impl BackendError {
    /// As a MySQL error, for the client. A broken connection is reported
    /// as MySQL's "lost connection during query" (2013).
    pub fn to_mysql(&self) -> MysqlError {
        match self {
            Self::Sql(e) => e.clone(),
            // mysql_async refused to send a packet over the connection's
            // max_allowed_packet (one opened before an operator raised the
            // server's; the gateway checks the current value first) and
            // dropped the connection.
            Self::Connection(detail) if detail.contains("larger than max_allowed_packet") => {
                MysqlError {
                    code: 1153,
                    state: "08S01".into(),
                    message: format!(
                        "Got a packet bigger than 'max_allowed_packet' bytes: larger than the backend connection's max_allowed_packet ({detail}); it was not run, and that backend connection was closed"
                    ).into(),
                }
            }
            Self::Connection(detail) => MysqlError {
                code: 2013,
                state: "HY000".into(),
                message: format!("Lost connection to backend MySQL server during query: {detail}").into(),
            },
        }
    }
}

/// How long a pooled backend connection beyond `warm_connections` may
/// stay unused before it is closed.
pub const IDLE_CONNECTION_TTL: Duration = Duration::from_secs(10);

/// A pool of connections for one backend account; over TLS with `ssl`,
/// else through `relay` if given (`extended_metadata`).
pub fn pool(
    config: &BackendConfig,
    user: &str,
    password: &str,
    database: Option<&str>,
    client_found_rows: bool,
    ssl: Option<SslOpts>,
    relay: Option<&Path>,
) -> mysql_async::Pool {
    let relay = relay.filter(|_| ssl.is_none());
    let mut setup = vec!["SET NAMES utf8mb4".to_string()];
    if let Some(db) = database {
        setup.push(format!("USE `{}`", db.replace('`', "``")));
    }
    let constraints = PoolConstraints::new(
        config.warm_connections.min(config.max_connections),
        config.max_connections,
    )
    .expect("validated: warm <= max");
    let opts = OptsBuilder::default()
        .user(Some(user))
        .pass(Some(password))
        .db_name(database)
        .client_found_rows(client_found_rows)
        .setup(setup)
        // Nothing stays prepared at the backend (`statement_shapes`).
        .stmt_cache_size(0)
        // LOAD DATA LOCAL INFILE: the file of the statement's client
        // (`local_infile`), asked for when the backend asks.
        .local_infile_handler(Some(super::local_infile::handler))
        // The client's own limit, as libmariadb's: mysql_async otherwise
        // takes the server's session value as its limit for packets both
        // ways, and a connection opened after `SET GLOBAL
        // max_allowed_packet = 2048` could not read a result a direct
        // client reads (a row that a server-side limit turned into NULL
        // with a warning). What the gateway sends is checked against the
        // server's value first (`packet_limit`).
        .max_allowed_packet(Some(super::packet_limit::MAX_BACKEND_PACKET))
        .ssl_opts(ssl)
        .pool_opts(
            PoolOpts::default()
                .with_constraints(constraints)
                .with_reset_connection(true)
                // Connections beyond the warm ones close after 10 s unused:
                // a credential's burst must not keep the backend's
                // max_connections after it (see `shares`).
                .with_inactive_connection_ttl(IDLE_CONNECTION_TTL)
                .with_ttl_check_interval(Duration::from_secs(1)),
        );
    let socket = relay.or(config.socket.as_deref());
    let opts = match (socket, &config.address) {
        (Some(socket), _) => opts
            .ip_or_hostname("localhost")
            // mysql_async takes the path as a String; a configured path
            // that is not UTF-8 is refused by no check of ours but found
            // by no connect (config, not data).
            .socket(Some(socket.to_string_lossy().into_owned()))
            .prefer_socket(true),
        (None, Some(address)) => {
            let (host, port) = split_host_port(address);
            opts.ip_or_hostname(host)
                .tcp_port(port)
                .prefer_socket(false)
        }
        (None, None) => opts,
    };
    mysql_async::Pool::new(opts)
}

/// `host:port`, `[v6]:port` or a bare host (port 3306).
pub fn split_host_port(address: &str) -> (String, u16) {
    match address.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.ends_with(':') => (
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port.parse().expect("checked"),
        ),
        _ => (address.to_string(), 3306),
    }
}

/// Opens `count` connections and returns them to the pool, so the first
/// sessions find them ready (no backend handshake on the request path).
pub async fn warm(pool: &mysql_async::Pool, count: usize) -> Result<(), BackendError> {
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        conns.push(pool.get_conn().await?);
    }
    drop(conns);
    Ok(())
}

/// Whether the sink wants more rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Read and discard the rest of the result (keeps the connection in
    /// protocol sync).
    Discard,
}

/// Receives a result as it is read from the backend.
pub trait ResultSink: Send {
    /// The columns of a new result set.
    fn fields(&mut self, fields: Vec<pb::Field>) -> impl Future<Output = Flow> + Send;
    /// One row, read where the driver holds it.
    fn row(&mut self, row: &dyn Cells) -> impl Future<Output = Flow> + Send;
    /// The end of one result: of a result set (after its rows, with
    /// `ended_rows`), or an OK result of a statement without columns.
    fn end(&mut self, summary: Summary) -> impl Future<Output = ()> + Send;
    /// Resolves when nobody wants the result any more (the client went
    /// away), so the statement can be stopped at the backend.
    fn gone(&self) -> impl Future<Output = ()> + Send + 'static {
        std::future::pending()
    }
    /// Where a message can go while the driver holds the sink, for a
    /// statement whose client can send a file (`local_infile`): only a
    /// stream's.
    fn side(&self) -> Option<super::local_infile::Side> {
        None
    }
}

/// How one result ended.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The result was a result set (columns and rows), not an OK.
    pub ended_rows: bool,
    pub rows_affected: u64,
    pub insert_id: u64,
    pub info: String,
    /// The warning count of the packet that ended the result, where
    /// known (see [`result_ending`]).
    pub warnings: Option<u16>,
    /// That packet's status flags, where the relay could read them
    /// (`None`: a connection it does not follow).
    pub status: Option<u16>,
    /// That packet's session-state information, as the server wrote it
    /// (empty: no change), where the relay asked the server for it.
    pub session_state: Option<Vec<u8>>,
}

/// The final OK packet's figures.
#[derive(Debug, Default)]
pub struct Outcome {
    pub rows_affected: u64,
    pub insert_id: u64,
    pub info: String,
    pub warnings: u16,
    /// Whether any result set had columns (a SELECT-like statement).
    pub had_rows: bool,
    pub rows_read: u64,
}

/// Where a result's extended column metadata comes from: the relay's
/// record of the connection, or, for a connection the relay cannot read
/// (TLS), the JSON columns' cache and the pool that answers a miss (never
/// the session's own connection).
#[derive(Clone, Copy)]
pub struct JsonLookup<'a> {
    pub relayed: &'a ExtendedMetadata,
    pub columns: &'a JsonColumns,
    /// The session's API user, whose answers are its own.
    pub account: &'a str,
    pub pool: &'a mysql_async::Pool,
}

impl JsonLookup<'_> {
    /// The fields of `columns`, a result read on connection `conn`.
    pub(super) async fn fields(&self, conn: u32, columns: &[Column]) -> Vec<pb::Field> {
        let mut fields: Vec<pb::Field> = columns.iter().map(field).collect();
        match self.relayed.infos(conn, columns) {
            Some(infos) => {
                for (field, info) in fields.iter_mut().zip(infos) {
                    // MariaDB's JSON is a BLOB (252) on the wire, which
                    // the sidecar writes for the Vitess JSON type; another
                    // blob type keeps its own (`column_type` names it).
                    let blob = field.r#type == pb::Type::Text as i32
                        || field.r#type == pb::Type::Blob as i32;
                    if extended_metadata::is_json(&info) && blob && field.column_type.is_empty() {
                        field.r#type = pb::Type::Json as i32;
                    }
                    field.extended_metadata = info.into();
                }
            }
            None => {
                self.columns
                    .mark(self.account, self.pool, &mut fields)
                    .await
            }
        }
        fields
    }
}

/// Runs `sql` (text protocol) and feeds every result set to `sink`.
pub async fn run<S: ResultSink>(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    sql: &[u8],
    sink: &mut S,
) -> Result<Outcome, BackendError> {
    match read_results(conn, json, sql, sink).await {
        Err(BackendError::Sql(e)) => Err(BackendError::Sql(with_server_bytes(conn, e).await)),
        ran => ran,
    }
}

async fn read_results<S: ResultSink>(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    sql: &[u8],
    sink: &mut S,
) -> Result<Outcome, BackendError> {
    let id = conn.id();
    // Claimed before the statement goes, given up once its results are
    // read: the gateway's own queries after it are its driver's.
    let mut diverted = json.relayed.tap(id).map(Diverted::new);
    let result = conn.query_iter(sql).await?;
    let outcome = feed_results(result, id, json, sink, diverted.as_mut(), |_, row| {
        TextRow(row)
    })
    .await?;
    Ok(with_connection_warnings(conn, outcome))
}

/// The rows of a statement's text result sets, as the relay diverts them
/// from the driver (`extended_metadata::tap`), read from their packets.
pub(super) struct Diverted {
    tap: RowTap,
    rows: TextRows,
}

impl Diverted {
    fn new(tap: RowTap) -> Self {
        Self {
            tap,
            rows: TextRows::default(),
        }
    }

    /// Moves to the next row of the result set whose columns the driver
    /// just read (`rows.row()`); `false` once its rows ended, when the
    /// driver reads how the result ended.
    async fn next(&mut self) -> Result<bool, BackendError> {
        let bad = |e: BadRow| {
            BackendError::Connection(format!("a row the gateway could not read: {}", e.0))
        };
        loop {
            if self.rows.advance().map_err(bad)? {
                return Ok(true);
            }
            match self.tap.recv().await {
                Some(Tapped::Rows(chunk)) => self.rows.feed(chunk),
                Some(Tapped::End) if self.rows.between_rows() => return Ok(false),
                Some(Tapped::End) => return Err(bad(BadRow("the rows ended mid-row"))),
                // The connection ended, and the relay closed the driver's
                // socket: the driver says how.
                None => return Ok(false),
            }
        }
    }
}

/// A text-protocol row: its cells are the server's bytes (or NULL).
struct TextRow(mysql_async::Row);

impl Cells for TextRow {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn cell(&self, i: usize) -> Option<&[u8]> {
        match self.0.as_ref(i) {
            Some(mysql_async::Value::Bytes(b)) => Some(b),
            _ => None,
        }
    }
}

/// Feeds every result of `result` (text or binary protocol, read on
/// connection `conn`) to `sink`, each row's cells read by `cells`, or,
/// for the result sets whose rows are `diverted`, from their packets;
/// what the results said, summed up.
pub(super) async fn feed_results<P, S, F, C>(
    mut result: mysql_async::QueryResult<'_, 'static, P>,
    conn: u32,
    json: JsonLookup<'_>,
    sink: &mut S,
    mut diverted: Option<&mut Diverted>,
    cells: F,
) -> Result<Outcome, BackendError>
where
    P: mysql_async::prelude::Protocol,
    S: ResultSink,
    F: Fn(&[Column], mysql_async::Row) -> C,
    C: Cells,
{
    let mut outcome = Outcome::default();
    let mut flow = Flow::Continue;
    // One pass per result: `columns()` is `None` once every result (the
    // last OK of a multi-statement included) has been read.
    while let Some(columns) = result.columns() {
        let mut summary = Summary::default();
        // An OK result's figures are the driver's now; after a set's
        // rows, the driver may already have read the next result.
        let ok_warnings = columns.is_empty().then(|| result.warnings());
        if columns.is_empty() {
            outcome.rows_affected = result.affected_rows();
            outcome.insert_id = result.last_insert_id().unwrap_or(0);
            outcome.info = result.info().into_owned();
            summary.rows_affected = outcome.rows_affected;
            summary.insert_id = outcome.insert_id;
            summary.info = outcome.info.clone();
        } else {
            summary.ended_rows = true;
            outcome.had_rows = true;
            if flow == Flow::Continue {
                flow = sink.fields(json.fields(conn, &columns).await).await;
            }
        }
        if let Some(diverted) = diverted.as_deref_mut()
            && !columns.is_empty()
        {
            diverted.rows.start(columns.len());
            while diverted.next().await? {
                outcome.rows_read += 1;
                if flow == Flow::Continue {
                    flow = sink.row(&diverted.rows.row()).await;
                }
            }
        }
        // Empty when the rows were diverted: the driver reads the ending.
        while let Some(row) = result.next().await? {
            outcome.rows_read += 1;
            if flow == Flow::Continue {
                flow = sink.row(&cells(&columns, row)).await;
            }
        }
        outcome.warnings = result.warnings();
        // After a set, the driver's last OK is its terminator only if a
        // set follows: it has read what comes next, and an OK result
        // replaces it, an error clears it (the last result's count is the
        // session's anyway).
        let next_is_set = result.columns().is_some_and(|c| !c.is_empty());
        let read = ok_warnings.or(next_is_set.then_some(outcome.warnings));
        // The relay noted the ending before the driver read it.
        (summary.status, summary.warnings, summary.session_state) =
            result_ending(json.relayed.ending(conn), read);
        sink.end(summary).await;
    }
    // A later statement of a multi-statement query that failed leaves its
    // error pending (`columns()` hides it); this surfaces it.
    result.next().await?;
    Ok(outcome)
}

/// The status flags and warning count a result ended with: as the relay
/// noted them (`noted`), unless the warning count the driver read
/// (`read`, where it is the result's) differs — the two would not be the
/// same packet; else the driver's warning count alone. The session-state
/// information goes with the status flags.
fn result_ending(
    noted: Option<extended_metadata::Ending>,
    read: Option<u16>,
) -> (Option<u16>, Option<u16>, Option<Vec<u8>>) {
    match noted {
        Some(ending) if read.is_none_or(|w| w == ending.warnings) => {
            (Some(ending.status), Some(ending.warnings), ending.state)
        }
        _ => (None, read, None),
    }
}

/// The warning count of the last result, or the connection's if larger
/// (an OK after the rows may carry more).
pub(super) fn with_connection_warnings(conn: &Conn, mut outcome: Outcome) -> Outcome {
    outcome.warnings = outcome.warnings.max(conn.get_warnings());
    outcome
}

/// A column definition as a Vitess `Field`, every attribute kept.
pub fn field(column: &Column) -> pb::Field {
    let flags = column.flags().bits();
    pb::Field {
        // The names' bytes, in the session's character_set_results.
        name: Bytes::copy_from_slice(column.name_ref()),
        r#type: vitess_type(column.column_type() as u8, flags) as i32,
        table: Bytes::copy_from_slice(column.table_ref()),
        org_table: Bytes::copy_from_slice(column.org_table_ref()),
        database: Bytes::copy_from_slice(column.schema_ref()),
        org_name: Bytes::copy_from_slice(column.org_name_ref()),
        column_length: column.column_length(),
        charset: u32::from(column.character_set()),
        decimals: u32::from(column.decimals()),
        flags: u32::from(flags),
        column_type: blob_subtype_name(column.column_type() as u8, flags).into(),
        extended_metadata: Bytes::new(),
    }
}

/// `SHOW WARNINGS`, for a statement that reported some. A message is in
/// the session's `character_set_results` and may quote bytes that are not
/// UTF-8 (a table name in cp1251): read and carried as bytes, never as
/// `String` (mysql_common panics on a row it cannot convert).
pub async fn warnings(conn: &mut Conn) -> Result<Vec<pb::QueryWarning>, BackendError> {
    let rows: Vec<(Vec<u8>, u32, Vec<u8>)> = conn.query(WARNINGS_QUERY).await?;
    Ok(rows
        .into_iter()
        .take(MAX_WARNINGS)
        .map(|(_, code, message)| pb::QueryWarning {
            code,
            message: Bytes::from(message),
        })
        .collect())
}

/// What a statement may have changed in a connection's session, asked of
/// the server in one query.
pub struct SessionFacts {
    pub in_transaction: bool,
    pub autocommit: bool,
    /// `DATABASE()`: `USE`, or dropping the current database, changes it.
    pub database: Option<String>,
    /// `@@character_set_client`: how the server reads SQL text and string
    /// parameters.
    pub charset: Option<String>,
    /// `@@sql_mode`: `NO_BACKSLASH_ESCAPES` and `ANSI_QUOTES` change where
    /// strings end (and drivers escape by the first).
    pub sql_mode: Option<String>,
    /// `@@wait_timeout`: how long the server lets the session idle.
    pub wait_timeout: Option<u64>,
}

pub async fn session_facts(conn: &mut Conn) -> Result<SessionFacts, BackendError> {
    // The database name as UTF-8 bytes whatever `character_set_results`
    // the client chose (a binary column is sent unconverted).
    type Row = (
        i64,
        i64,
        Option<Vec<u8>>,
        Option<String>,
        Option<String>,
        Option<u64>,
    );
    // The status flags the statement ended with (`None` after an error),
    // read before this query's own: through vtgate with autocommit off,
    // this query opens a transaction itself.
    let status = ok_status(conn);
    let row: Option<Row> = conn
        .query_first(
            "SELECT @@in_transaction, @@autocommit, \
             CAST(CONVERT(DATABASE() USING utf8mb4) AS BINARY), \
             @@character_set_client, @@sql_mode, @@wait_timeout",
        )
        .await?;
    let (in_tx, autocommit, database, charset, sql_mode, wait_timeout) =
        row.unwrap_or((0, 1, None, None, None, None));
    Ok(SessionFacts {
        in_transaction: super::vitess::in_transaction(status, in_tx),
        autocommit: autocommit != 0,
        database: database.and_then(|d| String::from_utf8(d).ok()),
        charset,
        sql_mode,
        wait_timeout,
    })
}

/// What the status flags of the server's last OK packet say about the
/// session: every statement's final OK carries them, so they cost nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkStatus {
    /// `SERVER_STATUS_IN_TRANS`: what `@@in_transaction` reads.
    pub in_transaction: bool,
    pub autocommit: bool,
    /// The session's `sql_mode` has `NO_BACKSLASH_ESCAPES`.
    pub no_backslash_escapes: bool,
}

/// The last OK packet's [`OkStatus`] (`None` after an error, whose packet
/// carries no status).
pub fn ok_status(conn: &Conn) -> Option<OkStatus> {
    use mysql_common::constants::StatusFlags;
    conn.last_ok_packet().map(|ok| {
        let flags = ok.status_flags();
        OkStatus {
            in_transaction: flags.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
            autocommit: flags.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT),
            no_backslash_escapes: flags.contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES),
        }
    })
}

/// Makes `database` the connection's default database (`USE`).
pub async fn select_database(conn: &mut Conn, database: &str) -> Result<(), BackendError> {
    conn.query_drop(format!("USE `{}`", database.replace('`', "``")))
        .await?;
    Ok(())
}

/// What the backend's COM_STMT_PREPARE answer says of a statement.
pub struct Prepared {
    pub columns: Vec<pb::Field>,
    /// The parameter definitions, one per parameter, as the backend sent
    /// them (MariaDB names a parameter that is a select item by its alias).
    pub params: Vec<pb::Field>,
    pub params_count: u32,
    /// What the client's executes of it need to know (`binary`).
    pub shape: Shape,
}

/// Columns and parameters of a statement, without running it.
pub async fn prepare(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    sql: &[u8],
) -> Result<Prepared, BackendError> {
    let stmt = match conn.prep(sql).await {
        Ok(stmt) => stmt,
        Err(e) => {
            return Err(match BackendError::from(e) {
                BackendError::Sql(e) => BackendError::Sql(with_server_bytes(conn, e).await),
                other => other,
            });
        }
    };
    let columns = json.fields(conn.id(), &stmt.columns()).await;
    // No extended type info to pair (`JsonLookup`): MariaDB describes a
    // parameter before it is bound, as type NULL, whose extended
    // metadata is empty (the relay keeps none for parameters).
    // Parameters all described as unbound go as none, which the sidecar
    // writes the same way: a statement of 65,535 placeholders would
    // otherwise carry 65,535 identical definitions (megabytes, decoded
    // by the sidecar on every prepare).
    let params = if stmt.params().iter().all(is_unbound_parameter) {
        Vec::new()
    } else {
        stmt.params().iter().map(field).collect()
    };
    let params_count = u32::from(stmt.num_params());
    let shape = Shape::of(sql, &stmt.columns());
    conn.close(stmt).await?;
    Ok(Prepared {
        columns,
        params,
        params_count,
        shape,
    })
}

/// How MariaDB describes a parameter that nothing names (not a select
/// item with an alias): `?`, type NULL, binary, and nothing else — what
/// the sidecar writes for a parameter it has no definition of.
fn is_unbound_parameter(param: &mysql_async::Column) -> bool {
    use mysql_common::constants::{ColumnFlags, ColumnType};
    param.name_ref() == b"?"
        && param.column_type() == ColumnType::MYSQL_TYPE_NULL
        && param.character_set() == 63
        && param.flags() == ColumnFlags::BINARY_FLAG
        && param.column_length() == 0
        && param.decimals() == 0
        && param.table_ref().is_empty()
        && param.org_table_ref().is_empty()
        && param.schema_ref().is_empty()
        && param.org_name_ref().is_empty()
}

/// Stops the statement running on connection `id` (`KILL QUERY`), from
/// another connection of the same pool.
pub async fn kill_query(pool: &mysql_async::Pool, id: u32) -> Result<(), BackendError> {
    let mut conn = pool.get_conn().await?;
    conn.query_drop(format!("KILL QUERY {id}")).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::split_host_port;

    #[test]
    fn backend_addresses() {
        assert_eq!(
            split_host_port("db.internal:3307"),
            ("db.internal".into(), 3307)
        );
        assert_eq!(split_host_port("db.internal"), ("db.internal".into(), 3306));
        assert_eq!(split_host_port("[::1]:3310"), ("::1".into(), 3310));
        assert_eq!(split_host_port("10.0.0.5:3306"), ("10.0.0.5".into(), 3306));
    }
}
