//! Stand-in for `benches/wan/` (the link emulator, another branch) with
//! the same API, so the harness builds before it lands; `start` fails and
//! the harness skips the WAN networks. Replaced by `#[path = "wan/mod.rs"]`.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct LinkParams {
    pub one_way_delay: Duration,
    pub loss: f64,
    pub rate_bits_per_sec: u64,
    pub queue_bytes: usize,
    pub seed: u64,
}

#[derive(Clone, Debug, Default)]
pub struct LinkCounters {
    pub to_server_bytes: u64,
    pub to_client_bytes: u64,
    pub to_server_packets: u64,
    pub to_client_packets: u64,
    pub lost: u64,
    pub queue_drops: u64,
}

pub struct Wan {
    params: LinkParams,
}

impl Wan {
    pub fn start(_prefix: &str, _params: LinkParams, _time_limit: Duration) -> std::io::Result<Wan> {
        Err(std::io::Error::other("the WAN emulator (benches/wan) is not in this tree yet"))
    }
    pub fn client_ns(&self) -> &str {
        ""
    }
    pub fn server_ns(&self) -> &str {
        ""
    }
    pub fn client_ip(&self) -> Ipv4Addr {
        Ipv4Addr::LOCALHOST
    }
    pub fn server_ip(&self) -> Ipv4Addr {
        Ipv4Addr::LOCALHOST
    }
    pub fn counters(&self) -> LinkCounters {
        LinkCounters::default()
    }
    pub fn reset_counters(&self) {}
    pub fn params(&self) -> &LinkParams {
        &self.params
    }
}
