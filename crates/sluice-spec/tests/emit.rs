//! A spec written with `Spec::to_json` loads back into the same spec:
//! every example, the reference document's complete example, and specs
//! with every port kind, selector and setting.

use sluice_spec::{Location, Spec};

const TYPES: &[&str] = &[
    "acl",
    "monitor",
    "forwarder",
    "firewall",
    "nat",
    "router",
    "bridge",
    "load_balancer",
    "policer",
    "shaper",
    "ids",
    "flow_monitor",
    "vxlan_encap",
    "vxlan_decap",
    "gre_encap",
    "gre_decap",
    "classifier",
    "mirror",
    "sampler",
    "rewrite",
    "ttl",
    "checksum_fix",
    "graph",
    "chaos",
    "mac_swap",
    "latency_probe",
    "cycle_burner",
    "tee",
    "delay",
    "steer",
    "flowcheck",
];

/// The spec with every location cleared (they differ between texts).
fn located_nowhere(mut s: Spec) -> Spec {
    s.source = Default::default();
    for p in &mut s.ports {
        p.location = Location::GENERATED;
    }
    for n in &mut s.nfs {
        n.location = Location::GENERATED;
    }
    for c in &mut s.chains {
        c.location = Location::GENERATED;
    }
    s
}

fn round_trip(s: &Spec) {
    let text = serde_json::to_string_pretty(&s.to_json()).unwrap();
    let back = sluice_spec::parse_str(&text, "<generated>", TYPES)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(located_nowhere(back), located_nowhere(s.clone()), "{text}");
}

#[test]
fn every_example_survives_a_round_trip() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let s = sluice_spec::load(&p, TYPES).unwrap_or_else(|e| panic!("{e}"));
            round_trip(&s);
            n += 1;
        }
    }
    assert!(n >= 10, "{n} examples");
}

/// Each entry written alone is the one the whole document holds.
#[test]
fn an_entry_written_alone_is_as_in_the_whole_document() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let s = sluice_spec::load(&p, TYPES).unwrap_or_else(|e| panic!("{e}"));
        let whole = s.to_json();
        for list in ["ports", "nfs", "chains"] {
            for entry in whole[list].as_array().unwrap() {
                let name = entry["name"].as_str().unwrap();
                assert_eq!(
                    s.entry_json(list, name).as_ref(),
                    Some(entry),
                    "{list} {name}"
                );
                n += 1;
            }
            assert_eq!(s.entry_json(list, "no-such-name"), None);
        }
        assert_eq!(s.entry_json("settings", "x"), None);
    }
    assert!(n >= 30, "{n} entries");
}

#[test]
fn every_port_kind_selector_and_setting_survives_a_round_trip() {
    let s = sluice_spec::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/full.yaml"),
        &["acl", "mon", "nat"],
    )
    .unwrap();
    let text = serde_json::to_string(&s.to_json()).unwrap();
    let back = sluice_spec::parse_str(&text, "<generated>", &["acl", "mon", "nat"]).unwrap();
    assert_eq!(located_nowhere(back), located_nowhere(s));
    let text = "settings: { workers: 2, shells: false, restart: { policy: never, hold_ms: 7, standby: false }, wakeup: { policy: hybrid, max_batch: 8, timeout_us: 50, busy_poll_us: 0 }, scheduler: { policy: hybrid, yield_every: 0, kernel_class: round_robin } }
ports:
  - { name: a, kind: af_packet, interface: veth0, queues: 2, fanout: hash }
  - { name: b, kind: af_packet, interface: veth1 }
  - { name: g, kind: generator, flows: 3, protocol: mixed, ip_version: mixed, size: datacenter, rate_pps: 10, count: 5, packets_per_flow: 4, src_ports: 7, dst_ports: 1-9 }
  - { name: s, kind: sink, check_order: false }
nfs:
  - { name: m, type: monitor, wakeup: { policy: every_packet }, sandbox: { user: platform, namespaces: [net, mount], pids_max: 3, memory_max_mib: 128 } }
chains:
  - { name: c, from: a, to: b, bidirectional: true, match: { proto: 132, src: 10.0.0.0/8, dst_port: 80-90, ip_version: 4 }, wakeup: { policy: threshold, threshold: 16 } }
  - { name: d, from: g, match: { proto: icmpv6 }, nfs: [m], to: s, wakeup: { policy: adaptive, short_flow_packets: 10, max_batch: 64, timeout_us: 500 } }
";
    let s = sluice_spec::parse_str(text, "<generated>", TYPES).unwrap();
    assert_eq!(s.chains.len(), 3, "the bidirectional chain stands for two");
    assert_eq!(
        s.chains[1].wakeup, s.chains[0].wakeup,
        "the reverse chain's rule"
    );
    assert_eq!(s.chains[2].wakeup.unwrap().short_flow_packets(), 10);
    assert_eq!(s.settings.scheduler.yield_every, Some(0));
    assert!(!s.settings.shells);
    let sandbox = s.nfs[0].sandbox.clone().unwrap();
    assert_eq!(sandbox.user, sluice_spec::SandboxUser::Platform);
    assert_eq!(
        (sandbox.memory_max_mib, sandbox.pids_max),
        (Some(128), Some(3))
    );
    assert_eq!(
        s.settings.scheduler.kernel_class,
        sluice_spec::KernelClass::RoundRobin
    );
    round_trip(&s);
}

