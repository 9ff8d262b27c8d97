//! One test per class of spec error: each checks the exact file, line,
//! column, field path and message.

use sluice_spec::{parse_str, SpecError};

const TYPES: &[&str] = &["acl", "mon", "nat"];

/// Parses `yaml` (a leading newline is dropped so that line 1 is the first
/// written line) and returns the error.
fn err(yaml: &str) -> SpecError {
    let yaml = yaml.strip_prefix('\n').unwrap_or(yaml);
    match parse_str(yaml, "bad.yaml", TYPES) {
        Ok(spec) => panic!("spec was accepted: {spec:#?}"),
        Err(e) => e,
    }
}

/// Checks the full rendered message.
#[track_caller]
fn check(yaml: &str, expected: &str) {
    assert_eq!(err(yaml).to_string(), expected);
}

/// A valid prefix of a spec: ports gen (line 2), out (line 4); NFs acl
/// (line 7), mon (line 9). Tests append `chains:` from line 11 on.
const BASE: &str = "\
ports:
  - name: gen
    kind: generator
  - name: out
    kind: sink
nfs:
  - name: acl
    type: acl
  - name: mon
    type: mon
";

fn with_base(rest: &str) -> String {
    format!("{BASE}{}", rest.strip_prefix('\n').unwrap_or(rest))
}

