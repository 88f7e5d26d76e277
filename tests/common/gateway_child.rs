//! `myquic gateway` as a child process: for tests that signal, drain or
//! kill a gateway (a tier of several, one MariaDB).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::sidecar_child::free_port;
use super::{MariaDb, PASSWORD, USER};

pub struct GatewayChild {
    pub child: tokio::process::Child,
    /// UDP (HTTP/3) and TCP (HTTP/2) port.
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    /// Its self-signed certificate (PEM), written at start.
    pub cert: PathBuf,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl GatewayChild {
    /// Starts a gateway in front of `db` for [`USER`], with `extra_toml`
    /// appended to its configuration, and waits (with `myquic wait`)
    /// until it is ready.
    pub async fn ready(db: &MariaDb, extra_toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ip = [127, 0, 0, 1].into();
        let addr = SocketAddr::new(ip, free_port(ip));
        let admin = SocketAddr::new(ip, free_port(ip));
        let cert = dir.path().join("gateway.pem");
        let config = dir.path().join("myquic.toml");
        std::fs::write(
            &config,
            format!(
                "[gateway]\nlisten = \"{addr}\"\n\
                 [gateway.tls]\nself_signed_cert_out = \"{cert}\"\n\
                 [gateway.backend]\nsocket = \"{socket}\"\nwarm_connections = 2\n\
                 [[gateway.credentials]]\nusername = \"{USER}\"\npassword = {{ value = \"{PASSWORD}\" }}\n\
                 backend_password = {{ value = \"app-backend-pw\" }}\ndatabase = \"app\"\n\
                 [gateway.admin]\nlisten = \"{admin}\"\n{extra_toml}\n",
                cert = cert.display(),
                socket = db.socket.display(),
            ),
        )
        .unwrap();
        let log = dir.path().join("gateway.log");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_myquic"))
            .args(["--config", config.to_str().unwrap(), "gateway"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let gateway = Self {
            child,
            addr,
            admin,
            cert,
            log,
            _dir: dir,
        };
        let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_myquic"))
            .args(["wait", "--admin", &admin.to_string(), "--timeout", "20s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .unwrap();
        assert!(
            status.success(),
            "gateway not ready:\n{}",
            gateway.log_text()
        );
        gateway
    }

    /// Sends signal `name` (`TERM`, `KILL`) with `kill`; nothing once
    /// the process has been reaped (its pid may be someone else's).
    pub fn signal(&self, name: &str) {
        let Some(pid) = self.child.id() else {
            return;
        };
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to end (tokio reaps it on SIGCHLD), up to
    /// `within`: whether it did.
    pub async fn exited_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.child.wait())
            .await
            .is_ok()
    }

    /// The exit code once the process ends, waiting up to `within`
    /// (`None`: still running; `Some(None)`: killed by a signal).
    pub async fn exit_code(&mut self, within: Duration) -> Option<Option<i32>> {
        let status = tokio::time::timeout(within, self.child.wait()).await.ok()?;
        Some(status.ok().and_then(|s| s.code()))
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
