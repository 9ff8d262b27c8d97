//! `router`: forwarding with MAC rewrite and TTL decrement, ICMP errors
//! built in place (bytes checked against an independent construction),
//! the ICMP rate limit, ARP / NDP answers and learning, unresolved next
//! hops, ECMP, non-forwardable packets, routes files and config errors.

mod common;
use common::*;

use std::net::IpAddr;

use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{BuildContext, DropReason, PortId, Verdict};
use sluice_nfs::router::forward::{Router, Stats};
use sluice_nfs::router::{compile, counter};
use sluice_packet::{parse, verify_checksums, write_frame, FrameSpec, L4Spec, MacAddr};
use sluice_spec::ConfigNode;

const MAC_OUT: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x00];
const MAC_DUMP: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x00];
const GW2: [u8; 6] = [0x02, 0, 0, 0, 0x00, 0x22];
const OUT: PortId = PortId(0);
const DUMP: PortId = PortId(1);

fn config() -> Value {
    json!({
        "interfaces": router_interfaces(),
        "routes": [
            "10.0.0.0/8 via 192.168.2.2 dev dump",
            "10.1.0.0/16 via 192.168.1.2 dev out",
            "2001:db8:100::/48 via 2001:db8:2::2 dev dump",
            "2001:db8:200::/48 via 2001:db8:1::2 dev out",
        ],
        "neighbours": [
            { "ip": "192.168.2.2", "mac": "02:00:00:00:00:22", "dev": "dump" },
            { "ip": "2001:db8:2::2", "mac": "02:00:00:00:00:22", "dev": "dump" },
        ],
    })
}

fn with(mut base: Value, key: &str, v: Value) -> Value {
    base[key] = v;
    base
}

fn router(cfg: Value) -> Router {
    let node = ConfigNode::from_json(cfg);
    let ctx = BuildContext {
        name: "r".into(),
        config: &node,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    compile(&ctx).unwrap_or_else(|e| panic!("config rejected: {e}"))
}

fn c(h: &Harness, name: &str) -> u64 {
    h.counter(counter_index("router", name))
}

fn reason(name: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("router", name)))
}

/// A UDP frame MAC_A → MAC_B with `ttl`.
fn udp_ttl(src: &str, dst: &str, ttl: u8) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MAC_A,
        dst_mac: MacAddr(MAC_OUT),
        vlan: None,
        src_ip: src.parse().unwrap(),
        dst_ip: dst.parse().unwrap(),
        ttl,
        l4: L4Spec::Udp {
            src_port: 1000,
            dst_port: 2000,
        },
    };
    let payload = b"0123456789abcdefghij";
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).unwrap();
    buf.truncate(n);
    buf
}

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn ip6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

fn checks(frame: &[u8]) {
    let h = parse(frame).unwrap();
    verify_checksums(frame, &h).unwrap();
}

#[test]
fn descriptor() {
    let t = nf_type("router");
    assert_eq!(t.counters.len(), 14);
    assert!(t.counters.len() <= 16);
    assert_eq!(t.counters[counter::ROUTES], "routes");
    assert_eq!(t.counters[counter::ICMP_RATE_LIMITED], "icmp_rate_limited");
    assert_eq!(t.drop_reasons[0], "no_route");
}

#[test]
fn forwards_ipv4_with_mac_rewrite_and_ttl_decrement() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let input = udp_ttl("192.168.1.50", "10.2.3.4", 64);
    let out = h.run(nf.as_mut(), std::slice::from_ref(&input));
    assert_eq!(out[0].verdict, Verdict::ToPort(DUMP));
    let f = &out[0].frame;
    assert_eq!(f[0..6], GW2);
    assert_eq!(f[6..12], MAC_DUMP);
    assert_eq!(f[14 + 8], 63);
    checks(f);
    // Nothing else changed: the old checksum and TTL aside, same bytes.
    assert_eq!(f.len(), input.len());
    for (i, (a, b)) in f.iter().zip(&input).enumerate() {
        if !(0..12).contains(&i) && i != 22 && i != 24 && i != 25 {
            assert_eq!(a, b, "byte {i}");
        }
    }
    assert_eq!(c(&h, "forwarded"), 1);
    // 4 configured + 4 connected (two /24, two /64).
    assert_eq!(c(&h, "routes"), 8);
    assert_eq!(c(&h, "neighbours"), 2);
}

