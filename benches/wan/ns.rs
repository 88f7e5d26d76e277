//! Network namespaces through iproute2 (`ip`), plus `setns` for running a
//! closure inside one.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `ip ARGS`, turning a failure into an error that carries its stderr.
pub fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("running ip (iproute2): {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The names from `ip netns list` (each line is `name` or `name (id: N)`).
pub fn list() -> Vec<String> {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Kills whatever still runs inside, then deletes the namespace. Best
/// effort and silent: it runs from Drop and from the time limit.
///
/// The kill comes first because a deleted namespace lives on, nameless
/// and out of reach, for as long as a process is inside it.
pub fn remove(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let Ok(out) = Command::new("ip").args(["netns", "pids", name]).output() else {
            break;
        };
        let pids: Vec<libc::pid_t> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if !out.status.success() || pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: plain syscall; a pid that has just exited gives ESRCH.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = Command::new("ip")
        .args(["netns", "delete", name])
        .stderr(Stdio::null())
        .status();
}

/// Deletes namespaces named `<prefix>-<pid>-…` whose process is gone: a
/// harness killed with SIGKILL never ran its Drop.
pub fn sweep_stale(prefix: &str) {
    let head = format!("{prefix}-");
    for name in list() {
        let Some(rest) = name.strip_prefix(&head) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove(&name);
        }
    }
}

/// Runs `f` on a new thread that has joined the namespace `name`. Sockets
/// created there stay in that namespace when handed back, so a test can
/// talk across the link without spawning processes.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let handle = File::open(format!("/run/netns/{name}"))?;
    std::thread::spawn(move || {
        // SAFETY: a valid namespace fd; CLONE_NEWNET moves only this thread.
        if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(f())
    })
    .join()
    .map_err(|_| io::Error::other("thread in namespace panicked"))?
}
