//! Optional `perf` around a cell's timed phase, for the "where the time
//! goes" tables of `benches/results/profiles/`: with `MQ_BENCH_PERF=DIR`,
//! each watched process (gateway, sidecar) of each cell gets
//! - `DIR/<cell>__<role>.stat`: `perf stat` counts (context switches,
//!   syscalls by name, and libc `malloc`/`realloc`/`calloc` calls through
//!   uprobes, so allocations are counted without changing the binary);
//! - `DIR/<cell>__<role>.cpu`: user and system CPU ticks from `/proc` and
//!   the cell's operation count, to divide the counts by;
//! - with `MQ_BENCH_PERF_RECORD=<substrings of cell names, comma-separated>`,
//!   those cells get `DIR/<cell>__<role>.data` from `perf record
//!   --call-graph dwarf` (for flame graphs) instead of the counts;
//! - with `MQ_BENCH_PERF_EVENT=<event>` as well (`probe_libc:malloc`),
//!   the recording is of every occurrence of that event instead of CPU
//!   samples: a flame graph of where the allocations are made.
//!
//! `perf` slows what it watches (the uprobes most): the figures of a run
//! with `MQ_BENCH_PERF` are counts, not timings.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The uprobes `perf stat` counts allocations with (created once).
const ALLOC_PROBES: &[&str] = &["malloc", "realloc", "calloc"];
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// perf watching one process during a timed phase.
pub struct Watch {
    children: Vec<Child>,
    cpu0: (u64, u64),
    pid: u32,
    base: PathBuf,
}

/// Starts perf on `pid` if `MQ_BENCH_PERF` is set; `cell` names the files.
pub fn watch(pid: u32, cell: &str, role: &str) -> Option<Watch> {
    let dir = PathBuf::from(std::env::var_os("MQ_BENCH_PERF")?);
    std::fs::create_dir_all(&dir).ok()?;
    ensure_alloc_probes();
    let cell: String = cell
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = dir.join(format!("{cell}__{role}"));
    let mut events = vec![
        "task-clock".to_string(),
        "context-switches".to_string(),
        "cpu-migrations".to_string(),
        "raw_syscalls:sys_enter".to_string(),
        "syscalls:sys_enter_*".to_string(),
    ];
    events.extend(ALLOC_PROBES.iter().map(|p| format!("probe_libc:{p}")));
    // A recorded cell is not counted: the uprobes would fill its profile.
    let record_wanted = std::env::var("MQ_BENCH_PERF_RECORD")
        .ok()
        .is_some_and(|w| w.split(',').any(|w| !w.is_empty() && cell.contains(w)));
    let mut children = Vec::new();
    let event = std::env::var("MQ_BENCH_PERF_EVENT").ok();
    let sampling: Vec<&str> = match &event {
        // Every occurrence, with a shorter stack copy: there are many.
        Some(event) => vec!["-e", event, "--call-graph", "dwarf,16384"],
        None => vec!["-F", "999", "--call-graph", "dwarf,65528"],
    };
    let perf = if record_wanted {
        Command::new("perf")
            .arg("record")
            .args(&sampling)
            .args(["-p", &pid.to_string(), "-o"])
            .arg(base.with_extension("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    } else {
        Command::new("perf")
            .args(["stat", "-x", ",", "--no-big-num", "-p", &pid.to_string()])
            .arg("-o")
            .arg(base.with_extension("stat"))
            .args(events.iter().flat_map(|e| ["-e", e.as_str()]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    children.extend(perf.ok());
    // perf attaches asynchronously; a moment lets it catch the start.
    std::thread::sleep(std::time::Duration::from_millis(300));
    Some(Watch {
        children,
        cpu0: user_system_ticks(pid),
        pid,
        base,
    })
}

impl Watch {
    /// Stops perf (SIGINT makes it write its output) and records the CPU
    /// ticks and operation count.
    pub fn finish(mut self, ops: usize) {
        let cpu1 = user_system_ticks(self.pid);
        for child in &mut self.children {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
        }
        for child in &mut self.children {
            let _ = child.wait();
        }
        let _ = std::fs::write(
            self.base.with_extension("cpu"),
            format!(
                "ops {ops}\nutime_ticks {}\nstime_ticks {}\nticks_per_sec 100\n",
                cpu1.0 - self.cpu0.0,
                cpu1.1 - self.cpu0.1
            ),
        );
    }
}

fn ensure_alloc_probes() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for probe in ALLOC_PROBES {
            let _ = Command::new("perf")
                .args(["probe", "-q", "-x", LIBC, "--add", probe])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    });
}

/// utime and stime of `pid`, in clock ticks.
fn user_system_ticks(pid: u32) -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (0, 0);
    };
    let rest = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let at = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    (at(11), at(12))
}
