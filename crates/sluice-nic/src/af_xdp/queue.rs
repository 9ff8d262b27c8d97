//! One queue of an AF_XDP port: its socket and the arena buffers it lent
//! the kernel, and the three things done per poll — take received frames,
//! top the fill ring up, take back what the kernel finished sending.

use sluice_mem::{Arena, HandleBatch, PoolCache, BUF_STRIDE, META_SIZE};

use super::lent::Lent;
use super::xsk::{Xsk, OFFSET_SHIFT};
use crate::NicStats;

/// A buffer's fill address is its first byte after the metadata: the
/// kernel never writes the metadata, and the frame lands
/// `XDP_PACKET_HEADROOM` (256 B) further, at byte 320 of the buffer, with
/// 1,920 B of room after it.
const FILL_OFFSET: u64 = META_SIZE as u64;
/// The UMEM chunk: from the fill address to the buffer's end.
pub(super) const CHUNK: u32 = (BUF_STRIDE - META_SIZE) as u32;
const ADDR_MASK: u64 = (1 << OFFSET_SHIFT) - 1;

pub(super) struct Queue {
    pub xsk: Xsk,
    /// Buffers on this socket's fill ring or in flight on its TX ring.
    pub lent: Lent,
    /// Entries of each ring.
    pub ring: u32,
}

impl Queue {
    /// Takes up to `max` received frames: each is already in an arena
    /// buffer (the kernel wrote it there), so receiving is handing the
    /// lent handle over, then refilling the fill ring.
    pub(super) fn rx(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: u32,
        stats: &mut NicStats,
    ) -> usize {
        self.reap_completions(arena, cache);
        let x = &mut self.xsk;
        let n = x.rx.peek(max);
        let mut appended = 0;
        for i in 0..n {
            let d = x.rx.read(i);
            let fill = d.addr & ADDR_MASK;
            let at = fill + (d.addr >> OFFSET_SHIFT);
            // An address naming no buffer we lent would be a kernel bug:
            // the frame is counted lost and nothing else is touched.
            let Some((index, start)) = arena.dma_buffer(fill) else {
                stats.rx_dropped += 1;
                continue;
            };
            let Some(mut h) = self.lent.take(index) else {
                stats.rx_dropped += 1;
                continue;
            };
            // The kernel's offset is checked like any other input: the
            // frame must lie inside the buffer's room.
            if !arena
                .pkt(&mut h)
                .reset_at((at - start) as usize, d.len as usize)
            {
                stats.rx_oversize += 1;
                cache.free(h);
                continue;
            }
            match out.push(h) {
                Ok(()) => {
                    stats.rx_packets += 1;
                    stats.rx_bytes += u64::from(d.len);
                    appended += 1;
                }
                Err(h) => cache.free(h),
            }
        }
        if n > 0 {
            x.rx.release(n);
        }
        self.refill(arena, cache);
        let x = &mut self.xsk;
        // Zero-copy drivers stop polling when the fill ring ran dry and ask
        // for a wakeup; copy mode never sets the flag, so this syscall runs
        // only when the kernel asked for it.
        if x.fill.needs_wakeup() {
            x.kick_rx();
        }
        // Frames a previous tx_burst left on the TX ring (the kernel took
        // fewer than asked) must not wait for the next transmit: one more
        // wakeup, only when some are pending.
        if x.tx.needs_wakeup() && x.tx.pending() > 0 {
            let _ = x.kick_tx();
        }
        appended
    }

    /// Tops the fill ring up with fresh arena buffers. With the pool dry
    /// it stays short, and the kernel drops (and counts) what finds no
    /// buffer: the same as a NIC whose descriptors ran out.
    fn refill(&mut self, arena: &Arena, cache: &mut PoolCache<'_>) {
        let x = &mut self.xsk;
        let room = x.fill.free(self.ring);
        let mut k = 0;
        while k < room {
            let Some(h) = cache.alloc() else { break };
            let addr = arena.dma_offset(&h) + FILL_OFFSET;
            match self.lent.put(h) {
                Ok(()) => {
                    x.fill.write(k, addr);
                    k += 1;
                }
                Err(h) => {
                    cache.free(h);
                    break;
                }
            }
        }
        if k > 0 {
            x.fill.submit(k);
        }
    }

    /// Frees the buffers of frames the kernel finished sending.
    pub(super) fn reap_completions(&mut self, arena: &Arena, cache: &mut PoolCache<'_>) {
        let x = &mut self.xsk;
        let n = x.comp.peek(u32::MAX);
        for i in 0..n {
            let addr = x.comp.read(i);
            if let Some(h) = arena.dma_buffer(addr).and_then(|(i, _)| self.lent.take(i)) {
                cache.free(h);
            }
        }
        if n > 0 {
            x.comp.release(n);
        }
    }
}
