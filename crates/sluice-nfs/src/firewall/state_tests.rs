//! The firewall's checkpoint (`conntrack/state.rs`): a restored instance
//! judges the next packets exactly as the original does, checkpoints are
//! stable, bad states are refused whole and no bytes make it panic.

use super::{Firewall, DENIED, INVALID};
use sluice_nf::harness::Harness;
use sluice_nf::{BuildContext, NetworkFunction, StateError, Verdict};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::{MacAddr, TcpFlags};
use sluice_spec::ConfigNode;
use std::net::IpAddr;
use std::sync::OnceLock;

const S: u64 = 1_000_000_000;
const T0: u64 = 1_000 * S;
/// When the next packets come: U1 has been replied for ≥ 2 s by then (a
/// UDP stream), so its creation time decides its timeout.
const T1: u64 = T0 + 3 * S;

const C: &str = "10.0.0.1";
const SV: &str = "10.0.0.2";
const DNS: &str = "10.0.0.3";
const C6: &str = "fd00::1";
const SV6: &str = "fd00::2";

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

use sluice_nf::harness::NoNames;

/// Web to 10.0.0.2 and fd00::2, DNS anywhere; everything else dropped.
fn firewall(capacity: u32) -> Firewall {
    let config = ConfigNode::from_json(serde_json::json!({
        "default": "drop",
        "capacity": capacity,
        "rules": [
            { "action": "accept", "proto": "tcp", "dst_port": 80, "dst": SV },
            { "action": "accept", "proto": "tcp", "dst_port": 80, "dst": SV6 },
            { "action": "accept", "proto": "udp", "dst_port": 53 },
        ],
    }));
    let ctx = BuildContext {
        name: "fw".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 64,
    };
    Firewall::from_build_context(&ctx).unwrap()
}

fn frame(src: &str, dst: &str, l4: L4Spec, payload: &[u8]) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: src.parse::<IpAddr>().unwrap(),
        dst_ip: dst.parse::<IpAddr>().unwrap(),
        ttl: 64,
        l4,
    };
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).unwrap();
    buf.truncate(n);
    buf
}

#[allow(clippy::too_many_arguments)] // reads like the segment it builds
fn tcp(
    src: &str,
    sp: u16,
    dst: &str,
    dp: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    data: &[u8],
) -> Vec<u8> {
    let l4 = L4Spec::Tcp {
        src_port: sp,
        dst_port: dp,
        seq,
        ack,
        flags: TcpFlags::from_bits(flags),
        window: 8192,
    };
    frame(src, dst, l4, data)
}

fn udp(src: &str, sp: u16, dst: &str, dp: u16) -> Vec<u8> {
    let l4 = L4Spec::Udp {
        src_port: sp,
        dst_port: dp,
    };
    frame(src, dst, l4, b"query")
}

fn run(h: &mut Harness, fw: &mut Firewall, frames: &[Vec<u8>]) -> Vec<Verdict> {
    h.run(fw, frames).into_iter().map(|o| o.verdict).collect()
}

fn checkpoint(fw: &Firewall) -> Vec<u8> {
    let mut w = sluice_nf::StateWriter::new();
    fw.checkpoint(&mut w);
    w.into_bytes()
}

/// Establishes A (IPv4 TCP, handshake and data both ways), B (IPv4 TCP,
/// SYN only), V6 (IPv6 TCP, handshake and data), U1 (UDP, replied) and U2
/// (UDP, no reply yet), in that order (A is the first record), at `T0`.
fn drive(fw: &mut Firewall, h: &mut Harness) {
    h.set_now_ns(T0);
    let frames = [
        tcp(C, 4000, SV, 80, SYN, 100, 0, b""),
        tcp(SV, 80, C, 4000, SYN | ACK, 500, 101, b""),
        tcp(C, 4000, SV, 80, ACK, 101, 501, b""),
        tcp(C, 4000, SV, 80, ACK | PSH, 101, 501, b"GET /"),
        tcp(SV, 80, C, 4000, ACK | PSH, 501, 106, b"200 OK"),
        tcp(C, 4001, SV, 80, SYN, 7000, 0, b""),
        tcp(C6, 4002, SV6, 80, SYN, 3000, 0, b""),
        tcp(SV6, 80, C6, 4002, SYN | ACK, 8000, 3001, b""),
        tcp(C6, 4002, SV6, 80, ACK | PSH, 3001, 8001, b"hello"),
        tcp(SV6, 80, C6, 4002, ACK, 8001, 3006, b""),
        udp(C, 5000, DNS, 53),
        udp(DNS, 53, C, 5000),
        udp(C, 5001, DNS, 53),
    ];
    let v = run(h, fw, &frames);
    assert!(v.iter().all(|v| *v == Verdict::Next), "{v:?}");
    assert_eq!(fw.conntrack().len(), 5);
}

