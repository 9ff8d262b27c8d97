//! The `nat` checkpoint (`state.rs`): restored instances translate as the
//! original does, checkpoints are stable, bad states are refused whole.

use super::{build_nf, NatNf};
use sluice_nf::harness::{Harness, Outcome};
use sluice_nf::{BuildContext, DropReason, NetworkFunction, StateError, StateWriter, Verdict};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::{MacAddr, TcpFlags};
use sluice_spec::ConfigNode;
use std::net::Ipv4Addr;

const S: u64 = 1_000_000_000;
const T0: u64 = 1_000 * S;
const EXT0: u32 = 0xc000_0200; // 192.0.2.0 (pairs with even inside hosts)
const EXT1: u32 = 0xc000_0201; // 192.0.2.1 (odd)
const DNS: u32 = 0xc633_6407; // 198.51.100.7
const WEB: u32 = 0xcb00_7109; // 203.0.113.9
const fn host(n: u32) -> u32 {
    0x0a00_0000 + n // 10.0.0.n
}

use sluice_nf::harness::NoNames;

/// A NAT over 192.0.2.0/31 forwarding 192.0.2.1:8080/tcp to 10.0.0.5:80,
/// with address-dependent mapping and filtering when `adf`.
fn nat(capacity: u32, adf: bool) -> NatNf {
    let mut cfg = serde_json::json!({
        "inside": ["10.0.0.0/16"],
        "pool": ["192.0.2.0/31"],
        "capacity": capacity,
        "forward": [{ "proto": "tcp", "external": "192.0.2.1:8080", "internal": "10.0.0.5:80" }],
    });
    if adf {
        cfg["mapping"] = "address_dependent".into();
        cfg["filtering"] = "address_dependent".into();
    }
    let config = ConfigNode::from_json(cfg);
    let ctx = BuildContext {
        name: "nat".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 64,
    };
    build_nf(&ctx).unwrap()
}

fn frame(src: (u32, u16), dst: (u32, u16), tcp: Option<u8>) -> Vec<u8> {
    let l4 = match tcp {
        Some(flags) => L4Spec::Tcp {
            src_port: src.1,
            dst_port: dst.1,
            seq: 1,
            ack: 1,
            flags: TcpFlags::from_bits(flags),
            window: 100,
        },
        None => L4Spec::Udp {
            src_port: src.1,
            dst_port: dst.1,
        },
    };
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: Ipv4Addr::from(src.0).into(),
        dst_ip: Ipv4Addr::from(dst.0).into(),
        ttl: 64,
        l4,
    };
    let mut buf = vec![0u8; 100];
    let n = write_frame(&mut buf, &spec, &[0xab; 12]).unwrap();
    buf.truncate(n);
    buf
}

fn udp(src: (u32, u16), dst: (u32, u16)) -> Vec<u8> {
    frame(src, dst, None)
}

const SYN: u8 = 0x02;
const SYN_ACK: u8 = 0x12;
const ACK: u8 = 0x10;

/// Source endpoint of a translated frame.
fn src_of(f: &[u8]) -> (u32, u16) {
    let a = u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
    (a, u16::from_be_bytes([f[34], f[35]]))
}

/// Three UDP and two TCP mappings (one TCP established, one half open)
/// and a session through the port-forwarding rule.
fn drive(nf: &mut NatNf, h: &mut Harness) {
    h.set_now_ns(T0);
    let out = h.run(
        nf,
        &[
            udp((host(1), 5000), (DNS, 53)),
            udp((host(3), 5000), (DNS, 53)), // paired with .1 too: port 5001
            udp((host(2), 5000), (DNS, 53)),
            frame((host(1), 40000), (WEB, 443), Some(SYN)),
            frame((host(4), 40001), (WEB, 80), Some(SYN)),
            frame((WEB, 1234), (EXT1, 8080), Some(SYN)),
        ],
    );
    assert!(out.iter().all(|o| o.verdict == Verdict::Next), "{out:?}");
    assert_eq!(src_of(&out[1].frame), (EXT1, 5001));
    h.set_now_ns(T0 + S);
    let out = h.run(
        nf,
        &[
            frame((WEB, 443), (EXT1, 40000), Some(SYN_ACK)),
            frame((host(1), 40000), (WEB, 443), Some(ACK)),
        ],
    );
    assert!(out.iter().all(|o| o.verdict == Verdict::Next), "{out:?}");
}

