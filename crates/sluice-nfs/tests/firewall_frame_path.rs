//! The firewall's parse-free fast path (`Firewall::decide_frame`,
//! `Conntrack::classify_frame`): only frames of the common shape
//! (untagged Ethernet, IPv4 without options or IPv6 without extension
//! headers, TCP ACK-class or UDP, not a fragment, every length valid) are
//! decided from their raw bytes; anything else (a VLAN tag, IP options, an
//! extension header, a fragment, a truncated header, a bad length) is
//! parsed and decided exactly as before, through `process` too, and
//! malformed frames are still dropped with the parse error.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use proptest::prelude::*;
use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, Verdict};
use sluice_nfs::conntrack::Entry;
use sluice_nfs::firewall::{counters, Decision, Firewall, FRAGMENT};
use sluice_packet::{parse, FrameSpec, L4Spec, MacAddr, ParseError, TcpFlags};

const S: u64 = 1_000_000_000;
/// The flow id every connection of the deterministic tests gets.
const ID: u32 = 5;

fn accept_all() -> Firewall {
    firewall(json!({ "default": "accept", "timeouts": { "tcp_established": 10, "udp": 5 } }))
}

/// The full path's answer: parse, then `decide` without a flow id (no
/// fast path of any kind).
fn full(fw: &mut Firewall, f: &[u8], now: u64) -> Result<Decision, ParseError> {
    let h = parse(f)?;
    Ok(fw.decide(f, &h, 0, u32::MAX, now))
}

/// The datagram an IPv6 atomic fragment stands for (a fragment header
/// right after the fixed header, offset 0 and no more fragments; RFC
/// 6946): the NF completes it at once, judges it and emits it on its own,
/// so the twin judges this frame for it. `None` for anything else.
fn atomic_datagram(f: &[u8]) -> Option<Vec<u8>> {
    if f.get(12..14)? != [0x86, 0xdd] || *f.get(20)? != 44 {
        return None;
    }
    let payload = usize::from(u16::from_be_bytes([f[18], f[19]]));
    let fh = f.get(54..62)?;
    let (offset, more) = (u16::from_be_bytes([fh[2], fh[3]]) >> 3, fh[3] & 1);
    if offset != 0 || more != 0 || payload < 8 {
        return None;
    }
    let data = f.get(62..54 + payload)?;
    let mut g = [&f[..54], data].concat();
    g[20] = fh[0];
    g[18..20].copy_from_slice(&((payload - 8) as u16).to_be_bytes());
    Some(g)
}

/// The full path's decisions, counted as the NF's counters count them.
#[derive(Default)]
struct Tally {
    established: u64,
    new: u64,
    invalid: u64,
    passed: u64,
}

impl Tally {
    fn add(&mut self, d: Result<Decision, ParseError>) {
        match d {
            Ok(Decision::Established) => self.established += 1,
            Ok(Decision::New { .. }) => self.new += 1,
            Ok(Decision::Drop { reason, .. }) if reason == sluice_nfs::firewall::INVALID => {
                self.invalid += 1
            }
            _ => {}
        }
        self.passed += u64::from(verdict_of(d) == Verdict::Next);
    }
}

fn table(fw: &Firewall) -> Vec<(u32, Entry)> {
    fw.conntrack()
        .table()
        .iter()
        .map(|(i, e)| (i, *e))
        .collect()
}

/// IPv4 frame `f` with 4 bytes of NOP options (IHL 6).
fn with_ipv4_options(f: &[u8]) -> Vec<u8> {
    let mut g = [&f[..34], &[1, 1, 1, 1], &f[34..]].concat();
    g[14] = 0x46;
    let total = u16::from_be_bytes([g[16], g[17]]) + 4;
    g[16..18].copy_from_slice(&total.to_be_bytes());
    // A valid header checksum, so the packet is checked only for its shape.
    g[24..26].copy_from_slice(&[0, 0]);
    let c = sluice_packet::checksum::checksum(&g[14..38]);
    g[24..26].copy_from_slice(&c.to_be_bytes());
    g
}

/// `f` with an 802.1Q tag (VLAN 7).
fn with_vlan(f: &[u8]) -> Vec<u8> {
    [&f[..12], &[0x81, 0x00, 0x00, 0x07], &f[12..]].concat()
}

