//! `router`: the per-frame fast path (`Router::process_frame_hinted`,
//! which forwards plain IPv4 / IPv6 frames without the general parse)
//! against the general path (`Router::process_frame_full`) on random and
//! mutated frames: same verdict, same length, same bytes (of the whole
//! buffer, so a declined frame is left untouched), same `Stats`, and the
//! same neighbour requests queued — frame after frame, so state (ICMP
//! tokens, incomplete neighbours) evolves alike on both routers.
//!
//! Also the deliberate L4 decision: a datagram whose transport header is
//! truncated or malformed is routed like any other (as Linux does), by
//! both paths.

mod common;
use common::*;

use std::net::IpAddr;

use proptest::prelude::*;
use serde_json::{json, Value};
use sluice_nf::{BuildContext, PortId, Verdict};
use sluice_nfs::router::compile;
use sluice_nfs::router::forward::{Router, Stats};
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
use sluice_spec::ConfigNode;

fn config() -> Value {
    json!({
        "interfaces": router_interfaces(),
        "routes": [
            "10.0.0.0/8 via 192.168.2.2 dev dump",
            // Next hop without a MAC: unresolved, requests queued.
            "10.1.0.0/16 via 192.168.1.2 dev out",
            "10.2.0.0/16 nexthop via 192.168.1.3 dev out nexthop via 192.168.2.2 dev dump",
            "2001:db8:100::/48 via 2001:db8:2::2 dev dump",
            "2001:db8:200::/48 via 2001:db8:1::2 dev out",
            "2001:db8:300::/48 nexthop via 2001:db8:1::3 dev out nexthop via 2001:db8:2::2 dev dump",
        ],
        "neighbours": [
            { "ip": "192.168.2.2", "mac": "02:00:00:00:00:22", "dev": "dump" },
            { "ip": "192.168.1.3", "mac": "02:00:00:00:00:13", "dev": "out" },
            { "ip": "2001:db8:2::2", "mac": "02:00:00:00:00:22", "dev": "dump" },
            { "ip": "2001:db8:1::3", "mac": "02:00:00:00:00:13", "dev": "out" },
        ],
        // A small bucket, so rate limiting is exercised too.
        "icmp_rate_pps": 100,
        "icmp_burst": 3,
    })
}

