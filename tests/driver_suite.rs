//! A driver's own test suite through the sidecar (issue 12):
//! go-sql-driver/mysql's integration tests (`driver_test.go` and the rest of
//! its package tests, which take the server from `MYSQL_TEST_*`), run once
//! straight against a private MariaDB and once through sidecar → gateway →
//! the same MariaDB. Every test must end the same way both times (pass,
//! fail or skip), except the differences listed in [`EXPECTED`], each with
//! its reason; a difference that appears or disappears fails this test.
//!
//! The driver's source is not in this repository: `go mod download` fetches
//! the version the matrix's Go client pins (`tests/matrix/clients/
//! go-sql-driver/go.mod`, checked against its `go.sum`) into the module
//! cache, and its tests are built from a writable copy. Both runs' `go
//! test -json` output is kept in `target/tmp/driver-suite/`.
//!
//! `MQ_DRIVER_SUITE_RUN=<go test -run pattern>` runs only those tests
//! (for working on one; [`EXPECTED`] entries that did not run are not
//! missed then).

mod common;

use common::sidecar::{local_user, sidecar_config};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::Command;

use common::Stack;
use common::mariadb::{MariaDb, Options, TlsFiles};
use myquic::sidecar::Sidecar;

const MODULE: &str = "github.com/go-sql-driver/mysql";
/// The module whose `go.mod`/`go.sum` pin the driver's version.
const PIN_DIR: &str = "tests/matrix/clients/go-sql-driver";
const DIRECT_PASSWORD: &str = "app-backend-pw";
const SIDECAR_PASSWORD: &str = "local-secret";
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// Tests left out of both runs, with the reason.
const NOT_RUN: &[(&str, &str)] = &[(
    "TestConnectorReturnsTimeout",
    "dials 1.1.1.1:1234 and expects a dial timeout: no server of ours is \
     involved, and where that address answers or is unreachable it panics \
     and ends the whole test binary",
)];

/// A test that ends differently through the sidecar than directly, and
/// why: `test` and those of its subtests that differ, `count` names in all,
/// each ending `direct` straight against MariaDB and `sidecar` through it.
struct Expected {
    test: &'static str,
    count: usize,
    direct: Outcome,
    sidecar: Outcome,
    why: &'static str,
}

const EXPECTED: &[Expected] = &[];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Pass,
    Fail,
    Skip,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Skip => "skip",
        }
    }
}

/// One run's tests (subtests as `Parent/sub`) and how each ended.
type Results = BTreeMap<String, Outcome>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_sql_driver_tests_end_the_same_through_the_sidecar() {
    let started = Instant::now();
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("driver-suite");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();

    let (version, test_binary, package_dir) = build_driver_tests(&work).await;
    let built = started.elapsed();

    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    let db = MariaDb::start_with(Options {
        tcp: true,
        tls: Some(tls.clone()),
        // TestConnectionAttributes reads performance_schema, else skips.
        // (max_allowed_packet stays the harness's 64 MiB: at the stock
        // 16 MiB the driver's own TestLongData/compress fails directly.)
        server_args: vec!["--performance-schema".into()],
    })
    .await;
    let port = db.port.expect("MariaDB on TCP");
    let stack = Stack::start_on(db, |_| {}).await;
    let sidecar = start_sidecar(&stack).await;

    let only = std::env::var("MQ_DRIVER_SUITE_RUN")
        .ok()
        .filter(|v| !v.is_empty());
    let only = only.as_deref();
    // Both runs at once, each in a database of its own (the driver's
    // tests create and drop tables such as `test`): directly in `app2`,
    // through the sidecar in `app` (the gateway credential's own).
    let (direct_log, via_log) = (work.join("direct.json"), work.join("sidecar.json"));
    let ((direct, direct_time), (via, via_time)) = tokio::join!(
        run(
            &test_binary,
            &package_dir,
            &direct_log,
            Target {
                port,
                password: DIRECT_PASSWORD,
                database: "app2",
            },
            only,
        ),
        run(
            &test_binary,
            &package_dir,
            &via_log,
            Target {
                port: sidecar.addr().port(),
                password: SIDECAR_PASSWORD,
                database: "app",
            },
            only,
        ),
    );
    sidecar.shutdown().await;
    // Both runs share MariaDB's max_connections (151): how close they came.
    let peak: Option<(String, u32)> = {
        use mysql_async::prelude::Queryable;
        let mut root = mysql_async::Conn::new(stack.db.root_opts()).await.unwrap();
        root.query_first("SHOW GLOBAL STATUS LIKE 'Max_used_connections'")
            .await
            .unwrap()
    };
    let peak = peak.map_or(0, |(_, n)| n);

    // The summary goes to the process's stderr itself, not through the
    // test harness's capture: CI's log shows it when the test passes too.
    let mut summary = format!(
        "driver suite: {MODULE} {version}'s own tests (go test -json output in {})\n",
        work.display()
    );
    for (target, results, time) in [
        ("direct ", &direct, direct_time),
        ("sidecar", &via, via_time),
    ] {
        let failed: BTreeSet<&str> = results
            .iter()
            .filter(|(_, o)| **o == Outcome::Fail)
            .map(|(name, _)| name.split('/').next().unwrap())
            .collect();
        let failed: Vec<&str> = failed.into_iter().collect();
        summary.push_str(&format!(
            "  {target}: {} in {time:.1?}; failed: {}\n",
            counts(results),
            failed.join(" ")
        ));
    }
    summary.push_str(&format!(
        "  {:.1?} in all, of which fetching and building the tests {built:.1?}; \
         at most {peak} connections to MariaDB at once\n",
        started.elapsed()
    ));
    let _ = std::io::Write::write_all(&mut std::io::stderr(), summary.as_bytes());

    // Not a test that cannot fail: the direct run must really have reached
    // the server (the suite skips every database test when it cannot).
    let passed_with_db = direct
        .iter()
        .filter(|(name, o)| **o == Outcome::Pass && name.starts_with("TestCRUD"))
        .count();
    assert!(
        passed_with_db > 0 || only.is_some(),
        "the direct run passed no TestCRUD: it never reached MariaDB (see {})",
        work.join("direct.json").display()
    );

    let unexpected = differences(&direct, &via, EXPECTED, only.is_some());
    assert!(
        unexpected.is_empty(),
        "{} test(s) of {MODULE} end differently through the sidecar than directly \
         (outputs: {}):\n{}",
        unexpected.len(),
        work.display(),
        unexpected.join("\n")
    );
}