#[test]
fn yaml_syntax_error_has_line() {
    let e = err("
ports:
  - name: gen
    kind: [generator
chains: []
");
    assert_eq!(e.file, "bad.yaml");
    assert_eq!(e.line, 4);
    assert!(e.message.starts_with("YAML syntax error: "), "{e}");
    assert_eq!(e.field, "ports[0].kind[0]");

    let e = err("
ports:
  - name: gen
   kind: generator
");
    assert_eq!(
        (e.line, e.message.starts_with("YAML syntax error")),
        (3, true),
        "{e}"
    );
}

/// An error at the end of a text without a final line break names the
/// end of the last line, not a line after it (the scanner's mark moves
/// there; found by `fuzz/` spec_load). Lone CRs end lines, as in YAML.
#[test]
fn a_syntax_error_at_the_end_stays_inside_the_text() {
    let e = err("nfs:\n  - { name: a, type: acl");
    assert_eq!((e.line, e.column), (2, 25), "{e}");
    assert!(e.message.starts_with("YAML syntax error"), "{e}");
    let e = err("nfs:\r  - { name: a, type: acl");
    assert_eq!((e.line, e.column), (2, 25), "{e}");
    // With the final line break, the end is the start of the empty line.
    let e = err("nfs:\n  - { name: a, type: acl\n");
    assert_eq!((e.line, e.column), (3, 1), "{e}");
    // A node there, not only an error: the null key of a last `? `.
    let e = err("# a comment\n? # another");
    assert_eq!((e.line, e.column), (2, 12), "{e}");
    assert!(e.message.contains("unknown key"), "{e}");
}

#[test]
fn error_struct_fields_and_display() {
    let e = err(&with_base(
        "
chains:
  - name: main
    from: gen
    nfs: [acl, mon, mon2]
    to: out
",
    ));
    assert_eq!(
        e,
        SpecError {
            file: "bad.yaml".into(),
            line: 14,
            column: 21,
            field: "chains[0].nfs[2]".into(),
            message: "no NF named \"mon2\" (defined NFs: acl, mon); did you mean \"mon\"?".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "bad.yaml:14:21: chains[0].nfs[2]: no NF named \"mon2\" (defined NFs: acl, mon); did you mean \"mon\"?"
    );
}

#[test]
fn unknown_keys() {
    check(
        "
ports:
  - name: gen
    kind: generator
    flow: 10
",
        "bad.yaml:4:5: ports[0].flow: unknown key \"flow\" in a generator port (valid keys: name, kind, flows, protocol, ip_version, size, rate_pps, count, packets_per_flow, src_prefix, dst_prefix, src_ports, dst_ports); did you mean \"flows\"?",
    );
    check(
        "
settings:
  ringsize: 64
",
        "bad.yaml:2:3: settings.ringsize: unknown key \"ringsize\" in settings (valid keys: buffers, ring_size, batch, hugepages, workers, restart, flow_table, wakeup, scheduler, backpressure, shells, domains); did you mean \"ring_size\"?",
    );
    check(
        "
port: []
",
        "bad.yaml:1:1: port: unknown key \"port\" in the spec (valid keys: version, settings, ports, nfs, chains); did you mean \"ports\"?",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    match: { protocol: udp }
    to: out
"),
        "bad.yaml:14:14: chains[0].match.protocol: unknown key \"protocol\" in a match (valid keys: proto, src, dst, src_port, dst_port, ip_version)",
    );
}

#[test]
fn wrong_types() {
    check(
        "
ports:
  - name: gen
    kind: generator
    flows: many
",
        "bad.yaml:4:12: ports[0].flows: expected an integer, found string \"many\"",
    );
    check(
        "
settings:
  hugepages: yes
",
        "bad.yaml:2:14: settings.hugepages: expected a boolean (true or false), found string \"yes\"",
    );
    check(
        "
ports:
  name: gen
",
        "bad.yaml:2:3: ports: expected a sequence (a list of `- ...` entries), found a mapping",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    nfs: acl
    to: out
"),
        "bad.yaml:14:10: chains[0].nfs: expected a sequence of NF names, e.g. [acl, mon], found string \"acl\"",
    );
    check(
        "
ports:
  - name: 5
    kind: sink
",
        "bad.yaml:2:11: ports[0].name: expected a string, found integer 5",
    );
}

#[test]
fn missing_required_key() {
    check(
        "
ports:
  - name: gen
    flows: 3
",
        "bad.yaml:2:5: ports[0]: missing required key \"kind\" (one of: generator, sink, pcap_in, pcap_out, af_xdp, af_packet, tap, dpdk)",
    );
}

#[test]
fn unknown_port_kind() {
    check(
        "
ports:
  - name: gen
    kind: generater
",
        "bad.yaml:3:11: ports[0].kind: unknown port kind \"generater\" (valid: generator, sink, pcap_in, pcap_out, af_xdp, af_packet, tap, dpdk); did you mean \"generator\"?",
    );
}

#[test]
fn unknown_nf_type() {
    check(
        "
ports:
  - { name: gen, kind: generator }
nfs:
  - name: fw
    type: firewall
",
        "bad.yaml:5:11: nfs[0].type: unknown NF type \"firewall\" (known types: acl, mon, nat)",
    );
}

#[test]
fn duplicate_names_point_at_second_and_mention_first() {
    check(
        &with_base("
chains:
  - name: gen
    from: gen
    to: out
"),
        "bad.yaml:12:11: chains[0].name: duplicate name \"gen\": already used by port ports[0] (line 2); names must be unique across ports, NFs and chains",
    );
    check(
        "
ports:
  - name: a
    kind: generator
  - name: a
    kind: sink
chains: [{ name: c, from: a, to: a }]
",
        "bad.yaml:4:11: ports[1].name: duplicate name \"a\": already used by port ports[0] (line 2); names must be unique across ports, NFs and chains",
    );
}

#[test]
fn duplicate_yaml_key() {
    check(
        "
ports:
  - name: gen
    kind: generator
    flows: 1
    flows: 2
",
        "bad.yaml:5:5: ports[0].flows: duplicate key \"flows\" (first given at line 4)",
    );
}

#[test]
fn chain_names_missing_things() {
    check(
        &with_base("
chains:
  - name: main
    from: gen0
    to: out
"),
        "bad.yaml:13:11: chains[0].from: no port named \"gen0\" (input ports: gen); did you mean \"gen\"?",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    to: nowhere
"),
        "bad.yaml:14:9: chains[0].to: no port or chain named \"nowhere\" (output ports: out; chains: main)",
    );
    check(
        &with_base(
            "
chains:
  - name: main
    from: gen
    nfs: [acl, out]
    to: out
",
        ),
        "bad.yaml:14:16: chains[0].nfs[1]: \"out\" is a port, not an NF (defined NFs: acl, mon)",
    );
}

#[test]
fn from_must_be_input_and_to_must_be_output() {
    check(
        &with_base("
chains:
  - name: main
    from: out
    to: out
"),
        "bad.yaml:13:11: chains[0].from: port \"out\" is a sink port, which cannot feed a chain (input ports: gen)",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    to: gen
"),
        "bad.yaml:14:9: chains[0].to: port \"gen\" is a generator port, which cannot receive traffic (output ports: out; chains: main)",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    to: acl
"),
        "bad.yaml:14:9: chains[0].to: \"acl\" is an NF; to must name an output port or a chain (output ports: out; chains: main); list NFs under `nfs`",
    );
}

#[test]
fn chain_link_cycle_is_named() {
    check(
        &with_base("
chains:
  - name: main
    from: gen
    to: b
  - name: b
    from: gen
    match: { proto: udp }
    to: c
  - name: c
    from: gen
    match: { proto: tcp }
    to: main
"),
        "bad.yaml:14:9: chains[0].to: chain links form a cycle: main -> b -> c -> main (packets would never leave)",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    to: main
"),
        "bad.yaml:14:9: chains[0].to: chain links form a cycle: main -> main (packets would never leave)",
    );
}

#[test]
fn nf_twice_in_one_chain() {
    check(
        &with_base("
chains:
  - name: main
    from: gen
    nfs:
      - acl
      - mon
      - acl
    to: out
"),
        "bad.yaml:17:9: chains[0].nfs[2]: NF \"acl\" appears twice in chain \"main\" (also at nfs[0]): a packet cannot pass the same NF twice",
    );
}

#[test]
fn nf_twice_through_chain_links() {
    check(
        &with_base("
chains:
  - name: main
    from: gen
    nfs: [acl]
    to: tail
  - name: tail
    from: gen
    match: { proto: tcp }
    nfs: [mon, acl]
    to: out
"),
        "bad.yaml:15:9: chains[0].to: packets of chain \"main\" would pass NF \"acl\" twice: in chain \"main\" and again in chain \"tail\" (a packet cannot pass the same NF twice)",
    );
}

#[test]
fn invalid_cidr() {
    check(
        &with_base("
chains:
  - name: main
    from: gen
    match:
      src: 10.0.0/33
    to: out
"),
        "bad.yaml:15:12: chains[0].match.src: invalid CIDR prefix \"10.0.0/33\": expected e.g. 10.0.0.0/8 or fd00::/64",
    );
    check(
        "
ports:
  - name: gen
    kind: generator
    dst_prefix: 10.1.2.3/16
",
        "bad.yaml:4:17: ports[0].dst_prefix: prefix 10.1.2.3/16 has host bits set (did you mean 10.1.0.0/16?)",
    );
    check(
        "
ports:
  - name: gen
    kind: generator
    src_prefix: fd00::/64
",
        "bad.yaml:4:17: ports[0].src_prefix: src_prefix fd00::/64 is IPv6 but ip_version is 4",
    );
}

#[test]
fn invalid_port_range() {
    check(
        "
ports:
  - name: gen
    kind: generator
    src_ports: 2000-1000
",
        "bad.yaml:4:16: ports[0].src_ports: invalid port range \"2000-1000\": the first port must not exceed the last",
    );
    check(
        &with_base("
chains:
  - name: main
    from: gen
    match: { dst_port: 70000 }
    to: out
"),
        "bad.yaml:14:24: chains[0].match.dst_port: must be an integer between 0 and 65535, got 70000",
    );
}

#[test]
fn number_out_of_range() {
    check(
        "
settings:
  batch: 512
",
        "bad.yaml:2:10: settings.batch: must be an integer between 1 and 256, got 512",
    );
    check(
        "
ports:
  - name: gen
    kind: generator
    size: 59
",
        "bad.yaml:4:11: ports[0].size: must be an integer between 60 and 2048, got 59",
    );
    check(
        "
ports:
  - name: gen
    kind: generator
    packets_per_flow: -3
",
        "bad.yaml:4:23: ports[0].packets_per_flow: must be an integer between 3 and 4294967295, got -3",
    );
    check(
        "
settings:
  flow_table: { idle_timeout_ms: 18446744073709551615 }
",
        "bad.yaml:2:34: settings.flow_table.idle_timeout_ms: must be an integer between 1 and 31536000000, got 18446744073709551615",
    );
    check(
        "
settings:
  ring_size: 64
  batch: 128
",
        "bad.yaml:3:10: settings.batch: batch (128) must not exceed ring_size (64)",
    );
    check(
        "
settings:
  shells: false
  restart: { standby: true }
",
        "bad.yaml:3:23: settings.restart.standby: a standby is forked from its NF's shell: `standby: true` needs `shells: true`",
    );
    check(
        "
settings:
  restart: { inline_panic: contian }
",
        "bad.yaml:2:28: settings.restart.inline_panic: unknown inline panic policy \"contian\" (valid: contain, stop); did you mean \"contain\"?",
    );
    check(
        "
ports:
  - { name: gen, kind: generator }
nfs:
  - { name: fw, type: acl, replicas: 1025 }
",
        "bad.yaml:4:38: nfs[0].replicas: must be an integer between 1 and 1024, got 1025",
    );
    check(
        "
ports:
  - { name: gen, kind: generator }
nfs:
  - { name: fw, type: acl, replicas: 2, steer: least_loaded }
",
        "bad.yaml:4:48: nfs[0].steer: unknown steer \"least_loaded\" (valid: hash, shortest_queue, per_flow, per_class)",
    );
}

#[test]
fn a_draining_version_is_checked() {
    check(
        "
ports:
  - { name: gen, kind: generator }
nfs:
  - { name: fw, type: acl, generation: 2, draining: { generation: 2, config: {} } }
",
        "bad.yaml:4:67: nfs[0].draining.generation: the draining version's generation 2 is the NF's own: a rollout retires an earlier version",
    );
    check(
        "
ports:
  - { name: gen, kind: generator }
nfs:
  - { name: fw, type: acl, generation: 1, draining: { generation: 0 } }
",
        "bad.yaml:4:53: nfs[0].draining: missing required key \"config\" (the config the version being retired runs)",
    );
    check(
        "
ports:
  - { name: gen, kind: generator }
nfs:
  - { name: fw, type: acl, generation: 1, draining: { generation: 0, config: {}, steer: hash } }
",
        "bad.yaml:4:82: nfs[0].draining.steer: unknown key \"steer\" in draining (valid keys: generation, config, replicas)",
    );
}

#[test]
fn pool_bounds_are_checked() {
    let base = "
ports:
  - { name: gen, kind: generator }
nfs:
";
    for (nf, field, says) in [
        (
            "{ name: fw, type: acl, pool: { min: 2, max: 8 } }",
            "nfs[0].pool",
            "pool applies to `steer: per_flow`",
        ),
        (
            "{ name: fw, type: acl, steer: per_flow, pool: { min: 8, max: 2 } }",
            "nfs[0].pool",
            "must hold 1 <= min <= max <= 1024",
        ),
        (
            "{ name: fw, type: acl, steer: per_flow, replicas: 9, pool: { min: 2, max: 8 } }",
            "nfs[0].replicas",
            "outside the pool's bounds",
        ),
    ] {
        let e = parse_str(&format!("{base}  - {nf}\n"), "bad.yaml", TYPES).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(says), "{e}");
    }
    let spec = parse_str(
        "ports:\n  - { name: gen, kind: generator }\n  - { name: out, kind: sink }\nnfs:\n  - { name: fw, type: acl, steer: per_flow, pool: { min: 3, max: 8 } }\nchains:\n  - { name: c, from: gen, nfs: [fw], to: out }\n",
        "ok.yaml",
        TYPES,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.nfs[0].replicas, 3, "a pool starts at its least");
}

#[test]
fn replicas_built_by_code_are_range_checked() {
    let mut spec = parse_str(
        &with_base("chains:\n  - { name: c, from: gen, nfs: [acl], to: out }\n"),
        "bad.yaml",
        TYPES,
    )
    .unwrap();
    spec.nfs[0].replicas = 0;
    let e = spec.validate(TYPES).unwrap_err();
    assert_eq!(e.field, "nfs[0].replicas");
    assert_eq!(e.message, "replicas 0 is out of range (1 to 1024)");
}

#[test]
fn non_power_of_two() {
    check(
        "
settings:
  ring_size: 1000
",
        "bad.yaml:2:14: settings.ring_size: must be a power of two between 64 and 65536, got 1000 (nearest: 512 or 1024)",
    );
    check(
        "
settings:
  flow_table:
    capacity: 100000
",
        "bad.yaml:3:15: settings.flow_table.capacity: must be a power of two between 1024 and 16777216, got 100000 (nearest: 65536 or 131072)",
    );
}

#[test]
fn wakeup_settings_are_checked() {
    check(
        "
settings:
  wakeup:
    max_batch: 0
",
        "bad.yaml:3:16: settings.wakeup.max_batch: must be an integer between 1 and 256, got 0",
    );
    check(
        "
settings:
  wakeup: { timeout_us: 1000000 }
",
        "bad.yaml:2:25: settings.wakeup.timeout_us: must be an integer between 1 and 100000, got 1000000",
    );
    check(
        "
settings:
  wakeup: { max_batch: 8, timeout: 5 }
",
        "bad.yaml:2:27: settings.wakeup.timeout: unknown key \"timeout\" in wakeup (valid keys: policy, max_batch, threshold, timeout_us, short_flow_packets, busy_poll_us)",
    );
    check(
        "
settings:
  wakeup: { policy: every_packets }
",
        "bad.yaml:2:21: settings.wakeup.policy: unknown wake-up policy \"every_packets\" (valid: auto, hybrid, every_packet, threshold, adaptive); did you mean \"every_packet\"?",
    );
    check(
        "
settings:
  wakeup: { policy: adaptive, threshold: 8 }
",
        "bad.yaml:2:42: settings.wakeup.threshold: wake-up policy adaptive takes no `threshold` (it takes max_batch, timeout_us, short_flow_packets)",
    );
    check(
        "
settings:
  wakeup: { policy: every_packet, timeout_us: 100 }
",
        "bad.yaml:2:47: settings.wakeup.timeout_us: wake-up policy every_packet takes no `timeout_us` (it takes no parameters)",
    );
    check(
        "
settings:
  wakeup: { busy_poll_us: 2000000 }
",
        "bad.yaml:2:27: settings.wakeup.busy_poll_us: must be an integer between 0 and 1000000, got 2000000",
    );
    check(
        "
settings:
  wakeup: { busy_poll_us: -1 }
",
        "bad.yaml:2:27: settings.wakeup.busy_poll_us: must be an integer between 0 and 1000000, got -1",
    );
    check(
        "
settings:
  scheduler: { policy: fifo }
",
        "bad.yaml:2:24: settings.scheduler.policy: unknown scheduler policy \"fifo\" (valid: hybrid, turns, auto)",
    );
    check(
        "
settings:
  scheduler: { slice_us: 0 }
",
        "bad.yaml:2:26: settings.scheduler.slice_us: must be an integer between 1 and 100000, got 0",
    );
    check(
        "
settings:
  scheduler: { order: chain }
",
        "bad.yaml:2:16: settings.scheduler.order: unknown key \"order\" in scheduler (valid keys: policy, slice_us, yield_every, kernel_class)",
    );
    check(
        "
settings:
  scheduler: { yield_every: 1025 }
",
        "bad.yaml:2:29: settings.scheduler.yield_every: must be an integer between 0 and 1024, got 1025",
    );
    check(
        "
settings:
  scheduler: { kernel_class: fifo }
",
        "bad.yaml:2:30: settings.scheduler.kernel_class: unknown kernel class \"fifo\" (valid: normal, round_robin)",
    );
}

#[test]
fn empty_ports_and_chains() {
    check(
        "
ports: []
chains: []
",
        "bad.yaml:1:8: ports: no ports defined: a spec needs at least one port",
    );
    check(
        "
ports:
  - { name: gen, kind: generator }
",
        "bad.yaml:1:1: chains: no chains defined: a spec needs at least one chain",
    );
    check(
        "",
        "bad.yaml:1:1: the spec is empty: expected a mapping with at least `ports` and `chains`",
    );
    check(
        "# only a comment\n",
        "bad.yaml:1:1: the spec is empty: expected a mapping with at least `ports` and `chains`",
    );
}

#[test]
fn ambiguous_chains_from_one_port() {
    check(
        &with_base("
chains:
  - name: a
    from: gen
    to: out
  - name: b
    from: gen
    to: out
"),
        "bad.yaml:16:11: chains[1].from: ambiguous: chain \"b\" has no match (all traffic) as chain \"a\" (line 12), also from port \"gen\"; chains from one port are tried in order and the first match wins, so \"b\" would never see traffic",
    );
    check(
        &with_base("
chains:
  - name: a
    from: gen
    match: { proto: udp, dst_port: 53 }
    to: out
  - name: b
    from: gen
    match: { dst_port: 53, proto: 17 }
    to: out
"),
        "bad.yaml:18:12: chains[1].match: ambiguous: chain \"b\" has the same match as chain \"a\" (line 12), also from port \"gen\"; chains from one port are tried in order and the first match wins, so \"b\" would never see traffic",
    );
    check(
        &with_base("
chains:
  - name: a
    from: gen
    match: { dst: 10.0.0.0/8 }
    to: out
  - name: b
    from: gen
    match: { dst: 10.1.0.0/16, proto: tcp }
    to: out
"),
        "bad.yaml:18:12: chains[1].match: chain \"b\" would never see traffic: chain \"a\" (line 12), listed earlier with from: gen, matches everything it matches (the first match wins; list the more specific chain first)",
    );
}

#[test]
fn inconsistent_match() {
    check(
        &with_base("
chains:
  - name: main
    from: gen
    match: { proto: icmp, dst_port: 80 }
    to: out
"),
        "bad.yaml:14:37: chains[0].match.dst_port: dst_port only applies to tcp, udp and sctp, but proto is icmp",
    );
    check(
        &with_base(
            "
chains:
  - name: main
    from: gen
    match: { src: 10.0.0.0/8, dst: fd00::/8 }
    to: out
",
        ),
        "bad.yaml:14:36: chains[0].match.dst: dst fd00::/8 is IPv6 but src 10.0.0.0/8 is IPv4",
    );
}

#[test]
fn pcap_files_must_exist() {
    check(
        "
ports:
  - name: trace
    kind: pcap_in
    path: no/such/file.pcap
",
        "bad.yaml:4:11: ports[0].path: pcap file no/such/file.pcap does not exist (relative paths are resolved against the spec file's directory)",
    );
    check(
        "
ports:
  - name: dump
    kind: pcap_out
    path: no/such/dir/out.pcap
",
        "bad.yaml:4:11: ports[0].path: directory no/such/dir for pcap file no/such/dir/out.pcap does not exist",
    );
}

#[test]
fn yaml_features_we_reject() {
    check(
        "
ports: []
---
ports: []
",
        "bad.yaml:2:1: a spec file must hold exactly one YAML document (found a second `---`)",
    );
    check(
        "
ports:
  - !custom { name: x }
",
        "bad.yaml:2:5: ports[0]: unsupported YAML tag !custom",
    );
    check(
        "
? [a, b]
: c
",
        "bad.yaml:1:3: mapping keys must be plain scalars (strings), not sequences or mappings",
    );
}

#[test]
fn unreadable_file() {
    let e = sluice_spec::load(std::path::Path::new("/no/such/spec.yaml"), TYPES).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_str()),
        ("/no/such/spec.yaml", 0, "")
    );
    assert!(
        e.to_string()
            .starts_with("/no/such/spec.yaml: cannot read spec file: "),
        "{e}"
    );
}

#[test]
fn unsupported_version() {
    check(
        "version: 2\n",
        "bad.yaml:1:10: version: unsupported spec version 2 (this sluice reads version 1)",
    );
}

#[test]
fn workers_need_shardable_ports() {
    let spec = |settings: &str, ports: &str, isolation: &str| {
        format!(
            "settings:\n  workers: 2\n{settings}ports:\n{ports}nfs:\n  - name: acl\n    type: acl\n    isolation: {isolation}\nchains:\n  - name: c\n    from: gen\n    nfs: [acl]\n    to: out\n"
        )
    };
    let gen_sink = "  - name: gen\n    kind: generator\n  - name: out\n    kind: sink\n";
    // NFs are replicated per worker whatever their isolation.
    for isolation in ["inline", "process"] {
        let ok = parse_str(&spec("", gen_sink, isolation), "ok.yaml", TYPES).unwrap();
        assert_eq!(ok.settings.workers, 2);
    }
    check(
        &spec(
            "",
            "  - name: gen\n    kind: generator\n  - name: out\n    kind: pcap_out\n    path: /tmp/x.pcap\n",
            "inline",
        ),
        "bad.yaml:7:11: ports[1].kind: port out is of kind `pcap_out`, which one worker serves; settings.workers = 2 is supported with generator, sink and af_packet ports (set `workers: 1`)",
    );
    check(
        &spec(
            "",
            "  - name: gen\n    kind: generator\n    flows: 1\n  - name: out\n    kind: sink\n",
            "inline",
        ),
        "bad.yaml:6:12: ports[0].flows: generator gen has 1 flows but settings.workers = 2: each worker sends its own share of the flows, so it needs at least one flow per worker",
    );
    // af_packet ports are shared through a symmetric fanout group.
    let wire = |fanout: &str| {
        format!("  - name: gen\n    kind: af_packet\n    interface: veth0\n{fanout}  - name: out\n    kind: af_packet\n    interface: veth1\n")
    };
    parse_str(&spec("", &wire(""), "inline"), "ok.yaml", TYPES).unwrap();
    parse_str(
        &spec("", &wire("    fanout: hash\n"), "inline"),
        "ok.yaml",
        TYPES,
    )
    .unwrap();
    check(
        &spec("", &wire("    fanout: lb\n"), "inline"),
        "bad.yaml:7:13: ports[0].fanout: port gen has fanout `lb`, but settings.workers = 2 spreads its packets over the workers with the kernel's fanout, and only `hash` (symmetric: both directions of a flow reach the same worker) keeps each flow on one worker; use `fanout: hash` or set `workers: 1`",
    );
    check(
        &spec(
            "",
            "  - name: gen\n    kind: af_xdp\n    interface: veth0\n  - name: out\n    kind: sink\n",
            "inline",
        ),
        "bad.yaml:5:11: ports[0].kind: port gen is of kind `af_xdp`, which one worker serves; settings.workers = 2 is supported with generator, sink and af_packet ports (set `workers: 1`)",
    );
}

#[test]
fn chains_sharing_an_nf_must_agree_on_its_wake_up_rule() {
    let e = err(&with_base(
        "
chains:
  - { name: a, from: gen, match: { dst_port: 1 }, nfs: [acl], to: out, wakeup: { policy: every_packet } }
  - { name: b, from: gen, match: { dst_port: 2 }, nfs: [acl], to: out, wakeup: { policy: adaptive } }
",
    ));
    assert_eq!(e.field, "chains[1].wakeup", "{e}");
    assert_eq!(e.line, 13, "{e}");
    assert!(
        e.message
            .contains("NF acl is in chains a and b whose wake-up rules differ; give the NF a `wakeup` of its own"),
        "{e}"
    );
    // The NF's own rule settles it.
    let yaml = with_base(
        "
chains:
  - { name: a, from: gen, match: { dst_port: 1 }, nfs: [acl], to: out, wakeup: { policy: every_packet } }
  - { name: b, from: gen, match: { dst_port: 2 }, nfs: [acl], to: out, wakeup: { policy: adaptive } }
",
    )
    .replace(
        "    type: acl\n",
        "    type: acl\n    wakeup: { policy: threshold, threshold: 4 }\n",
    );
    let spec = parse_str(&yaml, "ok.yaml", TYPES).unwrap();
    let rule = spec.wakeup_of("acl");
    assert_eq!(rule.policy, sluice_spec::WakeupPolicy::Threshold);
    assert_eq!(rule.threshold(), 4);
    assert_eq!(spec.wakeup_of("mon"), spec.settings.wakeup.rule);
    // All rules at once (the compiler's way) agree with one at a time.
    let all = spec.wakeup_rules();
    assert_eq!(all.len(), spec.nfs.len());
    for n in &spec.nfs {
        assert_eq!(all[n.name.as_str()], spec.wakeup_of(&n.name), "{}", n.name);
    }
    // A chain's rule applies to its NFs that have none of their own.
    let yaml = with_base(
        "
chains:
  - { name: a, from: gen, nfs: [acl, mon], to: out, wakeup: { policy: every_packet } }
",
    );
    let spec = parse_str(&yaml, "ok.yaml", TYPES).unwrap();
    let all = spec.wakeup_rules();
    assert_eq!(all["mon"].policy, sluice_spec::WakeupPolicy::EveryPacket);
    assert_eq!(all["mon"], spec.wakeup_of("mon"));
}

#[test]
fn an_inline_nf_takes_no_wake_up_rule() {
    let yaml = with_base("\nchains:\n  - { name: a, from: gen, nfs: [acl], to: out }\n").replace(
        "    type: acl\n",
        "    type: acl\n    isolation: inline\n    wakeup: { policy: every_packet }\n",
    );
    let e = err(&yaml);
    assert_eq!(e.field, "nfs[0].wakeup", "{e}");
    assert!(e.message.contains("wakeup applies to process NFs"), "{e}");
}

#[test]
fn an_inline_nf_takes_no_sandbox() {
    let yaml = with_base("\nchains:\n  - { name: a, from: gen, nfs: [acl], to: out }\n").replace(
        "    type: acl\n",
        "    type: acl\n    isolation: inline\n    sandbox: off\n",
    );
    let e = err(&yaml);
    assert_eq!(e.field, "nfs[0].sandbox", "{e}");
    assert!(e.message.contains("sandbox applies to process NFs"), "{e}");
}

#[test]
fn a_bad_sandbox_is_named_where_it_is() {
    let yaml = with_base("\nchains:\n  - { name: a, from: gen, nfs: [acl], to: out }\n").replace(
        "    type: acl\n",
        "    type: acl\n    sandbox: { namespaces: [ipc, pid] }\n",
    );
    let e = err(&yaml);
    assert_eq!(e.field, "nfs[0].sandbox.namespaces[1]", "{e}");
    assert!(e.message.contains("unknown namespace \"pid\""), "{e}");
    assert_eq!(e.line, 9, "{e}");
}

#[test]
fn a_tenants_chain_stays_among_its_own_and_the_operators_nfs() {
    let spec = "
ports:
  - { name: gen, kind: generator }
  - { name: out, kind: sink }
nfs:
  - { name: acl, type: acl, tenant: blue }
  - { name: mon, type: mon, tenant: red }
  - { name: nat, type: nat }
chains:
  - { name: a, from: gen, match: { dst_port: 1 }, nfs: [acl, nat], to: out, tenant: blue }
  - { name: b, from: gen, match: { dst_port: 2 }, nfs: [acl, mon], to: out, tenant: blue }
";
    let e = err(spec);
    assert_eq!((e.line, e.field.as_str()), (10, "chains[1].nfs[1]"), "{e}");
    assert!(
        e.message
            .contains("NF \"mon\" belongs to tenant \"red\" and chain \"b\" to tenant \"blue\""),
        "{e}"
    );
    // Continuing into another tenant's chain.
    let spec = "
ports:
  - { name: gen, kind: generator }
  - { name: out, kind: sink }
nfs:
  - { name: acl, type: acl, tenant: blue }
  - { name: mon, type: mon, tenant: red }
chains:
  - { name: a, from: gen, match: { dst_port: 1 }, nfs: [acl], to: b, tenant: blue }
  - { name: b, from: gen, match: { dst_port: 2 }, nfs: [mon], to: out, tenant: red }
";
    let e = err(spec);
    assert_eq!(e.field, "chains[0].to", "{e}");
    assert!(
        e.message.contains("chain \"b\" belongs to tenant \"red\""),
        "{e}"
    );
    // The operator's chains may pass anyone's NFs; names are checked.
    let ok = "
ports:
  - { name: gen, kind: generator }
  - { name: out, kind: sink }
nfs:
  - { name: acl, type: acl, tenant: blue }
  - { name: mon, type: mon, tenant: red }
chains:
  - { name: a, from: gen, nfs: [acl, mon], to: out }
";
    assert!(parse_str(ok, "ok.yaml", TYPES).is_ok());
    let e = err(&ok.replace("tenant: red", "tenant: Red"));
    assert_eq!(e.field, "nfs[1].tenant", "{e}");
}

/// Two trust domains (lines 3 and 4), ports (6, 7), NFs acl in tenant-a
/// (line 9) and mon (line 10), one chain (line 12).
const DOMAINS: &str = "
settings:
  domains:
    - { name: tenant-a, buffers: 4096 }
    - { name: tenant-b, buffers: 4096 }
ports:
  - { name: gen, kind: generator }
  - { name: out, kind: sink }
nfs:
  - { name: acl, type: acl, domain: tenant-a }
  - { name: mon, type: mon }
chains:
  - { name: a, from: gen, nfs: [acl, mon], to: out }
";

#[test]
fn trust_domains_are_declared_and_indexed() {
    let spec = parse_str(DOMAINS, "ok.yaml", TYPES).unwrap();
    assert_eq!(
        spec.settings.domains,
        vec![
            sluice_spec::DomainSpec::new("tenant-a", 4096),
            sluice_spec::DomainSpec::new("tenant-b", 4096)
        ]
    );
    assert_eq!(spec.nfs[0].domain.as_deref(), Some("tenant-a"));
    assert_eq!(spec.nfs[1].domain, None);
    assert_eq!(spec.nfs[1].domain_name(), sluice_spec::PLATFORM_DOMAIN);
    assert_eq!(
        (spec.domain_of("acl"), spec.domain_of("mon")),
        (Some(1), Some(0))
    );
    assert_eq!(spec.domain_of("nope"), None);
    let b = DOMAINS.replace("domain: tenant-a", "domain: tenant-b");
    let spec = parse_str(&b, "ok.yaml", TYPES).unwrap();
    assert_eq!(spec.domain_index(&spec.nfs[0]), Some(2));
    // `platform` may be named, also on an inline NF; a sandbox that keeps
    // seccomp on may relax the rest.
    let p = DOMAINS.replace("domain: tenant-a", "domain: platform, isolation: inline");
    let spec = parse_str(&p, "ok.yaml", TYPES).unwrap();
    assert_eq!(spec.domain_of("acl"), Some(0));
    let relaxed = DOMAINS.replace(
        "domain: tenant-a",
        "domain: tenant-a, sandbox: { user: platform, namespaces: [] }",
    );
    assert!(parse_str(&relaxed, "ok.yaml", TYPES).is_ok());
}

#[test]
fn a_domain_has_a_valid_unique_name_other_than_platform() {
    check(
        &DOMAINS.replace("name: tenant-a, buffers", "name: Tenant-A, buffers"),
        "bad.yaml:3:15: settings.domains[0].name: invalid name \"Tenant-A\": names are 1 to 32 characters of a-z, 0-9, _ and -",
    );
    check(
        &DOMAINS.replace("name: tenant-b, buffers", "name: platform, buffers"),
        "bad.yaml:4:15: settings.domains[1].name: domain name \"platform\" is reserved: it is the platform's own domain (settings.buffers, where ports receive), which needs no declaration",
    );
    check(
        &DOMAINS.replace("name: tenant-b, buffers", "name: tenant-a, buffers"),
        "bad.yaml:4:15: settings.domains[1].name: duplicate domain \"tenant-a\": already declared by settings.domains[0] (line 3)",
    );
    check(
        &DOMAINS.replace("{ name: tenant-b, buffers: 4096 }", "{ name: tenant-b, buffer: 4096 }"),
        "bad.yaml:4:25: settings.domains[1].buffer: unknown key \"buffer\" in a domain (valid keys: name, buffers); did you mean \"buffers\"?",
    );
    check(
        &DOMAINS.replace("{ name: tenant-b, buffers: 4096 }", "{ name: tenant-b }"),
        "bad.yaml:4:7: settings.domains[1]: missing required key \"buffers\" (the domain's packet buffers, e.g. 4096)",
    );
    check(
        "settings: { domains: tenant-a }\n",
        "bad.yaml:1:22: settings.domains: expected a list of domains ({ name, buffers }), found string \"tenant-a\"",
    );
}

#[test]
fn a_domain_has_256_to_16777216_buffers() {
    check(
        &DOMAINS.replace("tenant-b, buffers: 4096", "tenant-b, buffers: 255"),
        "bad.yaml:4:34: settings.domains[1].buffers: must be an integer between 256 and 16777216, got 255",
    );
    check(
        &DOMAINS.replace("tenant-b, buffers: 4096", "tenant-b, buffers: 16777217"),
        "bad.yaml:4:34: settings.domains[1].buffers: must be an integer between 256 and 16777216, got 16777217",
    );
    // Built by code: the same rule, at no position.
    let mut spec = parse_str(DOMAINS, "ok.yaml", TYPES).unwrap();
    spec.settings.domains[1].buffers = 100;
    let e = spec.validate(TYPES).unwrap_err();
    assert_eq!(e.field, "settings.domains[1].buffers", "{e}");
    assert_eq!(
        e.message,
        "must be an integer between 256 and 16777216, got 100"
    );
}

#[test]
fn at_most_15_domains() {
    let list: String = (0..16)
        .map(|i| format!("    - {{ name: d{i}, buffers: 256 }}\n"))
        .collect();
    let yaml = format!("settings:\n  domains:\n{list}{}", &BASE_CHAIN[1..]);
    check(
        &yaml,
        "bad.yaml:18:7: settings.domains[15]: 16 domains declared: at most 15 besides the platform's own",
    );
    let fifteen = yaml.replace("    - { name: d15, buffers: 256 }\n", "");
    assert!(parse_str(&fifteen, "ok.yaml", TYPES).is_ok());
}

/// Ports and a chain, for specs that bring their own settings.
const BASE_CHAIN: &str = "
ports:
  - { name: gen, kind: generator }
  - { name: out, kind: sink }
chains:
  - { name: a, from: gen, to: out }
";

#[test]
fn an_nf_names_a_declared_domain() {
    check(
        &DOMAINS.replace("domain: tenant-a", "domain: tenant-c"),
        "bad.yaml:9:37: nfs[0].domain: no domain named \"tenant-c\" (declared domains: tenant-a, tenant-b; \"platform\" is the platform's own); did you mean \"tenant-a\"?",
    );
    let none = DOMAINS
        .replace("    - { name: tenant-a, buffers: 4096 }\n", "")
        .replace("    - { name: tenant-b, buffers: 4096 }\n", "")
        .replace("  domains:\n", "  buffers: 4096\n");
    check(
        &none,
        "bad.yaml:7:37: nfs[0].domain: no domain named \"tenant-a\" (settings.domains declares none; \"platform\" is the platform's own)",
    );
}

#[test]
fn an_inline_nf_stays_in_the_platform_domain() {
    check(
        &DOMAINS.replace("domain: tenant-a", "isolation: inline, domain: tenant-a"),
        "bad.yaml:9:56: nfs[0].domain: domain \"tenant-a\" needs isolation: process: an inline NF runs inside the platform's worker, which maps every domain, so it is always in the \"platform\" domain",
    );
}

#[test]
fn a_domain_needs_the_system_call_filter() {
    let msg = "nfs[0].domain: domain \"tenant-a\" needs the system-call filter, but the NF's sandbox has seccomp off: without the filter the NF could map the packet memory of other domains again (keep seccomp on, or leave the NF in the \"platform\" domain)";
    check(
        &DOMAINS.replace("domain: tenant-a", "domain: tenant-a, sandbox: off"),
        &format!("bad.yaml:9:37: {msg}"),
    );
    check(
        &DOMAINS.replace(
            "domain: tenant-a",
            "sandbox: { seccomp: false }, domain: tenant-a",
        ),
        &format!("bad.yaml:9:66: {msg}"),
    );
}
