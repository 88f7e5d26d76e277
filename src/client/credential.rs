//! The API credential a request carries: HTTP Basic, as a header value
//! built once per credential and marked sensitive (never logged, never
//! compressed into HPACK/QPACK tables).

use std::fmt;

use http::HeaderValue;

/// One API login of the gateway. A [`Client`](super::Client) handle
/// carries one; handles of several credentials share one connection
/// ([`Client::with_credential`](super::Client::with_credential)).
#[derive(Clone)]
pub struct Credential {
    username: String,
    authorization: HeaderValue,
}

impl Credential {
    /// `Authorization: Basic base64(username:password)`.
    pub fn basic(username: &str, password: &str) -> Self {
        use base64::Engine;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        let mut authorization =
            HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is visible ASCII");
        authorization.set_sensitive(true);
        Self {
            username: username.to_string(),
            authorization,
        }
    }

    /// The API user name: what anything learned under this credential is
    /// keyed by (what one account may do, another may not).
    pub fn username(&self) -> &str {
        &self.username
    }

    pub(super) fn authorization(&self) -> &HeaderValue {
        &self.authorization
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the password (the header holds it, barely encoded).
        f.debug_struct("Credential")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_basic_sensitive_and_never_printed() {
        let c = Credential::basic("app", "s3cret");
        assert_eq!(c.authorization(), "Basic YXBwOnMzY3JldA==");
        assert!(c.authorization().is_sensitive());
        assert_eq!(c.username(), "app");
        let printed = format!("{c:?}");
        assert!(
            !printed.contains("s3cret") && !printed.contains("YXBw"),
            "{printed}"
        );
    }
}
