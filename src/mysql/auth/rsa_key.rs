//! The RSA key caching_sha2_password clients encrypt their password with
//! when the transport is not secure.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPrivateKey};
use sha1::Sha1;

/// Size of a lazily generated RSA key, as MySQL's auto-generated keys.
pub const RSA_BITS: usize = 2048;

/// Why an RSA key could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RsaKeyError {
    #[error("cannot read RSA key file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("not an RSA private key in PKCS#8 or PKCS#1 PEM form")]
    Parse,
    #[error("RSA key generation failed: {0}")]
    Generate(String),
    #[error("cannot encode the RSA public key: {0}")]
    Encode(String),
}

/// The RSA key pair for caching_sha2_password's password exchange over
/// insecure transports. Generated on first need (most sidecars listen on a
/// unix socket or loopback TLS and never need one; generating costs tens of
/// milliseconds to seconds) or loaded from a PEM file.
pub struct RsaKey {
    bits: usize,
    pair: OnceLock<Result<KeyPair, RsaKeyError>>,
}

struct KeyPair {
    private: RsaPrivateKey,
    public_pem: String,
}

impl KeyPair {
    fn new(private: RsaPrivateKey) -> Result<Self, RsaKeyError> {
        let public_pem = private
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| RsaKeyError::Encode(e.to_string()))?;
        Ok(Self {
            private,
            public_pem,
        })
    }
}

impl fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.pair.get() {
            None => "not generated yet",
            Some(Ok(_)) => "ready",
            Some(Err(_)) => "failed",
        };
        f.debug_struct("RsaKey")
            .field("bits", &self.bits)
            .field("state", &state)
            .finish()
    }
}

impl Default for RsaKey {
    fn default() -> Self {
        Self::generated()
    }
}

impl RsaKey {
    /// A 2048-bit key generated on first use. Generation blocks; the
    /// sidecar may call [`RsaKey::public_pem`] once on a blocking thread
    /// at start-up to keep it off the connection path.
    pub fn generated() -> Self {
        Self::generated_with_bits(RSA_BITS)
    }

    fn generated_with_bits(bits: usize) -> Self {
        Self {
            bits,
            pair: OnceLock::new(),
        }
    }

    /// A key from PEM text: PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1
    /// (`BEGIN RSA PRIVATE KEY`), as MySQL's `private_key.pem`.
    pub fn from_pem(pem: &str) -> Result<Self, RsaKeyError> {
        let private = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .map_err(|_| RsaKeyError::Parse)?;
        let bits = private.size() * 8;
        let pair = KeyPair::new(private)?;
        Ok(Self {
            bits,
            pair: OnceLock::from(Ok(pair)),
        })
    }

    /// A key from a PEM file, read now so that a bad path fails at start-up.
    pub fn from_pem_file(path: &Path) -> Result<Self, RsaKeyError> {
        let pem = std::fs::read_to_string(path).map_err(|e| RsaKeyError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::from_pem(&pem)
    }

    /// The public key as SPKI PEM (`-----BEGIN PUBLIC KEY-----`), what
    /// clients expect in answer to a public-key request.
    pub fn public_pem(&self) -> Result<&str, RsaKeyError> {
        self.pair().map(|p| p.public_pem.as_str())
    }

    fn pair(&self) -> Result<&KeyPair, RsaKeyError> {
        self.pair
            .get_or_init(|| {
                let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, self.bits)
                    .map_err(|e| RsaKeyError::Generate(e.to_string()))?;
                KeyPair::new(private)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Modulus length in bytes: the length of every ciphertext.
    pub(super) fn ciphertext_len(&self) -> Result<usize, RsaKeyError> {
        self.pair().map(|p| p.private.size())
    }

    /// RSA-OAEP (SHA-1, as MySQL uses) decryption, blinded against timing;
    /// PKCS#1 v1.5 with `legacy_padding` (what clients send to servers
    /// older than MySQL 8.0.5). Either failure is the same "denied" to
    /// the client, so padding errors are no oracle beyond timing.
    pub(super) fn decrypt(
        &self,
        ciphertext: &[u8],
        legacy_padding: bool,
    ) -> Result<Option<Vec<u8>>, RsaKeyError> {
        let pair = self.pair()?;
        if cfg!(fuzzing) {
            return Ok(fuzzing_stand_in_decrypt(ciphertext, legacy_padding));
        }
        let mut rng = rsa::rand_core::OsRng;
        let plain = if legacy_padding {
            pair.private
                .decrypt_blinded(&mut rng, Pkcs1v15Encrypt, ciphertext)
        } else {
            pair.private
                .decrypt_blinded(&mut rng, Oaep::new::<Sha1>(), ciphertext)
        };
        Ok(plain.ok())
    }
}

/// Used under `cargo fuzz` only (`--cfg fuzzing`, never in a real build), as
/// fuzzing builds of TLS libraries do: the private-key operation, with
/// every comparison of its big-integer arithmetic instrumented, took ~1 ms
/// per input and held the `login` target under 1,000 inputs/s, and a
/// fuzzer cannot forge valid padding, so what follows a successful
/// decryption went unfuzzed. Here a "ciphertext" whose first byte is 0
/// (1 for legacy padding) decrypts to the rest, any other is a padding
/// failure. The real decryption is the unit tests' (below).
fn fuzzing_stand_in_decrypt(ciphertext: &[u8], legacy_padding: bool) -> Option<Vec<u8>> {
    match ciphertext.split_first() {
        Some((&padding, plain)) if padding == u8::from(legacy_padding) => Some(plain.to_vec()),
        _ => None,
    }
}

/// One key for all of the auth module's tests: generation is the slow part.
#[cfg(test)]
pub(super) static TEST_KEY: std::sync::LazyLock<std::sync::Arc<RsaKey>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(RsaKey::generated()));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_keys_load_from_pkcs8_and_pkcs1_pem() {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        use rsa::pkcs8::EncodePrivateKey;
        let pair = TEST_KEY.pair().expect("key");
        assert_eq!(pair.private.size(), RSA_BITS / 8);
        let pkcs8 = pair.private.to_pkcs8_pem(LineEnding::LF).expect("pkcs8");
        let pkcs1 = pair.private.to_pkcs1_pem(LineEnding::LF).expect("pkcs1");
        for pem in [pkcs8.as_str(), pkcs1.as_str()] {
            let key = RsaKey::from_pem(pem).expect("loads");
            assert_eq!(key.public_pem(), TEST_KEY.public_pem());
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("private_key.pem");
        std::fs::write(&path, pkcs1.as_bytes()).expect("write");
        let key = RsaKey::from_pem_file(&path).expect("loads");
        let public = key.public_pem().expect("public");
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"));
        // mysql_common's client parses and uses it.
        let c = mysql_common::crypto::encrypt(b"hi\0", public.as_bytes());
        assert_eq!(key.decrypt(&c, false), Ok(Some(b"hi\0".to_vec())));
        assert_eq!(RsaKey::from_pem("nonsense").err(), Some(RsaKeyError::Parse));
        assert!(matches!(
            RsaKey::from_pem_file(&dir.path().join("missing.pem")),
            Err(RsaKeyError::Read { .. })
        ));
    }
}