/// Every way the two runs differ beyond `expected`: tests that end
/// differently and are not listed, and listed differences that did not
/// happen (as often as listed). `filtered`: only some tests ran, so a
/// listed difference that did not show at all is not missed.
fn differences(
    direct: &Results,
    via: &Results,
    expected: &[Expected],
    filtered: bool,
) -> Vec<String> {
    let names: BTreeSet<&String> = direct.keys().chain(via.keys()).collect();
    let mut unexpected = Vec::new();
    let mut explained: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for name in names {
        let (d, v) = (direct.get(name).copied(), via.get(name).copied());
        if d == v {
            continue;
        }
        let show = |o: Option<Outcome>| o.map_or("not run", Outcome::name);
        let entry = expected.iter().find(|e| {
            (name == e.test || name.starts_with(&format!("{}/", e.test)))
                && Some(e.direct) == d
                && Some(e.sidecar) == v
        });
        match entry {
            Some(e) => explained.entry(e.test).or_default().push(name),
            None => unexpected.push(format!("{name}: direct {}, sidecar {}", show(d), show(v))),
        }
    }
    for e in expected {
        let seen = explained.get(e.test).map_or(&[][..], Vec::as_slice);
        if seen.len() != e.count && (!filtered || !seen.is_empty()) {
            unexpected.push(format!(
                "{}: expected {} test(s) to end {} directly and {} through the sidecar ({}), \
                 but {} did: {}; update EXPECTED",
                e.test,
                e.count,
                e.direct.name(),
                e.sidecar.name(),
                e.why,
                seen.len(),
                seen.join(" ")
            ));
        }
    }
    unexpected
}

/// Fetches the pinned driver module, copies it somewhere writable and
/// builds its test binary: (version, binary, package directory).
async fn build_driver_tests(work: &Path) -> (String, PathBuf, PathBuf) {
    let out = go(&root().join(PIN_DIR), &["mod", "download", "-json", MODULE]).await;
    let info: Value = serde_json::from_slice(&out).expect("go mod download -json answers JSON");
    if let Some(e) = info.get("Error") {
        panic!("go mod download {MODULE}: {e}");
    }
    let version = info["Version"].as_str().expect("a version").to_string();
    let source = PathBuf::from(info["Dir"].as_str().expect("the module's directory"));
    let package = work.join("mysql");
    copy_writable(&source, &package);
    let binary = work.join("mysql.test");
    go(
        &package,
        &["test", "-c", "-o", binary.to_str().unwrap(), "."],
    )
    .await;
    (version, binary, package)
}

/// `go ARGS` in `dir`; its stdout, or a panic with its stderr.
async fn go(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("go")
        .args(args)
        .current_dir(dir)
        // The copy is a module of its own, whatever go.work is around.
        .env("GOWORK", "off")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running go (install Go >= 1.24, as .ci/run does): {e}"));
    assert!(
        out.status.success(),
        "go {} in {} failed ({}):\n{}",
        args.join(" "),
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The module cache is read-only; the copy is not.
fn copy_writable(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_writable(&entry.path(), &target);
        } else {
            std::fs::write(&target, std::fs::read(entry.path()).unwrap()).unwrap();
        }
    }
}

