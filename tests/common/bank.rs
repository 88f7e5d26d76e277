//! A bank workload for the fault and soak suite (`tests/faults.rs`):
//! clients moving money between accounts in transactions, each transfer
//! logged under its own id in the same transaction, with autocommit reads
//! and writes around it — and what it takes to check afterwards that no
//! fault lost, invented or doubled a transfer.
//!
//! Every client runs rounds of: the bank's total (an autocommit read that
//! must always be the opening total: a wrong answer otherwise), a point
//! read of an account (binary protocol), a transfer (`BEGIN`, two
//! `UPDATE`s in account order so transfers never deadlock, the log row,
//! `COMMIT`), and a write of its own note row (binary protocol, a payload
//! of varying size) read back at once (must be what it wrote). Every
//! 100th round it reconnects, so connections come and go all the time.
//! Any error is recorded with its statement and start time; the client
//! then drops its connection and connects again (a connection that may
//! have lost its transaction cannot be trusted with the next one).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Enough accounts that 256 clients rarely queue on the same row: the
/// workload is about faults and memory, not lock convoys.
pub const ACCOUNTS: i64 = 1024;
pub const OPENING_BALANCE: i64 = 1000;
const TOTAL: i64 = ACCOUNTS * OPENING_BALANCE;
/// A transfer id is `client * ID_BLOCK + n`: unique across clients.
const ID_BLOCK: i64 = 1_000_000_000;
/// Rounds between reconnections.
const ROUNDS_PER_CONNECTION: u64 = 100;
/// A statement that takes longer than this counts as failed (and the
/// connection is dropped): nothing in this workload should.
const STATEMENT_LIMIT: Duration = Duration::from_secs(30);

/// Creates the bank's tables in `app`, every account at the opening
/// balance.
pub async fn create(direct: &mut mysql_async::Conn) {
    direct
        .query_drop(
            "CREATE TABLE app.accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB; \
             CREATE TABLE app.transfers (id BIGINT PRIMARY KEY, src BIGINT NOT NULL, \
               dst BIGINT NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB; \
             CREATE TABLE app.notes (client BIGINT PRIMARY KEY, n BIGINT NOT NULL, \
               body LONGBLOB NOT NULL) ENGINE=InnoDB",
        )
        .await
        .expect("creating the bank's tables");
    direct
        .query_drop(format!(
            "INSERT INTO app.accounts SELECT seq, {OPENING_BALANCE} FROM seq_1_to_{ACCOUNTS}"
        ))
        .await
        .expect("opening the accounts");
}

/// One error a client saw.
#[derive(Clone, Debug)]
pub struct Failure {
    pub client: usize,
    /// When the statement (or the connection attempt) began.
    pub started: Instant,
    pub statement: &'static str,
    /// The server error's number and SQLSTATE; `None` for an error that
    /// was not an ERR packet (the connection closed, a timeout).
    pub code: Option<(u16, String)>,
    pub message: String,
}

/// What the clients saw, for [`verify`].
#[derive(Default)]
pub struct Log {
    /// Transfers whose `COMMIT` was acknowledged.
    pub acknowledged: Vec<i64>,
    /// Transfers that failed before their `COMMIT` was sent: never
    /// committed.
    pub rolled_back: Vec<i64>,
    /// Transfers whose `COMMIT` failed: committed or not, but once.
    pub in_doubt: Vec<i64>,
    pub failures: Vec<Failure>,
    /// Answers that were wrong (a total that moved, a note that is not
    /// what was written).
    pub wrong_answers: Vec<String>,
}

/// Shared between the clients and the test.
pub struct Shared {
    /// Acknowledged transfers per client.
    pub committed: Vec<AtomicU64>,
    /// Statements that succeeded, all clients.
    pub statements: AtomicU64,
    /// Notified after every acknowledged transfer.
    progress: Notify,
    /// Notified after every failure.
    failed: Notify,
    /// Per statement: how many succeeded and the time they took.
    pub latency: Mutex<BTreeMap<&'static str, (u64, Duration)>>,
    pub log: Mutex<Log>,
}

