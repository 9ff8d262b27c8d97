//! Packets an NF owns outside a batch, and the platform service that
//! allocates and sends them.
//!
//! An NF that queues packets (a shaper) takes them out of its batch with
//! [`Batch::take_if`](crate::Batch::take_if); an NF that creates packets (a
//! reject reply, a flood copy, an ARP request) allocates them with
//! [`Context::alloc`](crate::Context::alloc). Either way it ends up holding
//! an [`OwnedPacket`] and later hands it back with
//! [`Context::emit`](crate::Context::emit).

use sluice_mem::PktHandle;

/// A buffer the NF owns outside any batch: taken from a batch, or
/// allocated. Not `Clone`: it must be given back exactly once (emitted or
/// discarded); one that is forgotten shows up as a leaked buffer at
/// shutdown.
#[derive(Debug)]
pub struct OwnedPacket {
    pub(crate) handle: PktHandle,
    /// Allocated by the NF (not a packet that entered through a port).
    pub(crate) fresh: bool,
}

impl OwnedPacket {
    /// Whether the NF allocated this buffer (rather than taking it from a
    /// batch).
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }
}

/// Where an NF's allocations come from and its emitted packets go: the
/// worker's pool for inline NFs, a stash of spare buffers and the transmit
/// ring for process NFs, a private pool in the test harness.
pub trait PacketIo {
    /// A free buffer, if one is available now.
    fn alloc(&mut self) -> Option<PktHandle>;
    /// Returns an unused buffer from [`Self::alloc`].
    fn give_back(&mut self, h: PktHandle);
    /// Queues `h` (its verdict already set) for delivery after the current
    /// call; `fresh` says it was allocated by the NF. Err when the queue is
    /// full.
    fn emit(&mut self, h: PktHandle, fresh: bool) -> Result<(), PktHandle>;
}
