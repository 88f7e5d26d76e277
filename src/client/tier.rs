//! The gateways a client may use: every address of every configured
//! gateway name, and which one the connection is on.
//!
//! One connection stays the model: the tier only decides where the next
//! one goes. The first goes to the first address. After the gateway in
//! use failed or drained (GOAWAY), the others come first, from a random
//! one on, so that the sidecars that all lose the same gateway spread over
//! the rest rather than pile onto the one listed next; the gateway that
//! was left comes last, in case it was the only one.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::timeout;

pub(super) struct Tier {
    /// `host:port` of each gateway (a name may resolve to several).
    members: Vec<String>,
    /// The address the current (or last) connection went to.
    current: Mutex<Option<SocketAddr>>,
}

impl Tier {
    pub(super) fn new(members: Vec<String>) -> Self {
        Self {
            members,
            current: Mutex::new(None),
        }
    }

    /// The address in use, if a connection has been made.
    pub(super) fn current(&self) -> Option<SocketAddr> {
        *self.current.lock().expect("not poisoned")
    }

    /// Records where the connection now is.
    pub(super) fn settled_on(&self, addr: SocketAddr) {
        *self.current.lock().expect("not poisoned") = Some(addr);
    }

    /// Every address, resolved afresh (so gateways that come and go behind
    /// a name are followed), in the order to try them: with `stay`, the
    /// current one first (it is being probed or raced, not left); else
    /// the others, from a random one on, then it.
    pub(super) async fn addresses(
        &self,
        limit: Duration,
        stay: bool,
    ) -> Result<Vec<SocketAddr>, String> {
        let mut all = Vec::new();
        let mut errors = Vec::new();
        for member in &self.members {
            match timeout(limit, tokio::net::lookup_host(member.as_str())).await {
                Ok(Ok(addrs)) => {
                    for addr in addrs {
                        if !all.contains(&addr) {
                            all.push(addr);
                        }
                    }
                }
                Ok(Err(e)) => errors.push(format!("resolving {member}: {e}")),
                Err(_) => errors.push(format!("resolving {member}: timed out")),
            }
        }
        if all.is_empty() {
            return Err(if errors.is_empty() {
                format!("{} has no address", self.members.join(", "))
            } else {
                errors.join("; ")
            });
        }
        let others = all.len().saturating_sub(1).max(1);
        Ok(order(
            all,
            self.current(),
            stay,
            rand::random_range(0..others),
        ))
    }
}

/// The addresses in the order to try them; `spread` (below the number of
/// other addresses) picks which other gateway comes first.
fn order(
    mut all: Vec<SocketAddr>,
    current: Option<SocketAddr>,
    stay: bool,
    spread: usize,
) -> Vec<SocketAddr> {
    let Some(at) = current.and_then(|c| all.iter().position(|a| *a == c)) else {
        return all;
    };
    let current = all.remove(at);
    if stay {
        all.insert(0, current);
        return all;
    }
    let len = all.len();
    if len > 0 {
        all.rotate_left(spread % len);
    }
    all.push(current);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(ports: &[u16]) -> Vec<SocketAddr> {
        ports
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect()
    }

    #[test]
    fn a_lost_gateway_is_tried_last_and_the_others_spread() {
        let all = addrs(&[1, 2, 3]);
        assert_eq!(order(all.clone(), None, false, 1), addrs(&[1, 2, 3]));
        assert_eq!(
            order(all.clone(), Some(all[0]), false, 0),
            addrs(&[2, 3, 1])
        );
        assert_eq!(
            order(all.clone(), Some(all[0]), false, 1),
            addrs(&[3, 2, 1])
        );
        assert_eq!(
            order(all.clone(), Some(all[1]), false, 0),
            addrs(&[1, 3, 2])
        );
        // Probing or racing the current one: it stays first.
        assert_eq!(order(all.clone(), Some(all[1]), true, 1), addrs(&[2, 1, 3]));
        // Alone in the tier, it is all there is.
        assert_eq!(order(addrs(&[1]), Some(all[0]), false, 0), addrs(&[1]));
        // A gateway that left the name's addresses is simply not tried.
        let gone = SocketAddr::from(([127, 0, 0, 1], 9));
        assert_eq!(order(all, Some(gone), false, 1), addrs(&[1, 2, 3]));
    }

    #[tokio::test]
    async fn every_member_and_every_address_counts_once() {
        let tier = Tier::new(vec![
            "127.0.0.1:1".into(),
            "127.0.0.1:2".into(),
            "127.0.0.1:1".into(),
        ]);
        let found = tier.addresses(Duration::from_secs(5), false).await.unwrap();
        assert_eq!(found, addrs(&[1, 2]));
        tier.settled_on(found[0]);
        let next = tier.addresses(Duration::from_secs(5), false).await.unwrap();
        assert_eq!(next, addrs(&[2, 1]), "the one left comes last");
    }
}
