//! `firewall`: rules for NEW connections only, the Linux TCP state
//! machine and timeouts, UDP/ICMP pseudo-connections, RELATED ICMP errors,
//! zones, in-place rejects, table limits, counters and config errors.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, NetworkFunction, PortId, Verdict};
use sluice_nfs::conntrack::TcpState;
use sluice_nfs::firewall::{counters as k, Decision, Firewall};
use sluice_packet::{flow_key, parse, verify_checksums, ParseError};

const S: u64 = 1_000_000_000;

fn reason(name: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("firewall", name)))
}

fn run(h: &mut Harness, fw: &mut Firewall, frames: &[Vec<u8>]) -> Vec<Verdict> {
    h.run(fw, frames).into_iter().map(|o| o.verdict).collect()
}

fn state(fw: &Firewall, f: &[u8], now: u64) -> Option<TcpState> {
    let k = flow_key(f).unwrap();
    fw.conntrack()
        .lookup(0, &k, now)
        .map(|e| TcpState::from_u8(e.proto_state))
}

const C: &str = "10.0.0.1";
const SV: &str = "10.0.0.2";

fn web() -> serde_json::Value {
    json!({ "rules": [{ "action": "accept", "proto": "tcp", "dst_port": 80, "dst": "10.0.0.2" }] })
}

#[test]
fn descriptor() {
    let t = nf_type("firewall");
    assert_eq!(
        t.drop_reasons,
        [
            "denied",
            "invalid",
            "table_full",
            "fragment",
            "non_ip",
            "checksum",
            "frag_overlap",
            "frag_duplicate",
            "frag_timeout",
            "frag_memory"
        ]
    );
    assert_eq!(
        t.counters,
        [
            "accepted",
            "dropped",
            "rejected",
            "invalid",
            "new",
            "established",
            "related",
            "entries",
            "table_full",
            "untracked",
            "bad_checksum",
            "frag_reassembled",
            "frag_held"
        ]
    );
    assert_eq!(counter_index("firewall", "entries"), k::ENTRIES);
}

#[test]
fn tcp_handshake_data_close_follows_linux_states() {
    let mut fw = firewall(web());
    let mut h = Harness::new();
    let now = 1_000_000_000;
    use TcpState::*;
    let steps: Vec<(Vec<u8>, TcpState)> = vec![
        (tcp_seg(C, 4000, SV, 80, SYN, 100, 0, b""), SynSent),
        (tcp_seg(SV, 80, C, 4000, SYN | ACK, 500, 101, b""), SynRecv),
        (tcp_seg(C, 4000, SV, 80, ACK, 101, 501, b""), Established),
        (
            tcp_seg(C, 4000, SV, 80, ACK | PSH, 101, 501, b"GET /"),
            Established,
        ),
        (
            tcp_seg(SV, 80, C, 4000, ACK | PSH, 501, 106, b"200 OK"),
            Established,
        ),
        (tcp_seg(C, 4000, SV, 80, FIN | ACK, 106, 507, b""), FinWait),
        (tcp_seg(SV, 80, C, 4000, ACK, 507, 107, b""), CloseWait),
        (tcp_seg(SV, 80, C, 4000, FIN | ACK, 507, 107, b""), LastAck),
        (tcp_seg(C, 4000, SV, 80, ACK, 107, 508, b""), TimeWait),
    ];
    for (i, (f, want)) in steps.iter().enumerate() {
        let v = run(&mut h, &mut fw, std::slice::from_ref(f));
        assert_eq!(v, [Verdict::Next], "step {i}");
        assert_eq!(state(&fw, f, now), Some(*want), "state after step {i}");
    }
    assert_eq!(h.counter(k::NEW), 1);
    assert_eq!(h.counter(k::ESTABLISHED), 8);
    assert_eq!(h.counter(k::ACCEPTED), 9);
    assert_eq!(h.counter(k::ENTRIES), 1);
    assert_eq!(fw.rule_hits(), [1]);
    assert_eq!(h.ext_counter(0), 1, "rule 0's hits as extended counter 0");
}

#[test]
fn tick_expires_connections_without_traffic() {
    let mut fw = firewall(json!({ "default": "accept", "timeouts": { "udp": 5 } }));
    let mut h = Harness::new();
    h.set_now_ns(S);
    run(&mut h, &mut fw, &[udp(C, 1, SV, 2), udp(C, 3, SV, 4)]);
    assert_eq!(fw.tick_interval_ns(), Some(100_000_000));
    h.set_now_ns(5 * S);
    h.tick(&mut fw);
    assert_eq!(h.counter(k::ENTRIES), 2);
    h.set_now_ns(6 * S);
    h.tick(&mut fw);
    assert_eq!(h.counter(k::ENTRIES), 0);
    assert_eq!(fw.conntrack().len(), 0);
}

