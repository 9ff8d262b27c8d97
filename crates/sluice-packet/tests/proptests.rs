//! Property tests: no panics on arbitrary input, builder round trips,
//! direction-independent flow keys, and incremental == full checksums.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use common::exercise::{exercise_frame, exercise_views};
use sluice_packet::builder::{write_frame, BuildError, FrameSpec, L4Spec};
use sluice_packet::checksum::{self, update_bytes, update_u16, update_u32};
use sluice_packet::ethernet::MacAddr;
use sluice_packet::flow::{flow_key, FlowKey};
use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::parse::{parse, verify_checksums};
use sluice_packet::tcp::{TcpFlags, TcpSegment};
use sluice_packet::udp::UdpDatagram;
use sluice_packet::IpProtocol;

// ---------------------------------------------------------------------------
// Strategies.

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn ip_pair() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(a, b)| (IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V4(Ipv4Addr::from(b)))),
        (any::<u128>(), any::<u128>())
            .prop_map(|(a, b)| (IpAddr::V6(Ipv6Addr::from(a)), IpAddr::V6(Ipv6Addr::from(b)))),
        // Same address both ways (ordering falls back to ports).
        any::<u32>().prop_map(|a| (IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V4(Ipv4Addr::from(a)))),
    ]
}

fn l4() -> impl Strategy<Value = L4Spec> {
    prop_oneof![
        (any::<u16>(), any::<u16>()).prop_map(|(s, d)| L4Spec::Udp {
            src_port: s,
            dst_port: d
        }),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            any::<u16>()
        )
            .prop_map(|(s, d, seq, ack, f, w)| L4Spec::Tcp {
                src_port: s,
                dst_port: d,
                seq,
                ack,
                flags: TcpFlags::from_bits(f),
                window: w,
            }),
        (any::<u16>(), any::<u16>(), any::<bool>())
            .prop_map(|(id, seq, reply)| { L4Spec::IcmpEcho { id, seq, reply } }),
    ]
}

fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    (
        mac(),
        mac(),
        proptest::option::of(0u16..4096),
        ip_pair(),
        any::<u8>(),
        l4(),
    )
        .prop_map(
            |(src_mac, dst_mac, vlan, (src_ip, dst_ip), ttl, l4)| FrameSpec {
                src_mac,
                dst_mac,
                vlan,
                src_ip,
                dst_ip,
                ttl,
                l4,
            },
        )
}

fn build(spec: &FrameSpec, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, spec, payload).expect("build");
    assert_eq!(n, buf.len());
    buf
}

/// The spec of the reply direction.
fn reverse(spec: &FrameSpec) -> FrameSpec {
    let l4 = match spec.l4 {
        L4Spec::Udp { src_port, dst_port } => L4Spec::Udp {
            src_port: dst_port,
            dst_port: src_port,
        },
        L4Spec::Tcp {
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window,
        } => L4Spec::Tcp {
            src_port: dst_port,
            dst_port: src_port,
            seq: ack,
            ack: seq,
            flags,
            window,
        },
        L4Spec::IcmpEcho { id, seq, reply } => L4Spec::IcmpEcho {
            id,
            seq,
            reply: !reply,
        },
    };
    FrameSpec {
        src_mac: spec.dst_mac,
        dst_mac: spec.src_mac,
        src_ip: spec.dst_ip,
        dst_ip: spec.src_ip,
        l4,
        ..*spec
    }
}

fn expected_key(spec: &FrameSpec) -> FlowKey {
    let (sp, dp, proto) = match spec.l4 {
        L4Spec::Udp { src_port, dst_port } => (src_port, dst_port, IpProtocol::UDP),
        L4Spec::Tcp {
            src_port, dst_port, ..
        } => (src_port, dst_port, IpProtocol::TCP),
        L4Spec::IcmpEcho { id, .. } => (
            id,
            id,
            if spec.src_ip.is_ipv4() {
                IpProtocol::ICMP
            } else {
                IpProtocol::ICMPV6
            },
        ),
    };
    FlowKey::new(spec.src_ip, spec.dst_ip, sp, dp, proto)
}

/// Byte strings that look like frames: an Ethernet header with an
/// interesting EtherType (possibly VLAN-tagged) followed by random bytes, so
/// that the deeper parsers get exercised, not just the length checks.
fn frameish() -> impl Strategy<Value = Vec<u8>> {
    let et = prop_oneof![
        Just(0x0800u16),
        Just(0x86dd),
        Just(0x0806),
        Just(0x8100),
        Just(0x88a8),
        any::<u16>()
    ];
    (
        any::<[u8; 12]>(),
        et,
        proptest::collection::vec(any::<u8>(), 0..200),
        any::<u8>(),
    )
        .prop_map(|(macs, et, mut rest, ver)| {
            let mut f = macs.to_vec();
            f.extend_from_slice(&et.to_be_bytes());
            if let Some(b) = rest.first_mut() {
                // Bias the first byte toward a plausible IP version/IHL.
                *b = match ver % 4 {
                    0 => 0x45,
                    1 => 0x60,
                    2 => 0x40 | (ver >> 4),
                    _ => *b,
                };
            }
            f.append(&mut rest);
            f
        })
}

