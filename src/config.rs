//! The configuration file: one TOML file with a section per role.
//!
//! Precedence is flags > environment > file > defaults: the file is read
//! into these structs (missing keys take their defaults), then each role's
//! command line (whose flags fall back to `MYQUIC_*` variables) overrides
//! single keys. Unknown keys are errors that name the key.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::gateway::GatewayConfig;
use crate::sidecar::config::SidecarConfig;

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub gateway: GatewayConfig,
    #[serde(default)]
    pub sidecar: SidecarConfig,
}

/// A configuration that cannot be used; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

impl ConfigFile {
    /// Reads `path`, or returns the defaults when there is no file.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// A secret given inline, from a file (a mounted Kubernetes secret) or
/// from an environment variable. Never printed.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    pub value: Option<String>,
    pub file: Option<PathBuf>,
    pub env: Option<String>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("file", &self.file)
            .field("env", &self.env)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// Resolves the secret; exactly one source must be given.
    pub fn resolve(&self, key: &'static str) -> Result<String, ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid { key, reason };
        match (&self.value, &self.file, &self.env) {
            (Some(v), None, None) => Ok(v.clone()),
            (None, Some(path), None) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\r', '\n']).to_string())
                .map_err(|e| invalid(format!("reading {}: {e}", path.display()))),
            (None, None, Some(var)) => std::env::var(var)
                .map_err(|_| invalid(format!("environment variable {var} is not set"))),
            _ => Err(invalid("give exactly one of value, file or env".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented example must always parse, with every key known.
    #[test]
    fn example_config_parses() {
        let text = include_str!("../config.example.toml");
        let file = ConfigFile::parse(text).expect("config.example.toml parses");
        file.gateway
            .validate()
            .expect("config.example.toml is valid");
        file.sidecar
            .validate()
            .expect("config.example.toml's sidecar section is valid");
        assert_eq!(file.sidecar.auth.users.len(), 1);
        assert_eq!(
            file.sidecar.upstream_authority().unwrap(),
            ("gateway.example".to_string(), 8443)
        );
        // The admin and drain sections show their defaults.
        let defaults = ConfigFile::default();
        assert_eq!(file.sidecar.admin, defaults.sidecar.admin);
        assert_eq!(file.gateway.admin, defaults.gateway.admin);
        assert_eq!(file.sidecar.drain.period, defaults.sidecar.drain.period);
        assert_eq!(
            file.sidecar.drain.transaction_timeout,
            defaults.sidecar.drain.transaction_timeout
        );
        assert_eq!(file.gateway.drain.timeout, defaults.gateway.drain.timeout);
        let (shown, default) = (&file.gateway, &defaults.gateway);
        assert_eq!(shown.timeouts.tls_handshake, default.timeouts.tls_handshake);
        assert_eq!(
            shown.timeouts.request_headers,
            default.timeouts.request_headers
        );
        assert_eq!(shown.timeouts.request_body, default.timeouts.request_body);
        assert_eq!(
            shown.limits.max_streams_per_connection,
            default.limits.max_streams_per_connection
        );
        assert_eq!(
            shown.limits.max_pending_connections_per_peer,
            default.limits.max_pending_connections_per_peer
        );
    }

    /// Keys documented commented out (no default) parse once uncommented.
    #[test]
    fn commented_example_keys_parse() {
        let text = include_str!("../config.example.toml")
            .replace("# tcp_congestion = ", "tcp_congestion = ")
            .replace("# quit_token = ", "quit_token = ");
        let file = ConfigFile::parse(&text).expect("config.example.toml parses uncommented");
        let name = |c: Option<crate::transport::tcp::TcpCongestion>| c.map(|c| c.to_string());
        assert_eq!(name(file.gateway.tcp_congestion).as_deref(), Some("bbr"));
        assert_eq!(
            name(file.sidecar.upstream.tcp_congestion).as_deref(),
            Some("bbr")
        );
        let token = |admin: &crate::admin::AdminConfig| admin.quit_token.clone().unwrap();
        assert!(token(&file.gateway.admin).file.is_some());
        assert!(token(&file.sidecar.admin).env.is_some());
        let bad = ConfigFile::parse("[gateway]\ntcp_congestion = \"BBR; x\"\n").unwrap_err();
        assert!(bad.to_string().contains("congestion"), "{bad}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = ConfigFile::parse("[gateway]\nlisten_on = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("listen_on"), "{err}");
    }
}
