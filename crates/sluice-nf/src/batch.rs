//! A batch of packets handed to an NF.

use sluice_mem::{Arena, HandleBatch};

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
        for i in 0..self.handles.len() {
            if let Some(h) = self.handles.get_mut(i) {
                let mut p = Packet::new(self.arena.pkt(h));
                f(&mut p);
            }
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
