//! One private CA per run and a server certificate signed by it, used by
//! both MariaDB (for the direct TLS baseline) and the gateway, so every
//! client verifies its server the same way.

use std::path::{Path, PathBuf};

pub struct Certs {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Writes `ca.pem`, `server.pem` and `server.key` into `dir`; the server
/// certificate names localhost, 127.0.0.1 and `extra_ips`.
pub fn generate(dir: &Path, extra_ips: &[String]) -> anyhow::Result<Certs> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "myquic bench CA");
    let ca_key = rcgen::KeyPair::generate()?;
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;

    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    names.extend(extra_ips.iter().cloned());
    let mut params = rcgen::CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "myquic bench server");
    let key = rcgen::KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;

    let certs = Certs {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    std::fs::write(&certs.ca, ca.pem())?;
    std::fs::write(&certs.cert, cert.pem())?;
    std::fs::write(&certs.key, key.serialize_pem())?;
    Ok(certs)
}
