//! Tunnel NFs: exact outer headers, checksums, round trips through the
//! decapsulators, validation drops, MTU and headroom limits.

mod common;
use common::*;

use proptest::prelude::*;
use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, NetworkFunction, Verdict};
use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::udp::UdpDatagram;
use sluice_packet::{checksum, L4Spec};

fn run1(nf: &mut dyn NetworkFunction, f: &[u8]) -> (Verdict, Vec<u8>) {
    let o = Harness::new().run(nf, &[f.to_vec()]).remove(0);
    (o.verdict, o.frame)
}

fn drop(ty: &str, reason: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index(ty, reason)))
}

fn vx4() -> serde_json::Value {
    json!({
        "vni": 0x123456, "local": "192.0.2.1", "remote": "192.0.2.2",
        "src_mac": "02:00:00:00:01:01", "dst_mac": "02:00:00:00:01:02", "ttl": 33, "dscp": 10
    })
}

#[test]
fn vxlan_ipv4_outer_headers_are_exact() {
    let mut nf = build("vxlan_encap", vx4());
    let inner = udp("10.0.0.1", 1000, "10.0.0.2", 53);
    let (v, out) = run1(nf.as_mut(), &inner);
    assert_eq!(v, Verdict::Next);
    assert_eq!(out.len(), inner.len() + 50);
    assert_eq!(
        &out[..14],
        &[2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1, 0x08, 0x00]
    );
    let ip = Ipv4Packet::new_checked(&out[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (
            ip.total_len() as usize,
            ip.ttl(),
            ip.dscp(),
            ip.dont_frag(),
            ip.ident(),
            ip.protocol().0
        ),
        (inner.len() + 36, 33, 10, true, 0, 17)
    );
    assert_eq!(ip.src_addr().to_string(), "192.0.2.1");
    assert_eq!(ip.dst_addr().to_string(), "192.0.2.2");
    let u = UdpDatagram::new_checked(&out[34..]).unwrap();
    assert!(u.src_port() >= 49152);
    assert_eq!(
        (u.dst_port(), u.len() as usize, u.checksum()),
        (4789, inner.len() + 16, 0)
    );
    assert_eq!(&out[42..50], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
    assert_eq!(&out[50..], &inner[..]);
    // Both directions of a flow use one source port; other flows spread.
    let (_, rev) = run1(nf.as_mut(), &udp("10.0.0.2", 53, "10.0.0.1", 1000));
    assert_eq!(&rev[34..36], &out[34..36]);
    let ports: std::collections::HashSet<[u8; 2]> = (0..64)
        .map(|i| {
            run1(nf.as_mut(), &udp("10.0.0.1", 2000 + i, "10.0.0.2", 53)).1[34..36]
                .try_into()
                .unwrap()
        })
        .collect();
    assert!(ports.len() > 32, "source ports spread: {}", ports.len());
}

#[test]
fn vxlan_ipv6_outer_udp_checksum_is_computed() {
    let mut nf = build(
        "vxlan_encap",
        json!({ "vni": 7, "local": "2001:db8::1", "remote": "2001:db8::2" }),
    );
    let inner = tcp("10.0.0.1", 1000, "10.0.0.2", 80);
    let (v, out) = run1(nf.as_mut(), &inner);
    assert_eq!(v, Verdict::Next);
    assert_eq!(out.len(), inner.len() + 70);
    assert_eq!(&out[12..14], &[0x86, 0xdd]);
    assert_eq!((out[14] >> 4, out[20], out[21]), (6, 17, 64));
    assert_eq!(
        u16::from_be_bytes([out[18], out[19]]) as usize,
        inner.len() + 16
    );
    let u = UdpDatagram::new_checked(&out[54..]).unwrap();
    let s: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    let d: std::net::Ipv6Addr = "2001:db8::2".parse().unwrap();
    assert!(u.verify_checksum_v6(&s, &d));
    assert_eq!(&out[70..], &inner[..]);
}

#[test]
fn vxlan_round_trip_and_decap_validation() {
    let mut enc = build("vxlan_encap", vx4());
    let mut dec = build("vxlan_decap", json!({ "vni": 0x123456 }));
    for inner in [
        udp("10.0.0.1", 1, "10.0.0.2", 2),
        tcp("2001:db8::1", 3, "2001:db8::2", 4),
        arp(),
    ] {
        let (_, outer) = run1(enc.as_mut(), &inner);
        let mut padded = outer.clone();
        padded.extend_from_slice(&[0xee; 5]); // outer link padding
        assert_eq!(run1(dec.as_mut(), &padded), (Verdict::Next, inner.clone()));
    }
    let (_, outer) = run1(enc.as_mut(), &udp("10.0.0.1", 1, "10.0.0.2", 2));
    let mut other = build("vxlan_decap", json!({ "vni": 5 }));
    assert_eq!(
        run1(other.as_mut(), &outer).0,
        drop("vxlan_decap", "vni_mismatch")
    );
    let mut any = build("vxlan_decap", json!({}));
    assert_eq!(run1(any.as_mut(), &outer).0, Verdict::Next);
    let mut no_i = outer.clone();
    no_i[42] = 0;
    assert_eq!(run1(dec.as_mut(), &no_i).0, drop("vxlan_decap", "no_vni"));
    // A VXLAN header with no room for an inner Ethernet header.
    let short = frame(
        "192.0.2.1",
        "192.0.2.2",
        L4Spec::Udp {
            src_port: 1,
            dst_port: 4789,
        },
        &[8, 0, 0, 0, 0, 0, 1, 0, 1, 2],
    );
    assert_eq!(
        run1(any.as_mut(), &short).0,
        drop("vxlan_decap", "inner_truncated")
    );
    let tiny = frame(
        "192.0.2.1",
        "192.0.2.2",
        L4Spec::Udp {
            src_port: 1,
            dst_port: 4789,
        },
        &[8, 0, 0],
    );
    assert_eq!(
        run1(dec.as_mut(), &tiny).0,
        drop("vxlan_decap", "truncated")
    );
    let plain = udp("10.0.0.1", 1, "10.0.0.2", 53);
    assert_eq!(
        run1(dec.as_mut(), &plain).0,
        drop("vxlan_decap", "not_vxlan")
    );
    let mut pass = build("vxlan_decap", json!({ "non_vxlan": "pass" }));
    assert_eq!(run1(pass.as_mut(), &plain), (Verdict::Next, plain.clone()));
    let mut bad = outer.clone();
    bad[14] = 0x4f;
    assert!(matches!(run1(dec.as_mut(), &bad).0, Verdict::Drop(_)));
}

#[test]
fn mtu_and_headroom_limits_are_counted() {
    let mut nf = build(
        "vxlan_encap",
        json!({ "vni": 1, "local": "192.0.2.1", "remote": "192.0.2.2", "mtu": 600 }),
    );
    let mut h = Harness::new();
    let fits = frame(
        "10.0.0.1",
        "10.0.0.2",
        L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        },
        &[0; 600 - 36 - 42],
    );
    let big = frame(
        "10.0.0.1",
        "10.0.0.2",
        L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        },
        &[0; 600 - 36 - 41],
    );
    let out = h.run(nf.as_mut(), &[fits, big]);
    assert_eq!(out[0].verdict, Verdict::Next);
    assert_eq!(out[0].frame.len() - 14, 600);
    assert_eq!(out[1].verdict, drop("vxlan_encap", "mtu_exceeded"));
    assert_eq!(h.counter(counter_index("vxlan_encap", "mtu_exceeded")), 1);
    assert_eq!(h.counter(counter_index("vxlan_encap", "encapsulated")), 1);

    // Two IPv6 encapsulations need 140 bytes of headroom; there are 128.
    let v6 = build(
        "vxlan_encap",
        json!({ "vni": 1, "local": "2001:db8::1", "remote": "2001:db8::2" }),
    );
    let mut twice = DoubleEncap(v6);
    let mut h = Harness::new();
    let out = h.run(&mut twice, &[udp("10.0.0.1", 1, "10.0.0.2", 2)]);
    assert_eq!(out[0].verdict, drop("vxlan_encap", "no_headroom"));
    assert_eq!(h.counter(counter_index("vxlan_encap", "no_headroom")), 1);
}

