//! Packet allocation and emission for inline NFs: allocations come from the
//! worker's pool cache, emitted packets collect in a batch the worker
//! steers right after the NF returns, like the NF's own batch.

use sluice_mem::{HandleBatch, PktHandle, PoolCache};
use sluice_nf::PacketIo;

/// The worker's [`PacketIo`] for one inline NF call.
pub struct InlineIo<'w, 'p> {
    /// Source of fresh buffers.
    pub cache: &'w mut PoolCache<'p>,
    /// Emitted packets, in emission order.
    pub out: &'w mut HandleBatch,
    /// Fresh packets emitted (originated by the NF), for accounting.
    pub originated: &'w mut u64,
}

impl PacketIo for InlineIo<'_, '_> {
    fn alloc(&mut self) -> Option<PktHandle> {
        self.cache.alloc()
    }

    fn give_back(&mut self, h: PktHandle) {
        self.cache.free(h);
    }

    fn emit(&mut self, h: PktHandle, fresh: bool) -> Result<(), PktHandle> {
        self.out.push(h)?;
        // Inline NFs are trusted code, so `fresh` is believed here.
        *self.originated += u64::from(fresh);
        Ok(())
    }
}
