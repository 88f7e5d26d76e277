//! Who may log in to the sidecar itself: with no local users it accepts
//! any user name and password, which is only safe on loopback (or a unix
//! socket). On a network listener the sidecar refuses to start unless
//! `sidecar.auth.allow_any_user_on_network` says so; the doctor warns even
//! then.

use super::{Report, Verdict};
use crate::config::SidecarConfig;

const CHECK: &str = "clients";

pub fn check(report: &mut Report, config: &SidecarConfig) {
    let listen = config.listen;
    if !config.accepts_anyone_from_network() {
        let detail = match config.auth.users.len() {
            0 => format!("any user name and password, on loopback only ({listen})"),
            n => format!("{n} local user(s) on {listen}"),
        };
        report.push(CHECK, Verdict::Pass, detail);
        return;
    }
    let advice =
        "configure [[sidecar.auth.users]] (see config.example.toml), or listen on 127.0.0.1";
    if config.auth.allow_any_user_on_network {
        report.push_with_advice(
            CHECK,
            Verdict::Warn,
            format!(
                "any user name and password are accepted on {listen}, which is not loopback: anyone who reaches it uses the gateway's credential (allowed by sidecar.auth.allow_any_user_on_network)"
            ),
            advice,
        );
    } else {
        report.push_with_advice(
            CHECK,
            Verdict::Fail,
            format!(
                "no local users and {listen} is not loopback: the sidecar refuses to start (any user name and password would be accepted from the network)"
            ),
            advice,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(listen: &str, allowed: bool) -> Verdict {
        let mut config = SidecarConfig {
            listen: listen.parse().unwrap(),
            ..Default::default()
        };
        config.auth.allow_any_user_on_network = allowed;
        let mut report = Report::default();
        check(&mut report, &config);
        report.verdict_of(CHECK).unwrap()
    }

    #[test]
    fn anyone_from_the_network_is_a_warning_or_a_failure() {
        assert_eq!(verdict("127.0.0.1:3306", false), Verdict::Pass);
        assert_eq!(verdict("[::1]:3306", false), Verdict::Pass);
        assert_eq!(verdict("0.0.0.0:3306", false), Verdict::Fail);
        assert_eq!(verdict("0.0.0.0:3306", true), Verdict::Warn);
        assert_eq!(verdict("[::]:3306", true), Verdict::Warn);
    }
}
