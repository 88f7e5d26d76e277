//! MariaDB's own regression suite through the sidecar: a selection of the
//! `main` suite of Debian's `mariadb-test` package (mysql-test-run.pl and
//! the stock `mariadb-test` client, which compares every statement's
//! output with the recorded `.result` file byte for byte), run with
//! `--extern` against a private MariaDB directly and through sidecar →
//! gateway → the same MariaDB, in the plain text protocol,
//! `--ps-protocol` and `--cursor-protocol`.
//!
//! The cases are listed in `tests/mariadb-test/selection.txt` (its header
//! says how they were chosen). Every case must pass directly; through the
//! sidecar, the failing set must be exactly the known sidecar-only
//! failures in `tests/mariadb-test/sidecar-only-failures.txt` (each with
//! its reason) — a case that starts failing, or one that is fixed, fails
//! this test, so the list is kept true in both directions.
//!
//! `mysql-test-run.pl`'s log of each run is kept in
//! `$CARGO_TARGET_TMPDIR/mariadb-test/<protocol>-<target>.log`.

mod common;

use common::secret;
use common::sidecar::sidecar_config;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use myquic::config::LocalUser;
use myquic::gateway::Credential;
use myquic::sidecar::Sidecar;

use common::mariadb::Options;
use common::{MariaDb, Stack};

/// Where Debian's `mariadb-test` package installs the suite.
const MTR_DIR: &str = "/usr/share/mysql/mysql-test";

const SELECTION: &str = include_str!("mariadb-test/selection.txt");
const KNOWN_FAILURES: &str = include_str!("mariadb-test/sidecar-only-failures.txt");

/// The gateway credential the sidecar uses: MariaDB's `root` (no
/// password, as mysql-test-run.pl's own servers have it), so definers,
/// `CURRENT_USER()` and privileges are what the cases expect.
const API_USER: &str = "mtr";
const API_PASSWORD: &str = "mtr-api-secret";

/// The accounts the selected cases log in as, each through the sidecar
/// as its own local account with its own gateway credential and backend
/// account of the same name, as the case expects of a server: (local and
/// backend user, its password, the API user). `root` is mysql-test-run.pl's
/// own; `conn` is default_session's (`connect (conn,localhost,conn,,…)`),
/// which the server matches to the anonymous `''@localhost` the case
/// creates — after the gateway has started, so its credential reaches the
/// backend only when the case logs in.
const ACCOUNTS: &[(&str, &str, &str)] = &[("root", "", API_USER), ("conn", "", "mtr-conn")];

/// The server options of mysql-test-run.pl's own servers
/// (`include/default_mysqld.cnf`) that change what statements answer.
const MTR_SERVER_ARGS: &[&str] = &[
    "--character-set-server=latin1",
    "--collation-server=latin1_swedish_ci",
    "--max-allowed-packet=16M",
    "--log-bin-trust-function-creators=1",
    "--key-buffer-size=1M",
    "--sort-buffer-size=256K",
    "--max-heap-table-size=1M",
    "--default-storage-engine=MyISAM",
    "--use-stat-tables=preferably",
    "--histogram-type=JSON_HB",
    "--connect-timeout=60",
    "--open-files-limit=1024",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Protocol {
    Plain,
    Ps,
    Cursor,
}

impl Protocol {
    const ALL: [Protocol; 3] = [Protocol::Plain, Protocol::Ps, Protocol::Cursor];

    fn name(self) -> &'static str {
        match self {
            Protocol::Plain => "plain",
            Protocol::Ps => "ps",
            Protocol::Cursor => "cursor",
        }
    }

    fn flag(self) -> Option<&'static str> {
        match self {
            Protocol::Plain => None,
            Protocol::Ps => Some("--ps-protocol"),
            Protocol::Cursor => Some("--cursor-protocol"),
        }
    }

    fn parse(name: &str) -> Protocol {
        Protocol::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .unwrap_or_else(|| panic!("unknown protocol {name:?} (plain, ps, cursor)"))
    }
}

