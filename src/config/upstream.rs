//! `[sidecar.upstream]`: the gateway the sidecar talks to, and how.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, Secret};
use crate::transport::quic::Congestion;
use crate::transport::tcp::TcpCongestion;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// The gateway (any psdb.v1alpha1 server): `https://host:port`. A
    /// name with several addresses is a tier of gateways.
    pub url: String,
    /// More gateways of the same tier (`https://host:port` each), for
    /// tiers not behind one name. The sidecar keeps one connection, to one
    /// of them, and moves on when it fails or drains.
    pub tier_urls: Vec<String>,
    /// Name checked against the gateway's certificate; defaults to the
    /// URL's host.
    pub server_name: Option<String>,
    /// CA certificates (PEM) to trust instead of the system roots.
    pub ca: Option<PathBuf>,
    /// The API credential (HTTP Basic), never taken from clients.
    pub username: String,
    pub password: Secret,
    /// `auto` (HTTP/3, falling back to HTTP/2), `http3` or `http2`.
    pub transport: TransportPreference,
    /// QUIC handshake time before HTTP/2 is used instead.
    #[serde(with = "humantime_serde")]
    pub h3_handshake_timeout: Duration,
    /// While on HTTP/2, how often HTTP/3 is tried again (jittered).
    #[serde(with = "humantime_serde")]
    pub probe_interval: Duration,
    /// QUIC keep-alive, below NAT binding timeouts.
    #[serde(with = "humantime_serde")]
    pub keep_alive: Duration,
    /// A QUIC connection silent this long is declared dead.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// How long a request waits for a connection to the gateway.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Request bodies at least this large are compressed.
    pub compress_min_bytes: usize,
    /// Codecs offered for responses and used for requests (`zstd`, `s2`,
    /// `snappy`, `gzip`), most preferred first; empty: none.
    pub compression: Vec<String>,
    /// QUIC congestion controller: `bbr`, `cubic` or `newreno`.
    pub congestion: Congestion,
    /// TCP congestion controller of the HTTP/2 fallback (`bbr`, `cubic`,
    /// `reno`, …); unset: the host's default.
    pub tcp_congestion: Option<TcpCongestion>,
}

/// Which HTTP version to use. One set of names for the file (serde), the
/// flag (clap) and the environment ([`FromStr`](std::str::FromStr)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TransportPreference {
    /// HTTP/3, falling back to HTTP/2 while UDP does not get through and
    /// probing HTTP/3 again in the background.
    #[default]
    Auto,
    /// HTTP/3 only: fail rather than fall back.
    Http3,
    /// HTTP/2 over TLS only (networks known to block UDP).
    Http2,
}

impl std::str::FromStr for TransportPreference {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        <Self as clap::ValueEnum>::from_str(s, false)
            .map_err(|_| format!("{s:?} is not auto, http3 or http2"))
    }
}

/// The psdb client's defaults, which `[sidecar.upstream]` shows (the
/// reasons are on [`crate::client::ClientConfig`]'s fields).
pub mod defaults {
    use std::time::Duration;

    pub const H3_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);
    pub const H3_SILENCE_TIMEOUT: Duration = Duration::from_secs(1);
    pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);
    pub const KEEP_ALIVE: Duration = Duration::from_secs(1);
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(3);
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const COMPRESS_MIN_BYTES: usize = 1024;
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            tier_urls: Vec::new(),
            server_name: None,
            ca: None,
            username: String::new(),
            password: Secret::default(),
            transport: TransportPreference::default(),
            h3_handshake_timeout: defaults::H3_HANDSHAKE_TIMEOUT,
            probe_interval: defaults::PROBE_INTERVAL,
            keep_alive: defaults::KEEP_ALIVE,
            idle_timeout: defaults::IDLE_TIMEOUT,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            compress_min_bytes: defaults::COMPRESS_MIN_BYTES,
            compression: vec!["zstd".into(), "s2".into(), "snappy".into()],
            congestion: Congestion::default(),
            tcp_congestion: None,
        }
    }
}

impl UpstreamConfig {
    /// `host:port` of the gateway, from `url`.
    pub fn authority(&self) -> Result<(String, u16), ConfigError> {
        parse_authority(&self.url, "sidecar.upstream.url")
    }

    /// Every gateway of the tier as `host:port` (IPv6 hosts bracketed),
    /// `url`'s first.
    pub fn tier(&self) -> Result<Vec<String>, ConfigError> {
        let mut tier = Vec::with_capacity(1 + self.tier_urls.len());
        for (url, key) in std::iter::once((&self.url, "sidecar.upstream.url")).chain(
            self.tier_urls
                .iter()
                .map(|u| (u, "sidecar.upstream.tier_urls")),
        ) {
            let (host, port) = parse_authority(url, key)?;
            tier.push(if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            });
        }
        Ok(tier)
    }
}

/// `https://host:port/…` → (host, port), port 443 if none.
fn parse_authority(url: &str, key: &'static str) -> Result<(String, u16), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { key, reason };
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| invalid("must start with https:// (TLS is always on)".into()))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => (
            host,
            port.parse::<u16>()
                .map_err(|_| invalid(format!("bad port {port:?}")))?,
        ),
        _ => (authority, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(invalid("no host".into()));
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_is_every_url_in_order() {
        let c = UpstreamConfig {
            url: "https://a.example".into(),
            tier_urls: vec![
                "https://[::1]:8443/".into(),
                "https://b.example:9443".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            c.tier().unwrap(),
            ["a.example:443", "[::1]:8443", "b.example:9443"]
        );
        let bad = UpstreamConfig {
            tier_urls: vec!["http://b.example".into()],
            ..c
        };
        assert!(bad.tier().unwrap_err().to_string().contains("tier_urls"));
    }

    #[test]
    fn gateway_urls() {
        let mut c = UpstreamConfig::default();
        for (url, host, port) in [
            ("https://gw.example:8443", "gw.example", 8443),
            ("https://gw.example", "gw.example", 443),
            ("https://[::1]:9000/", "::1", 9000),
            ("https://10.0.0.1:443", "10.0.0.1", 443),
        ] {
            c.url = url.into();
            assert_eq!(c.authority().unwrap(), (host.to_string(), port));
        }
        c.url = "http://gw.example".into();
        assert!(c.authority().is_err());
    }

    /// The file, the flag and the environment know the same names.
    #[test]
    fn transport_names_agree() {
        use clap::ValueEnum;
        #[derive(Deserialize)]
        struct File {
            transport: TransportPreference,
        }
        for t in TransportPreference::value_variants() {
            let name = t.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name.parse::<TransportPreference>().unwrap(), *t);
            let file: File = toml::from_str(&format!("transport = {name:?}")).unwrap();
            assert_eq!(file.transport, *t);
        }
        let e = "HTTP3".parse::<TransportPreference>().unwrap_err();
        assert!(e.contains("auto, http3 or http2"), "{e}");
    }
}