/// IPv6 frame `f` with an 8-byte hop-by-hop options header (PadN).
fn with_hop_by_hop(f: &[u8]) -> Vec<u8> {
    let next = f[20];
    let mut g = [&f[..54], &[next, 0, 1, 4, 0, 0, 0, 0], &f[54..]].concat();
    g[20] = 0;
    let pl = u16::from_be_bytes([g[18], g[19]]) + 8;
    g[18..20].copy_from_slice(&pl.to_be_bytes());
    g
}

fn set_u16(f: &[u8], at: usize, v: u16) -> Vec<u8> {
    let mut g = f.to_vec();
    g[at..at + 2].copy_from_slice(&v.to_be_bytes());
    g
}

fn set_u8(f: &[u8], at: usize, v: u8) -> Vec<u8> {
    let mut g = f.to_vec();
    g[at] = v;
    g
}

/// The four connections of the tests (TCP and UDP, IPv4 and IPv6), as
/// (ACK-class or UDP packet in the original direction, which opens the
/// connection (`tcp_loose`), its reply).
fn connections() -> Vec<[Vec<u8>; 2]> {
    let mut v = Vec::new();
    for (a, b) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
        v.push([
            tcp_seg(a, 4000, b, 80, ACK | PSH, 1, 1, b"data"),
            tcp_seg(b, 80, a, 4000, ACK, 1, 5, b""),
        ]);
        v.push([udp(a, 5000, b, 53), udp(b, 53, a, 5000)]);
    }
    v
}

/// Each variant of a tracked connection's packet `f` that must leave the
/// raw fast path, by name: IP options, a VLAN tag, an IPv6 extension
/// header, a fragment, truncations and bad lengths (the parse fails), SYN,
/// FIN and RST.
fn off_path_variants(f: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let v6 = f[12..14] == [0x86, 0xdd];
    let l4 = if v6 { 54 } else { 34 };
    let tcp = f[if v6 { 20 } else { 23 }] == 6;
    let mut v = vec![
        ("vlan", with_vlan(f)),
        ("truncated transport header", f[..l4 + 6].to_vec()),
        ("truncated ip header", f[..l4 - 4].to_vec()),
        ("ethernet only", f[..14].to_vec()),
    ];
    if v6 {
        v.push(("extension header", with_hop_by_hop(f)));
        let pl = u16::from_be_bytes([f[18], f[19]]);
        v.push(("payload length beyond frame", set_u16(f, 18, pl + 1)));
        v.push(("version 4 in an IPv6 ethertype", set_u8(f, 14, 0x40)));
    } else {
        v.push(("ip options", with_ipv4_options(f)));
        v.push(("more fragments", set_u8(f, 20, 0x20)));
        v.push(("fragment offset", set_u8(f, 21, 0x01)));
        let total = u16::from_be_bytes([f[16], f[17]]);
        v.push(("total length beyond frame", set_u16(f, 16, total + 1)));
        v.push(("total length below the header", set_u16(f, 16, 19)));
        v.push(("total length cuts the transport header", set_u16(f, 16, 24)));
        v.push(("ihl 4", set_u8(f, 14, 0x44)));
        v.push(("version 6 in an IPv4 ethertype", set_u8(f, 14, 0x65)));
    }
    if tcp {
        v.push(("data offset 4", set_u8(f, l4 + 12, 0x40)));
        v.push(("data offset beyond segment", set_u8(f, l4 + 12, 0xf0)));
        v.push(("syn", set_u8(f, l4 + 13, SYN | ACK)));
        v.push(("fin", set_u8(f, l4 + 13, FIN | ACK)));
        v.push(("rst", set_u8(f, l4 + 13, RST | ACK)));
        v.push(("no ack", set_u8(f, l4 + 13, PSH)));
    } else {
        let ulen = u16::from_be_bytes([f[l4 + 4], f[l4 + 5]]);
        v.push(("udp length beyond segment", set_u16(f, l4 + 4, ulen + 1)));
        v.push(("udp length below 8", set_u16(f, l4 + 4, 7)));
    }
    v
}

/// Variants that change nothing the firewall looks at, so they stay on
/// the raw fast path and get the same verdict: link padding, DF, a wrong
/// IP checksum, TTL 0, a wrong transport checksum.
fn on_path_variants(f: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let v6 = f[12..14] == [0x86, 0xdd];
    let l4 = if v6 { 54 } else { 34 };
    let tcp = f[if v6 { 20 } else { 23 }] == 6;
    let csum = l4 + if tcp { 16 } else { 6 };
    let mut v = vec![
        ("padding", [f, &[0u8; 10][..]].concat()),
        ("transport checksum", set_u16(f, csum, 0x1234)),
    ];
    if v6 {
        v.push(("hop limit 0", set_u8(f, 21, 0)));
    } else {
        v.push(("dont fragment", set_u8(f, 20, 0x40)));
        v.push(("ip checksum", set_u16(f, 24, 0xbeef)));
        v.push(("ttl 0", set_u8(f, 22, 0)));
    }
    v
}

