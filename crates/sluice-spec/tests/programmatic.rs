//! Specs built by code: validation, lookups and helper types.

use sluice_spec::{
    parse_str, ChainSpec, GeneratorSpec, IpVersionChoice, Location, MatchSpec, NfSpec, PortKind,
    PortRange, PortSpec, SinkSpec, SourceName, Spec,
};

fn net(s: &str) -> sluice_spec::IpNet {
    s.parse().unwrap()
}

fn built() -> Spec {
    Spec {
        ports: vec![
            PortSpec::new("gen", PortKind::Generator(GeneratorSpec::default())),
            PortSpec::new("out", PortKind::Sink(SinkSpec::default())),
        ],
        nfs: vec![NfSpec::new("mon", "mon"), NfSpec::new("acl", "acl")],
        chains: vec![
            ChainSpec {
                matcher: Some(MatchSpec {
                    proto: Some(6),
                    ..MatchSpec::default()
                }),
                ..ChainSpec::new("tail", "gen", &["mon"], "out")
            },
            ChainSpec::new("main", "gen", &["acl"], "tail"),
        ],
        ..Spec::default()
    }
}

#[test]
fn built_spec_validates_and_resolves() {
    let spec = built();
    assert_eq!(spec.source, SourceName::generated());
    spec.validate(&["acl", "mon"]).unwrap();
    assert_eq!(spec.resolve_chain_path("main"), vec!["acl", "mon", "out"]);

    let mut shadowed = built();
    shadowed.chains.swap(0, 1);
    assert_eq!(
        shadowed.validate(&["acl", "mon"]).unwrap_err().to_string(),
        "<generated>: chains[1].match: chain \"tail\" would never see traffic: chain \"main\", listed earlier with from: gen, \
         matches everything it matches (the first match wins; list the more specific chain first)"
    );
    assert_eq!(spec.resolve_chain_path("tail"), vec!["mon", "out"]);
}