#[test]
fn rules_are_evaluated_for_new_connections_only() {
    // Default drop; only clients may open port 80 on the server. The
    // server's replies pass without any rule allowing them, but the server
    // cannot open a connection of its own.
    let mut fw = firewall(web());
    let mut h = Harness::new();
    let v = run(
        &mut h,
        &mut fw,
        &[
            tcp_seg(C, 4000, SV, 80, SYN, 1, 0, b""),
            tcp_seg(SV, 80, C, 4000, SYN | ACK, 9, 2, b""),
            tcp_seg(SV, 80, C, 4001, SYN, 9, 0, b""),
            udp(C, 5000, SV, 80),
        ],
    );
    assert_eq!(
        v,
        [
            Verdict::Next,
            Verdict::Next,
            reason("denied"),
            reason("denied")
        ]
    );
    assert_eq!(fw.rule_hits(), [1]);
    assert_eq!(h.counter(k::DROPPED), 2);
}

#[test]
fn udp_and_echo_pseudo_connections() {
    let mut fw = firewall(json!({ "rules": [
        { "action": "accept", "proto": "udp", "dst_port": 53 },
        { "action": "accept", "proto": "icmp", "icmp_type": 8 },
        { "action": "accept", "proto": "icmpv6", "icmp_type": 128 },
    ]}));
    let mut h = Harness::new();
    let v = run(
        &mut h,
        &mut fw,
        &[
            udp(C, 3333, SV, 53),
            udp(SV, 53, C, 3333),
            udp(SV, 53, C, 3334), // not a reply: another 5-tuple
            ping(C, SV, 7, false),
            ping(SV, C, 7, true),
            ping(SV, C, 8, true), // unsolicited reply
            ping("fd00::1", "fd00::2", 9, false),
            ping("fd00::2", "fd00::1", 9, true),
        ],
    );
    let n = Verdict::Next;
    assert_eq!(v, [n, n, reason("denied"), n, n, reason("invalid"), n, n]);
    assert_eq!(h.counter(k::NEW), 3);
    assert_eq!(h.counter(k::ESTABLISHED), 3);
    assert_eq!(h.counter(k::INVALID), 1);
}

#[test]
fn invalid_tcp_packets_are_dropped_and_counted() {
    let allow = json!({ "default": "accept", "tcp_loose": false });
    let mut fw = firewall(allow);
    let mut h = Harness::new();
    let v = run(
        &mut h,
        &mut fw,
        &[
            tcp_seg(C, 1, SV, 2, ACK, 1, 1, b""), // not a SYN, loose off
            tcp_seg(C, 1, SV, 2, SYN | FIN, 1, 0, b""), // bad flags
            tcp_seg(C, 1, SV, 2, 0, 1, 0, b""),   // no flags
            tcp_seg(C, 1, SV, 2, RST, 1, 0, b""), // RST opens nothing
            tcp_seg(C, 1, SV, 2, SYN, 1, 0, b""), // opens
            tcp_seg(C, 1, SV, 2, ACK, 2, 1, b""), // ACK before SYN/ACK
            tcp_seg(C, 1, SV, 2, FIN | ACK, 2, 1, b""), // FIN in SYN_SENT
            tcp_seg(SV, 2, C, 1, ACK, 1, 2, b""), // reply ACK: ignored, passes
            tcp_seg(SV, 2, C, 1, SYN | ACK, 7, 2, b""),
        ],
    );
    let i = reason("invalid");
    let n = Verdict::Next;
    assert_eq!(v, [i, i, i, i, n, i, i, n, n]);
    assert_eq!(h.counter(k::INVALID), 6);
    let f = tcp_seg(C, 1, SV, 2, SYN, 1, 0, b"");
    assert_eq!(state(&fw, &f, 0), Some(TcpState::SynRecv));

    // tcp_loose (the default) picks a connection up from an ACK.
    let mut fw = firewall(json!({ "default": "accept" }));
    let f = tcp_seg(C, 1, SV, 2, ACK, 1, 1, b"x");
    assert_eq!(
        run(&mut Harness::new(), &mut fw, std::slice::from_ref(&f)),
        [Verdict::Next]
    );
    assert_eq!(state(&fw, &f, 0), Some(TcpState::Established));
}

