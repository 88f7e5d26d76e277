//! The parts under test as child processes of the release `myquic`
//! binary — the gateway on the server side, one sidecar per transport on
//! the client side — and any extra client given as a command.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::bail;

use super::certs::Certs;
use super::driver::Target;
use super::mariadb::{BACKEND_PASSWORD, MariaDb};
use super::net::{GATEWAY_PORT, Net};
use super::procs::{self, Proc};

pub const API_USER: &str = "app";
pub const API_PASSWORD: &str = "api-secret";
const LOCAL_PASSWORD: &str = "local-secret";
/// Both transports' congestion controllers are pinned to this (see the
/// report's "Congestion control" section for what TCP can and cannot pin).
pub const CONGESTION: &str = "bbr";

/// The release binary built with the bench, or `MYQUIC_BENCH_BIN` (an
/// earlier build, to measure a change against it on the same machine).
pub fn myquic() -> String {
    std::env::var("MYQUIC_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_myquic").into())
}

fn quote(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// Waits until something in `ns` accepts TCP on 127.0.0.1:`port` (or
/// `host:port`), or `proc` exits.
fn wait_listening(ns: &str, host: &str, port: u16, proc: &mut Proc) -> anyhow::Result<()> {
    let probe = format!("exec 3<>/dev/tcp/{host}/{port}");
    let ok = procs::wait_until(Duration::from_secs(30), || {
        proc.exited().is_none()
            && Command::new("ip")
                .args(["netns", "exec", ns, "bash", "-c", &probe])
                .stderr(std::process::Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
    });
    if !ok {
        let exit = proc.exited();
        bail!(
            "{} did not listen on {host}:{port} (exit: {exit:?})",
            proc.name
        );
    }
    Ok(())
}

pub struct Gateway {
    pub proc: Proc,
    pub url: String,
}

impl Gateway {
    pub fn start(net: &Net, db: &MariaDb, certs: &Certs, dir: &Path) -> anyhow::Result<Self> {
        let ip = net.server_ip();
        let config = dir.join("gateway.toml");
        std::fs::write(
            &config,
            format!(
                r#"[gateway]
listen = "{ip}:{GATEWAY_PORT}"
# Both transports pinned, and printed in the report.
congestion = "{CONGESTION}"
tcp_congestion = "{CONGESTION}"

[gateway.admin]
listen = "127.0.0.1:0"

[gateway.tls]
cert = {cert}
key = {key}

[gateway.backend]
socket = {socket}
warm_connections = 4
max_connections = 1500
{backend_extra}

[[gateway.credentials]]
username = "{API_USER}"
password = {{ value = "{API_PASSWORD}" }}
backend_user = "app"
backend_password = {{ value = "{BACKEND_PASSWORD}" }}
database = "app"
"#,
                cert = quote(&certs.cert),
                key = quote(&certs.key),
                socket = quote(&db.socket),
                // Extra `[gateway.backend]` lines, to compare settings
                // back to back (`relay_extended_metadata = false`).
                backend_extra = std::env::var("MQ_BENCH_GATEWAY_BACKEND").unwrap_or_default(),
            ),
        )?;
        let mut cmd = procs::command(Some(net.server_ns()), &myquic());
        cmd.arg("--config").arg(&config).arg("gateway");
        let mut proc = Proc::spawn("gateway", cmd, &dir.join("gateway.log"))?;
        wait_listening(net.server_ns(), &ip, GATEWAY_PORT, &mut proc)?;
        Ok(Self {
            proc,
            url: format!("https://{ip}:{GATEWAY_PORT}"),
        })
    }
}

/// A client of the table: the direct baseline, a sidecar, or an extra.
pub struct Client {
    pub name: String,
    pub target: Target,
    /// The process relaying for it (none for direct).
    pub proc: Option<Proc>,
    /// The sidecar's unix socket, for idle connections.
    pub socket: Option<PathBuf>,
    /// Where to read the sidecar's admin endpoint: its network namespace,
    /// and its log (which names the endpoint's port).
    pub admin: Option<(String, PathBuf)>,
}

impl Client {
    pub fn direct(net: &Net, certs: &Certs) -> Self {
        Client {
            name: "direct".into(),
            target: Target {
                host: net.server_ip(),
                port: super::mariadb::PORT,
                user: "app".into(),
                password: BACKEND_PASSWORD.into(),
                tls_ca: Some(certs.ca.display().to_string()),
            },
            proc: None,
            socket: None,
            admin: None,
        }
    }

    /// `myquic sidecar` over `transport` ("http2" / "http3").
    pub fn sidecar(
        net: &Net,
        gateway: &Gateway,
        certs: &Certs,
        transport: &str,
        port: u16,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let name = if transport == "http3" { "h3" } else { "h2" };
        let socket = dir.join(format!("sc-{name}.sock"));
        let config = dir.join(format!("sidecar-{name}.toml"));
        std::fs::write(
            &config,
            format!(
                r#"[sidecar]
listen = "127.0.0.1:{port}"
socket = {socket}

[[sidecar.auth.users]]
username = "app"
password = {{ value = "{LOCAL_PASSWORD}" }}

[sidecar.upstream]
url = "{url}"
ca = {ca}
username = "{API_USER}"
password = {{ value = "{API_PASSWORD}" }}
transport = "{transport}"
congestion = "{CONGESTION}"
tcp_congestion = "{CONGESTION}"

# Two sidecars share the client namespace: no fixed admin port.
[sidecar.admin]
listen = "127.0.0.1:0"
"#,
                socket = quote(&socket),
                url = gateway.url,
                ca = quote(&certs.ca),
            ),
        )?;
        let mut cmd = procs::command(Some(net.client_ns()), &myquic());
        cmd.arg("--config").arg(&config).arg("sidecar");
        let mut proc = Proc::spawn(
            &format!("sidecar-{name}"),
            cmd,
            &dir.join(format!("sidecar-{name}.log")),
        )?;
        wait_listening(net.client_ns(), "127.0.0.1", port, &mut proc)?;
        Ok(Client {
            name: format!("sidecar {name}"),
            target: Target {
                host: "127.0.0.1".into(),
                port,
                user: "app".into(),
                password: LOCAL_PASSWORD.into(),
                tls_ca: None,
            },
            proc: Some(proc),
            socket: Some(socket),
            admin: Some((
                net.client_ns().to_string(),
                dir.join(format!("sidecar-{name}.log")),
            )),
        })
    }

    /// An extra client: `command` (placeholders substituted) started with
    /// `sh -c` on the client side, then used like the sidecar on `port`
    /// with the API credentials.
    pub fn extra(
        net: &Net,
        gateway: &Gateway,
        certs: &Certs,
        name: &str,
        command: &str,
        port: u16,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let (host, gport) = (net.server_ip(), GATEWAY_PORT.to_string());
        let cmdline = command
            .replace("{port}", &port.to_string())
            .replace("{gateway_url}", &gateway.url)
            .replace("{gateway_host}", &host)
            .replace("{gateway_port}", &gport)
            .replace("{ca}", &certs.ca.display().to_string())
            .replace("{user}", API_USER)
            .replace("{password}", API_PASSWORD);
        let mut cmd = procs::command(Some(net.client_ns()), "sh");
        cmd.arg("-c").arg(&cmdline);
        let mut proc = Proc::spawn(name, cmd, &dir.join(format!("extra-{name}.log")))?;
        wait_listening(net.client_ns(), "127.0.0.1", port, &mut proc)?;
        Ok(Client {
            name: name.to_string(),
            target: Target {
                host: "127.0.0.1".into(),
                port,
                user: API_USER.into(),
                password: API_PASSWORD.into(),
                tls_ca: None,
            },
            proc: Some(proc),
            socket: None,
            admin: None,
        })
    }

    pub fn is_sidecar(&self) -> bool {
        self.socket.is_some()
    }

    pub fn opts_on_socket(&self) -> Option<mysql_async::Opts> {
        let socket = self.socket.as_ref()?;
        Some(
            mysql_async::OptsBuilder::default()
                .socket(Some(socket.display().to_string()))
                .prefer_socket(true)
                .user(Some("app"))
                .pass(Some(LOCAL_PASSWORD))
                .db_name(Some("app"))
                .into(),
        )
    }

    /// The transport the sidecar uses: its admin endpoint's `/metrics`
    /// (`myquic_upstream_transport`), read with curl in its namespace at
    /// the address its log names.
    pub fn status(&self) -> Option<String> {
        let (ns, log) = self.admin.as_ref()?;
        let log = std::fs::read_to_string(log).ok()?;
        let addr = log
            .lines()
            .find(|line| line.contains("admin endpoint listening"))?
            .split("addr=")
            .nth(1)?
            .split_whitespace()
            .next()?
            .to_string();
        let out = procs::command(Some(ns), "curl")
            .args(["-fsS", &format!("http://{addr}/metrics")])
            .output()
            .ok()?;
        let metrics = String::from_utf8_lossy(&out.stdout);
        metrics
            .lines()
            .filter_map(|line| line.strip_prefix("myquic_upstream_transport{version=\""))
            .find_map(|rest| rest.strip_suffix("\"} 1"))
            .map(|version| format!("transport {version}"))
    }
}