/// The non-comment, non-empty lines of a list file.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
}

/// A case's full name: `main.` unless it names its suite
/// (`type_inet.type_inet6`).
fn qualified(case: &str) -> String {
    if case.contains('.') {
        case.to_string()
    } else {
        format!("main.{case}")
    }
}

/// The selection, or (to iterate on a few cases) the ones of it named in
/// `MYQUIC_MTR_CASES` (comma-separated, `main.` left out).
fn selection() -> Vec<String> {
    let only: Option<BTreeSet<String>> = std::env::var("MYQUIC_MTR_CASES")
        .ok()
        .map(|v| v.split(',').map(|c| qualified(c.trim())).collect());
    let cases: Vec<String> = lines(SELECTION)
        .map(qualified)
        .filter(|c| only.as_ref().is_none_or(|only| only.contains(c)))
        .collect();
    let unique: BTreeSet<&String> = cases.iter().collect();
    assert_eq!(
        unique.len(),
        cases.len(),
        "selection.txt lists a case twice"
    );
    cases
}

/// `protocol[,protocol…] case  reason`, per protocol.
fn known_failures() -> BTreeMap<Protocol, BTreeSet<String>> {
    let mut known: BTreeMap<Protocol, BTreeSet<String>> = BTreeMap::new();
    for line in KNOWN_FAILURES.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let protocols = words.next().unwrap();
        let case = words.next().expect("a case after the protocols");
        assert!(
            words.next().is_some(),
            "sidecar-only-failures.txt: {case} needs its reason"
        );
        for p in protocols.split(',') {
            known
                .entry(Protocol::parse(p))
                .or_default()
                .insert(qualified(case));
        }
    }
    known
}

/// mysql-test-run.pl's bootstrap of the `mtr` database (warning
/// suppressions, the check-testcase procedures), as it feeds it to a new
/// server: `include/*.sql` are mysqltest scripts, with `delimiter`
/// commands; this is its `sql_to_bootstrap`, one statement per entry.
fn bootstrap_statements(script: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut delimiter = ";".to_string();
    for line in script.lines() {
        if let Some(new) = line.strip_prefix("delimiter ") {
            delimiter = new.strip_suffix(delimiter.as_str()).unwrap_or(new).into();
            continue;
        }
        if let Some(body) = line.strip_suffix(delimiter.as_str()) {
            current.push_str(body);
            statements.push(std::mem::take(&mut current));
            continue;
        }
        if line.trim_start().starts_with("--") {
            continue;
        }
        current.push_str(line);
        current.push(' ');
    }
    statements
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect()
}

/// Run before each case (the `mariadb-test` wrapper in the test): no
/// database, table, view, routine or event an earlier case left behind,
/// and `test` as mysql-test-run.pl creates it, so a case that fails
/// half-way through the sidecar cannot make the cases after it fail.
const CLEANUP_PROCEDURE: &str = "\
CREATE PROCEDURE mtr.myquic_cleanup()
BEGIN
  DECLARE done INT DEFAULT 0;
  DECLARE kind, name VARCHAR(64);
  DECLARE objects CURSOR FOR
    SELECT 'DATABASE', schema_name FROM information_schema.schemata
      WHERE schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys',
                                'mtr', 'test')
    UNION ALL SELECT 'VIEW', table_name FROM information_schema.views
      WHERE table_schema = 'test'
    UNION ALL SELECT 'TABLE', table_name FROM information_schema.tables
      WHERE table_schema = 'test' AND table_type <> 'VIEW'
    UNION ALL SELECT routine_type, routine_name FROM information_schema.routines
      WHERE routine_schema = 'test' AND routine_type IN ('PROCEDURE', 'FUNCTION')
    UNION ALL SELECT 'EVENT', event_name FROM information_schema.events
      WHERE event_schema = 'test';
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  SET @myquic_fkc = @@foreign_key_checks, foreign_key_checks = 0;
  CREATE DATABASE IF NOT EXISTS test;
  OPEN objects;
  l: LOOP
    FETCH objects INTO kind, name;
    IF done THEN LEAVE l; END IF;
    SET @myquic_sql = CONCAT('DROP ', kind, ' IF EXISTS ', IF(kind = 'DATABASE', '', 'test.'),
                             '`', REPLACE(name, '`', '``'), '`');
    PREPARE s FROM @myquic_sql; EXECUTE s; DEALLOCATE PREPARE s;
  END LOOP;
  CLOSE objects;
  ALTER DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci;
  SET foreign_key_checks = @myquic_fkc;
