//! `myquic sidecar` as a child process, as `tests/admin.rs`,
//! `tests/sidecar_network.rs` and `tests/sidecar_security.rs` run it: a
//! config naming the gateway, a local user, a unix socket in its own temp
//! dir, its log in a file there (its tail printed when a test fails), and
//! the process killed and reaped on drop (inside a network namespace when
//! one is given, then before the namespace goes). Clients reach it on the
//! unix socket: `mysql_async`, the `mariadb` command-line tools, and its
//! admin endpoint when it has one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::netns::{NetNs, NsChild};
use super::{LOCAL_PASSWORD, LOCAL_USER, PASSWORD, USER};

/// The child process, wherever it runs.
pub enum Child {
    Plain(std::process::Child),
    Ns(NsChild),
}

impl Child {
    pub fn inner(&mut self) -> &mut std::process::Child {
        match self {
            Self::Plain(c) => c,
            Self::Ns(c) => c,
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Self::Plain(c) = self {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub struct SidecarChild {
    pub child: Child,
    pub pid: u32,
    pub socket: PathBuf,
    pub log: PathBuf,
    /// The admin endpoint, when started with [`SidecarChild::with_admin`].
    pub admin: Option<SocketAddr>,
    pub dir: tempfile::TempDir,
}

/// Starts `myquic --config FILE sidecar` against the gateway at
/// `gateway`, trusting `ca`. `extra` is appended to the config after
/// `[sidecar.upstream]`'s keys (more upstream keys first, then further
/// sections); `rust_log` sets its `RUST_LOG`.
pub fn spawn(
    ns: Option<&NetNs>,
    gateway: SocketAddr,
    ca: &Path,
    extra: &str,
    rust_log: Option<&str>,
) -> SidecarChild {
    // Short path: unix socket paths are limited to 108 bytes.
    let dir = tempfile::Builder::new().prefix("myq-sc").tempdir().unwrap();
    let socket = dir.path().join("s");
    let log = dir.path().join("sidecar.log");
    let config = dir.path().join("myquic.toml");
    let quote = |p: &Path| format!("{:?}", p.display().to_string());
    std::fs::write(
        &config,
        format!(
            r#"[sidecar]
listen = "127.0.0.1:0"
socket = {socket}
[[sidecar.auth.users]]
username = "{LOCAL_USER}"
password = {{ value = "{LOCAL_PASSWORD}" }}
[sidecar.upstream]
url = "https://{gateway}"
ca = {ca}
username = "{USER}"
password = {{ value = "{PASSWORD}" }}
probe_interval = "1s"
{extra}
"#,
            socket = quote(&socket),
            ca = quote(ca),
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_myquic");
    let mut cmd = match ns {
        Some(ns) => ns.command(bin),
        None => std::process::Command::new(bin),
    };
    cmd.arg("--config")
        .arg(&config)
        .arg("sidecar")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let mut child = match ns {
        Some(ns) => Child::Ns(ns.spawn(&mut cmd)),
        None => Child::Plain(cmd.spawn().expect("starting the sidecar")),
    };
    let pid = child.inner().id();
    SidecarChild {
        child,
        pid,
        socket,
        log,
        admin: None,
        dir,
    }
}

/// A TCP port nobody listens on right now.
pub fn free_port(ip: std::net::IpAddr) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl SidecarChild {
    /// Starts it (inside `ns` if given) against the gateway at `gateway`,
    /// trusting `ca`, and waits until a client can log in and query.
    /// Its admin endpoint is on a known port (in `ns` if given).
    pub async fn start(ns: Option<&NetNs>, gateway: SocketAddr, ca: &Path) -> Self {
        let admin_ip = ns.map_or([127, 0, 0, 1].into(), |ns| ns.ns_addr().into());
        let admin = SocketAddr::new(admin_ip, free_port([127, 0, 0, 1].into()));
        let extra = format!("[sidecar.admin]\nlisten = \"{admin}\"");
        let mut sidecar = spawn(ns, gateway, ca, &extra, None);
        sidecar.admin = Some(admin);
        sidecar.wait_serving().await
    }

    /// Spawns it with its admin endpoint on a known port (in `ns` if
    /// given), a 2 s connect timeout and `RUST_LOG=log_filter`; `extra`
    /// as for [`spawn`]. Nothing is waited for.
    pub fn with_admin(
        ns: Option<&NetNs>,
        gateway: SocketAddr,
        ca: &Path,
        extra: &str,
        log_filter: &str,
    ) -> Self {
        let admin_ip = ns.map_or([127, 0, 0, 1].into(), |ns| ns.ns_addr().into());
        let admin = SocketAddr::new(admin_ip, free_port([127, 0, 0, 1].into()));
        let extra =
            format!("connect_timeout = \"2s\"\n[sidecar.admin]\nlisten = \"{admin}\"\n{extra}");
        let mut sidecar = spawn(ns, gateway, ca, &extra, Some(log_filter));
        sidecar.admin = Some(admin);
        sidecar
    }

    /// Waits until a client can log in and query, within 20 s.
    pub async fn wait_serving(mut self) -> Self {
        let start = Instant::now();
        loop {
            let exited = self.child.inner().try_wait().unwrap();
            assert!(exited.is_none(), "the sidecar exited: {exited:?}");
            if self.socket.exists()
                && let Ok(Ok(mut conn)) =
                    tokio::time::timeout(Duration::from_secs(5), self.try_connect()).await
                && conn.query_drop("SELECT 1").await.is_ok()
            {
                let _ = conn.disconnect().await;
                return self;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the sidecar did not serve a query within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Options for [`LOCAL_USER`] on the unix socket, in database `app`.
    pub fn opts(&self) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(self.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some(LOCAL_USER))
            .pass(Some(LOCAL_PASSWORD))
            .db_name(Some("app"))
            .into()
    }

    pub async fn try_connect(&self) -> Result<mysql_async::Conn, mysql_async::Error> {
        mysql_async::Conn::new(self.opts()).await
    }

    /// A connection through the sidecar, within 10 s.
    pub async fn connect(&self) -> mysql_async::Conn {
        tokio::time::timeout(Duration::from_secs(10), self.try_connect())
            .await
            .expect("connecting to the sidecar: no answer within 10 s")
            .expect("a connection through the sidecar")
    }

    /// A stock command-line client on the sidecar's socket.
    pub fn cli(&self, program: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .arg(format!("--user={LOCAL_USER}"))
            .arg(format!("--password={LOCAL_PASSWORD}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `sql` with `mariadb` in batch mode (no automatic reconnect,
    /// which would re-send); its output, or its error text.
    pub async fn mariadb(&self, sql: &str) -> Result<String, String> {
        let mut cmd = self.cli("mariadb");
        cmd.args([
            "--batch",
            "--skip-column-names",
            "--skip-reconnect",
            "-e",
            sql,
            "app",
        ]);
        let out = tokio::time::timeout(Duration::from_secs(15), cmd.output())
            .await
            .map_err(|_| "no answer within 15 s".to_string())?
            .expect("running mariadb");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// The transport new requests use, as `/metrics` says
    /// (`myquic_upstream_transport`): `Http3`, `Http2` or `none`.
    pub async fn transport(&self) -> Option<String> {
        let metrics = self.metrics().await;
        [("h3", "Http3"), ("h2", "Http2"), ("none", "none")]
            .into_iter()
            .find(|(label, _)| {
                metrics.value(&format!("myquic_upstream_transport{{version=\"{label}\"}}")) == 1.0
            })
            .map(|(_, name)| name.to_string())
    }

    /// Waits until the sidecar reports `want`; the time it took.
    pub async fn wait_transport(&self, want: &str, within: Duration) -> Duration {
        let start = Instant::now();
        let mut seen = None;
        while start.elapsed() < within {
            seen = self.transport().await;
            if seen.as_deref() == Some(want) {
                return start.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the sidecar is not on {want} within {within:?} (last status: {seen:?})");
    }

    /// A figure from /proc/<pid>/status, in bytes (`VmHWM`: peak RSS).
    pub fn memory(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in /proc/{}/status", self.pid));
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// Sends signal `name` (`TERM`, `INT`, …) with `kill`.
    pub fn signal(&mut self, name: &str) {
        let pid = self.child.inner().id().to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The exit code, waiting up to `within`.
    pub async fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.inner().try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < within,
                "the sidecar did not exit within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The admin endpoint's address; panics without one.
    pub fn admin(&self) -> SocketAddr {
        self.admin.expect("started with an admin endpoint")
    }

    /// Spawns it with its admin endpoint and waits (with `myquic wait`)
    /// until it is ready.
    pub async fn ready(ns: Option<&NetNs>, gateway: SocketAddr, ca: &Path, extra: &str) -> Self {
        let sidecar = Self::with_admin(ns, gateway, ca, extra, "info");
        sidecar.wait_ready().await;
        sidecar
    }

    pub async fn wait_ready(&self) {
        let status = self.wait_command("20s").status().await.unwrap();
        assert!(status.success(), "myquic wait: {status}");
    }

    /// `myquic wait` on the admin endpoint.
    pub fn wait_command(&self, timeout: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_myquic"));
        cmd.args([
            "wait",
            "--admin",
            &self.admin().to_string(),
            "--timeout",
            timeout,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
        cmd
    }

    /// GET `path` on the admin endpoint: status and body, within 5 s.
    pub async fn get(&self, path: &str) -> (u16, String) {
        tokio::time::timeout(
            Duration::from_secs(5),
            myquic::admin::wait::get(self.admin(), path),
        )
        .await
        .unwrap_or_else(|_| panic!("GET {path}: no answer"))
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// The admin endpoint's `/metrics` page.
    pub async fn metrics(&self) -> Metrics {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200, "{text}");
        Metrics(text)
    }
}

impl Drop for SidecarChild {
    fn drop(&mut self) {
        // Killed first (the `Child` would be, right after) so the log is
        // complete.
        let _ = self.child.inner().kill();
        let _ = self.child.inner().wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(200)..];
            eprintln!("--- sidecar log (last {} lines)", tail.len());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}

/// A scraped `/metrics` page.
pub struct Metrics(pub String);

impl Metrics {
    /// The value of the series `name{labels}` (exactly), 0 if absent.
    pub fn value(&self, series: &str) -> f64 {
        self.0
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map_or(0.0, |v| v.parse().unwrap())
    }
}
