//! Bounded single-producer/single-consumer rings of 32-bit descriptors.
//!
//! A ring is two indices on their own cache lines ([`RingShared`]) plus a
//! power-of-two array of slots. Both may live in shared memory, and the peer
//! on the other side may be an untrusted NF process: every index read from the
//! shared part is checked, and an impossible occupancy is reported as
//! [`RingCorrupt`] instead of being trusted.
//!
//! Indices are free-running `u32` counters; occupancy is `tail - head`
//! (wrapping). The producer publishes slots with a release store of `tail`;
//! the consumer frees them with a release store of `head`. Each side keeps a
//! private cached copy of the other side's index and re-reads the shared one
//! only when the cache says the ring is full/empty, so a batch costs one
//! shared-line read at most (measured: `cargo bench -p sluice-mem --bench ring`).

use crate::sync::{AtomicU32, CachePadded, Ordering};

/// The shared indices of a ring. All-zero bytes are a valid empty ring.
#[derive(Debug, Default)]
#[repr(C)]
pub struct RingShared {
    tail: CachePadded<AtomicU32>,
    head: CachePadded<AtomicU32>,
}

impl RingShared {
    /// Resets the ring to empty. Only sound to use when neither endpoint is
    /// active (for example after the NF process on the other side has died).
    pub fn reset(&self) {
        self.tail.0.store(0, Ordering::Release);
        self.head.0.store(0, Ordering::Release);
    }
}

/// The peer published indices that cannot describe a ring of this capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingCorrupt {
    /// Occupancy implied by the shared indices.
    pub occupancy: u32,
    /// Ring capacity.
    pub capacity: u32,
}

impl std::fmt::Display for RingCorrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ring indices describe {} entries in a ring of {}",
            self.occupancy, self.capacity
        )
    }
}

impl std::error::Error for RingCorrupt {}

/// A ring: its shared indices and its slots.
#[derive(Clone, Copy)]
pub struct RingRef<'a> {
    shared: &'a RingShared,
    slots: &'a [AtomicU32],
    mask: u32,
}

impl<'a> RingRef<'a> {
    /// Wraps indices and slots; `slots.len()` must be a power of two ≤ 2³¹.
    pub fn new(shared: &'a RingShared, slots: &'a [AtomicU32]) -> Option<Self> {
        let n = slots.len();
        if n == 0 || !n.is_power_of_two() || n > 1 << 31 {
            return None;
        }
        Some(Self {
            shared,
            slots,
            mask: (n - 1) as u32,
        })
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.mask + 1
    }

    /// Current occupancy as seen from outside either endpoint (approximate
    /// while both run); saturates at capacity if the indices are corrupt.
    pub fn occupancy(&self) -> u32 {
        let tail = self.shared.tail.0.load(Ordering::Acquire);
        let head = self.shared.head.0.load(Ordering::Acquire);
        tail.wrapping_sub(head).min(self.capacity())
    }

    /// Resets the ring to empty; only when neither endpoint is active.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// The producing endpoint. There must be exactly one at a time.
    pub fn producer(self) -> Producer<'a> {
        let tail = self.shared.tail.0.load(Ordering::Acquire);
        let head = self.shared.head.0.load(Ordering::Acquire);
        Producer {
            ring: self,
            tail,
            cached_head: head,
        }
    }

    /// The consuming endpoint. There must be exactly one at a time.
    pub fn consumer(self) -> Consumer<'a> {
        let head = self.shared.head.0.load(Ordering::Acquire);
        Consumer {
            ring: self,
            head,
            cached_tail: head,
        }
    }
}

/// Writes descriptors into a ring.
pub struct Producer<'a> {
    ring: RingRef<'a>,
    tail: u32,
    cached_head: u32,
}