/// Every off-path variant of a tracked connection's packet misses the raw
/// fast path and is decided exactly as the full path decides it (the
/// same decision or the same parse error, the same table); every on-path
/// variant and the plain packets hit it, with the same outcome too.
#[test]
fn only_the_common_shape_is_decided_from_raw_bytes() {
    for [out, back] in connections() {
        let mut cases: Vec<(&str, Vec<u8>, bool)> = Vec::new();
        for f in [&out, &back] {
            cases.push(("plain", f.clone(), true));
            cases.extend(off_path_variants(f).into_iter().map(|(n, g)| (n, g, false)));
            cases.extend(on_path_variants(f).into_iter().map(|(n, g)| (n, g, true)));
        }
        for (name, f, raw) in cases {
            // A fresh pair per case: some variants (FIN, RST) change the
            // connection's state.
            let (mut fw, mut twin) = (accept_all(), accept_all());
            assert_eq!(
                fw.decide_frame(&out, 0, ID, S),
                Ok(Decision::New { rule: None })
            );
            assert_eq!(full(&mut twin, &out, S), Ok(Decision::New { rule: None }));
            let now = 2 * S;
            // Whether the raw path takes it, asked of a third copy: a
            // segment applied twice does not update a connection as once
            // (the first reply seen, then assured).
            let mut probe = accept_all();
            assert!(probe.decide_frame(&out, 0, ID, S).is_ok());
            let zone = probe.zone_of(0);
            let hit = probe
                .conntrack_mut()
                .classify_frame(&f, zone, ID, now, false)
                .is_some();
            assert_eq!(hit, raw, "{name}: {f:02x?}");
            // A hit updated the entry already; deciding again at the same
            // time updates it the same way.
            let got = fw.decide_frame(&f, 0, ID, now);
            let want = full(&mut twin, &f, now);
            assert_eq!(got, want, "{name}");
            let bad_csum =
                parse(&f).is_ok_and(|h| sluice_packet::verify_checksums(&f, &h).is_err());
            if raw && bad_csum {
                // Read from raw bytes too, and INVALID for the checksum.
                let bad = Decision::Drop {
                    reason: sluice_nfs::firewall::CHECKSUM,
                    rule: None,
                };
                assert_eq!(got, Ok(bad), "{name}");
            } else if raw {
                assert_eq!(got, Ok(Decision::Established), "{name}");
            }
            assert_eq!(table(&fw), table(&twin), "{name}");
        }
    }
}

/// The same frames through the NF's `process` (the harness gives them
/// flow ids): established packets of the common shape and with a VLAN
/// tag or IP options pass, a fragment is dropped as `fragment`, truncated
/// and bad-length frames as malformed with the parse error, and the
/// counters add up.
#[test]
fn process_decides_off_path_frames_as_before() {
    let mut fw = accept_all();
    let mut h = Harness::new();
    let c = "10.0.0.1";
    let sv = "10.0.0.2";
    let syn = tcp_seg(c, 4000, sv, 80, SYN, 0, 0, b"");
    let syn_ack = tcp_seg(sv, 80, c, 4000, SYN | ACK, 0, 1, b"");
    let ack = tcp_seg(c, 4000, sv, 80, ACK, 1, 1, b"");
    let out = h.run(&mut fw, &[syn, syn_ack, ack.clone()]);
    assert!(out.iter().all(|o| o.verdict == Verdict::Next));
    let mut frag = set_u8(&ack, 20, 0x20);
    frag[24..26].copy_from_slice(&[0, 0]);
    let c = sluice_packet::checksum::checksum(&frag[14..34]);
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    let short = ack[..40].to_vec();
    let long_total = set_u16(&ack, 16, 41);
    let bad_offset = set_u8(&ack, 34 + 12, 0x40);
    let frames = [
        ack.clone(),
        with_vlan(&ack),
        with_ipv4_options(&ack),
        frag.clone(),
        short.clone(),
        long_total.clone(),
        bad_offset.clone(),
        set_u16(&ack, 24, 0xbeef),
    ];
    let verdicts: Vec<Verdict> = h
        .run(&mut fw, &frames)
        .into_iter()
        .map(|o| o.verdict)
        .collect();
    let malformed = |f: &[u8]| Verdict::Drop(DropReason::malformed(parse(f).unwrap_err()));
    assert_eq!(
        verdicts,
        [
            Verdict::Next,
            Verdict::Next,
            Verdict::Next,
            // The fragment is held for reassembly (out of the batch).
            malformed(&short),
            malformed(&long_total),
            malformed(&bad_offset),
            Verdict::Drop(sluice_nfs::firewall::CHECKSUM),
        ]
    );
    // 2 (SYN/ACK, ACK) + 3 established passes after the SYN's NEW.
    assert_eq!(h.counter(counters::NEW), 1);
    assert_eq!(h.counter(counters::ESTABLISHED), 5);
    assert_eq!(h.counter(counters::ACCEPTED), 6);
    assert_eq!(h.counter(counters::BAD_CHECKSUM), 1);
    assert_eq!(h.counter(counters::FRAG_HELD), 1);
    // Never completed: dropped as `fragment` at shutdown.
    h.stop(&mut fw);
    let left = h.take_emitted();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].verdict, Verdict::Drop(FRAGMENT));
    assert_eq!(left[0].frame, frag);
    assert_eq!(fw.conntrack().len(), 1);
}

