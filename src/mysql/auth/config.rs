//! What every connection's handshake shares: the server version, the
//! local accounts and the plugin they use.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::{AuthCache, RsaKey};

/// An authentication plugin the sidecar can verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Plugin {
    /// MySQL 8's default; needs TLS, a unix socket or RSA for the first
    /// login of each user, then a cheap cached fast path.
    #[default]
    CachingSha2Password,
    /// The legacy SHA-1 challenge/response; works with every client.
    MysqlNativePassword,
}

impl Plugin {
    pub fn name(self) -> &'static str {
        match self {
            Plugin::CachingSha2Password => "caching_sha2_password",
            Plugin::MysqlNativePassword => "mysql_native_password",
        }
    }

    /// The plugin a server presenting `server_version` gives new accounts
    /// by default, so the one its clients expect out of the box: MariaDB
    /// and MySQL before 8.0 `mysql_native_password`, MySQL 8 and later
    /// `caching_sha2_password` (which such clients then expect to pass
    /// over TLS or with the server's RSA key).
    pub fn default_for(server_version: &str) -> Self {
        if server_version.contains("MariaDB") {
            return Plugin::MysqlNativePassword;
        }
        let major = server_version
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        match major {
            Some(major) if major < 8 => Plugin::MysqlNativePassword,
            _ => Plugin::CachingSha2Password,
        }
    }

    /// The plugin a client named, if it is one we verify.
    pub fn from_name(name: &[u8]) -> Option<Self> {
        match name {
            b"caching_sha2_password" => Some(Plugin::CachingSha2Password),
            b"mysql_native_password" => Some(Plugin::MysqlNativePassword),
            _ => None,
        }
    }
}

impl FromStr for Plugin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Plugin::from_name(s.as_bytes()).ok_or_else(|| {
            format!("unknown auth plugin {s:?} (caching_sha2_password or mysql_native_password)")
        })
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What every connection's handshake shares; build once, wrap in an `Arc`.
#[derive(Clone)]
pub struct AuthConfig {
    /// Sent in the greeting; clients parse it to pick features, so keep a
    /// real-looking version first (e.g. `11.4.0-myquic`).
    pub server_version: String,
    /// Local accounts, user → password. `None` is open mode: any user and
    /// password is accepted, but the plugin exchange still runs properly so
    /// that clients see a normal login.
    pub users: Option<HashMap<String, String>>,
    /// The plugin every account uses (there is no per-user plugin).
    pub default_plugin: Plugin,
    /// Whether the I/O layer can upgrade to TLS (adds `CLIENT_SSL`).
    pub tls_available: bool,
    /// Users that completed caching_sha2 full authentication.
    pub cache: Arc<AuthCache>,
    /// The key caching_sha2 clients encrypt their password with.
    pub rsa_key: Arc<RsaKey>,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print passwords.
        f.debug_struct("AuthConfig")
            .field("server_version", &self.server_version)
            .field(
                "users",
                &self.users.as_ref().map(|u| {
                    let mut names: Vec<&str> = u.keys().map(String::as_str).collect();
                    names.sort_unstable();
                    names
                }),
            )
            .field("default_plugin", &self.default_plugin)
            .field("tls_available", &self.tls_available)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plugin_follows_the_server_flavour() {
        for (version, plugin) in [
            (
                "5.5.5-10.11.19-MariaDB-0+deb12u1",
                Plugin::MysqlNativePassword,
            ),
            ("11.4.2-MariaDB", Plugin::MysqlNativePassword),
            ("5.7.44-log", Plugin::MysqlNativePassword),
            ("8.0.40-myquic", Plugin::CachingSha2Password),
            ("8.4.3", Plugin::CachingSha2Password),
            ("9.1.0-commercial", Plugin::CachingSha2Password),
            ("", Plugin::CachingSha2Password),
            ("not a version", Plugin::CachingSha2Password),
        ] {
            assert_eq!(Plugin::default_for(version), plugin, "{version}");
        }
    }

    #[test]
    fn config_debug_hides_passwords() {
        let cfg = AuthConfig {
            server_version: "11.4.0-myquic".into(),
            users: Some(HashMap::from([("app".into(), "s3cret".into())])),
            default_plugin: Plugin::CachingSha2Password,
            tls_available: false,
            cache: Arc::new(AuthCache::new()),
            // Generated on first use only: never here.
            rsa_key: Arc::new(RsaKey::generated()),
        };
        let s = format!("{cfg:?}");
        assert!(s.contains("app") && !s.contains("s3cret"), "{s}");
        assert_eq!(
            "mysql_native_password".parse(),
            Ok(Plugin::MysqlNativePassword)
        );
        assert!("client_ed25519".parse::<Plugin>().is_err());
    }
}
