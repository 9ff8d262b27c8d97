//! The firewall's established fast path (`Conntrack::classify_cached`):
//! taken for ACK-class TCP segments and UDP datagrams of the connection
//! the platform flow id points at, and for nothing else; invalidated when
//! the entry expires, is removed or reused, or the packet's tuple or zone
//! differs; and indistinguishable from the full path in decisions and in
//! the connection table over random traffic.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use proptest::prelude::*;
use serde_json::json;
use sluice_nfs::conntrack::{Classified, Entry, TcpState};
use sluice_nfs::firewall::{Decision, Firewall, INVALID};
use sluice_packet::{flow_key, parse};

const S: u64 = 1_000_000_000;
const C: &str = "10.0.0.1";
const SV: &str = "10.0.0.2";
/// The flow id every test gives its connection.
const ID: u32 = 5;

fn decide(fw: &mut Firewall, f: &[u8], port: u16, id: u32, now: u64) -> Decision {
    fw.decide(f, &parse(f).unwrap(), port, id, now)
}

/// The fast path's answer alone, in zone 0.
fn fast(fw: &mut Firewall, f: &[u8], id: u32, now: u64) -> Option<Classified> {
    let zone = fw.zone_of(0);
    fw.conntrack_mut()
        .classify_cached(f, &parse(f).unwrap(), zone, id, now)
}

fn entry_of(fw: &Firewall, f: &[u8], now: u64) -> Option<Entry> {
    fw.conntrack()
        .lookup(0, &flow_key(f).unwrap(), now)
        .copied()
}

fn accept_all() -> Firewall {
    firewall(json!({ "default": "accept", "timeouts": { "tcp_established": 10, "udp": 5 } }))
}

/// An established connection C:4000 <-> SV:80 on flow id `ID`, opened at
/// 1 s.
fn established(fw: &mut Firewall) -> [Vec<u8>; 2] {
    let out = tcp_seg(C, 4000, SV, 80, ACK | PSH, 1, 1, b"data");
    let back = tcp_seg(SV, 80, C, 4000, ACK, 1, 5, b"");
    assert_eq!(
        decide(fw, &tcp_seg(C, 4000, SV, 80, SYN, 0, 0, b""), 0, ID, S),
        Decision::New { rule: None }
    );
    let sa = tcp_seg(SV, 80, C, 4000, SYN | ACK, 0, 1, b"");
    assert_eq!(decide(fw, &sa, 0, ID, S), Decision::Established);
    assert_eq!(decide(fw, &out, 0, ID, S), Decision::Established);
    assert_eq!(
        entry_of(fw, &out, S).map(|e| TcpState::from_u8(e.proto_state)),
        Some(TcpState::Established)
    );
    [out, back]
}

#[test]
fn ack_segments_of_the_cached_connection_take_the_fast_path_both_ways() {
    let mut fw = accept_all();
    let [out, back] = established(&mut fw);
    let before = entry_of(&fw, &out, S).unwrap();
    let t = 3 * S;
    let Some(Classified::Tracked { entry, reply }) = fast(&mut fw, &back, ID, t) else {
        panic!("reply ACK missed the fast path");
    };
    assert!(reply);
    assert!(matches!(
        fast(&mut fw, &out, ID, t),
        Some(Classified::Tracked { entry: e, reply: false }) if e == entry
    ));
    // Same update as the full path: state kept, timer refreshed to the
    // ESTABLISHED timeout, reply seen.
    let after = entry_of(&fw, &out, t).unwrap();
    assert_eq!(after.proto_state, TcpState::Established as u8);
    assert_eq!(after.expires_ns, t + 10 * S);
    assert_eq!(
        after.flags,
        before.flags | sluice_nfs::conntrack::SEEN_REPLY
    );
    assert_eq!(decide(&mut fw, &back, 0, ID, t), Decision::Established);
}

