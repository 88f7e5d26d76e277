//! Local accounts with a gateway credential of their own
//! (`upstream_username` in `[[sidecar.auth.users]]`): each authenticates
//! and runs a `SELECT 1` under its credential, as its sessions will. A
//! wrong password there would otherwise show only when that account's
//! client runs its first statement.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::timeout;

use super::{Report, Verdict};
use crate::client::{CallError, Client, ClientConfig, TransportPreference};
use crate::config::SidecarConfig;
use crate::transport::HttpVersion;

pub async fn check(
    report: &mut Report,
    config: &SidecarConfig,
    client: &ClientConfig,
    version: HttpVersion,
    step_timeout: Duration,
) {
    let own: Vec<_> = (config.auth.users.iter())
        .filter_map(|u| {
            Some((
                u,
                u.upstream_username.as_ref()?,
                u.upstream_password.as_ref()?,
            ))
        })
        .collect();
    if own.is_empty() {
        return;
    }
    let mut failures = Vec::new();
    for (user, api_user, secret) in &own {
        let outcome = match secret.resolve("sidecar.auth.users.upstream_password") {
            Ok(password) => {
                let mut config = client.clone();
                config.username = api_user.to_string();
                config.password = password;
                config.connect_timeout = step_timeout;
                config.transport = match version {
                    HttpVersion::Http3 => TransportPreference::Http3,
                    _ => TransportPreference::Http2,
                };
                select_one(config, step_timeout).await
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(why) = outcome {
            failures.push(format!("{:?} (as {api_user:?}): {why}", user.username));
        }
    }
    if failures.is_empty() {
        let names: Vec<String> = own
            .iter()
            .map(|(u, _, _)| format!("{:?}", u.username))
            .collect();
        report.push(
            "accounts",
            Verdict::Pass,
            format!(
                "own gateway credentials authenticated: {}",
                names.join(", ")
            ),
        );
    } else {
        report.push_with_advice(
            "accounts",
            Verdict::Fail,
            failures.join("; "),
            "check the upstream_username and upstream_password of these [[sidecar.auth.users]] against the gateway's [[gateway.credentials]] (and their backend accounts)",
        );
    }
}

/// `SELECT 1` under `config`'s credential; the session it made is closed.
async fn select_one(config: ClientConfig, step_timeout: Duration) -> Result<(), String> {
    let client = Client::new(config).map_err(|e| e.to_string())?;
    let reply = match timeout(
        step_timeout,
        client.execute(None, "SELECT 1", HashMap::new()),
    )
    .await
    {
        Ok(Ok(reply)) => reply,
        Ok(Err(CallError::Api(e))) => return Err(format!("{}: {}", e.code.as_str(), e.message)),
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer to SELECT 1 within {step_timeout:?}")),
    };
    if let Some(session) = &reply.session {
        let _ = timeout(step_timeout, client.close_session(session)).await;
    }
    match reply.message.error {
        // A report for a person: U+FFFD for bytes that are not UTF-8.
        Some(e) => Err(format!(
            "authenticated, but SELECT 1 failed: {}",
            String::from_utf8_lossy(&e.message)
        )),
        None => Ok(()),
    }
}
