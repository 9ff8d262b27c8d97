//! Per-block lower bounds of entry expiries, so that an expiry sweep (a
//! clock hand over a table of timed entries) skips blocks in which nothing
//! can have timed out instead of reading their entries.
//!
//! The table is cut into blocks of [`BLOCK`] slots. Invariant: `min[b]` is
//! at most the expiry of every live entry of block `b`. A new entry lowers
//! its block's bound; a refresh that moves an entry's expiry *earlier*
//! (a TCP connection leaving the established state) lowers it too; a later
//! expiry (the common refresh) leaves it alone, so the packet path does not
//! touch this array. The sweep reads a block only when its bound is due
//! (`min[b] <= now`), which gives exactly the removals a plain scan would
//! (a skipped block holds nothing to remove, and the hand moves the same
//! way), and when it has walked a whole block from its first slot it sets
//! the bound to the earliest expiry it saw there, so a block is read again
//! only once one of its entries may really have timed out.
//!
//! Used by the NAT's session table and the firewall's connection table;
//! at 100 k entries a plain sweep of 64 slots per batch of 32 packets reads
//! two cold cache lines per packet.

/// Slots per block.
pub(crate) const BLOCK: usize = 64;

/// No block: no walk in progress.
const NO_BLOCK: usize = usize::MAX;

/// The bounds, and the walk of the block the sweep's hand is in.
pub(crate) struct Bounds {
    /// Per block: at most the expiry of each of its live entries.
    min: Vec<u64>,
    /// The block the sweep has walked from its first slot to its hand,
    /// and the earliest expiry of its live entries seen (or lowered)
    /// since.
    walk: usize,
    walk_min: u64,
}

impl Bounds {
    /// Bounds for `slots` slots, all empty.
    pub(crate) fn new(slots: usize) -> Bounds {
        Bounds {
            min: vec![u64::MAX; slots.div_ceil(BLOCK)],
            walk: NO_BLOCK,
            walk_min: u64::MAX,
        }
    }

    /// Entry `slot` now expires at `expires`, possibly earlier than
    /// its block's bound.
    #[inline]
    pub(crate) fn lower(&mut self, slot: u32, expires: u64) {
        let b = slot as usize / BLOCK;
        if let Some(m) = self.min.get_mut(b) {
            *m = (*m).min(expires);
        }
        if b == self.walk {
            self.walk_min = self.walk_min.min(expires);
        }
    }

    /// Whether block `b` may hold an entry timed out at `now`.
    #[inline]
    pub(crate) fn due(&self, b: usize, now: u64) -> bool {
        self.min.get(b).is_none_or(|&m| m <= now)
    }

    /// The sweep is at the first slot of block `b`: start its walk.
    #[inline]
    pub(crate) fn start(&mut self, b: usize) {
        self.walk = b;
        self.walk_min = u64::MAX;
    }

    /// The sweep passed live entries of block `b` expiring at `expires`
    /// at the earliest (for a skipped run, the block's bound).
    #[inline]
    pub(crate) fn saw(&mut self, b: usize, expires: u64) {
        if b == self.walk {
            self.walk_min = self.walk_min.min(expires);
        }
    }

    /// The sweep passed slots of block `b` without reading them (not
    /// due): they expire at its bound or later.
    #[inline]
    pub(crate) fn skip(&mut self, b: usize) {
        if let Some(&m) = self.min.get(b) {
            self.saw(b, m);
        }
    }

    /// The sweep reached the end of block `b`: if it walked the whole
    /// block, what it saw is the block's new bound.
    #[inline]
    pub(crate) fn end(&mut self, b: usize) {
        if b == self.walk {
            if let Some(m) = self.min.get_mut(b) {
                *m = self.walk_min;
            }
            self.walk = NO_BLOCK;
        }
    }

    /// Back to all-empty.
    pub(crate) fn reset(&mut self) {
        self.min.fill(u64::MAX);
        self.walk = NO_BLOCK;
        self.walk_min = u64::MAX;
    }

    /// The bound of block `b` (tests).
    #[cfg(test)]
    pub(crate) fn bound(&self, b: usize) -> u64 {
        self.min[b]
    }
}

