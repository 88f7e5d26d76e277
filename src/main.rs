//! `myquic`: command-line entry point.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use myquic::config::ConfigFile;
use myquic::gateway::Gateway;
use myquic::sidecar::Sidecar;
use myquic::telemetry::{self, LogFormat};
use myquic::transport::quic::Congestion;
use myquic::transport::tcp::TcpCongestion;

#[derive(Parser)]
#[command(version, about = "MySQL over HTTP/3: sidecar and gateway")]
struct Cli {
    /// Configuration file (TOML); see config.example.toml.
    #[arg(long, short, global = true, env = "MYQUIC_CONFIG")]
    config: Option<PathBuf>,
    /// Log format.
    #[arg(
        long,
        global = true,
        env = "MYQUIC_LOG_FORMAT",
        default_value = "human"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the psdb.v1alpha1 HTTP API (HTTP/3 + HTTP/2) in front of MySQL.
    Gateway(GatewayArgs),
    /// Serve MySQL clients locally, carrying their commands to a gateway
    /// over one HTTP/3 connection (HTTP/2 when UDP is blocked).
    Sidecar(SidecarArgs),
    /// Run SQL through a gateway over HTTP/3 (or HTTP/2), printing results.
    Query(myquic::query::QueryArgs),
    /// Wait until a sidecar's admin endpoint reports ready (exit 1 on
    /// timeout): for container start order.
    Wait(myquic::admin::wait::WaitArgs),
    /// Check, from where the sidecar runs, every step to its gateway (DNS,
    /// TCP, UDP, TLS certificate, HTTP/3, HTTP/2, authentication, a round
    /// trip) and explain what is wrong. Takes the sidecar's configuration.
    /// Exit 0: all good; 2: works with warnings; 1: cannot serve queries.
    Doctor(SidecarArgs),
}

/// Flags override the environment, which overrides the file.
#[derive(clap::Args)]
struct GatewayArgs {
    /// Address for HTTP/3 (UDP) and HTTP/2 (TCP) [gateway.listen].
    #[arg(long, env = "MYQUIC_GATEWAY_LISTEN")]
    listen: Option<std::net::SocketAddr>,
    /// Backend MySQL host:port [gateway.backend.address].
    #[arg(long, env = "MYQUIC_GATEWAY_BACKEND_ADDRESS")]
    backend_address: Option<String>,
    /// Backend MySQL unix socket [gateway.backend.socket].
    #[arg(long, env = "MYQUIC_GATEWAY_BACKEND_SOCKET")]
    backend_socket: Option<PathBuf>,
    /// Generate a self-signed certificate and write it here
    /// [gateway.tls.self_signed_cert_out].
    #[arg(long, env = "MYQUIC_GATEWAY_SELF_SIGNED_CERT_OUT")]
    self_signed_cert_out: Option<PathBuf>,
    /// QUIC congestion controller: bbr, cubic or newreno
    /// [gateway.congestion].
    #[arg(long, env = "MYQUIC_GATEWAY_CONGESTION")]
    congestion: Option<Congestion>,
    /// TCP congestion controller of HTTP/2 connections, e.g. bbr, cubic,
    /// reno [gateway.tcp_congestion].
    #[arg(long, env = "MYQUIC_GATEWAY_TCP_CONGESTION")]
    tcp_congestion: Option<TcpCongestion>,
    /// Admin endpoint (health, metrics, /quitquitquit) [gateway.admin.listen].
    #[arg(long, env = "MYQUIC_GATEWAY_ADMIN_LISTEN")]
    admin_listen: Option<std::net::SocketAddr>,
    /// File holding the bearer token /quitquitquit requires
    /// [gateway.admin.quit_token]; or the token itself in
    /// MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN.
    #[arg(long, env = "MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN_FILE")]
    admin_quit_token_file: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(long)]
    check_config: bool,
}

