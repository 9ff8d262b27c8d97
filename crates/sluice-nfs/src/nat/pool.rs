//! The external address pool and its port (ICMP: query id) allocation.
//!
//! Address pooling is *paired* (RFC 4787 REQ-2): internal address `a`
//! always uses pool address number `a mod n`, so every session of an inside
//! host leaves from the same external address, with no state to keep.
//!
//! Ports are tracked per external address and protocol class (TCP, UDP,
//! ICMP) in a 65 536-bit bitmap (8 KiB). Allocation preserves the inside
//! port when it is free (RFC 4787 §4.2.1, RFC 5382 §4.1); otherwise it
//! takes the next free port upwards, wrapping within the range: ports below
//! 1024 map into 1–1023 (RFC 4787 §4.2.1: a "similar range"), the rest into
//! the configured range; ICMP query ids use the whole id space. Deterministic allocation keeps behaviour
//! reproducible and predictable for hole punching.

use sluice_spec::PortRange;

/// Protocol classes with separate port spaces.
pub(crate) const CLASSES: usize = 3;

/// Port space of `proto` (TCP 0, UDP 1, ICMP 2).
#[inline]
pub(crate) fn class_of(proto: u8) -> usize {
    match proto {
        6 => 0,
        17 => 1,
        _ => 2,
    }
}

const WORDS: usize = 65_536 / 64;

/// The pool: addresses and their port bitmaps.
pub(crate) struct Pool {
    /// Pool addresses, ascending.
    addrs: Vec<u32>,
    /// Prefixes as (network, mask), for the membership test.
    nets: Vec<(u32, u32)>,
    /// One bitmap per (address, class): bit set = port in use.
    used: Vec<Box<[u64; WORDS]>>,
    range: PortRange,
}

/// Most addresses a pool may hold (24 KiB of bitmaps each).
pub(crate) const MAX_ADDRS: usize = 1024;

impl Pool {
    /// A pool of `addrs` (ascending, distinct, at least one) covered by
    /// `nets`; dynamic ports ≥ 1024 come from `range`.
    pub(crate) fn new(addrs: Vec<u32>, nets: Vec<(u32, u32)>, range: PortRange) -> Pool {
        let used = (0..addrs.len() * CLASSES)
            .map(|_| Box::new([0u64; WORDS]))
            .collect();
        Pool {
            addrs,
            nets,
            used,
            range,
        }
    }

    /// The same pool with every port free (a checkpoint's restore fills it).
    pub(crate) fn empty_like(&self) -> Pool {
        Pool::new(self.addrs.clone(), self.nets.clone(), self.range)
    }

    /// Whether allocation can give `port` in `class`: any ICMP id; TCP and
    /// UDP ports 1–1023 (kept below 1024) or in the configured range.
    pub(crate) fn port_ok(&self, class: usize, port: u16) -> bool {
        class == 2 || (port != 0 && (port < 1024 || self.range.contains(port)))
    }

    /// Whether `a` is a pool address.
    #[inline]
    pub(crate) fn contains(&self, a: u32) -> bool {
        self.nets.iter().any(|&(n, m)| a & m == n)
    }

    /// Index of pool address `a`.
    pub(crate) fn index_of(&self, a: u32) -> Option<usize> {
        self.addrs.binary_search(&a).ok()
    }

    /// The pool address paired with internal address `internal`.
    #[inline]
    pub(crate) fn paired(&self, internal: u32) -> (usize, u32) {
        let i = internal as usize % self.addrs.len().max(1);
        (i, self.addrs.get(i).copied().unwrap_or(0))
    }

    fn bitmap(&mut self, addr: usize, class: usize) -> Option<&mut [u64; WORDS]> {
        self.used.get_mut(addr * CLASSES + class).map(|b| &mut **b)
    }

    /// Whether `port` is in use on pool address number `addr`.
    #[cfg(test)]
    pub(crate) fn in_use(&self, addr: usize, class: usize, port: u16) -> bool {
        self.used
            .get(addr * CLASSES + class)
            .is_some_and(|b| b[usize::from(port) / 64] >> (port % 64) & 1 != 0)
    }

    /// Marks `port` used (static mappings); false if it already was.
    pub(crate) fn reserve(&mut self, addr: usize, class: usize, port: u16) -> bool {
        let Some(b) = self.bitmap(addr, class) else {
            return false;
        };
        let w = &mut b[usize::from(port) / 64];
        let bit = 1u64 << (port % 64);
        let free = *w & bit == 0;
        *w |= bit;
        free
    }

