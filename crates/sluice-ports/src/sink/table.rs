//! Fixed-size, 4-way set-associative per-flow tables with LRU eviction.
//!
//! Allocated once at construction; lookups hash the key with one multiply,
//! compare four keys in one set (two cache lines), and on a miss take an
//! empty way or evict the least recently used one.  Never allocates.
//!
//! An empty table is all zero bytes, so it is allocated zeroed: the kernel
//! maps its pages when a flow first lands in them, and a sink added to a
//! running platform does not fault in and clear its two 64 Ki-entry tables
//! (a few MiB) before it answers.

use zerocopy::FromZeros;

/// Ways per set.
const WAYS: usize = 4;

/// What a table lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The key was present at this index.
    Hit(usize),
    /// The key was inserted at this index (the entry is reset); `evicted`
    /// tells whether a live entry was replaced.
    New { idx: usize, evicted: bool },
}

/// A table entry: key (0 = empty) plus per-flow state `S`; all zeros is
/// the empty entry (`Default`, as [`Table::new`] allocates it).
#[derive(Debug, Clone, Copy, Default, FromZeros)]
pub(crate) struct Entry<S> {
    key: u64,
    tick: u32,
    pub state: S,
}

/// Set-associative table of `S` keyed by non-zero `u64`.
#[derive(Debug, Clone)]
pub(crate) struct Table<S> {
    entries: Vec<Entry<S>>,
    set_mask: usize,
    tick: u32,
}

impl<S: Copy + Default + FromZeros> Table<S> {
    /// A table with at least `capacity` entries (rounded up to a power of
    /// two, at least one set).
    ///
    /// # Panics
    ///
    /// When the allocation fails, as `vec!` would.
    pub(crate) fn new(capacity: usize) -> Self {
        let sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        let entries = Entry::new_vec_zeroed(sets * WAYS).unwrap_or_else(|_| {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<Entry<S>>())
        });
        Table {
            entries,
            set_mask: sets - 1,
            tick: 0,
        }
    }

    /// Total entries.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Finds or inserts `key` (must be non-zero).
    #[inline]
    pub(crate) fn lookup(&mut self, key: u64) -> Slot {
        debug_assert_ne!(key, 0);
        self.tick = self.tick.wrapping_add(1);
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let base = (((h >> 32) as usize) & self.set_mask) * WAYS;
        let Some(ways) = self.entries.get_mut(base..base + WAYS) else {
            return Slot::New {
                idx: 0,
                evicted: false,
            };
        };
        for (i, e) in ways.iter_mut().enumerate() {
            if e.key == key {
                e.tick = self.tick;
                return Slot::Hit(base + i);
            }
        }
        self.insert(base, key)
    }

    /// Miss path: take an empty way of the set at `base`, or evict its
    /// least recently used way.
    #[cold]
    fn insert(&mut self, base: usize, key: u64) -> Slot {
        let tick = self.tick;
        let ways = &mut self.entries[base..base + WAYS];
        let mut victim = 0;
        let mut oldest = 0u32;
        for (i, e) in ways.iter().enumerate() {
            // Empty ways have the greatest possible age.
            let age = if e.key == 0 {
                u32::MAX
            } else {
                tick.wrapping_sub(e.tick)
            };
            if age > oldest {
                oldest = age;
                victim = i;
            }
        }
        let e = &mut ways[victim];
        let evicted = e.key != 0;
        *e = Entry {
            key,
            tick,
            state: S::default(),
        };
        Slot::New {
            idx: base + victim,
            evicted,
        }
    }

    /// The state at an index returned by [`Table::lookup`].
    #[inline]
    pub(crate) fn state_mut(&mut self, idx: usize) -> &mut S {
        &mut self.entries[idx].state
    }
}

/// Ordering verdict for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// First packet of the flow seen.
    First,
    /// In order (possibly after a gap: lost or not yet arrived packets).
    Sequential,
    /// Arrived after a later packet of the same flow.
    Reordered,
    /// A packet already seen.
    Duplicate,
}

/// Ordering state of a stamped flow: the highest sequence seen plus a
/// 64-packet window of which lower sequences arrived (as in IPsec
/// anti-replay).  A late packet older than the window counts as reordered.
#[derive(Debug, Clone, Copy, Default, FromZeros)]
pub(crate) struct SeqWindow {
    /// Highest sequence seen.
    top: u64,
    /// Bit `i` set: sequence `top - i` seen.  Zero = nothing seen yet.
    seen: u64,
}

