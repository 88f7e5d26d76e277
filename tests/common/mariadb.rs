//! A private MariaDB server per test: its own datadir (copied from a
//! template built once per run) and a unix socket in the system temp dir.
//! No TCP port unless asked for ([`Options::tcp`]: a free loopback port,
//! for clients that only speak TCP), so by default nothing on the machine
//! can collide with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

pub struct MariaDb {
    child: Child,
    pub socket: PathBuf,
    /// The loopback TCP port, when started with [`Options::tcp`].
    pub port: Option<u16>,
    /// What it was started with, to start it again on the same datadir.
    options: Options,
    _dir: tempfile::TempDir,
}

/// What a test needs beyond the unix socket.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Also listen on a free port on 127.0.0.1, with the test accounts
    /// (and a second database, `app2`) reachable over TCP.
    pub tcp: bool,
    /// Serve TLS with these PEM files.
    pub tls: Option<TlsFiles>,
    /// More `mariadbd` options, after the fixture's own (so they win:
    /// `--character-set-server=latin1` replaces the default utf8mb4).
    pub server_args: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// A client certificate signed by the same CA (for `REQUIRE X509`).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// A port that was free a moment ago. mariadbd binds it itself, so
/// another process can take it first: [`MariaDb::start_with`] retries.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn which(binary: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = Path::new(dir).join(binary);
        if p.exists() {
            return p;
        }
    }
    panic!("{binary} not found: install MariaDB (apt-get install mariadb-server), as .ci/run does");
}

