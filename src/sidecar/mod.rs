//! The sidecar role: a local MySQL server whose every client connection is
//! a psdb session, and every command a request over one long-lived HTTP/3
//! connection to a gateway.

pub mod config;
pub mod io;
pub mod registry;
