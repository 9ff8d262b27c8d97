//! What an NF can reach besides its packets: time, counters, and packet
//! allocation and emission.

use sluice_mem::{Arena, NfControl, NfStats, EXT_COUNTERS, NF_COUNTERS};

use crate::drop_reason::DropReason;
use crate::owned::{OwnedPacket, PacketIo};
use crate::packet::Packet;
use crate::verdict::Verdict;

/// Chain index of a packet that belongs to no chain (fresh allocations):
/// `Verdict::Next` on it is an invalid-metadata drop.
pub const NO_CHAIN: u16 = u16::MAX;

/// Writes raw entries into the NF's transmit ring (fault injection only).
pub type RawOutput<'a> = &'a mut dyn FnMut(&[u32]) -> usize;

/// Per-call context handed to an NF.
pub struct Context<'a> {
    control: &'a NfControl,
    arena: &'a Arena,
    now_ns: u64,
    raw_output: Option<RawOutput<'a>>,
    io: Option<&'a mut dyn PacketIo>,
    /// Inside an element graph: the element's counters live in the
    /// extended counters from this index.
    ext_base: Option<usize>,
}

impl<'a> Context<'a> {
    /// A context publishing counters into `control`, with no packet I/O
    /// (`alloc` returns `None`, `emit` refuses).
    pub fn new(control: &'a NfControl, arena: &'a Arena, now_ns: u64) -> Self {
        Context {
            control,
            arena,
            now_ns,
            raw_output: None,
            io: None,
            ext_base: None,
        }
    }

    /// A context for an element of an element graph: the same services,
    /// with the element's counters `i` mapped to extended counters
    /// `ext_base + i` (so elements do not share counters).
    pub fn for_element(&mut self, ext_base: usize) -> Context<'_> {
        Context {
            control: self.control,
            arena: self.arena,
            now_ns: self.now_ns,
            raw_output: None,
            io: match &mut self.io {
                Some(io) => Some(&mut **io),
                None => None,
            },
            ext_base: Some(ext_base),
        }
    }

    /// Adds packet allocation and emission through `io`.
    pub fn with_io(mut self, io: &'a mut dyn PacketIo) -> Self {
        self.io = Some(io);
        self
    }

    /// Adds raw ring output (process NFs only; fault injection).
    pub fn with_raw_output(mut self, raw: RawOutput<'a>) -> Self {
        self.raw_output = Some(raw);
        self
    }

    /// A fresh empty buffer (length 0, full headroom, no chain position:
    /// give it a `ToPort`/`ToNf`/`Drop` verdict), or `None` when none is
    /// available now (the NF's `alloc_reserve` is used up; count it).
    pub fn alloc(&mut self) -> Option<OwnedPacket> {
        let mut handle = self.io.as_mut()?.alloc()?;
        let mut p = self.arena.pkt(&mut handle);
        p.reset(0);
        p.set_chain(NO_CHAIN);
        p.set_port_in(u16::MAX);
        p.set_flow_id(u32::MAX);
        p.set_timestamp_ns(self.now_ns);
        Some(OwnedPacket {
            handle,
            fresh: true,
        })
    }

    /// A copy of `src`: its bytes and metadata, including its chain
    /// position, so `Verdict::Next` continues `src`'s chain after this NF.
    pub fn alloc_copy(&mut self, src: &Packet<'_>) -> Option<OwnedPacket> {
        let mut handle = self.io.as_mut()?.alloc()?;
        let mut p = self.arena.pkt(&mut handle);
        src.copy_into(&mut p);
        Some(OwnedPacket {
            handle,
            fresh: true,
        })
    }

    /// Read/write view of an owned packet.
    pub fn view<'p>(&'p self, p: &'p mut OwnedPacket) -> Packet<'p> {
        Packet::new(self.arena.pkt(&mut p.handle))
    }

    /// Sends `p` on with verdict `v` when the current call returns. Gives
    /// `p` back when this call cannot emit more now (its output queue of
    /// `MAX_BATCH` is full, or the NF runs without packet I/O): keep it and
    /// retry later, or give it up with [`Self::discard`].
    pub fn emit(&mut self, mut p: OwnedPacket, v: Verdict) -> Result<(), OwnedPacket> {
        let Some(io) = self.io.as_mut() else {
            return Err(p);
        };
        self.arena.pkt(&mut p.handle).set_verdict_raw(v.encode());
        let fresh = p.fresh;
        io.emit(p.handle, fresh)
            .map_err(|handle| OwnedPacket { handle, fresh })
    }

    /// Gives up `p`. A buffer from [`Self::alloc`] goes back unused (no
    /// packet was lost). A packet taken from a batch is emitted as a drop
    /// under `nf_discarded`, so the loss is counted; prefer emitting it
    /// with a drop verdict of the NF's own.
    pub fn discard(&mut self, p: OwnedPacket) {
        if p.fresh {
            if let Some(io) = self.io.as_mut() {
                io.give_back(p.handle);
            }
            return;
        }
        if let Err(p) = self.emit(p, Verdict::Drop(DropReason::DISCARDED)) {
            // The output queue is full: the handle stays owned by this NF
            // and is reclaimed (and counted) when the NF stops.
            let _ = p;
        }
    }

    /// Adds `v` to extended counter `index` (0..1024, e.g. hits per rule),
    /// reported as `nfs[].ext_counters`; out-of-range indices are ignored,
    /// and so is every call from an element of a `graph` (whose extended
    /// counters carry the elements' named counters).
    #[inline]
    pub fn count_ext(&mut self, index: usize, v: u64) {
        // Inside an element graph the extended counters hold the elements'
        // own counters, so an element's extended counters are not kept.
        if index < EXT_COUNTERS && self.ext_base.is_none() {
            NfStats::add(&self.control.ext.0[index], v);
            self.control.mark_ext_used(index);
        }
    }

    /// Fault injection: writes arbitrary entries into this NF's transmit
    /// ring, as a hostile NF could. Returns how many were written (0 for
    /// inline NFs, whose code the platform trusts). Only the `chaos` NF
    /// uses this, to prove the platform validates what NFs return.
    pub fn inject_raw_output(&mut self, raw: &[u32]) -> usize {
        match &mut self.raw_output {
            Some(f) => f(raw),
            None => 0,
        }
    }

    /// Time at the start of this batch (CLOCK_MONOTONIC ns); one clock read
    /// per batch, not per packet.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Adds `v` to NF-specific counter `index` (named by the NF type's
    /// `counters`); out-of-range indices are ignored.
    #[inline]
    pub fn count(&mut self, index: usize, v: u64) {
        if let Some(base) = self.ext_base {
            if index < NF_COUNTERS {
                if let Some(c) = self.control.ext.0.get(base + index) {
                    NfStats::add(c, v);
                    self.control.mark_ext_used(base + index);
                }
            }
        } else if let Some(c) = self.control.counters.get(index) {
            NfStats::add(c, v);
        }
    }

    /// Sets NF-specific counter `index` to `v` (a gauge).
    #[inline]
    pub fn set_gauge(&mut self, index: usize, v: u64) {
        if index >= NF_COUNTERS {
            return;
        }
        let c = match self.ext_base {
            Some(base) => {
                let c = self.control.ext.0.get(base + index);
                if c.is_some() {
                    self.control.mark_ext_used(base + index);
                }
                c
            }
            None => self.control.counters.get(index),
        };
        if let Some(c) = c {
            c.store(v, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