fn router() -> Router {
    let node = ConfigNode::from_json(config());
    let ctx = BuildContext {
        name: "r".into(),
        config: &node,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    compile(&ctx).unwrap()
}

const V4_DST: &[&str] = &[
    "10.3.4.5",
    "10.1.2.3",
    "10.2.7.7",
    "10.200.0.1",
    "192.168.2.1",
    "192.168.1.2",
    "192.168.2.2",
    "172.16.0.1",
    "8.8.8.8",
    "0.0.0.0",
    "0.1.2.3",
    "127.0.0.1",
    "224.0.0.5",
    "255.255.255.255",
];
const V4_SRC: &[&str] = &[
    "192.168.1.50",
    "10.9.9.9",
    "0.0.0.0",
    "127.0.0.1",
    "224.1.1.1",
];
const V6_DST: &[&str] = &[
    "2001:db8:100::1",
    "2001:db8:200::5",
    "2001:db8:300::9",
    "2001:db8:1::1",
    "2001:db8:2::2",
    "2001:db8:999::1",
    "fe80::1",
    "ff02::1",
    "::",
    "::1",
];
const V6_SRC: &[&str] = &[
    "2001:db8:1::50",
    "fe80::50",
    "::",
    "ff02::2",
    "2001:db8:2::7",
];

/// A well-formed frame: IPv4 or IPv6, UDP / TCP / ICMP echo, optionally
/// VLAN-tagged, with some payload and link padding.
#[allow(clippy::too_many_arguments)]
fn base_frame(
    v6: bool,
    dst: usize,
    src: usize,
    l4: u8,
    vlan: Option<u16>,
    ttl: u8,
    payload: usize,
    pad: usize,
) -> Vec<u8> {
    let (dst, src): (IpAddr, IpAddr) = if v6 {
        (
            V6_DST[dst % V6_DST.len()].parse().unwrap(),
            V6_SRC[src % V6_SRC.len()].parse().unwrap(),
        )
    } else {
        (
            V4_DST[dst % V4_DST.len()].parse().unwrap(),
            V4_SRC[src % V4_SRC.len()].parse().unwrap(),
        )
    };
    let l4 = match l4 % 3 {
        0 => L4Spec::Udp {
            src_port: 1000,
            dst_port: 2000,
        },
        1 => L4Spec::Tcp {
            src_port: 1000,
            dst_port: 80,
            seq: 1,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 512,
        },
        _ => L4Spec::IcmpEcho {
            id: 7,
            seq: 1,
            reply: false,
        },
    };
    let spec = FrameSpec {
        src_mac: MAC_A,
        dst_mac: MacAddr([0x02, 0, 0, 0, 0x01, 0x00]),
        vlan,
        src_ip: src,
        dst_ip: dst,
        ttl,
        l4,
    };
    let body = vec![0x5a; payload];
    let mut buf = vec![0u8; spec.header_len() + payload];
    let n = write_frame(&mut buf, &spec, &body).unwrap();
    buf.truncate(n);
    buf.extend(std::iter::repeat_n(0u8, pad));
    buf
}

/// Recomputes the IPv4 header checksum of an untagged / single-tagged
/// frame, if the header is there.
fn fix_v4_checksum(f: &mut [u8]) {
    let l3 = if f.get(12..14) == Some(&[0x81, 0x00]) {
        18
    } else {
        14
    };
    if f.get(l3 - 2..l3) != Some(&[0x08, 0x00]) {
        return;
    }
    let Some(&vihl) = f.get(l3) else { return };
    let ihl = (vihl & 0x0f) as usize * 4;
    if ihl < 20 || f.len() < l3 + ihl {
        return;
    }
    f[l3 + 10] = 0;
    f[l3 + 11] = 0;
    let mut s: u32 = f[l3..l3 + ihl]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    f[l3 + 10..l3 + 12].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

#[derive(Debug, Clone)]
enum Mutation {
    /// XOR a byte (mostly within the headers).
    Flip(usize, u8),
    /// Cut the frame to this length.
    Truncate(usize),
    /// Set the IPv4 version/IHL byte (untagged) or the IPv6 next header.
    Ihl(u8),
    /// Set the IPv4 total length / IPv6 payload length.
    TotalLen(u16),
    /// Set TTL / hop limit.
    Ttl(u8),
    /// Recompute the IPv4 header checksum (so later fields are reached).
    FixChecksum,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (0usize..70, 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        1 => (0usize..200).prop_map(Mutation::Truncate),
        2 => prop_oneof![Just(0x45u8), Just(0x46), Just(0x4f), Just(0x44), Just(0x40), Just(0x55),
                         Just(0x65), Just(0), Just(6), Just(17), Just(44), Just(58), Just(59), Just(60), Just(43)]
            .prop_map(Mutation::Ihl),
        2 => prop_oneof![0u16..64, Just(0u16), Just(20), Just(21), Just(27), Just(28), Just(39), Just(40), any::<u16>()]
            .prop_map(Mutation::TotalLen),
        2 => prop_oneof![Just(0u8), Just(1), Just(2), Just(255)].prop_map(Mutation::Ttl),
        3 => Just(Mutation::FixChecksum),
    ]
}

fn apply(f: &mut Vec<u8>, m: &Mutation) {
    let tagged = f.get(12..14) == Some(&[0x81, 0x00]);
    let l3 = if tagged { 18 } else { 14 };
    let v6 = f.get(l3 - 2..l3) == Some(&[0x86, 0xdd]);
    match *m {
        Mutation::Flip(i, x) => {
            if let Some(b) = f.get_mut(i) {
                *b ^= x;
            }
        }
        Mutation::Truncate(n) => f.truncate(n),
        Mutation::Ihl(b) => {
            let i = if v6 { l3 + 6 } else { l3 };
            if v6 == (b < 0x40) {
                if let Some(x) = f.get_mut(i) {
                    *x = b;
                }
            }
        }
        Mutation::TotalLen(n) => {
            let i = if v6 { l3 + 4 } else { l3 + 2 };
            if let Some(x) = f.get_mut(i..i + 2) {
                x.copy_from_slice(&n.to_be_bytes());
            }
        }
        Mutation::Ttl(t) => {
            let i = if v6 { l3 + 7 } else { l3 + 8 };
            if let Some(x) = f.get_mut(i) {
                *x = t;
            }
        }
        Mutation::FixChecksum => fix_v4_checksum(f),
    }
}

fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        (
            any::<bool>(),
            any::<usize>(),
            any::<usize>(),
            any::<u8>(),
            prop_oneof![6 => Just(None), 1 => Just(Some(5u16))],
            prop_oneof![Just(64u8), Just(0), Just(1), Just(2), Just(255)],
            0usize..40,
            prop_oneof![Just(0usize), 0usize..20],
        ),
        proptest::collection::vec(mutation(), 0..4),
        proptest::collection::vec(any::<u8>(), 0..80),
        0u8..20,
    )
        .prop_map(
            |((v6, d, s, l4, vlan, ttl, payload, pad), muts, junk, kind)| {
                if kind == 1 || kind == 2 {
                    // ARP request / reply from a dynamic (192.168.1.2) or
                    // static (192.168.1.3) neighbour with one of two MACs:
                    // learning changes a next hop's MAC between frames.
                    return arp_from(d % 2 == 0, s % 2 == 0, kind == 1);
                }
                if kind == 0 {
                    // Random bytes behind an IP EtherType now and then.
                    let mut f = junk;
                    if f.len() >= 14 {
                        f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
                    }
                    return f;
                }
                let mut f = base_frame(v6, d, s, l4, vlan, ttl, payload, pad);
                for m in &muts {
                    apply(&mut f, m);
                }
                f
            },
        )
}

