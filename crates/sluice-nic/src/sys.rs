//! Interface and descriptor helpers shared by the kernel ports: interface
//! lookup, link flags, and an epoll set so a port with several sockets
//! still offers the worker one descriptor to sleep on.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::NicError;

/// Turns a failed syscall into an error that names the step and, for the
/// usual permission errors, says what to do.
pub(crate) fn os_error(what: &str, e: io::Error) -> NicError {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (run sluice as root, or grant it CAP_NET_RAW and CAP_NET_ADMIN: \
             `setcap cap_net_raw,cap_net_admin+ep $(which sluice)`)"
        }
        _ => "",
    };
    NicError(format!("{what}: {e}{hint}"))
}

/// Converts a `-1` return into the thread's `errno`.
pub(crate) fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The kernel index of interface `name`.
pub(crate) fn if_index(name: &str) -> Result<u32, NicError> {
    let c = if_name(name)?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(NicError(format!(
            "interface `{name}` does not exist (check `ip link show`; inside a \
             network namespace, run sluice with `ip netns exec <ns> sluice ...`)"
        )));
    }
    Ok(idx)
}

fn if_name(name: &str) -> Result<CString, NicError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
        return Err(NicError(format!(
            "`{name}` is not a valid interface name (1..{} bytes, no `/`)",
            libc::IFNAMSIZ - 1
        )));
    }
    CString::new(name).map_err(|_| NicError(format!("interface name `{name}` contains NUL")))
}

/// An `ifreq` naming interface `name` (other fields zero).
pub(crate) fn ifreq(name: &str) -> Result<libc::ifreq, NicError> {
    let c = if_name(name)?;
    // SAFETY: `ifreq` is plain old data (a name array and a union of
    // integers/pointers); all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(c.as_bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

/// Sets IFF_UP on interface `name` (needs CAP_NET_ADMIN).
pub(crate) fn set_up(name: &str) -> Result<(), NicError> {
    // SAFETY: plain socket(2) call; the result is checked before use and
    // owned by an OwnedFd.
    let s = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
        .map_err(|e| os_error("cannot open a control socket", e))?;
    // SAFETY: `s` is a fresh descriptor nobody else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFFLAGS reads the name and writes `ifru_flags` of a
    // properly initialised `ifreq` that lives across the call.
    check(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })
        .map_err(|e| os_error(&format!("cannot read the flags of `{name}`"), e))?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    if flags & libc::IFF_UP as libc::c_short != 0 {
        return Ok(());
    }
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: as above; SIOCSIFFLAGS only reads the request.
    check(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &req) })
        .map_err(|e| os_error(&format!("cannot bring `{name}` up"), e))?;
    Ok(())
}

/// One descriptor that is readable when any of several is: an epoll set
/// (epoll descriptors are themselves pollable).
pub(crate) struct ReadySet {
    fd: OwnedFd,
}

impl ReadySet {
    /// An epoll set watching `fds` for input.
    pub(crate) fn new(fds: &[RawFd]) -> Result<ReadySet, NicError> {
        // SAFETY: plain epoll_create1(2); the result is checked before use.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
            .map_err(|e| os_error("cannot create an epoll set", e))?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        for &f in fds {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: f as u64,
            };
            // SAFETY: `ev` is a valid epoll_event living across the call;
            // both descriptors are open (owned by the caller and by us).
            check(unsafe { libc::epoll_ctl(fd.as_raw_fd(), libc::EPOLL_CTL_ADD, f, &mut ev) })
                .map_err(|e| os_error("cannot add a socket to the epoll set", e))?;
        }
        Ok(ReadySet { fd })
    }

    /// The descriptor to poll.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Whether the calling process may open raw sockets and configure links
/// (effective CAP_NET_RAW and CAP_NET_ADMIN), read from /proc.
pub fn has_net_caps() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_NET_RAW: u32 = 13;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << CAP_NET_ADMIN) != 0 && eff & (1 << CAP_NET_RAW) != 0
}

/// Sleeps until one of `fds` is readable or `timeout` passes (ppoll(2),
/// microsecond timeouts); at most 16 descriptors are watched;
/// an interrupted or failed poll just returns early.
pub fn wait_readable(fds: &[RawFd], timeout: std::time::Duration) {
    const MAX: usize = 16;
    let mut p = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX];
    let n = fds.len().min(MAX);
    for (slot, &fd) in p.iter_mut().zip(&fds[..n]) {
        slot.fd = fd;
        slot.events = libc::POLLIN;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(1) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `p[..n]` are initialised pollfd entries and `ts` a valid
    // timespec, all living across the call; no signal mask is passed.
    unsafe { libc::ppoll(p.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
}
