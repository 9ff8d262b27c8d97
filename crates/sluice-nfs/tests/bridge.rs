//! `bridge`: learning, forwarding, flooding, same-port drops, station
//! moves, ageing, VLAN membership and tag push/pop, reserved and invalid
//! addresses, a full table, and config errors.

mod common;
use common::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, PortId, Verdict};
use sluice_nfs::bridge::core::{BrDrop, Bridge, Decision, PortVlans};

const S: u64 = 1_000_000_000;
const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];
const BCAST: [u8; 6] = [0xff; 6];

/// An Ethernet frame (local experimental EtherType, 46-byte payload),
/// 802.1Q-tagged with `tci` if given.
fn eth(dst: [u8; 6], src: [u8; 6], tci: Option<u16>) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(t) = tci {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&t.to_be_bytes());
    }
    f.extend_from_slice(&0x88b5u16.to_be_bytes());
    f.extend((0..46).map(|i| i as u8));
    f
}

fn access(v: u16) -> PortVlans {
    PortVlans {
        access: Some(v),
        trunk: vec![],
        native: None,
    }
}

fn trunk(vs: &[u16], native: Option<u16>) -> PortVlans {
    PortVlans {
        access: None,
        trunk: vs.to_vec(),
        native,
    }
}

fn flat(n: usize) -> Bridge {
    Bridge::new(&vec![access(1); n], 1024, 300 * S)
}

fn mask(ports: &[usize]) -> u64 {
    ports.iter().map(|p| 1u64 << p).sum()
}

#[test]
fn learns_floods_unknown_then_forwards() {
    let mut br = flat(3);
    let (d, ing) = br.decide(&eth(B, A, None), 0, S);
    assert_eq!(d, Decision::Flood(mask(&[1, 2])));
    assert_eq!((ing.vlan, ing.tagged), (1, false));
    assert_eq!(br.decide(&eth(A, B, None), 1, S).0, Decision::Forward(0));
    assert_eq!(br.decide(&eth(B, A, None), 0, S).0, Decision::Forward(1));
    let s = br.take_stats();
    assert_eq!((s.learned, s.flooded, s.forwarded, s.moved), (2, 1, 2, 0));
    assert_eq!(br.entries(), 2);
}

#[test]
fn broadcast_and_multicast_flood_to_every_other_port() {
    let mut br = flat(4);
    br.decide(&eth(A, B, None), 1, S); // learn B on 1
    assert_eq!(
        br.decide(&eth(BCAST, A, None), 2, S).0,
        Decision::Flood(mask(&[0, 1, 3]))
    );
    let mcast = [0x01, 0x00, 0x5e, 0, 0, 1];
    assert_eq!(
        br.decide(&eth(mcast, A, None), 2, S).0,
        Decision::Flood(mask(&[0, 1, 3]))
    );
}

#[test]
fn destination_on_the_ingress_port_is_dropped() {
    let mut br = flat(2);
    br.decide(&eth(BCAST, B, None), 0, S);
    assert_eq!(
        br.decide(&eth(B, A, None), 0, S).0,
        Decision::Drop(BrDrop::SamePort)
    );
}

#[test]
fn station_moves_are_counted_and_followed() {
    let mut br = flat(3);
    br.decide(&eth(BCAST, A, None), 0, S);
    assert_eq!(br.decide(&eth(A, B, None), 1, S).0, Decision::Forward(0));
    br.decide(&eth(BCAST, A, None), 2, S + 1);
    assert_eq!(
        br.decide(&eth(A, B, None), 1, S + 2).0,
        Decision::Forward(2)
    );
    let s = br.take_stats();
    assert_eq!((s.learned, s.moved), (2, 1));
}

#[test]
fn entries_age_out_after_the_ageing_time() {
    let mut br = Bridge::new(&[access(1), access(1), access(1)], 64, 300 * S);
    br.decide(&eth(BCAST, A, None), 0, S);
    br.decide(&eth(BCAST, C, None), 2, S);
    // Still fresh at exactly 300 s.
    assert_eq!(br.lookup(1, A, 301 * S), Some(0));
    assert_eq!(
        br.decide(&eth(A, B, None), 1, 301 * S).0,
        Decision::Forward(0)
    );
    // 300 s + 1 ns after A was last heard: flooded again, entry aged.
    assert_eq!(br.lookup(1, A, 301 * S + 1), None);
    assert_eq!(
        br.decide(&eth(A, B, None), 1, 301 * S + 1).0,
        Decision::Flood(mask(&[0, 2]))
    );
    assert_eq!(br.take_stats().aged, 1);
    // The sweep removes C (never looked up) but not B (learned at 301 s).
    br.sweep_all(301 * S + 1);
    assert_eq!(br.take_stats().aged, 1);
    assert_eq!(br.entries(), 1);
    assert_eq!(br.lookup(1, B, 301 * S + 1), Some(1));
}