END";

/// A private MariaDB set up as mysql-test-run.pl sets up its own: its
/// server options, a latin1 `test` database, the `mtr` database, the
/// time zone tables' test data (and no `app` database of the fixture's:
/// `SHOW DATABASES` is part of some cases' output).
async fn mtr_server() -> MariaDb {
    let db = MariaDb::start_with(Options {
        server_args: MTR_SERVER_ARGS.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    })
    .await;
    let mut root = mysql_async::Conn::new(db.root_opts()).await.unwrap();
    root.query_drop(
        "DROP DATABASE app; \
         CREATE DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci; \
         CREATE DATABASE mtr CHARACTER SET latin1",
    )
    .await
    .unwrap();
    for file in ["mtr_warnings.sql", "mtr_check.sql"] {
        let script = std::fs::read_to_string(Path::new(MTR_DIR).join("include").join(file))
            .expect("mtr's bootstrap SQL (apt-get install mariadb-test)");
        for statement in bootstrap_statements(&script) {
            root.query_drop(&statement)
                .await
                .unwrap_or_else(|e| panic!("mtr bootstrap ({file}): {e}\n{statement}"));
        }
    }
    let time_zones = std::fs::read_to_string("/usr/share/mysql/mysql_test_data_timezone.sql")
        .expect("mysql_test_data_timezone.sql (mariadb-server)");
    root.query_drop(format!("USE mysql; {time_zones}"))
        .await
        .unwrap();
    root.query_drop(CLEANUP_PROCEDURE).await.unwrap();
    root.disconnect().await.unwrap();
    db
}

/// What one mysql-test-run.pl run reported, by case.
#[derive(Default)]
struct Outcome {
    passed: BTreeSet<String>,
    failed: BTreeSet<String>,
    /// Skipped by mysql-test-run.pl (a case that does not run in this
    /// protocol: `include/no_protocol.inc` and the like).
    skipped: BTreeSet<String>,
    /// Never reported (mysql-test-run.pl stopped early).
    other: BTreeSet<String>,
    log: String,
}

/// Whether a mysql-test-run.pl log line is a case's result line.
fn is_case_line(line: &str) -> bool {
    line.split_whitespace()
        .next()
        .is_some_and(|w| w.contains('.') && line.contains(" [ "))
}

