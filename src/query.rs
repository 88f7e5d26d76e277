//! `myquic query`: run SQL through a gateway from the command line, over
//! HTTP/3 (default) or HTTP/2. A debugging tool for operators, and the
//! client of the README's quick start. It uses the sidecar's client, so it
//! also exercises what the sidecar does.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::api::pb;
use crate::client::{Client, ClientConfig, TransportPreference};
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
    tls::install_crypto_provider();
    let roots = tls::roots_from_pem(&args.ca).map_err(|e| e.to_string())?;
    let tls = tls::client_config(roots, &[]).map_err(|e| e.to_string())?;
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut config = ClientConfig::new(authority, host, tls, user, password);
    // A one-shot tool tests the transport it is told to, with no fallback.
    config.transport = if args.http2 {
        TransportPreference::Http2
    } else {
        TransportPreference::Http3
    };
    let client = Client::new(config).map_err(|e| e.to_string())?;
    let mut session = None;
    for sql in &args.sql {
        let reply = client
            .execute(session.as_ref(), sql.clone(), HashMap::new())
            .await
            .map_err(|e| e.to_string())?;
        session = reply.session;
        println!("-- [{}] {sql}", reply.transport.as_str());
        if let Some(error) = reply.message.error {
            // Printed for a person: a message that is not UTF-8 is shown
            // with U+FFFD (the sidecar carries it unaltered).
            return Err(String::from_utf8_lossy(&error.message).into_owned());
        }
        print_result(reply.message.result.unwrap_or_default());
    }
    Ok(())
}

fn print_result(result: pb::QueryResult) {
    if result.fields.is_empty() {
        println!("OK, {} row(s) affected", result.rows_affected);
        return;
    }
    // Printed for a person's terminal: bytes that are not UTF-8 show as
    // U+FFFD (only this command-line tool does so).
    let names: Vec<std::borrow::Cow<'_, str>> = result
        .fields
        .iter()
        .map(|f| String::from_utf8_lossy(&f.name))
        .collect();
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
