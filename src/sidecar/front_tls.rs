//! TLS toward local clients: the configured certificate, or one the
//! sidecar makes itself at start, as MySQL's `auto_generate_certs` does.
//! Clients that prefer TLS (mysql-connector-python, the mariadb client)
//! or require it without verifying (`--ssl`, `tls=skip-verify`) then get
//! it from a default sidecar; it is offered, never required.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use tokio_rustls::TlsAcceptor;
use tracing::info;

use crate::config::{ConfigError, FrontTls};
use crate::translate::connection_status::{NegotiatedTls, OfferedTls, openssl_time};
use crate::transport::tls::{Identity, SelfSigned, TlsError};

/// In [`FrontTls::auto_generate_dir`]: what clients may trust, and its key.
/// The certificate is written last, so it marks a complete pair.
pub const CERT_FILE: &str = "cert.pem";
pub const KEY_FILE: &str = "key.pem";
/// Held while one sidecar reads or writes the pair, so that two sidecars
/// sharing the directory never end up with halves of different pairs.
const LOCK_FILE: &str = ".lock";

/// TLS toward local clients, when it is on.
pub struct FrontAcceptor {
    /// Takes clients' SSLRequests.
    pub acceptor: TlsAcceptor,
    /// What it offers every client, as status variables say it.
    pub offered: OfferedTls,
}

/// The acceptor for clients' SSLRequests, `None` when TLS is off.
pub fn acceptor(tls: &FrontTls, listen: SocketAddr) -> Result<Option<FrontAcceptor>, ConfigError> {
    let Some(identity) = identity(tls, listen)? else {
        return Ok(None);
    };
    let server = identity
        .mysql_server_config()
        .map_err(|e| invalid("sidecar.tls", e))?;
    let offered = offered(&server, &identity);
    Ok(Some(FrontAcceptor {
        acceptor: TlsAcceptor::from(server),
        offered,
    }))
}

/// Rustls's lifetime of the TLS 1.3 session tickets it issues from its
/// session cache (`emit_stateful_ticket`: a day).
const SESSION_LIFETIME_SECS: u32 = 24 * 60 * 60;

/// What `server` offers, in OpenSSL's words (`Ssl_cipher_list`,
/// `Ssl_server_not_before`/`_after`, `Ssl_default_timeout`).
fn offered(server: &rustls::ServerConfig, identity: &Identity) -> OfferedTls {
    let cipher_list = server
        .crypto_provider()
        .cipher_suites
        .iter()
        .filter_map(|suite| openssl_name(suite.suite()))
        .collect::<Vec<_>>()
        .join(":");
    let validity = identity.chain.first().and_then(|cert| {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
        let validity = parsed.validity();
        Some((
            openssl_time(validity.not_before.timestamp()),
            openssl_time(validity.not_after.timestamp()),
        ))
    });
    let (not_before, not_after) = validity.unwrap_or_default();
    OfferedTls {
        cipher_list,
        not_before,
        not_after,
        session_lifetime: SESSION_LIFETIME_SECS,
    }
}

/// What a client's TLS session is, in OpenSSL's words (`Ssl_cipher`,
/// `Ssl_version`, `Ssl_sessions_reused`).
pub fn negotiated(connection: &rustls::ServerConnection) -> NegotiatedTls {
    NegotiatedTls {
        cipher: connection
            .negotiated_cipher_suite()
            .and_then(|suite| openssl_name(suite.suite()))
            .unwrap_or(""),
        version: connection.protocol_version().map_or("", openssl_version),
        resumed: connection.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
    }
}

/// OpenSSL's name of a cipher suite (what MariaDB shows in `Ssl_cipher`).
fn openssl_name(suite: rustls::CipherSuite) -> Option<&'static str> {
    use rustls::CipherSuite as S;
    Some(match suite {
        S::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        S::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        S::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        _ => return None,
    })
}

/// OpenSSL's name of a protocol version (`Ssl_version`).
fn openssl_version(version: rustls::ProtocolVersion) -> &'static str {
    match version {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "",
    }
}