/// The report of case `case` in a mysql-test-run.pl log: its result line
/// and what follows up to the next case.
fn report_of(log: &str, case: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in log.lines() {
        if is_case_line(line) {
            inside = line.split_whitespace().next() == Some(case);
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

struct Run<'a> {
    cases: &'a [String],
    wrapper: &'a Path,
    logs: &'a Path,
}

impl Run<'_> {
    /// mysql-test-run.pl `--extern` against `socket`.
    async fn mtr(&self, protocol: Protocol, target: &str, socket: &Path) -> Outcome {
        let work = tempfile::Builder::new()
            .prefix("myq-mtr")
            .tempdir()
            .unwrap();
        let log = self.logs.join(format!("{}-{target}.log", protocol.name()));
        let mut cmd = tokio::process::Command::new("perl");
        cmd.current_dir(MTR_DIR)
            .arg("mysql-test-run.pl")
            .arg(format!("--extern=socket={}", socket.display()))
            .arg("--extern=user=root")
            .arg(format!("--vardir={}", work.path().join("var").display()))
            .arg(format!("--tmpdir={}", work.path().join("tmp").display()))
            .args([
                "--force",
                "--max-test-fail=0",
                "--retry=0",
                "--testcase-timeout=5",
                "--suite-timeout=60",
            ])
            .args(protocol.flag())
            .args(self.cases)
            .env("MYSQL_TEST", self.wrapper)
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .kill_on_drop(true);
        let started = Instant::now();
        let status = cmd.status().await.expect("running mysql-test-run.pl");
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
        let mut outcome = Outcome::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(case) = words.next().filter(|w| self.cases.iter().any(|c| c == w)) else {
                continue;
            };
            let result = line.split('[').nth(1).map(|r| r.split(']').next().unwrap());
            match result.map(str::trim) {
                Some("pass") => outcome.passed.insert(case.to_string()),
                Some("fail") => outcome.failed.insert(case.to_string()),
                Some("skipped") => outcome.skipped.insert(case.to_string()),
                _ => continue,
            };
        }
        for case in self.cases {
            if !outcome.passed.contains(case)
                && !outcome.failed.contains(case)
                && !outcome.skipped.contains(case)
            {
                outcome.other.insert(case.clone());
            }
        }
        println!(
            "{:<6} {:<7} {:>3} passed, {:>3} failed, {:>3} skipped, {:>3} not run, of {} \
             ({:.0} s; mysql-test-run.pl {status}; log {})",
            protocol.name(),
            target,
            outcome.passed.len(),
            outcome.failed.len(),
            outcome.skipped.len(),
            outcome.other.len(),
            self.cases.len(),
            took.as_secs_f64(),
            log.display()
        );
        outcome.log = text;
        outcome
    }
}

/// MariaDB set up for mysql-test-run.pl, the gateway with a credential
/// per account of [`ACCOUNTS`], the sidecar on a unix socket with those
/// accounts, and the `mariadb-test` wrapper that cleans up before each
/// case.
struct Chain {
    backend_socket: PathBuf,
    sidecar_socket: PathBuf,
    wrapper: PathBuf,
    _sidecar: Sidecar,
    _stack: Stack,
    _dir: tempfile::TempDir,
}

impl Chain {
    async fn start() -> Self {
        let db = mtr_server().await;
        let backend_socket = db.socket.clone();
        let stack = Stack::start_on(db, |config| {
            // MariaDB's extended metadata (`type_json`, `type_inet`,
            // `type_uuid`): relayed from the backend.
            config.backend.relay_extended_metadata = true;
            for &(user, password, api_user) in ACCOUNTS {
                config.credentials.push(Credential {
                    username: api_user.into(),
                    password: secret(&api_password(api_user)),
                    backend_user: Some(user.into()),
                    backend_password: Some(secret(password)),
                    // None: a client that names no database has none, as
                    // directly (mysqltest names `test`).
                    database: None,
                });
            }
        })
        .await;
        let dir = tempfile::Builder::new()
            .prefix("myq-mtr")
            .tempdir()
            .unwrap();
        let sidecar_socket = dir.path().join("s");
        // Only the cases' accounts, as on mysql-test-run.pl's servers.
        let users = ACCOUNTS
            .iter()
            .map(|&(user, password, api_user)| LocalUser {
                username: user.into(),
                password: secret(password),
                upstream_username: Some(api_user.into()),
                upstream_password: Some(secret(&api_password(api_user))),
            })
            .collect();
        let mut config = sidecar_config(&stack, users);
        config.socket = Some(sidecar_socket.clone());
        config.upstream.username = API_USER.into();
        config.upstream.password = secret(API_PASSWORD);
        let sidecar = Sidecar::start(config).await.expect("sidecar starts");
        // mysqltest reads the server's version from the greeting: the
        // backend's, learned shortly after start.
        for _ in 0..500 {
            if sidecar.server_version().contains("MariaDB") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(sidecar.server_version().contains("MariaDB"));
        let wrapper = dir.path().join("mariadb-test");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\n\
                 # Before each case: mtr.myquic_cleanup, directly.\n\
                 /usr/bin/mariadb --no-defaults --socket={} --user=root \
                 -e 'CALL mtr.myquic_cleanup()' || exit 1\n\
                 exec /usr/bin/mariadb-test \"$@\"\n",
                backend_socket.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            backend_socket,
            sidecar_socket,
            wrapper,
            _sidecar: sidecar,
            _stack: stack,
            _dir: dir,
        }
    }
}

