//! Each role's command-line flags, and the same settings from `MYQUIC_*`
//! environment variables: a variable is its flag spelled
//! `MYQUIC_<ROLE>_<FLAG>` (`--upstream-url` of the sidecar:
//! `MYQUIC_SIDECAR_UPSTREAM_URL`). [`load`](super::load) lays the
//! environment's over the file, then the command line's over both.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use super::{
    AdminConfig, BackendTlsMode, ConfigError, Env, GatewayConfig, Secret, Section, SidecarConfig,
    TransportPreference,
};
use crate::transport::quic::Congestion;
use crate::transport::tcp::TcpCongestion;

/// A role's flags: the keys it can set, how the environment spells them,
/// and where they go in its settings.
pub trait Flags: Sized {
    /// The role's settings.
    type Config: Section;
    /// The variable holding the `/quitquitquit` token itself (never a
    /// flag, which `ps` would show).
    const QUIT_TOKEN_VAR: &'static str;

    /// The flags that the environment's `MYQUIC_<ROLE>_*` variables give.
    fn from_env(env: &Env) -> Result<Self, ConfigError>;
    /// Sets every key a flag is given for.
    fn apply(&self, config: &mut Self::Config);
}

/// `myquic gateway`'s settings on the command line.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct GatewayFlags {
    /// Address for HTTP/3 (UDP) and HTTP/2 (TCP) [gateway.listen;
    /// env MYQUIC_GATEWAY_LISTEN].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Backend MySQL host:port [gateway.backend.address;
    /// env MYQUIC_GATEWAY_BACKEND_ADDRESS].
    #[arg(long)]
    pub backend_address: Option<String>,
    /// Backend MySQL unix socket [gateway.backend.socket;
    /// env MYQUIC_GATEWAY_BACKEND_SOCKET].
    #[arg(long)]
    pub backend_socket: Option<PathBuf>,
    /// TLS to the backend: required, preferred or disabled
    /// [gateway.backend.tls; env MYQUIC_GATEWAY_BACKEND_TLS].
    #[arg(long, value_enum)]
    pub backend_tls: Option<BackendTlsMode>,
    /// CA certificate(s) the backend's certificate must chain to
    /// [gateway.backend.tls_ca; env MYQUIC_GATEWAY_BACKEND_TLS_CA].
    #[arg(long)]
    pub backend_tls_ca: Option<PathBuf>,
    /// Name expected in the backend's certificate
    /// [gateway.backend.tls_server_name;
    /// env MYQUIC_GATEWAY_BACKEND_TLS_SERVER_NAME].
    #[arg(long)]
    pub backend_tls_server_name: Option<String>,
    /// Client certificate chain for the backend (PEM)
    /// [gateway.backend.tls_client_cert;
    /// env MYQUIC_GATEWAY_BACKEND_TLS_CLIENT_CERT].
    #[arg(long)]
    pub backend_tls_client_cert: Option<PathBuf>,
    /// Its private key (PEM) [gateway.backend.tls_client_key;
    /// env MYQUIC_GATEWAY_BACKEND_TLS_CLIENT_KEY].
    #[arg(long)]
    pub backend_tls_client_key: Option<PathBuf>,
    /// Generate a self-signed certificate and write it here
    /// [gateway.tls.self_signed_cert_out; env MYQUIC_GATEWAY_SELF_SIGNED_CERT_OUT].
    #[arg(long)]
    pub self_signed_cert_out: Option<PathBuf>,
    /// QUIC congestion controller: bbr, cubic or newreno
    /// [gateway.congestion; env MYQUIC_GATEWAY_CONGESTION].
    #[arg(long)]
    pub congestion: Option<Congestion>,
    /// TCP congestion controller of HTTP/2 connections, e.g. bbr, cubic,
    /// reno [gateway.tcp_congestion; env MYQUIC_GATEWAY_TCP_CONGESTION].
    #[arg(long)]
    pub tcp_congestion: Option<TcpCongestion>,
    /// Admin endpoint (health, metrics, /quitquitquit) [gateway.admin.listen;
    /// env MYQUIC_GATEWAY_ADMIN_LISTEN].
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// File holding the bearer token /quitquitquit requires
    /// [gateway.admin.quit_token; env MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN_FILE];
    /// or the token itself in MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN.
    #[arg(long)]
    pub admin_quit_token_file: Option<PathBuf>,
}

