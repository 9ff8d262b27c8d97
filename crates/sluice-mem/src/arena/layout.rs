//! Where everything lives in the arena: pure arithmetic over
//! [`ArenaConfig`], kept apart from the mapping so it can be tested on
//! its own.
//!
//! The arena is one range of addresses made of separately backed
//! regions, each its own memfd:
//!
//! ```text
//! | platform words | domain 0 buffers | domain 1 buffers | … | large buffers |
//!   wakes, turns,    (the platform's)   (named trust domains)  (domain 0's)
//!   bells, control
//!   blocks, rings
//! ```
//!
//! Trust domains (NetVM's trust groups) split the packet buffers: an NF
//! process keeps only its own domain's region, so another
//! domain's packets are not in its address space at all, and since every
//! region is its own memfd, no `mremap` of what it keeps can reach them.
//! Buffer indices stay contiguous across domains (a handle's buffer is
//! still one multiply and add away): each domain's region starts and ends
//! on a page boundary, the domain takes every buffer that lies wholly
//! inside its region, and a buffer that straddles a boundary between two
//! domains is a *hole*, never handed out.

use std::ops::Range;

use super::ArenaConfig;
use crate::buffer::{BUF_STRIDE, LARGE_STRIDE};

pub(super) const HUGE_PAGE: usize = 2 << 20;
pub(super) const PAGE: usize = 4096;
pub(super) const LINE: usize = 128;

/// CPUs with a turn word (the kernel's own `CPU_SETSIZE`).
pub const MAX_CORES: usize = 1024;

/// Trust domains an arena holds: the platform's own (domain 0) and up to
/// 15 named ones.
pub const MAX_DOMAINS: usize = 16;

pub(super) fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Bell words for `nf_slots` slots.
pub(super) fn bell_words(nf_slots: u32) -> usize {
    nf_slots.div_ceil(crate::doorbell::BELLS_PER_WORD) as usize
}

/// One trust domain's share of the ordinary buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainRegion {
    /// Its buffer indices.
    pub indices: Range<u32>,
    /// Its bytes, from the arena's base (page-aligned at both ends).
    pub bytes: Range<usize>,
}

/// Byte offsets of every region of the arena, from its base.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub wakes: usize,
    pub cores: usize,
    pub bells: usize,
    pub controls: usize,
    pub control_size: usize,
    pub rings: usize,
    pub ring_bytes: usize,
    /// The end of the platform words: the first buffer region starts here.
    pub buffers: usize,
    pub domains: Vec<DomainRegion>,
    /// Ordinary buffer indices, holes included; large ones come after.
    pub ordinary: u32,
    pub large: usize,
    pub total: usize,
}

impl Layout {
    /// The layout of `c` with regions aligned to `page` (4 KiB, or 2 MiB
    /// for huge pages: each region is its own mapping).
    pub fn compute(c: &ArenaConfig, page: usize) -> Layout {
        let wakes = PAGE;
        let cores = align(wakes + c.workers as usize * LINE, PAGE);
        let bells = align(cores + MAX_CORES * LINE, PAGE);
        let controls = align(bells + bell_words(c.nf_slots) * 8, PAGE);
        let control_size = align(std::mem::size_of::<crate::control::NfControl>(), LINE);
        let rings = align(controls + c.nf_slots as usize * control_size, PAGE);
        let ring_bytes = align(
            std::mem::size_of::<crate::ring::RingShared>() + c.ring_size as usize * 4,
            LINE,
        );
        let buffers = align(rings + 2 * c.nf_slots as usize * ring_bytes, page);
        let sizes = c.domain_sizes();
        let mut domains = Vec::with_capacity(sizes.len());
        // `at`: bytes from the first buffer where the next domain starts.
        let (mut at, mut first) = (0usize, 0u32);
        for (d, &n) in sizes.iter().enumerate() {
            let last = d + 1 == sizes.len();
            let end = align((first as usize + n as usize) * BUF_STRIDE, page);
            // Every buffer wholly inside the region is the domain's (the
            // last domain keeps exactly what was asked: nothing follows).
            let count = if last {
                n
            } else {
                (end / BUF_STRIDE) as u32 - first
            };
            domains.push(DomainRegion {
                indices: first..first + count,
                bytes: buffers + at..buffers + end,
            });
            at = end;
            first = end.div_ceil(BUF_STRIDE) as u32;
        }
        let ordinary = domains.last().map_or(0, |d| d.indices.end);
        let large = buffers + at;
        let total = align(large + c.large_buffers as usize * LARGE_STRIDE, page);
        Layout {
            wakes,
            cores,
            bells,
            controls,
            control_size,
            rings,
            ring_bytes,
            buffers,
            domains,
            ordinary,
            large,
            total,
        }
    }