    /// Releases `port`.
    pub(crate) fn free(&mut self, addr: usize, class: usize, port: u16) {
        if let Some(b) = self.bitmap(addr, class) {
            b[usize::from(port) / 64] &= !(1u64 << (port % 64));
        }
    }

    /// Allocates a port for inside port `want` on pool address number
    /// `addr`: `want` itself when free and in its range, else the next free
    /// port upwards (wrapping). `None` when the range is exhausted.
    /// Cost: one bit test when preserved; else ≤ 1024 word scans.
    pub(crate) fn alloc(&mut self, addr: usize, class: usize, want: u16) -> Option<u16> {
        let range = match class {
            // ICMP query ids have no privileged range: preserve any id.
            2 => PortRange::ALL,
            _ if want < 1024 => PortRange { lo: 1, hi: 1023 },
            _ => self.range,
        };
        let b = self.bitmap(addr, class)?;
        let start = if range.contains(want) { want } else { range.lo };
        let (lo, hi) = (u32::from(range.lo), u32::from(range.hi));
        let mut p = u32::from(start);
        let mut left = hi - lo + 1;
        while left > 0 {
            let w = b[p as usize / 64];
            // Free bits at or above p within this word.
            let free = !w & (u64::MAX << (p % 64));
            if free != 0 {
                let q = (p & !63) + free.trailing_zeros();
                if q <= hi && q - p < left {
                    b[q as usize / 64] |= 1u64 << (q % 64);
                    return Some(q as u16);
                }
            }
            let next = (p | 63) + 1;
            let step = next.min(hi + 1) - p;
            if step >= left {
                break;
            }
            left -= step;
            p = if next > hi { lo } else { next };
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(range: PortRange) -> Pool {
        Pool::new(vec![0xc000_0201], vec![(0xc000_0201, u32::MAX)], range)
    }

    #[test]
    fn preserves_then_takes_the_next_free_port_and_wraps() {
        let mut p = pool(PortRange {
            lo: 1024,
            hi: 65535,
        });
        assert_eq!(p.alloc(0, 1, 5000), Some(5000));
        assert_eq!(p.alloc(0, 1, 5000), Some(5001));
        assert_eq!(p.alloc(0, 0, 5000), Some(5000), "TCP has its own space");
        assert_eq!(p.alloc(0, 1, 65535), Some(65535));
        assert_eq!(p.alloc(0, 1, 65535), Some(1024), "wraps to the range start");
        assert_eq!(p.alloc(0, 1, 80), Some(80));
        assert_eq!(
            p.alloc(0, 1, 80),
            Some(81),
            "privileged ports stay below 1024"
        );
        p.free(0, 1, 5000);
        assert!(!p.in_use(0, 1, 5000));
        assert_eq!(p.alloc(0, 1, 4999), Some(4999));
        assert_eq!(p.alloc(0, 1, 4999), Some(5000));
    }

    #[test]
    fn exhausts_exactly_the_range() {
        let mut p = pool(PortRange { lo: 2000, hi: 2130 });
        let mut got: Vec<u16> = (0..131).map(|_| p.alloc(0, 1, 40000).unwrap()).collect();
        assert_eq!(p.alloc(0, 1, 40000), None);
        assert_eq!(p.alloc(0, 1, 2050), None);
        got.sort_unstable();
        assert_eq!(got, (2000..=2130).collect::<Vec<u16>>());
        p.free(0, 1, 2077);
        assert_eq!(p.alloc(0, 1, 2000), Some(2077));
        // ICMP ids: any id is preserved; taken ones move to the next.
        assert_eq!(p.alloc(0, 2, 3), Some(3));
        assert_eq!(p.alloc(0, 2, 3), Some(4));
        assert_eq!(p.alloc(0, 2, 65535), Some(65535));
        assert_eq!(p.alloc(0, 2, 65535), Some(0));
    }

    #[test]
    fn reserve_and_pairing() {
        let mut p = Pool::new(
            vec![10, 11, 12],
            vec![(8, !3)],
            PortRange {
                lo: 1024,
                hi: 65535,
            },
        );
        assert!(p.reserve(1, 0, 8080));
        assert!(!p.reserve(1, 0, 8080));
        assert_eq!(p.alloc(1, 0, 8080), Some(8081));
        assert_eq!(p.paired(7), (1, 11));
        assert!(p.contains(9) && !p.contains(12 + 4));
        assert_eq!(p.index_of(12), Some(2));
    }
}
