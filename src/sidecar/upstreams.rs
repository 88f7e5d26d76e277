//! Which gateway credential each local account's sessions run under: its
//! own (`upstream_username` in `[[sidecar.auth.users]]`), or else the
//! sidecar's (`[sidecar.upstream]`). Every handle shares the one
//! connection to the gateway; only the `Authorization` its requests carry
//! differs, so two accounts are two backend identities at no cost in
//! connections.

use std::collections::HashMap;

use crate::client::{Client, Credential};
use crate::config::{ConfigError, LocalUser};

pub struct Upstreams {
    /// The sidecar's credential: accounts without their own, any user
    /// when no accounts are configured, the sidecar's own requests.
    default: Client,
    /// Accounts with a credential of their own, by the user name's bytes
    /// (as the handshake carries it).
    own: HashMap<Vec<u8>, Client>,
}

impl Upstreams {
    /// Resolves every account's own credential (its password secret) now,
    /// so a missing one stops the start, not a login.
    pub fn new(default: Client, users: &[LocalUser]) -> Result<Self, ConfigError> {
        let mut own = HashMap::new();
        for user in users {
            let (Some(name), Some(password)) = (&user.upstream_username, &user.upstream_password)
            else {
                continue;
            };
            let password = password.resolve("sidecar.auth.users.upstream_password")?;
            let client = default.with_credential(Credential::basic(name, &password));
            own.insert(user.username.as_bytes().to_vec(), client);
        }
        Ok(Self { default, own })
    }

    /// The sidecar's own credential.
    pub fn default_client(&self) -> &Client {
        &self.default
    }

    /// The handle whose requests carry `user`'s credential (`user` as the
    /// client sent it, already authenticated locally).
    pub fn for_user(&self, user: &[u8]) -> &Client {
        self.own.get(user).unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientConfig;
    use crate::config::Secret;
    use crate::transport::tls;

    fn user(name: &str, upstream: Option<(&str, Secret)>) -> LocalUser {
        let (upstream_username, upstream_password) = match upstream {
            Some((name, password)) => (Some(name.to_string()), Some(password)),
            None => (None, None),
        };
        LocalUser {
            username: name.into(),
            upstream_username,
            upstream_password,
            ..LocalUser::default()
        }
    }

    fn inline(value: &str) -> Secret {
        Secret {
            value: Some(value.into()),
            ..Secret::default()
        }
    }

    #[tokio::test]
    async fn each_account_runs_under_its_own_credential_or_the_sidecars() {
        tls::install_crypto_provider();
        let tls = tls::client_config(rustls::RootCertStore::empty(), &[]).unwrap();
        // Never reached: only the handles are looked at.
        let config = ClientConfig::new("127.0.0.1:9", "localhost", tls, "app-api", "pw");
        let default = Client::new(config).unwrap();
        let users = [
            user("app", None),
            user("report", Some(("ro-api", inline("ro-pw")))),
        ];
        let upstreams = Upstreams::new(default, &users).unwrap();
        let name = |user: &[u8]| upstreams.for_user(user).credential().username().to_string();
        assert_eq!(name(b"report"), "ro-api");
        assert_eq!(name(b"app"), "app-api");
        // Open mode (no accounts configured): any name, the sidecar's.
        assert_eq!(name(b"anyone"), "app-api");
        assert_eq!(
            upstreams.default_client().credential().username(),
            "app-api"
        );

        // A password that cannot be read stops the start, naming its key.
        let unset = user(
            "report",
            Some(("ro-api", Secret::env("MYQUIC_TEST_UNSET_VARIABLE"))),
        );
        let e = Upstreams::new(upstreams.default_client().clone(), &[unset])
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("sidecar.auth.users.upstream_password"), "{e}");
    }
}
