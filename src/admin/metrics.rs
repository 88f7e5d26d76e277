//! The process's metrics and their Prometheus text rendering.
//!
//! A small hand-written registry rather than a crate: a dozen counters,
//! gauges and histograms with fixed label names is all we need, atomics
//! keep recording off any lock on the hot path (the labelled families take
//! a short lock to find their child), and the text format is a few lines
//! of `write!`. `prometheus-client` would add a derive-macro dependency
//! tree for no behaviour we use; `metrics-exporter-prometheus` would bring
//! an HTTP stack and aws-lc-rs with its defaults.
//!
//! Every metric is declared once, as a [`Metric`]: its name and help text
//! beside its value, and rendered from that declaration, so a metric
//! cannot be recorded and never exported. The process-wide ones are the
//! groups of [`METRICS`], recorded where the IO happens (the psdb client,
//! the gateway's service and backend edges, the sidecar's accept loop);
//! each group lists all of its metrics for rendering. Values that already
//! live elsewhere (the current transport, fallback counters, pool sizes)
//! are read and named at scrape time by the role's [`super::Health`].

use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::Deref;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub const fn new() -> Self {
        Self(AtomicI64::new(0))
    }

    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds (seconds) of latency buckets: sub-millisecond local round
/// trips up to statements that run for many seconds.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        // Buckets are stored non-cumulative; rendering sums them.
        if let Some(i) = LATENCY_BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// A metric with labels: one child per distinct set of label values.
pub struct Family<T> {
    labels: &'static [&'static str],
    children: Mutex<BTreeMap<Vec<String>, Arc<T>>>,
}

impl<T: Default> Family<T> {
    pub const fn new(labels: &'static [&'static str]) -> Self {
        Self {
            labels,
            children: Mutex::new(BTreeMap::new()),
        }
    }

    /// The child for `values` (in the order of the label names).
    pub fn with(&self, values: &[&str]) -> Arc<T> {
        debug_assert_eq!(values.len(), self.labels.len());
        let mut children = self.children.lock().expect("not poisoned");
        // Counted on every request: a child that exists is found without
        // allocating its key (a family has a handful of children).
        if let Some(child) = children.iter().find(|(k, _)| k.iter().eq(values.iter())) {
            return child.1.clone();
        }
        let key: Vec<String> = values.iter().map(|v| (*v).to_string()).collect();
        children.entry(key).or_default().clone()
    }

    fn each(&self, mut f: impl FnMut(String, &T)) {
        let children = self.children.lock().expect("not poisoned");
        for (values, child) in children.iter() {
            let labels = self
                .labels
                .iter()
                .zip(values)
                .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
                .collect::<Vec<_>>()
                .join(",");
            f(labels, child);
        }
    }
}

/// A family's child found once and kept, for label values a hot path
/// records on every request: after the first time, no lock and no search
/// (the family's lock is shared by every request of every connection).
/// Each `Child` stands for one fixed set of label values.
pub struct Child<T>(OnceLock<Arc<T>>);

impl<T: Default> Child<T> {
    pub const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// The child of `family` for `values`: always the same values for one
    /// `Child`.
    pub fn of(&self, family: &Family<T>, values: &[&str]) -> &T {
        self.0.get_or_init(|| family.with(values))
    }
}

impl<T: Default> Default for Child<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A metric as exported: its name and help text beside its value.
/// Record through [`Deref`] (`metric.inc()`, `metric.with(&[..])`).
pub struct Metric<T> {
    name: &'static str,
    help: &'static str,
    value: T,
}

impl<T> Metric<T> {
    pub const fn new(name: &'static str, help: &'static str, value: T) -> Self {
        Self { name, help, value }
    }
}