#[test]
fn longest_prefix_decides_the_port() {
    // 10.1/16 is via 192.168.1.2 on `out`, which is unresolved: the
    // frame is lost and an ARP request goes out there, not to `dump`.
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &[udp_ttl("192.168.1.50", "10.1.3.4", 64)]);
    assert_eq!(out[0].verdict, reason("neighbour_unresolved"));
    let sent = h.take_emitted();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(sent[0].frame[12..14], [0x08, 0x06]);
}

#[test]
fn forwards_ipv6_with_hop_limit_decrement() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let input = udp_ttl("2001:db8:1::50", "2001:db8:100::9", 2);
    let out = h.run(nf.as_mut(), std::slice::from_ref(&input));
    assert_eq!(out[0].verdict, Verdict::ToPort(DUMP));
    let f = &out[0].frame;
    assert_eq!(f[0..6], GW2);
    assert_eq!(f[6..12], MAC_DUMP);
    assert_eq!(f[14 + 7], 1);
    assert_eq!(f[12..], {
        let mut e = input[12..].to_vec();
        e[2 + 7] = 1;
        e
    });
    assert_eq!(c(&h, "forwarded"), 1);
}

/// The ICMPv4 error a router at `src` must send about `orig` (a whole
/// frame from MAC_A), built by hand from RFC 792.
fn icmp4_expected(orig: &[u8], src: [u8; 4], typ: u8, code: u8) -> Vec<u8> {
    let ip = &orig[14..];
    let quoted = &ip[..28];
    let mut icmp = vec![typ, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(quoted);
    let ck = csum(&icmp);
    icmp[2..4].copy_from_slice(&ck.to_be_bytes());
    let mut h = vec![0x45, 0xc0];
    h.extend_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0, 64, 1, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&ip[12..16]);
    let ck = csum(&h);
    h[10..12].copy_from_slice(&ck.to_be_bytes());
    [&orig[6..12], &MAC_OUT[..], &[0x08, 0x00][..], &h, &icmp].concat()
}

#[test]
fn ttl_expiry_sends_time_exceeded_back_out_of_the_ingress_port() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let input = udp_ttl("192.168.1.50", "10.2.3.4", 1);
    let out = h.run(nf.as_mut(), std::slice::from_ref(&input));
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(
        out[0].frame,
        icmp4_expected(&input, [192, 168, 1, 1], 11, 0)
    );
    checks(&out[0].frame);
    assert_eq!(c(&h, "ttl_expired"), 1);
    assert_eq!(c(&h, "icmp_sent"), 1);
    assert_eq!(c(&h, "forwarded"), 0);
    // TTL 0 expires too.
    let out = h.run(nf.as_mut(), &[udp_ttl("192.168.1.50", "10.2.3.4", 0)]);
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
}

#[test]
fn no_route_sends_net_unreachable() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let input = udp_ttl("192.168.1.50", "172.16.0.1", 64);
    let out = h.run(nf.as_mut(), std::slice::from_ref(&input));
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[0].frame, icmp4_expected(&input, [192, 168, 1, 1], 3, 0));
    assert_eq!(c(&h, "no_route"), 1);
    assert_eq!(c(&h, "icmp_sent"), 1);
}

/// The ICMPv6 error (RFC 4443) about `orig` from `src`.
fn icmp6_expected(orig: &[u8], src: &str, typ: u8) -> Vec<u8> {
    let ip = &orig[14..];
    let mut icmp = vec![typ, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&ip[..ip.len().min(1232)]);
    let dst = &ip[8..24];
    let mut pseudo = [&ip6(src)[..], dst].concat();
    pseudo.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    let ck = csum(&[pseudo, icmp.clone()].concat());
    icmp[2..4].copy_from_slice(&ck.to_be_bytes());
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    h.extend_from_slice(&[58, 64]);
    h.extend_from_slice(&ip6(src));
    h.extend_from_slice(dst);
    [&orig[6..12], &MAC_OUT[..], &[0x86, 0xdd][..], &h, &icmp].concat()
}