/// Flags override the environment, which overrides the file.
#[derive(clap::Args)]
struct SidecarArgs {
    /// MySQL listener address [sidecar.listen].
    #[arg(long, env = "MYQUIC_SIDECAR_LISTEN")]
    listen: Option<std::net::SocketAddr>,
    /// Also listen on this unix socket [sidecar.socket].
    #[arg(long, env = "MYQUIC_SIDECAR_SOCKET")]
    socket: Option<PathBuf>,
    /// The gateway, https://host:port [sidecar.upstream.url].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_URL")]
    upstream_url: Option<String>,
    /// CA certificate(s) to trust for the gateway [sidecar.upstream.ca].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_CA")]
    upstream_ca: Option<PathBuf>,
    /// Name expected in the gateway's certificate
    /// [sidecar.upstream.server_name].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_SERVER_NAME")]
    upstream_server_name: Option<String>,
    /// API user [sidecar.upstream.username].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_USERNAME")]
    upstream_username: Option<String>,
    /// File holding the API password [sidecar.upstream.password].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_PASSWORD_FILE")]
    upstream_password_file: Option<PathBuf>,
    /// auto, http3 or http2 [sidecar.upstream.transport].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_TRANSPORT")]
    upstream_transport: Option<String>,
    /// Codecs for bodies to and from the gateway, comma-separated
    /// (zstd,snappy,gzip), or none [sidecar.upstream.compression].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_COMPRESSION")]
    upstream_compression: Option<String>,
    /// QUIC congestion controller: bbr, cubic or newreno
    /// [sidecar.upstream.congestion].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_CONGESTION")]
    upstream_congestion: Option<Congestion>,
    /// TCP congestion controller of the HTTP/2 fallback, e.g. bbr, cubic,
    /// reno [sidecar.upstream.tcp_congestion].
    #[arg(long, env = "MYQUIC_SIDECAR_UPSTREAM_TCP_CONGESTION")]
    upstream_tcp_congestion: Option<TcpCongestion>,
    /// Admin endpoint (health, metrics, /quitquitquit) [sidecar.admin.listen].
    #[arg(long, env = "MYQUIC_SIDECAR_ADMIN_LISTEN")]
    admin_listen: Option<std::net::SocketAddr>,
    /// File holding the bearer token /quitquitquit requires
    /// [sidecar.admin.quit_token]; or the token itself in
    /// MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN.
    #[arg(long, env = "MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN_FILE")]
    admin_quit_token_file: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(long)]
    check_config: bool,
}