impl SeqWindow {
    #[inline]
    pub(crate) fn observe(&mut self, seq: u64) -> Order {
        if self.seen == 0 {
            self.top = seq;
            self.seen = 1;
            return Order::First;
        }
        if seq > self.top {
            let shift = seq - self.top;
            self.seen = if shift >= 64 {
                1
            } else {
                (self.seen << shift) | 1
            };
            self.top = seq;
            return Order::Sequential;
        }
        let back = self.top - seq;
        if back >= 64 {
            return Order::Reordered;
        }
        let bit = 1u64 << back;
        if self.seen & bit != 0 {
            Order::Duplicate
        } else {
            self.seen |= bit;
            Order::Reordered
        }
    }
}

/// Ordering state of a stampless TCP connection: the next expected
/// sequence number (highest segment end seen) and the start sequences of
/// the last four segments, which tell a duplicate from a late segment.
#[derive(Debug, Clone, Copy, Default, FromZeros)]
pub(crate) struct TcpOrder {
    next: u32,
    recent: [u32; 4],
    started: bool,
}

impl TcpOrder {
    /// `len` is the sequence space the segment consumes (payload, +1 for
    /// SYN and for FIN).
    #[inline]
    pub(crate) fn observe(&mut self, seq: u32, len: u32) -> Order {
        let verdict = if !self.started {
            self.started = true;
            self.recent = [seq; 4];
            Order::First
        } else if seq.wrapping_sub(self.next) as i32 >= 0 {
            Order::Sequential
        } else if self.recent.contains(&seq) {
            Order::Duplicate
        } else {
            Order::Reordered
        };
        if matches!(verdict, Order::First | Order::Sequential) {
            self.next = seq.wrapping_add(len);
        }
        self.recent = [seq, self.recent[0], self.recent[1], self.recent[2]];
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zeroed allocation is the table `Default` entries would make:
    /// empty keys and fresh per-flow state.
    #[test]
    fn a_zeroed_table_is_a_default_one() {
        fn check<S: Copy + Default + FromZeros + std::fmt::Debug>() {
            let t: Table<S> = Table::new(64);
            let fresh = format!("{:?}", Entry::<S>::default());
            assert!(t.entries.iter().all(|e| format!("{e:?}") == fresh));
            assert_eq!(t.entries.len(), 64);
        }
        check::<SeqWindow>();
        check::<TcpOrder>();
        check::<u32>();
    }

    #[test]
    fn seq_window_verdicts() {
        let mut w = SeqWindow::default();
        assert_eq!(w.observe(10), Order::First);
        assert_eq!(w.observe(11), Order::Sequential);
        assert_eq!(w.observe(13), Order::Sequential); // gap
        assert_eq!(w.observe(12), Order::Reordered);
        assert_eq!(w.observe(12), Order::Duplicate);
        assert_eq!(w.observe(13), Order::Duplicate);
        assert_eq!(w.observe(200), Order::Sequential);
        assert_eq!(w.observe(100), Order::Reordered); // older than window
        assert_eq!(w.observe(u64::MAX), Order::Sequential);
        assert_eq!(w.observe(u64::MAX), Order::Duplicate);
    }

    #[test]
    fn tcp_order_verdicts_with_wrap() {
        let mut t = TcpOrder::default();
        let s = u32::MAX - 150;
        assert_eq!(t.observe(s, 101), Order::First);
        assert_eq!(t.observe(s.wrapping_add(201), 100), Order::Sequential); // gap, wraps
        assert_eq!(t.observe(s.wrapping_add(101), 100), Order::Reordered);
        assert_eq!(t.observe(s.wrapping_add(101), 100), Order::Duplicate);
        assert_eq!(t.observe(s.wrapping_add(301), 0), Order::Sequential);
        assert_eq!(t.observe(s.wrapping_add(301), 0), Order::Sequential); // pure acks
    }

    #[test]
    fn table_hits_inserts_and_evicts_lru() {
        let mut t: Table<u32> = Table::new(4); // one set of four ways
        assert_eq!(t.capacity(), 4);
        for k in 1..=4 {
            assert!(matches!(t.lookup(k), Slot::New { evicted: false, .. }));
        }
        let Slot::Hit(i) = t.lookup(1) else { panic!() };
        *t.state_mut(i) = 7;
        // Key 2 is now the least recently used.
        let Slot::New { idx, evicted: true } = t.lookup(5) else {
            panic!()
        };
        assert!(matches!(t.lookup(2), Slot::New { evicted: true, .. }));
        assert_ne!(idx, i);
        let Slot::Hit(j) = t.lookup(1) else { panic!() };
        assert_eq!(*t.state_mut(j), 7);
    }
}
