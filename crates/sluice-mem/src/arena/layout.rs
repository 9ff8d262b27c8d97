//! Where everything lives in the arena: pure arithmetic over
//! [`ArenaConfig`], kept apart from the mapping so it can be tested on
//! its own.
//!
//! The arena is one range of addresses made of separately backed
//! regions, each its own memfd:
//!
//! ```text
//! | platform | slots of   | slots of   | … | buffers of | buffers of | … | large   |
//! | words    | domain 0   | domain 1   |   | domain 0   | domain 1   |   | buffers |
//!   worker     turns, bells, control        (the platform's, then the     (domain
//!   wakes      blocks, rings of its NFs      named trust domains')         0's)
//! ```
//!
//! Trust domains (NetVM's trust groups) split everything an NF touches:
//! an NF process keeps its own domain's slots and buffers and withdraws
//! every other domain's, so another domain's packets, rings and control
//! blocks are not in its address space at all; since every region is its
//! own memfd, no `mremap` of what it keeps can reach them. What all
//! domains share is the platform words: the workers' wake words, which
//! every NF must be able to ring.
//!
//! Indices stay contiguous across domains, for slots as for buffers:
//!
//! * **Buffers**: a handle's buffer is one multiply and add away. Each
//!   domain's buffer region starts and ends on a page boundary, the domain
//!   takes every buffer that lies wholly inside its region, and a buffer
//!   that straddles a boundary between two domains is a *hole*, never
//!   handed out.
//! * **Slots**: each domain's first slot is a multiple of 64, so a
//!   doorbell word ([`crate::doorbell`]: slot `s` rings bit `s % 64` of
//!   word `s / 64`) belongs to one domain; the slots between one domain's
//!   last and the next multiple of 64 are holes. Each domain has its own
//!   turn word per core ([`crate::turn`]), so NFs take turns only with NFs
//!   of their own domain.

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

/// One trust domain's NF slots: their turn words (one per core), doorbell
/// words, control blocks and rings, in one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRegion {
    /// Its slot indices (the first a multiple of 64).
    pub slots: Range<u32>,
    /// Its bytes, from the arena's base (page-aligned at both ends).
    pub bytes: Range<usize>,
    /// Where its turn words, doorbell words, control blocks and rings
    /// start, from the arena's base.
    pub(super) turns: usize,
    pub(super) bells: usize,
    pub(super) controls: usize,
    pub(super) rings: usize,
}

/// Byte offsets of every region of the arena, from its base.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub wakes: usize,
    /// Each trust domain's slots, the platform's first.
    pub slot_regions: Vec<SlotRegion>,
    pub control_size: usize,
    pub ring_bytes: usize,
    /// Slot indices, holes included (every domain's).
    pub slots: u32,
    /// The end of the slot regions: the first buffer region starts here.
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
        let control_size = align(std::mem::size_of::<crate::control::NfControl>(), LINE);
        let ring_bytes = align(
            std::mem::size_of::<crate::ring::RingShared>() + c.ring_size as usize * 4,
            LINE,
        );
        let sizes = c.domain_sizes();
        let mut at = align(wakes + c.workers as usize * LINE, page);
        let mut slot_regions = Vec::with_capacity(sizes.len());
        let mut first = 0u32;
        for _ in &sizes {
            // Every domain has as many slots as the platform's own.
            let n = c.nf_slots;
            let turns = at;
            let bells = turns + MAX_CORES * LINE;
            let controls = align(bells + bell_words(n) * 8, LINE);
            let rings = align(controls + n as usize * control_size, LINE);
            let end = align(rings + 2 * n as usize * ring_bytes, page);
            slot_regions.push(SlotRegion {
                slots: first..first + n,
                bytes: at..end,
                turns,
                bells,
                controls,
                rings,
            });
            at = end;
            first = (first + n).next_multiple_of(crate::doorbell::BELLS_PER_WORD);
        }
        let slots = slot_regions.last().map_or(0, |r| r.slots.end);
        let buffers = at;
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
            slot_regions,
            control_size,
            ring_bytes,
            slots,
            buffers,
            domains,
            ordinary,
            large,
            total,
        }
    }

    /// The trust domain slot `slot` belongs to and its region (`None`: a
    /// hole or out of range). At most 16 compares; the arena looks at the
    /// domain it keeps first (`Arena::kept_region`).
    #[inline]
    pub fn slot_region(&self, slot: u32) -> Option<(usize, &SlotRegion)> {
        self.slot_regions
            .iter()
            .enumerate()
            .find(|(_, r)| r.slots.contains(&slot))
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

    /// Each domain's slot region holds its turn words, doorbells, control
    /// blocks and rings inside its own page-aligned bytes, the regions
    /// follow each other, and a domain's first slot is a multiple of 64.
    fn check_slot_regions(l: &Layout, c: &ArenaConfig, page: usize) {
        let mut at = align(l.wakes + c.workers as usize * LINE, page);
        let mut first = 0;
        for (d, r) in l.slot_regions.iter().enumerate() {
            assert_eq!(r.bytes.start, at, "domain {d}'s slots follow the last");
            assert_eq!(r.bytes.end % page, 0);
            assert_eq!(r.slots.start, first);
            assert_eq!(r.slots.start % 64, 0);
            assert_eq!(r.slots.len(), c.nf_slots as usize);
            let n = r.slots.len();
            assert!(r.turns >= r.bytes.start && r.turns + MAX_CORES * LINE <= r.bells);
            assert!(r.bells + bell_words(n as u32) * 8 <= r.controls);
            assert!(r.controls + n * l.control_size <= r.rings);
            assert!(r.rings + 2 * n * l.ring_bytes <= r.bytes.end);
            for s in r.slots.clone() {
                assert_eq!(l.slot_region(s).map(|(i, _)| i), Some(d));
            }
            // The slots up to the next multiple of 64 are holes.
            for s in r.slots.end..r.slots.end.next_multiple_of(64) {
                assert_eq!(l.slot_region(s), None);
            }
            at = r.bytes.end;
            first = r.slots.end.next_multiple_of(64);
        }
        assert_eq!(l.buffers, at, "the buffers follow the slots");
        assert_eq!(l.slots, l.slot_regions.last().unwrap().slots.end);
    }

    #[test]
    fn each_domain_has_its_own_slot_region() {
        for page in [PAGE, HUGE_PAGE] {
            for named in [&[][..], &[300, 257]] {
                let c = config(1000, named);
                let l = Layout::compute(&c, page);
                assert_eq!(l.slot_regions.len(), 1 + named.len());
                check_slot_regions(&l, &c, page);
            }
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
        /// one hole separates two domains, and the large buffers follow;
        /// slot regions as `check_slot_regions` states.
        #[test]
        #[cfg_attr(miri, ignore)]
        fn any_sizes_give_a_sound_layout(
            first in 1u32..70_000,
            named in proptest::collection::vec(256u32..70_000, 0..15),
            huge in proptest::bool::ANY,
            large in 0u32..4,
            slots in 1u32..300,
        ) {
            let page = if huge { HUGE_PAGE } else { PAGE };
            let mut c = config(first, &named);
            c.large_buffers = large;
            c.nf_slots = slots;
            let l = Layout::compute(&c, page);
            check_slot_regions(&l, &c, page);
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