/// Exit codes, so that an orchestrator (and a person) can tell why the
/// process ended:
/// - 0: stopped on request (SIGTERM, SIGINT, `/quitquitquit`) and drained
///   cleanly: every client connection ended outside a transaction
///   (sidecar), every in-flight request finished (gateway);
/// - 1: runtime failure (e.g. a listener could not be bound);
/// - 2: bad command line (clap);
/// - 3: stopped on request, but the drain timed out: transactions were cut
///   off with ERR 1053 and rolled back (sidecar), or requests were still
///   in flight (gateway);
/// - 4: a second signal during the drain ended the process at once;
/// - 64: invalid configuration.
const EXIT_DRAIN_TIMEOUT: u8 = 3;
const EXIT_FORCED: u8 = 4;
const EXIT_CONFIG: u8 = 64;

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format, "info");
    let file = match ConfigFile::load(cli.config.as_deref()) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("myquic: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match cli.command {
        Command::Gateway(args) => runtime.block_on(gateway(file, args)),
        Command::Sidecar(args) => runtime.block_on(sidecar(file, args)),
        Command::Doctor(args) => runtime.block_on(doctor(file, args)),
        Command::Query(args) => match runtime.block_on(myquic::query::run(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("myquic: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Wait(args) => match runtime.block_on(myquic::admin::wait::run(&args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("myquic wait: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

async fn gateway(file: ConfigFile, args: GatewayArgs) -> ExitCode {
    let mut config = file.gateway;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(address) = args.backend_address {
        config.backend.address = Some(address);
        config.backend.socket = None;
    }
    if let Some(socket) = args.backend_socket {
        config.backend.socket = Some(socket);
    }
    if let Some(out) = args.self_signed_cert_out {
        config.tls.self_signed_cert_out = Some(out);
        config.tls.cert = None;
        config.tls.key = None;
    }
    if let Some(cc) = args.congestion {
        config.congestion = cc;
    }
    if let Some(cc) = args.tcp_congestion {
        config.tcp_congestion = Some(cc);
    }
    if let Some(listen) = args.admin_listen {
        config.admin.listen = listen;
    }
    apply_quit_token(
        &mut config.admin,
        "MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN",
        args.admin_quit_token_file,
    );
    if let Some(exit) = stop_after_checking(config.validate(), args.check_config) {
        return exit;
    }
    let admin = config.admin.clone();
    let gateway = match Gateway::start(config).await {
        Ok(g) => g,
        Err(e) => {
            eprintln!("myquic: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stop = match Stop::new(&admin, gateway.health()).await {
        Ok(stop) => stop,
        Err(exit) => return exit,
    };
    stop.requested().await;
    tracing::info!("shutting down: draining");
    tokio::select! {
        finished = gateway.shutdown() => exit_after_drain(finished),
        () = stop.signal() => forced(),
    }
}

async fn sidecar(file: ConfigFile, args: SidecarArgs) -> ExitCode {
    let check_only = args.check_config;
    let config = match sidecar_config(file, args) {
        Ok(config) => config,
        Err(exit) => return exit,
    };
    let valid = config.validate();
    if check_only && valid.is_ok() {
        for warning in config.warnings() {
            eprintln!("myquic: warning: {warning}");
        }
    }
    if let Some(exit) = stop_after_checking(valid, check_only) {
        return exit;
    }
    let admin = config.admin.clone();
    let drain = config.drain.clone();
    let sidecar = match Sidecar::start(config).await {
        Ok(s) => s,
        Err(e @ myquic::sidecar::StartError::Config(_)) => {
            eprintln!("myquic: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(e) => {
            eprintln!("myquic: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stop = match Stop::new(&admin, sidecar.health()).await {
        Ok(stop) => stop,
        Err(exit) => return exit,
    };
    stop.requested().await;
    tracing::info!("shutting down: draining");
    match sidecar.drain(&drain, stop.signal()).await {
        myquic::sidecar::Drained::Clean => exit_after_drain(true),
        myquic::sidecar::Drained::Cut(_) => exit_after_drain(false),
        myquic::sidecar::Drained::Forced => forced(),
    }
}

/// The sidecar's configuration: the file's `[sidecar]` with flags and
/// environment on top.
fn sidecar_config(
    file: ConfigFile,
    args: SidecarArgs,
) -> Result<myquic::sidecar::SidecarConfig, ExitCode> {
    let mut config = file.sidecar;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(socket) = args.socket {
        config.socket = Some(socket);
    }
    let up = &mut config.upstream;
    if let Some(url) = args.upstream_url {
        up.url = url;
    }
    if let Some(ca) = args.upstream_ca {
        up.ca = Some(ca);
    }
    if let Some(name) = args.upstream_server_name {
        up.server_name = Some(name);
    }
    if let Some(user) = args.upstream_username {
        up.username = user;
    }
    if let Some(file) = args.upstream_password_file {
        up.password = myquic::config::Secret {
            file: Some(file),
            ..Default::default()
        };
    }
    if let Some(list) = args.upstream_compression {
        up.compression = match list.trim() {
            "none" => Vec::new(),
            list => list
                .split(',')
                .map(|name| name.trim().to_string())
                .collect(),
        };
    }
    if let Some(cc) = args.upstream_congestion {
        up.congestion = cc;
    }
    if let Some(cc) = args.upstream_tcp_congestion {
        up.tcp_congestion = Some(cc);
    }
    if let Some(t) = args.upstream_transport {
        match t.as_str() {
            "auto" => up.transport = myquic::client::TransportPreference::Auto,
            "http3" => up.transport = myquic::client::TransportPreference::Http3,
            "http2" => up.transport = myquic::client::TransportPreference::Http2,
            other => {
                eprintln!("myquic: --upstream-transport: {other:?} is not auto, http3 or http2");
                return Err(ExitCode::from(EXIT_CONFIG));
            }
        }
    }
    if let Some(listen) = args.admin_listen {
        config.admin.listen = listen;
    }
    apply_quit_token(
        &mut config.admin,
        "MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN",
        args.admin_quit_token_file,
    );
    Ok(config)
}

/// The `/quitquitquit` token from the environment (`token_var` holds the
/// token itself; never a flag, which `ps` would show) or a file flag,
/// which wins.
fn apply_quit_token(
    admin: &mut myquic::admin::AdminConfig,
    token_var: &str,
    file: Option<PathBuf>,
) {
    if std::env::var_os(token_var).is_some() {
        admin.quit_token = Some(myquic::config::Secret {
            env: Some(token_var.to_string()),
            ..Default::default()
        });
    }
    if let Some(file) = file {
        admin.quit_token = Some(myquic::config::Secret {
            file: Some(file),
            ..Default::default()
        });
    }
}

async fn doctor(file: ConfigFile, args: SidecarArgs) -> ExitCode {
    let config = match sidecar_config(file, args) {
        Ok(config) => config,
        Err(exit) => return exit,
    };
    myquic::transport::tls::install_crypto_provider();
    let report = myquic::doctor::run(&config).await;
    print!("{report}");
    ExitCode::from(report.exit_code())
}

fn exit_after_drain(clean: bool) -> ExitCode {
    if clean {
        tracing::info!("drained; exiting");
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DRAIN_TIMEOUT)
    }
}

fn forced() -> ExitCode {
    tracing::warn!("second signal: exiting at once");
    ExitCode::from(EXIT_FORCED)
}

/// Where a stop request comes from: SIGTERM, SIGINT, or a POST to the
/// admin endpoint's `/quitquitquit` (which it also serves).
struct Stop {
    term: tokio::sync::Mutex<tokio::signal::unix::Signal>,
    quit: tokio_util::sync::CancellationToken,
}

impl Stop {
    async fn new(
        admin: &myquic::admin::AdminConfig,
        health: std::sync::Arc<dyn myquic::admin::Health>,
    ) -> Result<Self, ExitCode> {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
        let quit = tokio_util::sync::CancellationToken::new();
        if admin.enabled {
            let never = tokio_util::sync::CancellationToken::new();
            if let Err(e) = myquic::admin::start(admin, health, quit.clone(), never).await {
                eprintln!("myquic: admin endpoint on {}: {e}", admin.listen);
                // A token that cannot be read is a configuration error.
                let invalid = e.kind() == std::io::ErrorKind::InvalidInput;
                return Err(ExitCode::from(if invalid { EXIT_CONFIG } else { 1 }));
            }
        }
        Ok(Self {
            term: tokio::sync::Mutex::new(term),
            quit,
        })
    }

    /// The first request to stop.
    async fn requested(&mut self) {
        tokio::select! {
            () = self.signal() => {}
            () = self.quit.cancelled() => {}
        }
    }

    /// The next signal.
    async fn signal(&self) {
        let mut term = self.term.lock().await;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
}

/// Ends the process if the configuration is invalid (exit 64) or only a
/// check was asked for (`--check-config`).
fn stop_after_checking(
    valid: Result<(), myquic::config::ConfigError>,
    check_only: bool,
) -> Option<ExitCode> {
    if let Err(e) = valid {
        eprintln!("myquic: {e}");
        return Some(ExitCode::from(EXIT_CONFIG));
    }
    if check_only {
        println!("configuration OK");
        return Some(ExitCode::SUCCESS);
    }
    None
}
