//! The client-compatibility matrix: every client under
//! `tests/matrix/clients/` runs the same checks twice — straight against a
//! private MariaDB, then through sidecar → gateway → the same MariaDB — and
//! every answer must be identical. The contract with the client programs
//! (environment, one JSON line per check) is `tests/matrix/README.md`.
//!
//! Writes the client × check table to `tests/matrix/RESULTS.md` and checks
//! that the README shows the same table (`MQ_MATRIX_WRITE_README=1`
//! rewrites it instead). `MQ_MATRIX_CLIENTS=a,b` runs only those clients
//! (and leaves both tables alone); `MQ_MATRIX_JOBS` is how many clients run
//! at once (2).

mod common;
#[path = "matrix/clients/rust-mysql-async/checks.rs"]
mod rust_mysql_async;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use common::Stack;
use common::mariadb::{MariaDb, Options, TlsFiles};
use myquic::config::Secret;
use myquic::sidecar::config::LocalUser;
use myquic::sidecar::{Sidecar, SidecarConfig};

/// The checks every client is asked for, in table order (the contract's
/// list); clients may add their own, shown in the last column.
const CHECKS: &[&str] = &[
    "connect",
    "tls",
    "types_text",
    "types_prepared",
    "transactions",
    "errors",
    "procedure",
    "multi_statement",
    "large_result",
    "last_insert_id",
    "switch_database",
    "pool_reset_ping",
    "cursor",
];

/// Clients that run inside this test rather than as a program.
const IN_PROCESS: &[&str] = &["rust-mysql-async"];

const DIRECT_PASSWORD: &str = "app-backend-pw";
const SIDECAR_PASSWORD: &str = "local-secret";
const BEGIN: &str = "<!-- matrix:begin -->";
const END: &str = "<!-- matrix:end -->";
const SETUP_TIMEOUT: Duration = Duration::from_secs(1200);
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// What one run of a client said about one check.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Answer(Value),
    Error(String),
    Skip(String),
}

/// How a check fared across the two runs.
#[derive(Clone, Debug)]
enum Verdict {
    Pass,
    Skip,
    Fail(String),
}

/// Everything the harness knows about the servers a client talks to.
struct Servers {
    stack: Stack,
    tls: TlsFiles,
    dir: tempfile::TempDir,
    logs: PathBuf,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_answers_the_same_through_the_sidecar() {
    if std::env::var_os("RUST_LOG").is_some() {
        myquic::telemetry::init(myquic::telemetry::LogFormat::Human, "info");
    }
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_files(dir.path());
    let db = MariaDb::start_with(Options {
        tcp: true,
        tls: Some(tls.clone()),
    })
    .await;
    let stack = Stack::start_on(db, |_| {}).await;
    let logs = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("matrix");
    std::fs::create_dir_all(&logs).unwrap();
    let servers = Arc::new(Servers {
        stack,
        tls,
        dir,
        logs,
    });

    if let Some(secs) = std::env::var("MQ_MATRIX_HOLD")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return hold(&servers, secs).await;
    }
    let only: Option<BTreeSet<String>> = std::env::var("MQ_MATRIX_CLIENTS")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.split(',').map(str::to_string).collect());
    let clients: Vec<String> = clients()
        .into_iter()
        .filter(|c| only.as_ref().is_none_or(|o| o.contains(c)))
        .collect();
    assert!(!clients.is_empty(), "no clients under tests/matrix/clients");
    let jobs = std::env::var("MQ_MATRIX_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2usize)
        .max(1);
    let slots = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut tasks = tokio::task::JoinSet::new();
    for client in clients {
        let servers = servers.clone();
        let slots = slots.clone();
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            let verdicts = run_both(&servers, &client).await;
            (client, verdicts)
        });
    }
    let mut results: BTreeMap<String, Result<BTreeMap<String, Verdict>, String>> = BTreeMap::new();
    while let Some(done) = tasks.join_next().await {
        let (client, verdicts) = done.expect("client task");
        results.insert(client, verdicts);
    }

    let mut failures = Vec::new();
    for (client, verdicts) in &results {
        match verdicts {
            Err(e) => failures.push(format!("{client}: {e}")),
            Ok(verdicts) => {
                for (check, verdict) in verdicts {
                    if let Verdict::Fail(why) = verdict {
                        failures.push(format!("{client} / {check}: {why}"));
                    }
                }
            }
        }
    }
    let table = table(&results);
    let mut stale_readme = None;
    if only.is_none() {
        std::fs::write(
            root().join("tests/matrix/RESULTS.md"),
            format!(
                "# Client compatibility (generated by tests/matrix.rs; do not edit)\n\n{table}"
            ),
        )
        .unwrap();
        stale_readme = check_readme(&table);
    }
    eprintln!("{table}");
    assert!(
        failures.is_empty(),
        "{} check(s) differ between MariaDB and the sidecar (client output in {}):\n\n{}",
        failures.len(),
        servers.logs.display(),
        failures.join("\n\n")
    );
    if let Some(stale) = stale_readme {
        panic!("{stale}");
    }
}

