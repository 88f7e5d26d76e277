//! A private MariaDB for the benchmark, adapted from the tests' fixture
//! (`tests/common/mariadb.rs`): its own datadir copied from a template,
//! but also a TCP listener with TLS (the direct baseline) inside the
//! server's network namespace. The harness itself always reaches it on
//! the unix socket, which no namespace hides.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use mysql_async::prelude::Queryable;

use super::certs::Certs;
use super::data;
use super::procs::{self, Proc};

pub const PORT: u16 = 3306;
pub const BACKEND_PASSWORD: &str = "app-backend-pw";

pub struct MariaDb {
    /// Held to be killed on drop.
    _proc: Proc,
    pub socket: PathBuf,
}

fn which(binary: &str) -> anyhow::Result<PathBuf> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        let p = Path::new(dir).join(binary);
        if p.exists() {
            return Ok(p);
        }
    }
    bail!("{binary} not found: install MariaDB (apt-get install mariadb-server)")
}

pub fn version() -> String {
    which("mariadbd")
        .ok()
        .and_then(|p| Command::new(p).arg("--version").output().ok())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The initialised datadir, built once and shared with the tests' fixture.
fn template() -> anyhow::Result<PathBuf> {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mariadb-template");
    if root.join("ready").exists() {
        return Ok(root);
    }
    std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR"))?;
    let staging = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let tmp = staging.path().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let out = Command::new(which("mariadb-install-db")?)
        .env("TMPDIR", &tmp)
        .arg("--no-defaults")
        .arg(format!(
            "--datadir={}",
            staging.path().join("data").display()
        ))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .arg("--user=root")
        .output()?;
    if !out.status.success() {
        bail!(
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(staging.path().join("ready"), b"")?;
    let staged = staging.keep();
    if std::fs::rename(&staged, &root).is_err() {
        let _ = std::fs::remove_dir_all(&staged);
    }
    Ok(root)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

impl MariaDb {
    /// Starts it in `ns` listening on `bind:3306` with TLS from `certs`,
    /// creates the users and loads the data sets.
    pub async fn start(
        ns: Option<&str>,
        bind: &str,
        dir: &Path,
        certs: &Certs,
    ) -> anyhow::Result<Self> {
        let data_dir = dir.join("data");
        copy_dir(&template()?.join("data"), &data_dir)?;
        let socket = dir.join("s");
        let bin = which("mariadbd")?;
        let mut cmd = procs::command(ns, bin.to_str().unwrap());
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data_dir.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg(format!("--tmpdir={}", dir.display()))
            .arg(format!("--port={PORT}"))
            .arg(format!("--bind-address={bind}"))
            .arg(format!("--ssl-ca={}", certs.ca.display()))
            .arg(format!("--ssl-cert={}", certs.cert.display()))
            .arg(format!("--ssl-key={}", certs.key.display()))
            .arg("--skip-name-resolve")
            .arg("--max-connections=2000")
            .arg("--innodb-buffer-pool-size=512M")
            .arg("--innodb-log-file-size=256M")
            // Durability is not what is measured: keep the disk out of the
            // INSERT figures as far as it goes, for every client alike.
            .arg("--innodb-flush-log-at-trx-commit=2")
            .arg("--max-allowed-packet=64M")
            .arg("--character-set-server=utf8mb4")
            .arg("--collation-server=utf8mb4_general_ci")
            .arg(format!("--log-error={}", dir.join("err.log").display()))
            .arg("--user=root");
        let proc = Proc::spawn("mariadbd", cmd, &dir.join("mariadbd.out"))?;
        let db = Self {
            _proc: proc,
            socket,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut conn = loop {
            if let Ok(c) = mysql_async::Conn::new(db.root_opts()).await {
                break c;
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "mariadbd did not start: see {}",
                    dir.join("err.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        conn.query_drop(format!(
            "CREATE DATABASE app; \
             CREATE USER app@localhost IDENTIFIED BY '{BACKEND_PASSWORD}'; \
             GRANT ALL ON app.* TO app@localhost; \
             CREATE USER app@'%' IDENTIFIED BY '{BACKEND_PASSWORD}' REQUIRE SSL; \
             GRANT ALL ON app.* TO app@'%'"
        ))
        .await
        .context("creating users")?;
        conn.query_drop("USE app").await?;
        conn.query_drop(data::SCHEMA).await.context("schema")?;
        conn.query_drop(data::medium_insert("medium")).await?;
        for sql in data::large_inserts("large", 500) {
            conn.query_drop(sql).await.context("loading large")?;
        }
        conn.disconnect().await?;
        Ok(db)
    }

    pub fn pid(&self) -> u32 {
        self._proc.pid()
    }

    pub fn root_opts(&self) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .socket(Some(self.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("root"))
            .db_name(Some("mysql"))
            .into()
    }

    /// Empties the INSERT targets so every insert cell starts alike.
    pub async fn truncate_inserts(&self) -> anyhow::Result<()> {
        let mut conn = mysql_async::Conn::new(self.root_opts()).await?;
        conn.query_drop("TRUNCATE app.medium_ins; TRUNCATE app.large_ins")
            .await?;
        conn.disconnect().await?;
        Ok(())
    }
}
