//! The packet buffers as one region a device reads and writes in place
//! (AF_XDP's UMEM): where the region is, where a buffer lies in it, and
//! which buffer a byte of it belongs to.
//!
//! The region runs from the first ordinary buffer to the arena's end:
//! every trust domain's ordinary buffers, the holes between domains, the
//! large buffers. Both ends are page aligned (every buffer region is,
//! see [`super::layout`]), as `XDP_UMEM_REG` wants. Offsets into it are
//! what a device is given and gives back, so turning one back into a
//! buffer is arithmetic here, checked, never trusted: a device (or a
//! kernel bug) naming a byte of a hole or of the gap before the large
//! buffers gets `None`.
//!
//! Only a process that maps every domain (the platform) has the whole
//! region; an NF process that withdrew other domains has none to share.

use super::Arena;
use crate::buffer::{PktHandle, BUF_STRIDE, LARGE_STRIDE};

/// The arena's buffer region, for registering with a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaRegion {
    /// Its first byte's address in this process (page aligned).
    pub addr: usize,
    /// Its length in bytes (a whole number of pages).
    pub len: usize,
}

impl Arena {
    /// The buffer region, or `None` in a process that withdrew another
    /// trust domain's buffers ([`Arena::keep_domain`]).
    pub fn dma_region(&self) -> Option<DmaRegion> {
        if self.kept_domain.is_some() {
            return None;
        }
        Some(DmaRegion {
            addr: self.base.as_ptr() as usize + self.offsets.buffers,
            len: self.len - self.offsets.buffers,
        })
    }

    /// Where `h`'s buffer starts in the region (its metadata's first byte).
    #[inline]
    pub fn dma_offset(&self, h: &PktHandle) -> u64 {
        let i = h.index();
        let off = if i < self.offsets.ordinary {
            i as usize * BUF_STRIDE
        } else {
            let j = (i - self.offsets.ordinary) as usize;
            self.offsets.large - self.offsets.buffers + j * LARGE_STRIDE
        };
        off as u64
    }

    /// The buffer holding byte `off` of the region: its index and where
    /// it starts in the region. `None` for a byte outside every buffer
    /// (past the end, in a hole between domains, in the gap before the
    /// large buffers).
    #[inline]
    pub fn dma_buffer(&self, off: u64) -> Option<(u32, u64)> {
        let off = usize::try_from(off).ok()?;
        let ordinary = self.offsets.ordinary as usize;
        let i = off / BUF_STRIDE;
        if i < ordinary {
            // A hole is an index no domain holds: the layout's domains
            // list every index that is a buffer.
            let i = i as u32;
            let real = self.offsets.domains.iter().any(|d| d.indices.contains(&i));
            return real.then_some((i, (i as usize * BUF_STRIDE) as u64));
        }
        let large = self.offsets.large - self.offsets.buffers;
        let j = off.checked_sub(large)? / LARGE_STRIDE;
        if j >= self.config.large_buffers as usize {
            return None;
        }
        Some((
            self.offsets.ordinary + j as u32,
            (large + j * LARGE_STRIDE) as u64,
        ))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::arena::{Arena, ArenaConfig};
    use crate::buffer::{BUF_STRIDE, LARGE_STRIDE};
    use crate::pool::{BufferPool, PoolCache};

    fn arena(domains: &[u32], large: u32) -> Arena {
        let mut c = ArenaConfig {
            buffers: domains[0],
            large_buffers: large,
            ring_size: 64,
            nf_slots: 2,
            workers: 1,
            ..Default::default()
        };
        for (k, &n) in domains[1..].iter().enumerate() {
            c.domain_buffers[k] = n;
        }
        Arena::create(c).unwrap()
    }

    #[test]
    fn every_byte_of_every_buffer_maps_back_to_it() {
        let a = arena(&[5, 3], 2);
        let pool = BufferPool::for_arena(&a);
        let mut cache = PoolCache::new(&pool, 4);
        let r = a.dma_region().unwrap();
        assert_eq!(r.addr % 4096, 0);
        assert_eq!(r.len % 4096, 0);
        let mut handles = Vec::new();
        for d in 0..2 {
            while let Some(h) = cache.alloc_in(d) {
                handles.push(h);
            }
        }
        while let Some(h) = cache.alloc_large() {
            handles.push(h);
        }
        assert_eq!(handles.len(), 10);
        for h in &mut handles {
            let off = a.dma_offset(h);
            let stride = a.pkt(h).capacity() as u64;
            assert!(off + stride <= r.len as u64, "inside the region");
            // The region's bytes are the buffer's bytes.
            a.pkt(h).reset(10);
            let first = a.pkt(h).data().as_ptr() as usize;
            let at = r.addr + off as usize + a.pkt(h).data_off() as usize;
            assert_eq!(first, at);
            for byte in [0, 1, stride / 2, stride - 1] {
                assert_eq!(a.dma_buffer(off + byte), Some((h.index(), off)));
            }
        }
    }

    #[test]
    fn holes_gaps_and_bytes_past_the_end_are_no_buffer() {
        let a = arena(&[5, 3], 1);
        let r = a.dma_region().unwrap();
        let domains = &a.offsets.domains;
        // Domain 0 ends on a page boundary: the buffer straddling it is a hole.
        let hole = domains[0].indices.end;
        assert!(!domains[1].indices.contains(&hole));
        assert_eq!(a.dma_buffer(u64::from(hole) * BUF_STRIDE as u64 + 7), None);
        // Between the last ordinary buffer and the large ones.
        let gap = a.offsets.ordinary as u64 * BUF_STRIDE as u64 + 1;
        assert!(gap < (a.offsets.large - a.offsets.buffers) as u64);
        assert_eq!(a.dma_buffer(gap), None);
        assert_eq!(a.dma_buffer(r.len as u64), None);
        assert_eq!(a.dma_buffer(u64::MAX), None);
        let last_large = (a.offsets.large - a.offsets.buffers + LARGE_STRIDE) as u64;
        assert_eq!(
            a.dma_buffer(last_large),
            None,
            "one past the last large buffer"
        );
    }

    #[test]
    fn a_process_keeping_one_domain_has_no_region_to_share() {
        let mut a = arena(&[5, 3], 0);
        assert!(a.dma_region().is_some());
        a.keep_domain(1).unwrap();
        assert_eq!(a.dma_region(), None);
    }
}
