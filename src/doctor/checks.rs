//! The checks themselves, in the order a connection makes its way: each
//! one that fails explains itself and, where later steps cannot work
//! without it, skips them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::net::TcpStream;
use tokio::time::timeout;

use super::{Report, Verdict, advice};
use crate::client::{CallError, Client, ClientConfig, TransportPreference};
use crate::config::SidecarConfig;
use crate::transport::HttpVersion;
use crate::transport::client::{ConnectOptions, Connection};
use crate::transport::tls::ALPN_H2;

/// How long each network step may take: long enough for a slow
/// intercontinental link, short enough that a black hole is reported
/// quickly.
const STEP_TIMEOUT: Duration = Duration::from_secs(3);
/// A certificate expiring sooner than this is worth a warning.
const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);
/// Round trips timed per transport; the fastest is reported.
const ROUND_TRIPS: usize = 3;

pub async fn run(config: &SidecarConfig) -> Report {
    let mut report = Report::default();
    super::clients::check(&mut report, config);
    let client_config = match ClientConfig::from_upstream(&config.upstream) {
        Ok(c) => c,
        Err(e) => {
            report.push_with_advice(
                "config",
                Verdict::Fail,
                e.to_string(),
                "fix [sidecar.upstream] (see config.example.toml)",
            );
            return report;
        }
    };
    let ca = config.upstream.ca.as_ref().map(|p| p.display().to_string());
    report.push(
        "config",
        Verdict::Pass,
        format!(
            "gateway {} (certificate name {:?}, trusting {}), user {:?}",
            client_config.gateway,
            client_config.server_name,
            ca.as_deref().unwrap_or("the system's CAs"),
            client_config.username
        ),
    );

    let Some(addr) = resolve(&mut report, &client_config.gateway).await else {
        skip_rest(&mut report, &["tcp", "tls", "http2", "http3", "auth"]);
        return report;
    };
    let tcp_ok = tcp(&mut report, addr).await;
    let tls_ok = tcp_ok && tls(&mut report, addr, &client_config, ca.as_deref()).await;
    if !tls_ok {
        skip_rest(&mut report, &["tls", "http2"]);
    }
    let h2 = tls_ok
        && handshake(
            &mut report,
            HttpVersion::Http2,
            addr,
            &client_config,
            ca.as_deref(),
            tcp_ok,
        )
        .await;
    let h3 = handshake(
        &mut report,
        HttpVersion::Http3,
        addr,
        &client_config,
        ca.as_deref(),
        tcp_ok,
    )
    .await;
    let transports: Vec<HttpVersion> = [(h3, HttpVersion::Http3), (h2, HttpVersion::Http2)]
        .into_iter()
        .filter_map(|(ok, v)| ok.then_some(v))
        .collect();
    if transports.is_empty() {
        skip_rest(&mut report, &["auth"]);
        return report;
    }
    for &version in &transports {
        round_trip(&mut report, version, &client_config).await;
    }
    super::accounts::check(
        &mut report,
        config,
        &client_config,
        transports[0],
        STEP_TIMEOUT,
    )
    .await;
    report
}

fn skip_rest(report: &mut Report, checks: &[&'static str]) {
    for check in checks {
        if report.verdict_of(check).is_none() {
            report.push(check, Verdict::Skipped, "an earlier step failed");
        }
    }
}

async fn resolve(report: &mut Report, authority: &str) -> Option<SocketAddr> {
    let started = Instant::now();
    match timeout(STEP_TIMEOUT, tokio::net::lookup_host(authority)).await {
        Ok(Ok(addrs)) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            let Some(first) = addrs.first().copied() else {
                report.push_with_advice(
                    "dns",
                    Verdict::Fail,
                    format!("{authority} has no addresses"),
                    "check the host name in sidecar.upstream.url",
                );
                return None;
            };
            let list: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
            report.push(
                "dns",
                Verdict::Pass,
                format!(
                    "{authority} → {} ({} ms)",
                    list.join(", "),
                    started.elapsed().as_millis()
                ),
            );
            Some(first)
        }
        Ok(Err(e)) => {
            report.push_with_advice(
                "dns",
                Verdict::Fail,
                format!("cannot resolve {authority}: {e}"),
                "check the host name in sidecar.upstream.url and this host's DNS (/etc/resolv.conf)",
            );
            None
        }
        Err(_) => {
            report.push_with_advice(
                "dns",
                Verdict::Fail,
                format!("resolving {authority} took longer than {STEP_TIMEOUT:?}"),
                "this host's DNS server does not answer: check /etc/resolv.conf",
            );
            None
        }
    }
}

