//! Opening a TUN device: `/dev/net/tun` plus one `TUNSETIFF` ioctl. The
//! device lives as long as the returned file; closing it removes the
//! interface, wherever it has been moved to.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

/// `_IOW('T', 202, int)`, from `<linux/if_tun.h>`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// Layer-3 device (IP packets, no Ethernet header).
const IFF_TUN: libc::c_short = 0x0001;
/// No 4-byte packet-information prefix: a read returns exactly one packet.
const IFF_NO_PI: libc::c_short = 0x1000;

/// `struct ifreq` as `TUNSETIFF` reads it: the name, then the flags at the
/// start of the 24-byte union.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Creates the TUN interface `name` (at most 15 bytes) in the calling
/// thread's network namespace.
pub fn create(name: &str) -> io::Result<File> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} is longer than 15 bytes"),
        ));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: the fd is open and `req` is a valid, fully initialised ifreq
    // that outlives the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Waits up to `timeout_ms` for a packet to read; false on timeout. Lets a
/// reader thread notice that it should stop without a read that blocks
/// forever.
pub fn readable(file: &File, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    match rc {
        0 => Ok(false),
        r if r > 0 => Ok(true),
        _ => {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(err)
            }
        }
    }
}
