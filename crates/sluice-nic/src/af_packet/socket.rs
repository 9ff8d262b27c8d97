//! The AF_PACKET socket: creation, ring and option setup, binding, batch
//! send and kernel drop statistics.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use sluice_packet::gso::VNET_HDR_LEN;

use crate::options::{AfPacketOptions, FanoutMode, RingVersion};
use crate::sys::{check, os_error};
use crate::NicError;

/// Bytes per frame slot: the V3 ring's frame accounting unit, and a V2
/// slot (header plus up to ≈ 1.9 KiB of frame; longer frames are cut and
/// counted as oversize).
pub(crate) const FRAME_SIZE: usize = 2048;

/// One configured, bound AF_PACKET socket (receive ring not yet mapped).
pub(crate) struct PacketSocket {
    fd: OwnedFd,
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live, initialised `T` of the size passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

impl PacketSocket {
    /// Opens a socket on interface `ifindex` with a TPACKET_V3 receive ring
    /// of `o.blocks` blocks of `o.block_size` bytes, ignoring frames it
    /// sends itself, and joins fanout group `group` when `fanout`.
    pub(crate) fn open(
        ifname: &str,
        ifindex: u32,
        o: &AfPacketOptions,
        fanout: Option<u16>,
    ) -> Result<PacketSocket, NicError> {
        // Protocol 0: receive nothing until bound to the interface, so no
        // frame of another interface slips into the ring.
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })
        .map_err(|e| os_error("cannot open an AF_PACKET socket", e))?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let frame_size = FRAME_SIZE as u32;
        let frames = o.block_size / frame_size * o.blocks;
        if o.offload && o.ring == RingVersion::V2 {
            copy_big_frames(raw)?;
        }
        if o.offload {
            // Before the ring: the kernel refuses it once a ring exists.
            let one: libc::c_int = 1;
            setsockopt(raw, libc::SOL_PACKET, PACKET_VNET_HDR, &one).map_err(|e| {
                os_error("cannot set PACKET_VNET_HDR (needed by `offload: true`)", e)
            })?;
        }
        match o.ring {
            RingVersion::V3 => {
                let v = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
                setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &v)
                    .map_err(|e| os_error("cannot select TPACKET_V3", e))?;
                let req = libc::tpacket_req3 {
                    tp_block_size: o.block_size,
                    tp_block_nr: o.blocks,
                    tp_frame_size: frame_size,
                    tp_frame_nr: frames,
                    tp_retire_blk_tov: o.block_timeout_ms,
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                };
                setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
                    .map_err(|e| os_error("cannot set up the AF_PACKET receive ring", e))?;
            }
            RingVersion::V2 => {
                let v = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
                setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &v)
                    .map_err(|e| os_error("cannot select TPACKET_V2", e))?;
                let req = libc::tpacket_req {
                    tp_block_size: o.block_size,
                    tp_block_nr: o.blocks,
                    tp_frame_size: frame_size,
                    tp_frame_nr: frames,
                };
                setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
                    .map_err(|e| os_error("cannot set up the AF_PACKET receive ring", e))?;
            }
        }
        let one: libc::c_int = 1;
        // A bump in the wire sends on the interfaces it reads: without this
        // every transmitted frame would come back as input. Linux ≥ 4.20.
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one).map_err(|e| {
            os_error(
                "cannot set PACKET_IGNORE_OUTGOING (Linux 4.20 or later is needed)",
                e,
            )
        })?;
        if o.qdisc_bypass {
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one)
                .map_err(|e| os_error("cannot set PACKET_QDISC_BYPASS", e))?;
        }
        let sll = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        check(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map_err(|e| os_error(&format!("cannot bind an AF_PACKET socket to `{ifname}`"), e))?;
        if o.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as i32,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            // The membership ends with the socket, so promiscuous mode is
            // undone however sluice exits.
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| os_error(&format!("cannot make `{ifname}` promiscuous"), e))?;
        }
        if let Some(group) = fanout {
            let mode = match o.fanout {
                FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
                FanoutMode::Lb => libc::PACKET_FANOUT_LB,
                FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
            } | libc::PACKET_FANOUT_FLAG_DEFRAG;
            let arg: libc::c_uint = u32::from(group) | (mode << 16);
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg).map_err(|e| {
                os_error(
                    &format!(
                        "cannot join PACKET_FANOUT group {group} on `{ifname}` (another \
                         program may use that group id: set `fanout_group`)"
                    ),
                    e,
                )
            })?;
        }
        Ok(PacketSocket { fd })
    }

    /// The descriptor.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames the kernel dropped for a full ring since the last call
    /// (PACKET_STATISTICS resets on read).
    pub(crate) fn take_drops(&self) -> u64 {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` are live and sized for the kernel's copy.
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r < 0 {
            0
        } else {
            u64::from(st.tp_drops)
        }
    }
}

/// `PACKET_VNET_HDR` from <linux/if_packet.h>.
const PACKET_VNET_HDR: libc::c_int = 15;

/// `PACKET_COPY_THRESH` from <linux/if_packet.h>.
const PACKET_COPY_THRESH: libc::c_int = 7;

/// Receive buffer for the super-packets a TPACKET_V2 socket with
/// `offload` queues beside its ring: 256 of them.
const COPY_RCVBUF: libc::c_int = 24 << 20;

/// With TPACKET_V2 and `offload`, frames longer than a slot (super-packets)
/// are not cut: the kernel puts their head in the slot with
/// `TP_STATUS_COPY` and queues the whole frame on the socket
/// (`PACKET_COPY_THRESH`), to be read with [`recv_copied`] straight into a
/// large buffer. That is one copy of a super-packet instead of two (into
/// the ring, then out of it), and slots stay 2 KiB.
fn copy_big_frames(raw: RawFd) -> Result<(), NicError> {
    let one: libc::c_int = 1;
    setsockopt(raw, libc::SOL_PACKET, PACKET_COPY_THRESH, &one)
        .map_err(|e| os_error("cannot set PACKET_COPY_THRESH", e))?;
    // SO_RCVBUFFORCE passes rmem_max (CAP_NET_ADMIN); SO_RCVBUF is capped
    // by it, which still works with fewer super-packets in flight.
    if setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &COPY_RCVBUF).is_err() {
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &COPY_RCVBUF)
            .map_err(|e| os_error("cannot size the socket's receive buffer", e))?;
    }
    Ok(())
}

/// Reads the next frame queued on a `copy_big_frames` socket: its
/// virtio-net header into `hdr`, the frame into `room`. Returns the
/// frame's full length, which exceeds `room.len()` if it was cut.
pub(crate) fn recv_copied(
    fd: RawFd,
    hdr: &mut [u8; VNET_HDR_LEN],
    room: &mut [u8],
) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: VNET_HDR_LEN,
        },
        libc::iovec {
            iov_base: room.as_mut_ptr().cast(),
            iov_len: room.len(),
        },
    ];
    // SAFETY: msghdr is plain C data; all-zero (no name, no control) is
    // valid, and the iovec fields are set right below.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = 2;
    // SAFETY: `m` points at two iovecs over live, writable, disjoint
    // buffers of the lengths given, alive across the call. MSG_TRUNC makes
    // the kernel return the frame's real length.
    let r = unsafe { libc::recvmsg(fd, &mut m, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r as usize).saturating_sub(VNET_HDR_LEN))
}

/// Up to this many frames per `sendmmsg` call.
pub(crate) const SEND_BATCH: usize = 64;

/// One frame to send: its bytes and, on a PACKET_VNET_HDR socket, the
/// virtio-net header to put before it.
#[derive(Clone, Copy)]
pub(crate) struct OutFrame {
    pub ptr: *const u8,
    pub len: usize,
    pub vnet: [u8; VNET_HDR_LEN],
}

impl OutFrame {
    pub(crate) const EMPTY: OutFrame = OutFrame {
        ptr: std::ptr::null(),
        len: 0,
        vnet: [0; VNET_HDR_LEN],
    };
}

/// Reusable message headers for [`send_batch`], so sending allocates
/// nothing.
pub(crate) struct SendBufs {
    iov: [[libc::iovec; 2]; SEND_BATCH],
    vnet: [[u8; VNET_HDR_LEN]; SEND_BATCH],
    msgs: [libc::mmsghdr; SEND_BATCH],
}

// SAFETY: the raw pointers inside are scratch filled and consumed within
// one `send_batch` call; between calls they are dead values.
unsafe impl Send for SendBufs {}

impl SendBufs {
    /// Empty headers.
    pub(crate) fn new() -> Box<SendBufs> {
        // SAFETY: iovec and mmsghdr are plain C structs for which all-zero
        // (null pointers, zero lengths) is a valid value.
        Box::new(unsafe { std::mem::zeroed() })
    }
}

/// How one `sendmmsg` call went.
pub(crate) enum SendOutcome {
    /// This many frames (from the front) were queued.
    Sent(usize),
    /// Nothing could be queued now (socket buffer full); retry later.
    Busy,
    /// The first frame was refused (too long, link down).
    Refused,
}

/// Sends `frames` on `fd` in one `sendmmsg` call, each after its
/// virtio-net header when `vnet` (a PACKET_VNET_HDR socket).
///
/// One syscall per batch, with the kernel copying straight from the arena
/// buffers: no user-space copy into a TX ring first.
pub(crate) fn send_batch(
    fd: RawFd,
    bufs: &mut SendBufs,
    frames: &[OutFrame],
    vnet: bool,
) -> SendOutcome {
    let n = frames.len().min(SEND_BATCH);
    for (i, f) in frames[..n].iter().enumerate() {
        let data = libc::iovec {
            iov_base: f.ptr as *mut libc::c_void,
            iov_len: f.len,
        };
        let parts = if vnet {
            bufs.vnet[i] = f.vnet;
            bufs.iov[i] = [
                libc::iovec {
                    iov_base: bufs.vnet[i].as_mut_ptr().cast(),
                    iov_len: VNET_HDR_LEN,
                },
                data,
            ];
            2
        } else {
            bufs.iov[i][0] = data;
            1
        };
        let iov: *mut libc::iovec = bufs.iov[i].as_mut_ptr();
        let m = &mut bufs.msgs[i];
        m.msg_hdr.msg_name = std::ptr::null_mut();
        m.msg_hdr.msg_namelen = 0;
        m.msg_hdr.msg_iov = iov;
        m.msg_hdr.msg_iovlen = parts;
        m.msg_hdr.msg_control = std::ptr::null_mut();
        m.msg_hdr.msg_controllen = 0;
        m.msg_hdr.msg_flags = 0;
        m.msg_len = 0;
    }
    // SAFETY: `msgs[..n]` are initialised above and each points at one or
    // two iovecs in `bufs` describing readable bytes: its virtio-net header
    // in `bufs.vnet` and `len` bytes of an arena buffer the caller owns,
    // all alive for the duration of the call.
    let r = unsafe {
        libc::sendmmsg(
            fd,
            bufs.msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if r >= 0 {
        return SendOutcome::Sent(r as usize);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => SendOutcome::Busy,
        _ => SendOutcome::Refused,
    }
}
