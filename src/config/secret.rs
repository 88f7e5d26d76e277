//! Secrets: passwords, the session signing key, the `/quitquitquit` token.

use std::path::PathBuf;

use serde::Deserialize;

use super::{ConfigError, Env};

/// A secret given inline, from a file (a mounted Kubernetes secret) or
/// from an environment variable. Never printed.
///
/// The environment is read once: [`load`](super::load) binds each `{ env
/// = … }` secret to its variable's value in the environment it is given
/// ([`Secret::bind`]). A file is read when the secret is used, at start.
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
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            file: Some(path.into()),
            ..Self::default()
        }
    }

    pub fn env(var: impl Into<String>) -> Self {
        Self {
            env: Some(var.into()),
            ..Self::default()
        }
    }

    /// Resolves the secret; exactly one source must be given. An `env`
    /// source left unbound by [`load`](super::load) names a variable that
    /// was not set.
    pub fn resolve(&self, key: &'static str) -> Result<String, ConfigError> {
        self.resolve_in(key, &Env::default())
    }

    /// Resolves the secret, looking `env` sources up in `env`.
    pub fn resolve_in(&self, key: &'static str, env: &Env) -> Result<String, ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid { key, reason };
        match (&self.value, &self.file, &self.env) {
            (Some(v), None, None) => Ok(v.clone()),
            (None, Some(path), None) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\r', '\n']).to_string())
                .map_err(|e| invalid(format!("reading {}: {e}", path.display()))),
            (None, None, Some(var)) => env
                .get(var)
                .map(str::to_string)
                .ok_or_else(|| invalid(format!("environment variable {var} is not set"))),
            _ => Err(invalid("give exactly one of value, file or env".into())),
        }
    }

    /// Replaces an `env` source whose variable `env` holds with its value.
    /// Anything else is left for [`Secret::resolve`] to accept or refuse.
    pub fn bind(&mut self, env: &Env) {
        if let (None, None, Some(var)) = (&self.value, &self.file, &self.env)
            && let Some(value) = env.get(var)
        {
            *self = Self {
                value: Some(value.to_string()),
                ..Self::default()
            };
        }
    }
}