/// A VLAN-tagged connection: the raw path never takes it, the
/// header-based fast path still does (after the parse), both ways.
#[test]
fn vlan_tagged_connections_still_take_the_parsed_fast_path() {
    let spec = |src: &str, sp: u16, dst: &str, dp: u16, flags: u8| FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: Some(9),
        src_ip: src.parse().unwrap(),
        dst_ip: dst.parse().unwrap(),
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: sp,
            dst_port: dp,
            seq: 1,
            ack: 1,
            flags: TcpFlags::from_bits(flags),
            window: 100,
        },
    };
    let build = |s: FrameSpec| {
        let mut b = vec![0u8; s.header_len()];
        let n = sluice_packet::write_frame(&mut b, &s, b"").unwrap();
        b.truncate(n);
        b
    };
    let mut fw = accept_all();
    let syn = build(spec("10.0.0.1", 1, "10.0.0.2", 2, SYN));
    let back = build(spec("10.0.0.2", 2, "10.0.0.1", 1, ACK));
    assert_eq!(
        fw.decide_frame(&syn, 0, ID, S),
        Ok(Decision::New { rule: None })
    );
    assert_eq!(
        fw.conntrack_mut()
            .classify_frame(&back, 0, ID, 2 * S, false),
        None
    );
    let h = parse(&back).unwrap();
    assert!(fw
        .conntrack_mut()
        .classify_cached(&back, &h, 0, ID, 2 * S)
        .is_some());
    assert_eq!(
        fw.decide_frame(&back, 0, ID, 2 * S),
        Ok(Decision::Established)
    );
}

