//! One AF_XDP socket: its UMEM registration, its four rings and the few syscalls it
//! needs (socket, setsockopt/getsockopt, mmap, bind, sendto/recvfrom for
//! wakeups).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use super::ring::Ring;

/// How the socket is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XskBind {
    /// The driver DMAs straight into the UMEM (`XDP_ZEROCOPY`).
    ZeroCopy,
    /// The kernel copies frames between its buffers and the UMEM (`XDP_COPY`).
    Copy,
}

impl XskBind {
    /// Name as reported to the operator.
    pub fn as_str(self) -> &'static str {
        match self {
            XskBind::ZeroCopy => "zero-copy",
            XskBind::Copy => "copy",
        }
    }
}

/// The memory a socket's UMEM is registered over: the arena's buffer
/// region, shared in place (see the module doc of `af_xdp`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Umem {
    /// Start address (page aligned) and length (whole pages).
    pub addr: usize,
    pub len: usize,
    /// Bytes from a fill address to the end of the room a received frame
    /// may use (the kernel puts the frame `XDP_PACKET_HEADROOM` in); also
    /// the longest frame the kernel accepts for transmit.
    pub chunk: u32,
}

/// In unaligned-chunk mode an RX descriptor's address carries the frame's
/// offset from its fill address in its top 16 bits
/// (`XSK_UNALIGNED_BUF_OFFSET_SHIFT`).
pub(crate) const OFFSET_SHIFT: u32 = 48;

/// Failure of one step, naming the step (for the operator's message).
#[derive(Debug)]
pub(crate) struct StepError {
    pub step: &'static str,
    pub err: io::Error,
}

fn step<T>(step: &'static str, r: io::Result<T>) -> Result<T, StepError> {
    r.map_err(|err| StepError { step, err })
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An XSK socket with its UMEM and rings.
pub(crate) struct Xsk {
    // Field order is drop order: rings unmapped, then the socket closed
    // (which unbinds it; the UMEM's memory is the arena's, not ours).
    pub fill: Ring<u64>,
    pub comp: Ring<u64>,
    pub rx: Ring<libc::xdp_desc>,
    pub tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
    pub bind: XskBind,
}

// SAFETY: the raw pointers in `Xsk` point into mappings it owns exclusively;
// moving it to another thread moves that ownership along. It is not `Sync`.
unsafe impl Send for Xsk {}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the option's C type and we pass its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn map_ring<T: Copy>(
    fd: RawFd,
    pgoff: u64,
    off: &libc::xdp_ring_offset,
    size: u32,
    entry: usize,
    producer_side: bool,
) -> io::Result<Ring<T>> {
    let len = off.desc as usize + size as usize * entry;
    // SAFETY: a shared mapping of the socket's ring at the page offset the
    // AF_XDP ABI defines for it; the kernel sized it for `size` entries.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let map = NonNull::new(p.cast()).expect("mmap never returns NULL on success");
    // SAFETY: `map` is the ring mapping described by `off`, `size` entries of
    // `T`, and is handed over to the ring.
    Ok(unsafe { Ring::from_mapping(map, len, off, size, producer_side) })
}