/// The packets after the checkpoint, at `T1`, and which of them travel in
/// a reply direction no rule accepts (a fresh instance drops them).
fn next_packets() -> (Vec<Vec<u8>>, Vec<usize>) {
    let frames = vec![
        /* 0 */ tcp(SV, 80, C, 4000, ACK | PSH, 507, 106, b"more"),
        /* 1 */ tcp(C, 4000, SV, 80, ACK, 106, 511, b""),
        // Far beyond the window A has tracked: INVALID to an instance that
        // knows A, a mid-stream pickup to one that does not.
        /* 2 */
        tcp(C, 4000, SV, 80, ACK, 106 + 1_000_000_000, 511, b""),
        /* 3 */ tcp(SV, 80, C, 4001, SYN | ACK, 9000, 7001, b""),
        /* 4 */ tcp(C, 4001, SV, 80, ACK, 7001, 9001, b""),
        /* 5 */ tcp(SV6, 80, C6, 4002, ACK | PSH, 8001, 3006, b"world"),
        /* 6 */ udp(DNS, 53, C, 5001),
        /* 7 */ udp(DNS, 53, C, 5000),
        /* 8 */ tcp(C, 4000, SV, 80, FIN | ACK, 106, 511, b""),
        /* 9 */ tcp(SV, 80, C, 4000, ACK, 511, 107, b""),
        /* 10 */ tcp(C, 4005, SV, 22, SYN, 1, 0, b""),
        /* 11 */ tcp(C, 4003, SV, 80, SYN, 1, 0, b""),
    ];
    (frames, vec![0, 3, 5, 6, 7])
}

fn restored_from(state: &[u8]) -> Firewall {
    let mut fw = firewall(64);
    fw.restore(state).unwrap();
    fw
}

fn valid_state() -> &'static [u8] {
    static STATE: OnceLock<Vec<u8>> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut fw = firewall(64);
        drive(&mut fw, &mut Harness::new());
        checkpoint(&fw)
    })
}

#[test]
fn a_restored_instance_judges_the_next_packets_as_the_original() {
    let mut orig = firewall(64);
    let mut h = Harness::new();
    drive(&mut orig, &mut h);
    let state = checkpoint(&orig);
    assert_eq!(orig.state_version(), Some(1));

    let mut restored = restored_from(&state);
    assert_eq!(restored.conntrack().len(), 5);
    let mut fresh = firewall(64);
    let (next, replies) = next_packets();
    let mut hr = Harness::new();
    let mut hf = Harness::new();
    for h in [&mut h, &mut hr, &mut hf] {
        h.set_now_ns(T1);
    }
    let want = run(&mut h, &mut orig, &next);
    let got = run(&mut hr, &mut restored, &next);
    let fresh_got = run(&mut hf, &mut fresh, &next);
    assert_eq!(got, want);

    let denied = Verdict::Drop(DENIED);
    let invalid = Verdict::Drop(INVALID);
    for &i in &replies {
        assert_eq!(
            got[i],
            Verdict::Next,
            "reply {i} passes on the restored instance"
        );
        assert!(
            matches!(fresh_got[i], Verdict::Drop(_)),
            "reply {i} without the state: {:?}",
            fresh_got[i]
        );
    }
    assert_eq!(got[2], invalid, "the window carried over");
    assert_eq!(fresh_got[2], Verdict::Next, "picked up mid-stream");
    assert_eq!(got[10], denied);
    assert_eq!(got[11], Verdict::Next);

    // Every connection moved on identically: states, windows, expiries.
    assert_eq!(checkpoint(&restored), checkpoint(&orig));
    assert_eq!(restored.conntrack().len(), 6);
}

#[test]
fn checkpoint_restore_checkpoint_gives_the_same_bytes() {
    let state = valid_state();
    // 4 + five records of 62, three of them with 55 bytes of TCP.
    assert_eq!(state.len(), 4 + 5 * 62 + 3 * 55);
    let again = checkpoint(&restored_from(state));
    assert_eq!(again, state);
    // Into an instance that already tracks other connections: replaced.
    let mut busy = target();
    busy.restore(state).unwrap();
    assert_eq!(checkpoint(&busy), state);
}

/// An instance with a connection of its own (UDP 10.0.0.1:6000 → DNS).
fn target() -> Firewall {
    let mut fw = firewall(64);
    let mut h = Harness::new();
    h.set_now_ns(T0);
    assert_eq!(
        run(&mut h, &mut fw, &[udp(C, 6000, DNS, 53)]),
        [Verdict::Next]
    );
    fw
}