impl Shared {
    /// The mean time of each statement that succeeded, in ms.
    pub fn mean_latency_ms(&self) -> BTreeMap<&'static str, f64> {
        self.latency
            .lock()
            .unwrap()
            .iter()
            .map(|(what, (n, total))| (*what, total.as_secs_f64() * 1000.0 / *n as f64))
            .collect()
    }

    pub fn marks(&self) -> Vec<u64> {
        self.committed
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .collect()
    }

    /// Waits until every client has had a transfer acknowledged after
    /// `marks` (from [`Shared::marks`]), up to `within`: for each client,
    /// how long after the call that happened (the time to its first
    /// transfer after the marks).
    pub async fn all_committed_since(&self, marks: &[u64], within: Duration) -> Vec<Duration> {
        let start = Instant::now();
        let mut done: Vec<Option<Duration>> = vec![None; marks.len()];
        loop {
            let notified = self.progress.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            for (i, mark) in marks.iter().enumerate() {
                if done[i].is_none() && self.committed[i].load(Ordering::SeqCst) > *mark {
                    done[i] = Some(start.elapsed());
                }
            }
            if done.iter().all(Option::is_some) {
                return done.into_iter().flatten().collect();
            }
            let left = within.saturating_sub(start.elapsed());
            if tokio::time::timeout(left, notified).await.is_err() {
                let waiting: Vec<usize> = (0..marks.len()).filter(|i| done[*i].is_none()).collect();
                let log = self.log.lock().unwrap();
                let recent: Vec<&Failure> = log.failures.iter().rev().take(5).collect();
                panic!(
                    "clients {waiting:?} committed no transfer within {within:?}; latest failures: {recent:#?}"
                );
            }
        }
    }

    /// Waits until at least `n` failures have been recorded, up to
    /// `within`: the clients have seen the fault.
    pub async fn failures_reach(&self, n: usize, within: Duration) {
        let start = Instant::now();
        loop {
            let notified = self.failed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.log.lock().unwrap().failures.len() >= n {
                return;
            }
            let left = within.saturating_sub(start.elapsed());
            assert!(
                tokio::time::timeout(left, notified).await.is_ok(),
                "clients saw fewer than {n} failures within {within:?}"
            );
        }
    }
}

/// Clients running the bank workload until [`Workload::stop`].
pub struct Workload {
    pub shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
}

impl Workload {
    /// Starts `clients` clients connecting with `opts`, each with a
    /// connection opened first, a few at a time (as a pool fills): 256
    /// logins at the same instant would meet the sidecar's
    /// `max_connections_logging_in` (256), which is not what this
    /// workload is about.
    pub async fn start(clients: usize, opts: mysql_async::Opts) -> Self {
        use futures_util::StreamExt;
        let first: Vec<mysql_async::Conn> = futures_util::stream::iter(0..clients)
            .map(|_| mysql_async::Conn::new(opts.clone()))
            .buffered(16)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .map(|c| c.expect("a client's first connection"))
            .collect();
        let shared = Arc::new(Shared {
            committed: (0..clients).map(|_| AtomicU64::new(0)).collect(),
            statements: AtomicU64::new(0),
            progress: Notify::new(),
            failed: Notify::new(),
            latency: Mutex::default(),
            log: Mutex::new(Log::default()),
        });
        let (stop, stopped) = watch::channel(false);
        let workers = first
            .into_iter()
            .enumerate()
            .map(|(client, conn)| {
                tokio::spawn(run_client(
                    client,
                    conn,
                    opts.clone(),
                    shared.clone(),
                    stopped.clone(),
                ))
            })
            .collect();
        Self {
            shared,
            stop,
            workers,
        }
    }