#[test]
fn syn_fin_rst_and_other_protocols_take_the_full_path() {
    let mut fw = accept_all();
    let [out, back] = established(&mut fw);
    for flags in [SYN, SYN | ACK, FIN | ACK, RST, RST | ACK, FIN, 0, PSH] {
        let f = tcp_seg(C, 4000, SV, 80, flags, 2, 2, b"");
        assert_eq!(fast(&mut fw, &f, ID, 2 * S), None, "flags {flags:#x}");
    }
    assert_eq!(fast(&mut fw, &ping(C, SV, 4000, false), ID, 2 * S), None);
    // So the state machine still sees them: FIN, ACK of it, FIN back,
    // last ACK (the ACKs may go the fast way; the states are Linux's).
    let steps = [
        (
            tcp_seg(C, 4000, SV, 80, FIN | ACK, 5, 1, b""),
            TcpState::FinWait,
        ),
        (
            tcp_seg(SV, 80, C, 4000, ACK, 1, 6, b""),
            TcpState::CloseWait,
        ),
        (
            tcp_seg(SV, 80, C, 4000, FIN | ACK, 1, 6, b""),
            TcpState::LastAck,
        ),
        (tcp_seg(C, 4000, SV, 80, ACK, 6, 2, b""), TcpState::TimeWait),
    ];
    for (f, want) in steps {
        assert_eq!(decide(&mut fw, &f, 0, ID, 2 * S), Decision::Established);
        assert_eq!(
            entry_of(&fw, &out, 2 * S).map(|e| TcpState::from_u8(e.proto_state)),
            Some(want)
        );
    }
    // TIME_WAIT: 120 s by default, refreshed by the last ACK.
    assert_eq!(entry_of(&fw, &out, 2 * S).unwrap().expires_ns, 122 * S);
    // An RST closes it through the full path.
    let rst = tcp_seg(SV, 80, C, 4000, RST, 1, 0, b"");
    assert_eq!(decide(&mut fw, &rst, 0, ID, 3 * S), Decision::Established);
    assert_eq!(
        entry_of(&fw, &back, 3 * S).map(|e| TcpState::from_u8(e.proto_state)),
        Some(TcpState::Close)
    );
}

#[test]
fn an_ack_the_state_forbids_is_invalid_on_the_fast_path_too() {
    let mut fw = firewall(json!({ "default": "accept" }));
    assert_eq!(
        decide(&mut fw, &tcp_seg(C, 1, SV, 2, SYN, 0, 0, b""), 0, ID, S),
        Decision::New { rule: None }
    );
    // SYN_SENT: an ACK from the originator is invalid (Linux sIV), and
    // the entry is left alone.
    let ack = tcp_seg(C, 1, SV, 2, ACK, 1, 1, b"");
    let before = entry_of(&fw, &ack, S).unwrap();
    assert_eq!(
        fast(&mut fw, &ack, ID, 2 * S),
        Some(Classified::Invalid(
            sluice_nfs::conntrack::Invalid::TcpState
        ))
    );
    assert_eq!(
        decide(&mut fw, &ack, 0, ID, 2 * S),
        Decision::Drop {
            reason: INVALID,
            rule: None
        }
    );
    assert_eq!(entry_of(&fw, &ack, 2 * S), Some(before));
    // From the responder it is ignored: passes, timer not refreshed (a
    // reply was seen, as Linux notes for any packet it lets through).
    let back = tcp_seg(SV, 2, C, 1, ACK, 1, 1, b"");
    assert_eq!(decide(&mut fw, &back, 0, ID, 2 * S), Decision::Established);
    let seen = Entry {
        flags: before.flags | sluice_nfs::conntrack::SEEN_REPLY,
        ..before
    };
    assert_eq!(entry_of(&fw, &ack, 2 * S), Some(seen));
}

#[test]
fn an_expired_entry_is_never_hit_and_is_replaced() {
    let mut fw = accept_all();
    let [out, _] = established(&mut fw);
    // ESTABLISHED timeout 10 s from 1 s: at 11 s it has expired.
    assert_eq!(fast(&mut fw, &out, ID, 11 * S), None);
    // The full path drops the old entry and, with tcp_loose, picks the
    // mid-stream ACK up as a NEW connection.
    assert_eq!(
        decide(&mut fw, &out, 0, ID, 11 * S),
        Decision::New { rule: None }
    );
    let e = entry_of(&fw, &out, 11 * S).unwrap();
    assert_eq!(e.created_ns, 11 * S);
    assert_eq!(fw.conntrack().len(), 1);
}