#[test]
fn built_spec_errors_have_no_position() {
    let mut spec = built();
    spec.settings.ring_size = 1000;
    assert_eq!(
        spec.validate(&["acl", "mon"]).unwrap_err().to_string(),
        "<generated>: settings.ring_size: must be a power of two between 64 and 65536, got 1000 (nearest: 512 or 1024)"
    );

    let mut spec = built();
    spec.chains[0].nfs.push("nat".into());
    let e = spec.validate(&["acl", "mon"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "<generated>: chains[0].nfs[1]: no NF named \"nat\" (defined NFs: mon, acl)"
    );
    assert_eq!(e.location(), Location::GENERATED);

    let spec = built();
    assert_eq!(
        spec.validate(&[]).unwrap_err().to_string(),
        "<generated>: nfs[0].type: unknown NF type \"mon\" (no NF types are known)"
    );

    let mut spec = built();
    spec.ports[0].kind = PortKind::Generator(GeneratorSpec {
        src_ports: PortRange { lo: 9, hi: 1 },
        ..GeneratorSpec::default()
    });
    assert_eq!(
        spec.validate(&["acl", "mon"]).unwrap_err().to_string(),
        "<generated>: ports[0].src_ports: invalid port range 9-1: the first port must not exceed the last"
    );

    let mut spec = built();
    spec.ports[0].name = "Gen".into();
    assert_eq!(
        spec.validate(&["acl", "mon"]).unwrap_err().message,
        "invalid name \"Gen\": names are 1 to 32 characters of a-z, 0-9, _ and -"
    );
}

#[test]
fn parsed_then_edited_spec_reports_entity_location() {
    let yaml = "ports:\n  - { name: gen, kind: generator }\n  - { name: out, kind: sink }\nchains:\n  - { name: main, from: gen, to: out }\n";
    let mut spec = parse_str(yaml, "edit.yaml", &[]).unwrap();
    spec.validate(&[]).unwrap();
    spec.chains[0].to = "gone".into();
    assert_eq!(
        spec.validate(&[]).unwrap_err().to_string(),
        "edit.yaml:5:5: chains[0].to: no port or chain named \"gone\" (output ports: out; chains: main)"
    );
}

#[test]
fn match_cover_rules() {
    let all = MatchSpec::default();
    let udp = MatchSpec {
        proto: Some(17),
        ..MatchSpec::default()
    };
    let dns = MatchSpec {
        proto: Some(17),
        dst_port: Some(PortRange::single(53)),
        dst: Some(net("10.1.0.0/16")),
        ..MatchSpec::default()
    };
    let v4 = MatchSpec {
        ip_version: Some(4),
        ..MatchSpec::default()
    };
    assert!(all.is_match_all() && !udp.is_match_all());
    assert!(all.covers(&udp) && udp.covers(&dns) && !dns.covers(&udp));
    assert!(v4.covers(&dns), "a v4 dst implies IPv4");
    assert!(!v4.covers(&udp));
    assert_eq!(dns.implied_ip_version(), Some(4));
    let wide = MatchSpec {
        dst: Some(net("10.0.0.0/8")),
        dst_port: PortRange::new(1, 1024),
        ..MatchSpec::default()
    };
    assert!(wide.covers(&dns));
}

#[test]
fn generator_prefix_helpers() {
    let g = GeneratorSpec {
        ip_version: IpVersionChoice::Mixed,
        ..GeneratorSpec::default()
    };
    assert_eq!(
        g.prefixes_for(false),
        (net("10.0.0.0/16"), net("10.1.0.0/16"))
    );
    assert_eq!(
        g.prefixes_for(true),
        (net("64:ff9b::a00:0/112"), net("64:ff9b::a01:0/112"))
    );
    assert_eq!(
        GeneratorSpec::default_src_prefix(IpVersionChoice::V6),
        net("fd00::/64")
    );

    let yaml =
        "ports:\n  - { name: gen, kind: generator, ip_version: mixed, src_prefix: fd00::/64 }\n";
    assert_eq!(
        parse_str(yaml, "m.yaml", &[]).unwrap_err().to_string(),
        "m.yaml:2:66: ports[0].src_prefix: src_prefix fd00::/64 is IPv6, but with ip_version: mixed the prefixes must be IPv4 (IPv6 flows embed them in 64:ff9b::/96)"
    );
}

#[test]
fn port_kind_capabilities() {
    let sink = PortKind::Sink(SinkSpec::default());
    let generator = PortKind::Generator(GeneratorSpec::default());
    let nic = PortKind::Tap(Default::default());
    assert!(generator.is_input() && !generator.is_output());
    assert!(!sink.is_input() && sink.is_output());
    assert!(nic.is_input() && nic.is_output() && nic.is_reserved());
    assert_eq!(nic.kind_name(), "tap");
    assert_eq!(PortKind::NAMES.len(), 8);
}

#[test]
fn reserved_nic_kinds_parse_with_extra_keys() {
    let yaml = "ports:
  - name: nic
    kind: dpdk
    interface: '0000:03:00.0'
    queues: 2
    rss: { hash: toeplitz }
chains:
  - { name: main, from: nic, to: nic }
";
    let spec = parse_str(yaml, "nic.yaml", &[]).unwrap();
    let PortKind::Dpdk(n) = &spec.ports[0].kind else {
        panic!("not dpdk")
    };
    assert_eq!(n.interface, "0000:03:00.0");
    assert_eq!(n.options.get("queues").unwrap().as_u64(), Some(2));
    assert_eq!(
        n.options.find("rss.hash").unwrap().path(),
        "ports[0].rss.hash"
    );

    let e = parse_str("ports:\n  - { name: nic, kind: tap }\n", "nic.yaml", &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "nic.yaml:2:5: ports[0]: missing required key \"interface\" (the network interface name)"
    );
}
