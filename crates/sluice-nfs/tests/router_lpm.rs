//! The LPM structures against a naive reference (random prefixes and
//! addresses, both families), and the routes file at a million routes.

mod common;
mod lpm_reference;
use common::*;
use lpm_reference::*;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use serde_json::json;
use sluice_nf::BuildContext;
use sluice_nfs::router::compile;
use sluice_nfs::router::lpm_v4::LpmV4;
use sluice_nfs::router::lpm_v6::LpmV6;
use sluice_spec::ConfigNode;

/// Prefixes clustered under a few roots so that they nest and overlap
/// (uniformly random prefixes almost never do).
fn v4_routes() -> impl Strategy<Value = Vec<(u32, u8, u32)>> {
    let root = prop::sample::select(vec![0x0a00_0000u32, 0xc0a8_0000, 0x0a01_0200, 0]);
    prop::collection::vec((root, any::<u32>(), 0u8..=32, 1u32..1000), 0..120).prop_map(|v| {
        v.into_iter()
            .map(|(r, x, l, val)| (r ^ (x & (x >> (x % 29))), l, val))
            .collect()
    })
}

fn v6_routes() -> impl Strategy<Value = Vec<(u128, u8, u32)>> {
    let root = prop::sample::select(vec![
        0x2001_0db8u128 << 96,
        0x2001_0db8_0001u128 << 80,
        0xfd00u128 << 112,
        0,
    ]);
    prop::collection::vec((root, any::<u128>(), 0u8..=128, 1u32..1000), 0..120).prop_map(|v| {
        v.into_iter()
            .map(|(r, x, l, val)| (r ^ (x >> ((x as u32) % 128)), l, val))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn dir24_8_matches_the_naive_longest_match(
        routes in v4_routes(),
        probes in prop::collection::vec(any::<u32>(), 50),
        offsets in prop::collection::vec(any::<u32>(), 50),
    ) {
        let t = LpmV4::build(&routes);
        // Random addresses, and addresses inside / at the edges of routes.
        let mut addrs = probes;
        for (i, (p, l, _)) in routes.iter().enumerate() {
            let host = if *l == 32 { 0 } else { u32::MAX >> l };
            let off = offsets[i % offsets.len()];
            addrs.extend([mask4(*p, *l), mask4(*p, *l) | host, mask4(*p, *l) | (off & host)]);
            addrs.push((mask4(*p, *l) | host).wrapping_add(1));
        }
        for a in addrs {
            prop_assert_eq!(t.lookup(a), naive4(&routes, a), "address {}", Ipv4Addr::from(a));
        }
    }

    #[test]
    fn poptrie_matches_the_naive_longest_match(
        routes in v6_routes(),
        probes in prop::collection::vec(any::<u128>(), 50),
        offsets in prop::collection::vec(any::<u128>(), 50),
    ) {
        let t = LpmV6::build(&routes);
        let mut addrs = probes;
        for (i, (p, l, _)) in routes.iter().enumerate() {
            let host = if *l == 128 { 0 } else { u128::MAX >> l };
            let off = offsets[i % offsets.len()];
            addrs.extend([mask6(*p, *l), mask6(*p, *l) | host, mask6(*p, *l) | (off & host)]);
            addrs.push((mask6(*p, *l) | host).wrapping_add(1));
        }
        let mut batch = vec![0; addrs.len()];
        t.lookup_batch(&addrs, &mut batch);
        for (a, b) in addrs.into_iter().zip(batch) {
            let want = naive6(&routes, a);
            prop_assert_eq!(t.lookup(a), want, "address {}", Ipv6Addr::from(a));
            prop_assert_eq!(b, want, "batch lookup of {}", Ipv6Addr::from(a));
        }
    }
}

/// xorshift: deterministic test data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn a_million_routes_per_family_load_from_a_file() {
    const N: usize = 1_000_000;
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut text = String::with_capacity(N * 80);
    // Reference: (family, masked prefix, len) → dev index; the last wins.
    let mut v4: HashMap<(u32, u8), u16> = HashMap::new();
    let mut v6: HashMap<(u128, u8), u16> = HashMap::new();
    let devs = ["out", "dump"];
    for _ in 0..N {
        let r = rng.next();
        let len = 8 + (r % 25) as u8; // /8../32
        let a = mask4(rng.next() as u32, len);
        let d = (r >> 40) as u16 & 1;
        let gw = if d == 0 { "192.168.1.2" } else { "192.168.2.2" };
        writeln!(
            text,
            "{}/{len} via {gw} dev {}",
            Ipv4Addr::from(a),
            devs[d as usize]
        )
        .unwrap();
        v4.insert((a, len), d);
    }
    for _ in 0..N {
        let r = rng.next();
        // Realistic shape: /32../64 under 4096 /32 allocations of 2000::/4.
        let len = 32 + (r % 33) as u8;
        let top = (0x2000u128 << 112) | (((r >> 8) as u128 & 0xfff) << 96);
        let a = mask6(top | ((rng.next() as u128) << 32), len);
        let d = (r >> 40) as u16 & 1;
        writeln!(text, "{}/{len} dev {}", Ipv6Addr::from(a), devs[d as usize]).unwrap();
        v6.insert((a, len), d);
    }
    let path = std::env::temp_dir().join(format!("sluice-router-1m-{}.txt", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    drop(text);
    let node = ConfigNode::from_json(json!({
        "interfaces": [
            { "port": "out", "mac": "02:00:00:00:01:00", "addresses": ["192.168.1.1/24"] },
            { "port": "dump", "mac": "02:00:00:00:02:00", "addresses": ["192.168.2.1/24"] },
        ],
        "routes_file": path.to_str().unwrap(),
    }));
    let ctx = BuildContext {
        name: "r".into(),
        config: &node,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    let r = compile(&ctx).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.table().routes(), 2 * N as u64 + 2);
    // Spot checks against the reference (longest of the 33 / 129 lengths).
    for _ in 0..20_000 {
        let a = rng.next() as u32;
        let want = (0..=32u8)
            .rev()
            .find_map(|l| v4.get(&(mask4(a, l), l)).copied())
            .or_else(|| {
                // The connected /24s.
                [(0xc0a8_0100u32, 0u16), (0xc0a8_0200, 1)]
                    .iter()
                    .find(|(p, _)| mask4(a, 24) == *p)
                    .map(|x| x.1)
            });
        let got = r
            .table()
            .nexthops(Ipv4Addr::from(a).into())
            .first()
            .map(|h| h.iface);
        assert_eq!(got, want, "{}", Ipv4Addr::from(a));
    }
    // IPv6 probes near existing routes (random ones would all miss).
    let keys: Vec<(u128, u8)> = v6.keys().copied().take(20_000).collect();
    for (p, l) in keys {
        let a = p | (rng.next() as u128 & (u128::MAX >> l));
        let want = (0..=128u8)
            .rev()
            .find_map(|l| v6.get(&(mask6(a, l), l)).copied());
        let got = r
            .table()
            .nexthops(Ipv6Addr::from(a).into())
            .first()
            .map(|h| h.iface);
        assert_eq!(got, want, "{}", Ipv6Addr::from(a));
    }
}
