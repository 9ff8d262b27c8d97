//! A fixed-capacity batch of owned packet handles.

use crate::buffer::PktHandle;

/// Largest batch any ring operation, NF call or port call handles at once.
pub const MAX_BATCH: usize = 256;

/// Up to [`MAX_BATCH`] owned handles, stored as raw indices so a batch can be
/// copied into a ring with one pass. Owning a `HandleBatch` owns its handles.
pub struct HandleBatch {
    raw: [u32; MAX_BATCH],
    len: usize,
}

impl Default for HandleBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl HandleBatch {
    /// An empty batch.
    pub const fn new() -> Self {
        HandleBatch {
            raw: [0; MAX_BATCH],
            len: 0,
        }
    }

    /// Number of handles held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the batch is at capacity.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == MAX_BATCH
    }

    /// Adds a handle; gives it back if the batch is full.
    #[inline]
    pub fn push(&mut self, h: PktHandle) -> Result<(), PktHandle> {
        if self.len == MAX_BATCH {
            return Err(h);
        }
        self.raw[self.len] = h.into_raw();
        self.len += 1;
        Ok(())
    }

    /// Removes the last handle.
    #[inline]
    pub fn pop(&mut self) -> Option<PktHandle> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(PktHandle::from_raw_owned(self.raw[self.len]))
    }

    /// Mutable access to the handle at `i`, the key to its buffer.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut PktHandle> {
        if i >= self.len {
            return None;
        }
        let slot: &mut u32 = &mut self.raw[i];
        // PktHandle is repr(transparent) over u32; a `&mut u32` to a slot we
        // own is converted through a typed helper instead of a pointer cast.
        Some(PktHandle::from_slot(slot))
    }

    /// Mutable access to every handle, in order: [`HandleBatch::get_mut`]
    /// for a whole pass, with the batch's bounds checked once instead of
    /// per handle.
    #[inline]
    pub fn iter_mut(&mut self) -> HandlesMut<'_> {
        HandlesMut {
            slots: self.raw[..self.len].iter_mut(),
        }
    }

    /// Buffer indices in order (for inspection; does not give ownership).
    pub fn indices(&self) -> &[u32] {
        &self.raw[..self.len]
    }

    /// Moves every handle out, in order, into `f`.
    ///
    /// If `f` panics, the batch is left empty: the handles it had not
    /// handed out yet are forgotten (leaked, never listed twice). `f` is
    /// the platform's own code (freeing, queueing), not an NF's, and this
    /// is the hottest loop of the packet path, so it keeps no count for an
    /// unwind to read; `retain`, which runs NF code, does.
    #[inline]
    pub fn drain(&mut self, mut f: impl FnMut(PktHandle)) {
        let n = std::mem::replace(&mut self.len, 0);
        for &raw in &self.raw[..n] {
            f(PktHandle::from_raw_owned(raw));
        }
    }

    /// Removes the first `n` handles (after they were moved into a ring),
    /// keeping the rest in order.
    pub(crate) fn consume_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.raw.copy_within(n..self.len, 0);
        self.len -= n;
    }

    /// Raw view of the held indices, for ring transfers within this crate.
    pub(crate) fn raw(&self) -> &[u32] {
        &self.raw[..self.len]
    }

    /// Appends raw indices that the caller has just proven are owned.
    pub(crate) fn push_raw_owned(&mut self, raw: u32) {
        debug_assert!(self.len < MAX_BATCH);
        self.raw[self.len] = raw;
        self.len += 1;
    }

    /// Moves the first `n` handles (all if fewer) out, in order, into `f`,
    /// keeping the rest in order: what a port hands back once a device
    /// took the front of a batch.
    ///
    /// If `f` panics, the batch is left empty, as [`Self::drain`] leaves it.
    pub fn drain_front(&mut self, n: usize, mut f: impl FnMut(PktHandle)) {
        let len = std::mem::replace(&mut self.len, 0);
        let n = n.min(len);
        for &raw in &self.raw[..n] {
            f(PktHandle::from_raw_owned(raw));
        }
        self.raw.copy_within(n..len, 0);
        self.len = len - n;
    }

    /// Keeps only the handles for which `keep` returns true, handing the
    /// others to `reject`, preserving order.
    pub fn retain(
        &mut self,
        mut keep: impl FnMut(&mut PktHandle) -> bool,
        mut reject: impl FnMut(PktHandle),
    ) {
        // If `keep` or `reject` panics, the batch keeps exactly the
        // handles kept so far and those not yet looked at (see [`Unwound`]).
        let mut at = Unwound::new(self);
        while at.read < at.batch.len {
            let mut h = PktHandle::from_raw_owned(at.batch.raw[at.read]);
            // While `keep` runs the handle stays listed at `read`: `h` is a
            // view of it, and nothing moves it out if `keep` panics.
            if keep(&mut h) {
                at.batch.raw[at.kept] = h.into_raw();
                at.kept += 1;
                at.read += 1;
            } else {
                // Handed out: from here the handle is `reject`'s.
                at.read += 1;
                reject(h);
            }
        }
    }
}

