//! The firewall's checkpoint: connections tracked by one instance, with
//! their TCP window state, judged the same by an instance restored from
//! its checkpoint (a differential test against the original), where a
//! fresh instance without it refuses the reply traffic; a restored state
//! checkpoints to the same bytes; truncated, corrupt or foreign states are
//! refused and leave the instance as it was.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{NetworkFunction, StateError, StateWriter, Verdict};
use sluice_nfs::firewall::Firewall;

const C: &str = "10.0.0.1";
const SV: &str = "10.0.0.2";

/// Only new connections to the server's port 80 and UDP 53 are allowed:
/// anything from the server side needs a tracked connection.
fn config() -> serde_json::Value {
    json!({ "rules": [
        { "action": "accept", "proto": "tcp", "dst_port": 80, "dst": SV },
        { "action": "accept", "proto": "udp", "dst_port": 53, "dst": SV }
    ] })
}

fn run(h: &mut Harness, fw: &mut Firewall, frames: &[Vec<u8>]) -> Vec<Verdict> {
    h.run(fw, frames).into_iter().map(|o| o.verdict).collect()
}

fn checkpoint(fw: &Firewall) -> Vec<u8> {
    let mut w = StateWriter::new();
    fw.checkpoint(&mut w);
    w.into_bytes()
}

/// Three TCP connections at different points of their life and two UDP
/// exchanges, through `fw`.
fn traffic(h: &mut Harness, fw: &mut Firewall) {
    let mut frames = Vec::new();
    for (port, established) in [(4000u16, true), (4001, true), (4002, false)] {
        frames.push(tcp_seg(C, port, SV, 80, SYN, 100, 0, b""));
        frames.push(tcp_seg(SV, 80, C, port, SYN | ACK, 500, 101, b""));
        if established {
            frames.push(tcp_seg(C, port, SV, 80, ACK, 101, 501, b""));
            frames.push(tcp_seg(C, port, SV, 80, ACK | PSH, 101, 501, b"GET /"));
        }
    }
    frames.push(udp(C, 5353, SV, 53));
    frames.push(udp(C, 5354, SV, 53));
    let v = run(h, fw, &frames);
    assert!(v.iter().all(|v| *v == Verdict::Next), "{v:?}");
}

/// What comes next: replies, more data, a close, and traffic no rule
/// allows unless tracked.
fn next_frames() -> Vec<Vec<u8>> {
    vec![
        tcp_seg(SV, 80, C, 4000, ACK | PSH, 501, 106, b"200 OK"),
        tcp_seg(C, 4001, SV, 80, FIN | ACK, 106, 501, b""),
        tcp_seg(SV, 80, C, 4001, ACK, 501, 107, b""),
        tcp_seg(C, 4002, SV, 80, ACK, 101, 501, b""),
        // Out of window: the tracked window makes it invalid.
        tcp_seg(SV, 80, C, 4000, ACK | PSH, 900_000, 106, b"x"),
        udp(SV, 53, C, 5353),
        udp(SV, 53, C, 5354),
        // Never tracked: denied either way.
        udp(SV, 53, C, 9999),
    ]
}

#[test]
fn a_restored_firewall_judges_every_next_packet_as_the_original() {
    let mut h = Harness::new();
    let mut original = firewall(config());
    traffic(&mut h, &mut original);
    let state = checkpoint(&original);
    assert_eq!(original.state_version(), Some(1));

    let mut restored = firewall(config());
    restored.restore(&state).unwrap();
    assert_eq!(restored.conntrack().len(), original.conntrack().len());
    assert_eq!(checkpoint(&restored), state, "the same state back");

    let want = run(&mut h, &mut original, &next_frames());
    let got = run(&mut h, &mut restored, &next_frames());
    assert_eq!(got, want);
    assert_eq!(want[..4], [Verdict::Next; 4], "{want:?}");
    assert_ne!(want[4], Verdict::Next, "out of window: {want:?}");
    assert_eq!(want[5..7], [Verdict::Next; 2], "{want:?}");
    assert_ne!(want[7], Verdict::Next, "{want:?}");

    // The control: without the state the replies are refused.
    let mut fresh = firewall(config());
    let cold = run(&mut h, &mut fresh, &next_frames());
    assert_ne!(cold[0], Verdict::Next, "{cold:?}");
    assert_ne!(cold[5], Verdict::Next, "{cold:?}");
}

#[test]
fn bad_states_are_refused_and_change_nothing() {
    let mut h = Harness::new();
    let mut original = firewall(config());
    traffic(&mut h, &mut original);
    let state = checkpoint(&original);

    let mut fw = firewall(config());
    run(&mut h, &mut fw, &[udp(C, 7000, SV, 53)]);
    let before = checkpoint(&fw);
    sluice_nf::state_check::check_restore(&mut fw, &state);
    // A TCP state byte out of range: the first connection's, after its
    // 38-byte key and 2-byte zone (4 bytes of count before them).
    let mut bad = state.clone();
    bad[4 + 38 + 2] = 200;
    let got = fw.restore(&bad);
    assert!(matches!(got, Err(StateError::Invalid { .. })), "{got:?}");
    // Another config: the rules that accepted the connections are not in it.
    let mut other = firewall(json!({ "default": "accept" }));
    assert!(matches!(
        other.restore(&state),
        Err(StateError::Invalid { .. })
    ));
    // A smaller table cannot take every connection.
    let mut small = firewall(json!({ "capacity": 2, "rules": config()["rules"] }));
    let e = small.restore(&state).unwrap_err();
    assert!(matches!(e, StateError::Invalid { .. }), "{e}");
    assert_eq!(checkpoint(&fw), before, "untouched");

    assert_eq!(checkpoint(&fw), before, "still untouched");
}
