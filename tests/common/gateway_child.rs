//! `myquic gateway` as a child process: for tests that signal, drain or
//! kill a gateway (a tier of several, one MariaDB).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::sidecar_child::free_port;
use super::{MariaDb, PASSWORD, USER};

/// Where a gateway listens and the certificate it presents (`None`: a
/// self-signed one made at start).
#[derive(Clone, Debug)]
pub struct Place {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    /// Certificate and key PEM files.
    pub tls: Option<(PathBuf, PathBuf)>,
}

impl Place {
    /// Free ports on `ip` (the admin endpoint on loopback) and a
    /// self-signed certificate for `localhost` and `ip` written under
    /// `dir`: every start given this place listens and presents the same.
    pub fn fixed(dir: &std::path::Path, ip: std::net::IpAddr) -> Self {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), ip.to_string()]).unwrap();
        let (cert, key) = (dir.join("gateway-cert.pem"), dir.join("gateway-key.pem"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        let loopback = [127, 0, 0, 1].into();
        Self {
            addr: SocketAddr::new(ip, free_port(ip)),
            admin: SocketAddr::new(loopback, free_port(loopback)),
            tls: Some((cert, key)),
        }
    }
}

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
        let ip = [127, 0, 0, 1].into();
        let place = Place {
            addr: SocketAddr::new(ip, free_port(ip)),
            admin: SocketAddr::new(ip, free_port(ip)),
            tls: None,
        };
        Self::ready_at(db, &place, "", extra_toml).await
    }

    /// As [`GatewayChild::ready`], on the given addresses and with the
    /// given certificate (what a gateway restarted by its supervisor
    /// keeps), with `backend_toml`'s keys added to `[gateway.backend]`.
    pub async fn ready_at(
        db: &MariaDb,
        place: &Place,
        backend_toml: &str,
        extra_toml: &str,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let Place { addr, admin, .. } = *place;
        let (cert, tls_toml) = match &place.tls {
            Some((cert, key)) => (
                cert.clone(),
                format!("cert = {:?}\nkey = {:?}", cert.display(), key.display()),
            ),
            None => {
                let cert = dir.path().join("gateway.pem");
                let toml = format!("self_signed_cert_out = {:?}", cert.display());
                (cert, toml)
            }
        };
        let config = dir.path().join("myquic.toml");
        std::fs::write(
            &config,
            format!(
                "[gateway]\nlisten = \"{addr}\"\n\
                 [gateway.tls]\n{tls_toml}\n\
                 [gateway.backend]\nsocket = \"{socket}\"\nwarm_connections = 2\n{backend_toml}\n\
                 [[gateway.credentials]]\nusername = \"{USER}\"\npassword = {{ value = \"{PASSWORD}\" }}\n\
                 backend_password = {{ value = \"app-backend-pw\" }}\ndatabase = \"app\"\n\
                 [gateway.admin]\nlisten = \"{admin}\"\n{extra_toml}\n",
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

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The backend connections a gateway's pools hold, in use and idle, read
/// from its metrics at `admin`.
pub async fn backend_connections(admin: SocketAddr) -> f64 {
    let (_, body) = myquic::admin::wait::get(admin, "/metrics")
        .await
        .expect("the gateway's metrics");
    let metrics = super::sidecar_child::Metrics(body);
    ["in_use", "idle"]
        .iter()
        .map(|state| {
            metrics.value(&format!(
                "myquic_gateway_backend_connections{{state=\"{state}\"}}"
            ))
        })
        .sum()
}

/// Waits until the gateway's pools hold at most `most` backend
/// connections: a pool closes those over its warm ones once idle for its
/// TTL (10 s, checked each second), so the gauges are watched, up to 30 s.
pub async fn wait_backend_connections_at_most(admin: SocketAddr, most: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let held = backend_connections(admin).await;
        if held <= most {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pool kept its connections: {held} held, at most {most} wanted"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