#[test]
fn ipv6_errors_quote_up_to_1280_bytes() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let small = udp_ttl("2001:db8:1::50", "2001:db8:100::9", 1);
    let unrouted = udp_ttl("2001:db8:1::50", "2001:db8:999::9", 64);
    // A 1400-byte packet: the error is cut to exactly 1280 bytes of IPv6.
    let big = frame(
        "2001:db8:1::50",
        "2001:db8:999::1",
        L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        },
        &[7u8; 1400],
    );
    let out = h.run(nf.as_mut(), &[small.clone(), unrouted.clone(), big.clone()]);
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[0].frame, icmp6_expected(&small, "2001:db8:1::1", 3));
    assert_eq!(out[1].frame, icmp6_expected(&unrouted, "2001:db8:1::1", 1));
    assert_eq!(out[2].frame.len(), 14 + 1280);
    assert_eq!(out[2].frame, icmp6_expected(&big, "2001:db8:1::1", 1));
    for o in &out {
        checks(&o.frame);
    }
    assert_eq!(c(&h, "icmp_sent"), 3);
    assert_eq!(c(&h, "ttl_expired"), 1);
    assert_eq!(c(&h, "no_route"), 2);
}

#[test]
fn icmp_errors_are_rate_limited_and_counted() {
    let cfg = with(
        with(config(), "icmp_rate_pps", json!(1)),
        "icmp_burst",
        json!(2),
    );
    let mut nf = build("router", cfg);
    let mut h = Harness::new();
    let frames: Vec<Vec<u8>> = (0..5)
        .map(|_| udp_ttl("192.168.1.50", "10.2.3.4", 1))
        .collect();
    let out = h.run(nf.as_mut(), &frames);
    let v: Vec<Verdict> = out.iter().map(|o| o.verdict).collect();
    let te = reason("ttl_expired");
    assert_eq!(v, [Verdict::ToPort(OUT), Verdict::ToPort(OUT), te, te, te]);
    assert_eq!(c(&h, "icmp_sent"), 2);
    assert_eq!(c(&h, "icmp_rate_limited"), 3);
    assert_eq!(c(&h, "ttl_expired"), 5);
    // One token per second comes back.
    h.set_now_ns(2_000_000_000);
    let out = h.run(nf.as_mut(), &frames[..2]);
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[1].verdict, te);
    // Disabled ICMP: plain drops, nothing counted as rate limited.
    let mut nf = build("router", with(config(), "icmp_errors", json!(false)));
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &frames[..1]);
    assert_eq!(out[0].verdict, te);
    assert_eq!(c(&h, "icmp_rate_limited"), 0);
}

#[test]
fn no_icmp_error_about_an_icmp_error() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let expiring = udp_ttl("192.168.1.50", "10.2.3.4", 1);
    let err = h.run(nf.as_mut(), &[expiring]).remove(0).frame;
    // Send that error back in with TTL 1 (and a fixed checksum): the
    // router must drop it silently.
    let mut again = err.clone();
    again[0..6].copy_from_slice(&MAC_OUT);
    again[22] = 1;
    again[24..26].copy_from_slice(&[0, 0]);
    let ck = csum(&again[14..34]);
    again[24..26].copy_from_slice(&ck.to_be_bytes());
    // Destination 192.168.1.50 is connected on `out`: make it expire.
    let out = h.run(nf.as_mut(), &[again]);
    assert_eq!(out[0].verdict, reason("ttl_expired"));
    assert_eq!(c(&h, "icmp_sent"), 1);
}

fn arp_frame(
    op: u16,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
    eth_dst: [u8; 6],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&eth_dst);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&tpa);
    f
}