#[test]
fn a_removed_entry_reused_by_another_connection_is_not_hit() {
    let mut fw = firewall(json!({ "default": "accept", "timeouts": { "udp": 5 } }));
    let a = udp(C, 1000, SV, 53);
    let b = udp(C, 1001, SV, 53);
    assert_eq!(decide(&mut fw, &a, 0, ID, S), Decision::New { rule: None });
    let slot = fw.conntrack().table().iter().next().unwrap().0;
    // A expires and is swept; B (another flow id) takes the same slab
    // entry while A's flow id still points there.
    fw.conntrack_mut().sweep(10 * S, usize::MAX);
    assert!(fw.conntrack().is_empty());
    assert_eq!(
        decide(&mut fw, &b, 0, ID + 1, 10 * S),
        Decision::New { rule: None }
    );
    assert_eq!(fw.conntrack().table().iter().next().unwrap().0, slot);
    let b_before = entry_of(&fw, &b, 10 * S).unwrap();
    // A's next datagram on its old flow id: tuple mismatch, full path,
    // a NEW connection of its own; B's entry untouched.
    assert_eq!(fast(&mut fw, &a, ID, 11 * S), None);
    assert_eq!(
        decide(&mut fw, &a, 0, ID, 11 * S),
        Decision::New { rule: None }
    );
    assert_eq!(entry_of(&fw, &b, 11 * S), Some(b_before));
    assert_eq!(fw.conntrack().len(), 2);
    // A's flow id now points at A's new entry: fast again.
    assert!(matches!(
        fast(&mut fw, &a, ID, 12 * S),
        Some(Classified::Tracked { reply: false, .. })
    ));
}

#[test]
fn flow_end_and_reset_clear_the_hint() {
    let mut fw = accept_all();
    let [out, _] = established(&mut fw);
    fw.conntrack_mut().flow_end(ID);
    assert_eq!(fast(&mut fw, &out, ID, 2 * S), None);
    // The connection itself is still tracked (hashed lookup), and the
    // full path points the flow id at it again.
    assert_eq!(decide(&mut fw, &out, 0, ID, 2 * S), Decision::Established);
    assert!(fast(&mut fw, &out, ID, 2 * S).is_some());
    sluice_nf::NetworkFunction::reset(&mut fw);
    assert_eq!(fast(&mut fw, &out, ID, 2 * S), None);
}

#[test]
fn another_tuple_or_zone_on_the_same_flow_id_falls_back() {
    let mut fw = firewall(json!({
        "default": "accept",
        "zones": [{ "port": 1, "zone": 7 }],
    }));
    let [out, _] = established(&mut fw);
    let before = entry_of(&fw, &out, S).unwrap();
    // Each differs from the cached tuple in one field (or is IPv6).
    let others = [
        tcp_seg("10.0.0.3", 4000, SV, 80, ACK, 1, 1, b""),
        tcp_seg(C, 4000, "10.0.0.3", 80, ACK, 1, 1, b""),
        tcp_seg(C, 4001, SV, 80, ACK, 1, 1, b""),
        tcp_seg(C, 4000, SV, 81, ACK, 1, 1, b""),
        tcp_seg(SV, 4000, C, 80, ACK, 1, 1, b""),
        udp(C, 4000, SV, 80),
        tcp_seg(
            "::ffff:10.0.0.1",
            4000,
            "::ffff:10.0.0.2",
            80,
            ACK,
            1,
            1,
            b"",
        ),
    ];
    // The same tuple from a port in zone 7 is another connection.
    assert_eq!(
        decide(&mut fw, &out, 1, ID, 2 * S),
        Decision::New { rule: None }
    );
    for f in &others {
        // Point the flow id back at `out`'s entry (a full-path hit does).
        assert_eq!(decide(&mut fw, &out, 0, ID, 2 * S), Decision::Established);
        assert!(fast(&mut fw, &out, ID, 2 * S).is_some());
        assert_eq!(fast(&mut fw, f, ID, 2 * S), None);
        assert_eq!(
            decide(&mut fw, f, 0, ID, 2 * S),
            Decision::New { rule: None }
        );
    }
    let after = entry_of(&fw, &out, 2 * S).unwrap();
    // `out`'s 4 bytes were never acknowledged: Linux's UNACK timeout
    // (300 s), not ESTABLISHED's 5 days.
    let est = 300 * S;
    assert_eq!(
        after,
        Entry {
            expires_ns: 2 * S + est,
            ..before
        }
    );
    assert_eq!(fw.conntrack().len(), 1 + others.len() + 1);
}