#[test]
fn linux_default_timeouts() {
    let mut fw = firewall(json!({ "default": "accept", "tcp_loose": false }));
    let mut h = Harness::new();
    let t0 = 10 * S;
    h.set_now_ns(t0);
    let syn = tcp_seg(C, 9, SV, 80, SYN, 1, 0, b"");
    let synack = tcp_seg(SV, 80, C, 9, SYN | ACK, 5, 2, b"");
    run(&mut h, &mut fw, std::slice::from_ref(&syn));
    // SYN_SENT lives 120 s.
    assert!(fw
        .conntrack()
        .lookup(0, &flow_key(&syn).unwrap(), t0 + 119 * S)
        .is_some());
    assert!(fw
        .conntrack()
        .lookup(0, &flow_key(&syn).unwrap(), t0 + 120 * S)
        .is_none());
    h.set_now_ns(t0 + 121 * S);
    assert_eq!(
        run(&mut h, &mut fw, std::slice::from_ref(&synack)),
        [reason("invalid")]
    );

    // ESTABLISHED lives 5 days.
    let est = tcp_seg(C, 10, SV, 80, SYN, 1, 0, b"");
    h.set_now_ns(t0);
    run(
        &mut h,
        &mut fw,
        &[
            est.clone(),
            tcp_seg(SV, 80, C, 10, SYN | ACK, 5, 2, b""),
            tcp_seg(C, 10, SV, 80, ACK, 2, 6, b""),
        ],
    );
    let key = flow_key(&est).unwrap();
    assert!(fw
        .conntrack()
        .lookup(0, &key, t0 + 5 * 86400 * S - 1)
        .is_some());
    assert!(fw.conntrack().lookup(0, &key, t0 + 5 * 86400 * S).is_none());

    // UDP: 30 s unreplied; replied for 2 s or more it is a stream (120 s).
    let q = udp(C, 1000, SV, 53);
    let r = udp(SV, 53, C, 1000);
    h.set_now_ns(t0);
    run(&mut h, &mut fw, std::slice::from_ref(&q));
    let uk = flow_key(&q).unwrap();
    assert!(fw.conntrack().lookup(0, &uk, t0 + 30 * S).is_none());
    h.set_now_ns(t0 + 3 * S);
    run(&mut h, &mut fw, std::slice::from_ref(&r));
    assert!(fw
        .conntrack()
        .lookup(0, &uk, t0 + 3 * S + 119 * S)
        .is_some());
    assert!(fw
        .conntrack()
        .lookup(0, &uk, t0 + 3 * S + 120 * S)
        .is_none());

    // ICMP echo: 30 s.
    let p = ping(C, SV, 77, false);
    h.set_now_ns(t0);
    run(&mut h, &mut fw, std::slice::from_ref(&p));
    let pk = flow_key(&p).unwrap();
    assert!(fw.conntrack().lookup(0, &pk, t0 + 29 * S).is_some());
    assert!(fw.conntrack().lookup(0, &pk, t0 + 30 * S).is_none());
}

#[test]
fn configured_timeouts_and_reopening_after_time_wait() {
    let mut fw = firewall(json!({
        "tcp_loose": false,
        "timeouts": { "tcp_established": 10, "tcp_time_wait": 1.5 },
        "rules": [{ "action": "accept", "proto": "tcp" }],
    }));
    let mut h = Harness::new();
    h.set_now_ns(S);
    let open = [
        tcp_seg(C, 5, SV, 80, SYN, 1, 0, b""),
        tcp_seg(SV, 80, C, 5, SYN | ACK, 5, 2, b""),
        tcp_seg(C, 5, SV, 80, ACK, 2, 6, b""),
    ];
    run(&mut h, &mut fw, &open);
    h.set_now_ns(12 * S);
    // Idle for 11 s > 10 s: gone, and a mid-stream ACK cannot reopen it.
    assert_eq!(
        run(&mut h, &mut fw, &[tcp_seg(C, 5, SV, 80, ACK, 2, 6, b"x")]),
        [reason("invalid")]
    );

    // Close, then a new SYN on the same tuple in TIME_WAIT is a NEW
    // connection again (rule scan), as Linux re-creates it.
    run(&mut h, &mut fw, &open);
    run(
        &mut h,
        &mut fw,
        &[
            tcp_seg(C, 5, SV, 80, FIN | ACK, 2, 6, b""),
            tcp_seg(SV, 80, C, 5, FIN | ACK, 6, 3, b""),
            tcp_seg(C, 5, SV, 80, ACK, 3, 7, b""),
        ],
    );
    assert_eq!(state(&fw, &open[0], 12 * S), Some(TcpState::TimeWait));
    assert!(fw
        .conntrack()
        .lookup(0, &flow_key(&open[0]).unwrap(), 12 * S + 3 * S / 2)
        .is_none());
    let hits = fw.rule_hits()[0];
    assert_eq!(run(&mut h, &mut fw, &open[..1]), [Verdict::Next]);
    assert_eq!(fw.rule_hits()[0], hits + 1);
    assert_eq!(state(&fw, &open[0], 12 * S), Some(TcpState::SynSent));
}

