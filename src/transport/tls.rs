//! TLS configuration for both transports (rustls with `ring`): TLS 1.3
//! toward and from the gateway; TLS 1.2 and 1.3 for the sidecar's local
//! MySQL clients.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// ALPN for HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";
/// ALPN for HTTP/2 and HTTP/1.1 over TLS.
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("{path}: no certificate found")]
    NoCertificate { path: PathBuf },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A certificate chain and its key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// The operating system's trusted CAs.
pub fn system_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "reading system CA certificates");
    }
    let (added, _) = roots.add_parsable_certificates(found.certs);
    tracing::debug!(added, "system CA certificates");
    roots
}

/// Installs `ring` as the process's crypto provider. Idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Identity {
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let pem_err = |path: &Path, e: rustls::pki_types::pem::Error| TlsError::Pem {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(|e| pem_err(cert, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_err(cert, e))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_path_buf(),
            });
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err(key, e))?;
        Ok(Self { chain, key })
    }

    /// Generates a self-signed certificate for `names` (DNS names or IP
    /// addresses) and writes its PEM to `cert_out` for clients to trust.
    pub fn self_signed(names: &[String], cert_out: &Path) -> Result<Self, TlsError> {
        let generated = SelfSigned::generate(names)?;
        std::fs::write(cert_out, &generated.cert_pem).map_err(|source| TlsError::Write {
            path: cert_out.to_path_buf(),
            source,
        })?;
        Ok(generated.identity)
    }

    /// A TLS 1.3-only server configuration offering `alpn`.
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut config =
            rustls::ServerConfig::builder_with_protocol_versions(&[&rustls::version::TLS13])
                .with_no_client_auth()
                .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config.max_early_data_size = 0;
        Ok(Arc::new(config))
    }

    /// The server configuration for local MySQL clients: TLS 1.2 and 1.3
    /// (rustls's secure cipher suites only), no ALPN. MySQL clients are
    /// not all on TLS 1.3: Connector/J on older JREs, clients linked to
    /// OpenSSL 1.0.2, and anyone who pins `--tls-version=TLSv1.2`.
    pub fn mysql_server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let config = rustls::ServerConfig::builder_with_protocol_versions(&[
            &rustls::version::TLS13,
            &rustls::version::TLS12,
        ])
        .with_no_client_auth()
        .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(config))
    }
}

/// A freshly generated self-signed certificate, with the PEM text of it
/// and of its key (for writing them out).
pub struct SelfSigned {
    pub identity: Identity,
    pub cert_pem: String,
    pub key_pem: String,
}

impl SelfSigned {
    /// An ECDSA P-256 certificate for `names` (DNS names or IP addresses;
    /// empty: `localhost`, `127.0.0.1` and `::1`). Takes milliseconds.
    pub fn generate(names: &[String]) -> Result<Self, TlsError> {
        let mut names = names.to_vec();
        if names.is_empty() {
            names = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        }
        let certified = rcgen::generate_simple_self_signed(names)?;
        Ok(Self {
            cert_pem: certified.cert.pem(),
            key_pem: certified.signing_key.serialize_pem(),
            identity: Identity {
                chain: vec![certified.cert.der().clone()],
                key: PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into()),
            },
        })
    }
}

/// A TLS 1.3-only client configuration that verifies the server against
/// `roots`; there is deliberately no way to skip verification.
pub fn client_config(
    roots: rustls::RootCertStore,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut config =
        rustls::ClientConfig::builder_with_protocol_versions(&[&rustls::version::TLS13])
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// Trust store from a PEM file of CA certificates.
pub fn roots_from_pem(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let pem_err = |e: rustls::pki_types::pem::Error| TlsError::Pem {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(pem_err)? {
        roots.add(cert.map_err(pem_err)?)?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(roots)
}
