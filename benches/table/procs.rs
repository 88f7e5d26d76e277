//! Child processes (optionally inside a network namespace) and what
//! `/proc` says about them: CPU time and resident memory.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// `cmd args…`, inside `ns` when given (`ip netns exec` execs in place,
/// so the child's pid is the program's own).
pub fn command(ns: Option<&str>, program: &str) -> Command {
    match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, program]);
            c
        }
        None => Command::new(program),
    }
}

/// A child killed (with its process group) and reaped on drop.
pub struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    /// Starts `cmd` in its own process group, stderr to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> std::io::Result<Self> {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(std::fs::File::create(log)?)
            .stderr(std::fs::File::create(log.with_extension("err"))?)
            .process_group(0);
        Ok(Self {
            name: name.to_string(),
            child: cmd.spawn()?,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // The whole group: an extra client's `sh -c` and what it started.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks_per_sec() -> u64 {
    // sysconf(_SC_CLK_TCK) is 100 on every Linux this runs on; `getconf`
    // confirms it without a libc binding.
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// What a process has used so far, all its threads together.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user: Duration,
    pub system: Duration,
    /// Voluntary + involuntary context switches, summed over its threads
    /// (the process's own status line counts only its main thread).
    pub switches: u64,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, earlier: Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }
}

/// User and system CPU time (utime, stime of `/proc/PID/stat`) and the
/// context switches of every thread (`/proc/PID/task/*/status`).
pub fn usage(pid: u32) -> Usage {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Usage::default();
    };
    // Fields after the parenthesised command name; utime and stime are
    // fields 14 and 15 of the whole line.
    let rest = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let hz = *HZ.get_or_init(clock_ticks_per_sec);
    let time = |t: u64| Duration::from_micros(t * 1_000_000 / hz);
    Usage {
        user: time(ticks(11)),
        system: time(ticks(12)),
        switches: context_switches(pid),
    }
}

fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Resident set size of `pid` in bytes (`VmRSS`).
pub fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Samples the RSS of some processes every 5 ms until stopped; keeps the peak.
pub struct RssPeak {
    stop: Arc<AtomicBool>,
    peaks: Vec<Arc<AtomicU64>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssPeak {
    pub fn start(pids: &[u32]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks: Vec<_> = pids
            .iter()
            .map(|&p| Arc::new(AtomicU64::new(rss(p))))
            .collect();
        let (s, pk, pids) = (stop.clone(), peaks.clone(), pids.to_vec());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for (pid, peak) in pids.iter().zip(&pk) {
                    peak.fetch_max(rss(*pid), Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self {
            stop,
            peaks,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peaks
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .collect()
    }
}

/// Polls `ready` every 50 ms for up to `limit`.
pub fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