/// For working on a client: starts a sidecar, writes both targets'
/// environments as shell files next to the logs, and keeps everything up
/// for `secs` seconds (`MQ_MATRIX_HOLD=600 cargo test --test matrix`).
async fn hold(servers: &Servers, secs: u64) {
    let db = &servers.stack.db;
    let socket = servers.dir.path().join("hold.sock");
    let sidecar = start_sidecar(servers, &socket).await;
    for (name, env) in [
        (
            "direct",
            env(
                servers,
                "direct",
                db.port.unwrap(),
                &db.socket,
                DIRECT_PASSWORD,
            ),
        ),
        (
            "sidecar",
            env(
                servers,
                "sidecar",
                sidecar.addr().port(),
                &socket,
                SIDECAR_PASSWORD,
            ),
        ),
    ] {
        let file = servers.logs.join(format!("{name}.env"));
        let text: String = env
            .iter()
            .map(|(k, v)| format!("export {k}='{v}'\n"))
            .collect();
        std::fs::write(&file, text).unwrap();
        eprintln!("MQ_MATRIX_HOLD: . {}", file.display());
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    sidecar.shutdown().await;
}

/// Every client folder, plus the in-process ones.
fn clients() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("tests/matrix/clients"))
        .expect("tests/matrix/clients")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("run").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.extend(IN_PROCESS.iter().map(|s| s.to_string()));
    names.sort();
    names.dedup();
    names
}

/// Runs a client directly, then through a sidecar of its own (a fresh
/// sidecar has an empty authentication cache, so the client's first login
/// does caching_sha2_password *full* authentication), and compares.
async fn run_both(servers: &Servers, client: &str) -> Result<BTreeMap<String, Verdict>, String> {
    if !IN_PROCESS.contains(&client) {
        setup(servers, client).await?;
    }
    let db = &servers.stack.db;
    let direct_env = env(
        servers,
        "direct",
        db.port.expect("MariaDB on TCP"),
        &db.socket,
        DIRECT_PASSWORD,
    );
    let direct = run(servers, client, "direct", &direct_env).await?;

    let socket = servers.dir.path().join(format!("{client}.sock"));
    let sidecar = start_sidecar(servers, &socket).await;
    let via_env = env(
        servers,
        "sidecar",
        sidecar.addr().port(),
        &socket,
        SIDECAR_PASSWORD,
    );
    let via = run(servers, client, "sidecar", &via_env).await;
    sidecar.shutdown().await;
    Ok(compare(&direct, &via?))
}