fn identity(tls: &FrontTls, listen: SocketAddr) -> Result<Option<Identity>, ConfigError> {
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        return Identity::from_pem_files(cert, key)
            .map(Some)
            .map_err(|e| invalid("sidecar.tls", e));
    }
    if !tls.auto_generate {
        return Ok(None);
    }
    let names = names(listen);
    let identity = match &tls.auto_generate_dir {
        None => {
            let generated = SelfSigned::generate(&names)
                .map_err(|e| invalid("sidecar.tls.auto_generate", e))?;
            info!(
                ?names,
                "offering TLS to local clients with a self-signed certificate made at start"
            );
            generated.identity
        }
        Some(dir) => stored_or_generated(dir, &names)
            .map_err(|e| invalid("sidecar.tls.auto_generate_dir", e))?,
    };
    Ok(Some(identity))
}

/// What the generated certificate is for: the loopback names, and the
/// listen address when it is a specific one.
fn names(listen: SocketAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    let ip = listen.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        names.push(ip.to_string());
    }
    names
}

/// The pair kept in `dir`, made and written there the first time.
fn stored_or_generated(dir: &Path, names: &[String]) -> Result<Identity, TlsError> {
    let io_err = |path: PathBuf| move |source| TlsError::Write { path, source };
    // Only this user may read the key.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir.to_path_buf()))?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err(lock_path.clone()))?;
    // Another sidecar writing the pair holds it for milliseconds.
    lock.lock().map_err(io_err(lock_path))?;
    let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    if cert.exists() {
        info!(cert = %cert.display(), "offering TLS to local clients with the certificate made earlier");
        return Identity::from_pem_files(&cert, &key);
    }
    let generated = SelfSigned::generate(names)?;
    write_new(&key, &generated.key_pem, 0o600)?;
    write_new(&cert, &generated.cert_pem, 0o644)?;
    info!(cert = %cert.display(), ?names, "offering TLS to local clients with a self-signed certificate made now, kept for later starts");
    Ok(generated.identity)
}

/// Writes `path` whole or not at all (a temporary file renamed over it).
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), TlsError> {
    let tmp = path.with_extension("tmp");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn invalid(key: &'static str, e: TlsError) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generated_in(dir: Option<PathBuf>) -> FrontTls {
        FrontTls {
            auto_generate_dir: dir,
            ..FrontTls::default()
        }
    }

    fn leaf(identity: &Identity) -> Vec<u8> {
        identity.chain[0].to_vec()
    }

    #[test]
    fn a_default_sidecar_offers_tls_and_off_means_off() {
        let listen = "127.0.0.1:3306".parse().unwrap();
        assert!(acceptor(&FrontTls::default(), listen).unwrap().is_some());
        let off = FrontTls {
            auto_generate: false,
            ..FrontTls::default()
        };
        assert!(acceptor(&off, listen).unwrap().is_none());
        // A new certificate at every start without a directory.
        let a = identity(&FrontTls::default(), listen).unwrap().unwrap();
        let b = identity(&FrontTls::default(), listen).unwrap().unwrap();
        assert_ne!(leaf(&a), leaf(&b));
    }

    #[test]
    fn the_generated_pair_is_written_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("sidecar-tls");
        let listen = "10.1.2.3:3306".parse().unwrap();
        let first = identity(&generated_in(Some(keep.clone())), listen)
            .unwrap()
            .unwrap();
        let again = identity(&generated_in(Some(keep.clone())), listen)
            .unwrap()
            .unwrap();
        assert_eq!(leaf(&first), leaf(&again), "reused on the next start");
        let mode = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(&keep.join(KEY_FILE)), 0o600);
        assert_eq!(mode(&keep), 0o700);
        // What clients are given to trust names the listen address too.
        let pem = std::fs::read_to_string(keep.join(CERT_FILE)).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        assert_eq!(names(listen).last().map(String::as_str), Some("10.1.2.3"));
        assert_eq!(names("0.0.0.0:3306".parse().unwrap()).len(), 3);
        // A configured certificate wins over the generated one.
        let configured = FrontTls {
            cert: Some(keep.join(CERT_FILE)),
            key: Some(keep.join(KEY_FILE)),
            auto_generate_dir: Some(dir.path().join("unused")),
            ..FrontTls::default()
        };
        let used = identity(&configured, listen).unwrap().unwrap();
        assert_eq!(leaf(&used), leaf(&first));
        assert!(!dir.path().join("unused").exists());
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let Err(e) = acceptor(
            &generated_in(Some(file.join("below"))),
            "127.0.0.1:3306".parse().unwrap(),
        ) else {
            panic!("a file is no directory");
        };
        let e = e.to_string();
        assert!(e.contains("sidecar.tls.auto_generate_dir"), "{e}");
    }
}