/// Builds the template datadir once; concurrent test binaries race
/// safely by building in a private directory and renaming it into place.
fn template() -> PathBuf {
    // One builder per process too: concurrent bootstraps in one test
    // binary collided on temporary files.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mariadb-template");
    if root.join("ready").exists() {
        return root;
    }
    let staging = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let tmp = staging.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = Command::new(which("mariadb-install-db"));
    // A private temporary directory, not the shared /tmp.
    cmd.env("TMPDIR", &tmp);
    cmd.arg("--no-defaults")
        .arg(format!(
            "--datadir={}",
            staging.path().join("data").display()
        ))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if is_root() {
        cmd.arg("--user=root");
    }
    let out = cmd.output().expect("running mariadb-install-db");
    assert!(
        out.status.success(),
        "mariadb-install-db failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(staging.path().join("ready"), b"").unwrap();
    let staged = staging.keep();
    if std::fs::rename(&staged, &root).is_err() {
        // Another process won the race; its template is as good as ours.
        let _ = std::fs::remove_dir_all(&staged);
    }
    root
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `mariadbd` on the datadir under `dir`, listening on `socket` (and
/// `port` if given).
fn server_command(dir: &Path, socket: &Path, port: Option<u16>, options: &Options) -> Command {
    let mut cmd = Command::new(which("mariadbd"));
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", dir.join("data").display()))
        .arg(format!("--socket={}", socket.display()))
        .arg(format!("--pid-file={}", dir.join("pid").display()))
        .arg(format!("--tmpdir={}", dir.display()))
        .arg("--innodb-buffer-pool-size=32M")
        .arg("--innodb-log-file-size=16M")
        .arg("--max-allowed-packet=64M")
        .arg("--character-set-server=utf8mb4")
        .arg("--collation-server=utf8mb4_general_ci")
        .arg(format!("--log-error={}", dir.join("err.log").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match port {
        Some(port) => {
            // 127.0.0.1 is `localhost` to MariaDB, so the accounts
            // are the same over TCP and the socket.
            cmd.arg(format!("--port={port}"))
                .arg("--bind-address=127.0.0.1");
        }
        None => {
            cmd.arg("--skip-networking");
        }
    }
    if let Some(tls) = &options.tls {
        cmd.arg(format!("--ssl-ca={}", tls.ca.display()))
            .arg(format!("--ssl-cert={}", tls.cert.display()))
            .arg(format!("--ssl-key={}", tls.key.display()));
    }
    cmd.args(&options.server_args);
    if is_root() {
        cmd.arg("--user=root");
    }
    cmd
}

impl MariaDb {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Self {
        for _ in 0..3 {
            if let Some(db) = Self::try_start(&options).await {
                return db;
            }
        }
        panic!("mariadbd exited at start three times (its TCP port taken?)");
    }

    /// `None` if mariadbd exited during start (a port taken meanwhile).
    async fn try_start(options: &Options) -> Option<Self> {
        let template = template();
        // Short path: unix socket paths are limited to 108 bytes.
        let dir = tempfile::Builder::new().prefix("myq-db").tempdir().unwrap();
        copy_dir(&template.join("data"), &dir.path().join("data"));
        let socket = dir.path().join("s");
        let port = options.tcp.then(free_port);
        let child = server_command(dir.path(), &socket, port, options)
            .spawn()
            .expect("starting mariadbd");
        let mut db = Self {
            child,
            socket,
            port,
            options: options.clone(),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut conn) = mysql_async::Conn::new(db.root_opts()).await {
                conn.query_drop(
                    "CREATE DATABASE app; \
                     CREATE USER app@localhost IDENTIFIED BY 'app-backend-pw'; \
                     GRANT ALL ON app.* TO app@localhost; \
                     GRANT PROCESS ON *.* TO app@localhost; \
                     CREATE USER other@localhost IDENTIFIED BY 'other-backend-pw'; \
                     GRANT ALL ON app.* TO other@localhost",
                )
                .await
                .expect("creating test users");
                if port.is_some() {
                    conn.query_drop("CREATE DATABASE app2; GRANT ALL ON app2.* TO app@localhost")
                        .await
                        .expect("creating TCP test users");
                }
                conn.disconnect().await.ok();
                return Some(db);
            }
            if let Ok(Some(_)) = db.child.try_wait() {
                return None;
            }
            assert!(
                Instant::now() < deadline,
                "mariadbd did not start: see {}",
                db._dir.path().join("err.log").display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills mariadbd with SIGKILL (a crash: InnoDB recovers at the next
    /// start) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts mariadbd again on the same datadir, socket and port after
    /// [`MariaDb::kill`], and waits until root can log in (crash recovery
    /// included), within 60 s: how long that took.
    pub async fn restart(&mut self) -> Duration {
        let started = Instant::now();
        self.child = server_command(self._dir.path(), &self.socket, self.port, &self.options)
            .spawn()
            .expect("starting mariadbd again");
        loop {
            if let Ok(conn) = mysql_async::Conn::new(self.root_opts()).await {
                conn.disconnect().await.ok();
                return started.elapsed();
            }
            let exited = self.child.try_wait().unwrap();
            assert!(
                exited.is_none(),
                "mariadbd exited at restart ({exited:?}): see {}",
                self._dir.path().join("err.log").display()
            );
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "mariadbd did not accept connections within 60 s of its restart"
            );
            // Nothing to wait on but the socket: mariadbd does not say
            // when it is ready other than by accepting a login.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// mariadbd's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn root_opts(&self) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(self.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("root"))
            .into()
    }

    /// A direct connection as the test's backend user, for checking what
    /// the gateway did.
    pub async fn direct(&self) -> mysql_async::Conn {
        let opts = mysql_async::OptsBuilder::from_opts(self.root_opts())
            .user(Some("app"))
            .pass(Some("app-backend-pw"))
            .db_name(Some("app"));
        mysql_async::Conn::new(opts)
            .await
            .expect("direct connection")
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsFiles {
    /// A CA and a server certificate for `localhost` / 127.0.0.1 signed by it,
    /// for MariaDB and the sidecar's client-facing TLS alike (clients verify
    /// both against `MQ_TLS_CA`).
    pub fn generate(dir: &Path) -> Self {
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
        let mut leaf =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf.use_authority_key_identifier_extension = true;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = leaf.signed_by(&key, &issuer).unwrap();
        let client_key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client
            .distinguished_name
            .push(DnType::CommonName, "myquic test client");
        client.use_authority_key_identifier_extension = true;
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client.signed_by(&client_key, &issuer).unwrap();
        let files = Self {
            ca: dir.join("ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server-key.pem"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client-key.pem"),
        };
        std::fs::write(&files.ca, ca_cert.pem()).unwrap();
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        std::fs::write(&files.client_cert, client_cert.pem()).unwrap();
        std::fs::write(&files.client_key, client_key.serialize_pem()).unwrap();
        files
    }
}