impl Producer<'_> {
    /// Free slots, re-reading the consumer's index.
    pub fn free(&mut self) -> Result<u32, RingCorrupt> {
        self.refresh()
    }

    /// Free slots, at least `want` of them when there are: the consumer's
    /// index is re-read only when the one cached here shows fewer. The
    /// consumer only ever frees slots, so the cached count is a lower
    /// bound of the true one, never more; a worker asking "room for a
    /// batch?" of a thousand idle NFs' rings on every pass then reads its
    /// own memory, not a thousand cache lines the NFs own.
    #[inline]
    pub fn free_up_to(&mut self, want: u32) -> Result<u32, RingCorrupt> {
        let capacity = self.ring.capacity();
        let cached = capacity - self.tail.wrapping_sub(self.cached_head).min(capacity);
        if cached >= want {
            return Ok(cached);
        }
        self.refresh()
    }

    fn refresh(&mut self) -> Result<u32, RingCorrupt> {
        self.cached_head = self.ring.shared.head.0.load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(self.cached_head);
        let capacity = self.ring.capacity();
        if used > capacity {
            return Err(RingCorrupt {
                occupancy: used,
                capacity,
            });
        }
        Ok(capacity - used)
    }

    /// Enqueues a prefix of `items`, as much as fits; returns how many.
    #[inline]
    pub fn enqueue(&mut self, items: &[u32]) -> Result<usize, RingCorrupt> {
        let capacity = self.ring.capacity();
        let mut free = capacity - self.tail.wrapping_sub(self.cached_head).min(capacity);
        if (free as usize) < items.len() {
            free = self.refresh()?;
        }
        let n = items.len().min(free as usize);
        for (i, &item) in items[..n].iter().enumerate() {
            let slot = (self.tail.wrapping_add(i as u32) & self.ring.mask) as usize;
            self.ring.slots[slot].store(item, Ordering::Relaxed);
        }
        self.tail = self.tail.wrapping_add(n as u32);
        self.ring.shared.tail.0.store(self.tail, Ordering::Release);
        Ok(n)
    }
}

impl Producer<'_> {
    /// Copies the entries enqueued but not yet dequeued into `out`, oldest
    /// first, without consuming them: what a consumer that died left
    /// behind, to hand to its successor. The slots are shared memory the
    /// consumer could write, so the caller must validate every entry.
    pub fn pending(&mut self, out: &mut Vec<u32>) -> Result<(), RingCorrupt> {
        let used = self.ring.capacity() - self.refresh()?;
        let head = self.cached_head;
        for i in 0..used {
            let slot = (head.wrapping_add(i) & self.ring.mask) as usize;
            out.push(self.ring.slots[slot].load(Ordering::Relaxed));
        }
        Ok(())
    }
}

/// Reads descriptors from a ring.
pub struct Consumer<'a> {
    ring: RingRef<'a>,
    head: u32,
    cached_tail: u32,
}

