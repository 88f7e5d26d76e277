//! `myquic sidecar` as a child process, as `tests/admin.rs` and
//! `tests/sidecar_network.rs` run it: a config naming the gateway, a local
//! user, a unix socket in its own temp dir, its log in a file there, and
//! the process killed and reaped on drop (inside a network namespace when
//! one is given, then before the namespace goes).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::netns::{NetNs, NsChild};
use super::{PASSWORD, USER};

pub const LOCAL_USER: &str = "app";
pub const LOCAL_PASSWORD: &str = "local-secret";

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
        dir,
    }
}