#[test]
fn trust_domains_survive_a_round_trip_and_are_written_only_when_set() {
    let text = "settings: { buffers: 2048, domains: [ { name: tenant-a, buffers: 4096 }, { name: tenant-b, buffers: 256 } ] }
ports:
  - { name: g, kind: generator }
  - { name: s, kind: sink }
nfs:
  - { name: a, type: monitor, domain: tenant-a }
  - { name: b, type: monitor, domain: platform, isolation: inline }
  - { name: c, type: monitor }
chains:
  - { name: c1, from: g, nfs: [a, b, c], to: s }
";
    let s = sluice_spec::parse_str(text, "<generated>", TYPES).unwrap();
    let v = s.to_json();
    assert_eq!(
        v["settings"]["domains"],
        serde_json::json!([
            { "name": "tenant-a", "buffers": 4096 },
            { "name": "tenant-b", "buffers": 256 }
        ])
    );
    assert_eq!(v["nfs"][0]["domain"], "tenant-a");
    assert_eq!(v["nfs"][1]["domain"], "platform");
    assert!(v["nfs"][2].get("domain").is_none());
    round_trip(&s);
    let mut plain = s.clone();
    plain.settings.domains.clear();
    plain.nfs.iter_mut().for_each(|n| n.domain = None);
    let v = plain.to_json();
    assert!(v["settings"].get("domains").is_none());
    assert!(v["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n.get("domain").is_none()));
    round_trip(&plain);
}

#[test]
fn replicas_and_steering_survive_a_round_trip_and_are_written_only_when_set() {
    let text = "ports:
  - { name: g, kind: generator }
  - { name: s, kind: sink }
nfs:
  - { name: a, type: monitor, replicas: 4, steer: shortest_queue }
  - { name: b, type: monitor, replicas: 2 }
  - { name: c, type: monitor }
chains:
  - { name: c1, from: g, nfs: [a, b, c], to: s }
";
    let s = sluice_spec::parse_str(text, "<generated>", TYPES).unwrap();
    assert_eq!(
        (s.nfs[0].replicas, s.nfs[0].steer),
        (4, sluice_spec::Steer::ShortestQueue)
    );
    assert_eq!(
        (s.nfs[1].replicas, s.nfs[1].steer),
        (2, sluice_spec::Steer::Hash)
    );
    assert_eq!(
        (s.nfs[2].replicas, s.nfs[2].steer),
        (1, sluice_spec::Steer::Hash)
    );
    let v = s.to_json();
    assert_eq!(v["nfs"][0]["replicas"], 4);
    assert_eq!(v["nfs"][0]["steer"], "shortest_queue");
    assert_eq!(v["nfs"][1]["replicas"], 2);
    assert!(v["nfs"][1].get("steer").is_none());
    assert!(v["nfs"][2].get("replicas").is_none());
    round_trip(&s);
}

#[test]
fn a_rollout_in_progress_survives_a_round_trip_and_is_written_only_when_set() {
    let text = "ports:
  - { name: g, kind: generator }
  - { name: s, kind: sink }
nfs:
  - { name: a, type: monitor, generation: 3, draining: { generation: 2, config: { x: 1 }, replicas: 2 } }
  - { name: b, type: monitor, generation: 1 }
  - { name: c, type: monitor }
chains:
  - { name: c1, from: g, nfs: [a, b, c], to: s }
";
    let s = sluice_spec::parse_str(text, "<generated>", TYPES).unwrap();
    let d = s.nfs[0].draining.as_ref().unwrap();
    assert_eq!((s.nfs[0].generation, d.generation, d.replicas), (3, 2, 2));
    assert_eq!(s.nfs[0].instances(), 3);
    let v = s.to_json();
    assert_eq!(v["nfs"][0]["draining"]["config"]["x"], 1);
    assert_eq!(v["nfs"][1]["generation"], 1);
    assert!(v["nfs"][1].get("draining").is_none());
    assert!(v["nfs"][2].get("generation").is_none());
    round_trip(&s);
}

/// NF config numbers at the edges of what JSON carries exactly come back
/// as the same numbers of the same kind (an integer is not a float).
#[test]
fn config_numbers_at_the_edges_survive_a_round_trip() {
    let s = sluice_spec::parse_str(
        "ports:
  - { name: gen, kind: generator }
  - { name: out, kind: sink }
nfs:
  - name: acl
    type: acl
    config:
      top: 18446744073709551615
      bottom: -9223372036854775808
      hex: 0xffffffffffffffff
      tiny: 5e-324
      huge: 1.7976931348623157e308
      whole: 1.0
      tagged: !!float 7
chains:
  - { name: main, from: gen, nfs: [acl], to: out }
",
        "edges.yaml",
        TYPES,
    )
    .unwrap();
    round_trip(&s);
}
