//! A batch of packets handed to an NF.

use sluice_mem::{Arena, HandleBatch, HandlesMut};

use crate::owned::OwnedPacket;
use crate::packet::Packet;
use crate::verdict::Verdict;

/// The packets an NF processes in one call. Every packet starts with the
/// verdict [`Verdict::Next`].
pub struct Batch<'a> {
    arena: &'a Arena,
    handles: &'a mut HandleBatch,
}

impl<'a> Batch<'a> {
    /// Wraps owned handles of `arena` (the platform and the test harness
    /// build batches; NFs receive them).
    pub fn new(arena: &'a Arena, handles: &'a mut HandleBatch) -> Self {
        Batch { arena, handles }
    }

    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Whether the batch is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Packet `i`, or `None` past the end.
    #[inline]
    pub fn get(&mut self, i: usize) -> Option<Packet<'_>> {
        let h = self.handles.get_mut(i)?;
        Some(Packet::new(self.arena.pkt(h)))
    }

    /// Calls `f` on every packet in order.
    #[inline]
    pub fn for_each(&mut self, mut f: impl FnMut(&mut Packet<'_>)) {
        let arena = self.arena;
        for h in self.handles.iter_mut() {
            f(&mut Packet::new(arena.pkt(h)));
        }
    }

    /// The packets in order, as an iterator: for passes that keep what
    /// they read in arrays, stop early or start further on
    /// (`iter_mut().skip(n)` skips without touching the packets it
    /// passes). Like [`Batch::for_each`], the batch's bounds are checked
    /// once, not per packet as [`Batch::get`] must.
    #[inline]
    pub fn iter_mut(&mut self) -> PacketsMut<'_> {
        PacketsMut {
            arena: self.arena,
            handles: self.handles.iter_mut(),
        }
    }

    /// Removes every packet for which `take` returns true (in order) and
    /// hands it to `sink`: the NF now owns it and must later emit it with
    /// [`Context::emit`](crate::Context::emit) (a queue, a reorder buffer).
    pub fn take_if(
        &mut self,
        mut take: impl FnMut(&mut Packet<'_>) -> bool,
        mut sink: impl FnMut(OwnedPacket),
    ) {
        let arena = self.arena;
        self.handles.retain(
            |h| !take(&mut Packet::new(arena.pkt(h))),
            |handle| {
                sink(OwnedPacket {
                    handle,
                    fresh: false,
                })
            },
        );
    }

    /// The arena and handles (for the element-graph runner).
    pub(crate) fn parts(&mut self) -> (&'a Arena, &mut HandleBatch) {
        (self.arena, self.handles)
    }

    /// Sets every packet's verdict to `Next` (done by the runtime before
    /// each call so a verdict never leaks from a previous hop).
    pub fn reset_verdicts(&mut self) {
        self.for_each(|p| p.set_verdict(Verdict::Next));
    }
}

/// The packets of a [`Batch`], in order ([`Batch::iter_mut`]). Each
/// packet is a view of its own buffer, so all may be held at once.
pub struct PacketsMut<'b> {
    arena: &'b Arena,
    handles: HandlesMut<'b>,
}

impl<'b> Iterator for PacketsMut<'b> {
    type Item = Packet<'b>;

    #[inline]
    fn next(&mut self) -> Option<Packet<'b>> {
        let h = self.handles.next()?;
        Some(Packet::new(self.arena.pkt(h)))
    }

    /// Skips `n` packets without viewing them (so `skip` is O(1)).
    #[inline]
    fn nth(&mut self, n: usize) -> Option<Packet<'b>> {
        let h = self.handles.nth(n)?;
        Some(Packet::new(self.arena.pkt(h)))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.handles.size_hint()
    }
}

impl ExactSizeIterator for PacketsMut<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_mem::{ArenaConfig, BufferPool, PoolCache};

    /// `iter_mut` visits the packets `get` gives, in order; `skip(n)`
    /// starts at packet `n` (whatever `n`, past the end too); `for_each`
    /// visits the same packets.
    #[test]
    fn iter_mut_is_get_in_order_and_skips_exactly() {
        let arena = Arena::create(ArenaConfig {
            buffers: 64,
            ring_size: 64,
            nf_slots: 1,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
            ..Default::default()
        })
        .unwrap();
        let pool = BufferPool::new(arena.buffers());
        let mut cache = PoolCache::new(&pool, 64);
        let mut handles = HandleBatch::new();
        for i in 0..40u32 {
            let mut h = cache.alloc().unwrap();
            let mut p = arena.pkt(&mut h);
            p.reset(20 + i as usize);
            p.set_flow_id(1000 + i);
            handles.push(h).unwrap();
        }
        let mut batch = Batch::new(&arena, &mut handles);
        let by_get: Vec<(u32, usize)> = (0..batch.len())
            .map(|i| {
                let p = batch.get(i).unwrap();
                (p.flow_id(), p.data().len())
            })
            .collect();
        assert_eq!(by_get.len(), 40);
        assert_eq!(batch.iter_mut().len(), 40);
        let by_iter: Vec<_> = batch
            .iter_mut()
            .map(|p| (p.flow_id(), p.data().len()))
            .collect();
        assert_eq!(by_iter, by_get);
        for n in [0, 1, 31, 32, 39, 40, 41, 100] {
            let skipped: Vec<_> = batch.iter_mut().skip(n).map(|p| p.flow_id()).collect();
            let want: Vec<_> = by_get.iter().skip(n).map(|x| x.0).collect();
            assert_eq!(skipped, want, "skip {n}");
        }
        let mut seen = Vec::new();
        batch.for_each(|p| seen.push((p.flow_id(), p.data().len())));
        assert_eq!(seen, by_get);
        handles.drain(|h| cache.free(h));
    }
}