#[test]
fn icmp_errors_of_tracked_connections_are_related() {
    let mut fw = firewall(
        json!({ "rules": [{ "action": "accept", "proto": "udp" }, { "action": "accept", "proto": "tcp" }] }),
    );
    let mut h = Harness::new();
    let q = udp(C, 1000, SV, 53);
    let q6 = udp("fd00::1", 1000, "fd00::2", 53);
    let t = tcp_seg(C, 7, SV, 8, SYN, 1, 0, b"");
    let router = "10.9.9.9";
    let v = run(
        &mut h,
        &mut fw,
        &[
            q.clone(),
            q6.clone(),
            t.clone(),
            // Port unreachable from the server, TTL exceeded from a router,
            // an ICMPv6 port unreachable: all about tracked connections.
            icmp_error(SV, C, 3, 3, ip_of(&q)),
            icmp_error(router, C, 11, 0, &ip_of(&t)[..28]),
            icmp_error("fd00::2", "fd00::1", 1, 4, ip_of(&q6)),
            // About a connection nobody opened: invalid.
            icmp_error(SV, C, 3, 3, ip_of(&udp(C, 1001, SV, 53))),
            // A quote too short to carry the ports: invalid.
            icmp_error(SV, C, 3, 3, &ip_of(&q)[..22]),
        ],
    );
    let n = Verdict::Next;
    assert_eq!(v, [n, n, n, n, n, n, reason("invalid"), reason("invalid")]);
    assert_eq!(h.counter(k::RELATED), 3);
    assert_eq!(h.counter(k::INVALID), 2);
}

#[test]
fn zones_keep_tenants_with_identical_tuples_apart() {
    let mut fw = firewall(json!({
        "zones": [{ "port": 1, "zone": 7 }, { "port": "out", "zone": 0 }, { "port": 2, "zone": 8 }],
        "rules": [
            { "action": "accept", "zone": 7, "proto": "udp" },
            { "action": "drop", "in_port": 2 },
            { "action": "accept", "in_port": 3, "proto": "udp" },
        ],
    }));
    let q = udp(C, 1000, SV, 53);
    let r = udp(SV, 53, C, 1000);
    let mut go = |f: &[u8], port: u16| fw.decide(f, &parse(f).unwrap(), port, u32::MAX, S);
    // Tenant of port 1 (zone 7) opens; its reply on port 1 is established.
    assert_eq!(go(&q, 1), Decision::New { rule: Some(0) });
    assert_eq!(go(&r, 1), Decision::Established);
    // The same tuple in zone 8 (port 2) is a different connection, and
    // rule 1 (in_port 2) drops it.
    assert!(matches!(go(&r, 2), Decision::Drop { rule: Some(1), .. }));
    // Port 3 has no zone (0): a new connection there, accepted by rule 2.
    assert_eq!(go(&q, 3), Decision::New { rule: Some(2) });
    assert_eq!(go(&r, 3), Decision::Established);
    // Port 0 shares zone 0 with port 3: the same connection.
    assert_eq!(go(&r, 0), Decision::Established);
    assert_eq!(fw.conntrack().len(), 2);
}

#[test]
fn zones_and_in_port_name_input_only_ports() {
    // `gen` is the test resolver's generator: it cannot transmit, but its
    // packets come in with its index as `port_in`.
    let mut fw = firewall(json!({
        "zones": [{ "port": "gen", "zone": 5 }],
        "rules": [{ "action": "accept", "in_port": "gen", "zone": 5, "proto": "udp" }],
    }));
    let q = udp(C, 1000, SV, 53);
    let mut go = |f: &[u8], port: u16| fw.decide(f, &parse(f).unwrap(), port, u32::MAX, S);
    assert_eq!(go(&q, GEN_PORT), Decision::New { rule: Some(0) });
    assert!(matches!(go(&q, 0), Decision::Drop { rule: None, .. }));
}

