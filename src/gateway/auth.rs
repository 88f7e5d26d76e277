//! HTTP Basic authentication against the configured credentials.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::{ApiError, Code};

use super::backend_tls::Pools;

/// An authenticated API user and what it may reach.
pub struct Account {
    pub username: String,
    password_digest: [u8; 32],
    /// Its backend connections.
    pub pools: Pools,
    pub database: Option<String>,
}

impl Account {
    pub fn new(username: String, password: &str, pools: Pools, database: Option<String>) -> Self {
        Self {
            username,
            password_digest: Sha256::digest(password.as_bytes()).into(),
            pools,
            database,
        }
    }

    /// The pool a session's connections come from.
    pub fn pool_for(&self, client_found_rows: bool) -> &mysql_async::Pool {
        self.pools.pool_for(client_found_rows)
    }

    /// The pool of the API's default connections (`CLIENT_FOUND_ROWS`),
    /// for the gateway's own queries.
    pub fn pool(&self) -> &mysql_async::Pool {
        self.pools.pool_for(true)
    }
}

/// All accounts, by user name, in the configuration's order.
pub struct Accounts {
    by_name: HashMap<String, Arc<Account>>,
    /// The first is the gateway's own: its health check and what it
    /// learns of the backend go through it. The others' backend accounts
    /// may not exist yet (created later through the first), so nothing
    /// at start depends on them.
    ordered: Vec<Arc<Account>>,
}

impl Accounts {
    pub fn new(accounts: impl IntoIterator<Item = Account>) -> Self {
        let ordered: Vec<Arc<Account>> = accounts.into_iter().map(Arc::new).collect();
        Self {
            by_name: ordered
                .iter()
                .map(|a| (a.username.clone(), a.clone()))
                .collect(),
            ordered,
        }
    }

    /// Every account, the first configured first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Account>> {
        self.ordered.iter()
    }

    /// Checks an `Authorization` header. Every failure looks the same to
    /// the caller, and passwords are compared in constant time (as
    /// digests, so their lengths leak nothing either).
    pub fn authenticate(&self, header: Option<&str>) -> Result<Arc<Account>, ApiError> {
        let denied = || ApiError::new(Code::Unauthenticated, "invalid auth credentials");
        let encoded = header
            .and_then(|h| {
                h.strip_prefix("Basic ")
                    .or_else(|| h.strip_prefix("basic "))
            })
            .ok_or_else(denied)?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| denied())?;
        // Credentials are configured as UTF-8: other bytes match none.
        let decoded = String::from_utf8(decoded).map_err(|_| denied())?;
        let (user, password) = decoded.split_once(':').ok_or_else(denied)?;
        // database-js sends URL userinfo still percent-encoded, so a
        // credential also matches in its percent-decoded form.
        let exact = self.check(user, password);
        let decoded = || self.check(&percent_decode(user), &percent_decode(password));
        exact.or_else(decoded).ok_or_else(denied)
    }

    fn check(&self, user: &str, password: &str) -> Option<Arc<Account>> {
        let account = self.by_name.get(user)?;
        let digest: [u8; 32] = Sha256::digest(password.as_bytes()).into();
        bool::from(account.password_digest.ct_eq(&digest)).then(|| account.clone())
    }
}

/// Decodes `%XX` escapes; anything malformed is kept literally.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    // Escapes of bytes that are not UTF-8 match no configured credential:
    // the text stays as sent.
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("p%40ss%3A1"), "p@ss:1");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