impl Consumer<'_> {
    /// Entries ready to dequeue, re-reading the producer's index.
    pub fn available(&mut self) -> Result<u32, RingCorrupt> {
        self.refresh()
    }

    fn refresh(&mut self) -> Result<u32, RingCorrupt> {
        self.cached_tail = self.ring.shared.tail.0.load(Ordering::Acquire);
        let avail = self.cached_tail.wrapping_sub(self.head);
        let capacity = self.ring.capacity();
        if avail > capacity {
            return Err(RingCorrupt {
                occupancy: avail,
                capacity,
            });
        }
        Ok(avail)
    }

    /// Dequeues up to `out.len()` entries into `out`; returns how many.
    #[inline]
    pub fn dequeue(&mut self, out: &mut [u32]) -> Result<usize, RingCorrupt> {
        let mut avail = self.cached_tail.wrapping_sub(self.head);
        if (avail as usize) < out.len() {
            avail = self.refresh()?;
        }
        let n = out.len().min(avail as usize);
        for (i, o) in out[..n].iter_mut().enumerate() {
            let slot = (self.head.wrapping_add(i as u32) & self.ring.mask) as usize;
            *o = self.ring.slots[slot].load(Ordering::Relaxed);
        }
        self.head = self.head.wrapping_add(n as u32);
        self.ring.shared.head.0.store(self.head, Ordering::Release);
        Ok(n)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ring(n: usize) -> (RingShared, Vec<AtomicU32>) {
        (
            RingShared::default(),
            (0..n).map(|_| AtomicU32::new(0)).collect(),
        )
    }

    #[test]
    fn rejects_non_power_of_two() {
        let (s, slots) = ring(6);
        assert!(RingRef::new(&s, &slots).is_none());
        assert!(RingRef::new(&s, &slots[..0]).is_none());
    }

    #[test]
    fn free_up_to_reads_the_consumer_only_when_the_cached_count_is_short() {
        let (s, slots) = ring(8);
        let r = RingRef::new(&s, &slots).unwrap();
        let (mut p, mut c) = (r.producer(), r.consumer());
        assert_eq!(p.enqueue(&[1, 2, 3, 4, 5, 6]).unwrap(), 6);
        let mut out = [0u32; 4];
        assert_eq!(c.dequeue(&mut out).unwrap(), 4);
        // 2 free as last seen, 6 in truth: enough for 2 without a read...
        assert_eq!(p.free_up_to(2).unwrap(), 2);
        // ...and the truth when more is wanted.
        assert_eq!(p.free_up_to(3).unwrap(), 6);
        assert_eq!(p.free_up_to(6).unwrap(), 6);
        // Never more than the truth, whatever is wanted.
        assert_eq!(p.free_up_to(100).unwrap(), 6);
        // A corrupt consumer index is still seen when the count is read.
        s.head.0.store(0xdead_beef, Ordering::Release);
        assert!(p.free_up_to(7).is_err());
    }

    #[test]
    fn fifo_with_wraparound_and_partial_batches() {
        let (s, slots) = ring(8);
        let r = RingRef::new(&s, &slots).unwrap();
        let (mut p, mut c) = (r.producer(), r.consumer());
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        let mut out = [0u32; 5];
        for round in 0..100 {
            let batch: Vec<u32> = (next_in..next_in + 1 + round % 7).collect();
            let n = p.enqueue(&batch).unwrap();
            assert!(n <= 8);
            next_in += n as u32;
            let m = c.dequeue(&mut out[..1 + round as usize % 5]).unwrap();
            for &v in &out[..m] {
                assert_eq!(v, next_out);
                next_out += 1;
            }
            assert!(r.occupancy() <= 8);
        }
        assert_eq!(next_in - next_out, r.occupancy());
    }

    #[test]
    fn full_ring_accepts_nothing_more() {
        let (s, slots) = ring(4);
        let r = RingRef::new(&s, &slots).unwrap();
        let mut p = r.producer();
        assert_eq!(p.enqueue(&[1, 2, 3, 4, 5, 6]).unwrap(), 4);
        assert_eq!(p.enqueue(&[7]).unwrap(), 0);
        assert_eq!(p.free().unwrap(), 0);
    }

    #[test]
    fn indices_work_across_u32_wrap() {
        let (s, slots) = ring(4);
        s.tail.0.store(u32::MAX - 1, Ordering::Relaxed);
        s.head.0.store(u32::MAX - 1, Ordering::Relaxed);
        let r = RingRef::new(&s, &slots).unwrap();
        let (mut p, mut c) = (r.producer(), r.consumer());
        assert_eq!(p.enqueue(&[10, 11, 12, 13]).unwrap(), 4);
        let mut out = [0; 4];
        assert_eq!(c.dequeue(&mut out).unwrap(), 4);
        assert_eq!(out, [10, 11, 12, 13]);
    }

    #[test]
    fn hostile_indices_are_reported_not_trusted() {
        let (s, slots) = ring(8);
        let r = RingRef::new(&s, &slots).unwrap();
        let mut c = r.consumer();
        // A hostile producer claims 1000 entries in a ring of 8.
        s.tail.0.store(1000, Ordering::Release);
        let mut out = [0u32; 32];
        assert_eq!(
            c.dequeue(&mut out),
            Err(RingCorrupt {
                occupancy: 1000,
                capacity: 8
            })
        );
        // A hostile consumer moves head past tail.
        let (s2, slots2) = ring(8);
        let r2 = RingRef::new(&s2, &slots2).unwrap();
        let mut p = r2.producer();
        s2.head.0.store(5, Ordering::Release);
        assert!(p.enqueue(&[1; 9]).is_err());
    }

    #[test]
    fn threads_transfer_every_item_in_order() {
        let (s, slots) = ring(64);
        let r = RingRef::new(&s, &slots).unwrap();
        const N: u32 = 200_000;
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut p = r.producer();
                let mut next = 0;
                while next < N {
                    let batch: Vec<u32> = (next..(next + 32).min(N)).collect();
                    next += p.enqueue(&batch).unwrap() as u32;
                }
            });
            let mut c = r.consumer();
            let mut expect = 0;
            let mut out = [0u32; 32];
            while expect < N {
                let n = c.dequeue(&mut out).unwrap();
                for &v in &out[..n] {
                    assert_eq!(v, expect);
                    expect += 1;
                }
            }
        });
    }
}
