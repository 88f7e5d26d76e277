//! What the fault and soak suite reads about a child process.

/// A figure from /proc/<pid>/status, in bytes (`VmRSS`: resident set;
/// `RssAnon`: its heap and stacks; `RssFile`: mapped files, the binary's
/// code pages among them, which grow as colder paths first run).
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kb * 1024
}

/// Its resident set size (`VmRSS`), in bytes.
pub fn rss(pid: u32) -> u64 {
    status_bytes(pid, "VmRSS")
}

/// Bytes as MiB, for reports.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
