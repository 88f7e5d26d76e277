//! The caching_sha2_password credential cache.

use std::collections::HashMap;
use std::sync::Mutex;

use subtle::ConstantTimeEq;

use super::scramble::double_sha256;

/// MySQL's in-memory caching_sha2_password cache: a user that once proved
/// its password in full (over a secure channel or RSA) may afterwards log
/// in with the cheap scramble alone. Entries remember a digest of the
/// password they were proven with, so a changed password in the user list
/// needs a full authentication again.
#[derive(Debug, Default)]
pub struct AuthCache {
    entries: Mutex<HashMap<String, [u8; 32]>>,
}

impl AuthCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets one user (e.g. after its password changed).
    pub fn remove(&self, user: &str) {
        self.lock().remove(user);
    }

    /// Forgets everyone, like `FLUSH PRIVILEGES`.
    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(super) fn is_cached(&self, user: &str, password: &str) -> bool {
        let digest = double_sha256(password.as_bytes());
        self.lock()
            .get(user)
            .is_some_and(|cached| bool::from(cached.ct_eq(&digest)))
    }

    pub(super) fn insert(&self, user: &str, password: &str) {
        let digest = double_sha256(password.as_bytes());
        self.lock().insert(user.to_string(), digest);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, [u8; 32]>> {
        // A panic elsewhere cannot leave a HashMap of digests inconsistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