// ---------------------------------------------------------------------------
// No panics.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        exercise_frame(&data);
    }

    #[test]
    fn frameish_bytes_never_panic(data in frameish()) {
        exercise_frame(&data);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        spec in frame_spec(),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let mut f = build(&spec, &payload);
        for (pos, x) in flips {
            let n = f.len();
            f[pos % n] ^= x;
        }
        let cut = cut % (f.len() + 1);
        exercise_frame(&f[..cut]);
        exercise_frame(&f);
    }

    #[test]
    fn views_on_raw_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..128)) {
        exercise_views(&data);
    }
}

// ---------------------------------------------------------------------------
// Builder round trip and flow keys.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn builder_output_parses_back_and_verifies(
        spec in frame_spec(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let f = build(&spec, &payload);
        let h = parse(&f).unwrap();
        prop_assert_eq!(usize::from(h.payload_offset), spec.header_len());
        prop_assert_eq!(usize::from(h.payload_len), payload.len());
        prop_assert_eq!(&f[usize::from(h.payload_offset)..], &payload[..]);
        prop_assert_eq!(h.vlan_id(), spec.vlan);
        prop_assert!(!h.fragment);
        prop_assert_eq!(verify_checksums(&f, &h), Ok(()));
        prop_assert_eq!(flow_key(&f).unwrap(), expected_key(&spec));
        // Too-small buffers are rejected, never partially written past.
        let mut small = vec![0u8; f.len() - 1];
        prop_assert_eq!(
            write_frame(&mut small, &spec, &payload),
            Err(BuildError::BufferTooSmall { needed: f.len(), available: f.len() - 1 })
        );
    }

    #[test]
    fn reversed_frame_gives_same_canonical_key_and_hash(
        spec in frame_spec(),
        payload in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let a = flow_key(&build(&spec, &payload)).unwrap();
        let b = flow_key(&build(&reverse(&spec), &payload)).unwrap();
        prop_assert_eq!(b, a.reversed());
        prop_assert_eq!(a.canonical(), b.canonical());
        prop_assert_eq!(a.symmetric_hash(), b.symmetric_hash());
        prop_assert_eq!(a.symmetric_hash_with_seed(99), b.symmetric_hash_with_seed(99));
        prop_assert!(a.canonical().is_canonical());
    }

    #[test]
    fn mixed_families_are_rejected(a in any::<u32>(), b in any::<u128>(), l4 in l4()) {
        let spec = FrameSpec {
            src_mac: MacAddr::ZERO,
            dst_mac: MacAddr::ZERO,
            vlan: None,
            src_ip: IpAddr::V4(Ipv4Addr::from(a)),
            dst_ip: IpAddr::V6(Ipv6Addr::from(b)),
            ttl: 1,
            l4,
        };
        let mut buf = [0u8; 128];
        prop_assert_eq!(write_frame(&mut buf, &spec, &[]), Err(BuildError::AddressFamilyMismatch));
    }
}

// ---------------------------------------------------------------------------
// Checksums.

/// Reference RFC 1071 implementation, word by word.
fn reference_checksum(data: &[u8]) -> u16 {
    let mut s: u64 = 0;
    for c in data.chunks(2) {
        s += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn word(d: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([d[off], d[off + 1]])
}

/// Random "packet": even length, first word forced non-zero (like an IPv4
/// version nibble or a pseudo-header protocol), so that the data is never
/// all zero after a rewrite elsewhere (see the checksum module docs).
fn packet() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(any::<u8>(), 2..40), 1u16..).prop_map(|(mut v, w)| {
        if v.len() % 2 == 1 {
            v.pop();
        }
        v.splice(0..0, w.to_be_bytes());
        v
    })
}

