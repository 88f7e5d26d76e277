//! TLS from the gateway to its backend: the `SslOpts` the configuration
//! asks for, an account's pools by TLS decision, and — for `preferred` —
//! the one decision whether the server offers TLS at all.
//!
//! Whenever TLS is used the server's certificate is verified, chain and
//! name (mysql_async's "danger" switches stay off). `preferred` is
//! decided at the first contact and kept: a server seen offering TLS must
//! keep offering it, so a later plaintext greeting (a downgrade) fails.

use std::path::Path;

use mysql_async::{ClientIdentity, DriverError, Pool, SslOpts};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::OnceCell;
use tracing::{info, warn};

use crate::config::{BackendConfig, BackendTlsMode, ConfigError};

use super::backend::split_host_port;

/// The resolved TLS settings of the backend connections.
pub struct BackendTls {
    mode: BackendTlsMode,
    /// `None` when TLS is disabled.
    ssl: Option<SslOpts>,
    /// What the certificate is checked against, for error messages.
    trust: String,
    /// `preferred`: whether the server offers TLS, decided once for every
    /// account (it is the server's, not an account's): by the first whose
    /// connection gets as far as the greeting's answer — an account whose
    /// backend user does not exist yet decides nothing.
    offered: OnceCell<Offered>,
}

impl BackendTls {
    /// Reads the CA, client certificate and key named by `config` (once,
    /// at start: an unreadable or empty file is a configuration error).
    pub fn from_config(config: &BackendConfig) -> Result<Self, ConfigError> {
        let mode = config.tls_mode();
        if mode == BackendTlsMode::Disabled {
            return Ok(Self {
                mode,
                ssl: None,
                trust: String::new(),
                offered: OnceCell::new(),
            });
        }
        let (roots, roots_named) = match &config.tls_ca {
            Some(path) => {
                let pem = read_certificates(path, "gateway.backend.tls_ca")?;
                (vec![pem.into()], path.display().to_string())
            }
            None => (system_roots(), "the system's CA roots".to_string()),
        };
        let name = config
            .tls_server_name
            .clone()
            .or_else(|| config.address.as_deref().map(|a| split_host_port(a).0))
            .unwrap_or_default();
        let mut ssl = SslOpts::default()
            .with_root_certs(roots)
            // Only the configured roots (or the system's, loaded above):
            // not mysql_async's compiled-in copy of Mozilla's.
            .with_disable_built_in_roots(true)
            .with_danger_tls_hostname_override(config.tls_server_name.clone());
        if let (Some(cert), Some(key)) = (&config.tls_client_cert, &config.tls_client_key) {
            let cert = read_certificates(cert, "gateway.backend.tls_client_cert")?;
            let key = read_key(key)?;
            ssl = ssl.with_client_identity(Some(ClientIdentity::new(cert.into(), key.into())));
        }
        Ok(Self {
            mode,
            ssl: Some(ssl),
            trust: format!("verified against {roots_named} for the name {name:?}"),
            offered: OnceCell::new(),
        })
    }

    pub fn mode(&self) -> BackendTlsMode {
        self.mode
    }

    /// The options of a TLS pool (`None`: TLS is disabled).
    pub fn ssl_opts(&self) -> Option<SslOpts> {
        self.ssl.clone()
    }

    /// Why a backend connection could not be opened, in an operator's
    /// words: TLS failures say what the certificate was checked against.
    pub fn explain(&self, error: &mysql_async::Error) -> String {
        if matches!(
            error,
            mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer)
        ) {
            return "the backend offers no TLS, and gateway.backend.tls is \"required\" \
                    (or it offered TLS when first reached, with tls = \"preferred\")"
                .into();
        }
        match rustls_cause(error) {
            Some(tls) => format!(
                "TLS to the backend failed: {tls}; its certificate is {} \
                 (gateway.backend.tls_ca, tls_server_name)",
                self.trust
            ),
            None => error.to_string(),
        }
    }
}

/// Whether `preferred` found TLS offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offered {
    Tls,
    Plaintext,
}

/// One account's backend pools: `primary` uses TLS unless it is disabled;
/// with `preferred`, `plaintext` is there for a server that offers none.
/// Each is a pair: with `CLIENT_FOUND_ROWS` (the API's default) and
/// without (MySQL clients' default), fixed at a connection's handshake.
pub struct Pools {
    primary: [Pool; 2],
    plaintext: Option<[Pool; 2]>,
    tls: std::sync::Arc<BackendTls>,
}

impl Pools {
    /// `make(found_rows, ssl)` builds one pool.
    pub fn new(
        tls: std::sync::Arc<BackendTls>,
        make: impl Fn(bool, Option<SslOpts>) -> Pool,
    ) -> Self {
        let pair = |ssl: Option<SslOpts>| [make(true, ssl.clone()), make(false, ssl)];
        let plaintext = (tls.mode == BackendTlsMode::Preferred).then(|| pair(None));
        Self {
            primary: pair(tls.ssl_opts()),
            plaintext,
            tls,
        }
    }

