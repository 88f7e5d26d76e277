//! What the sidecar has learned about each gateway credential's backend
//! account, so that a login it can vouch for costs no request: that the
//! account logs in (a request under the credential was answered without
//! the backend's 1045), and which login databases the gateway selected
//! for it. A login it cannot vouch for is checked with the gateway before
//! its OK, so the client gets the backend's 1045 (or 1049/1044) at
//! connect, as directly.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Most login databases remembered, over all credentials.
const DATABASES_MAX: usize = 1024;

/// Keyed by the API user name (what one credential may do, another may
/// not). A credential is present once its backend account is known to
/// log in; its set holds the databases selected for it. Credentials come
/// only from the configuration, so their number is bounded by it.
#[derive(Default)]
pub struct KnownLogins {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    logins: HashMap<String, HashSet<String>>,
    /// Databases in all the sets.
    databases: usize,
}

impl KnownLogins {
    /// Whether a login under `credential` (into `database`, if it names
    /// one) is known to succeed.
    pub fn knows(&self, credential: &str, database: Option<&str>) -> bool {
        let inner = self.inner.lock().expect("not poisoned");
        match (inner.logins.get(credential), database) {
            (Some(databases), Some(db)) => databases.contains(db),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// A request under `credential` (in `database`) was answered: its
    /// backend account logs in (and may use the database).
    pub fn learned(&self, credential: &str, database: Option<&str>) {
        let mut inner = self.inner.lock().expect("not poisoned");
        let full = inner.databases >= DATABASES_MAX;
        let databases = inner.logins.entry(credential.to_string()).or_default();
        if let Some(db) = database
            && !full
            && databases.insert(db.to_string())
        {
            inner.databases += 1;
        }
    }

    /// A database remembered for `credential` is gone (or no longer
    /// allowed to it): the next login naming it is checked again.
    pub fn forget_database(&self, credential: &str, database: &str) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if let Some(databases) = inner.logins.get_mut(credential)
            && databases.remove(database)
        {
            inner.databases -= 1;
        }
    }

    /// The backend refused `credential`'s account (1045: dropped, or its
    /// password changed): every login under it is checked again, and
    /// with it every database (an account created anew has new grants).
    pub fn forget(&self, credential: &str) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if let Some(databases) = inner.logins.remove(credential) {
            inner.databases -= databases.len();
        }
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        self.inner.lock().expect("not poisoned").databases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_known_once_answered_and_forgotten_on_a_refusal() {
        let known = KnownLogins::default();
        assert!(!known.knows("api", None));
        known.learned("api", Some("app"));
        assert!(known.knows("api", None), "a database's check logs in too");
        assert!(known.knows("api", Some("app")));
        assert!(!known.knows("api", Some("other")));
        assert!(!known.knows("other-api", Some("app")), "per credential");
        known.forget_database("api", "app");
        assert!(known.knows("api", None));
        assert!(!known.knows("api", Some("app")));
        known.learned("api", Some("app"));
        known.forget("api");
        assert!(!known.knows("api", None));
        known.learned("api", None);
        assert!(
            !known.knows("api", Some("app")),
            "its databases went with it"
        );
        assert_eq!(known.count(), 0);
    }

    #[test]
    fn databases_are_bounded() {
        let known = KnownLogins::default();
        for i in 0..DATABASES_MAX + 10 {
            known.learned("api", Some(&format!("db{i}")));
        }
        assert_eq!(known.count(), DATABASES_MAX);
        assert!(known.knows("api", None));
        assert!(!known.knows("api", Some(&format!("db{DATABASES_MAX}"))));
    }
}
