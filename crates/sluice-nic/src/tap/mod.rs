//! `tap` ports: sluice creates a tap interface that a host stack, a
//! container or a VM plugs into, and reads and writes its frames.
//!
//! The interface is not persistent: it exists while sluice holds its
//! descriptors, so it disappears when the port closes and when sluice dies
//! in any way (SIGTERM, SIGKILL, panic). With `queues > 1` it is a
//! multi-queue tap (IFF_MULTI_QUEUE); the kernel spreads frames over the
//! queues by flow.
//!
//! One `read`/`write` syscall per frame: the tap character device has no
//! batch interface (≈ 1–2 µs per frame measured under load, which is why
//! AF_PACKET/AF_XDP are the ports for throughput).
//!
//! With `offload: true` the tap has IFF_VNET_HDR and tells the kernel with
//! TUNSETOFFLOAD that sluice takes partial checksums and TCP super-packets:
//! the host stack then sends up to 64 KiB per frame. Each read is a
//! `readv` of the virtio-net header, an ordinary buffer's room and a
//! per-port overflow area; a frame that spills over is copied into a large
//! buffer (the only extra copy, and only for super-packets). Each write is
//! a `writev` of the header and the frame.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use sluice_mem::{Arena, HandleBatch, PoolCache, DATA_ROOM, MAX_PKT_LEN};

use crate::options::TapOptions;
use crate::sys::{self, check, os_error, ReadySet};
use crate::{NicError, NicPort, NicStats};

mod vnet;
use vnet::write_vnet;

/// A tap interface created by sluice.
pub struct TapPort {
    fds: Vec<OwnedFd>,
    next_rx: usize,
    next_tx: usize,
    ready: Option<ReadySet>,
    /// Where a super-packet's bytes past an ordinary buffer land on
    /// receive (`offload: true` only).
    overflow: Option<Box<[u8]>>,
    stats: NicStats,
    /// Runs on descriptors another daemon handed over.
    adopted: bool,
}

/// TUNSETOFFLOAD: `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;

fn open_queue(name: &str, multi: bool, offload: bool) -> Result<OwnedFd, NicError> {
    // SAFETY: a NUL-terminated literal path; the result is checked.
    let fd = check(unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOENT) {
            NicError(format!(
                "cannot create tap `{name}`: /dev/net/tun does not exist (load the tun \
                 module: `modprobe tun`; in a container, pass the device in)"
            ))
        } else {
            os_error(
                &format!("cannot create tap `{name}`: cannot open /dev/net/tun"),
                e,
            )
        }
    })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = sys::ifreq(name)?;
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if multi {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    if offload {
        flags |= libc::IFF_VNET_HDR;
    }
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF reads (and may write back the name of) an
    // initialised `ifreq` that lives across the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) }).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EBUSY) {
            " (an interface of that name already exists and is not a tap sluice may \
             attach to: pick another `interface` name or delete it with `ip link del`)"
        } else {
            ""
        };
        NicError(format!(
            "{}{hint}",
            os_error(&format!("cannot create tap `{name}`"), e)
        ))
    })?;
    if offload {
        let features = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
        // SAFETY: TUNSETOFFLOAD takes its argument by value.
        check(unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                TUNSETOFFLOAD as _,
                features as libc::c_ulong,
            )
        })
        .map_err(|e| os_error(&format!("cannot set offloads on tap `{name}`"), e))?;
    }
    Ok(fd)
}

impl TapPort {
    /// Creates tap interface `name` with `o.queues` queues and brings it up
    /// or, when another daemon handed its descriptors over
    /// ([`crate::handover`]), runs on those.
    pub fn open(name: &str, o: &TapOptions) -> Result<TapPort, NicError> {
        if let Some(fds) = crate::handover::take(name) {
            return TapPort::adopt(name, o, fds);
        }
        if sys::if_index(name).is_ok() {
            return Err(NicError(format!(
                "cannot create tap `{name}`: an interface of that name already exists \
                 (pick another `interface` name, or delete it with `ip link del {name}`)"
            )));
        }
        let multi = o.queues > 1;
        let mut fds = Vec::with_capacity(o.queues as usize);
        for _ in 0..o.queues {
            fds.push(open_queue(name, multi, o.offload)?);
        }
        sys::set_up(name)?;
        TapPort::on(fds, o, false)
    }

    /// A port on queue descriptors `fds` (`adopted`: handed over).
    fn on(fds: Vec<OwnedFd>, o: &TapOptions, adopted: bool) -> Result<TapPort, NicError> {
        let ready = if fds.len() > 1 {
            let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
            Some(ReadySet::new(&raw)?)
        } else {
            None
        };
        Ok(TapPort {
            fds,
            next_rx: 0,
            next_tx: 0,
            ready,
            overflow: o
                .offload
                .then(|| vec![0u8; MAX_PKT_LEN - DATA_ROOM].into_boxed_slice()),
            stats: NicStats::default(),
            adopted,
        })
    }

    /// Runs on handed-over queue descriptors `fds` of tap `name`, after
    /// checking that they are that tap's queues with the options asked for
    /// (the same port spec on both daemons gives the same).
    fn adopt(name: &str, o: &TapOptions, fds: Vec<OwnedFd>) -> Result<TapPort, NicError> {
        if fds.len() != usize::from(o.queues) {
            return Err(NicError(format!(
                "tap `{name}`: {} queue descriptor(s) were handed over for {} queue(s)",
                fds.len(),
                o.queues
            )));
        }
        for fd in &fds {
            let (got, flags) = tap_identity(fd.as_raw_fd())
                .map_err(|e| os_error(&format!("tap `{name}`: a handed-over descriptor"), e))?;
            let vnet = flags & libc::IFF_VNET_HDR as libc::c_short != 0;
            if got != name || flags & libc::IFF_TAP as libc::c_short == 0 || vnet != o.offload {
                return Err(NicError(format!(
                    "tap `{name}`: a handed-over descriptor is a queue of `{got}` \
                     (flags {flags:#x}), not of this port's tap"
                )));
            }
        }
        TapPort::on(fds, o, true)
    }
}

