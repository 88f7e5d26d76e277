//! myquic: MySQL over HTTP/3.
//!
//! One binary, two roles:
//! - [`gateway`]: PlanetScale's `psdb.v1alpha1.Database` HTTP API (Connect
//!   protocol) served over HTTP/3 and HTTP/2 in front of a MySQL/MariaDB
//!   backend.
//! - [`sidecar`]: a local MySQL server for unmodified clients that carries
//!   every client's commands over one long-lived QUIC connection (HTTP/2
//!   when UDP is blocked) to a gateway.
//!
//! Layout: [`api`] is the psdb/Connect protocol (pure), [`mysql`] the MySQL
//! server protocol (pure), [`translate`] the MySQL ⇄ psdb mapping (pure),
//! [`transport`] the QUIC/HTTP/TLS edges, [`config`] every setting and
//! the one loader of them, [`client`] the psdb client, and [`gateway`] and
//! [`sidecar`] the two roles that wire them together.

pub mod admin;
pub mod api;
pub mod client;
pub mod config;
pub mod doctor;
pub mod gateway;
pub mod mysql;
pub mod query;
pub mod sidecar;
pub mod telemetry;
pub mod translate;
pub mod transport;

/// What the fuzz targets (`tests/fuzz/`) need beyond the public API. Built
/// only under `cargo fuzz`, which sets `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::gateway::sessions::{Refusal, Sessions};
}