impl<T> Deref for Metric<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// How a kind of value is written under a metric's name.
pub trait Encode {
    fn encode(&self, e: &mut Encoder<'_>, name: &str, help: &str);
}

impl Encode for Counter {
    fn encode(&self, e: &mut Encoder<'_>, name: &str, help: &str) {
        e.counter(name, help, self.get());
    }
}

impl Encode for Gauge {
    fn encode(&self, e: &mut Encoder<'_>, name: &str, help: &str) {
        e.gauge(name, help, self.get());
    }
}

impl Encode for Family<Counter> {
    fn encode(&self, e: &mut Encoder<'_>, name: &str, help: &str) {
        e.counter_family(name, help, self);
    }
}

impl Encode for Family<Histogram> {
    fn encode(&self, e: &mut Encoder<'_>, name: &str, help: &str) {
        e.histogram_family(name, help, self);
    }
}

/// A metric of any kind, so that a group can list all of its metrics.
pub trait Render {
    fn name(&self) -> &'static str;
    fn render(&self, e: &mut Encoder<'_>);
}

impl<T: Encode> Render for Metric<T> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn render(&self, e: &mut Encoder<'_>) {
        self.value.encode(e, self.name, self.help);
    }
}

/// Every metric the process records, by who records it. Each role
/// renders its groups: the sidecar `sidecar` and `upstream`, the gateway
/// `gateway`.
pub struct Metrics {
    pub sidecar: SidecarMetrics,
    pub upstream: RequestMetrics,
    pub gateway: RequestMetrics,
}

/// The sidecar's MySQL side.
pub struct SidecarMetrics {
    pub client_connections: Metric<Gauge>,
    pub client_connections_total: Metric<Counter>,
    pub client_connections_refused: Metric<Counter>,
    pub drain_transactions_cut: Metric<Counter>,
}

impl SidecarMetrics {
    /// All of them, in rendering order. Destructured without `..`: a
    /// metric added to the group does not compile until it is listed.
    pub fn all(&self) -> [&dyn Render; 4] {
        let Self {
            client_connections,
            client_connections_total,
            client_connections_refused,
            drain_transactions_cut,
        } = self;
        [
            client_connections,
            client_connections_total,
            client_connections_refused,
            drain_transactions_cut,
        ]
    }
}

/// psdb requests as one side counts them: the client (sidecar → gateway)
/// or the gateway's service.
pub struct RequestMetrics {
    pub requests: Metric<Family<Counter>>,
    pub duration: Metric<Family<Histogram>>,
    pub bytes: Metric<Family<Counter>>,
}

impl RequestMetrics {
    /// All of them, in rendering order (see [`SidecarMetrics::all`]).
    pub fn all(&self) -> [&dyn Render; 3] {
        let Self {
            requests,
            duration,
            bytes,
        } = self;
        [requests, duration, bytes]
    }
}

pub static METRICS: Metrics = Metrics {
    sidecar: SidecarMetrics {
        client_connections: Metric::new(
            "myquic_sidecar_client_connections",
            "MySQL client connections open now.",
            Gauge::new(),
        ),
        // The same name as the gauge: a counter renders as `…_total`.
        client_connections_total: Metric::new(
            "myquic_sidecar_client_connections",
            "MySQL client connections accepted.",
            Counter::new(),
        ),
        client_connections_refused: Metric::new(
            "myquic_sidecar_client_connections_refused",
            "Client connections refused with ERR 1040 (max_connections, or max_connections_logging_in).",
            Counter::new(),
        ),
        drain_transactions_cut: Metric::new(
            "myquic_sidecar_drain_cut_connections",
            "Connections ended by the drain timeout inside a transaction.",
            Counter::new(),
        ),
    },
    upstream: RequestMetrics {
        requests: Metric::new(
            "myquic_upstream_requests",
            "psdb requests to the gateway by method, transport and outcome.",
            Family::new(&["method", "transport", "outcome"]),
        ),
        duration: Metric::new(
            "myquic_upstream_request_duration_seconds",
            "psdb request latency (StreamExecute: until the stream ended).",
            Family::new(&["method", "transport"]),
        ),
        bytes: Metric::new(
            "myquic_upstream_message_bytes",
            "Message bytes to/from the gateway, on the wire (compressed) and decoded.",
            Family::new(&["direction", "form"]),
        ),
    },
    gateway: RequestMetrics {
        requests: Metric::new(
            "myquic_gateway_requests",
            "psdb requests by method, transport and outcome (at the response head).",
            Family::new(&["method", "transport", "outcome"]),
        ),
        duration: Metric::new(
            "myquic_gateway_request_duration_seconds",
            "psdb request latency (StreamExecute: until the stream ended).",
            Family::new(&["method", "transport"]),
        ),
        bytes: Metric::new(
            "myquic_gateway_message_bytes",
            "Message bytes received (request bodies) and sent (responses, as encoded).",
            Family::new(&["direction"]),
        ),
    },
};

pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Writes metrics in the Prometheus text exposition format (0.0.4).
pub struct Encoder<'a> {
    out: &'a mut String,
}

impl<'a> Encoder<'a> {
    pub fn new(out: &'a mut String) -> Self {
        Self { out }
    }