/// An ARP request (to us) or reply from 192.168.1.2 (`dynamic`) or
/// 192.168.1.3, with MAC ..:a1 or ..:a2.
fn arp_from(dynamic: bool, first_mac: bool, request: bool) -> Vec<u8> {
    let mac = [0x02, 0, 0, 0, 0, if first_mac { 0xa1 } else { 0xa2 }];
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x01, 0x00]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, if request { 1 } else { 2 }]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[192, 168, 1, if dynamic { 2 } else { 3 }]);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x01, 0x00]);
    f.extend_from_slice(&[192, 168, 1, 1]);
    f
}

/// The LPM hint as the NF computes it for a batch (untagged only).
fn hint(r: &Router, f: &[u8]) -> Option<u32> {
    if f.len() >= 34 && f[12..14] == [0x08, 0x00] {
        Some(
            r.table()
                .v4_value(u32::from_be_bytes(f[30..34].try_into().unwrap())),
        )
    } else if f.len() >= 54 && f[12..14] == [0x86, 0xdd] {
        let d = [u128::from_be_bytes(f[38..54].try_into().unwrap())];
        let mut v = [0u32];
        r.table().v6_values(&d, &mut v);
        Some(v[0])
    } else {
        None
    }
}

fn solicits(r: &mut Router) -> Vec<(u16, u128)> {
    std::iter::from_fn(|| r.take_solicit()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_path_matches_full_path(
        frames in proptest::collection::vec(
            (frame_strategy(), prop_oneof![2 => Just(0u16), 2 => Just(1), 1 => Just(2)]),
            1..12,
        ),
        hinted in any::<bool>(),
    ) {
        // Built once per thread (a DIR-24-8 table is 64 MiB), reset per
        // case so every case starts from the same state.
        thread_local! {
            static ROUTERS: std::cell::RefCell<(Router, Router)> =
                std::cell::RefCell::new((router(), router()));
        }
        ROUTERS.with_borrow_mut(|(fast, full)| {
            fast.reset();
            full.reset();
            check_sequence(fast, full, &frames, hinted)
        })?;
    }
}

fn check_sequence(
    fast: &mut Router,
    full: &mut Router,
    frames: &[(Vec<u8>, u16)],
    hinted: bool,
) -> Result<(), TestCaseError> {
    {
        let (mut st_fast, mut st_full) = (Stats::default(), Stats::default());
        for (k, (f, port_in)) in frames.iter().enumerate() {
            let port_in = *port_in;
            let now = 1_000_000_000 + k as u64 * 1_000;
            let h = if hinted { hint(fast, f) } else { None };
            let mut a = f.clone();
            a.resize(2048, 0xee);
            let mut b = a.clone();
            let hash = (k as u32).wrapping_mul(0x9e37_79b9);
            let va =
                fast.process_frame_hinted(&mut a, f.len(), port_in, hash, now, h, &mut st_fast);
            let vb = full.process_frame_full(&mut b, f.len(), port_in, hash, now, h, &mut st_full);
            prop_assert_eq!(va, vb, "frame {} {:02x?}", k, f);
            prop_assert!(a == b, "bytes differ on frame {} {:02x?}", k, f);
            prop_assert_eq!(&st_fast, &st_full);
            prop_assert_eq!(solicits(fast), solicits(full));
        }
    }
    Ok(())
}

/// Plain frames do take the fast path: forwarded, and identical to the
/// full path (guards against a fast path that silently declines all).
#[test]
fn plain_frames_are_forwarded_by_both_paths() {
    for (v6, dst) in [(false, 0), (false, 2), (true, 0), (true, 2)] {
        for l4 in 0..3 {
            let f = base_frame(v6, dst, 0, l4, None, 64, 18, 0);
            let mut a = f.clone();
            let mut b = f.clone();
            let (mut sa, mut sb) = (Stats::default(), Stats::default());
            let va = router().process_frame_hinted(&mut a, f.len(), 1, 3, 1, None, &mut sa);
            let vb = router().process_frame_full(&mut b, f.len(), 1, 3, 1, None, &mut sb);
            assert!(
                matches!(va.0, Verdict::ToPort(_)),
                "{v6} {dst} {l4}: {va:?}"
            );
            assert_eq!((va, a, sa.forwarded), (vb, b, 1));
        }
    }
}

/// A router does not look at L4: a datagram whose TCP / UDP / ICMP header
/// is cut short (total length ends inside it) or malformed (TCP data
/// offset below 5, UDP length beyond the datagram) is forwarded, TTL
/// decremented, like Linux does — on both paths.
#[test]
fn truncated_or_malformed_l4_headers_are_forwarded() {
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for l4 in 0..3 {
        for cut in [0usize, 1, 4, 7] {
            // IPv4: total length 20 + cut, the rest becomes link padding.
            let mut f = base_frame(false, 0, 0, l4, None, 64, 0, 0);
            f[16..18].copy_from_slice(&(20 + cut as u16).to_be_bytes());
            fix_v4_checksum(&mut f);
            cases.push(f);
            // IPv6: payload length `cut`.
            let mut f = base_frame(true, 0, 0, l4, None, 64, 0, 0);
            f[18..20].copy_from_slice(&(cut as u16).to_be_bytes());
            cases.push(f);
        }
    }
    let mut f = base_frame(false, 0, 0, 1, None, 64, 0, 0);
    f[46] = 0x20; // TCP data offset 2
    cases.push(f);
    let mut f = base_frame(false, 0, 0, 0, None, 64, 0, 0);
    f[38..40].copy_from_slice(&200u16.to_be_bytes()); // UDP length > datagram
    cases.push(f);
    for f in cases {
        assert!(sluice_packet::parse(&f).is_err(), "{f:02x?} parses");
        assert!(sluice_packet::parse_l3(&f).is_ok());
        let mut a = f.clone();
        let mut b = f.clone();
        let (mut sa, mut sb) = (Stats::default(), Stats::default());
        let va = router().process_frame_hinted(&mut a, f.len(), 1, 3, 1, None, &mut sa);
        let vb = router().process_frame_full(&mut b, f.len(), 1, 3, 1, None, &mut sb);
        assert_eq!(va, (Verdict::ToPort(PortId(1)), f.len()), "{f:02x?}");
        assert_eq!((va, &a, &sa), (vb, &b, &sb));
        let hop = if f[12] == 0x86 { 21 } else { 22 };
        assert_eq!(a[hop], 63);
    }
}
