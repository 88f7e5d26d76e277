//! The gateway's metric series that every request records, each found in
//! its family once and kept ([`Child`]): a family's lookup takes a lock
//! shared by every request of every connection, three to five times per
//! request.

use std::time::Duration;

use crate::admin::metrics::{Child, Counter, Histogram, metrics};
use crate::api::Method;
use crate::transport::HttpVersion;

const METHODS: usize = Method::ALL.len();
const VERSIONS: usize = 3;

struct Series {
    sent: Child<Counter>,
    received: Child<Counter>,
    ok: [[Child<Counter>; VERSIONS]; METHODS],
    duration: [[Child<Histogram>; VERSIONS]; METHODS],
}

static SERIES: Series = Series {
    sent: Child::new(),
    received: Child::new(),
    ok: [const { [const { Child::new() }; VERSIONS] }; METHODS],
    duration: [const { [const { Child::new() }; VERSIONS] }; METHODS],
};

fn version_index(version: HttpVersion) -> usize {
    match version {
        HttpVersion::Http3 => 0,
        HttpVersion::Http2 => 1,
        HttpVersion::Http1 => 2,
    }
}

/// `myquic_gateway_message_bytes_total{direction="sent"}`.
pub fn bytes_sent() -> &'static Counter {
    SERIES.sent.of(&metrics().gateway.bytes, &["sent"])
}

/// `myquic_gateway_message_bytes_total{direction="received"}`.
pub fn bytes_received() -> &'static Counter {
    SERIES.received.of(&metrics().gateway.bytes, &["received"])
}

/// Counts a request answered with `outcome` (`ok` or a Connect code).
pub fn count_request(method: Option<Method>, version: HttpVersion, outcome: &str) {
    let requests = &metrics().gateway.requests;
    let transport = version.as_str();
    match method {
        Some(m) if outcome == "ok" => SERIES.ok[m as usize][version_index(version)]
            .of(requests, &[m.name(), transport, "ok"])
            .inc(),
        _ => {
            let name = method.map_or("unknown", Method::name);
            requests.with(&[name, transport, outcome]).inc();
        }
    }
}

/// Records a request's latency under its method and transport.
pub fn observe(method: Option<Method>, version: HttpVersion, elapsed: Duration) {
    let duration = &metrics().gateway.duration;
    let transport = version.as_str();
    match method {
        Some(m) => SERIES.duration[m as usize][version_index(version)]
            .of(duration, &[m.name(), transport])
            .observe(elapsed),
        None => duration.with(&["unknown", transport]).observe(elapsed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kept series is the one its labels name: a method's or a
    /// version's counts never land in another's.
    #[test]
    fn each_series_is_found_by_its_labels() {
        let requests = &metrics().gateway.requests;
        let before = |m: Method, v: HttpVersion| requests.with(&[m.name(), v.as_str(), "ok"]).get();
        let (a, b) = (
            before(Method::Prepare, HttpVersion::Http1),
            before(Method::CloseSession, HttpVersion::Http1),
        );
        count_request(Some(Method::Prepare), HttpVersion::Http1, "ok");
        count_request(Some(Method::Prepare), HttpVersion::Http1, "ok");
        assert_eq!(before(Method::Prepare, HttpVersion::Http1), a + 2);
        assert_eq!(before(Method::CloseSession, HttpVersion::Http1), b);
        let refused = || requests.with(&["unknown", "http/1.1", "not_found"]).get();
        let r = refused();
        count_request(None, HttpVersion::Http1, "not_found");
        assert_eq!(refused(), r + 1);
    }
}