#[test]
fn answers_arp_for_its_addresses_and_learns_the_asker() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let host = [0x02, 0, 0, 0, 0, 0x77];
    let req = arp_frame(
        1,
        host,
        [192, 168, 1, 77],
        [0; 6],
        [192, 168, 1, 1],
        [0xff; 6],
    );
    let other = arp_frame(
        1,
        [0x02, 0, 0, 0, 0, 0x78],
        [192, 168, 1, 78],
        [0; 6],
        [192, 168, 1, 99],
        [0xff; 6],
    );
    let out = h.run(nf.as_mut(), &[req, other]);
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(
        out[0].frame,
        arp_frame(2, MAC_OUT, [192, 168, 1, 1], host, [192, 168, 1, 77], host)
    );
    assert_eq!(out[1].verdict, reason("arp_nd_consumed"));
    assert_eq!(c(&h, "arp_replies"), 1);
    assert_eq!(c(&h, "neighbours_learned"), 1);
    // The asker is now a resolved neighbour on the connected /24 ...
    let out = h.run(nf.as_mut(), &[udp_ttl("192.168.2.9", "192.168.1.77", 9)]);
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[0].frame[0..6], host);
    assert_eq!(out[0].frame[6..12], MAC_OUT);
    // ... but the host asking for someone else was not learned.
    let out = h.run(nf.as_mut(), &[udp_ttl("192.168.2.9", "192.168.1.78", 9)]);
    assert_eq!(out[0].verdict, reason("neighbour_unresolved"));
    assert_eq!(
        h.take_emitted()[0].frame[12..14],
        [0x08, 0x06],
        "an ARP request"
    );
}

#[test]
fn unresolved_next_hop_becomes_an_arp_request_then_resolves() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let pkt = udp_ttl("192.168.2.9", "10.1.3.4", 64);
    let out = h.run(nf.as_mut(), &[pkt.clone(), pkt.clone()]);
    // Both packets are lost; one request goes out in a fresh buffer.
    assert_eq!(out[0].verdict, reason("neighbour_unresolved"));
    assert_eq!(out[1].verdict, reason("neighbour_unresolved"));
    let sent = h.take_emitted();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].verdict, Verdict::ToPort(OUT));
    let req = arp_frame(
        1,
        MAC_OUT,
        [192, 168, 1, 1],
        [0; 6],
        [192, 168, 1, 2],
        [0xff; 6],
    );
    assert_eq!(sent[0].frame, req);
    assert_eq!(c(&h, "neighbour_unresolved"), 2);
    assert_eq!(c(&h, "arp_requests"), 1);
    // Not again within the retransmit time; again after it.
    h.run(nf.as_mut(), std::slice::from_ref(&pkt));
    assert!(h.take_emitted().is_empty());
    h.set_now_ns(3_000_000_000);
    h.run(nf.as_mut(), std::slice::from_ref(&pkt));
    assert_eq!(h.take_emitted()[0].frame, req);
    assert_eq!(c(&h, "arp_requests"), 2);
    // The reply resolves it (and is consumed).
    let gw = [0x02, 0, 0, 0, 0, 0x12];
    let reply = arp_frame(2, gw, [192, 168, 1, 2], MAC_OUT, [192, 168, 1, 1], MAC_OUT);
    let out = h.run(nf.as_mut(), &[reply, pkt]);
    assert_eq!(out[0].verdict, reason("arp_nd_consumed"));
    assert_eq!(out[1].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[1].frame[0..6], gw);
    assert_eq!(c(&h, "forwarded"), 1);
}

/// An NS for `target` from `src` (MAC `mac`) with a source link-layer
/// option, to the solicited-node group.
fn ns_frame(src: &str, mac: [u8; 6], target: &str) -> Vec<u8> {
    let t = ip6(target);
    let dst = [
        0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15],
    ];
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&t);
    icmp.extend_from_slice(&[1, 1]);
    icmp.extend_from_slice(&mac);
    let mut pseudo = [&ip6(src)[..], &dst[..]].concat();
    pseudo.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    let ck = csum(&[pseudo, icmp.clone()].concat());
    icmp[2..4].copy_from_slice(&ck.to_be_bytes());
    let mut f = vec![0x33, 0x33, 0xff, t[13], t[14], t[15]];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    f.extend_from_slice(&ip6(src));
    f.extend_from_slice(&dst);
    f.extend_from_slice(&icmp);
    f
}