/// What comes after the checkpoint: return traffic of every mapping, more
/// packets of existing flows, the forwarded connection's reply, a new flow
/// that must not take a restored port, and its return traffic.
fn next_packets() -> Vec<Vec<u8>> {
    vec![
        udp((DNS, 53), (EXT1, 5000)),
        udp((DNS, 53), (EXT1, 5001)),
        udp((DNS, 53), (EXT0, 5000)),
        frame((WEB, 443), (EXT1, 40000), Some(ACK)),
        frame((WEB, 80), (EXT0, 40001), Some(SYN_ACK)),
        udp((host(3), 5000), (DNS, 53)),
        frame((host(1), 40000), (WEB, 443), Some(ACK)),
        frame((host(5), 80), (WEB, 1234), Some(SYN_ACK)),
        udp((host(7), 5000), (DNS, 53)),
        udp((DNS, 53), (EXT1, 5002)),
    ]
}

fn checkpoint(nf: &dyn NetworkFunction) -> Vec<u8> {
    let mut w = StateWriter::new();
    nf.checkpoint(&mut w);
    w.into_bytes()
}

fn run_next(nf: &mut NatNf) -> Vec<Outcome> {
    let mut h = Harness::new();
    h.set_now_ns(T0 + 10 * S);
    h.run(nf, &next_packets())
}

#[test]
fn a_restored_nat_translates_as_the_original_and_a_fresh_one_does_not() {
    for adf in [false, true] {
        let mut a = nat(64, adf);
        let mut h = Harness::new();
        drive(&mut a, &mut h);
        let state = checkpoint(&a);
        let mut b = nat(64, adf);
        assert_eq!(b.state_version(), Some(1));
        b.restore(&state).unwrap();
        assert_eq!(b.nat().mapping_count(), 5);
        assert_eq!(b.nat().session_count(), 6);
        let mut fresh = nat(64, adf);

        let (oa, ob, of) = (run_next(&mut a), run_next(&mut b), run_next(&mut fresh));
        assert_eq!(oa, ob, "adf {adf}");
        // Return traffic reached its inside hosts through restored mappings.
        let dst = |o: &Outcome| (o.frame[30..34].to_vec(), o.frame[36..38].to_vec());
        assert_eq!(ob[0].verdict, Verdict::Next);
        assert_eq!(
            dst(&ob[0]),
            (host(1).to_be_bytes().to_vec(), vec![0x13, 0x88])
        );
        assert_eq!(
            dst(&ob[1]),
            (host(3).to_be_bytes().to_vec(), vec![0x13, 0x88])
        );
        assert_eq!(
            dst(&ob[2]),
            (host(2).to_be_bytes().to_vec(), vec![0x13, 0x88])
        );
        assert_eq!(dst(&ob[3]).0, host(1).to_be_bytes());
        // The forwarded connection's reply leaves from its external port.
        assert_eq!(src_of(&ob[7].frame), (EXT1, 8080));
        // The new flow skips the restored ports 5000 and 5001 of 192.0.2.1.
        assert_eq!(src_of(&ob[8].frame), (EXT1, 5002));
        assert_eq!(ob[9].verdict, Verdict::Next);
        // A fresh instance drops the return traffic and hands port 5000 out.
        let filtered = Verdict::Drop(DropReason::nf_local(1));
        for i in [0, 1, 2, 3, 4] {
            assert_eq!(of[i].verdict, filtered, "packet {i}");
        }
        assert_eq!(src_of(&of[5].frame), (EXT1, 5000));
        assert_eq!(checkpoint(&a), checkpoint(&b));
    }
}

#[test]
fn checkpoint_restore_checkpoint_gives_the_same_bytes() {
    for adf in [false, true] {
        let mut a = nat(64, adf);
        drive(&mut a, &mut Harness::new());
        let state = checkpoint(&a);
        let mut b = nat(64, adf);
        b.restore(&state).unwrap();
        assert_eq!(checkpoint(&b), state);
        // Restoring over live state replaces it; an empty state empties.
        b.restore(&state).unwrap();
        assert_eq!(checkpoint(&b), state);
        let empty = checkpoint(&nat(64, adf));
        assert_eq!(empty, [0u8; 8]);
        b.restore(&empty).unwrap();
        assert_eq!(b.nat().session_count(), 0);
        assert_eq!(b.nat().mapping_count(), 0);
        // Its ports went back to the pool.
        let mut h = Harness::new();
        h.set_now_ns(T0);
        let out = h.run(&mut b, &[udp((host(3), 5000), (DNS, 53))]);
        assert_eq!(src_of(&out[0].frame), (EXT1, 5000));
    }
}