#[test]
fn reject_tcp_answers_with_an_rfc_9293_reset() {
    let mut fw = firewall(json!({ "default": "reject" }));
    let mut h = Harness::new();
    let syn = tcp_seg(C, 4444, SV, 23, SYN, 1000, 0, b"");
    let data = tcp_seg("fd00::1", 4445, "fd00::2", 23, ACK | PSH, 7, 9999, b"hello");
    let rst = tcp_seg(C, 4446, SV, 23, RST | ACK, 1, 1, b"");
    let out = h.run(&mut fw, &[syn.clone(), data.clone(), rst]);
    for o in &out[..2] {
        assert_eq!(o.verdict, Verdict::ToPort(PortId(0)));
        verify_checksums(&o.frame, &parse(&o.frame).unwrap()).unwrap();
    }
    // SYN without ACK: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, SYN counts 1.
    let r = &out[0].frame;
    assert_eq!(r.len(), 14 + 20 + 20);
    assert_eq!(r[0..6], syn[6..12], "back to the sender's MAC");
    assert_eq!(r[6..12], syn[0..6]);
    assert_eq!(r[26..30], syn[30..34], "source is the original destination");
    assert_eq!(r[30..34], syn[26..30]);
    assert_eq!(r[22], 64, "TTL");
    assert_eq!(u16::from_be_bytes([r[34], r[35]]), 23);
    assert_eq!(u16::from_be_bytes([r[36], r[37]]), 4444);
    assert_eq!(u32::from_be_bytes(r[38..42].try_into().unwrap()), 0);
    assert_eq!(u32::from_be_bytes(r[42..46].try_into().unwrap()), 1001);
    assert_eq!(tcp_flags(r), RST | ACK);
    // With ACK: <SEQ=SEG.ACK><CTL=RST>.
    let r = &out[1].frame;
    assert_eq!(r.len(), 14 + 40 + 20);
    assert_eq!(r[22..38], data[38..54]);
    assert_eq!(r[38..54], data[22..38]);
    assert_eq!(u32::from_be_bytes(r[58..62].try_into().unwrap()), 9999);
    assert_eq!(u32::from_be_bytes(r[62..66].try_into().unwrap()), 0);
    assert_eq!(tcp_flags(r), RST);
    // A RST cannot open a connection: INVALID before any rule (and a RST
    // is never answered anyway, see `never_answered`).
    assert_eq!(out[2].verdict, reason("invalid"));
    assert_eq!(h.counter(k::REJECTED), 2);
    assert_eq!(
        fw.conntrack().len(),
        0,
        "rejected connections are not tracked"
    );
}

#[test]
fn reject_others_with_icmp_unreachable_quoting_the_packet() {
    let mut fw = firewall(json!({
        "default": "reject",
        "rules": [
            { "action": "reject", "proto": "udp", "dst_port": 7, "reject_with": "admin_prohibited" },
            { "action": "reject", "proto": "tcp", "dst_port": 9, "reject_with": "port_unreachable" },
        ],
    }));
    let mut h = Harness::new();
    let q = udp(C, 1000, SV, 53);
    let big = frame(
        C,
        SV,
        sluice_packet::L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        },
        &[0xab; 1000],
    );
    let adm = udp(C, 1000, SV, 7);
    let t = tcp_seg(C, 1000, SV, 9, SYN, 1, 0, b"");
    let q6 = udp("fd00::1", 1000, "fd00::2", 53);
    let adm6 = udp("fd00::1", 1000, "fd00::2", 7);
    let err = icmp_error(SV, C, 3, 3, ip_of(&q));
    let out = h.run(
        &mut fw,
        &[
            q.clone(),
            big.clone(),
            adm,
            t.clone(),
            q6.clone(),
            adm6,
            err,
        ],
    );
    for o in &out[..6] {
        assert_eq!(o.verdict, Verdict::ToPort(PortId(0)));
        verify_checksums(&o.frame, &parse(&o.frame).unwrap()).unwrap();
    }
    // IPv4: new IP header + ICMP 3/3 + the whole original IP packet.
    let r = &out[0].frame;
    assert_eq!(r.len(), 14 + 20 + 8 + ip_of(&q).len());
    assert_eq!(r[23], 1, "protocol ICMP");
    assert_eq!(r[26..30], q[30..34]);
    assert_eq!(r[30..34], q[26..30]);
    assert_eq!((r[34], r[35]), (3, 3));
    assert_eq!(&r[42..], ip_of(&q), "quotes the packet unchanged");
    // Capped at 576 bytes of IP (RFC 1812).
    let r = &out[1].frame;
    assert_eq!(r.len(), 14 + 576);
    assert_eq!(r[42..], ip_of(&big)[..548]);
    assert_eq!(
        (out[2].frame[34], out[2].frame[35]),
        (3, 13),
        "admin prohibited"
    );
    assert_eq!(
        (out[3].frame[34], out[3].frame[35]),
        (3, 3),
        "TCP with an explicit ICMP reject"
    );
    // IPv6: ICMPv6 1/4 and 1/1.
    let r = &out[4].frame;
    assert_eq!(r.len(), 14 + 40 + 8 + ip_of(&q6).len());
    assert_eq!(r[20], 58);
    assert_eq!((r[54], r[55]), (1, 4));
    assert_eq!(&r[62..], ip_of(&q6));
    assert_eq!((out[5].frame[54], out[5].frame[55]), (1, 1));
    // No ICMP error about an ICMP error: invalid here (unrelated) anyway,
    // and never answered.
    assert_eq!(out[6].verdict, reason("invalid"));
    assert_eq!(h.counter(k::REJECTED), 6);
}