#[test]
fn answers_neighbor_solicitations_and_learns() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let host = [0x02, 0, 0, 0, 0, 0x66];
    let out = h.run(
        nf.as_mut(),
        &[
            ns_frame("2001:db8:1::66", host, "2001:db8:1::1"),
            ns_frame("2001:db8:1::67", host, "2001:db8:1::99"),
        ],
    );
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    let f = &out[0].frame;
    checks(f);
    assert_eq!(f[0..6], host);
    assert_eq!(f[6..12], MAC_OUT);
    assert_eq!(f[14 + 7], 255, "hop limit");
    assert_eq!(f[22..38], ip6("2001:db8:1::1"), "source = target");
    assert_eq!(f[38..54], ip6("2001:db8:1::66"));
    assert_eq!(f[54], 136);
    assert_eq!(f[58], 0xe0, "router, solicited, override");
    assert_eq!(f[62..78], ip6("2001:db8:1::1"));
    assert_eq!(
        f[78..86],
        [2, 1, 2, 0, 0, 0, 1, 0],
        "target link-layer address"
    );
    assert_eq!(f.len(), 86);
    assert_eq!(out[1].verdict, reason("arp_nd_consumed"));
    assert_eq!(c(&h, "nd_advertisements"), 1);
    // The link-local address (EUI-64 of the MAC) is answered too.
    let out = h.run(
        nf.as_mut(),
        &[ns_frame("fe80::66", host, "fe80::ff:fe00:100")],
    );
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    // The solicitor was learned: forwarding to it works.
    let out = h.run(
        nf.as_mut(),
        &[udp_ttl("2001:db8:2::9", "2001:db8:1::66", 9)],
    );
    assert_eq!(out[0].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[0].frame[0..6], host);
    // A corrupted checksum is ignored.
    let mut bad = ns_frame("2001:db8:1::68", host, "2001:db8:1::1");
    bad[60] ^= 1;
    let out = h.run(nf.as_mut(), &[bad]);
    assert_eq!(out[0].verdict, reason("arp_nd_consumed"));
}

#[test]
fn unresolved_ipv6_next_hop_becomes_a_neighbor_solicitation() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let out = h.run(
        nf.as_mut(),
        &[udp_ttl("2001:db8:2::9", "2001:db8:200::1", 9)],
    );
    assert_eq!(out[0].verdict, reason("neighbour_unresolved"));
    let sent = h.take_emitted();
    assert_eq!(sent[0].verdict, Verdict::ToPort(OUT));
    let f = &sent[0].frame;
    assert_eq!(f.len(), 86);
    checks(f);
    assert_eq!(f[0..6], [0x33, 0x33, 0xff, 0, 0, 2]);
    assert_eq!(f[38..54], ip6("ff02::1:ff00:2"));
    assert_eq!(f[22..38], ip6("2001:db8:1::1"));
    assert_eq!(f[54], 135);
    assert_eq!(f[62..78], ip6("2001:db8:1::2"));
    assert_eq!(f[78..86], [1, 1, 2, 0, 0, 0, 1, 0]);
    assert_eq!(c(&h, "neighbour_solicitations"), 1);
    // The NA (with the target link-layer option) resolves it.
    let gw = [0x02, 0, 0, 0, 0, 0x13];
    let mut icmp = vec![136, 0, 0, 0, 0x60, 0, 0, 0];
    icmp.extend_from_slice(&ip6("2001:db8:1::2"));
    icmp.extend_from_slice(&[2, 1]);
    icmp.extend_from_slice(&gw);
    let mut pseudo = [&ip6("2001:db8:1::2")[..], &ip6("2001:db8:1::1")[..]].concat();
    pseudo.extend_from_slice(&[0, 0, 0, 32, 0, 0, 0, 58]);
    let ck = csum(&[pseudo, icmp.clone()].concat());
    icmp[2..4].copy_from_slice(&ck.to_be_bytes());
    let mut na = [
        &MAC_OUT[..],
        &gw[..],
        &[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255][..],
    ]
    .concat();
    na.extend_from_slice(&ip6("2001:db8:1::2"));
    na.extend_from_slice(&ip6("2001:db8:1::1"));
    na.extend_from_slice(&icmp);
    let out = h.run(
        nf.as_mut(),
        &[na, udp_ttl("2001:db8:2::9", "2001:db8:200::1", 9)],
    );
    assert_eq!(out[0].verdict, reason("arp_nd_consumed"));
    assert_eq!(out[1].verdict, Verdict::ToPort(OUT));
    assert_eq!(out[1].frame[0..6], gw);
}

