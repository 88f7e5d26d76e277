//! Who may stop the process through `POST /quitquitquit`. Probes and
//! metrics stay open, but a stop is a write: on a loopback listener only
//! local processes can reach it, anywhere else it takes a token.

use http::{HeaderMap, StatusCode, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AdminConfig;

/// The rule for `/quitquitquit` on one admin listener.
pub enum QuitGuard {
    /// Loopback without a token: anyone on this host (as before tokens).
    Local,
    /// `Authorization: Bearer <token>` required; the token's digest, so
    /// that comparing costs the same whatever a guess's length.
    Token([u8; 32]),
    /// Reachable from other hosts and no token configured: refused.
    Disabled,
}

/// Whether a stop request may go ahead, and if not, the answer.
pub enum Verdict {
    Allowed,
    Refused(StatusCode, &'static str),
}

impl QuitGuard {
    /// The guard `config` asks for, reading its token.
    pub fn from_config(config: &AdminConfig) -> std::io::Result<Self> {
        let Some(secret) = &config.quit_token else {
            return Ok(if config.listen.ip().is_loopback() {
                Self::Local
            } else {
                Self::Disabled
            });
        };
        let token = secret
            .resolve("admin.quit_token")
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        if token.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "admin.quit_token: the token is empty",
            ));
        }
        Ok(Self::Token(Sha256::digest(token.as_bytes()).into()))
    }

    pub fn check(&self, headers: &HeaderMap) -> Verdict {
        match self {
            Self::Local => Verdict::Allowed,
            Self::Disabled => Verdict::Refused(
                StatusCode::FORBIDDEN,
                "/quitquitquit is disabled on a non-loopback admin listener without \
                 admin.quit_token; stop the process with SIGTERM\n",
            ),
            Self::Token(expected) => {
                let presented = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .unwrap_or("");
                let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
                if bool::from(digest.ct_eq(expected)) {
                    Verdict::Allowed
                } else {
                    Verdict::Refused(
                        StatusCode::UNAUTHORIZED,
                        "/quitquitquit needs Authorization: Bearer <admin.quit_token>\n",
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn guard(listen: &str, token: Option<&str>) -> QuitGuard {
        let config = AdminConfig {
            listen: listen.parse().unwrap(),
            quit_token: token.map(|t| Secret {
                value: Some(t.into()),
                ..Default::default()
            }),
            ..AdminConfig::default()
        };
        QuitGuard::from_config(&config).unwrap()
    }

    fn status(guard: &QuitGuard, authorization: Option<&str>) -> u16 {
        let mut headers = HeaderMap::new();
        if let Some(a) = authorization {
            headers.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        match guard.check(&headers) {
            Verdict::Allowed => 200,
            Verdict::Refused(status, _) => status.as_u16(),
        }
    }

    #[test]
    fn loopback_is_open_elsewhere_a_token_is_needed() {
        assert_eq!(status(&guard("127.0.0.1:9901", None), None), 200);
        assert_eq!(status(&guard("[::1]:9901", None), None), 200);
        assert_eq!(status(&guard("0.0.0.0:9901", None), None), 403);
        assert_eq!(status(&guard("0.0.0.0:9901", None), Some("Bearer x")), 403);
        let token = guard("0.0.0.0:9901", Some("s3cret"));
        assert_eq!(status(&token, Some("Bearer s3cret")), 200);
        assert_eq!(status(&token, Some("Bearer s3cre")), 401);
        assert_eq!(status(&token, Some("s3cret")), 401);
        assert_eq!(status(&token, None), 401);
        // A configured token is required on loopback too.
        assert_eq!(status(&guard("127.0.0.1:9901", Some("t")), None), 401);
    }

    #[test]
    fn an_empty_token_is_refused_at_start() {
        let config = AdminConfig {
            quit_token: Some(Secret {
                value: Some(String::new()),
                ..Default::default()
            }),
            ..AdminConfig::default()
        };
        assert!(QuitGuard::from_config(&config).is_err());
    }
}