    /// Stops every client after its current round; what they saw.
    pub async fn stop(self) -> Log {
        self.stop.send(true).unwrap();
        for worker in self.workers {
            tokio::time::timeout(STATEMENT_LIMIT * 2, worker)
                .await
                .expect("a client stops within its statement limit")
                .expect("a client task does not panic");
        }
        std::mem::take(&mut *self.shared.log.lock().unwrap())
    }
}

/// A small deterministic generator: each client's choices differ, and a
/// failing run can be read back.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// How a round ended.
enum Step {
    Done,
    /// A statement failed: the connection is dropped.
    Failed(&'static str, mysql_async::Error, Instant),
}

async fn run_client(
    client: usize,
    first: mysql_async::Conn,
    opts: mysql_async::Opts,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((client as u64 + 1) * 0x100_0001));
    let mut n: i64 = 0;
    let mut conn = Some(first);
    let mut rounds_on_conn = 0u64;
    while !*stop.borrow() {
        let mut c = match conn.take() {
            Some(c) => c,
            None => {
                let started = Instant::now();
                match tokio::time::timeout(STATEMENT_LIMIT, mysql_async::Conn::new(opts.clone()))
                    .await
                {
                    Ok(Ok(c)) => {
                        rounds_on_conn = 0;
                        c
                    }
                    Ok(Err(e)) => {
                        record(&shared, client, "connect", started, &e);
                        backoff().await;
                        continue;
                    }
                    Err(_) => {
                        record_timeout(&shared, client, "connect", started);
                        continue;
                    }
                }
            }
        };
        n += 1;
        match round(&mut c, client, n, &mut rng, &shared).await {
            Step::Done => {
                rounds_on_conn += 1;
                if rounds_on_conn < ROUNDS_PER_CONNECTION {
                    conn = Some(c);
                } else {
                    let _ = tokio::time::timeout(STATEMENT_LIMIT, c.disconnect()).await;
                }
            }
            Step::Failed(statement, e, started) => {
                record(&shared, client, statement, started, &e);
                backoff().await;
            }
        }
    }
    if let Some(c) = conn {
        let _ = tokio::time::timeout(STATEMENT_LIMIT, c.disconnect()).await;
    }
}

