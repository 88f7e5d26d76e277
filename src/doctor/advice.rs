//! Failures turned into plain words: what probably happened and which
//! setting to look at. Pure functions of the error text, so every case is
//! unit-tested without a network.

use crate::api::Code;

/// A failed TCP connect to the gateway.
pub fn tcp_connect(error: &str, addr: &str) -> String {
    let e = error.to_ascii_lowercase();
    if e.contains("refused") {
        format!(
            "nothing accepts TCP connections at {addr}: the gateway is down, listens on another \
             port or address (gateway.listen), or a firewall rejects the connection"
        )
    } else if e.contains("timed out") || e.contains("timeout") {
        format!(
            "no answer from {addr} over TCP: a firewall or security group drops the packets, or \
             the address is wrong"
        )
    } else if e.contains("unreachable") {
        format!("no route to {addr}: check the network between here and the gateway")
    } else {
        format!("TCP connect to {addr} failed: {error}")
    }
}

/// A failed TLS handshake (over TCP or inside QUIC).
pub fn tls_handshake(error: &str, server_name: &str, ca: Option<&str>) -> String {
    let e = error.to_ascii_lowercase();
    let trust = match ca {
        Some(ca) => format!("the CA in sidecar.upstream.ca ({ca})"),
        None => "the system's CA certificates (sidecar.upstream.ca is unset)".to_string(),
    };
    if e.contains("unknownissuer") || e.contains("unknown issuer") || e.contains("badsignature") {
        format!(
            "the gateway's certificate is not signed by {trust}: point sidecar.upstream.ca at \
             the CA that issued it"
        )
    } else if e.contains("notvalidforname") || e.contains("not valid for name") {
        format!(
            "the gateway's certificate does not name {server_name:?}: connect by a name it \
             carries, or set sidecar.upstream.server_name to one"
        )
    } else if e.contains("expired") {
        "the gateway's certificate has expired: renew it on the gateway (gateway.tls.cert)"
            .to_string()
    } else if e.contains("notvalidyet") || e.contains("not valid yet") {
        "the gateway's certificate is not valid yet: check the clocks of this host and of the \
         certificate's issuer"
            .to_string()
    } else if e.contains("no application protocol") || e.contains("noapplicationprotocol") {
        "the server does not offer HTTP/2 or HTTP/3 (ALPN): is this port a myquic gateway or \
         another psdb server?"
            .to_string()
    } else if e.contains("peer is incompatible") || e.contains("protocol version") {
        "the server does not speak TLS 1.3, which myquic requires".to_string()
    } else if e.contains("corrupt message") || e.contains("invalidcontenttype") {
        "the server at that port does not speak TLS (a plain MySQL or HTTP port?)".to_string()
    } else {
        format!("TLS handshake failed: {error}")
    }
}

/// No QUIC handshake answer over UDP. With TCP working that is a blocked
/// UDP port; with TCP refused too, the gateway is simply not there.
pub fn quic_no_answer(port: u16, tcp_ok: bool) -> String {
    if tcp_ok {
        format!(
            "UDP port {port} is blocked somewhere between here and the gateway (firewall, \
             security group, or a proxy that passes only TCP). The sidecar falls back to HTTP/2 \
             (transport = \"auto\"), which is slower on lossy links: open UDP {port} for HTTP/3"
        )
    } else {
        "no answer over UDP either: the gateway is not running at this address".to_string()
    }
}

/// The gateway refused the API call.
pub fn api_error(code: Code, message: &str, username: &str) -> String {
    match code {
        Code::Unauthenticated => format!(
            "the gateway rejected the credentials of {username:?}: check \
             sidecar.upstream.username and the password (file, secret or environment) against \
             the gateway's [[gateway.credentials]]"
        ),
        Code::PermissionDenied => {
            format!("{username:?} is not allowed to do this at the gateway: {message}")
        }
        Code::Unavailable | Code::ResourceExhausted => format!(
            "the gateway is up but cannot serve queries now ({message}): check its backend \
             database and its logs"
        ),
        _ => format!("the gateway answered {}: {message}", code.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_failures_name_the_likely_cause() {
        assert!(tcp_connect("Connection refused (os error 111)", "10.0.0.1:8443").contains("down"));
        assert!(tcp_connect("deadline has elapsed: timed out", "h:1").contains("drops"));
        assert!(
            tcp_connect("No route to host", "h:1").contains("no route")
                || tcp_connect("Network is unreachable", "h:1").contains("no route")
        );
    }

    #[test]
    fn tls_failures_point_at_the_setting_to_change() {
        let unknown = "invalid peer certificate: UnknownIssuer";
        assert!(
            tls_handshake(unknown, "gw", Some("/ca.pem")).contains("sidecar.upstream.ca (/ca.pem)")
        );
        assert!(tls_handshake(unknown, "gw", None).contains("system's CA"));
        // Same issuer name, another key: e.g. a regenerated self-signed one.
        let resigned = "invalid peer certificate: BadSignature";
        assert!(tls_handshake(resigned, "gw", None).contains("not signed by"));
        let name = "invalid peer certificate: certificate not valid for name \"gw\"";
        assert!(tls_handshake(name, "gw", None).contains("server_name"));
        assert!(tls_handshake("invalid peer certificate: Expired", "gw", None).contains("expired"));
        assert!(
            tls_handshake("peer is incompatible: Tls13NotOffered", "gw", None).contains("TLS 1.3")
        );
        assert!(
            tls_handshake(
                "received corrupt message of type InvalidContentType",
                "gw",
                None
            )
            .contains("does not speak TLS")
        );
    }

    #[test]
    fn quic_silence_is_a_blocked_port_only_when_tcp_works() {
        assert!(quic_no_answer(8443, true).contains("UDP port 8443 is blocked"));
        assert!(quic_no_answer(8443, false).contains("not running"));
    }

    #[test]
    fn api_errors_say_what_to_check() {
        let a = api_error(Code::Unauthenticated, "bad credentials", "app");
        assert!(a.contains("sidecar.upstream.username"), "{a}");
        assert!(api_error(Code::Unavailable, "backend down", "app").contains("backend"));
    }
}
