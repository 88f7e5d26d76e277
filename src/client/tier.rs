//! The gateways a client may use: every address of every configured
//! gateway name, and which one the connection is on.
//!
//! One connection stays the model: the tier only decides where the next
//! one goes. After the gateway in use failed or drained (GOAWAY), the
//! others come first, starting after it, so that sidecars that lose the
//! same gateway do not all pile onto the one listed next; the gateway that
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
    /// the ones after it, then the rest, then it.
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
        Ok(order(all, self.current(), stay))
    }
}

fn order(mut all: Vec<SocketAddr>, current: Option<SocketAddr>, stay: bool) -> Vec<SocketAddr> {
    let Some(at) = current.and_then(|c| all.iter().position(|a| *a == c)) else {
        return all;
    };
    if stay {
        all.rotate_left(at);
    } else {
        all.rotate_left(at + 1);
    }
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
    fn a_lost_gateway_is_tried_last_and_the_next_one_first() {
        let all = addrs(&[1, 2, 3]);
        assert_eq!(order(all.clone(), None, false), addrs(&[1, 2, 3]));
        assert_eq!(order(all.clone(), Some(all[0]), false), addrs(&[2, 3, 1]));
        assert_eq!(order(all.clone(), Some(all[1]), false), addrs(&[3, 1, 2]));
        assert_eq!(order(all.clone(), Some(all[1]), true), addrs(&[2, 3, 1]));
        // A gateway that left the name's addresses is simply not tried.
        let gone = SocketAddr::from(([127, 0, 0, 1], 9));
        assert_eq!(order(all, Some(gone), false), addrs(&[1, 2, 3]));
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
        assert_eq!(next, addrs(&[2, 1]));
    }
}
