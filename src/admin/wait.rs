//! `myquic wait`: blocks until a sidecar's admin endpoint says it is ready,
//! so a container (or script) that needs the database starts after it.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;

#[derive(clap::Args, Debug)]
pub struct WaitArgs {
    /// The admin endpoint [sidecar.admin.listen].
    #[arg(
        long,
        env = "MYQUIC_SIDECAR_ADMIN_LISTEN",
        default_value = "127.0.0.1:9901"
    )]
    pub admin: SocketAddr,
    /// Give up after this long (exit 1), e.g. `30s`, `2m`.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The check to wait for: `/ready` or `/startup`.
    #[arg(long, default_value = "/ready")]
    pub path: String,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime_serde::re::humantime::parse_duration(text).map_err(|e| e.to_string())
}

/// Polls until a 200; the last thing seen if the time runs out.
pub async fn run(args: &WaitArgs) -> Result<(), String> {
    let deadline = Instant::now() + args.timeout;
    let mut last;
    loop {
        let attempt = tokio::time::timeout_at(deadline, get(args.admin, &args.path)).await;
        last = match attempt {
            Ok(Ok((200, _))) => return Ok(()),
            Ok(Ok((status, body))) => format!("{} answered {status}: {}", args.path, body.trim()),
            Ok(Err(e)) => format!("{}: {e}", args.admin),
            Err(_) => "no answer".into(),
        };
        if Instant::now() + Duration::from_millis(200) >= deadline {
            return Err(format!("not ready within {:?} ({last})", args.timeout));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One GET over a fresh HTTP/1.1 connection: status and body.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = http::Request::get(path)
        .header(http::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    // Our admin endpoint's own text, shown to a person.
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