/// After an error, before the next attempt: a client that retried at once
/// would spin while a gateway is down.
async fn backoff() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Runs `f` as statement `what`, bounded by [`STATEMENT_LIMIT`].
async fn timed<T>(
    shared: &Shared,
    what: &'static str,
    f: impl std::future::Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, (&'static str, mysql_async::Error, Instant)> {
    let started = Instant::now();
    match tokio::time::timeout(STATEMENT_LIMIT, f).await {
        Ok(Ok(v)) => {
            let mut latency = shared.latency.lock().unwrap();
            let (n, total) = latency.entry(what).or_default();
            *n += 1;
            *total += started.elapsed();
            Ok(v)
        }
        Ok(Err(e)) => Err((what, e, started)),
        Err(_) => Err((
            what,
            mysql_async::Error::Other(format!("no answer within {STATEMENT_LIMIT:?}").into()),
            started,
        )),
    }
}

async fn round(
    c: &mut mysql_async::Conn,
    client: usize,
    n: i64,
    rng: &mut Rng,
    shared: &Shared,
) -> Step {
    match round_inner(c, client, n, rng, shared).await {
        Ok(()) => Step::Done,
        Err((what, e, started)) => Step::Failed(what, e, started),
    }
}

/// What a statement's failure carries back: the statement, the error,
/// when it began.
type Failed = (&'static str, mysql_async::Error, Instant);

/// A round's three parts, in an order that depends on the client: the
/// clients start together, and would otherwise all be in the same part
/// whenever a fault strikes.
async fn round_inner(
    c: &mut mysql_async::Conn,
    client: usize,
    n: i64,
    rng: &mut Rng,
    shared: &Shared,
) -> Result<(), Failed> {
    for part in 0..3 {
        match (part + client) % 3 {
            0 => reads(c, client, rng, shared).await?,
            1 => transfer(c, client, n, rng, shared).await?,
            _ => note(c, client, n, rng, shared).await?,
        }
    }
    Ok(())
}

fn ok(shared: &Shared) {
    shared.statements.fetch_add(1, Ordering::Relaxed);
}

/// The bank's total (always the opening total), and one account.
async fn reads(
    c: &mut mysql_async::Conn,
    client: usize,
    rng: &mut Rng,
    shared: &Shared,
) -> Result<(), Failed> {
    let total: Option<i64> = timed(
        shared,
        "SELECT SUM(balance)",
        c.query_first("SELECT CAST(SUM(balance) AS SIGNED) FROM accounts"),
    )
    .await?;
    ok(shared);
    if total != Some(TOTAL) {
        wrong(shared, format!("client {client}: the total read {total:?}"));
    }
    let account = 1 + rng.next(ACCOUNTS as u64) as i64;
    let _: Option<i64> = timed(
        shared,
        "SELECT balance",
        c.exec_first("SELECT balance FROM accounts WHERE id = ?", (account,)),
    )
    .await?;
    ok(shared);
    Ok(())
}

/// The client's note rewritten and read back (must be what it wrote).
async fn note(
    c: &mut mysql_async::Conn,
    client: usize,
    n: i64,
    rng: &mut Rng,
    shared: &Shared,
) -> Result<(), Failed> {
    let size = rng.next(4096) as usize;
    let body = vec![b'a' + (n % 26) as u8; size];
    timed(
        shared,
        "INSERT notes",
        c.exec_drop(
            "INSERT INTO notes (client, n, body) VALUES (?, ?, ?) \
             ON DUPLICATE KEY UPDATE n = VALUES(n), body = VALUES(body)",
            (client as i64, n, body),
        ),
    )
    .await?;
    ok(shared);
    let read: Option<(i64, i64)> = timed(
        shared,
        "SELECT notes",
        c.exec_first(
            "SELECT n, LENGTH(body) FROM notes WHERE client = ?",
            (client as i64,),
        ),
    )
    .await?;
    ok(shared);
    if read != Some((n, size as i64)) {
        wrong(
            shared,
            format!("client {client}: wrote note ({n}, {size} bytes), read {read:?}"),
        );
    }
    Ok(())
}

/// One transfer in a transaction; its id goes into the log according to
/// how far it got.
async fn transfer(
    c: &mut mysql_async::Conn,
    client: usize,
    n: i64,
    rng: &mut Rng,
    shared: &Shared,
) -> Result<(), Failed> {
    let id = client as i64 * ID_BLOCK + n;
    let src = 1 + rng.next(ACCOUNTS as u64) as i64;
    let dst = 1 + (src + rng.next(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
    let amount = 1 + rng.next(10) as i64;
    // Rows locked in account order: two transfers never wait on each
    // other in a cycle.
    let (first, second) = if src < dst {
        ((src, -amount), (dst, amount))
    } else {
        ((dst, amount), (src, -amount))
    };
    let before_commit = async {
        timed(shared, "BEGIN", c.query_drop("BEGIN")).await?;
        for (account, delta) in [first, second] {
            timed(
                shared,
                "UPDATE accounts",
                c.exec_drop(
                    "UPDATE accounts SET balance = balance + ? WHERE id = ?",
                    (delta, account),
                ),
            )
            .await?;
        }
        timed(
            shared,
            "INSERT transfers",
            c.exec_drop(
                "INSERT INTO transfers (id, src, dst, amount) VALUES (?, ?, ?, ?)",
                (id, src, dst, amount),
            ),
        )
        .await
    }
    .await;
    if let Err(e) = before_commit {
        shared.log.lock().unwrap().rolled_back.push(id);
        return Err(e);
    }
    shared.statements.fetch_add(4, Ordering::Relaxed);
    match timed(shared, "COMMIT", c.query_drop("COMMIT")).await {
        Ok(()) => {
            shared.statements.fetch_add(1, Ordering::Relaxed);
            shared.log.lock().unwrap().acknowledged.push(id);
            shared.committed[client].fetch_add(1, Ordering::SeqCst);
            shared.progress.notify_waiters();
            Ok(())
        }
        Err(e) => {
            shared.log.lock().unwrap().in_doubt.push(id);
            Err(e)
        }
    }
}

fn wrong(shared: &Shared, what: String) {
    shared.log.lock().unwrap().wrong_answers.push(what);
}

fn record(
    shared: &Shared,
    client: usize,
    statement: &'static str,
    started: Instant,
    e: &mysql_async::Error,
) {
    let code = match e {
        mysql_async::Error::Server(s) => Some((s.code, s.state.clone())),
        _ => None,
    };
    shared.log.lock().unwrap().failures.push(Failure {
        client,
        started,
        statement,
        code,
        message: e.to_string(),
    });
    shared.failed.notify_waiters();
}

fn record_timeout(shared: &Shared, client: usize, statement: &'static str, started: Instant) {
    shared.log.lock().unwrap().failures.push(Failure {
        client,
        started,
        statement,
        code: None,
        message: format!("no answer within {STATEMENT_LIMIT:?}"),
    });
    shared.failed.notify_waiters();
}

/// What the database holds, checked against what the clients saw.
#[derive(Debug)]
pub struct Verdict {
    pub acknowledged: usize,
    pub rolled_back: usize,
    pub in_doubt: usize,
    /// Of the in-doubt transfers, how many did commit.
    pub in_doubt_committed: usize,
}

/// Checks, on a direct connection to the backend: the total is the
/// opening total; every acknowledged transfer is logged; no transfer that
/// failed before its `COMMIT` is; nothing is logged that no client sent;
/// and every account's balance is exactly its opening balance plus the
/// logged transfers — so no transfer was applied twice or without its log
/// row, whatever its acknowledgement. Panics saying which fails.
pub async fn verify(direct: &mut mysql_async::Conn, log: &Log) -> Verdict {
    assert!(
        log.wrong_answers.is_empty(),
        "wrong answers: {:#?}",
        log.wrong_answers
    );
    let total: i64 = direct
        .query_first("SELECT CAST(SUM(balance) AS SIGNED) FROM app.accounts")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, TOTAL, "the bank's total holds");
    let logged: HashSet<i64> = direct
        .query::<i64, _>("SELECT id FROM app.transfers")
        .await
        .unwrap()
        .into_iter()
        .collect();
    let missing: Vec<&i64> = log
        .acknowledged
        .iter()
        .filter(|id| !logged.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged transfers missing: {missing:?}"
    );
    let resurrected: Vec<&i64> = log
        .rolled_back
        .iter()
        .filter(|id| logged.contains(id))
        .collect();
    assert!(
        resurrected.is_empty(),
        "transfers that failed before COMMIT were committed: {resurrected:?}"
    );
    let in_doubt_committed = log.in_doubt.iter().filter(|id| logged.contains(id)).count();
    assert_eq!(
        logged.len(),
        log.acknowledged.len() + in_doubt_committed,
        "logged transfers that no client had acknowledged or in doubt"
    );
    let mismatched: Vec<(i64, i64, i64)> = direct
        .query(format!(
            "SELECT a.id, a.balance, CAST({OPENING_BALANCE} \
               - COALESCE((SELECT SUM(amount) FROM app.transfers WHERE src = a.id), 0) \
               + COALESCE((SELECT SUM(amount) FROM app.transfers WHERE dst = a.id), 0) AS SIGNED) AS expected \
             FROM app.accounts a HAVING a.balance <> expected"
        ))
        .await
        .unwrap();
    assert!(
        mismatched.is_empty(),
        "balances that the logged transfers do not explain (id, balance, expected): {mismatched:?}"
    );
    Verdict {
        acknowledged: log.acknowledged.len(),
        rolled_back: log.rolled_back.len(),
        in_doubt: log.in_doubt.len(),
        in_doubt_committed,
    }
}