/// New 16-bit values biased toward the corner cases.
fn word_value() -> impl Strategy<Value = u16> {
    prop_oneof![Just(0x0000u16), Just(0xffff), any::<u16>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn full_checksum_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        prop_assert_eq!(checksum::checksum(&data), reference_checksum(&data));
    }

    #[test]
    fn split_sums_combine(data in proptest::collection::vec(any::<u8>(), 0..300), at in any::<usize>()) {
        let at = (at % (data.len() + 1)) & !1; // even split point
        let s = checksum::add(checksum::sum(&data[..at]), checksum::sum(&data[at..]));
        prop_assert_eq!(checksum::finish(s), checksum::checksum(&data));
    }

    #[test]
    fn update_u16_equals_recompute(pkt in packet(), idx in any::<usize>(), new in word_value()) {
        let words = pkt.len() / 2;
        let off = 2 + 2 * (idx % (words - 1)); // never the forced non-zero word
        let before = checksum::checksum(&pkt);
        let old = word(&pkt, off);
        let mut p2 = pkt.clone();
        p2[off..off + 2].copy_from_slice(&new.to_be_bytes());
        prop_assert_eq!(update_u16(before, old, new), checksum::checksum(&p2));
    }

    #[test]
    fn update_u16_forced_zero_checksum(pkt in packet(), idx in any::<usize>(), to_zero_before in any::<bool>()) {
        // Choose the field value so that the checksum is exactly 0x0000
        // before or after the rewrite (one's complement sum == 0xFFFF).
        let words = pkt.len() / 2;
        let off = 2 + 2 * (idx % (words - 1));
        let mut rest = pkt.clone();
        rest[off] = 0;
        rest[off + 1] = 0;
        let r = checksum::fold(checksum::sum(&rest));
        let zeroing = 0xffff - r; // r + zeroing == 0xFFFF
        let mut a = pkt.clone();
        let mut b = pkt.clone();
        if to_zero_before {
            a[off..off + 2].copy_from_slice(&zeroing.to_be_bytes());
        } else {
            b[off..off + 2].copy_from_slice(&zeroing.to_be_bytes());
        }
        let ca = checksum::checksum(&a);
        let cb = checksum::checksum(&b);
        if to_zero_before {
            prop_assert_eq!(ca, 0);
        } else {
            prop_assert_eq!(cb, 0);
        }
        prop_assert_eq!(update_u16(ca, word(&a, off), word(&b, off)), cb);
        prop_assert_eq!(update_u16(cb, word(&b, off), word(&a, off)), ca);
    }

    #[test]
    fn update_u32_and_bytes_equal_recompute(
        pkt in packet(),
        idx in any::<usize>(),
        new32 in prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()],
        newb in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        prop_assume!(pkt.len() >= 6);
        let words = pkt.len() / 2;
        let off = 2 + 2 * (idx % (words - 2));
        let before = checksum::checksum(&pkt);
        let old = u32::from_be_bytes([pkt[off], pkt[off + 1], pkt[off + 2], pkt[off + 3]]);
        let mut p2 = pkt.clone();
        p2[off..off + 4].copy_from_slice(&new32.to_be_bytes());
        prop_assert_eq!(update_u32(before, old, new32), checksum::checksum(&p2));

        // Byte ranges: rewrite an even-length range starting at `off`.
        let len = (newb.len() & !1).min(pkt.len() - off);
        let mut p3 = pkt.clone();
        p3[off..off + len].copy_from_slice(&newb[..len]);
        prop_assert_eq!(
            update_bytes(before, &pkt[off..off + len], &p3[off..off + len]),
            checksum::checksum(&p3)
        );
    }

    /// NAT-style rewrite of a real frame: new source address and port,
    /// IP and L4 checksums updated incrementally, compared with a full
    /// recomputation.
    #[test]
    fn nat_rewrite_incremental_matches_full(
        src in any::<u32>(), dst in any::<u32>(), sp in any::<u16>(), dp in any::<u16>(),
        new_src in prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()],
        new_sp in word_value(),
        tcp in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let l4 = if tcp {
            L4Spec::Tcp { src_port: sp, dst_port: dp, seq: 1, ack: 2, flags: TcpFlags::ACK, window: 9 }
        } else {
            L4Spec::Udp { src_port: sp, dst_port: dp }
        };
        let spec = FrameSpec {
            src_mac: MacAddr::ZERO, dst_mac: MacAddr::ZERO, vlan: None,
            src_ip: IpAddr::V4(Ipv4Addr::from(src)), dst_ip: IpAddr::V4(Ipv4Addr::from(dst)),
            ttl: 64, l4,
        };
        let mut f = build(&spec, &payload);
        let l3 = &mut f[14..];
        let mut ip = Ipv4Packet::new_checked(&mut *l3).unwrap();
        let old_ip_csum = ip.checksum();
        ip.set_src_addr(Ipv4Addr::from(new_src));
        ip.set_checksum(update_u32(old_ip_csum, src, new_src));
        let inc_ip = ip.checksum();
        ip.fill_checksum();
        prop_assert_eq!(inc_ip, ip.checksum());
        let l4buf = &mut l3[20..];
        if tcp {
            let mut t = TcpSegment::new_checked(&mut *l4buf).unwrap();
            let c = update_u16(update_u32(t.checksum(), src, new_src), sp, new_sp);
            t.set_src_port(new_sp);
            t.fill_checksum_v4(&Ipv4Addr::from(new_src), &Ipv4Addr::from(dst));
            prop_assert_eq!(c, t.checksum());
        } else {
            let mut u = UdpDatagram::new_checked(&mut *l4buf).unwrap();
            let old = u.checksum();
            let c = update_u16(update_u32(old, src, new_src), sp, new_sp);
            // RFC 768: a computed 0 is transmitted as 0xFFFF.
            let c = if c == 0 { 0xffff } else { c };
            u.set_src_port(new_sp);
            u.fill_checksum_v4(&Ipv4Addr::from(new_src), &Ipv4Addr::from(dst));
            prop_assert_eq!(c, u.checksum());
        }
        let h = parse(&f).unwrap();
        prop_assert_eq!(verify_checksums(&f, &h), Ok(()));
    }
}

