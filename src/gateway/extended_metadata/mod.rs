//! MariaDB's extended column metadata (`MARIADB_CLIENT_EXTENDED_METADATA`:
//! a data type name such as `inet6`, `uuid` or `point`, and `format=json`),
//! read from the backend itself and carried in `Field.extended_metadata`.
//!
//! The gateway's driver cannot ask for it: mysql_async 0.37 offers a
//! fixed set of MariaDB capabilities, and mysql_common's column parser
//! would take the extra string for the fixed fields. So the driver's
//! plaintext connections go through a relay in this process (`relay`),
//! which asks the server for it and hands each column definition on
//! without it, keeping the info per result set; the gateway pairs a
//! result's columns, as the driver read them, with the record of the same
//! columns on the same connection (`infos`). TLS connections cannot be
//! read by the relay; their columns are looked up as before
//! (`json_columns`).
//!
//! The relay also notes how each result ended — the status flags and
//! warning count of the EOF or OK after a set's rows, or of an OK result —
//! which the driver reads but does not show (`QueryResult` has no status
//! flags): the gateway takes them in order as its driver reads each result
//! of a statement ([`ExtendedMetadata::ending`]). Those of a command's
//! answer are kept until the driver sends its next command.
//!
//! It asks for session-state tracking (`CLIENT_SESSION_TRACK`) too: each
//! OK's session-state information is taken out (with its
//! `SERVER_SESSION_STATE_CHANGED`, which the driver did not negotiate)
//! and kept in its ending, for the gateway to carry to the sidecar as
//! the server wrote it, per result.
//!
//! And it gives the rows of the gateway's text results to the gateway
//! itself rather than through its driver ([`RowTap`]), puts a
//! client's parameter types back into the driver's execute of a statement
//! prepared at the backend ([`Retype`]), and gives a connection a
//! session's connection attributes in the driver's `COM_CHANGE_USER`
//! ([`Identify`], `attrs`).

mod answers;
mod attrs;

pub use answers::{Ending, MAX_PAYLOAD};
mod relay;
mod retype;
mod tap;
mod wire;

pub use attrs::Identify;
pub use retype::{ParamType, Retype};
pub use tap::{RowTap, Tapped};
pub use wire::lenenc;

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use mysql_async::Column;
use tracing::{info, warn};

use crate::config::{BackendConfig, BackendTlsMode};

pub use wire::is_json;

use super::backend::split_host_port;

/// The relay and what it learned about each connection.
#[derive(Default)]
pub struct ExtendedMetadata {
    connections: Arc<relay::Connections>,
    relay: Option<relay::Relay>,
}