/// A [`HandleBatch::retain`] pass, written so that a panic in the caller's
/// closure (an inline NF's code, which the worker survives:
/// `sluice_dataplane::inline_nf`) never leaves a handle listed twice or a
/// handed-out one still listed. Handles `..kept` stay, `kept..read` were
/// handed out, `read..len` were not looked at yet. Dropping the pass, at
/// its end or while unwinding, closes the gap: the batch then holds the
/// kept handles and the ones not looked at, in order.
struct Unwound<'b> {
    batch: &'b mut HandleBatch,
    kept: usize,
    read: usize,
}

impl<'b> Unwound<'b> {
    fn new(batch: &'b mut HandleBatch) -> Self {
        Unwound {
            batch,
            kept: 0,
            read: 0,
        }
    }
}

impl Drop for Unwound<'_> {
    #[inline]
    fn drop(&mut self) {
        let b = &mut *self.batch;
        b.raw.copy_within(self.read..b.len, self.kept);
        b.len = self.kept + (b.len - self.read);
    }
}

/// The handles of a [`HandleBatch`], in order ([`HandleBatch::iter_mut`]).
/// Each is a distinct owned slot, so all may be held at once.
pub struct HandlesMut<'a> {
    slots: std::slice::IterMut<'a, u32>,
}

impl<'a> Iterator for HandlesMut<'a> {
    type Item = &'a mut PktHandle;

    #[inline]
    fn next(&mut self) -> Option<&'a mut PktHandle> {
        self.slots.next().map(PktHandle::from_slot)
    }

    /// Skips `n` handles without looking at them (so `skip` is O(1)).
    #[inline]
    fn nth(&mut self, n: usize) -> Option<&'a mut PktHandle> {
        self.slots.nth(n).map(PktHandle::from_slot)
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl ExactSizeIterator for HandlesMut<'_> {}

impl DoubleEndedIterator for HandlesMut<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.slots.next_back().map(PktHandle::from_slot)
    }
}