#[test]
fn broadcast_and_bad_checksums_are_never_answered() {
    let mut fw = firewall(json!({ "default": "reject" }));
    let mut bcast = udp(C, 1, "255.255.255.255", 2);
    bcast[0..6].copy_from_slice(&[0xff; 6]);
    let mut bad = udp(C, 1, SV, 2);
    let n = bad.len();
    bad[n - 1] ^= 0xff; // payload changed, checksum not
    let out = run(&mut Harness::new(), &mut fw, &[bcast.clone(), bad.clone()]);
    // The bad checksum is INVALID to conntrack (`checksum`) before any
    // rule; without verification the reject still refuses to answer it.
    assert_eq!(out, [reason("denied"), reason("checksum")]);
    let mut fw = firewall(json!({ "default": "reject", "checksum": false }));
    let out = run(&mut Harness::new(), &mut fw, &[bcast, bad]);
    assert_eq!(out, [reason("denied"), reason("denied")]);
}

/// Packets from the local stack carry partial checksums (a virtio-net
/// header's `NEEDS_CSUM`, Linux `CHECKSUM_PARTIAL`) and packets a receiver
/// verified carry `DATA_VALID`: Linux conntrack does not verify those
/// (`skb_csum_unnecessary`), and neither does the firewall, on its fast
/// path (established UDP) and its full path (a new connection) alike.
#[test]
fn offloaded_checksums_are_trusted_as_linux_does() {
    use sluice_packet::gso::{Offload, F_DATA_VALID, F_NEEDS_CSUM};
    let bad = |f: Vec<u8>| {
        let mut f = f;
        let n = f.len();
        f[n - 1] ^= 0xff; // payload changed, checksum not
        f
    };
    for flags in [F_NEEDS_CSUM, F_DATA_VALID] {
        let mut fw = firewall(json!({ "default": "accept" }));
        let mut h = Harness::new();
        let o = Offload {
            flags,
            ..Offload::NONE
        };
        let frames = [
            bad(udp(C, 1, SV, 2)),
            bad(udp(SV, 2, C, 1)),
            bad(udp(C, 1, SV, 2)),
        ];
        let out: Vec<Verdict> = h
            .run_offloaded(&mut fw, &frames, &o)
            .into_iter()
            .map(|o| o.verdict)
            .collect();
        assert_eq!(out, [Verdict::Next; 3], "flags {flags}");
        // The same frames without the flag: every one fails the check.
        let out = run(&mut h, &mut fw, &frames);
        assert_eq!(out, [reason("checksum"); 3], "flags {flags}");
    }
}

#[test]
fn table_full_drops_new_connections_until_entries_expire() {
    let mut fw = firewall(json!({ "default": "accept", "capacity": 2 }));
    let mut h = Harness::new();
    h.set_now_ns(S);
    let v = run(
        &mut h,
        &mut fw,
        &[
            udp(C, 1, SV, 2),
            udp(C, 3, SV, 4),
            udp(C, 5, SV, 6),
            udp(SV, 2, C, 1),
        ],
    );
    assert_eq!(
        v,
        [
            Verdict::Next,
            Verdict::Next,
            reason("table_full"),
            Verdict::Next
        ]
    );
    assert_eq!(h.counter(k::TABLE_FULL), 1);
    assert_eq!(h.counter(k::ENTRIES), 2);
    h.set_now_ns(S + 31 * S);
    assert_eq!(run(&mut h, &mut fw, &[udp(C, 5, SV, 6)]), [Verdict::Next]);
}