    /// Each of `metrics`, as declared.
    pub fn metrics(&mut self, metrics: &[&dyn Render]) {
        for metric in metrics {
            metric.render(self);
        }
    }

    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.head(name, "counter", help);
        let _ = writeln!(self.out, "{name}_total {value}");
    }

    pub fn gauge(&mut self, name: &str, help: &str, value: i64) {
        self.head(name, "gauge", help);
        let _ = writeln!(self.out, "{name} {value}");
    }

    /// A gauge with one series per label set.
    pub fn gauges(&mut self, name: &str, help: &str, series: &[(&str, i64)]) {
        self.head(name, "gauge", help);
        for (labels, value) in series {
            let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
        }
    }

    pub fn counter_family(&mut self, name: &str, help: &str, family: &Family<Counter>) {
        self.head(name, "counter", help);
        family.each(|labels, c| {
            let _ = writeln!(self.out, "{name}_total{{{labels}}} {}", c.get());
        });
    }

    pub fn histogram_family(&mut self, name: &str, help: &str, family: &Family<Histogram>) {
        self.head(name, "histogram", help);
        family.each(|labels, h| {
            let mut cumulative = 0;
            for (bound, n) in LATENCY_BUCKETS.iter().zip(&h.buckets) {
                cumulative += n.load(Ordering::Relaxed);
                let _ = writeln!(
                    self.out,
                    "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                );
            }
            let count = h.count.load(Ordering::Relaxed);
            let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(self.out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
            let _ = writeln!(self.out, "{name}_sum{{{labels}}} {sum}");
            let _ = writeln!(self.out, "{name}_count{{{labels}}} {count}");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same label values find the same child; values that differ in
    /// any label (or only in length) do not.
    #[test]
    fn children_are_found_by_every_label_value() {
        let requests: Family<Counter> = Family::new(&["method", "outcome"]);
        let ok = requests.with(&["Execute", "ok"]);
        assert!(Arc::ptr_eq(&ok, &requests.with(&["Execute", "ok"])));
        assert!(!Arc::ptr_eq(&ok, &requests.with(&["Execute", "lost"])));
        assert!(!Arc::ptr_eq(&ok, &requests.with(&["Prepare", "ok"])));
        ok.add(2);
        requests.with(&["Execute", "ok"]).add(1);
        let mut out = String::new();
        Encoder::new(&mut out).counter_family("x", "X.", &requests);
        assert!(
            out.contains("x_total{method=\"Execute\",outcome=\"ok\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("x_total{method=\"Execute\",outcome=\"lost\"} 0\n"),
            "{out}"
        );
    }

    /// A kept child is the family's own: what it counts is rendered under
    /// its labels, and it appears only once used.
    #[test]
    fn a_kept_child_counts_in_its_family() {
        let requests: Family<Counter> = Family::new(&["method"]);
        let kept = Child::new();
        let mut out = String::new();
        Encoder::new(&mut out).counter_family("x", "help", &requests);
        assert!(!out.contains("x_total{"), "{out}");
        kept.of(&requests, &["Execute"]).inc();
        kept.of(&requests, &["Execute"]).inc();
        assert_eq!(requests.with(&["Execute"]).get(), 2);
        let mut out = String::new();
        Encoder::new(&mut out).counter_family("x", "help", &requests);
        assert!(out.contains("x_total{method=\"Execute\"} 2\n"), "{out}");
    }

    #[test]
    fn renders_the_text_format() {
        let requests: Family<Counter> = Family::new(&["method", "outcome"]);
        requests.with(&["Execute", "ok"]).add(3);
        let latency: Family<Histogram> = Family::new(&["method"]);
        latency.with(&["Execute"]).observe(Duration::from_millis(3));
        latency.with(&["Execute"]).observe(Duration::from_secs(100));
        let mut out = String::new();
        let mut e = Encoder::new(&mut out);
        e.counter_family("x_requests", "Requests.", &requests);
        e.histogram_family("x_seconds", "Latency.", &latency);
        e.gauge("x_up", "Up.", 1);
        assert!(out.contains("# TYPE x_requests counter\n"), "{out}");
        assert!(
            out.contains("x_requests_total{method=\"Execute\",outcome=\"ok\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{method=\"Execute\",le=\"0.0025\"} 0\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{method=\"Execute\",le=\"0.005\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{method=\"Execute\",le=\"+Inf\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_count{method=\"Execute\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("x_up 1\n"), "{out}");
    }

    #[test]
    fn every_declared_metric_is_rendered() {
        let m = metrics();
        let groups: [&[&dyn Render]; 3] = [&m.sidecar.all(), &m.upstream.all(), &m.gateway.all()];
        for group in groups {
            let mut out = String::new();
            Encoder::new(&mut out).metrics(group);
            for metric in group {
                let name = metric.name();
                assert!(out.contains(&format!("# HELP {name} ")), "{name}: {out}");
                assert!(out.contains(&format!("# TYPE {name} ")), "{name}: {out}");
            }
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