#[test]
fn vlans_partition_flooding_and_learning() {
    // p0: access 10, p1: access 20, p2: trunk 10+20, p3: trunk 10 native 30,
    // p4: access 30.
    let ports = [
        access(10),
        access(20),
        trunk(&[10, 20], None),
        trunk(&[10], Some(30)),
        access(30),
    ];
    let mut br = Bridge::new(&ports, 1024, 300 * S);
    let (d, ing) = br.decide(&eth(BCAST, A, None), 0, S);
    assert_eq!(d, Decision::Flood(mask(&[2, 3])));
    assert_eq!(ing.vlan, 10);
    assert!(br.egress_tagged(2, 10) && br.egress_tagged(3, 10) && !br.egress_tagged(0, 10));
    assert_eq!(
        br.decide(&eth(BCAST, B, None), 1, S).0,
        Decision::Flood(mask(&[2]))
    );
    // Untagged on p3 is its native VLAN 30, which leaves p3 untagged.
    let (d, ing) = br.decide(&eth(BCAST, C, None), 3, S);
    assert_eq!(
        (d, ing.vlan, ing.tagged),
        (Decision::Flood(mask(&[4])), 30, false)
    );
    assert!(!br.egress_tagged(3, 30));
    // Tagged 20 on p3 (not allowed), untagged on p2 (no native), tagged
    // 20 on access port 0, VID 4095.
    assert_eq!(
        br.decide(&eth(BCAST, C, Some(20)), 3, S).0,
        Decision::Drop(BrDrop::VlanNotAllowed)
    );
    assert_eq!(
        br.decide(&eth(BCAST, C, None), 2, S).0,
        Decision::Drop(BrDrop::Untagged)
    );
    assert_eq!(
        br.decide(&eth(BCAST, C, Some(20)), 0, S).0,
        Decision::Drop(BrDrop::VlanNotAllowed)
    );
    assert_eq!(
        br.decide(&eth(BCAST, C, Some(4095)), 2, S).0,
        Decision::Drop(BrDrop::VlanNotAllowed)
    );
    // A priority-tagged frame (VID 0) belongs to the access VLAN.
    let (d, ing) = br.decide(&eth(BCAST, C, Some(5 << 13)), 0, S);
    assert_eq!(
        (d, ing.vlan, ing.tagged, ing.pcp),
        (Decision::Flood(mask(&[2, 3])), 10, true, 5)
    );
    // The same MAC is a different station in each VLAN: A is known in 10
    // only, so a frame to A in 20 floods.
    assert_eq!(
        br.decide(&eth(A, B, Some(10)), 2, S).0,
        Decision::Forward(0)
    );
    assert_eq!(
        br.decide(&eth(A, B, Some(20)), 2, S).0,
        Decision::Flood(mask(&[1]))
    );
}

#[test]
fn reserved_and_invalid_addresses() {
    let mut br = flat(2);
    let stp = [0x01, 0x80, 0xc2, 0, 0, 0];
    let lacp = [0x01, 0x80, 0xc2, 0, 0, 2];
    assert_eq!(
        br.decide(&eth(stp, A, None), 0, S).0,
        Decision::Drop(BrDrop::LinkLocal)
    );
    assert_eq!(
        br.decide(&eth(lacp, A, None), 0, S).0,
        Decision::Drop(BrDrop::LinkLocal)
    );
    // 01:80:c2:00:00:10 is not reserved.
    assert!(matches!(
        br.decide(&eth([1, 0x80, 0xc2, 0, 0, 0x10], A, None), 0, S)
            .0,
        Decision::Flood(_)
    ));
    assert_eq!(
        br.decide(&eth(B, BCAST, None), 0, S).0,
        Decision::Drop(BrDrop::BadSrcMac)
    );
    assert_eq!(
        br.decide(&eth(B, [0; 6], None), 0, S).0,
        Decision::Drop(BrDrop::BadSrcMac)
    );
    assert_eq!(
        br.decide(&[0u8; 13], 0, S).0,
        Decision::Drop(BrDrop::Truncated)
    );
    assert_eq!(
        br.decide(&eth(B, A, Some(1))[..16], 0, S).0,
        Decision::Drop(BrDrop::Truncated)
    );
}

