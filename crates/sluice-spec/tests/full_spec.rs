//! A complete, valid spec loads into exactly the expected values.

use std::path::{Path, PathBuf};

use sluice_spec::{
    load, BackpressureSettings, ChainSpec, ConfigNode, FlowTableSettings, GeneratorSpec,
    InlinePanic, IpVersionChoice, Isolation, Location, MatchSpec, NicSpec, PcapInSpec, PcapOutSpec,
    PortKind, PortRange, PortSpec, Protocol, RestartMode, RestartPolicy, SchedulerSettings,
    Settings, SinkSpec, SizeSpec, WakeRule, WakeupPolicy, WakeupSettings,
};

const TYPES: &[&str] = &["acl", "mon", "nat"];

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

fn net(s: &str) -> sluice_spec::IpNet {
    s.parse().unwrap()
}

#[test]
fn full_spec_loads_into_expected_structs() {
    let path = data("full.yaml");
    let spec = load(&path, TYPES).unwrap();
    assert_eq!(spec.source.as_str(), path.display().to_string());

    assert_eq!(
        spec.settings,
        Settings {
            buffers: 32768,
            ring_size: 2048,
            batch: 64,
            hugepages: true,
            workers: 1,
            restart: RestartPolicy {
                policy: RestartMode::OnFailure,
                max_restarts: 5,
                backoff_ms: 250,
                hold_ms: 1000,
                standby: false,
                inline_panic: InlinePanic::Contain,
            },
            flow_table: FlowTableSettings {
                capacity: 131072,
                idle_timeout_ms: 10000,
                close_timeout_ms: 1000,
            },
            wakeup: WakeupSettings::default(),
            scheduler: SchedulerSettings::default(),
            backpressure: BackpressureSettings::default(),
            shells: true,
            domains: Vec::new(),
        }
    );

    let dir = data("");
    let expected_ports = vec![
        PortSpec {
            name: "gen".into(),
            kind: PortKind::Generator(GeneratorSpec {
                flows: 128,
                protocol: Protocol::Tcp,
                ip_version: IpVersionChoice::V4,
                size: SizeSpec::Imix,
                rate_pps: Some(1_000_000),
                count: Some(5_000_000),
                packets_per_flow: 100,
                src_prefix: net("10.0.0.0/16"),
                dst_prefix: net("10.1.0.0/16"),
                src_ports: PortRange::new(1024, 65535).unwrap(),
                dst_ports: PortRange::single(80),
            }),
            location: Location::new(18, 5),
        },
        PortSpec {
            name: "gen6".into(),
            kind: PortKind::Generator(GeneratorSpec {
                ip_version: IpVersionChoice::V6,
                size: SizeSpec::Fixed(1500),
                src_prefix: net("fd00::/64"),
                dst_prefix: net("fd01::/64"),
                ..GeneratorSpec::default()
            }),
            location: Location::new(31, 5),
        },
        PortSpec {
            name: "out".into(),
            kind: PortKind::Sink(SinkSpec { check_order: false }),
            location: Location::new(35, 5),
        },
        PortSpec {
            name: "trace".into(),
            kind: PortKind::PcapIn(PcapInSpec {
                path: dir.join("traces/in.pcap"),
                pace: Some(2.5),
                loops: 0,
            }),
            location: Location::new(38, 5),
        },
        PortSpec {
            name: "dump".into(),
            kind: PortKind::PcapOut(PcapOutSpec {
                path: dir.join("out/capture.pcap"),
                snaplen: 128,
            }),
            location: Location::new(43, 5),
        },
        PortSpec {
            name: "nic0".into(),
            kind: PortKind::AfXdp(NicSpec {
                interface: "eth0".into(),
                options: ConfigNode::from_json(serde_json::json!({ "queues": 4 })),
            }),
            location: Location::new(47, 5),
        },
    ];
    assert_eq!(spec.ports, expected_ports);

    assert_eq!(spec.nfs.len(), 3);
    let acl = &spec.nfs[0];
    assert_eq!((acl.name.as_str(), acl.nf_type.as_str()), ("acl", "acl"));
    assert_eq!(acl.isolation, Isolation::Inline);
    assert_eq!(acl.location, Location::new(53, 5));
    assert_eq!(
        acl.config,
        ConfigNode::from_json(serde_json::json!({
            "default": "drop",
            "rules": [
                { "src": "10.0.0.0/8", "action": "allow" },
                { "dst_port": 22, "action": "drop" },
            ]
        }))
    );
    let rule_src = acl.config.find("rules[0].src").unwrap();
    assert_eq!(rule_src.path(), "nfs[0].config.rules[0].src");
    assert_eq!(rule_src.location(), Location::new(59, 18));
    let mon = &spec.nfs[1];
    assert_eq!(mon.isolation, Isolation::Process);
    assert_eq!(mon.config, ConfigNode::empty_map());
    assert_eq!(mon.config.path(), "nfs[1].config");
    assert_eq!(
        spec.nfs[2].config.get("pool").unwrap().as_str(),
        Some("192.0.2.0/24")
    );

    let expected_chains = vec![
        ChainSpec {
            name: "web".into(),
            from: "gen".into(),
            matcher: Some(MatchSpec {
                proto: Some(6),
                src: None,
                dst: Some(net("10.1.0.0/16")),
                src_port: None,
                dst_port: Some(PortRange::single(80)),
                ip_version: Some(4),
            }),
            nfs: vec!["acl".into(), "mon".into()],
            to: "egress".into(),
            wakeup: None,
            tenant: None,
            location: Location::new(69, 5),
        },
        ChainSpec {
            wakeup: None,
            tenant: None,
            location: Location::new(78, 5),
            ..ChainSpec::new("rest", "gen", &["mon"], "out")
        },
        ChainSpec {
            wakeup: None,
            tenant: None,
            location: Location::new(82, 5),
            ..ChainSpec::new("egress", "trace", &["nat"], "dump")
        },
        ChainSpec {
            matcher: Some(MatchSpec {
                proto: Some(17),
                src_port: PortRange::new(1000, 2000),
                ..MatchSpec::default()
            }),
            wakeup: None,
            tenant: None,
            location: Location::new(86, 5),
            ..ChainSpec::new("v6", "gen6", &[], "nic0")
        },
    ];
    assert_eq!(spec.chains, expected_chains);
}

