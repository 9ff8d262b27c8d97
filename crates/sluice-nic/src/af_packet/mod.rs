//! `af_packet` ports: an interface read through TPACKET_V3 (or, with
//! `ring: v2`, TPACKET_V2) receive rings and written with `sendmmsg`.
//!
//! Receive: each socket has a ring of blocks the kernel fills; a block is
//! handed over when full or after `block_timeout_ms`, and every frame in it
//! is copied into an arena buffer (AF_PACKET cannot receive into memory it
//! does not own, so that copy is inherent). Stripped VLAN tags are put
//! back. With `queues > 1` the sockets form one PACKET_FANOUT group.
//!
//! Transmit: `sendmmsg` of up to 64 frames per call straight from the arena
//! buffers. A TX ring would need a copy into the ring *and* a syscall to
//! kick it, so it saves nothing over `sendmmsg`, whose kernel copy into the
//! skb is the only copy on this path.
//!
//! Frames the port sends are not read back (PACKET_IGNORE_OUTGOING), so the
//! same interface can be a chain's input and another chain's output.
//!
//! With `offload: true` the socket has PACKET_VNET_HDR: the kernel puts a
//! virtio-net header before every received frame and expects one before
//! every sent frame. GSO/GRO super-packets then arrive whole (into a large
//! buffer) with their GSO type and size, frames with partial checksums
//! with their checksum offsets, and both leave as they came: the kernel
//! (or the next device, for a veth) segments and checksums them.

mod ring;
mod socket;

use std::os::fd::RawFd;

use sluice_mem::{Arena, HandleBatch, PoolCache, DATA_ROOM, MAX_PKT_LEN};
use sluice_packet::gso::{GsoError, Offload};

use crate::options::{AfPacketOptions, RingVersion};
use crate::sampled::Sampled;
use crate::sys::{self, ReadySet};
use crate::{NicError, NicPort, NicStats};
use ring::RxRing;
use socket::{
    recv_copied, send_batch, OutFrame, PacketSocket, SendBufs, SendOutcome, FRAME_SIZE, SEND_BATCH,
};

struct Queue {
    ring: RxRing,
    sock: PacketSocket,
}

/// An AF_PACKET port on one interface.
pub struct AfPacketPort {
    queues: Vec<Queue>,
    /// Next queue to read first (round robin, so none starves).
    next_rx: usize,
    ready: Option<ReadySet>,
    send: Box<SendBufs>,
    /// PACKET_VNET_HDR is on (`offload: true`).
    offload: bool,
    stats: NicStats,
    /// Kernel ring drops read so far (PACKET_STATISTICS resets on read; a
    /// getsockopt per transmit burst would cost ≈ 0.3 µs, the sample's
    /// clock read ≈ 20 ns).
    kernel_drops: Sampled<u64>,
}

impl AfPacketPort {
    /// Opens `o.queues` sockets on `interface`. With `o.queues > 1`, or
    /// when `workers > 1` workers each open their own copy of the port,
    /// the sockets join one `PACKET_FANOUT` group (the same group for every
    /// copy in this process).
    pub fn open(
        interface: &str,
        o: &AfPacketOptions,
        workers: u16,
    ) -> Result<AfPacketPort, NicError> {
        let ifindex = sys::if_index(interface)?;
        let fanout = (o.queues > 1 || workers > 1).then(|| {
            o.fanout_group.unwrap_or_else(|| {
                // Unique per process and interface, so two sluice instances
                // (or two ports) never join each other's group.
                (std::process::id() as u16) ^ (ifindex as u16).rotate_left(11)
            })
        });
        let mut queues = Vec::with_capacity(o.queues as usize);
        for _ in 0..o.queues {
            let sock = PacketSocket::open(interface, ifindex, o, fanout)?;
            let v2 = (o.ring == RingVersion::V2).then_some(FRAME_SIZE);
            let ring = RxRing::map(
                sock.fd(),
                o.block_size as usize,
                o.blocks as usize,
                v2,
                o.offload,
            )?;
            queues.push(Queue { ring, sock });
        }
        let ready = if queues.len() > 1 {
            let fds: Vec<RawFd> = queues.iter().map(|q| q.sock.fd()).collect();
            Some(ReadySet::new(&fds)?)
        } else {
            None
        };
        Ok(AfPacketPort {
            queues,
            next_rx: 0,
            ready,
            send: SendBufs::new(),
            offload: o.offload,
            stats: NicStats::default(),
            kernel_drops: Sampled::new(0),
        })
    }
}

/// Copies `frame` into `out`, re-inserting an 802.1Q tag the kernel
/// stripped (`tag` = (TPID, TCI)). Returns the length, or `None` if it does
/// not fit.
fn copy_frame(out: &mut [u8], frame: &[u8], tag: Option<(u16, u16)>) -> Option<usize> {
    match tag {
        None => {
            let dst = out.get_mut(..frame.len())?;
            dst.copy_from_slice(frame);
            Some(frame.len())
        }
        Some((tpid, tci)) => {
            let len = frame.len() + 4;
            if frame.len() < 12 || len > out.len() {
                return None;
            }
            out[..12].copy_from_slice(&frame[..12]);
            out[12..14].copy_from_slice(&tpid.to_be_bytes());
            out[14..16].copy_from_slice(&tci.to_be_bytes());
            out[16..len].copy_from_slice(&frame[12..]);
            Some(len)
        }
    }
}