impl Drop for HandleBatch {
    fn drop(&mut self) {
        debug_assert!(
            self.len == 0 || std::thread::panicking(),
            "a HandleBatch was dropped holding {} buffers: they would leak",
            self.len
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `iter_mut` hands out every held slot once, in order (all of them
    /// alive at once), `nth` skips exactly, and it stops at the length.
    #[test]
    fn iter_mut_visits_each_held_handle_once_in_order() {
        let mut b = HandleBatch::new();
        for i in 0..40 {
            b.push_raw_owned(100 + i);
        }
        let all: Vec<&mut PktHandle> = b.iter_mut().collect();
        let idx: Vec<u32> = all.iter().map(|h| h.index()).collect();
        assert_eq!(idx, (100..140).collect::<Vec<_>>());
        assert_eq!(b.iter_mut().len(), 40);
        assert_eq!(b.iter_mut().nth(39).map(|h| h.index()), Some(139));
        assert!(b.iter_mut().nth(40).is_none());
        let mut it = b.iter_mut();
        assert_eq!(it.nth(5).map(|h| h.index()), Some(105));
        assert_eq!(it.next().map(|h| h.index()), Some(106));
        assert_eq!(it.next_back().map(|h| h.index()), Some(139));
        assert_eq!(it.len(), 32);
        b.drain(|h| {
            let _ = h.into_raw();
        });
    }

    /// A panic in the closure of `drain` leaves the batch empty (what it
    /// had not handed out is forgotten, never listed twice); in `retain`'s
    /// closures it leaves the batch holding exactly the handles that were
    /// not handed out, in order: none twice, none handed out, none missing.
    #[test]
    fn a_panicking_closure_leaves_no_handle_listed_twice_or_lost() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        // Unwinds as a panic does, without the panic hook: other tests of
        // this binary fork, and a child forked while this thread held the
        // hook's locks (stderr, backtrace) would hang on them.
        let panic_if = |cond: bool| {
            if cond {
                std::panic::resume_unwind(Box::new("a closure panicked"));
            }
        };
        let fill = || {
            let mut b = HandleBatch::new();
            for i in 0..10 {
                b.push_raw_owned(i);
            }
            b
        };
        // drain: 0..3 handed out, then the closure panics on 3 (it owns 3).
        let mut b = fill();
        let mut out = Vec::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            b.drain(|h| {
                let i = h.into_raw();
                out.push(i);
                panic_if(i == 3);
            })
        }));
        assert!(r.is_err());
        assert_eq!(out, [0, 1, 2, 3]);
        assert!(b.is_empty(), "4.. forgotten, not listed");

        // retain: odd ones rejected; `keep` panics looking at 6, which it
        // did not take, so 6 stays.
        let mut b = fill();
        let mut rejected = Vec::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            b.retain(
                |h| {
                    panic_if(h.index() == 6);
                    h.index() % 2 == 0
                },
                |h| rejected.push(h.into_raw()),
            )
        }));
        assert!(r.is_err());
        assert_eq!(rejected, [1, 3, 5]);
        assert_eq!(b.indices(), [0, 2, 4, 6, 7, 8, 9]);
        b.drain(|h| {
            let _ = h.into_raw();
        });

        // retain: `reject` panics holding 3, which is then its own.
        let mut b = fill();
        let r = catch_unwind(AssertUnwindSafe(|| {
            b.retain(|h| h.index() % 2 == 0, |h| panic_if(h.into_raw() == 3))
        }));
        assert!(r.is_err());
        assert_eq!(b.indices(), [0, 2, 4, 5, 6, 7, 8, 9]);
        b.drain(|h| {
            let _ = h.into_raw();
        });
    }

    /// `retain` without a panic keeps and rejects in order.
    #[test]
    fn retain_keeps_in_order_and_hands_out_the_rest() {
        let mut b = HandleBatch::new();
        for i in 0..10 {
            b.push_raw_owned(i);
        }
        let mut rejected = Vec::new();
        b.retain(|h| h.index() % 3 == 0, |h| rejected.push(h.into_raw()));
        assert_eq!(b.indices(), [0, 3, 6, 9]);
        assert_eq!(rejected, [1, 2, 4, 5, 7, 8]);
        b.drain(|h| {
            let _ = h.into_raw();
        });
    }

    /// `drain_front` hands out exactly the first `n` in order and keeps
    /// the rest in order; asking for more than it holds takes all.
    #[test]
    fn drain_front_takes_the_front_and_keeps_the_rest_in_order() {
        let mut b = HandleBatch::new();
        for i in 0..10 {
            b.push_raw_owned(i);
        }
        let mut out = Vec::new();
        b.drain_front(4, |h| out.push(h.into_raw()));
        assert_eq!(out, [0, 1, 2, 3]);
        assert_eq!(b.indices(), [4, 5, 6, 7, 8, 9]);
        b.drain_front(0, |h| out.push(h.into_raw()));
        assert_eq!(out.len(), 4);
        b.drain_front(99, |h| out.push(h.into_raw()));
        assert_eq!(out, (0..10).collect::<Vec<_>>());
        assert!(b.is_empty());
    }
}