fn env(
    servers: &Servers,
    target: &str,
    port: u16,
    socket: &Path,
    password: &str,
) -> HashMap<String, String> {
    let rows = std::env::var("MQ_BIG_ROWS").unwrap_or_else(|_| "20000".into());
    [
        ("MQ_TARGET", target.to_string()),
        ("MQ_HOST", "127.0.0.1".into()),
        ("MQ_PORT", port.to_string()),
        ("MQ_SOCKET", socket.display().to_string()),
        ("MQ_USER", "app".into()),
        ("MQ_PASSWORD", password.into()),
        ("MQ_DATABASE", "app".into()),
        ("MQ_OTHER_DATABASE", "app2".into()),
        ("MQ_TLS", "1".into()),
        ("MQ_TLS_CA", servers.tls.ca.display().to_string()),
        ("MQ_BIG_ROWS", rows),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

async fn start_sidecar(servers: &Servers, socket: &Path) -> Sidecar {
    let stack = &servers.stack;
    let secret = |v: &str| Secret {
        value: Some(v.into()),
        ..Default::default()
    };
    let mut config = SidecarConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        socket: Some(socket.to_path_buf()),
        ..Default::default()
    };
    // caching_sha2_password is the default plugin.
    config.auth.users = vec![LocalUser {
        username: "app".into(),
        password: secret(SIDECAR_PASSWORD),
    }];
    config.tls.cert = Some(servers.tls.cert.clone());
    config.tls.key = Some(servers.tls.key.clone());
    config.upstream.url = format!("https://localhost:{}", stack.addr().port());
    config.upstream.ca = Some(stack.cert.clone());
    config.upstream.username = common::USER.into();
    config.upstream.password = secret(common::PASSWORD);
    let sidecar = Sidecar::start(config).await.expect("sidecar starts");
    // The first client must see what it sees directly: MariaDB's version,
    // which decides features and how JSON columns are described; the
    // sidecar learns it from the gateway shortly after start.
    for _ in 0..500 {
        if sidecar.server_version().contains("MariaDB") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        sidecar.server_version().contains("MariaDB"),
        "the sidecar learns the backend's version"
    );
    sidecar
}

/// A client's `setup`, which installs what it needs (fast when done).
async fn setup(servers: &Servers, client: &str) -> Result<(), String> {
    let script = root()
        .join("tests/matrix/clients")
        .join(client)
        .join("setup");
    if !script.exists() {
        return Ok(());
    }
    let log = servers.logs.join(format!("{client}.setup.log"));
    let out = Command::new(&script)
        .current_dir(script.parent().unwrap())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(SETUP_TIMEOUT, out)
        .await
        .map_err(|_| format!("setup did not finish in {SETUP_TIMEOUT:?}"))?
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    let mut text = out.stdout.clone();
    text.extend_from_slice(&out.stderr);
    std::fs::write(&log, &text).unwrap();
    if !out.status.success() {
        return Err(format!(
            "setup failed ({}); its output ({}) ends:\n{}",
            out.status,
            log.display(),
            tail(&String::from_utf8_lossy(&text), 20)
        ));
    }
    Ok(())
}

/// One run of a client against one target: its answers by check.
async fn run(
    servers: &Servers,
    client: &str,
    target: &str,
    env: &HashMap<String, String>,
) -> Result<BTreeMap<String, Outcome>, String> {
    let lines = if IN_PROCESS.contains(&client) {
        let run = rust_mysql_async::run(env);
        tokio::time::timeout(RUN_TIMEOUT, run)
            .await
            .map_err(|_| format!("{target} run did not finish in {RUN_TIMEOUT:?}"))?
    } else {
        let script = root().join("tests/matrix/clients").join(client).join("run");
        let out = Command::new(&script)
            .current_dir(script.parent().unwrap())
            .envs(env)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(RUN_TIMEOUT, out)
            .await
            .map_err(|_| format!("{target} run did not finish in {RUN_TIMEOUT:?}"))?
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let log = |stream: &str| servers.logs.join(format!("{client}.{target}.{stream}"));
        std::fs::write(log("stdout"), &stdout).unwrap();
        std::fs::write(log("stderr"), &stderr).unwrap();
        if !out.status.success() {
            return Err(format!(
                "{target} run exited with {}; stderr ends:\n{}",
                out.status,
                tail(&stderr, 20)
            ));
        }
        stdout.lines().map(str::to_string).collect()
    };
    parse(&lines).map_err(|e| format!("{target} run: {e}"))
}

/// The contract's output: one JSON object per line and check.
fn parse(lines: &[String]) -> Result<BTreeMap<String, Outcome>, String> {
    let mut outcomes = BTreeMap::new();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let bad = || format!("not a check line: {}", truncate(line, 200));
        let v: Value = serde_json::from_str(line).map_err(|_| bad())?;
        let check = v["check"].as_str().ok_or_else(bad)?.to_string();
        let text = |k: &str| match &v[k] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let outcome = if let Some(answer) = v.get("answer") {
            Outcome::Answer(answer.clone())
        } else if v.get("error").is_some() {
            Outcome::Error(text("error"))
        } else if v.get("skip").is_some() {
            Outcome::Skip(text("skip"))
        } else {
            return Err(bad());
        };
        if outcomes.insert(check.clone(), outcome).is_some() {
            return Err(format!("check {check} reported twice"));
        }
    }
    if outcomes.is_empty() {
        return Err("no checks reported".into());
    }
    Ok(outcomes)
}