    /// The trust domain buffer `index` belongs to (`None`: a hole, a
    /// large buffer or out of range). The pool answers this on the packet
    /// path (`BufferPool::domain_of`); this one checks the layout.
    #[cfg(test)]
    pub fn domain_of(&self, index: u32) -> Option<usize> {
        self.domains.iter().position(|d| d.indices.contains(&index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(buffers: u32, named: &[u32]) -> ArenaConfig {
        let mut c = ArenaConfig {
            buffers,
            ring_size: 64,
            nf_slots: 3,
            workers: 1,
            ..ArenaConfig::default()
        };
        c.domain_buffers[..named.len()].copy_from_slice(named);
        c
    }

    #[test]
    fn one_domain_is_the_layout_without_domains() {
        let l = Layout::compute(&config(1000, &[]), PAGE);
        assert_eq!(l.domains.len(), 1);
        assert_eq!(l.domains[0].indices, 0..1000);
        assert_eq!(l.ordinary, 1000);
        assert_eq!(l.large, l.buffers + align(1000 * BUF_STRIDE, PAGE));
    }

    #[test]
    fn domains_are_page_aligned_disjoint_and_hold_what_was_asked() {
        for page in [PAGE, HUGE_PAGE] {
            let l = Layout::compute(&config(1000, &[300, 257, 4096]), page);
            assert_eq!(l.domains.len(), 4);
            let mut prev_end = l.buffers;
            for (d, (r, asked)) in l.domains.iter().zip([1000, 300, 257, 4096]).enumerate() {
                assert_eq!(r.bytes.start, prev_end, "domain {d} follows the last");
                assert_eq!(r.bytes.start % page, 0);
                assert_eq!(r.bytes.end % page, 0);
                assert!(r.indices.len() >= asked, "domain {d}");
                // Every buffer of the domain lies wholly in its bytes.
                let first = l.buffers + r.indices.start as usize * BUF_STRIDE;
                let end = l.buffers + r.indices.end as usize * BUF_STRIDE;
                assert!(first >= r.bytes.start && end <= r.bytes.end, "domain {d}");
                prev_end = r.bytes.end;
            }
            // At most one hole between two domains, and the last domain
            // gets exactly what it asked for.
            for w in l.domains.windows(2) {
                assert!(w[1].indices.start - w[0].indices.end <= 1);
            }
            assert_eq!(l.domains[3].indices.len(), 4096);
            assert_eq!(l.ordinary, l.domains[3].indices.end);
            assert_eq!(l.large, prev_end);
        }
    }

    #[test]
    fn every_index_has_one_domain_or_is_a_hole() {
        let l = Layout::compute(&config(100, &[300, 257]), PAGE);
        let mut holes = 0;
        for i in 0..l.ordinary {
            match l.domain_of(i) {
                Some(d) => assert!(l.domains[d].indices.contains(&i)),
                None => holes += 1,
            }
        }
        assert!(holes <= 2);
        assert_eq!(l.domain_of(l.ordinary), None);
    }

    proptest::proptest! {
        /// For any sizes: regions follow each other on page boundaries,
        /// each domain has at least what it asked for (the last exactly),
        /// every buffer of a domain lies wholly inside its region, at most
        /// one hole separates two domains, and the large buffers follow.
        #[test]
        #[cfg_attr(miri, ignore)]
        fn any_sizes_give_a_sound_layout(
            first in 1u32..70_000,
            named in proptest::collection::vec(256u32..70_000, 0..15),
            huge in proptest::bool::ANY,
            large in 0u32..4,
        ) {
            let page = if huge { HUGE_PAGE } else { PAGE };
            let mut c = config(first, &named);
            c.large_buffers = large;
            let l = Layout::compute(&c, page);
            let asked: Vec<u32> = std::iter::once(first).chain(named.iter().copied()).collect();
            proptest::prop_assert_eq!(l.domains.len(), asked.len());
            let mut at = l.buffers;
            proptest::prop_assert_eq!(at % page, 0);
            for (d, (r, &n)) in l.domains.iter().zip(&asked).enumerate() {
                proptest::prop_assert_eq!(r.bytes.start, at);
                proptest::prop_assert_eq!(r.bytes.end % page, 0);
                if d + 1 == asked.len() {
                    proptest::prop_assert_eq!(r.indices.len(), n as usize);
                } else {
                    proptest::prop_assert!(r.indices.len() >= n as usize);
                    proptest::prop_assert!(l.domains[d + 1].indices.start - r.indices.end <= 1);
                }
                proptest::prop_assert!(l.buffers + r.indices.start as usize * BUF_STRIDE >= r.bytes.start);
                proptest::prop_assert!(l.buffers + r.indices.end as usize * BUF_STRIDE <= r.bytes.end);
                at = r.bytes.end;
            }
            proptest::prop_assert_eq!(l.large, at);
            proptest::prop_assert!(l.total >= l.large + large as usize * LARGE_STRIDE);
            proptest::prop_assert_eq!(l.total % page, 0);
        }
    }
}
