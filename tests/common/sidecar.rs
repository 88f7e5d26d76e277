//! The chain with the sidecar in-process: a private MariaDB, the gateway
//! ([`Stack`]) and a [`Sidecar`] on `127.0.0.1:0` and a unix socket in its
//! own temp dir, with one local user ([`LOCAL_USER`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use tokio::net::TcpStream;

use myquic::config::LocalUser;
use myquic::sidecar::{Sidecar, SidecarConfig};

use super::raw_packets::RawClient;
use super::{LOCAL_PASSWORD, LOCAL_USER, PASSWORD, Stack, USER, secret};

/// MariaDB + gateway + sidecar.
pub struct Chain {
    pub stack: Stack,
    pub sidecar: Sidecar,
    /// The sidecar's unix socket.
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Chain {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// The chain, once the sidecar has learnt the backend's version.
    pub async fn start_with(tweak: impl FnOnce(&mut SidecarConfig)) -> Self {
        Self::launch(tweak).await.learned().await
    }

    /// The chain in front of a gateway (`stack`) set up by the caller,
    /// once the sidecar has learnt the backend's version.
    pub async fn start_on(stack: Stack) -> Self {
        Self::launch_on(stack, |_| {}).await.learned().await
    }

    async fn learned(self) -> Self {
        let chain = self;
        // Clients compare with a direct MariaDB connection, so they must
        // see the MariaDB version (and its column style), learned shortly
        // after start.
        for _ in 0..500 {
            if chain.sidecar.server_version().contains("MariaDB") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            chain.sidecar.server_version().contains("MariaDB"),
            "version learned"
        );
        chain
    }

    /// The chain, without waiting for the sidecar to learn anything.
    pub async fn launch(tweak: impl FnOnce(&mut SidecarConfig)) -> Self {
        Self::launch_on(Stack::start().await, tweak).await
    }

    /// The chain in front of a gateway (`stack`) set up by the caller;
    /// `tweak` adjusts the sidecar's configuration last.
    pub async fn launch_on(stack: Stack, tweak: impl FnOnce(&mut SidecarConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sidecar.sock");
        let mut config = sidecar_config(&stack, vec![local_user(LOCAL_USER, LOCAL_PASSWORD)]);
        config.socket = Some(socket.clone());
        tweak(&mut config);
        let sidecar = Sidecar::start(config).await.expect("sidecar starts");
        Self {
            stack,
            sidecar,
            socket,
            _dir: dir,
        }
    }

    /// Options for a TCP connection to the sidecar as `user`.
    pub fn opts(&self, user: &str, password: &str) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.sidecar.addr().port())
            .prefer_socket(false)
            .user(Some(user))
            .pass(Some(password))
    }

    /// A `mysql_async` connection through the sidecar (TCP) as
    /// [`LOCAL_USER`], in database `app`.
    pub async fn client(&self) -> Conn {
        self.client_as((LOCAL_USER, LOCAL_PASSWORD)).await
    }

    /// The same as `user` with `password`, logged in within 10 s.
    pub async fn client_as(&self, (user, password): (&str, &str)) -> Conn {
        let opts = self.opts(user, password).db_name(Some("app"));
        tokio::time::timeout(Duration::from_secs(10), Conn::new(opts))
            .await
            .expect("login answered")
            .expect("logs in through the sidecar")
    }

    /// A `mysql_async` connection straight to MariaDB, as the same
    /// backend account the gateway uses.
    pub async fn direct(&self) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(self.stack.db.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("app"))
            .pass(Some("app-backend-pw"))
            .db_name(Some("app"));
        Conn::new(opts).await.expect("connects to MariaDB")
    }

    /// Runs `statements` straight on MariaDB (see [`Self::direct`]):
    /// what a test sets up before it compares the two ways.
    pub async fn setup(&self, statements: &[&str]) {
        let mut direct = self.direct().await;
        for sql in statements {
            direct.query_drop(*sql).await.unwrap();
        }
        direct.disconnect().await.unwrap();
    }

    /// A raw TCP connection to the sidecar.
    pub async fn raw(&self) -> TcpStream {
        TcpStream::connect(self.sidecar.addr()).await.unwrap()
    }

    /// Two raw clients logged in alike, into `app` with `caps` besides
    /// their own: one straight to MariaDB, as the backend account the
    /// gateway uses, and one through the sidecar as [`LOCAL_USER`] — to
    /// compare what each is answered, byte for byte.
    pub async fn raw_clients(&self, caps: u32) -> (RawClient, RawClient) {
        self.raw_clients_mariadb(caps, 0).await
    }

    /// As [`Self::raw_clients`], asking for MariaDB's capabilities
    /// `mariadb` too.
    pub async fn raw_clients_mariadb(&self, caps: u32, mariadb: u32) -> (RawClient, RawClient) {
        let unix = tokio::net::UnixStream::connect(&self.stack.db.socket)
            .await
            .unwrap();
        let backend = ("app", "app-backend-pw");
        let direct = RawClient::login_mariadb(Box::new(unix), backend, "app", caps, mariadb).await;
        let local = (LOCAL_USER, LOCAL_PASSWORD);
        let via =
            RawClient::login_mariadb(Box::new(self.raw().await), local, "app", caps, mariadb).await;
        (direct, via)
    }
}

/// A sidecar on a free loopback port, sent to `stack`'s gateway as the
/// test's API user, with `users` as its local accounts: what every test
/// sidecar says; each test adds its own.
pub fn sidecar_config(stack: &Stack, users: Vec<LocalUser>) -> SidecarConfig {
    sidecar_config_for(stack.addr().port(), &stack.cert, users)
}

/// The same for a gateway on `port` with the certificate `cert`.
pub fn sidecar_config_for(port: u16, cert: &Path, users: Vec<LocalUser>) -> SidecarConfig {
    let mut config = SidecarConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    config.auth.users = users;
    config.upstream.url = format!("https://localhost:{port}");
    config.upstream.ca = Some(cert.to_path_buf());
    config.upstream.username = USER.into();
    config.upstream.password = secret(PASSWORD);
    config
}

/// A sidecar account, under the sidecar's gateway credential.
pub fn local_user(username: &str, password: &str) -> LocalUser {
    LocalUser {
        username: username.into(),
        password: secret(password),
        ..LocalUser::default()
    }
}
