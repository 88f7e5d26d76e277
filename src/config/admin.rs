//! `[sidecar.admin]` / `[gateway.admin]`: the admin endpoint both roles
//! serve (see [`crate::admin`]).

use std::net::SocketAddr;

use serde::Deserialize;

use super::{Env, Secret};

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Serve the admin endpoint at all.
    pub enabled: bool,
    /// Where. Loopback by default: in Kubernetes, HTTP probes come from
    /// the kubelet to the pod's IP, so set `0.0.0.0:PORT` there.
    pub listen: SocketAddr,
    /// The bearer token `POST /quitquitquit` must carry. Unset: allowed
    /// from anyone on a loopback listener, refused (403) on any other.
    pub quit_token: Option<Secret>,
}

impl AdminConfig {
    pub fn with_port(port: u16) -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            quit_token: None,
        }
    }

    pub(super) fn bind_secrets(&mut self, env: &Env) {
        if let Some(token) = &mut self.quit_token {
            token.bind(env);
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self::with_port(9901)
    }
}
