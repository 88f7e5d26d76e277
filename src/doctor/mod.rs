//! `myquic doctor`: from where the sidecar runs, checks each step between
//! it and its gateway — DNS, TCP and UDP reachability, the TLS certificate,
//! the HTTP/3 and HTTP/2 handshakes, authentication and a round trip, and
//! the credential of each local account that has its own (`accounts`) —
//! and says in plain words what is wrong and what to change.
//!
//! The checks (in `checks`) use the sidecar's own configuration and client
//! code, so what passes here is what the sidecar will do. Turning failures
//! into advice (`advice`) is pure and unit-tested.

mod accounts;
mod advice;
mod checks;
mod clients;

use std::fmt;

use crate::config::SidecarConfig;

/// How one check went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Works, but not as well as it should (e.g. HTTP/3 blocked, HTTP/2
    /// works; a certificate about to expire).
    Warn,
    Fail,
    /// Not run because an earlier step failed.
    Skipped,
}

/// One line of the report.
#[derive(Debug)]
pub struct Finding {
    pub check: &'static str,
    pub verdict: Verdict,
    pub detail: String,
    /// What to do about it, for warnings and failures.
    pub advice: Option<String>,
}

/// Everything the doctor found, in the order it checked.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    fn push(&mut self, check: &'static str, verdict: Verdict, detail: impl Into<String>) {
        self.findings.push(Finding {
            check,
            verdict,
            detail: detail.into(),
            advice: None,
        });
    }

    fn push_with_advice(
        &mut self,
        check: &'static str,
        verdict: Verdict,
        detail: impl Into<String>,
        advice: impl Into<String>,
    ) {
        self.findings.push(Finding {
            check,
            verdict,
            detail: detail.into(),
            advice: Some(advice.into()),
        });
    }

    pub fn verdict_of(&self, check: &str) -> Option<Verdict> {
        self.findings
            .iter()
            .find(|f| f.check == check)
            .map(|f| f.verdict)
    }

    /// 0: everything works; 1: the sidecar cannot serve queries; 2: it can,
    /// with a warning (e.g. only over HTTP/2).
    pub fn exit_code(&self) -> u8 {
        let has = |v| self.findings.iter().any(|f| f.verdict == v);
        if has(Verdict::Fail) {
            1
        } else if has(Verdict::Warn) {
            2
        } else {
            0
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            let mark = match finding.verdict {
                Verdict::Pass => "ok  ",
                Verdict::Warn => "WARN",
                Verdict::Fail => "FAIL",
                Verdict::Skipped => "skip",
            };
            writeln!(f, "{mark} {:<11} {}", finding.check, finding.detail)?;
            if let Some(advice) = &finding.advice {
                writeln!(f, "     {:<11} → {advice}", "")?;
            }
        }
        let summary = match self.exit_code() {
            0 => "all checks passed: the sidecar can reach its gateway over HTTP/3",
            2 => "the sidecar can serve queries, with the warnings above",
            _ => "the sidecar cannot serve queries until the failures above are fixed",
        };
        writeln!(f, "{summary}")
    }
}

/// Runs every check against the gateway in `config.upstream`.
pub async fn run(config: &SidecarConfig) -> Report {
    checks::run(config).await
}
