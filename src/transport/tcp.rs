//! TCP's congestion controller, chosen per socket (`TCP_CONGESTION`)
//! rather than left to the host's default, so that the HTTP/2 fallback can
//! run the same controller as QUIC (and a benchmark compares transports,
//! not controllers). Unset, sockets keep the host's default.

use std::fmt;
use std::os::fd::AsFd;
use std::str::FromStr;

/// Longest controller name the kernel accepts (`TCP_CA_NAME_MAX` − 1).
const MAX_NAME: usize = 15;

/// A controller's name as the kernel knows it (`bbr`, `cubic`, `reno`,
/// …; see `/proc/sys/net/ipv4/tcp_available_congestion_control`). Copy,
/// so it travels in plain option structs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TcpCongestion {
    name: [u8; MAX_NAME],
    len: u8,
}

impl TcpCongestion {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.name[..usize::from(self.len)]).expect("checked at parse")
    }

    /// Sets the controller of `socket`. On a listener, accepted
    /// connections inherit it.
    pub fn apply(&self, socket: &impl AsFd) -> std::io::Result<()> {
        socket2::SockRef::from(socket).set_tcp_congestion(self.as_str().as_bytes())
    }

    /// Whether this host has the controller and lets this process use it
    /// (tried on a throwaway socket), so a bad name fails at start rather
    /// than at the first fallback to HTTP/2.
    pub fn check(&self) -> Result<(), String> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(|e| e.to_string())?;
        self.apply(&socket).map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    " (not available: see /proc/sys/net/ipv4/tcp_available_congestion_control)"
                }
                std::io::ErrorKind::PermissionDenied => {
                    " (not in net.ipv4.tcp_allowed_congestion_control, and not root)"
                }
                _ => "",
            };
            format!("TCP congestion controller {:?}: {e}{hint}", self.as_str())
        })
    }
}

impl FromStr for TcpCongestion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= MAX_NAME
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(format!(
                "{s:?} is not a TCP congestion controller name (like bbr, cubic or reno)"
            ));
        }
        let mut name = [0; MAX_NAME];
        name[..s.len()].copy_from_slice(s.as_bytes());
        Ok(Self {
            name,
            len: s.len() as u8,
        })
    }
}

impl fmt::Display for TcpCongestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for TcpCongestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for TcpCongestion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!("bbr".parse::<TcpCongestion>().unwrap().as_str(), "bbr");
        for bad in ["", "BBR", "cubic; rm", "a_name_far_too_long"] {
            assert!(bad.parse::<TcpCongestion>().is_err(), "{bad:?}");
        }
    }

    /// A connection accepted on a listener with a controller runs that
    /// controller, whatever the host's default: the gateway sets it on its
    /// listener only. Reno is built into every kernel; as root (as tests
    /// run in CI) it may be set whatever the allowed list says.
    #[test]
    fn accepted_connections_inherit_the_listeners_controller() {
        let reno: TcpCongestion = "reno".parse().unwrap();
        if reno.check().is_err() {
            eprintln!("SKIPPED: this process may not select reno (not root?)");
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let before = socket2::SockRef::from(&listener).tcp_congestion().unwrap();
        reno.apply(&listener).unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let name = |s: &std::net::TcpStream| {
            let raw = socket2::SockRef::from(s).tcp_congestion().unwrap();
            String::from_utf8_lossy(&raw)
                .trim_end_matches('\0')
                .to_string()
        };
        assert_eq!(name(&accepted), "reno");
        let default = String::from_utf8_lossy(&before)
            .trim_end_matches('\0')
            .to_string();
        assert_eq!(name(&client), default, "the client socket was not touched");
    }
}