/// `TP_STATUS_COPY`: the frame was longer than the slot and is queued on
/// the socket (<linux/if_packet.h>).
const TP_STATUS_COPY: u32 = 1 << 1;

impl AfPacketPort {
    /// Reads a super-packet the kernel queued beside a TPACKET_V2 ring
    /// into large buffer `h` (putting back a stripped VLAN `tag`); `None`
    /// when it was refused (and counted).
    fn rx_copied(
        stats: &mut NicStats,
        fd: RawFd,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        mut h: sluice_mem::PktHandle,
        tag: Option<(u16, u16)>,
    ) -> Option<sluice_mem::PktHandle> {
        let mut p = arena.pkt(&mut h);
        p.reset(0);
        let room = p.room_mut();
        let skip = if tag.is_some() { 4 } else { 0 };
        let room_len = room.len().min(MAX_PKT_LEN) - skip;
        let mut hdr = [0u8; sluice_packet::gso::VNET_HDR_LEN];
        let got = recv_copied(fd, &mut hdr, &mut room[skip..skip + room_len]);
        let len = match got {
            Ok(len) if len > 0 && len <= room_len => len,
            _ => {
                // Cut, or not there (the kernel found no room for it).
                stats.rx_oversize += 1;
                cache.free(h);
                return None;
            }
        };
        let o = match Offload::from_vnet(&hdr, len) {
            Ok(o) => o.shifted(skip as u16),
            Err(e) => {
                stats.offload_error(e);
                cache.free(h);
                return None;
            }
        };
        if let Some((tpid, tci)) = tag {
            if len < 12 {
                stats.rx_oversize += 1;
                cache.free(h);
                return None;
            }
            room.copy_within(4..16, 0);
            room[12..14].copy_from_slice(&tpid.to_be_bytes());
            room[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        let len = len + skip;
        p.set_len(len);
        p.set_offload(&o);
        stats.rx_gso += u64::from(o.is_gso());
        stats.rx_bytes += len as u64;
        Some(h)
    }
}

impl NicPort for AfPacketPort {
    fn kind(&self) -> &'static str {
        "af_packet"
    }

    // ≈ one 64 B memcpy plus ring bookkeeping per frame; no syscall (the
    // ring is shared memory).
    fn rx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<usize, NicError> {
        let mut n = 0;
        let nq = self.queues.len();
        for k in 0..nq {
            let q = &mut self.queues[(self.next_rx + k) % nq];
            while n < max && !out.is_full() {
                let Some(f) = q.ring.peek() else { break };
                let tag = (f.status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                    let tpid = if f.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        f.vlan_tpid
                    } else {
                        0x8100
                    };
                    (tpid, f.vlan_tci)
                });
                let extra = if tag.is_some() { 4 } else { 0 };
                if self.offload && f.status & TP_STATUS_COPY != 0 {
                    // A super-packet on a TPACKET_V2 ring: its head is in
                    // the slot, the frame itself in the socket's queue.
                    if cache.pool().large_capacity() == 0 {
                        self.stats.rx_oversize += 1;
                    } else {
                        let Some(h) = cache.alloc_large() else {
                            return Ok(n); // later, with the slot
                        };
                        if let Some(h) =
                            Self::rx_copied(&mut self.stats, q.sock.fd(), arena, cache, h, tag)
                        {
                            let _ = out.push(h);
                            n += 1;
                        }
                    }
                    q.ring.consume();
                    continue;
                }
                let len = f.data.len() + extra;
                let fits = if self.offload {
                    len <= DATA_ROOM || (len <= MAX_PKT_LEN && cache.pool().large_capacity() > 0)
                } else {
                    len <= DATA_ROOM
                };
                if f.wire_len as usize != f.data.len() || !fits {
                    // Larger than any buffer: jumbo frames, or (without
                    // `offload: true`) GRO/GSO super-frames.
                    self.stats.rx_oversize += 1;
                    q.ring.consume();
                    continue;
                }
                let offload = if self.offload {
                    let o = f
                        .vnet
                        .ok_or(GsoError::BadVnetHeader)
                        .and_then(|h| Offload::from_vnet(&h, f.data.len()));
                    match o {
                        // The kernel's offsets count from the frame it
                        // stripped the tag from.
                        Ok(o) => o.shifted(extra as u16),
                        Err(e) => {
                            self.stats.offload_error(e);
                            q.ring.consume();
                            continue;
                        }
                    }
                } else {
                    Offload::NONE
                };
                let h = if len <= DATA_ROOM {
                    cache.alloc()
                } else {
                    cache.alloc_large()
                };
                let Some(mut h) = h else {
                    // No buffer: leave the frame in the ring for later.
                    return Ok(n);
                };
                let mut p = arena.pkt(&mut h);
                p.reset(0);
                match copy_frame(p.room_mut(), f.data, tag) {
                    Some(len) => {
                        p.set_len(len);
                        if offload != Offload::NONE {
                            p.set_offload(&offload);
                            self.stats.rx_gso += u64::from(offload.is_gso());
                        }
                        self.stats.rx_bytes += len as u64;
                        let _ = out.push(h);
                        n += 1;
                    }
                    None => {
                        self.stats.rx_oversize += 1;
                        cache.free(h);
                    }
                }
                q.ring.consume();
            }
        }
        self.next_rx = (self.next_rx + 1) % nq;
        self.stats.rx_packets += n as u64;
        Ok(n)
    }

    // One sendmmsg per 64 frames (the kernel's copy into the skb is the
    // only copy); see the module doc for why not a TX ring.
    fn tx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        batch: &mut HandleBatch,
    ) -> Result<usize, NicError> {
        let fd = self.queues[0].sock.fd();
        let mut frames = [OutFrame::EMPTY; SEND_BATCH];
        let mut removed = 0;
        while !batch.is_empty() {
            let n = batch.len().min(SEND_BATCH);
            let mut bytes = [0usize; SEND_BATCH];
            let mut gso = [false; SEND_BATCH];
            let mut ready = 0;
            let mut bad = None;
            for (i, slot) in frames[..n].iter_mut().enumerate() {
                let Some(h) = batch.get_mut(i) else { break };
                let p = arena.pkt(h);
                let d = p.data();
                // The pointer stays valid after the view ends: the arena
                // mapping is fixed and `batch` keeps owning the buffer.
                *slot = OutFrame {
                    ptr: d.as_ptr(),
                    len: d.len(),
                    vnet: [0; sluice_packet::gso::VNET_HDR_LEN],
                };
                if self.offload && p.has_offload() {
                    // Offload state is metadata an NF may have written.
                    let o = p.offload();
                    if let Err(e) = o.check(d.len()) {
                        bad = Some(e);
                        break;
                    }
                    slot.vnet = o.vnet();
                    gso[i] = o.is_gso();
                }
                bytes[i] = d.len();
                ready += 1;
            }
            let (sent, refused) = if ready == 0 {
                // The first frame's offload state is corrupt: refuse it.
                if let Some(e) = bad {
                    self.stats.offload_error(e);
                }
                (0, 1)
            } else {
                match send_batch(fd, &mut self.send, &frames[..ready], self.offload) {
                    SendOutcome::Sent(k) => (k, 0),
                    SendOutcome::Busy => break,
                    // The first frame was refused (too long for the MTU,
                    // link down): count it and go on with the rest.
                    SendOutcome::Refused => (0, 1),
                }
            };
            self.stats.tx_packets += sent as u64;
            self.stats.tx_bytes += bytes[..sent].iter().sum::<usize>() as u64;
            self.stats.tx_gso += gso[..sent].iter().filter(|&&g| g).count() as u64;
            self.stats.tx_errors += refused as u64;
            let take = sent + refused;
            let mut i = 0;
            batch.retain(
                |_| {
                    i += 1;
                    i > take
                },
                |h| cache.free(h),
            );
            removed += take;
            if take == 0 || (take < n && bad.is_none()) {
                break;
            }
        }
        Ok(removed)
    }

    fn offloads(&self) -> bool {
        self.offload
    }

    fn rx_fd(&self) -> Option<RawFd> {
        match &self.ready {
            Some(r) => Some(r.fd()),
            None => self.queues.first().map(|q| q.sock.fd()),
        }
    }

    fn counters(&self) -> NicStats {
        self.stats
    }

    fn stats(&self) -> NicStats {
        let drops = self
            .kernel_drops
            .get(|d| d + self.queues.iter().map(|q| q.sock.take_drops()).sum::<u64>());
        NicStats {
            rx_dropped: drops,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::copy_frame;

    #[test]
    fn vlan_tags_are_put_back_after_the_mac_addresses() {
        let frame: Vec<u8> = (0u8..20).collect();
        let mut out = [0u8; 64];
        let n = copy_frame(&mut out, &frame, Some((0x8100, 0x0123))).unwrap();
        assert_eq!(n, 24);
        assert_eq!(&out[..12], &frame[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x01, 0x23]);
        assert_eq!(&out[16..24], &frame[12..]);
    }

    #[test]
    fn frames_that_do_not_fit_are_refused() {
        let frame = [0u8; 30];
        let mut out = [0u8; 32];
        assert_eq!(copy_frame(&mut out, &frame, None), Some(30));
        assert_eq!(copy_frame(&mut out, &frame, Some((0x8100, 1))), None);
        assert_eq!(copy_frame(&mut out, &frame[..8], Some((0x8100, 1))), None);
    }
}
