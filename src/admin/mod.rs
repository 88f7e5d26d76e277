//! The admin endpoint both roles serve: a small HTTP/1.1 server (hyper),
//! on loopback unless configured, for probes, metrics and a remote stop.
//!
//! | path            | answer |
//! |-----------------|--------|
//! | `/live`         | 200 while the process serves HTTP at all |
//! | `/startup`      | 200 once the role has been ready once (then stays 200) |
//! | `/ready`        | 200 while the role can take work; 503 and the reason otherwise (before the upstream/backend answered, while draining) |
//! | `/metrics`      | Prometheus text format |
//! | `/quitquitquit` | POST: begins the graceful shutdown, as SIGTERM does (on a non-loopback listener only with `Authorization: Bearer <quit_token>`; see [`quit`]) |
//!
//! What "ready" means is the role's business ([`Health`]); this module
//! only serves it.

pub mod metrics;
pub mod quit;
pub mod wait;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode, header};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use crate::config::AdminConfig;
use quit::{QuitGuard, Verdict};

/// What a role reports through the admin endpoint.
pub trait Health: Send + Sync + 'static {
    /// `Ok` once the role has been ready at least once.
    fn started(&self) -> Result<(), String>;
    /// `Ok` while the role takes work; otherwise why not.
    fn ready(&self) -> Result<(), String>;
    /// Appends the role's metrics in the Prometheus text format.
    fn metrics(&self, out: &mut String);
}

/// A running admin endpoint.
pub struct Admin {
    pub addr: SocketAddr,
}

/// Binds `config.listen` and serves until `stop`. A POST to
/// `/quitquitquit` that passes the listener's [`QuitGuard`] cancels `quit`.
pub async fn start(
    config: &AdminConfig,
    health: Arc<dyn Health>,
    quit: CancellationToken,
    stop: CancellationToken,
) -> std::io::Result<Admin> {
    let guard = Arc::new(QuitGuard::from_config(config)?);
    if let QuitGuard::Disabled = *guard {
        info!(listen = %config.listen, "/quitquitquit refused on this non-loopback listener: no admin.quit_token");
    }
    let listener = TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    info!(%addr, "admin endpoint listening");
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(pair) => pair,
                    Err(e) => {
                        warn!(error = %e, "admin accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = stop.cancelled() => return,
            };
            let health = health.clone();
            let quit = quit.clone();
            let guard = guard.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let response = route(&req, &*health, &quit, &guard);
                    async move { Ok::<_, Infallible>(response) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await
                {
                    debug!(error = %e, "admin connection ended");
                }
            });
        }
    });
    Ok(Admin { addr })
}

fn route<B>(
    req: &http::Request<B>,
    health: &dyn Health,
    quit: &CancellationToken,
    guard: &QuitGuard,
) -> http::Response<Full<Bytes>> {
    let check = |r: Result<(), String>| match r {
        Ok(()) => text(StatusCode::OK, "ok\n".into()),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET | &Method::HEAD, "/live" | "/livez" | "/liveness") => check(Ok(())),
        (&Method::GET | &Method::HEAD, "/ready" | "/readyz" | "/readiness") => {
            check(health.ready())
        }
        (&Method::GET | &Method::HEAD, "/startup") => check(health.started()),
        (&Method::GET, "/metrics") => {
            let mut out = String::new();
            health.metrics(&mut out);
            let mut response = text(StatusCode::OK, out);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        (&Method::POST, "/quitquitquit") => match guard.check(req.headers()) {
            Verdict::Allowed => {
                info!("shutdown requested on /quitquitquit");
                quit.cancel();
                text(StatusCode::OK, "shutting down\n".into())
            }
            Verdict::Refused(status, why) => {
                warn!(status = status.as_u16(), "refused a /quitquitquit");
                let mut response = text(status, why.into());
                if status == StatusCode::UNAUTHORIZED {
                    response.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        header::HeaderValue::from_static("Bearer"),
                    );
                }
                response
            }
        },
        (_, "/quitquitquit") => {
            let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n".into());
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /live /ready /startup /metrics /quitquitquit\n".into(),
        ),
    }
}

fn text(status: StatusCode, body: String) -> http::Response<Full<Bytes>> {
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
