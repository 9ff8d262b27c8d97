//! IPv4 longest-prefix match: DIR-24-8 (Gupta, Lin, McKeown, INFOCOM'98;
//! the layout of DPDK's `rte_lpm`).
//!
//! `tbl24` has one 32-bit entry per /24: either the value of the longest
//! prefix of length ≤ 24 covering it, or (top bit set) the index of a
//! 256-entry `tbl8` group that resolves the last octet. A lookup is one
//! load, or two for addresses under a prefix longer than /24.
//!
//! The table is built once from the whole route list, inserted shortest
//! prefix first so every longer prefix simply overwrites the range it
//! covers (leaf pushing without per-entry depth bookkeeping). `tbl24` is
//! 64 MiB of zeroed virtual memory; only the pages routes touch are ever
//! backed.

/// Value meaning "no route".
pub const NONE: u32 = 0;
const EXT: u32 = 1 << 31;

/// A DIR-24-8 table mapping IPv4 prefixes to values in `1..2^31`.
pub struct LpmV4 {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
}

impl LpmV4 {
    /// Builds the table from `(address, prefix length, value)` triples.
    /// Host bits beyond the prefix length are ignored; for duplicate
    /// prefixes the later one wins. Values must be in `1..2^31`
    /// (`NONE` = 0 means no route).
    pub fn build(routes: &[(u32, u8, u32)]) -> LpmV4 {
        let mut order: Vec<usize> = (0..routes.len()).collect();
        // Stable: among equal lengths the later route is painted last.
        order.sort_by_key(|&i| routes[i].1);
        let mut t = LpmV4 {
            // 64 MiB read at random: 2 MiB pages spare a TLB miss per lookup.
            tbl24: sluice_sys::vec_on_huge_pages(1 << 24, NONE),
            tbl8: Vec::new(),
        };
        for i in order {
            let (addr, len, value) = routes[i];
            debug_assert!(value != NONE && value & EXT == 0);
            let len = len.min(32);
            let addr = if len == 0 {
                0
            } else {
                addr & (u32::MAX << (32 - len))
            };
            if len <= 24 {
                let start = (addr >> 8) as usize;
                let n = 1usize << (24 - len);
                t.tbl24[start..start + n].fill(value);
            } else {
                let slot = (addr >> 8) as usize;
                let e = t.tbl24[slot];
                let group = if e & EXT != 0 {
                    (e & !EXT) as usize
                } else {
                    let g = t.tbl8.len() / 256;
                    t.tbl8.extend(std::iter::repeat_n(e, 256));
                    t.tbl24[slot] = EXT | g as u32;
                    g
                };
                let start = group * 256 + (addr & 0xff) as usize;
                let n = 1usize << (32 - len);
                t.tbl8[start..start + n].fill(value);
            }
        }
        t.tbl8.shrink_to_fit();
        t
    }

    /// The value of the longest prefix containing `addr`, or [`NONE`].
    // ≈ 15 ns per random lookup at 1 M routes, cache-cold, about one
    // 64 MiB random read (12 ns) (bench: router/lpm_v4_lookup_1M, CPU
    // time under load).
    #[inline]
    pub fn lookup(&self, addr: u32) -> u32 {
        let e = self.tbl24[(addr >> 8) as usize];
        if e & EXT == 0 {
            return e;
        }
        let i = ((e & !EXT) as usize) << 8 | (addr & 0xff) as usize;
        self.tbl8.get(i).copied().unwrap_or(NONE)
    }

    /// Number of tbl8 groups (prefixes longer than /24 need one per /24).
    pub fn tbl8_groups(&self) -> usize {
        self.tbl8.len() / 256
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn longest_prefix_wins_in_any_insertion_order() {
        let routes = [
            (a("10.1.2.128"), 25, 4),
            (a("0.0.0.0"), 0, 1),
            (a("10.1.2.0"), 24, 3),
            (a("10.0.0.0"), 8, 2),
            (a("10.1.2.200"), 32, 5),
        ];
        let t = LpmV4::build(&routes);
        assert_eq!(t.lookup(a("11.0.0.1")), 1);
        assert_eq!(t.lookup(a("10.9.9.9")), 2);
        assert_eq!(t.lookup(a("10.1.2.1")), 3);
        assert_eq!(t.lookup(a("10.1.2.127")), 3);
        assert_eq!(t.lookup(a("10.1.2.128")), 4);
        assert_eq!(t.lookup(a("10.1.2.199")), 4);
        assert_eq!(t.lookup(a("10.1.2.200")), 5);
        assert_eq!(t.lookup(a("10.1.2.201")), 4);
        assert_eq!(t.tbl8_groups(), 1);
    }

    #[test]
    fn empty_table_has_no_route() {
        let t = LpmV4::build(&[]);
        assert_eq!(t.lookup(0), NONE);
        assert_eq!(t.lookup(u32::MAX), NONE);
    }

    #[test]
    fn host_bits_are_ignored() {
        let t = LpmV4::build(&[(a("192.168.7.9"), 16, 7)]);
        assert_eq!(t.lookup(a("192.168.0.0")), 7);
        assert_eq!(t.lookup(a("192.169.0.0")), NONE);
    }
}
