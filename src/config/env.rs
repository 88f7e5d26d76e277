//! The environment, as a value: read from the process once, in `main`,
//! and passed to [`load`](super::load), so that nothing else reads it and
//! tests give their own.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::ConfigError;

/// Environment variables by name. Never printed: values may be secrets.
#[derive(Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The process's environment. Variables whose name or value is not
    /// UTF-8 are left out, as if unset.
    pub fn from_process() -> Self {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// `name`'s value parsed as the flag it stands for would be; unset is
    /// `None`, set but empty is parsed like any other value.
    pub(crate) fn parse<T>(&self, name: &'static str) -> Result<Option<T>, ConfigError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        value.parse().map(Some).map_err(|e| ConfigError::Invalid {
            key: name,
            reason: format!("{value:?}: {e}"),
        })
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Env {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self {
            vars: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// Names only.
impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}