fn compare(
    direct: &BTreeMap<String, Outcome>,
    via: &BTreeMap<String, Outcome>,
) -> BTreeMap<String, Verdict> {
    let names: BTreeSet<&String> = direct.keys().chain(via.keys()).collect();
    names
        .into_iter()
        .map(|name| {
            let verdict = match (direct.get(name), via.get(name)) {
                (Some(Outcome::Answer(a)), Some(Outcome::Answer(b))) if a == b => Verdict::Pass,
                (Some(Outcome::Answer(a)), Some(Outcome::Answer(b))) => {
                    let mut diffs = Vec::new();
                    json_diff("$", a, b, &mut diffs);
                    let more = diffs.len().saturating_sub(MAX_DIFFS);
                    diffs.truncate(MAX_DIFFS);
                    if more > 0 {
                        diffs.push(format!("… and {more} more differences"));
                    }
                    Verdict::Fail(format!(
                        "answers differ (direct vs sidecar):\n  {}",
                        diffs.join("\n  ")
                    ))
                }
                (Some(Outcome::Skip(_)), Some(Outcome::Skip(_))) => Verdict::Skip,
                (d, v) => {
                    Verdict::Fail(format!("direct: {}; sidecar: {}", describe(d), describe(v)))
                }
            };
            (name.clone(), verdict)
        })
        .collect()
}

const MAX_DIFFS: usize = 12;

fn describe(outcome: Option<&Outcome>) -> String {
    match outcome {
        None => "not reported".into(),
        Some(Outcome::Answer(a)) => format!("answered {}", truncate(&a.to_string(), 300)),
        Some(Outcome::Error(e)) => format!("error: {}", truncate(e, 600)),
        Some(Outcome::Skip(s)) => format!("skipped ({s})"),
    }
}

/// Where two answers differ, as JSON paths with both values.
fn json_diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(a), Some(b)) => json_diff(&p, a, b, out),
                    (a, b) => out.push(pair(&p, a, b)),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (a, b)) in x.iter().zip(y).enumerate() {
                json_diff(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ if a != b => out.push(pair(path, Some(a), Some(b))),
        _ => {}
    }
}

fn pair(path: &str, a: Option<&Value>, b: Option<&Value>) -> String {
    let show = |v: Option<&Value>| v.map_or("(absent)".into(), |v| truncate(&v.to_string(), 200));
    format!("{path}: direct {} / sidecar {}", show(a), show(b))
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}…")
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The Markdown table: a row per client, a column per check, extra checks
/// listed in the last column.
fn table(results: &BTreeMap<String, Result<BTreeMap<String, Verdict>, String>>) -> String {
    let mark = |v: Option<&Verdict>| match v {
        Some(Verdict::Pass) => "✅",
        Some(Verdict::Fail(_)) | None => "❌",
        Some(Verdict::Skip) => "—",
    };
    let mut t = format!("| client | {} | other checks |\n", CHECKS.join(" | "));
    t.push_str(&format!("|---|{}---|\n", "---|".repeat(CHECKS.len())));
    for (client, verdicts) in results {
        let empty = BTreeMap::new();
        let verdicts = verdicts.as_ref().unwrap_or(&empty);
        let cells: Vec<&str> = CHECKS.iter().map(|c| mark(verdicts.get(*c))).collect();
        let other: Vec<String> = verdicts
            .iter()
            .filter(|(name, _)| !CHECKS.contains(&name.as_str()))
            .map(|(name, v)| format!("{name} {}", mark(Some(v))))
            .collect();
        t.push_str(&format!(
            "| {client} | {} | {} |\n",
            cells.join(" | "),
            other.join(", ")
        ));
    }
    t.push_str("\n✅ same answer directly and through the sidecar · ❌ differs or failed · — the client has no such feature\n");
    t
}

/// Checks (or with `MQ_MATRIX_WRITE_README=1` rewrites) the README's copy
/// of the table; `Some` says what is wrong.
fn check_readme(table: &str) -> Option<String> {
    let path = root().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (Some(start), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        return Some(format!("README.md has no {BEGIN} … {END} section"));
    };
    let current = readme[start + BEGIN.len()..end].trim();
    if current == table.trim() {
        return None;
    }
    if std::env::var("MQ_MATRIX_WRITE_README").as_deref() == Ok("1") {
        let updated = format!(
            "{}{BEGIN}\n{}\n{}",
            &readme[..start],
            table.trim(),
            &readme[end..]
        );
        std::fs::write(&path, updated).unwrap();
        return None;
    }
    Some(
        "README.md's client-compatibility table differs from this run's \
         (tests/matrix/RESULTS.md); regenerate it with \
         MQ_MATRIX_WRITE_README=1 cargo test --test matrix"
            .into(),
    )
}

/// A CA and a server certificate for `localhost` / 127.0.0.1 signed by it,
/// for MariaDB and the sidecar's client-facing TLS alike (clients verify
/// both against `MQ_TLS_CA`).
fn tls_files(dir: &Path) -> TlsFiles {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "myquic matrix test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server-key.pem"),
    };
    std::fs::write(&files.ca, ca_cert.pem()).unwrap();
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    files
}