#[test]
fn update_corner_cases() {
    // 0x0000 <-> 0xFFFF rewrites (both "zero" in one's complement) leave the
    // checksum unchanged, as a full recomputation does.
    let mut d = [0x45u8, 0x00, 0x12, 0x34, 0x00, 0x00];
    let c0 = checksum::checksum(&d);
    d[4] = 0xff;
    d[5] = 0xff;
    assert_eq!(checksum::checksum(&d), c0);
    assert_eq!(update_u16(c0, 0x0000, 0xffff), c0);
    assert_eq!(update_u16(c0, 0xffff, 0x0000), c0);
    // A checksum that becomes 0x0000 (RFC 1624 §4).
    assert_eq!(update_u16(0xdd2f, 0x5555, 0x3285), 0x0000);
    // And back.
    assert_eq!(update_u16(0x0000, 0x3285, 0x5555), 0xdd2f);
    // Incremental never produces 0xFFFF from a correct checksum of
    // non-zero data (a full recomputation never does either).
    for old in [0u16, 1, 0x7fff, 0xfffe, 0xffff] {
        for new in [0u16, 1, 0x8000, 0xfffe, 0xffff] {
            let data = [0x00u8, 0x01, (old >> 8) as u8, old as u8];
            let c = checksum::checksum(&data);
            let data2 = [0x00u8, 0x01, (new >> 8) as u8, new as u8];
            assert_eq!(update_u16(c, old, new), checksum::checksum(&data2));
            assert_ne!(update_u16(c, old, new), 0xffff);
        }
    }
}

// ---------------------------------------------------------------------------
// Deterministic mini-fuzz over every truncation and single-bit flip of
// builder frames of each kind.

#[test]
fn every_truncation_and_bit_flip_of_valid_frames() {
    let specs = [
        ("10.0.0.1", "10.0.0.2", None),
        ("2001:db8::1", "2001:db8::2", Some(7)),
    ];
    let l4s = [
        L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        },
        L4Spec::Tcp {
            src_port: 1,
            dst_port: 2,
            seq: 3,
            ack: 4,
            flags: TcpFlags::SYN,
            window: 5,
        },
        L4Spec::IcmpEcho {
            id: 1,
            seq: 2,
            reply: false,
        },
    ];
    for (s, d, vlan) in specs {
        for l4 in l4s {
            let spec = FrameSpec {
                src_mac: MacAddr::ZERO,
                dst_mac: MacAddr::BROADCAST,
                vlan,
                src_ip: s.parse().unwrap(),
                dst_ip: d.parse().unwrap(),
                ttl: 9,
                l4,
            };
            let f = build(&spec, b"0123456789");
            for cut in 0..=f.len() {
                exercise_frame(&f[..cut]);
            }
            for bit in 0..f.len() * 8 {
                let mut g = f.clone();
                g[bit / 8] ^= 1 << (bit % 8);
                exercise_frame(&g);
                // A flipped bit is always caught by some check (structural
                // or checksum) unless it is in a field no checksum covers:
                // MAC addresses, an EtherType turned non-IP, the VLAN TCI,
                // the IPv6 traffic class / flow label / hop limit, or an IPv6
                // next header turned into a protocol without a checksum.
                if let Ok(h) = parse(&g) {
                    if verify_checksums(&g, &h).is_ok() {
                        let off = bit / 8;
                        let l3 = usize::from(h.l3_offset);
                        let uncovered = off < 12
                            || h.ip_version == 0
                            || (vlan.is_some() && (14..16).contains(&off))
                            || (h.ip_version == 6
                                && (off < l3 + 4 || off == l3 + 6 || off == l3 + 7));
                        assert!(
                            uncovered,
                            "undetected flip at byte {off} bit {} of {spec:?}",
                            bit % 8
                        );
                    }
                }
            }
        }
    }
}