/// A sidecar at its defaults (the plugin follows the backend, a generated
/// TLS certificate for `tls=skip-verify`) with the local user.
async fn start_sidecar(stack: &Stack) -> Sidecar {
    let mut config = sidecar_config(stack, vec![local_user("app", SIDECAR_PASSWORD)]);
    // The test server keeps MariaDB's default, local_infile on: so does
    // the sidecar (TestLoadData).
    config.local_infile = true;
    let sidecar = Sidecar::start(config).await.expect("sidecar starts");
    // The driver's tests branch on the server's version (MariaDB or
    // MySQL), which the sidecar learns from its first request.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sidecar.server_version().contains("MariaDB") {
        assert!(
            Instant::now() < deadline,
            "the sidecar learns the backend's version"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sidecar
}

/// Where one run's tests connect (as `app`, on 127.0.0.1).
struct Target {
    port: u16,
    password: &'static str,
    database: &'static str,
}

/// One run of the driver's tests against `target`, its `go test -json`
/// output saved to `log`; and how long it took.
async fn run(
    binary: &Path,
    package: &Path,
    log: &Path,
    target: Target,
    only: Option<&str>,
) -> (Results, Duration) {
    let started = Instant::now();
    let skip = NOT_RUN
        .iter()
        .map(|(name, _)| format!("^{name}$"))
        .collect::<Vec<_>>()
        .join("|");
    let out = Command::new("go")
        .args(["tool", "test2json", "-t", "-p", MODULE])
        .arg(binary)
        .args([
            "-test.v=test2json",
            "-test.count=1",
            "-test.timeout=9m",
            &format!("-test.skip={skip}"),
            &format!("-test.run={}", only.unwrap_or("")),
        ])
        .current_dir(package)
        .env("GOWORK", "off")
        .env("MYSQL_TEST_USER", "app")
        .env("MYSQL_TEST_PASS", target.password)
        .env("MYSQL_TEST_PROT", "tcp")
        .env("MYSQL_TEST_ADDR", format!("127.0.0.1:{}", target.port))
        .env("MYSQL_TEST_DBNAME", target.database)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(RUN_TIMEOUT, out)
        .await
        .unwrap_or_else(|_| panic!("the driver's tests did not finish in {RUN_TIMEOUT:?}"))
        .expect("running go tool test2json");
    std::fs::write(log, &out.stdout).unwrap();
    let results = parse(&out.stdout);
    assert!(
        !results.is_empty(),
        "no test results in {} (stderr: {})",
        log.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (results, started.elapsed())
}

/// `go test -json`: the last pass/fail/skip event of each test.
fn parse(json: &[u8]) -> Results {
    let mut results = Results::new();
    for line in json.split(|b| *b == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let Some(test) = event["Test"].as_str() else {
            continue;
        };
        let outcome = match event["Action"].as_str() {
            Some("pass") => Outcome::Pass,
            Some("fail") => Outcome::Fail,
            Some("skip") => Outcome::Skip,
            _ => continue,
        };
        results.insert(test.to_string(), outcome);
    }
    results
}

fn counts(results: &Results) -> String {
    let n = |o: Outcome| results.values().filter(|v| **v == o).count();
    format!(
        "{} passed, {} failed, {} skipped",
        n(Outcome::Pass),
        n(Outcome::Fail),
        n(Outcome::Skip)
    )
}

/// The comparison itself can fail: an unlisted difference, a listed one
/// that went away, and one that happened to fewer tests than listed.
#[test]
fn differences_are_exact() {
    use Outcome::*;
    let results =
        |v: &[(&str, Outcome)]| -> Results { v.iter().map(|(n, o)| (n.to_string(), *o)).collect() };
    let listed = [Expected {
        test: "TestA",
        count: 2,
        direct: Pass,
        sidecar: Fail,
        why: "a reason",
    }];
    let direct = results(&[("TestA", Pass), ("TestA/x", Pass), ("TestB", Pass)]);
    let same = results(&[("TestA", Fail), ("TestA/x", Fail), ("TestB", Pass)]);
    assert!(differences(&direct, &same, &listed, false).is_empty());
    let more = results(&[("TestA", Fail), ("TestA/x", Fail), ("TestB", Skip)]);
    assert_eq!(
        differences(&direct, &more, &listed, false),
        ["TestB: direct pass, sidecar skip"]
    );
    let fixed = results(&[("TestA", Pass), ("TestA/x", Pass), ("TestB", Pass)]);
    assert_eq!(differences(&direct, &fixed, &listed, false).len(), 1);
    assert!(differences(&direct, &fixed, &listed, true).is_empty());
    let fewer = results(&[("TestA", Fail), ("TestA/x", Pass), ("TestB", Pass)]);
    assert_eq!(differences(&direct, &fewer, &listed, true).len(), 1);
    let other_way = results(&[("TestA", Skip), ("TestA/x", Fail), ("TestB", Pass)]);
    assert_eq!(differences(&direct, &other_way, &listed, false).len(), 2);
}