#[test]
fn requests_beyond_the_reserve_are_counted_not_sent() {
    // 40 unresolved neighbours in one batch: the NF queues 32 requests per
    // call (its buffer reserve); the others ask with their next packet.
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let frames: Vec<Vec<u8>> = (0..40)
        .map(|i| udp_ttl("192.168.2.9", &format!("192.168.1.{}", 100 + i), 9))
        .collect();
    let out = h.run(nf.as_mut(), &frames);
    assert!(out
        .iter()
        .all(|o| o.verdict == reason("neighbour_unresolved")));
    assert_eq!(h.take_emitted().len(), 32);
    assert_eq!(c(&h, "arp_requests"), 32);
    assert_eq!(c(&h, "neighbour_unresolved"), 40);
    h.run(nf.as_mut(), &frames);
    assert_eq!(h.take_emitted().len(), 8);
}

#[test]
fn ecmp_spreads_flows_and_keeps_each_flow_on_one_next_hop() {
    let cfg = with(
        config(),
        "routes",
        json!(["10.0.0.0/8 nexthop via 192.168.1.2 dev out nexthop via 192.168.2.2 dev dump"]),
    );
    let mut cfg = cfg;
    cfg["neighbours"] = json!([
        { "ip": "192.168.1.2", "mac": "02:00:00:00:00:12", "dev": "out" },
        { "ip": "192.168.2.2", "mac": "02:00:00:00:00:22", "dev": "dump" },
    ]);
    let mut r = router(cfg);
    let pkt = udp_ttl("192.168.1.50", "10.2.3.4", 64);
    let mut per_port = [0u32; 2];
    for hash in (0..1000u32).map(|i| i.wrapping_mul(0x9E37_79B9)) {
        let mut first = None;
        for _ in 0..3 {
            let mut buf = pkt.clone();
            buf.resize(2048, 0);
            let (v, n) = r.process_frame(&mut buf, pkt.len(), 0, hash, 1, &mut Stats::default());
            assert_eq!(n, pkt.len());
            let Verdict::ToPort(p) = v else {
                panic!("{v:?}")
            };
            let want_mac = if p == OUT { [2, 0, 0, 0, 0, 0x12] } else { GW2 };
            assert_eq!(buf[0..6], want_mac);
            assert!(first.is_none_or(|f| f == p), "flow moved");
            first = Some(p);
        }
        per_port[first.unwrap().0 as usize] += 1;
    }
    assert!(per_port[0] > 400 && per_port[1] > 400, "{per_port:?}");
    let hops = r.table().nexthops("10.9.9.9".parse::<IpAddr>().unwrap());
    assert_eq!(hops.len(), 2);
}