#[derive(Debug, Clone)]
enum Step {
    /// Packet of connection `conn` with `flags` (TCP) / a datagram (UDP),
    /// in the reply direction if `reply`, from ingress port `port`.
    Packet {
        conn: usize,
        reply: bool,
        flags: u8,
        port: u16,
    },
    /// Time passes.
    Wait(u64),
    /// The platform gives a connection another flow id (reuse).
    Renumber { conn: usize, id: u32 },
    /// The periodic sweep.
    Sweep,
    /// The platform ends a flow id.
    FlowEnd(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0..6usize, any::<bool>(), prop::sample::select(vec![
            SYN, SYN | ACK, ACK, ACK | PSH, ACK | PSH | 0x20, FIN | ACK, RST, RST | ACK, FIN, 0,
        ]), 0..2u16)
            .prop_map(|(conn, reply, flags, port)| Step::Packet { conn, reply, flags, port }),
        2 => prop::sample::select(vec![S / 2, 3 * S, 20 * S, 70 * S, 200 * S]).prop_map(Step::Wait),
        1 => (0..6usize, 0..8u32).prop_map(|(conn, id)| Step::Renumber { conn, id }),
        1 => Just(Step::Sweep),
        1 => (0..8u32).prop_map(Step::FlowEnd),
    ]
}

/// Connection `c`'s packet: TCP for even `c`, UDP for odd; IPv6 for
/// `c >= 4`; connections 0 and 2 share addresses with different ports.
fn packet(c: usize, reply: bool, flags: u8) -> Vec<u8> {
    let (a, b) = if c >= 4 {
        ("fd00::1", "fd00::2")
    } else {
        ("10.0.0.1", "10.0.0.2")
    };
    let (cp, sp) = (1000 + c as u16, 80);
    let (src, dst, s, d) = if reply {
        (b, a, sp, cp)
    } else {
        (a, b, cp, sp)
    };
    if c % 2 == 0 {
        tcp_seg(src, s, dst, d, flags, 1, 1, b"")
    } else {
        udp(src, s, dst, d)
    }
}

fn table(fw: &Firewall) -> Vec<(u32, Entry)> {
    fw.conntrack()
        .table()
        .iter()
        .map(|(i, e)| (i, *e))
        .collect()
}

proptest! {
    /// With flow ids (fast path wherever it applies, stale and reused ids
    /// included) and without (`u32::MAX`: always the full path), the
    /// firewall decides every packet the same way and ends with the same
    /// table, entry for entry.
    #[test]
    fn fast_and_full_paths_agree(steps in prop::collection::vec(step(), 1..120)) {
        let cfg = json!({
            "default": "accept",
            "capacity": 4,
            "zones": [{ "port": 1, "zone": 3 }],
            "timeouts": { "tcp_established": 60, "udp": 10, "udp_stream": 30 },
            "rules": [{ "action": "drop", "proto": "udp", "dst_port": 80, "src": "fd00::1" }],
        });
        let (mut with_ids, mut without) = (firewall(cfg.clone()), firewall(cfg));
        let mut ids: Vec<u32> = (0..6).collect();
        let mut now = S;
        for s in steps {
            match s {
                Step::Packet { conn, reply, flags, port } => {
                    let f = packet(conn, reply, flags);
                    let a = decide(&mut with_ids, &f, port, ids[conn], now);
                    let b = decide(&mut without, &f, port, u32::MAX, now);
                    prop_assert_eq!(a, b);
                }
                Step::Wait(d) => now += d,
                Step::Renumber { conn, id } => ids[conn] = id,
                Step::Sweep => {
                    with_ids.conntrack_mut().sweep(now, 2);
                    without.conntrack_mut().sweep(now, 2);
                }
                Step::FlowEnd(id) => with_ids.conntrack_mut().flow_end(id),
            }
            prop_assert_eq!(table(&with_ids), table(&without));
        }
    }
}