async fn tcp(report: &mut Report, addr: SocketAddr) -> bool {
    let started = Instant::now();
    let error = match timeout(STEP_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(_)) => {
            report.push(
                "tcp",
                Verdict::Pass,
                format!("{addr} accepts TCP ({} ms)", started.elapsed().as_millis()),
            );
            return true;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("timed out after {STEP_TIMEOUT:?}"),
    };
    let addr = addr.to_string();
    report.push_with_advice(
        "tcp",
        Verdict::Fail,
        format!("{addr}: {error}"),
        advice::tcp_connect(&error, &addr),
    );
    false
}

/// A TLS handshake of its own, to look at the certificate the gateway
/// presents (it is verified exactly as the sidecar verifies it).
async fn tls(
    report: &mut Report,
    addr: SocketAddr,
    config: &ClientConfig,
    ca: Option<&str>,
) -> bool {
    let mut tls = (*config.tls).clone();
    tls.alpn_protocols = vec![ALPN_H2.to_vec()];
    let Ok(name) = rustls::pki_types::ServerName::try_from(config.server_name.clone()) else {
        report.push_with_advice(
            "tls",
            Verdict::Fail,
            format!("{:?} is not a valid server name", config.server_name),
            "fix sidecar.upstream.server_name",
        );
        return false;
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let handshake = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())
    };
    let stream = match timeout(STEP_TIMEOUT, handshake).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            report.push_with_advice(
                "tls",
                Verdict::Fail,
                e.clone(),
                advice::tls_handshake(&e, &config.server_name, ca),
            );
            return false;
        }
        Err(_) => {
            report.push_with_advice("tls", Verdict::Fail, format!("no TLS answer within {STEP_TIMEOUT:?}"), "the port accepts TCP but does not answer a TLS handshake: is it the gateway's port?");
            return false;
        }
    };
    let (_, conn) = stream.get_ref();
    let version = conn
        .protocol_version()
        .map(|v| format!("{v:?}"))
        .unwrap_or_default();
    let Some(cert) = conn.peer_certificates().and_then(|c| c.first()) else {
        report.push("tls", Verdict::Fail, "the gateway sent no certificate");
        return false;
    };
    match certificate_summary(cert.as_ref()) {
        Ok((summary, left)) if left < EXPIRY_WARNING => {
            report.push_with_advice(
                "tls",
                Verdict::Warn,
                format!("{version}, {summary}"),
                format!(
                    "the certificate expires in {} days: renew it on the gateway",
                    left.as_secs() / 86400
                ),
            );
        }
        Ok((summary, _)) => report.push(
            "tls",
            Verdict::Pass,
            format!("{version}, verified; {summary}"),
        ),
        Err(e) => report.push(
            "tls",
            Verdict::Warn,
            format!("{version}, verified; cannot read its fields: {e}"),
        ),
    }
    true
}

/// Subject names and expiry of a DER certificate, and the time it has left.
fn certificate_summary(der: &[u8]) -> Result<(String, Duration), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    let not_after = cert.validity().not_after;
    let names: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| san.value.general_names.iter().map(general_name).collect())
        .unwrap_or_default();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let left = Duration::from_secs(not_after.timestamp().saturating_sub(now).max(0) as u64);
    Ok((
        format!(
            "certificate for [{}], issued by {}, valid until {} ({} days left)",
            names.join(", "),
            cert.issuer(),
            not_after,
            left.as_secs() / 86400
        ),
        left,
    ))
}

/// A subject alternative name as people write it.
fn general_name(name: &x509_parser::extensions::GeneralName) -> String {
    use x509_parser::extensions::GeneralName;
    match name {
        GeneralName::DNSName(dns) => dns.to_string(),
        GeneralName::IPAddress([a, b, c, d]) => std::net::Ipv4Addr::new(*a, *b, *c, *d).to_string(),
        GeneralName::IPAddress(bytes) => <[u8; 16]>::try_from(*bytes)
            .map(|b| std::net::Ipv6Addr::from(b).to_string())
            .unwrap_or_else(|_| format!("{bytes:?}")),
        other => other.to_string(),
    }
}

