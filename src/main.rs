//! `myquic`: command-line entry point.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use myquic::config::{
    self, ConfigError, Env, GatewayConfig, GatewayFlags, SidecarConfig, SidecarFlags,
};
use myquic::gateway::Gateway;
use myquic::sidecar::Sidecar;
use myquic::telemetry::{self, LogFormat};

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

/// `myquic gateway`: its settings (flags over `MYQUIC_GATEWAY_*` over the
/// file), and whether only to check them.
#[derive(clap::Args)]
struct GatewayArgs {
    #[command(flatten)]
    flags: GatewayFlags,
    /// Check the configuration and exit.
    #[arg(long)]
    check_config: bool,
}

/// `myquic sidecar` and `myquic doctor`: the sidecar's settings (flags
/// over `MYQUIC_SIDECAR_*` over the file), and whether only to check them.
#[derive(clap::Args)]
struct SidecarArgs {
    #[command(flatten)]
    flags: SidecarFlags,
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
    if matches!(cli.command, Command::Gateway(_)) {
        // SAFETY: no other thread exists yet (clap spawns none; logging and
        // the runtime start below).
        unsafe { myquic::gateway::retained_memory::bound() };
    }
    if matches!(cli.command, Command::Sidecar(_)) {
        myquic::sidecar::retained_memory::bound();
    }
    telemetry::init(cli.log_format, "info");
    let file = match cli.config.as_deref().map(config::File::read).transpose() {
        Ok(file) => file,
        Err(e) => return config_error(&e),
    };
    let env = Env::from_process();
    // Built once the role's configuration says how many threads it wants.
    // One thread: a current-thread runtime, so that nothing crosses
    // between a worker and the thread that runs `block_on`.
    let runtime = |worker_threads: usize| {
        if worker_threads == 1 {
            return tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
        }
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if worker_threads > 0 {
            builder.worker_threads(worker_threads);
        }
        builder.enable_all().build().expect("a tokio runtime")
    };
    match cli.command {
        Command::Gateway(args) => match config::load(&args.flags, &env, file.as_ref()) {
            Ok(config) => {
                runtime(config.worker_threads).block_on(gateway(config, args.check_config))
            }
            Err(e) => config_error(&e),
        },
        Command::Sidecar(args) => match config::load(&args.flags, &env, file.as_ref()) {
            Ok(config) => {
                runtime(config.worker_threads).block_on(sidecar(config, args.check_config))
            }
            Err(e) => config_error(&e),
        },
        Command::Doctor(args) => match config::load(&args.flags, &env, file.as_ref()) {
            Ok(config) => runtime(0).block_on(doctor(config)),
            Err(e) => config_error(&e),
        },
        Command::Query(args) => match runtime(0).block_on(myquic::query::run(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("myquic: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Wait(args) => match runtime(0).block_on(myquic::admin::wait::run(&args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("myquic wait: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

async fn gateway(config: GatewayConfig, check_only: bool) -> ExitCode {
    if let Some(exit) = stop_after_checking(config.validate(), check_only) {
        return exit;
    }
    let admin = config.admin.clone();
    let gateway = match Gateway::start(config).await {
        Ok(g) => g,
        // A file the configuration names that cannot be used (a backend
        // CA that is not PEM) is a configuration error too.
        Err(e @ myquic::gateway::GatewayError::Config(_)) => {
            eprintln!("myquic: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
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

async fn sidecar(config: SidecarConfig, check_only: bool) -> ExitCode {
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

async fn doctor(config: SidecarConfig) -> ExitCode {
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
fn stop_after_checking(valid: Result<(), ConfigError>, check_only: bool) -> Option<ExitCode> {
    if let Err(e) = valid {
        return Some(config_error(&e));
    }
    if check_only {
        println!("configuration OK");
        return Some(ExitCode::SUCCESS);
    }
    None
}

/// A configuration that cannot be used: exit 64.
fn config_error(e: &ConfigError) -> ExitCode {
    eprintln!("myquic: {e}");
    ExitCode::from(EXIT_CONFIG)
}