#[test]
fn packets_that_are_never_forwarded() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let mut bad_ck = udp_ttl("192.168.1.50", "10.2.3.4", 64);
    bad_ck[24] ^= 0xff;
    let frames = vec![
        udp_ttl("192.168.1.50", "192.168.2.1", 64),
        udp_ttl("2001:db8:1::50", "2001:db8:2::1", 64),
        udp_ttl("192.168.1.50", "224.0.0.5", 64),
        udp_ttl("192.168.1.50", "255.255.255.255", 64),
        udp_ttl("192.168.1.50", "127.0.0.1", 64),
        udp_ttl("2001:db8:1::50", "ff02::1", 64),
        udp_ttl("2001:db8:1::50", "fe80::1", 64),
        udp_ttl("fe80::50", "2001:db8:100::1", 64),
        bad_ck,
        vec![0u8; 10],
        {
            let mut f = arp();
            f[12..14].copy_from_slice(&[0x88, 0xcc]);
            f
        },
    ];
    let out = h.run(nf.as_mut(), &frames);
    let v: Vec<Verdict> = out.iter().map(|o| o.verdict).collect();
    let nr = reason("not_routable");
    assert_eq!(
        v,
        [
            reason("local"),
            reason("local"),
            nr,
            nr,
            nr,
            nr,
            nr,
            nr,
            Verdict::Drop(DropReason::malformed(
                sluice_packet::ParseError::Ipv4BadChecksum
            )),
            Verdict::Drop(DropReason::malformed(
                sluice_packet::ParseError::EthernetTruncated
            )),
            reason("non_ip"),
        ]
    );
    assert_eq!(c(&h, "forwarded") + c(&h, "icmp_sent"), 0);
}

#[test]
fn later_routes_replace_earlier_ones_and_connected_routes() {
    let cfg = with(
        config(),
        "routes",
        json!([
            "10.0.0.0/8 via 192.168.1.2 dev out",
            "10.0.0.0/8 via 192.168.2.2 dev dump",
            "192.168.1.0/24 via 192.168.2.2 dev dump",
        ]),
    );
    let r = router(cfg);
    for dst in ["10.0.0.1", "192.168.1.9"] {
        let hops = r.table().nexthops(dst.parse().unwrap());
        assert_eq!(hops.len(), 1);
        assert_eq!(hops[0].iface, 1, "{dst}");
    }
}

