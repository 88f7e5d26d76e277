//! Configuration, in one place: the file's sections, the flags and
//! environment variables that override single keys, and [`load`], which
//! lays them over each other.
//!
//! Precedence is flags > `MYQUIC_*` environment > file > defaults: the
//! file is read into the role's settings (missing keys take their
//! defaults), then the environment's variables and then the command
//! line's flags override single keys (`flags`). [`load`] reads nothing
//! itself: `main` reads the file and the process environment and passes
//! them in, so precedence is tested with the inputs as values. Unknown
//! keys are errors that name the key.
//!
//! This module depends on nothing in the crate but the leaf types its
//! keys are made of ([`crate::transport`]'s congestion controllers,
//! [`crate::api`]'s codec names); the roles, the client and the admin
//! endpoint take their settings from here.

mod admin;
mod env;
mod flags;
mod gateway;
mod secret;
mod sidecar;
mod upstream;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use admin::AdminConfig;
pub use env::Env;
pub use flags::{Codecs, Flags, GatewayFlags, SidecarFlags};
pub use gateway::{
    BackendConfig, BackendTlsMode, Credential, GatewayConfig, GatewayDrain, Limits, SessionConfig,
    Timeouts, TlsConfig,
};
pub use secret::Secret;
pub use sidecar::{AuthConfig, DrainConfig, FrontTls, LOGIN_MAX_PACKET, LocalUser, SidecarConfig};
pub use upstream::{TransportPreference, UpstreamConfig, defaults};

/// A role's settings: the file's section for it, then the environment's
/// `MYQUIC_<ROLE>_*` variables, then `flags`. Secrets given as `{ env =
/// … }` are bound to `env`'s values ([`Secret::bind`]); nothing is
/// validated (see `validate` on each role's settings), so that `myquic
/// doctor` can explain a configuration that would not start.
pub fn load<F: Flags>(flags: &F, env: &Env, file: Option<&File>) -> Result<F::Config, ConfigError> {
    let file = match file {
        Some(file) => ConfigFile::parse(&file.text).map_err(|source| ConfigError::Parse {
            path: file.path.clone(),
            source,
        })?,
        None => ConfigFile::default(),
    };
    let mut config = F::Config::section(file);
    // The token itself, then a file (the variable or the flag) over it.
    if env.contains(F::QUIT_TOKEN_VAR) {
        config.admin_mut().quit_token = Some(Secret::env(F::QUIT_TOKEN_VAR));
    }
    F::from_env(env)?.apply(&mut config);
    flags.apply(&mut config);
    config.bind_secrets(env);
    Ok(config)
}

/// What [`load`] needs of a role's settings.
pub trait Section: Sized {
    /// The role's section of the file.
    fn section(file: ConfigFile) -> Self;
    fn admin_mut(&mut self) -> &mut AdminConfig;
    /// Binds every `{ env = … }` secret to `env` (see [`Secret::bind`]).
    fn bind_secrets(&mut self, env: &Env);
}

/// The configuration file's text, and where it came from (for errors).
#[derive(Clone, Debug)]
pub struct File {
    pub path: PathBuf,
    pub text: String,
}

impl File {
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            text,
        })
    }
}

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub gateway: GatewayConfig,
    #[serde(default)]
    pub sidecar: SidecarConfig,
}

impl ConfigFile {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
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
    /// A key (or an environment variable) with a value that cannot work.
    #[error("{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    /// A psdb client setting that cannot work (see
    /// [`crate::client::ClientConfig::validate`]).
    #[error("client configuration: {field}: {reason}")]
    Client { field: &'static str, reason: String },
}