/// A table of timed entries that a clock hand sweeps with [`sweep`].
pub(crate) trait Expiring {
    /// Slots in the table.
    fn slots(&self) -> usize;
    /// The table's bounds.
    fn bounds(&mut self) -> &mut Bounds;
    /// The first slot of `i..end` whose live entry has timed out at `now`
    /// (as an offset from `i`), and the earliest expiry of the live entries
    /// before it (see [`first_expired`]).
    fn first_expired(&self, i: usize, end: usize, now: u64) -> (Option<usize>, u64);
    /// Removes the (timed-out) entry in slot `i`.
    fn remove(&mut self, i: usize);
}

/// Scans `run` for the first entry timed out at `now`; `expiry` gives a
/// live entry's expiry and `None` for a free slot. Also returns the
/// earliest expiry of the live entries passed before it. A slice scan:
/// ≈ 3 instructions per slot, against ≈ 15 for an indexed loop.
#[inline]
pub(crate) fn first_expired<E>(
    run: &[E],
    now: u64,
    expiry: impl Fn(&E) -> Option<u64>,
) -> (Option<usize>, u64) {
    let mut earliest = u64::MAX;
    let found = run.iter().position(|e| match expiry(e) {
        Some(x) if x <= now => true,
        Some(x) => {
            earliest = earliest.min(x);
            false
        }
        None => false,
    });
    (found, earliest)
}

/// Sweeps the `budget` slots from `first` on (wrapping at the end of the
/// table), removing the entries timed out at `now` and reading only the
/// blocks whose bound is due. Returns how many it removed and the slot
/// after the last one visited.
pub(crate) fn sweep<T: Expiring>(
    t: &mut T,
    first: usize,
    budget: usize,
    now: u64,
) -> (usize, usize) {
    let n = t.slots();
    if n == 0 {
        return (0, first);
    }
    let mut removed = 0;
    let mut left = budget.min(n);
    let mut i = first % n;
    while left > 0 {
        let b = i / BLOCK;
        let block_end = (b * BLOCK + BLOCK).min(n);
        let end = (i + left).min(block_end);
        if i == b * BLOCK {
            t.bounds().start(b);
        }
        if t.bounds().due(b, now) {
            removed += scan(t, i, end, b, now);
        } else {
            // Nothing to remove in [i, end): what is live there expires
            // after `now`, at the bound or later.
            t.bounds().skip(b);
        }
        if end == block_end {
            t.bounds().end(b);
        }
        left -= end - i;
        i = if end == n { 0 } else { end };
    }
    (removed, i)
}

/// Reads slots `i..end` of block `b`, removing the timed-out entries and
/// telling the bounds the earliest expiry among the others.
fn scan<T: Expiring>(t: &mut T, mut i: usize, end: usize, b: usize, now: u64) -> usize {
    let mut removed = 0;
    while i < end {
        let (found, earliest) = t.first_expired(i, end, now);
        t.bounds().saw(b, earliest);
        match found {
            Some(k) => {
                t.remove(i + k);
                removed += 1;
                i += k + 1;
            }
            None => i = end,
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_of_a_whole_block_sets_its_bound() {
        let mut b = Bounds::new(130);
        assert_eq!(b.min.len(), 3);
        b.lower(3, 50);
        b.lower(70, 40);
        assert!(b.due(0, 50) && !b.due(0, 49));
        assert!(!b.due(2, u64::MAX - 1), "empty block");
        b.start(0);
        b.saw(0, 90);
        b.saw(0, 80);
        // Lowered during the walk (a slot already passed): kept.
        b.lower(5, 60);
        b.end(0);
        assert_eq!(b.bound(0), 60);
        // A walk that did not start at the block's first slot sets nothing.
        b.saw(1, 100);
        b.end(1);
        assert_eq!(b.bound(1), 40);
        // An empty walk leaves an empty block.
        b.start(1);
        b.end(1);
        assert_eq!(b.bound(1), u64::MAX);
        b.reset();
        assert_eq!(b.bound(0), u64::MAX);
    }
}