#[test]
fn rule_fields_match_as_documented() {
    let mut fw = firewall(json!({ "rules": [
        { "action": "accept", "proto": "tcp", "src": "10.1.0.0/16", "src_port": "1024-65535", "dst_port": "80-81" },
        { "action": "accept", "proto": "icmp", "icmp_type": 13 },
        { "action": "accept", "dst": "2001:db8::/32", "proto": 17 },
        { "action": "drop", "proto": "udp", "dst_port": 9 },
        { "action": "accept", "proto": "udp" },
    ]}));
    let cases = [
        (tcp_seg("10.1.2.3", 2000, SV, 81, SYN, 1, 0, b""), Some(0)),
        (tcp_seg("10.1.2.3", 1000, SV, 81, SYN, 1, 0, b""), None),
        (tcp_seg("10.2.2.3", 2000, SV, 80, SYN, 1, 0, b""), None),
        (tcp_seg("10.1.2.3", 2000, SV, 82, SYN, 1, 0, b""), None),
        (udp("2001:db9::1", 1, "2001:db8::1", 9), Some(2)),
        (udp(C, 1, SV, 9), Some(3)),
        (udp(C, 1, SV, 10), Some(4)),
        (ping(C, SV, 1, false), None),
    ];
    for (f, want) in cases {
        let d = fw.decide(&f, &parse(&f).unwrap(), 0, u32::MAX, S);
        let got = match d {
            Decision::New { rule } | Decision::Drop { rule, .. } | Decision::Untracked { rule } => {
                rule
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(got, want, "{}", flow_key(&f).unwrap());
    }
    assert_eq!(fw.rule_hits(), [1, 0, 1, 1, 1]);
}

#[test]
fn untracked_icmp_goes_through_the_rules_every_time() {
    // ICMP timestamp request (13): not tracked, rule 0 decides each packet.
    let mut fw =
        firewall(json!({ "rules": [{ "action": "accept", "proto": "icmp", "icmp_type": 13 }] }));
    let mut ts = ping(C, SV, 1, false);
    ts[34] = 13;
    let c = u16::from_be_bytes([ts[36], ts[37]]);
    let c = sluice_packet::checksum::update_u16(c, 0x0800, 0x0d00);
    ts[36..38].copy_from_slice(&c.to_be_bytes());
    let mut h = Harness::new();
    assert_eq!(
        run(&mut h, &mut fw, &[ts.clone(), ts]),
        [Verdict::Next, Verdict::Next]
    );
    assert_eq!(h.counter(k::UNTRACKED), 2);
    assert_eq!(fw.rule_hits(), [2]);
    assert_eq!(fw.conntrack().len(), 0);
}

#[test]
fn non_ip_fragments_and_malformed_frames() {
    let mut fw = firewall(json!({ "default": "accept" }));
    let mut frag = udp(C, 1, SV, 2);
    let old = u16::from_be_bytes([frag[20], frag[21]]);
    frag[20..22].copy_from_slice(&0x2000u16.to_be_bytes()); // MF
    let c = u16::from_be_bytes([frag[24], frag[25]]);
    let c = sluice_packet::checksum::update_u16(c, old, 0x2000);
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    let short = udp(C, 1, SV, 2)[..30].to_vec();
    let mut h = Harness::new();
    let out = run(&mut h, &mut fw, &[arp(), frag.clone(), short]);
    // The fragment is held for reassembly (it leaves the batch); alone,
    // it never completes and is dropped when the NF stops.
    assert_eq!(
        out,
        [
            Verdict::Next,
            Verdict::Drop(DropReason::malformed(ParseError::Ipv4Truncated))
        ]
    );
    h.stop(&mut fw);
    let left = h.take_emitted();
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].verdict, &left[0].frame),
        (reason("fragment"), &frag)
    );
    let mut fw = firewall(json!({ "non_ip": "drop" }));
    assert_eq!(
        run(&mut Harness::new(), &mut fw, &[arp()]),
        [reason("non_ip")]
    );
}

#[test]
fn flow_end_and_reset() {
    let mut fw = firewall(web());
    let mut h = Harness::new();
    let syn = tcp_seg(C, 1, SV, 80, SYN, 1, 0, b"");
    run(&mut h, &mut fw, std::slice::from_ref(&syn));
    let id = h.flow_id_of(&syn).unwrap();
    // The platform ending its flow does not end the connection: conntrack
    // keeps its own timers.
    h.end_flow(&mut fw, id);
    assert_eq!(
        run(
            &mut h,
            &mut fw,
            &[tcp_seg(SV, 80, C, 1, SYN | ACK, 5, 2, b"")]
        ),
        [Verdict::Next]
    );
    fw.reset();
    assert_eq!(fw.conntrack().len(), 0);
    assert_eq!(fw.rule_hits(), [0]);
}

#[test]
fn config_errors_name_the_rule_and_field() {
    let cases = [
        (
            json!({ "rules": [{ "action": "accept" }, { "action": "drop", "dst_port": 80 }] }),
            "rules[1].dst_port",
            "proto",
        ),
        (
            json!({ "rules": [{ "action": "accept", "src": "10.0.0.0/33" }] }),
            "rules[0].src",
            "invalid prefix",
        ),
        (
            json!({ "rules": [{ "action": "reject", "proto": "udp", "reject_with": "tcp_reset" }] }),
            "rules[0].reject_with",
            "tcp_reset",
        ),
        (
            json!({ "rules": [{ "action": "accept", "reject_with": "admin_prohibited" }] }),
            "rules[0].reject_with",
            "only applies",
        ),
        (
            json!({ "rules": [{ "action": "accept", "icmp_type": 8 }] }),
            "rules[0].icmp_type",
            "proto",
        ),
        (
            json!({ "rules": [{ "action": "accept", "proto": "icmp", "icmp_type": 300 }] }),
            "rules[0].icmp_type",
            "0-255",
        ),
        (
            json!({ "rules": [{ "action": "accept", "proto": "ipx" }] }),
            "rules[0].proto",
            "unknown protocol",
        ),
        (
            json!({ "rules": [{ "action": "accept", "in_port": "nowhere" }] }),
            "rules[0].in_port",
            "unknown port",
        ),
        (
            json!({ "rules": [{ "action": "accept", "zone": 70000 }] }),
            "rules[0].zone",
            "0-65535",
        ),
        (
            json!({ "rules": [{ "action": "allow" }] }),
            "rules[0].action",
            "unknown variant",
        ),
        (
            json!({ "rules": [{ "action": "accept", "dport": 1 }] }),
            "rules[0].dport",
            "unknown field",
        ),
        (json!({ "capacity": 0 }), "capacity", "out of range"),
        (
            json!({ "timeouts": { "udp": -1 } }),
            "timeouts.udp",
            "positive",
        ),
        (
            json!({ "zones": [{ "port": 1, "zone": 1 }, { "port": 1, "zone": 2 }] }),
            "zones[1].port",
            "twice",
        ),
        (json!({ "reject_with": "tcp_reset" }), "reject_with", "ICMP"),
    ];
    for (cfg, field, msg) in cases {
        let e = build_err("firewall", cfg.clone());
        assert!(
            e.field.ends_with(field),
            "{cfg}: field {} (want {field}): {e}",
            e.field
        );
        assert!(e.to_string().contains(msg), "{cfg}: {e}");
    }
}