impl Xsk {
    /// Creates a socket, registers `umem` in unaligned-chunk mode, maps
    /// rings of `ring` entries and binds to `ifindex`/`queue` (zero-copy if
    /// the driver can, copy otherwise, or only copy when `force_copy`).
    /// The fill ring starts empty: the port fills it with arena buffers.
    pub(crate) fn open(
        ifindex: u32,
        queue: u32,
        umem: Umem,
        ring: u32,
        force_copy: bool,
    ) -> Result<Xsk, StepError> {
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = step(
            "socket(AF_XDP)",
            cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) }),
        )?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Unaligned chunks: the arena's buffers are 2240 B apart, not a
        // power of two, and each fill address is a buffer's own.
        let reg = libc::xdp_umem_reg {
            addr: umem.addr as u64,
            len: umem.len as u64,
            chunk_size: umem.chunk,
            headroom: 0,
            flags: libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG,
            tx_metadata_len: 0,
        };
        step("XDP_UMEM_REG", setsockopt(raw, libc::XDP_UMEM_REG, &reg))?;
        for (opt, name) in [
            (libc::XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
            (libc::XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
            (libc::XDP_RX_RING, "XDP_RX_RING"),
            (libc::XDP_TX_RING, "XDP_TX_RING"),
        ] {
            step(name, setsockopt(raw, opt, &ring))?;
        }
        // SAFETY: all-zero is a valid xdp_mmap_offsets (plain integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut optlen = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` is writable for `optlen` bytes and `optlen` is live.
        let r = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut optlen,
            )
        };
        step("XDP_MMAP_OFFSETS", cvt(r))?;
        if optlen as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(StepError {
                step: "XDP_MMAP_OFFSETS",
                err: io::Error::other("kernel older than 5.4 (no ring flags); upgrade the kernel"),
            });
        }
        let d = std::mem::size_of::<libc::xdp_desc>();
        let fill = step(
            "mmap fill ring",
            map_ring::<u64>(raw, libc::XDP_UMEM_PGOFF_FILL_RING, &off.fr, ring, 8, true),
        )?;
        let comp = step(
            "mmap completion ring",
            map_ring::<u64>(
                raw,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING,
                &off.cr,
                ring,
                8,
                false,
            ),
        )?;
        let rx = step(
            "mmap RX ring",
            map_ring(raw, libc::XDP_PGOFF_RX_RING as u64, &off.rx, ring, d, false),
        )?;
        let tx = step(
            "mmap TX ring",
            map_ring(raw, libc::XDP_PGOFF_TX_RING as u64, &off.tx, ring, d, true),
        )?;
        let bind_with = |flags: u16| {
            let sa = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: flags | libc::XDP_USE_NEED_WAKEUP,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: `sa` is a valid sockaddr_xdp and we pass its size.
            cvt(unsafe {
                libc::bind(
                    raw,
                    (&sa as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            })
        };
        // A socket closed just before (a restarted port) releases its queue
        // from a kernel work item, so the queue can be busy for a moment.
        let bind_with = |flags: u16| {
            let mut r = bind_with(flags);
            for _ in 0..50 {
                if !matches!(&r, Err(e) if e.raw_os_error() == Some(libc::EBUSY)) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
                r = bind_with(flags);
            }
            r
        };
        let bind = if force_copy {
            step("bind", bind_with(libc::XDP_COPY))?;
            XskBind::Copy
        } else {
            match bind_with(libc::XDP_ZEROCOPY) {
                Ok(_) => XskBind::ZeroCopy,
                // The driver has no zero-copy support for this queue
                // (EOPNOTSUPP on most, EINVAL on some): copy mode works on
                // every device.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::EPROTONOSUPPORT)
                    ) =>
                {
                    step("bind", bind_with(libc::XDP_COPY))?;
                    XskBind::Copy
                }
                Err(e) => {
                    return Err(StepError {
                        step: "bind",
                        err: e,
                    })
                }
            }
        };
        Ok(Xsk {
            fill,
            comp,
            rx,
            tx,
            fd,
            bind,
        })
    }

    /// The socket descriptor (pollable for input).
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Kicks the kernel to process the TX ring (copy mode transmits only
    /// inside this syscall). EAGAIN/EBUSY/ENOBUFS mean "try again later" and
    /// ENETDOWN a link that is down: none is an error for the caller.
    pub(crate) fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length sendto with no buffer and no address is the
        // AF_XDP TX wakeup; it reads no user memory.
        let r = unsafe {
            libc::sendto(
                self.raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => Ok(()),
                _ => Err(e),
            }
        } else {
            Ok(())
        }
    }

    /// Wakes the kernel's RX processing after refilling the fill ring.
    pub(crate) fn kick_rx(&self) {
        // SAFETY: a zero-length non-blocking recvfrom is the AF_XDP RX
        // wakeup; it writes no user memory.
        unsafe {
            libc::recvfrom(
                self.raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// The kernel's per-socket statistics (`XDP_STATISTICS`).
    pub(crate) fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        // SAFETY: all-zero is a valid xdp_statistics (plain integers).
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `s` is writable for `len` bytes; the kernel writes at most that.
        cvt(unsafe {
            libc::getsockopt(
                self.raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut s as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        })?;
        Ok(s)
    }
}

/// The interface index of `name`, or None if there is no such interface.
pub(crate) fn ifindex(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// An epoll instance readable when any of `fds` is (one pollable
/// descriptor for a multi-queue port).
pub(crate) fn epoll_of(fds: &[RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: plain epoll_create1; the result is checked.
    let ep = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `ep` is a fresh descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the call's duration and
        // both descriptors are open.
        cvt(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    }
    Ok(ep)
}

/// The MTU of interface `name` (SIOCGIFMTU on a throwaway UDP socket).
pub(crate) fn mtu(name: &str) -> io::Result<u32> {
    // SAFETY: plain socket(2), checked.
    let s = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fresh descriptor we own.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: all-zero ifreq is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.len() >= ifr.ifr_name.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (d, &c) in ifr.ifr_name.iter_mut().zip(b) {
        *d = c as libc::c_char;
    }
    // SAFETY: `ifr` is a valid ifreq with a NUL-terminated name; SIOCGIFMTU
    // writes `ifru_mtu` inside it.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFMTU, &mut ifr) })?;
    // SAFETY: SIOCGIFMTU succeeded, so the union holds the MTU.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
}
