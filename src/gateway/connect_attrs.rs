//! A session's backend connection carries its client's connection
//! attributes (`_client_name`, `_pid`, `program_name`, …), so the
//! backend's `performance_schema.session_connect_attrs` shows who holds
//! it, as for a direct connection (issue 12).
//!
//! The sidecar sends the client's attribute block, as the client sent it,
//! in the request that creates the session (`ExecuteOptions.connect_attrs`).
//! Pooled connections are opened by the driver before any session wants
//! them, so a connection gets a session's attributes when the session
//! takes it: `COM_CHANGE_USER` carries attributes, and MariaDB replaces the
//! connection's with them (an empty block clears them). mysql_async can
//! only send one fixed map per pool, so the relay (`extended_metadata`)
//! writes the session's block into the driver's `COM_CHANGE_USER`; a
//! connection the relay does not follow keeps none. Which attributes each
//! connection carries is remembered here by thread id, so a session whose
//! client's attributes are those the connection already carries (the same
//! client process opening session after session) takes it as it is.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::api::pb::vitess::query::v22::ExecuteOptions;
use crate::api::{ApiError, Code};

/// The longest attribute block MariaDB takes (`read_client_connect_attrs`:
/// 64 KiB); a longer one refuses the login.
pub const MAX_CONNECT_ATTRS: usize = 65535;

/// How many connections' attributes are remembered; beyond it the oldest
/// (lowest thread ids: most likely closed) are forgotten, and such a
/// connection is re-identified when a session with attributes takes it.
const MAX_REMEMBERED: usize = 10_000;

/// A client's connection attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectAttrs {
    /// Length-encoded keys and values, as the client sent them.
    pub block: Bytes,
    /// The collation the client's handshake named: MariaDB reads the
    /// values in it (latin1 bytes read as utf8mb4 would show as `?`).
    pub collation: u16,
}

impl ConnectAttrs {
    /// The attributes a session-creating request asks for (`None`: the
    /// client sent none, or an empty block, which MariaDB shows as none).
    pub fn of(options: &ExecuteOptions) -> Result<Option<Self>, ApiError> {
        if options.connect_attrs.len() > MAX_CONNECT_ATTRS {
            return Err(ApiError::new(
                Code::InvalidArgument,
                "connect_attrs: longer than the 65535 bytes MariaDB takes",
            ));
        }
        if options.connect_attrs.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            block: options.connect_attrs.clone(),
            // A collation id is 16 bits in COM_CHANGE_USER; 0 (unset):
            // the driver's utf8mb4_general_ci.
            collation: u16::try_from(options.connect_attrs_collation)
                .ok()
                .filter(|&c| c != 0)
                .unwrap_or(UTF8MB4_GENERAL_CI),
        }))
    }

    fn digest(&self) -> Digest32 {
        let mut hash = Sha256::new();
        hash.update(self.collation.to_le_bytes());
        hash.update(&self.block);
        hash.finalize().into()
    }
}

const UTF8MB4_GENERAL_CI: u16 = 45;

type Digest32 = [u8; 32];

/// Which attributes each pooled connection carries (absent: none, as the
/// driver opens it).
#[derive(Default)]
pub struct Carried(Mutex<BTreeMap<u32, Digest32>>);

impl Carried {
    /// Whether connection `id` carries `wanted` (`None`: no attributes).
    pub fn matches(&self, id: u32, wanted: Option<&ConnectAttrs>) -> bool {
        let carried = self.0.lock().expect("not poisoned").get(&id).copied();
        carried == wanted.map(ConnectAttrs::digest)
    }

    /// Connection `id` now carries `attrs`.
    pub fn set(&self, id: u32, attrs: Option<&ConnectAttrs>) {
        let mut carried = self.0.lock().expect("not poisoned");
        match attrs {
            None => {
                carried.remove(&id);
            }
            Some(attrs) => {
                carried.insert(id, attrs.digest());
                while carried.len() > MAX_REMEMBERED {
                    carried.pop_first();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(block: &'static [u8], collation: u16) -> ConnectAttrs {
        ConnectAttrs {
            block: Bytes::from_static(block),
            collation,
        }
    }

    #[test]
    fn a_connection_matches_the_attributes_it_carries_only() {
        let carried = Carried::default();
        let a = attrs(b"\x01a\x011", 45);
        assert!(carried.matches(7, None), "a new connection carries none");
        assert!(!carried.matches(7, Some(&a)));
        carried.set(7, Some(&a));
        assert!(carried.matches(7, Some(&a)));
        assert!(!carried.matches(7, None));
        assert!(!carried.matches(7, Some(&attrs(b"\x01a\x012", 45))));
        // The same bytes read in another collation are other values.
        assert!(!carried.matches(7, Some(&attrs(b"\x01a\x011", 8))));
        carried.set(7, None);
        assert!(carried.matches(7, None));
    }

    #[test]
    fn requests_name_attributes_within_the_servers_limit() {
        let mut options = ExecuteOptions::default();
        assert_eq!(ConnectAttrs::of(&options).ok(), Some(None));
        options.connect_attrs = Bytes::from_static(b"\x01k\x01v");
        let a = ConnectAttrs::of(&options).ok().flatten().unwrap();
        assert_eq!(a.collation, UTF8MB4_GENERAL_CI);
        options.connect_attrs_collation = 70_000;
        assert_eq!(
            ConnectAttrs::of(&options).ok().flatten().unwrap().collation,
            UTF8MB4_GENERAL_CI
        );
        options.connect_attrs = vec![0; MAX_CONNECT_ATTRS + 1].into();
        assert!(ConnectAttrs::of(&options).is_err());
    }
}