/// The interface name and flags of tap queue descriptor `fd` (TUNGETIFF).
fn tap_identity(fd: RawFd) -> io::Result<(String, libc::c_short)> {
    // SAFETY: `ifreq` is plain data for which all zeroes is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // SAFETY: TUNGETIFF writes the name and flags into an initialised
    // `ifreq` that lives across the call.
    if unsafe { libc::ioctl(fd, libc::TUNGETIFF, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let name: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    // SAFETY: TUNGETIFF filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok((String::from_utf8_lossy(&name).into_owned(), flags))
}

fn read_frame(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable slice of the length passed.
    let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn write_frame(fd: RawFd, frame: &[u8]) -> io::Result<usize> {
    // SAFETY: `frame` is a live, readable slice of the length passed.
    let r = unsafe { libc::write(fd, frame.as_ptr().cast(), frame.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

impl NicPort for TapPort {
    fn kind(&self) -> &'static str {
        "tap"
    }

    fn rx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<usize, NicError> {
        let mut n = 0;
        let nq = self.fds.len();
        for k in 0..nq {
            let fd = self.fds[(self.next_rx + k) % nq].as_raw_fd();
            while n < max && !out.is_full() {
                let Some(mut h) = cache.alloc() else {
                    self.stats.rx_packets += n as u64;
                    return Ok(n);
                };
                if self.overflow.is_some() {
                    match self.rx_vnet(fd, arena, cache, h) {
                        Ok(Some(h)) => {
                            let _ = out.push(h);
                            n += 1;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            if e.kind() == io::ErrorKind::WouldBlock
                                || e.kind() == io::ErrorKind::Interrupted
                            {
                                break;
                            }
                            self.stats.rx_packets += n as u64;
                            return Err(NicError(format!("tap read failed: {e}")));
                        }
                    }
                    continue;
                }
                let mut p = arena.pkt(&mut h);
                p.reset(0);
                // A read that fills the whole buffer may have cut the frame.
                let room = p.room_mut();
                let room_len = room.len().min(DATA_ROOM);
                match read_frame(fd, &mut room[..room_len]) {
                    Ok(len) if len > 0 && len < room_len => {
                        p.set_len(len);
                        self.stats.rx_bytes += len as u64;
                        let _ = out.push(h);
                        n += 1;
                    }
                    Ok(0) => {
                        cache.free(h);
                        break;
                    }
                    Ok(_) => {
                        // Filled the whole buffer: the frame may have been
                        // cut; a tap's MTU must stay below the buffer size.
                        self.stats.rx_oversize += 1;
                        cache.free(h);
                    }
                    Err(e) => {
                        cache.free(h);
                        if e.kind() == io::ErrorKind::WouldBlock
                            || e.kind() == io::ErrorKind::Interrupted
                        {
                            break;
                        }
                        self.stats.rx_packets += n as u64;
                        return Err(NicError(format!("tap read failed: {e}")));
                    }
                }
            }
        }
        self.next_rx = (self.next_rx + 1) % nq;
        self.stats.rx_packets += n as u64;
        Ok(n)
    }

    fn tx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        batch: &mut HandleBatch,
    ) -> Result<usize, NicError> {
        let fd = self.fds[self.next_tx].as_raw_fd();
        self.next_tx = (self.next_tx + 1) % self.fds.len();
        let mut done = 0;
        let mut errors = 0;
        let mut bytes = 0;
        for i in 0..batch.len() {
            let Some(h) = batch.get_mut(i) else { break };
            let p = arena.pkt(h);
            let sent = if self.overflow.is_some() {
                // Offload state is metadata an NF may have written.
                let o = p.offload();
                match o.check(p.data().len()) {
                    Ok(()) => {
                        self.stats.tx_gso += u64::from(o.is_gso());
                        write_vnet(fd, &o.vnet(), p.data())
                    }
                    Err(e) => {
                        self.stats.offload_error(e);
                        Err(io::Error::from_raw_os_error(libc::EINVAL))
                    }
                }
            } else {
                write_frame(fd, p.data())
            };
            match sent {
                Ok(_) => bytes += p.data().len() as u64,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted =>
                {
                    break
                }
                // EIO while the interface is down, EINVAL for a runt: the
                // frame is refused and counted.
                Err(_) => errors += 1,
            }
            done += 1;
        }
        self.stats.tx_packets += (done - errors) as u64;
        self.stats.tx_errors += errors as u64;
        self.stats.tx_bytes += bytes;
        let mut i = 0;
        batch.retain(
            |_| {
                i += 1;
                i > done
            },
            |h| cache.free(h),
        );
        Ok(done)
    }

    fn offloads(&self) -> bool {
        self.overflow.is_some()
    }

    fn handover(&self) -> Vec<RawFd> {
        self.fds.iter().map(|f| f.as_raw_fd()).collect()
    }

    fn adopted(&self) -> bool {
        self.adopted
    }

    fn rx_fd(&self) -> Option<RawFd> {
        match &self.ready {
            Some(r) => Some(r.fd()),
            None => self.fds.first().map(|f| f.as_raw_fd()),
        }
    }

    fn stats(&self) -> NicStats {
        self.stats
    }
}