    /// The pool a session's connections come from. Until `preferred` is
    /// decided this is the TLS pool: nothing goes out in clear by default.
    pub fn pool_for(&self, client_found_rows: bool) -> &Pool {
        let pair = match (&self.plaintext, self.tls.offered.get()) {
            (Some(plaintext), Some(Offered::Plaintext)) => plaintext,
            _ => &self.primary,
        };
        &pair[usize::from(!client_found_rows)]
    }

    /// Every pool, for warming and shutdown.
    pub fn all(&self) -> impl Iterator<Item = &Pool> {
        self.primary.iter().chain(self.plaintext.iter().flatten())
    }

    /// Decides `preferred` (once; concurrent callers wait for the one
    /// under way) by opening a TLS connection: the server's greeting says
    /// whether it offers TLS. Any other failure leaves it undecided.
    pub async fn settle(&self) -> Result<(), String> {
        if self.plaintext.is_none() {
            return Ok(());
        }
        self.tls
            .offered
            .get_or_try_init(|| async {
                match self.primary[0].get_conn().await {
                    Ok(_returned_to_the_pool) => {
                        info!("the backend offers TLS: used, verified, and required from now on");
                        Ok(Offered::Tls)
                    }
                    Err(mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer)) => {
                        warn!(
                            "the backend offers no TLS: its connections are plaintext \
                             (gateway.backend.tls = \"required\" refuses this)"
                        );
                        Ok(Offered::Plaintext)
                    }
                    Err(e) => Err(self.tls.explain(&e)),
                }
            })
            .await
            .map(|_| ())
    }

    pub fn explain(&self, error: &mysql_async::Error) -> String {
        self.tls.explain(error)
    }
}

/// The rustls error under a mysql_async one. `io::Error::source` skips
/// the error it wraps, so that one is looked at with `get_ref`.
fn rustls_cause(error: &mysql_async::Error) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(tls) = inner.downcast_ref::<rustls::Error>()
        {
            return Some(tls);
        }
        next = e.source();
    }
    None
}

fn read(path: &Path, key: &'static str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::Invalid {
        key,
        reason: format!("reading {}: {e}", path.display()),
    })
}

/// A PEM file with at least one certificate.
fn read_certificates(path: &Path, key: &'static str) -> Result<Vec<u8>, ConfigError> {
    let pem = read(path, key)?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    match certs {
        Ok(certs) if !certs.is_empty() => Ok(pem),
        Ok(_) => Err(ConfigError::Invalid {
            key,
            reason: format!("{}: no PEM certificate in it", path.display()),
        }),
        Err(e) => Err(ConfigError::Invalid {
            key,
            reason: format!("{}: {e}", path.display()),
        }),
    }
}

fn read_key(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let key = "gateway.backend.tls_client_key";
    let pem = read(path, key)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| ConfigError::Invalid {
        key,
        reason: format!("{}: no PEM private key ({e})", path.display()),
    })?;
    Ok(pem)
}

/// The system's CA certificates, as mysql_async takes them (DER buffers,
/// its `PathOrBuf`, which it does not name publicly).
fn system_roots<T: From<Vec<u8>>>() -> Vec<T> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        warn!(error = %e, "reading system CA certificates");
    }
    found
        .certs
        .into_iter()
        .map(|der| der.to_vec().into())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(address: &str) -> BackendConfig {
        BackendConfig {
            address: Some(address.into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_name_checked_is_the_address_host_unless_configured() {
        let tls = BackendTls::from_config(&backend("db.internal:3307")).unwrap();
        assert!(tls.trust.contains("\"db.internal\""), "{}", tls.trust);
        let mut config = backend("[::1]:3306");
        config.tls_server_name = Some("db.example".into());
        let tls = BackendTls::from_config(&config).unwrap();
        assert!(tls.trust.contains("\"db.example\""), "{}", tls.trust);
    }

    #[test]
    fn defaults_follow_the_transport() {
        assert_eq!(backend("db:3306").tls_mode(), BackendTlsMode::Preferred);
        let socket = BackendConfig {
            socket: Some("/run/mysqld/mysqld.sock".into()),
            ..Default::default()
        };
        assert_eq!(socket.tls_mode(), BackendTlsMode::Disabled);
        assert!(BackendTls::from_config(&socket).unwrap().ssl.is_none());
    }

    #[test]
    fn unreadable_or_empty_files_name_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let mut config = backend("db:3306");
        config.tls_ca = Some(empty);
        let err = BackendTls::from_config(&config).err().unwrap().to_string();
        assert!(
            err.contains("gateway.backend.tls_ca") && err.contains("no PEM"),
            "{err}"
        );
        config.tls_ca = Some(dir.path().join("missing.pem"));
        let err = BackendTls::from_config(&config).err().unwrap().to_string();
        assert!(err.contains("gateway.backend.tls_ca"), "{err}");
    }
}