impl ExtendedMetadata {
    /// Starts the relay, for a backend on a unix socket or a loopback
    /// address that plaintext connections may reach: the driver takes the
    /// relay's socket for a local one, where it may send a password in
    /// clear (`caching_sha2_password`), so a backend across a network is
    /// never relayed.
    pub fn start(config: &BackendConfig) -> Self {
        if !config.relay_extended_metadata {
            return Self::default();
        }
        let backend = match (&config.socket, &config.address) {
            (Some(socket), _) => relay::Backend::Unix(socket.clone()),
            (None, Some(address)) => {
                let (host, port) = split_host_port(address);
                let loopback =
                    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
                if !loopback {
                    return Self::default();
                }
                relay::Backend::Tcp(host, port)
            }
            (None, None) => return Self::default(),
        };
        if config.tls_mode() == BackendTlsMode::Required {
            return Self::default();
        }
        let connections = Arc::new(relay::Connections::default());
        match relay::Relay::start(backend, connections.clone()) {
            Ok(relay) => {
                info!(socket = %relay.socket().display(), "plaintext backend connections relayed for MariaDB's extended column metadata");
                Self {
                    connections,
                    relay: Some(relay),
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot start the backend relay: MariaDB's extended column metadata is looked up instead");
                Self::default()
            }
        }
    }

    /// The socket plaintext pools connect to, if relayed.
    pub fn socket(&self) -> Option<&Path> {
        self.relay.as_ref().map(relay::Relay::socket)
    }

    /// The extended type info of each of `columns`, the result just read
    /// on connection `id`; `None` if that connection is not relayed.
    /// Records of results the gateway did not look at (the driver's own
    /// queries, the gateway's reads of `@@` variables) are passed over; a
    /// result no record matches gets none. A passed-over record could
    /// only be taken for a later result whose column definitions are the
    /// same to the byte; the results the gateway does not look at are its
    /// driver's and its own reads of `@@` variables and status, which
    /// carry no extended info, as the same columns of a client's do not.
    pub fn infos(&self, id: u32, columns: &[Column]) -> Option<Vec<Vec<u8>>> {
        let slot = self.connections.slot(id)?;
        let mut kept = slot.lock().expect("not poisoned");
        while let Some(record) = kept.records.pop_front() {
            if record.columns[..] == *columns {
                return Some(record.infos);
            }
        }
        Some(vec![Vec::new(); columns.len()])
    }

    /// Claims the rows of the text result sets of the statement that
    /// connection `id` is about to send (see `tap`); `None` if that
    /// connection is not relayed. Taken before the statement is sent, so
    /// the relay has it when the first result's rows come.
    pub fn tap(&self, id: u32) -> Option<RowTap> {
        Some(RowTap::claim(&self.connections.slot(id)?))
    }

    /// Whether the relay follows connection `id` (and so can put a
    /// client's parameter types back, [`Self::retype`]).
    pub fn follows(&self, id: u32) -> bool {
        self.connections.slot(id).is_some()
    }

    /// The client's types for the parameters of the driver's next execute
    /// on connection `id` (see `retype`), in place of mysql_async's;
    /// `false` if that connection is not relayed. Set before the execute
    /// is sent, so the relay has it when the execute comes.
    pub fn retype(&self, id: u32, retype: Retype) -> bool {
        let Some(slot) = self.connections.slot(id) else {
            return false;
        };
        slot.lock().expect("not poisoned").retype = Some(retype);
        true
    }

    /// Drops a retype the relay did not take (the execute was not sent).
    pub fn forget_retype(&self, id: u32) {
        if let Some(slot) = self.connections.slot(id) {
            slot.lock().expect("not poisoned").retype = None;
        }
    }

    /// Whether the relay can give connection `id` a session's
    /// attributes: it follows the connection and asked for
    /// `CLIENT_CONNECT_ATTRS` ([`Self::identify`]).
    pub fn can_identify(&self, id: u32) -> bool {
        self.connections
            .slot(id)
            .is_some_and(|slot| slot.lock().expect("not poisoned").connect_attrs)
    }

    /// The attributes the driver's next `COM_CHANGE_USER` on connection
    /// `id` carries (`None`: its own, none); set before it is sent.
    pub fn identify(&self, id: u32, identify: Option<Identify>) {
        if let Some(slot) = self.connections.slot(id) {
            slot.lock().expect("not poisoned").identify = identify;
        }
    }

    /// Whether the endings of connection `id` carry the server's
    /// session-state information (the relay follows it and asked for
    /// `CLIENT_SESSION_TRACK`): then nothing need be rebuilt for it.
    pub fn tracks_session(&self, id: u32) -> bool {
        self.connections
            .slot(id)
            .is_some_and(|slot| slot.lock().expect("not poisoned").session_track)
    }

    /// How the next result of the statement on connection `id` ended,
    /// once the driver has read that result to its end (the results of
    /// the command being answered, in order); `None` if the connection is
    /// not relayed, or for the results after more than the relay keeps
    /// (those it kept are the answer's first ones).
    pub fn ending(&self, id: u32) -> Option<Ending> {
        let slot = self.connections.slot(id)?;
        let mut kept = slot.lock().expect("not poisoned");
        kept.endings.pop_front()
    }
}

#[cfg(test)]
impl ExtendedMetadata {
    /// Records for connection `id`, as the relay would keep them.
    fn with_records(id: u32, records: Vec<answers::Record>) -> Self {
        let connections = Arc::new(relay::Connections::default());
        connections
            .register(id)
            .lock()
            .unwrap()
            .records
            .extend(records);
        Self {
            connections,
            relay: None,
        }
    }
}

#[cfg(test)]
mod tests;
