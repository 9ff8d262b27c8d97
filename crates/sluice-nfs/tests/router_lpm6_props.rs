//! The IPv6 LPM against a naive reference, on tables shaped to exercise
//! every node kind: 2^16 and 2^8 stride tables, single range lines of
//! 32/64/128-bit keys, and range arrays whose lines point on to deeper
//! subtrees. Small thresholds make a 100-route table use the node kinds a
//! million routes would.

use std::net::Ipv6Addr;

use proptest::prelude::*;
use sluice_nfs::router::lpm_v6::LpmV6;

mod lpm_reference;
use lpm_reference::{mask6, naive6};

/// Routes under a few /32s (BGP-like /33–/64s, /48s, /128 hosts, nested),
/// plus scattered ones of any length, sometimes a default route.
fn routes() -> impl Strategy<Value = Vec<(u128, u8, u32)>> {
    let alloc = prop::sample::select(vec![
        0x2001_0db8u128 << 96,
        0x2001_0db9u128 << 96,
        0x2a00_1450u128 << 96,
    ]);
    let len = prop_oneof![
        4 => 33u8..=64,
        2 => Just(48u8),
        1 => 65u8..=127,
        1 => Just(128u8),
        1 => 0u8..=32,
    ];
    // Few distinct bits below the /32 so that prefixes nest and share
    // /40s, /48s and /64s.
    let low = prop_oneof![
        Just(0u128),
        any::<u8>().prop_map(|b| (b as u128) << 88),
        (any::<u8>(), any::<u8>()).prop_map(|(a, b)| (a as u128) << 88 | (b as u128) << 64),
        any::<u128>().prop_map(|x| x >> 32),
    ];
    let clustered = (alloc, low, len, 1u32..1000).prop_map(|(a, l, n, v)| (a | l, n, v));
    let scattered = (any::<u128>(), 0u8..=128, 1u32..1000);
    let default = prop::option::of(1u32..1000);
    (
        prop::collection::vec(prop_oneof![4 => clustered, 1 => scattered], 0..150),
        default,
    )
        .prop_map(|(mut r, d)| {
            if let Some(v) = d {
                r.insert(r.len() / 2, (0, 0, v));
            }
            r
        })
}

fn probes(routes: &[(u128, u8, u32)], offsets: &[u128], random: Vec<u128>) -> Vec<u128> {
    let mut addrs = random;
    for (i, (p, l, _)) in routes.iter().enumerate() {
        let host = if *l == 128 { 0 } else { u128::MAX >> l };
        let off = offsets[i % offsets.len()];
        let net = mask6(*p, *l);
        addrs.extend([net, net | host, net | (off & host)]);
        addrs.extend([net.wrapping_sub(1), (net | host).wrapping_add(1)]);
    }
    addrs
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_node_kind_matches_the_naive_longest_match(
        routes in routes(),
        stride16_min in prop::sample::select(vec![1usize, 3, 4096]),
        range_array_min in prop::sample::select(vec![1usize, 2, 32]),
        random in prop::collection::vec(any::<u128>(), 20),
        offsets in prop::collection::vec(any::<u128>(), 1..20),
    ) {
        let t = LpmV6::build_with(&routes, stride16_min, range_array_min);
        let addrs = probes(&routes, &offsets, random);
        let mut batch = vec![0; addrs.len()];
        t.lookup_batch(&addrs, &mut batch);
        for (a, b) in addrs.into_iter().zip(batch) {
            let want = naive6(&routes, a);
            prop_assert_eq!(t.lookup(a), want, "address {}", Ipv6Addr::from(a));
            prop_assert_eq!(b, want, "batch lookup of {}", Ipv6Addr::from(a));
        }
    }

    #[test]
    fn batch_lookups_of_any_length_match_single_ones(
        routes in routes(),
        addrs in prop::collection::vec(any::<u128>(), 0..100),
    ) {
        let t = LpmV6::build_with(&routes, 3, 2);
        let mut out = vec![u32::MAX; addrs.len()];
        t.lookup_batch(&addrs, &mut out);
        for (a, o) in addrs.iter().zip(&out) {
            prop_assert_eq!(*o, t.lookup(*a));
        }
    }
}

/// A /32 with hundreds of routes (a range array), one of whose /40s holds
/// too many for a line (delegated to a deeper subtree), host routes (128-bit
/// range lines) and a /64 with a /65–/96 pair (64-bit range line).
#[test]
fn a_busy_allocation_resolves_every_route() {
    let base = 0x2001_0db8u128 << 96;
    let mut routes = vec![(base, 32u8, 1u32)];
    let mut v = 2;
    for i in 0..200u128 {
        routes.push((base | i << 88, 40, v));
        routes.push((base | i << 88 | (i & 7) << 80, 48, v + 1));
        v += 2;
    }
    // Twenty /56s under one /40: more ranges than a line holds.
    for j in 0..20u128 {
        routes.push((base | 5 << 88 | j << 72, 56, v));
        v += 1;
    }
    routes.push((base | 0xff << 88 | 1, 128, v));
    routes.push((base | 0xfe << 88 | 7 << 64, 64, v + 1));
    routes.push((base | 0xfe << 88 | 7 << 64 | 1 << 60, 68, v + 2));
    routes.push((base | 0xfe << 88 | 7 << 64 | 1 << 60 | 3 << 40, 96, v + 3));
    let t = LpmV6::build(&routes);
    let mut addrs = Vec::new();
    for &(p, l, _) in &routes {
        let host = if l == 128 { 0 } else { u128::MAX >> l };
        addrs.extend([
            p,
            p | host,
            p | (0x5555_5555_5555_5555_5555_5555_5555_5555 & host),
        ]);
        addrs.push((p | host).wrapping_add(1));
    }
    let mut batch = vec![0; addrs.len()];
    t.lookup_batch(&addrs, &mut batch);
    for (a, b) in addrs.into_iter().zip(batch) {
        let want = naive6(&routes, a);
        assert_eq!(t.lookup(a), want, "{}", Ipv6Addr::from(a));
        assert_eq!(b, want, "batch {}", Ipv6Addr::from(a));
    }
}
