//! Vitess in front of MariaDB, for tests/vitess.rs: `vttestserver` (one
//! process: vtcombo — vtgate and a vttablet per shard — over one
//! `mariadbd` it starts with mysqlctl) with keyspace `app` in two shards,
//! table `t` sharded by a hash of `id`. The binaries and a VTROOT come
//! from `tests/vitess/setup` (built from the Go module proxy once, then
//! cached). mysqlctl refuses to run as root, so as root it runs as the
//! user `vt` the setup creates.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

/// The sharded keyspace; vtgate takes it as the database name.
pub const KEYSPACE: &str = "app";

const SCHEMA: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(255)) ENGINE=InnoDB;\n\
    CREATE TABLE bank (id BIGINT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB;\n";
const VSCHEMA: &str = r#"{"sharded": true, "vindexes": {"hash": {"type": "hash"}},
 "tables": {"t": {"column_vindexes": [{"column": "id", "name": "hash"}]},
            "bank": {"column_vindexes": [{"column": "id", "name": "hash"}]}}}"#;

/// A running vttestserver; stopped (and its data removed) on drop.
pub struct Vitess {
    child: Option<Child>,
    /// vtgate's MySQL port on 127.0.0.1 (any user, no password).
    pub port: u16,
    /// Everything it wrote, for a failing test to show.
    pub log: PathBuf,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

/// The VTROOT `tests/vitess/setup` made, or why there is none (Go or the
/// module proxy unavailable): run once per test binary.
pub fn vtroot() -> Result<&'static Path, &'static str> {
    static ROOT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vitess/setup");
        let out = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().last() {
            Some(root) if out.status.success() => Ok(PathBuf::from(root)),
            _ => Err(format!("{} failed ({})", script.display(), out.status)),
        }
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(String::as_str)
}

/// The uid and gid of `vt` when running as root (mysqlctl refuses root).
fn run_as() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let fields: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with("vt:"))
        .expect("user vt (tests/vitess/setup creates it)")
        .split(':')
        .collect();
    Some((fields[2].parse().unwrap(), fields[3].parse().unwrap()))
}

/// A base port with the five above it free a moment ago (vttestserver
/// binds base..base+5 itself: [`Vitess::start`] retries on a collision).
fn free_ports() -> u16 {
    loop {
        let base = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if base < 60000
            && (0..6).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok())
        {
            return base;
        }
    }
}

/// What the log said first: started, or the process ended.
enum Started {
    Yes,
    Exited,
}

impl Vitess {
    pub fn start(root: &Path) -> Self {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(root) {
                Ok(v) => return v,
                Err(log) => last = log,
            }
        }
        panic!("vttestserver did not start; its log ends:\n{last}");
    }

    fn try_start(root: &Path) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("myquic-vitess")
            .tempdir()
            .unwrap();
        let schema = dir.path().join("schema").join(KEYSPACE);
        std::fs::create_dir_all(&schema).unwrap();
        std::fs::write(schema.join("schema.sql"), SCHEMA).unwrap();
        std::fs::write(schema.join("vschema.json"), VSCHEMA).unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let ids = run_as();
        if let Some((uid, gid)) = ids {
            for entry in [dir.path(), &dir.path().join("schema"), &schema, &data] {
                std::os::unix::fs::chown(entry, Some(uid), Some(gid)).unwrap();
            }
        }
        let base = free_ports();
        let log = dir.path().join("vttestserver.log");
        let path = format!(
            "{}:{}",
            root.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new(root.join("bin/vttestserver"));
        command
            .args([
                "--port",
                &base.to_string(),
                "--mysql_bind_host",
                "127.0.0.1",
            ])
            .args(["--keyspaces", KEYSPACE, "--num_shards", "2"])
            .arg("--schema_dir")
            .arg(dir.path().join("schema"))
            .arg("--data_dir")
            .arg(&data)
            .arg("--alsologtostderr")
            .env("VTROOT", root)
            .env("VTDATAROOT", dir.path())
            .env("VT_MYSQL_ROOT", "/usr")
            .env("PATH", path)
            .env("HOME", dir.path())
            .current_dir(dir.path())
            // Its own process group: vtcombo, mysqld_safe and mariadbd
            // are stopped with it.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((uid, gid)) = ids {
            command.uid(uid).gid(gid);
        }
        let mut child = command.spawn().expect("vttestserver runs");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let mut file = std::fs::File::create(&log).unwrap();
        std::thread::spawn(move || {
            let mut told = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(file, "{line}");
                if !told && line.contains("Local cluster started.") {
                    told = true;
                    let _ = tx.send(Started::Yes);
                }
            }
            let _ = tx.send(Started::Exited);
        });
        let vitess = Self {
            child: Some(child),
            port: base + 3,
            log,
            data,
            _dir: dir,
        };
        match rx.recv_timeout(Duration::from_secs(180)) {
            Ok(Started::Yes) => Ok(vitess),
            _ => Err(vitess.log_tail()),
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Options for a connection straight to vtgate, in the keyspace.
    pub fn opts(&self) -> mysql_async::OptsBuilder {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .prefer_socket(false)
            .user(Some("root"))
            .db_name(Some(KEYSPACE))
    }
}

impl Vitess {
    /// A connection to the MariaDB under the tablets (its unix socket, as
    /// Vitess's `vt_dba`): what the tablets run there, in its processlist.
    pub async fn mariadb(&self) -> mysql_async::Conn {
        let socket = std::fs::read_dir(&self.data)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path().join("mysql.sock"))
            .find(|p| p.exists())
            .expect("mariadbd's socket under the data dir");
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("vt_dba"));
        mysql_async::Conn::new(opts)
            .await
            .expect("connects to vttestserver's mariadbd")
    }
}

impl Drop for Vitess {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id() as libc::pid_t;
        // SAFETY: a signal to our child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        // vttestserver stops vtcombo and mariadbd itself (~2 s); whatever
        // is left of its group after it exits, or after 30 s, is killed.
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = child.wait();
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(30));
        // SAFETY: a signal to the child's own process group.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = waiter.join();
    }
}