/// The API password of `api_user` (the credentials live only in this
/// harness's configurations).
fn api_password(api_user: &str) -> String {
    match api_user {
        API_USER => API_PASSWORD.to_string(),
        other => format!("{other}-api-secret"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_main_suite_through_the_sidecar_as_directly() {
    assert!(
        Path::new(MTR_DIR).join("mysql-test-run.pl").exists(),
        "{MTR_DIR}/mysql-test-run.pl is missing: apt-get install mariadb-test (as .ci/run does)"
    );
    let started = Instant::now();
    let cases = selection();
    let mut known = known_failures();
    for set in known.values_mut() {
        if std::env::var_os("MYQUIC_MTR_CASES").is_some() {
            set.retain(|case| cases.contains(case));
        }
        for case in set.iter() {
            assert!(
                cases.contains(case),
                "sidecar-only-failures.txt names {case}, which is not in selection.txt"
            );
        }
    }

    let logs = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mariadb-test");
    std::fs::create_dir_all(&logs).unwrap();
    // Each protocol has its own chain (MariaDB, gateway, sidecar) and runs
    // directly and then through the sidecar against that MariaDB; the
    // three protocols run at once (mysql-test-run.pl mostly waits).
    let runs = Protocol::ALL.map(|protocol| {
        let (cases, logs) = (&cases, &logs);
        async move {
            let chain = Chain::start().await;
            let run = Run {
                cases,
                wrapper: &chain.wrapper,
                logs,
            };
            let direct = run.mtr(protocol, "direct", &chain.backend_socket).await;
            let via = run.mtr(protocol, "sidecar", &chain.sidecar_socket).await;
            (protocol, direct, via)
        }
    });
    let results = futures_util::future::join_all(runs).await;

    let mut problems = Vec::new();
    for (protocol, direct, via) in results {
        let name = protocol.name();
        for (target, outcome) in [("direct", &direct), ("sidecar", &via)] {
            if !outcome.other.is_empty() {
                problems.push(format!(
                    "{name}/{target}: never reported (mysql-test-run.pl stopped early?): {:?}",
                    outcome.other
                ));
            }
        }
        if direct.skipped != via.skipped {
            problems.push(format!(
                "{name}: skipped directly {:?}, through the sidecar {:?}",
                direct.skipped, via.skipped
            ));
        }
        // The selection is of cases that pass against a plain server.
        for case in &direct.failed {
            problems.push(format!(
                "{name}/direct: {case} fails directly:\n{}",
                report_of(&direct.log, case)
            ));
        }
        let expected = known.get(&protocol).cloned().unwrap_or_default();
        let sidecar_only: BTreeSet<String> =
            via.failed.difference(&direct.failed).cloned().collect();
        for case in sidecar_only.difference(&expected) {
            problems.push(format!(
                "{name}/sidecar: {case} fails only through the sidecar (not a known failure):\n{}",
                report_of(&via.log, case)
            ));
        }
        for case in expected.difference(&sidecar_only) {
            problems.push(format!(
                "{name}/sidecar: {case} is listed in sidecar-only-failures.txt but did not fail \
                 only through the sidecar: remove it from the list if it is fixed"
            ));
        }
    }
    println!(
        "mariadb-test: {} cases x 3 protocols x 2 targets in {:.0} s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
