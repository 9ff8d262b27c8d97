//! The four single-producer/single-consumer rings an XSK shares with the
//! kernel (fill, completion, RX, TX), as mapped by `mmap` on the socket.
//!
//! Each ring is a power-of-two array of entries plus a producer index, a
//! consumer index and a flags word, all `u32` in the shared mapping. We are
//! producer of fill and TX and consumer of completion and RX. The indices are
//! free-running; the side that owns an index publishes it with a release
//! store after writing (or reading) the entries, and reads the other side's
//! with an acquire load — the same protocol as libxdp's `xsk.h`. The local
//! copies (`cached_*`) keep the shared cache lines from bouncing: the other
//! side's index is re-read only when the cached view runs out.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// A mapped ring of entries of type `T` (`u64` addresses for fill and
/// completion, `libc::xdp_desc` for RX and TX).
pub(crate) struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    /// Our producer index (producer rings) or consumer index (consumer rings).
    local: u32,
    /// Last seen index of the other side (consumer rings: its producer;
    /// producer rings: its consumer plus the ring size, i.e. the first index
    /// we may not write).
    other: u32,
    map: NonNull<u8>,
    map_len: usize,
}

impl<T: Copy> Ring<T> {
    /// Views a ring mapping.
    ///
    /// # Safety
    ///
    /// `map` must be a mapping of `map_len` bytes made by `mmap` on an XSK at
    /// the page offset of this ring, and `off` the kernel's offsets for it,
    /// with `size` entries of `T` (a power of two). The ring takes ownership
    /// of the mapping and unmaps it on drop.
    pub(crate) unsafe fn from_mapping(
        map: NonNull<u8>,
        map_len: usize,
        off: &libc::xdp_ring_offset,
        size: u32,
        producer_side: bool,
    ) -> Self {
        debug_assert!(size.is_power_of_two());
        let at = |o: u64| {
            // SAFETY: the kernel's offsets lie inside the mapping (caller's
            // contract), which is page aligned, so `u32` and `u64` fields at
            // those offsets are aligned too.
            unsafe { NonNull::new_unchecked(map.as_ptr().add(o as usize)) }
        };
        let mut r = Ring {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            entries: at(off.desc).cast(),
            mask: size - 1,
            local: 0,
            other: 0,
            map,
            map_len,
        };
        if producer_side {
            r.local = r.producer().load(Ordering::Relaxed);
            r.other = r.consumer().load(Ordering::Acquire).wrapping_add(size);
        } else {
            r.local = r.consumer().load(Ordering::Relaxed);
            r.other = r.producer().load(Ordering::Acquire);
        }
        r
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping (see `from_mapping`); the
        // kernel accesses it only atomically as well.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// Entries in the ring.
    pub(crate) fn size(&self) -> u32 {
        self.mask + 1
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        let f = unsafe { self.flags.as_ref() }.load(Ordering::Relaxed);
        f & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // ---- consumer side (RX, completion) ----

    /// Entries ready to consume, up to `max`.
    pub(crate) fn peek(&mut self, max: u32) -> u32 {
        let mut n = self.other.wrapping_sub(self.local);
        if n < max {
            self.other = self.producer().load(Ordering::Acquire);
            n = self.other.wrapping_sub(self.local);
        }
        n.min(max)
    }

    /// The `i`-th ready entry (i < the last `peek`).
    pub(crate) fn read(&self, i: u32) -> T {
        let slot = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot ≤ mask lies inside the entry array; the producer
        // published it (acquire in `peek`) and will not touch it until we
        // release it in `release`.
        unsafe { self.entries.as_ptr().add(slot).read_volatile() }
    }

    /// Gives `n` consumed entries back to the producer.
    pub(crate) fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }

    // ---- producer side (fill, TX) ----

    /// Free slots, up to `max`.
    pub(crate) fn free(&mut self, max: u32) -> u32 {
        let mut n = self.other.wrapping_sub(self.local);
        if n < max {
            self.other = self
                .consumer()
                .load(Ordering::Acquire)
                .wrapping_add(self.size());
            n = self.other.wrapping_sub(self.local);
        }
        n.min(max)
    }

    /// Writes the `i`-th free entry (i < the last `free`).
    pub(crate) fn write(&mut self, i: u32, v: T) {
        let slot = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot ≤ mask lies inside the entry array, and the consumer
        // has released it (acquire in `free`), so only we access it until
        // `submit` publishes it.
        unsafe { self.entries.as_ptr().add(slot).write_volatile(v) }
    }

    /// Entries published but not yet consumed by the other side.
    pub(crate) fn pending(&self) -> u32 {
        self.local
            .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Publishes `n` written entries to the consumer.
    pub(crate) fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this ring owns; no references into
        // it outlive the ring.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}