/// `myquic sidecar`'s (and `myquic doctor`'s) settings on the command line.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SidecarFlags {
    /// MySQL listener address [sidecar.listen; env MYQUIC_SIDECAR_LISTEN].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Also listen on this unix socket [sidecar.socket;
    /// env MYQUIC_SIDECAR_SOCKET].
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The gateway, https://host:port [sidecar.upstream.url;
    /// env MYQUIC_SIDECAR_UPSTREAM_URL].
    #[arg(long)]
    pub upstream_url: Option<String>,
    /// CA certificate(s) to trust for the gateway [sidecar.upstream.ca;
    /// env MYQUIC_SIDECAR_UPSTREAM_CA].
    #[arg(long)]
    pub upstream_ca: Option<PathBuf>,
    /// Name expected in the gateway's certificate
    /// [sidecar.upstream.server_name; env MYQUIC_SIDECAR_UPSTREAM_SERVER_NAME].
    #[arg(long)]
    pub upstream_server_name: Option<String>,
    /// API user [sidecar.upstream.username;
    /// env MYQUIC_SIDECAR_UPSTREAM_USERNAME].
    #[arg(long)]
    pub upstream_username: Option<String>,
    /// File holding the API password [sidecar.upstream.password;
    /// env MYQUIC_SIDECAR_UPSTREAM_PASSWORD_FILE].
    #[arg(long)]
    pub upstream_password_file: Option<PathBuf>,
    /// auto, http3 or http2 [sidecar.upstream.transport;
    /// env MYQUIC_SIDECAR_UPSTREAM_TRANSPORT].
    #[arg(long, value_enum)]
    pub upstream_transport: Option<TransportPreference>,
    /// Codecs for bodies to and from the gateway, comma-separated
    /// (zstd,s2,snappy,gzip), or none [sidecar.upstream.compression;
    /// env MYQUIC_SIDECAR_UPSTREAM_COMPRESSION].
    #[arg(long)]
    pub upstream_compression: Option<Codecs>,
    /// QUIC congestion controller: bbr, cubic or newreno
    /// [sidecar.upstream.congestion; env MYQUIC_SIDECAR_UPSTREAM_CONGESTION].
    #[arg(long)]
    pub upstream_congestion: Option<Congestion>,
    /// TCP congestion controller of the HTTP/2 fallback, e.g. bbr, cubic,
    /// reno [sidecar.upstream.tcp_congestion;
    /// env MYQUIC_SIDECAR_UPSTREAM_TCP_CONGESTION].
    #[arg(long)]
    pub upstream_tcp_congestion: Option<TcpCongestion>,
    /// Admin endpoint (health, metrics, /quitquitquit) [sidecar.admin.listen;
    /// env MYQUIC_SIDECAR_ADMIN_LISTEN].
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// File holding the bearer token /quitquitquit requires
    /// [sidecar.admin.quit_token; env MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN_FILE];
    /// or the token itself in MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN.
    #[arg(long)]
    pub admin_quit_token_file: Option<PathBuf>,
    /// Carry LOAD DATA LOCAL INFILE (true) or refuse it as a server
    /// with --local-infile=0 does (false) [sidecar.local_infile;
    /// env MYQUIC_SIDECAR_LOCAL_INFILE].
    #[arg(long)]
    pub local_infile: Option<bool>,
}

/// A list of codec names, comma-separated, or `none` for the empty list
/// (checked by [`SidecarConfig::validate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Codecs(pub Vec<String>);

impl FromStr for Codecs {
    type Err = std::convert::Infallible;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        Ok(Self(match list.trim() {
            "none" => Vec::new(),
            list => list
                .split(',')
                .map(|name| name.trim().to_string())
                .collect(),
        }))
    }
}

// === impl GatewayFlags ===

impl Flags for GatewayFlags {
    type Config = GatewayConfig;
    const QUIT_TOKEN_VAR: &'static str = "MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN";

    fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            listen: env.parse("MYQUIC_GATEWAY_LISTEN")?,
            backend_address: env.parse("MYQUIC_GATEWAY_BACKEND_ADDRESS")?,
            backend_socket: env.parse("MYQUIC_GATEWAY_BACKEND_SOCKET")?,
            backend_tls: env.parse("MYQUIC_GATEWAY_BACKEND_TLS")?,
            backend_tls_ca: env.parse("MYQUIC_GATEWAY_BACKEND_TLS_CA")?,
            backend_tls_server_name: env.parse("MYQUIC_GATEWAY_BACKEND_TLS_SERVER_NAME")?,
            backend_tls_client_cert: env.parse("MYQUIC_GATEWAY_BACKEND_TLS_CLIENT_CERT")?,
            backend_tls_client_key: env.parse("MYQUIC_GATEWAY_BACKEND_TLS_CLIENT_KEY")?,
            self_signed_cert_out: env.parse("MYQUIC_GATEWAY_SELF_SIGNED_CERT_OUT")?,
            congestion: env.parse("MYQUIC_GATEWAY_CONGESTION")?,
            tcp_congestion: env.parse("MYQUIC_GATEWAY_TCP_CONGESTION")?,
            admin_listen: env.parse("MYQUIC_GATEWAY_ADMIN_LISTEN")?,
            admin_quit_token_file: env.parse("MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN_FILE")?,
        })
    }

    fn apply(&self, config: &mut GatewayConfig) {
        set(&mut config.listen, self.listen);
        if let Some(address) = &self.backend_address {
            // An address named here is meant to be used: the file's
            // socket would take precedence over it.
            config.backend.address = Some(address.clone());
            config.backend.socket = None;
        }
        if let Some(socket) = &self.backend_socket {
            config.backend.socket = Some(socket.clone());
        }
        let backend = &mut config.backend;
        set_some(&mut backend.tls, self.backend_tls);
        set_some(&mut backend.tls_ca, self.backend_tls_ca.clone());
        set_some(
            &mut backend.tls_server_name,
            self.backend_tls_server_name.clone(),
        );
        set_some(
            &mut backend.tls_client_cert,
            self.backend_tls_client_cert.clone(),
        );
        set_some(
            &mut backend.tls_client_key,
            self.backend_tls_client_key.clone(),
        );
        if let Some(out) = &self.self_signed_cert_out {
            config.tls.self_signed_cert_out = Some(out.clone());
            config.tls.cert = None;
            config.tls.key = None;
        }
        set(&mut config.congestion, self.congestion);
        set_some(&mut config.tcp_congestion, self.tcp_congestion);
        set(&mut config.admin.listen, self.admin_listen);
        apply_quit_token_file(&mut config.admin, self.admin_quit_token_file.as_ref());
    }
}

// === impl SidecarFlags ===

impl Flags for SidecarFlags {
    type Config = SidecarConfig;
    const QUIT_TOKEN_VAR: &'static str = "MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN";

    fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            listen: env.parse("MYQUIC_SIDECAR_LISTEN")?,
            socket: env.parse("MYQUIC_SIDECAR_SOCKET")?,
            upstream_url: env.parse("MYQUIC_SIDECAR_UPSTREAM_URL")?,
            upstream_ca: env.parse("MYQUIC_SIDECAR_UPSTREAM_CA")?,
            upstream_server_name: env.parse("MYQUIC_SIDECAR_UPSTREAM_SERVER_NAME")?,
            upstream_username: env.parse("MYQUIC_SIDECAR_UPSTREAM_USERNAME")?,
            upstream_password_file: env.parse("MYQUIC_SIDECAR_UPSTREAM_PASSWORD_FILE")?,
            upstream_transport: env.parse("MYQUIC_SIDECAR_UPSTREAM_TRANSPORT")?,
            upstream_compression: env.parse("MYQUIC_SIDECAR_UPSTREAM_COMPRESSION")?,
            upstream_congestion: env.parse("MYQUIC_SIDECAR_UPSTREAM_CONGESTION")?,
            upstream_tcp_congestion: env.parse("MYQUIC_SIDECAR_UPSTREAM_TCP_CONGESTION")?,
            admin_listen: env.parse("MYQUIC_SIDECAR_ADMIN_LISTEN")?,
            admin_quit_token_file: env.parse("MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN_FILE")?,
            local_infile: env.parse("MYQUIC_SIDECAR_LOCAL_INFILE")?,
        })
    }

    fn apply(&self, config: &mut SidecarConfig) {
        set(&mut config.listen, self.listen);
        set(&mut config.local_infile, self.local_infile);
        set_some(&mut config.socket, self.socket.clone());
        let up = &mut config.upstream;
        set(&mut up.url, self.upstream_url.clone());
        set_some(&mut up.ca, self.upstream_ca.clone());
        set_some(&mut up.server_name, self.upstream_server_name.clone());
        set(&mut up.username, self.upstream_username.clone());
        if let Some(path) = &self.upstream_password_file {
            up.password = Secret::file(path);
        }
        set(&mut up.transport, self.upstream_transport);
        set(
            &mut up.compression,
            self.upstream_compression.clone().map(|c| c.0),
        );
        set(&mut up.congestion, self.upstream_congestion);
        set_some(&mut up.tcp_congestion, self.upstream_tcp_congestion);
        set(&mut config.admin.listen, self.admin_listen);
        apply_quit_token_file(&mut config.admin, self.admin_quit_token_file.as_ref());
    }
}

fn set<T>(key: &mut T, flag: Option<T>) {
    if let Some(value) = flag {
        *key = value;
    }
}

fn set_some<T>(key: &mut Option<T>, flag: Option<T>) {
    if flag.is_some() {
        *key = flag;
    }
}

fn apply_quit_token_file(admin: &mut AdminConfig, file: Option<&PathBuf>) {
    if let Some(path) = file {
        admin.quit_token = Some(Secret::file(path));
    }
}