/// `fw` still holds exactly its own connection: its reply passes, a
/// reply of the refused state's connection A does not.
fn assert_untouched(fw: &mut Firewall, before: &[u8], case: &str) {
    assert_eq!(checkpoint(fw), before, "{case}: state changed");
    let mut h = Harness::new();
    h.set_now_ns(T1);
    let v = run(
        &mut h,
        fw,
        &[
            udp(DNS, 53, C, 6000),
            tcp(SV, 80, C, 4000, ACK, 507, 106, b""),
        ],
    );
    assert_eq!(v, [Verdict::Next, Verdict::Drop(DENIED)], "{case}");
}

#[test]
fn truncated_and_random_states_are_refused_and_leave_the_instance_untouched() {
    let state = valid_state();
    let mut fw = target();
    let before = checkpoint(&fw);
    sluice_nf::state_check::check_restore(&mut fw, state);
    assert_untouched(&mut fw, &before, "truncations and noise");
}

/// Offsets into [`valid_state`]: record A starts at 4, its TCP part at
/// 4 + 62.
const A: usize = 4;
const A_TCP: usize = A + 62;

#[test]
fn corrupt_states_are_invalid_and_leave_the_instance_untouched() {
    let state = valid_state();
    let patch = |at: usize, bytes: &[u8]| {
        let mut s = state.to_vec();
        s[at..at + bytes.len()].copy_from_slice(bytes);
        s
    };
    let mut dup = state.to_vec();
    dup[..4].copy_from_slice(&6u32.to_le_bytes());
    dup.extend_from_slice(&state[A..A_TCP + 55]);
    let mut swapped = state.to_vec();
    swapped[A + 4..A + 20].copy_from_slice(&state[A + 20..A + 36]);
    swapped[A + 20..A + 36].copy_from_slice(&state[A + 4..A + 20]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("TCP state 10", patch(A + 40, &[10])),
        ("TCP state NONE", patch(A + 40, &[0])),
        ("TCP state 255", patch(A + 40, &[255])),
        ("unknown entry flag", patch(A + 41, &[0x80])),
        ("LIVE flag written", patch(A + 41, &[0x01])),
        ("IP version 5", patch(A + 2, &[5])),
        (
            "accepting rule the config lacks",
            patch(A + 58, &[7, 0, 0, 0]),
        ),
        ("window scale 15", patch(A_TCP + 16, &[15])),
        ("window flag bit 0x40", patch(A_TCP + 17, &[0x40])),
        ("last direction 2", patch(A_TCP + 50, &[2])),
        ("last packet class 6", patch(A_TCP + 51, &[6])),
        ("last flags bit 0x10", patch(A_TCP + 54, &[0x10])),
        ("duplicate connection", dup),
        ("key not canonical", swapped),
    ];
    let mut fw = target();
    let before = checkpoint(&fw);
    for (case, bad) in &cases {
        let r = fw.restore(bad);
        assert!(
            matches!(r, Err(StateError::Invalid { .. })),
            "{case}: {r:?}"
        );
        assert_eq!(checkpoint(&fw), before, "{case}");
    }
    let mut trailing = state.to_vec();
    trailing.push(0);
    assert_eq!(
        fw.restore(&trailing),
        Err(StateError::TrailingBytes { count: 1 })
    );
    assert_untouched(&mut fw, &before, "corruptions");

    // Five connections do not fit a table of four: refused, not cut.
    let mut small = firewall(4);
    let before = checkpoint(&small);
    assert!(matches!(
        small.restore(state),
        Err(StateError::Invalid { at: 0, .. })
    ));
    assert_eq!(checkpoint(&small), before);
}

/// Restores `bytes` into a fresh instance: never panics; a refused state
/// leaves it empty, an accepted one checkpoints back to itself and the
/// next packets (through `decide_frame`, fast path included) do not panic.
fn restore_any(bytes: &[u8]) {
    let mut fw = firewall(8);
    let empty = checkpoint(&fw);
    match fw.restore(bytes) {
        Err(_) => assert_eq!(checkpoint(&fw), empty),
        Ok(()) => {
            assert_eq!(checkpoint(&fw), bytes);
            let (next, _) = next_packets();
            for _ in 0..2 {
                for (id, f) in next.iter().enumerate() {
                    let _ = fw.decide_frame(f, 0, id as u32 % 4, T1);
                }
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        restore_any(&bytes);
    }

    #[test]
    fn mutated_states_never_panic(
        muts in proptest::collection::vec((0usize..500, proptest::prelude::any::<u8>()), 1..4),
        cut in proptest::option::of(0usize..500),
    ) {
        // Capacity 8 holds the five connections: mutations reach every
        // field's check, not only the count's.
        let mut s = valid_state().to_vec();
        for (at, b) in muts {
            let n = s.len();
            s[at % n] = b;
        }
        if let Some(c) = cut {
            s.truncate(c);
        }
        restore_any(&s);
    }
}