/// A NAT with other state than the checkpoints tried on it.
fn bystander() -> (NatNf, Vec<u8>) {
    let mut nf = nat(64, false);
    let mut h = Harness::new();
    h.set_now_ns(T0);
    h.run(&mut nf, &[udp((host(9), 6000), (WEB, 53))]);
    let before = checkpoint(&nf);
    (nf, before)
}

fn assert_untouched(nf: &mut NatNf, before: &[u8]) {
    assert_eq!(checkpoint(nf), before);
    let mut h = Harness::new();
    h.set_now_ns(T0 + S);
    let out = h.run(nf, &[udp((WEB, 53), (EXT1, 6000))]);
    assert_eq!(out[0].verdict, Verdict::Next, "its mapping still works");
}

#[test]
fn truncated_and_random_states_are_refused_and_change_nothing() {
    let mut a = nat(64, true);
    drive(&mut a, &mut Harness::new());
    let state = checkpoint(&a);
    let (mut nf, before) = bystander();
    sluice_nf::state_check::check_restore(&mut nf, &state);
    assert_untouched(&mut nf, &before);
}

const M0: usize = 4; // first mapping record
const M: usize = 27; // mapping record size
const SESSIONS: usize = 4 + 5 * M; // session count (5 mappings)
const S0: usize = SESSIONS + 4; // first session record

#[test]
fn corrupt_states_are_refused_whole() {
    let mut a = nat(64, false);
    drive(&mut a, &mut Harness::new());
    let state = checkpoint(&a);
    assert_eq!(state.len(), S0 + 6 * 48);
    let (mut nf, before) = bystander();
    let invalid = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut s = state.clone();
        f(&mut s);
        s
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("protocol 2", invalid(&|s| s[M0] = 2)),
        ("external outside the pool", invalid(&|s| s[M0 + 16] = 9)),
        (
            "external not the paired address",
            invalid(&|s| s[M0 + 13] ^= 1),
        ),
        ("port 0", invalid(&|s| s[M0 + 17..M0 + 19].fill(0))),
        (
            "two mappings, one port",
            invalid(&|s| {
                let (a, b) = (M0 + 17, M0 + M + 17);
                let p = [s[a], s[a + 1]];
                s[b..b + 2].copy_from_slice(&p);
            }),
        ),
        ("key remote under EIM", invalid(&|s| s[M0 + 7] = 1)),
        (
            "session's mapping out of range",
            invalid(&|s| s[S0 + 19] = 99),
        ),
        ("session not its mapping's", invalid(&|s| s[S0 + 19] ^= 1)),
        ("TCP bits on UDP", invalid(&|s| s[S0 + 23] = 1)),
        (
            "marked below expires",
            invalid(&|s| s[S0 + 32..S0 + 40].fill(0)),
        ),
        ("filter expiry without ADF", invalid(&|s| s[S0 + 40] = 1)),
        (
            "duplicate session",
            invalid(&|s| {
                let first = s[S0..S0 + 48].to_vec();
                s[S0 + 48..S0 + 96].copy_from_slice(&first);
            }),
        ),
        (
            "a mapping without sessions",
            invalid(&|s| {
                // The first session is the first mapping's only one.
                s[SESSIONS] = 5;
                s.drain(S0..S0 + 48);
            }),
        ),
        (
            "static session with no rule",
            invalid(&|s| {
                let last = s.len() - 48;
                s[last + 1] ^= 0x40; // internal 10.0.0.5 → another host
            }),
        ),
    ];
    for (what, s) in &cases {
        let got = nf.restore(s);
        assert!(
            matches!(got, Err(StateError::Invalid { .. })),
            "{what}: {got:?}"
        );
        assert_eq!(checkpoint(&nf), before, "{what}");
    }
    let mut trailing = state.clone();
    trailing.push(0);
    assert_eq!(
        nf.restore(&trailing),
        Err(StateError::TrailingBytes { count: 1 })
    );
    let mut huge = state.clone();
    huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        nf.restore(&huge),
        Err(StateError::Truncated { at: 0 })
    ));
    // More entries than a smaller instance holds: refused, not cut.
    let mut small = nat(4, false);
    let got = small.restore(&state);
    assert!(
        matches!(got, Err(StateError::Invalid { at: 0, .. })),
        "{got:?}"
    );
    assert_untouched(&mut nf, &before);
}