/// Runs an NF twice on the same batch.
struct DoubleEncap(Box<dyn NetworkFunction>);

impl NetworkFunction for DoubleEncap {
    fn process(&mut self, batch: &mut sluice_nf::Batch<'_>, ctx: &mut sluice_nf::Context<'_>) {
        self.0.process(batch, ctx);
        self.0.process(batch, ctx);
    }
}

#[test]
fn gre_eth_and_ip_modes_round_trip_with_key_and_checksum() {
    for (mode, local, remote) in [
        ("eth", "192.0.2.1", "192.0.2.2"),
        ("ip", "2001:db8::1", "2001:db8::2"),
    ] {
        let mut enc = build(
            "gre_encap",
            json!({ "mode": mode, "key": 42, "checksum": true, "local": local, "remote": remote,
                    "src_mac": "02:00:00:00:01:01", "dst_mac": "02:00:00:00:01:02" }),
        );
        let mut dec = build(
            "gre_decap",
            json!({ "key": 42, "inner_src_mac": "02:00:00:00:00:0a", "inner_dst_mac": "02:00:00:00:00:0b" }),
        );
        let inner = tcp("10.0.0.1", 1000, "10.0.0.2", 80);
        let (v, out) = run1(enc.as_mut(), &inner);
        assert_eq!(v, Verdict::Next);
        let ip_len = if local.contains(':') { 40 } else { 20 };
        let gre = &out[14 + ip_len..];
        assert_eq!(
            &gre[..4],
            &[
                0xa0,
                0,
                if mode == "eth" { 0x65 } else { 0x08 },
                if mode == "eth" { 0x58 } else { 0 }
            ]
        );
        assert_eq!(&gre[8..12], &42u32.to_be_bytes());
        assert_eq!(
            checksum::checksum(gre),
            0,
            "GRE checksum covers header and payload"
        );
        if mode == "eth" {
            assert_eq!(&gre[12..], &inner[..]);
            assert!(Ipv4Packet::new_checked(&out[14..])
                .unwrap()
                .verify_checksum());
        } else {
            assert_eq!(&gre[12..], &inner[14..]);
            assert_eq!(out[14 + 6], 47);
        }
        // inner_*_mac only apply to IP payloads; inner is MAC_A -> MAC_B,
        // the same addresses those keys name.
        assert_eq!(run1(dec.as_mut(), &out), (Verdict::Next, inner.clone()));

        let mut nokey = build("gre_decap", json!({}));
        assert_eq!(
            run1(nokey.as_mut(), &out).0,
            drop("gre_decap", "key_mismatch")
        );
        let mut corrupt = out.clone();
        *corrupt.last_mut().unwrap() ^= 0xff;
        assert_eq!(
            run1(dec.as_mut(), &corrupt).0,
            drop("gre_decap", "bad_checksum")
        );
    }
    let mut ipmode = build(
        "gre_encap",
        json!({ "mode": "ip", "local": "192.0.2.1", "remote": "192.0.2.2" }),
    );
    assert_eq!(run1(ipmode.as_mut(), &arp()).0, drop("gre_encap", "non_ip"));
    let mut dec = build("gre_decap", json!({}));
    assert_eq!(
        run1(dec.as_mut(), &udp("10.0.0.1", 1, "10.0.0.2", 2)).0,
        drop("gre_decap", "not_gre")
    );
}