#[test]
fn a_full_table_stops_learning_but_keeps_forwarding() {
    let mut br = Bridge::new(&[access(1), access(1)], 2, 300 * S);
    for (i, m) in [A, B, C].iter().enumerate() {
        br.decide(&eth(BCAST, *m, None), i % 2, S);
    }
    let s = br.take_stats();
    assert_eq!((s.learned, s.table_full), (2, 1));
    assert_eq!(
        br.decide(&eth(C, A, None), 0, S).0,
        Decision::Flood(mask(&[1]))
    );
}

fn reason(name: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("bridge", name)))
}

#[test]
fn the_nf_pushes_and_pops_tags_per_egress_port() {
    // The harness delivers every frame on port 0, which the test resolver
    // calls `out`; `dump` is port 1.
    let mut nf = build(
        "bridge",
        json!({ "ports": [{ "name": "out", "vlan": 10 }, { "name": "dump", "trunk": [10] }] }),
    );
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &[eth(BCAST, A, None)]);
    assert_eq!(out[0].verdict, Verdict::ToPort(PortId(1)));
    assert_eq!(out[0].frame, eth(BCAST, A, Some(10)));

    let mut nf = build(
        "bridge",
        json!({ "ports": [{ "name": "dump", "vlan": 10 }, { "name": "out", "trunk": [10, 20] }] }),
    );
    let input = [
        eth(BCAST, A, Some(3 << 13 | 10)),
        eth(BCAST, A, Some(20)),
        eth(BCAST, A, None),
    ];
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &input);
    assert_eq!(out[0].verdict, Verdict::ToPort(PortId(1)));
    assert_eq!(out[0].frame, eth(BCAST, A, None));
    assert_eq!(out[1].verdict, reason("no_egress"));
    assert_eq!(out[2].verdict, reason("untagged"));
    assert_eq!(h.counter(counter_index("bridge", "flooded")), 1);
    // A is learned in VLANs 10 and 20 (learning precedes the flood).
    assert_eq!(h.counter(counter_index("bridge", "learned")), 2);
    assert_eq!(h.counter(counter_index("bridge", "entries")), 2);
}

/// Knows ports `x` and `y` as port ids 5 and 6.
struct FarPorts;