#[test]
fn resolved_helpers_follow_chain_links() {
    let spec = load(&data("full.yaml"), TYPES).unwrap();
    assert_eq!(spec.port("dump").unwrap().kind.kind_name(), "pcap_out");
    assert_eq!(spec.nf("nat").unwrap().nf_type, "nat");
    assert_eq!(spec.chain("rest").unwrap().to, "out");
    assert!(spec.port("acl").is_none());
    assert_eq!(
        spec.resolve_chain_path("web"),
        vec!["acl", "mon", "nat", "dump"]
    );
    let r = spec.resolve_chain("web").unwrap();
    assert_eq!(r.chains, vec!["web", "egress"]);
    assert_eq!(r.output, "dump");
    assert_eq!(spec.resolve_chain_path("v6"), vec!["nic0"]);
    assert!(spec.resolve_chain_path("nope").is_empty());
    let from_gen: Vec<&str> = spec.chains_from("gen").map(|c| c.name.as_str()).collect();
    assert_eq!(from_gen, vec!["web", "rest"]);
}

#[test]
fn minimal_spec_gets_documented_defaults() {
    let yaml = "ports:\n  - name: gen\n    kind: generator\n  - name: out\n    kind: sink\nchains:\n  - name: main\n    from: gen\n    to: out\n";
    let spec = sluice_spec::parse_str(yaml, "<generated>", &[]).unwrap();
    assert_eq!(spec.settings, Settings::default());
    assert_eq!(spec.settings.buffers, 16384);
    assert_eq!(spec.settings.ring_size, 1024);
    assert_eq!(spec.settings.batch, 32);
    assert_eq!(spec.settings.restart.policy, RestartMode::Always);
    assert_eq!(spec.settings.flow_table.capacity, 65536);
    assert_eq!(spec.settings.wakeup.rule, WakeRule::of(WakeupPolicy::Auto));
    assert_eq!(spec.settings.wakeup.rule.timeout_us(), 1000);
    assert_eq!(spec.settings.wakeup.busy_poll_us, None);
    let PortKind::Generator(g) = &spec.ports[0].kind else {
        panic!("not a generator")
    };
    assert_eq!(*g, GeneratorSpec::default());
    assert_eq!(g.flows, 64);
    assert_eq!(g.size, SizeSpec::Fixed(64));
    assert_eq!(g.src_prefix, net("10.0.0.0/16"));
    assert_eq!(g.dst_ports, PortRange::single(80));
    assert_eq!(
        spec.ports[1].kind,
        PortKind::Sink(SinkSpec { check_order: true })
    );
    assert!(spec.nfs.is_empty());
    assert_eq!(
        spec.chains[0],
        ChainSpec {
            wakeup: None,
            tenant: None,
            location: Location::new(7, 5),
            ..ChainSpec::new("main", "gen", &[], "out")
        }
    );
}

#[test]
fn reference_doc_example_is_valid() {
    let doc = include_str!("../../../docs/spec-reference.md");
    let start = doc.find("## Complete example").unwrap();
    let body = &doc[start..];
    let yaml_start = body.find("```yaml\n").unwrap() + "```yaml\n".len();
    let yaml_len = body[yaml_start..].find("```").unwrap();
    let yaml = &body[yaml_start..yaml_start + yaml_len];
    // Resolve the example's relative paths against tests/data.
    let source = data("doc-example.yaml");
    let spec = sluice_spec::parse_str(
        yaml,
        source.to_str().unwrap(),
        &["acl", "monitor", "forwarder"],
    )
    .unwrap();
    assert_eq!(
        spec.resolve_chain_path("dns"),
        vec!["acl", "rewrite", "dump"]
    );
    assert_eq!(spec.ports.len(), 4);
}