#[test]
fn gre_decap_rejects_bad_headers_and_unknown_protocols() {
    let mut enc = build(
        "gre_encap",
        json!({ "local": "192.0.2.1", "remote": "192.0.2.2" }),
    );
    let (_, out) = run1(enc.as_mut(), &udp("10.0.0.1", 1, "10.0.0.2", 2));
    let mut dec = build("gre_decap", json!({}));
    let mut v1 = out.clone();
    v1[35] |= 1; // version 1 (PPTP)
    assert_eq!(run1(dec.as_mut(), &v1).0, drop("gre_decap", "bad_header"));
    let mut routing = out.clone();
    routing[34] |= 0x40;
    assert_eq!(
        run1(dec.as_mut(), &routing).0,
        drop("gre_decap", "bad_header")
    );
    let mut proto = out.clone();
    proto[36..38].copy_from_slice(&[0x88, 0x47]); // MPLS
    assert_eq!(
        run1(dec.as_mut(), &proto).0,
        drop("gre_decap", "unsupported_protocol")
    );
}

#[test]
fn config_errors_name_the_field() {
    let e = build_err(
        "vxlan_encap",
        json!({ "vni": 16777216, "local": "192.0.2.1", "remote": "192.0.2.2" }),
    );
    assert!(
        e.to_string().contains("vni 16777216 is out of range"),
        "{e}"
    );
    let e = build_err(
        "vxlan_encap",
        json!({ "vni": 1, "local": "192.0.2.1", "remote": "2001:db8::2" }),
    );
    assert!(e.to_string().contains("same IP family"), "{e}");
    let e = build_err(
        "vxlan_encap",
        json!({ "vni": 1, "local": "192.0.2.1", "remote": "192.0.2.2", "colour": 1 }),
    );
    assert!(e.to_string().contains("unknown key `colour`"), "{e}");
    let e = build_err(
        "gre_encap",
        json!({ "local": "192.0.2.x", "remote": "192.0.2.2" }),
    );
    assert!(
        e.to_string().contains("invalid IP address `192.0.2.x`"),
        "{e}"
    );
    let e = build_err("gre_decap", json!({ "inner_src_mac": "zz" }));
    assert!(e.to_string().contains("invalid MAC address"), "{e}");
    let e = build_err("vxlan_decap", json!({ "vni": 1 << 24 }));
    assert!(e.to_string().contains("out of range"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Encapsulation then decapsulation gives back the frame, whatever it is.
    #[test]
    fn encap_decap_is_identity(payload in proptest::collection::vec(any::<u8>(), 0..1200),
                               v6 in any::<bool>(), gre in any::<bool>(), key in proptest::option::of(any::<u32>()),
                               sport in any::<u16>(), dport in any::<u16>()) {
        let (l, r) = if v6 { ("2001:db8::1", "2001:db8::2") } else { ("192.0.2.1", "192.0.2.2") };
        let (mut enc, mut dec) = if gre {
            (build("gre_encap", json!({ "local": l, "remote": r, "key": key, "checksum": true })),
             build("gre_decap", json!({ "key": key })))
        } else {
            (build("vxlan_encap", json!({ "vni": key.unwrap_or(0) & 0xffffff, "local": l, "remote": r })),
             build("vxlan_decap", json!({})))
        };
        let inner = frame("10.0.0.1", "10.0.0.2", L4Spec::Udp { src_port: sport, dst_port: dport }, &payload);
        let (v, out) = run1(enc.as_mut(), &inner);
        prop_assert_eq!(v, Verdict::Next);
        prop_assert_eq!(run1(dec.as_mut(), &out), (Verdict::Next, inner));
    }
}