/// An HTTP/3 (QUIC over UDP) or HTTP/2 handshake, as the sidecar makes it.
async fn handshake(
    report: &mut Report,
    version: HttpVersion,
    addr: SocketAddr,
    config: &ClientConfig,
    ca: Option<&str>,
    tcp_ok: bool,
) -> bool {
    let options = ConnectOptions {
        congestion: config.congestion,
        tcp_congestion: config.tcp_congestion,
        keep_alive: config.keep_alive,
        idle_timeout: config.idle_timeout.max(STEP_TIMEOUT),
    };
    let (check, connect) = match version {
        HttpVersion::Http3 => (
            "http3",
            futures_util::future::Either::Left(Connection::connect_h3_with(
                addr,
                &config.server_name,
                config.tls.clone(),
                &options,
            )),
        ),
        _ => (
            "http2",
            futures_util::future::Either::Right(Connection::connect_h2_with(
                addr,
                &config.server_name,
                config.tls.clone(),
                &options,
            )),
        ),
    };
    let started = Instant::now();
    let error = match timeout(STEP_TIMEOUT, connect).await {
        Ok(Ok(_connection)) => {
            let took = started.elapsed().as_millis();
            report.push(
                check,
                Verdict::Pass,
                format!("handshake with {addr} in {took} ms"),
            );
            return true;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {STEP_TIMEOUT:?}"),
    };
    let lower = error.to_ascii_lowercase();
    // A certificate problem is fatal on either transport. Any other QUIC
    // failure leaves HTTP/2, so it is a warning.
    let (verdict, advice) = if lower.contains("certificate") || version == HttpVersion::Http2 {
        (
            Verdict::Fail,
            advice::tls_handshake(&error, &config.server_name, ca),
        )
    } else if lower.contains("timed out") || lower.contains("no answer") {
        (Verdict::Warn, advice::quic_no_answer(addr.port(), tcp_ok))
    } else {
        (
            Verdict::Warn,
            format!(
                "QUIC failed; the sidecar falls back to HTTP/2 (transport = \"auto\"): {error}"
            ),
        )
    };
    report.push_with_advice(check, verdict, error, advice);
    false
}

/// Authentication and a `SELECT 1` over one transport, timed.
async fn round_trip(report: &mut Report, version: HttpVersion, config: &ClientConfig) {
    let check = match version {
        HttpVersion::Http3 => "auth+h3",
        _ => "auth+h2",
    };
    let mut config = config.clone();
    config.transport = match version {
        HttpVersion::Http3 => TransportPreference::Http3,
        _ => TransportPreference::Http2,
    };
    config.connect_timeout = STEP_TIMEOUT;
    let username = config.username.clone();
    let client = match Client::new(config) {
        Ok(c) => c,
        Err(e) => {
            report.push("auth", Verdict::Fail, e.to_string());
            return;
        }
    };
    let mut best = Duration::MAX;
    let mut session = None;
    for _ in 0..ROUND_TRIPS {
        let started = Instant::now();
        match timeout(
            STEP_TIMEOUT,
            client.execute(session.as_ref(), "SELECT 1", HashMap::new()),
        )
        .await
        {
            Ok(Ok(reply)) => {
                if let Some(error) = reply.message.error {
                    // A report for a person: U+FFFD for bytes that are not UTF-8.
                    report.push_with_advice(check, Verdict::Fail, format!("authenticated, but SELECT 1 failed: {}", String::from_utf8_lossy(&error.message)), "the gateway cannot run queries on its backend: check the gateway's backend settings and logs");
                    return;
                }
                best = best.min(started.elapsed());
                session = reply.session;
            }
            Ok(Err(CallError::Api(e))) => {
                let verdict = Verdict::Fail;
                report.push_with_advice(
                    check,
                    verdict,
                    format!("{}: {}", e.code.as_str(), e.message),
                    advice::api_error(e.code, &e.message, &username),
                );
                return;
            }
            Ok(Err(e)) => {
                report.push(check, Verdict::Fail, e.to_string());
                return;
            }
            Err(_) => {
                report.push(
                    check,
                    Verdict::Fail,
                    format!("no answer to SELECT 1 within {STEP_TIMEOUT:?}"),
                );
                return;
            }
        }
    }
    if let Some(session) = &session {
        let _ = timeout(STEP_TIMEOUT, client.close_session(session)).await;
    }
    report.push(
        check,
        Verdict::Pass,
        format!(
            "user {username:?} authenticated; SELECT 1 round trip {:.1} ms (best of {ROUND_TRIPS})",
            best.as_secs_f64() * 1e3
        ),
    );
}