impl sluice_nf::Resolver for FarPorts {
    fn nf(&self, _: &str) -> Option<sluice_nf::NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        ["x", "y"]
            .iter()
            .position(|n| *n == name)
            .map(|i| PortId(5 + i as u16))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

#[test]
fn the_nf_drops_frames_from_ports_outside_the_bridge() {
    let node = sluice_spec::ConfigNode::from_json(json!({ "ports": ["x", "y"] }));
    let ctx = sluice_nf::BuildContext {
        name: "br".into(),
        config: &node,
        resolver: &FarPorts,
        flow_capacity: 16,
    };
    let mut nf =
        sluice_nfs::bridge::BridgeNf::new(sluice_nfs::bridge::config::compile(&ctx).unwrap());
    // The harness delivers on port 0, which is not x or y.
    let out = Harness::new().run(&mut nf, &[eth(BCAST, A, None)]);
    assert_eq!(out[0].verdict, reason("not_member"));
    // With a default ingress they are bridged as if they came in on it.
    let node =
        sluice_spec::ConfigNode::from_json(json!({ "ports": ["x", "y"], "default_ingress": "x" }));
    let ctx = sluice_nf::BuildContext {
        name: "br".into(),
        config: &node,
        resolver: &FarPorts,
        flow_capacity: 16,
    };
    let mut nf =
        sluice_nfs::bridge::BridgeNf::new(sluice_nfs::bridge::config::compile(&ctx).unwrap());
    let out = Harness::new().run(&mut nf, &[eth(BCAST, A, None)]);
    assert_eq!(out[0].verdict, Verdict::ToPort(PortId(6)));
}

#[test]
fn config_errors_name_the_field() {
    let cases = [
        (json!(null), "", "needs a config"),
        (json!({ "ports": ["out"] }), "ports", "2 to 64"),
        (
            json!({ "ports": ["out", "nowhere"] }),
            "ports[1]",
            "no output-capable port",
        ),
        (json!({ "ports": ["out", "out"] }), "ports[1]", "twice"),
        (
            json!({ "ports": ["out", { "name": "dump", "vlan": 4095 }] }),
            "ports[1].vlan",
            "1-4094",
        ),
        (
            json!({ "ports": ["out", { "name": "dump", "vlan": 1, "trunk": [2] }] }),
            "ports[1].trunk",
            "not both",
        ),
        (
            json!({ "ports": ["out", { "name": "dump", "trunk": [2], "native": 2 }] }),
            "ports[1].native",
            "untagged",
        ),
        (
            json!({ "ports": ["out", { "name": "dump", "vlans": [2] }] }),
            "vlans",
            "unknown field",
        ),
        (
            json!({ "ports": ["out", "dump"], "max_entries": 0 }),
            "max_entries",
            "between",
        ),
        (
            json!({ "ports": ["out", "dump"], "ageing": 1 }),
            "ageing",
            "unknown field",
        ),
    ];
    for (cfg, field, msg) in cases {
        let e = build_err("bridge", cfg.clone()).to_string();
        assert!(e.contains(field) && e.contains(msg), "{cfg}: {e}");
    }
}

/// Knows ports `x`, `y`, `z` as port ids 5, 6, 7.
struct ThreePorts;

impl sluice_nf::Resolver for ThreePorts {
    fn nf(&self, _: &str) -> Option<sluice_nf::NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        ["x", "y", "z"]
            .iter()
            .position(|n| *n == name)
            .map(|i| PortId(5 + i as u16))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

#[test]
fn floods_copy_the_frame_to_every_other_port_with_its_tagging() {
    // Frames arrive (harness port 0) as if on x (access 10); y is access
    // 10, z a trunk carrying 10, w (id 8) is in VLAN 20 only.
    struct FourPorts;
    impl sluice_nf::Resolver for FourPorts {
        fn nf(&self, _: &str) -> Option<sluice_nf::NfId> {
            None
        }
        fn port(&self, name: &str) -> Option<PortId> {
            ThreePorts.port(name).or((name == "w").then_some(PortId(8)))
        }
        /// Every port here both receives and transmits.
        fn input_port(&self, name: &str) -> Option<PortId> {
            self.port(name)
        }
    }
    let node = sluice_spec::ConfigNode::from_json(json!({
        "default_ingress": "x",
        "ports": [{ "name": "x", "vlan": 10 }, { "name": "y", "vlan": 10 }, { "name": "z", "trunk": [10, 20] }, { "name": "w", "vlan": 20 }],
    }));
    let ctx = sluice_nf::BuildContext {
        name: "br".into(),
        config: &node,
        resolver: &FourPorts,
        flow_capacity: 16,
    };
    let mut nf =
        sluice_nfs::bridge::BridgeNf::new(sluice_nfs::bridge::config::compile(&ctx).unwrap());
    let mut h = Harness::new();
    let out = h.run(&mut nf, &[eth(BCAST, A, None)]);
    // The original to y (untagged), one copy to z (tagged 10), none to w
    // (other VLAN) and none back to x.
    assert_eq!(out[0].verdict, Verdict::ToPort(PortId(6)));
    assert_eq!(out[0].frame, eth(BCAST, A, None));
    let copies = h.take_emitted();
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].verdict, Verdict::ToPort(PortId(7)));
    assert_eq!(copies[0].frame, eth(BCAST, A, Some(10)));
    assert_eq!(h.counter(counter_index("bridge", "flood_copies")), 1);
    // B also sits behind x, so a frame from B to A (learned on x) is a
    // same-port drop; a frame to an unknown station floods again.
    let out = h.run(&mut nf, &[eth(A, B, None), eth(C, B, None)]);
    assert_eq!(out[0].verdict, reason("same_port"));
    assert_eq!(out[1].verdict, Verdict::ToPort(PortId(6)));
    assert_eq!(h.take_emitted().len(), 1);
    // Idle ageing runs from the timer: 301 s later the tick empties the table.
    h.set_now_ns(1_000_000_000 + 301 * S);
    h.tick(&mut nf);
    assert_eq!(h.counter(counter_index("bridge", "entries")), 0);
    assert_eq!(h.counter(counter_index("bridge", "aged")), 2);
}