/// Header bytes of a base frame changed at random.
fn mutated() -> impl Strategy<Value = (usize, bool, Vec<u8>)> {
    (
        0..4usize,
        any::<bool>(),
        prop::collection::vec((0..80usize, any::<u8>()), 0..4),
        prop::option::of(0..90usize),
        0..12usize,
    )
        .prop_map(|(conn, reply, muts, cut, pad)| {
            let [out, back] = connections().swap_remove(conn);
            let mut f = if reply { back } else { out };
            for (at, b) in muts {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            if let Some(n) = cut {
                f.truncate(n);
            }
            f.resize(f.len() + pad, 0);
            (conn, reply, f)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Over tracked connections' packets with random header bytes,
    /// truncations and padding, `decide_frame` with the connections' flow
    /// ids decides exactly as parse + the full path without flow ids, and
    /// both end with the same table.
    #[test]
    fn raw_and_full_paths_agree_on_mutated_frames(
        frames in prop::collection::vec(mutated(), 1..24),
    ) {
        let (mut fw, mut twin) = (accept_all(), accept_all());
        let conns = connections();
        for (i, [out, _]) in conns.iter().enumerate() {
            prop_assert_eq!(fw.decide_frame(out, 0, i as u32, S), full(&mut twin, out, S));
        }
        let mut now = 2 * S;
        for (conn, _, f) in frames {
            now += S / 4;
            let a = fw.decide_frame(&f, 0, conn as u32, now);
            let b = full(&mut twin, &f, now);
            prop_assert_eq!(a, b, "{:02x?}", f);
            prop_assert_eq!(table(&fw), table(&twin));
        }
    }
}

/// The verdict `process` gives a packet the full path decides as `d`
/// (this file's configs have no reject rules).
fn verdict_of(d: Result<Decision, ParseError>) -> Verdict {
    match d {
        Err(e) => Verdict::Drop(DropReason::malformed(e)),
        Ok(Decision::Drop { reason, .. }) => Verdict::Drop(reason),
        Ok(_) => Verdict::Next,
    }
}

/// A tracked connection's packet, mutated as [`mutated`] does, or with its
/// TCP flags set to one of the combinations that move a connection
/// between states (SYN, SYN/ACK, FIN, RST, bare and URG ACKs, none), so
/// packets of the common shape meet connections in every state.
fn mutated_or_reflagged() -> impl Strategy<Value = (usize, bool, Vec<u8>)> {
    const FLAGS: [u8; 10] = [
        ACK,
        ACK | PSH,
        ACK | 0x20,
        ACK | 0xc0,
        SYN,
        SYN | ACK,
        FIN | ACK,
        RST,
        RST | ACK,
        0,
    ];
    prop_oneof![
        mutated(),
        (0..4usize, any::<bool>(), 0..FLAGS.len()).prop_map(|(conn, reply, fl)| {
            let [out, back] = connections().swap_remove(conn);
            let mut f = if reply { back } else { out };
            let v6 = f[12..14] == [0x86, 0xdd];
            let l4 = if v6 { 54 } else { 34 };
            if f[if v6 { 20 } else { 23 }] == 6 {
                f[l4 + 13] = FLAGS[fl];
            }
            (conn, reply, f)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Through the NF's `process` (batches of 1 to 80 packets, so several
    /// of its chunks, a packet's connection changed by an earlier packet
    /// of the same batch, expiry between batches), over tracked
    /// connections' packets with random header bytes or state-changing
    /// flags: every verdict is the one parse + the full path without flow
    /// ids gives, packet by packet in the same order, both end with the
    /// same table, and the counters add up to the full path's decisions.
    #[test]
    fn process_and_full_paths_agree_on_mutated_batches(
        batches in prop::collection::vec(
            prop::collection::vec(mutated_or_reflagged(), 1..80), 1..6),
    ) {
        let (mut fw, mut twin) = (accept_all(), accept_all());
        let mut h = Harness::new();
        let conns = connections();
        let opening: Vec<Vec<u8>> = conns.iter().map(|[out, _]| out.clone()).collect();
        h.set_now_ns(S);
        let got = h.run(&mut fw, &opening);
        for (o, f) in got.iter().zip(&opening) {
            prop_assert_eq!(o.verdict, verdict_of(full(&mut twin, f, S)));
        }
        // `process` ends with a sweep of 64 slab positions; so does the twin.
        twin.conntrack_mut().sweep(S, 64);
        let mut now = S;
        // The openings were new and passed.
        let mut tally = Tally {
            new: conns.len() as u64,
            passed: conns.len() as u64,
            ..Tally::default()
        };
        for batch in batches {
            now += 3 * S;
            h.set_now_ns(now);
            let frames: Vec<Vec<u8>> = batch.into_iter().map(|(_, _, f)| f).collect();
            let got = h.run(&mut fw, &frames);
            // Fragments are held for reassembly: they leave the batch. An
            // atomic one completes at once and is judged after the batch's
            // packets, as the NF does, and emitted apart (not in `got`).
            let decided: Vec<_> = frames.iter().map(|f| (f, full(&mut twin, f, now))).collect();
            let atomic: Vec<Vec<u8>> = decided
                .iter()
                .filter(|(_, d)| *d == Ok(Decision::Fragment))
                .filter_map(|(f, _)| atomic_datagram(f))
                .collect();
            let kept: Vec<_> = decided
                .into_iter()
                .filter(|(_, d)| *d != Ok(Decision::Fragment))
                .collect();
            prop_assert_eq!(got.len(), kept.len());
            for (o, (f, d)) in got.iter().zip(kept) {
                tally.add(d);
                prop_assert_eq!(o.verdict, verdict_of(d), "{:02x?}", f);
            }
            for g in &atomic {
                tally.add(full(&mut twin, g, now));
            }
            twin.conntrack_mut().sweep(now, 64);
            prop_assert_eq!(table(&fw), table(&twin));
        }
        prop_assert_eq!(h.counter(counters::ESTABLISHED), tally.established);
        prop_assert_eq!(h.counter(counters::NEW), tally.new);
        prop_assert_eq!(h.counter(counters::INVALID), tally.invalid);
        prop_assert_eq!(h.counter(counters::ACCEPTED), tally.passed);
    }
}
