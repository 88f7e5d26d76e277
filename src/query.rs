//! `myquic query`: run SQL through a gateway from the command line, over
//! HTTP/3 (default) or HTTP/2. A debugging tool for operators, and the
//! client of the README's quick start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;

use crate::api::pb;
use crate::api::{ApiError, Codec, Encoding, Method};
use crate::transport::client::Connection;
use crate::transport::quic::Congestion;
use crate::transport::tls;

/// Where and how to reach the gateway.
#[derive(Clone, Debug, clap::Args)]
pub struct QueryArgs {
    /// Gateway URL with credentials: https://user:password@host:port
    #[arg(long, env = "MYQUIC_URL")]
    pub url: String,
    /// PEM file of CA certificates to trust for the gateway.
    #[arg(long, env = "MYQUIC_CA")]
    pub ca: PathBuf,
    /// Use HTTP/2 instead of HTTP/3.
    #[arg(long)]
    pub http2: bool,
    /// Statements, run in order in one session.
    #[arg(required = true)]
    pub sql: Vec<String>,
}

/// Runs the statements and prints each result as tab-separated text.
pub async fn run(args: QueryArgs) -> Result<(), String> {
    let (user, password, host, port) = parse_url(&args.url)?;
    let addr: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    tls::install_crypto_provider();
    let roots = tls::roots_from_pem(&args.ca).map_err(|e| e.to_string())?;
    let tls = tls::client_config(roots, &[]).map_err(|e| e.to_string())?;
    let conn = if args.http2 {
        Connection::connect_h2(addr, &host, tls).await
    } else {
        Connection::connect_h3(addr, &host, tls, Congestion::Bbr, Duration::from_secs(10)).await
    }
    .map_err(|e| e.to_string())?;
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    );
    let mut session = None;
    for sql in &args.sql {
        let request = pb::ExecuteRequest {
            session: session.take(),
            query: sql.clone(),
            ..Default::default()
        };
        let response = call(&conn, &auth, &request)
            .await
            .map_err(|e| e.to_string())?;
        session = response.session;
        println!("-- [{}] {sql}", conn.version().as_str());
        if let Some(error) = response.error {
            return Err(error.message);
        }
        print_result(response.result.unwrap_or_default());
    }
    Ok(())
}

async fn call(
    conn: &Connection,
    auth: &str,
    request: &pb::ExecuteRequest,
) -> Result<pb::ExecuteResponse, ApiError> {
    let body = Codec::Proto.encode(request);
    let http = http::Request::builder()
        .method("POST")
        .uri(format!("https://gateway{}", Method::Execute.path()))
        .header(http::header::CONTENT_TYPE, "application/proto")
        .header(http::header::ACCEPT_ENCODING, "zstd, snappy")
        .header(http::header::AUTHORIZATION, auth)
        .body(body)
        .expect("a valid request");
    let unavailable =
        |e: &dyn std::fmt::Display| ApiError::new(crate::api::Code::Unavailable, e.to_string());
    let response = conn.send(http).await.map_err(|e| unavailable(&e))?;
    let (head, body) = response
        .collect(1 << 30)
        .await
        .map_err(|e| unavailable(&e))?;
    let encoding = head
        .headers
        .get(http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok());
    let body = Encoding::from_header(encoding)?.decompress(body, 1 << 30)?;
    if head.status != 200 {
        return Err(ApiError::from_json(&body).unwrap_or_else(|| unavailable(&head.status)));
    }
    Codec::Proto.decode(&body)
}

fn print_result(result: pb::QueryResult) {
    if result.fields.is_empty() {
        println!("OK, {} row(s) affected", result.rows_affected);
        return;
    }
    let names: Vec<&str> = result.fields.iter().map(|f| f.name.as_str()).collect();
    println!("{}", names.join("\t"));
    for row in &result.rows {
        let cells = crate::translate::rows::unpack_row(row).unwrap_or_default();
        let text: Vec<String> = cells
            .iter()
            .map(|c| match c {
                None => "NULL".to_string(),
                Some(b) => String::from_utf8_lossy(b).into_owned(),
            })
            .collect();
        println!("{}", text.join("\t"));
    }
}

/// Splits `https://user:password@host:port` (port defaults to 443).
fn parse_url(url: &str) -> Result<(String, String, String, u16), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or("the gateway URL must start with https://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let (userinfo, hostport) = authority
        .rsplit_once('@')
        .ok_or("the gateway URL needs user:password@")?;
    let (user, password) = userinfo
        .split_once(':')
        .ok_or("the gateway URL needs user:password@")?;
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !p.contains(']') => {
            (h, p.parse().map_err(|_| format!("bad port {p:?}"))?)
        }
        _ => (hostport, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((user.into(), password.into(), host.into(), port))
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("https://app:p%40ss@127.0.0.1:8443").unwrap(),
            ("app".into(), "p%40ss".into(), "127.0.0.1".into(), 8443)
        );
        assert_eq!(parse_url("https://a:b@db.example").unwrap().3, 443);
        assert!(parse_url("http://a:b@x").is_err());
    }
}
