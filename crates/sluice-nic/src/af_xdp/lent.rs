//! The arena buffers one socket has lent the kernel: on its fill ring
//! waiting for a frame, or sent on its TX ring and not yet completed.
//!
//! The kernel gives buffers back as addresses (an RX descriptor, a
//! completion), and an address is not a handle: only the handle the port
//! put here is. So a buffer's handle waits here from the moment the
//! kernel may touch the buffer until the kernel says it is done, and an
//! address that names no lent buffer finds nothing instead of forging a
//! second owner. When the port closes, whatever is still here goes back
//! to the pool (after the kernel let go of the socket), so a buffer the
//! kernel never returned is not lost.
//!
//! One slot per arena buffer index, so lending and taking back are one
//! indexed store each on the packet path (8 bytes per buffer per queue:
//! 128 KiB for the default 16,384 buffers).

use sluice_mem::PktHandle;

pub(crate) struct Lent {
    by_index: Vec<Option<PktHandle>>,
    count: u32,
}

impl Lent {
    /// A table for buffer indices `0..buffers`.
    pub(crate) fn new(buffers: u32) -> Lent {
        Lent {
            by_index: (0..buffers).map(|_| None).collect(),
            count: 0,
        }
    }

    /// Lends `h`'s buffer; gives `h` back if its index is outside the
    /// table (a handle from another arena: never lent).
    #[inline]
    pub(crate) fn put(&mut self, h: PktHandle) -> Result<(), PktHandle> {
        match self.by_index.get_mut(h.index() as usize) {
            Some(slot @ None) => {
                *slot = Some(h);
                self.count += 1;
                Ok(())
            }
            // Occupied cannot happen (a handle is unique), but giving it
            // back keeps both handles owned rather than dropping one.
            _ => Err(h),
        }
    }

    /// Takes back the buffer at `index`, if it is lent.
    #[inline]
    pub(crate) fn take(&mut self, index: u32) -> Option<PktHandle> {
        let h = self.by_index.get_mut(index as usize)?.take()?;
        self.count -= 1;
        Some(h)
    }

    /// Buffers lent now.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// Takes every lent buffer back, into `f`.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(PktHandle)) {
        if self.count == 0 {
            return;
        }
        for slot in &mut self.by_index {
            if let Some(h) = slot.take() {
                f(h);
            }
        }
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Lent;
    use sluice_mem::{BufferPool, PoolCache};

    #[test]
    fn a_buffer_comes_back_once_by_its_index_and_drain_returns_the_rest() {
        let pool = BufferPool::new(8);
        let mut cache = PoolCache::new(&pool, 8);
        let mut lent = Lent::new(8);
        let mut idx = Vec::new();
        for _ in 0..5 {
            let h = cache.alloc().unwrap();
            idx.push(h.index());
            lent.put(h).unwrap();
        }
        assert_eq!(lent.count(), 5);
        let h = lent.take(idx[2]).expect("lent");
        assert_eq!(h.index(), idx[2]);
        assert!(lent.take(idx[2]).is_none(), "taken once");
        assert!(lent.take(1000).is_none(), "outside the table");
        cache.free(h);
        let mut back = 0;
        lent.drain(|h| {
            back += 1;
            cache.free(h)
        });
        assert_eq!((back, lent.count()), (4, 0));
        drop(cache);
        assert_eq!(pool.audit().free, 8, "every buffer back");
    }

    #[test]
    fn a_handle_outside_the_table_is_given_back() {
        let pool = BufferPool::new(8);
        let mut cache = PoolCache::new(&pool, 8);
        let mut lent = Lent::new(2);
        let mut refused = 0;
        while let Some(h) = cache.alloc() {
            match lent.put(h) {
                Ok(()) => {}
                Err(h) => {
                    refused += 1;
                    cache.free(h);
                    break;
                }
            }
        }
        assert!(refused == 1 && lent.count() <= 2);
        lent.drain(|h| cache.free(h));
    }
}