#[test]
fn routes_file_is_read_relative_paths_and_errors_carry_line_numbers() {
    let dir = std::env::temp_dir().join(format!("sluice-router-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("routes.txt");
    std::fs::write(
        &path,
        "# test table\n172.16.0.0/12 via 192.168.2.2 dev dump\n\n2001:db8:300::/40 dev out\n",
    )
    .unwrap();
    let r = router(with(config(), "routes_file", json!(path.to_str().unwrap())));
    assert_eq!(r.table().routes(), 10);
    assert_eq!(
        r.table().nexthops("172.20.0.1".parse().unwrap())[0].iface,
        1
    );
    std::fs::write(&path, "172.16.0.0/12 dev dump\n10.0.0.0/8 dev nowhere\n").unwrap();
    let e = build_err(
        "router",
        with(config(), "routes_file", json!(path.to_str().unwrap())),
    );
    assert!(
        e.to_string()
            .contains("`dev nowhere` is not one of the router's interfaces"),
        "{e}"
    );
    std::fs::write(&path, "172.16.0.0/12 dev dump\n10.0.0.0/8 gateway x\n").unwrap();
    let e = build_err(
        "router",
        with(config(), "routes_file", json!(path.to_str().unwrap())),
    );
    assert!(
        e.to_string().contains("line 2: unexpected `gateway`"),
        "{e}"
    );
    let e = build_err(
        "router",
        with(config(), "routes_file", json!("/nonexistent/routes")),
    );
    assert!(
        e.to_string().contains("cannot read /nonexistent/routes"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn routes_file_must_be_a_regular_file_of_bounded_size() {
    check_refuses_odd_input_files("router", config(), "routes_file");
}

#[test]
fn config_errors_name_the_field() {
    for (cfg, path, msg) in [
        (json!(null), "", "needs a config"),
        (
            json!({ "interfaces": [] }),
            "interfaces",
            "at least one interface",
        ),
        (
            json!({ "interfaces": [{ "port": "eth9", "mac": "02:00:00:00:00:01" }] }),
            "interfaces[0].port",
            "unknown port `eth9`",
        ),
        (
            json!({ "interfaces": [{ "port": "out", "mac": "01:00:5e:00:00:01" }] }),
            "interfaces[0].mac",
            "not a unicast",
        ),
        (
            json!({ "interfaces": [{ "port": "out", "mac": "02:00:00:00:00:01", "addresses": ["1.2.3"] }] }),
            "interfaces[0].addresses[0]",
            "invalid address",
        ),
        (
            with(
                config(),
                "routes",
                json!(["10.0.0.0/8 via 1.1.1.1 dev eth7"]),
            ),
            "routes[0]",
            "`dev eth7` is not one of",
        ),
        (
            with(config(), "routes", json!(["10.0.0.0/8"])),
            "routes[0]",
            "no `dev`",
        ),
        (
            with(
                config(),
                "neighbours",
                json!([{ "ip": "1.1.1.1", "mac": "02:00:00:00:00:01", "dev": "x" }]),
            ),
            "neighbours[0].dev",
            "not one of",
        ),
        (with(config(), "colour", json!("blue")), "", "colour"),
    ] {
        let e = build_err("router", cfg).to_string();
        assert!(
            e.contains(path) && e.contains(msg),
            "want {path}: {msg}, got {e}"
        );
    }
}

#[test]
fn reset_forgets_learned_neighbours_but_not_static_ones() {
    let mut nf = build("router", config());
    let mut h = Harness::new();
    let host = [0x02, 0, 0, 0, 0, 0x77];
    let req = arp_frame(
        1,
        host,
        [192, 168, 1, 77],
        [0; 6],
        [192, 168, 1, 1],
        [0xff; 6],
    );
    h.run(nf.as_mut(), &[req]);
    nf.reset();
    let out = h.run(
        nf.as_mut(),
        &[
            udp_ttl("192.168.2.9", "192.168.1.77", 9),
            udp_ttl("192.168.1.9", "10.2.0.1", 9),
        ],
    );
    assert_eq!(
        out[0].verdict,
        reason("neighbour_unresolved"),
        "learned entry gone"
    );
    assert_eq!(h.take_emitted()[0].frame[12..14], [0x08, 0x06]);
    assert_eq!(out[1].frame[0..6], GW2, "static entry kept");
}

/// A relative `routes_file` is read beside the spec, like every other path
/// in a spec, and never from the working directory.
#[test]
fn a_relative_routes_file_resolves_against_the_spec_s_directory() {
    let dir = std::env::temp_dir().join(format!("sluice-router-rel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("routes.txt"), "172.16.0.0/12 dev dump\n").unwrap();
    let spec = |file: &str| {
        format!(
            "ports:\n  - {{ name: gen, kind: generator }}\n  - {{ name: out, kind: sink }}\n  - {{ name: dump, kind: sink }}\n\
             nfs:\n  - name: r\n    type: router\n    config:\n      interfaces:\n\
             \x20       - {{ port: out, mac: \"02:00:00:00:01:00\", addresses: [192.168.1.1/24] }}\n\
             \x20       - {{ port: dump, mac: \"02:00:00:00:02:00\", addresses: [192.168.2.1/24] }}\n\
             \x20     routes_file: {file}\n\
             chains:\n  - {{ name: main, from: gen, nfs: [r], to: out }}\n"
        )
    };
    let names: Vec<&str> = sluice_nfs::REGISTRY.iter().map(|t| t.name).collect();
    let source = dir.join("spec.yaml");
    let build = |file: &str| {
        let parsed = sluice_spec::parse_str(&spec(file), source.to_str().unwrap(), &names).unwrap();
        let ctx = BuildContext {
            name: "r".into(),
            config: &parsed.nfs[0].config,
            resolver: &TestResolver,
            flow_capacity: FLOW_CAPACITY,
        };
        compile(&ctx).map(|r| r.table().nexthops("172.20.0.1".parse().unwrap())[0].iface)
    };
    assert_eq!(
        build("routes.txt").unwrap(),
        1,
        "the route from the file beside the spec"
    );
    // `Cargo.toml` exists in the working directory of every test; a
    // relative path must not find it there.
    let e = build("Cargo.toml").unwrap_err().to_string();
    let beside = dir.join("Cargo.toml");
    assert!(
        e.contains(&format!("cannot read {}", beside.display())),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