#[test]
fn never_answered() {
    use sluice_nfs::firewall::reject::{may_answer, Reply};
    use sluice_nfs::firewall::rules::IcmpReject;
    let icmp = Reply::Unreachable(IcmpReject::PortUnreachable);
    let q = udp(C, 1, SV, 2);
    let cases = [
        (
            tcp_seg(C, 1, SV, 2, RST | ACK, 1, 1, b""),
            Reply::TcpReset,
            false,
        ),
        (tcp_seg(C, 1, SV, 2, RST, 1, 1, b""), icmp, false),
        (icmp_error(SV, C, 3, 3, ip_of(&q)), icmp, false),
        (
            icmp_error("fd00::2", "fd00::1", 1, 4, ip_of(&q)),
            icmp,
            false,
        ),
        (udp("0.0.0.0", 68, "10.0.0.9", 67), icmp, false),
        (udp(C, 1, "224.0.0.9", 2), icmp, false),
        (udp("fd00::1", 1, "ff02::1", 2), icmp, false),
        (udp(C, 1, SV, 2), Reply::TcpReset, false),
        (udp(C, 1, SV, 2), icmp, true),
        (ping(C, SV, 1, false), icmp, true),
        (tcp_seg(C, 1, SV, 2, SYN, 1, 0, b""), Reply::TcpReset, true),
    ];
    for (i, (f, r, want)) in cases.iter().enumerate() {
        assert_eq!(may_answer(f, &parse(f).unwrap(), *r), *want, "case {i}");
    }
}

/// A live rule change (`reconfigure`) judges new connections by the new
/// rules and keeps tracked ones, as an `nft -f` does in Linux; a new
/// capacity cannot keep the table, so its connections start afresh.
#[test]
fn live_rule_changes_keep_tracked_connections() {
    let mut fw = firewall(web());
    let mut h = Harness::new();
    let open = [
        tcp_seg(C, 4000, SV, 80, SYN, 1, 0, b""),
        tcp_seg(SV, 80, C, 4000, SYN | ACK, 9, 2, b""),
        tcp_seg(C, 4000, SV, 80, ACK, 2, 10, b""),
    ];
    assert_eq!(run(&mut h, &mut fw, &open), [Verdict::Next; 3]);
    assert!(fw.live_reconfigure());
    // Port 80 closed to new connections, port 81 opened.
    let rules = |port: u16| json!({ "rules": [{ "action": "accept", "proto": "tcp", "dst_port": port, "dst": SV }] });
    fw.reconfigure(Box::new(firewall(rules(81))))
        .unwrap_or_else(|_| panic!("a firewall takes a firewall's config"));
    let v = run(
        &mut h,
        &mut fw,
        &[
            tcp_seg(C, 4000, SV, 80, ACK, 2, 10, b"data"),
            tcp_seg(C, 4002, SV, 80, SYN, 1, 0, b""),
            tcp_seg(C, 4003, SV, 81, SYN, 1, 0, b""),
        ],
    );
    assert_eq!(v, [Verdict::Next, reason("denied"), Verdict::Next]);
    assert_eq!(fw.rule_hits(), [1], "hits count from the change");
    assert_eq!(state(&fw, &open[0], S), Some(TcpState::Established));
    // Another capacity: the table is new and the old connection unknown.
    let mut bigger = rules(81);
    bigger["capacity"] = json!(1000);
    fw.reconfigure(Box::new(firewall(bigger)))
        .unwrap_or_else(|_| panic!("a firewall takes a firewall's config"));
    assert_eq!(state(&fw, &open[0], S), None);
    // Another type is given back untouched.
    let other = build("forwarder", json!({}));
    assert!(fw.reconfigure(other).is_err());
}
