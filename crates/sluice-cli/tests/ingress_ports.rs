//! Ports named for matching the port a packet came in on, through the
//! real binary: the firewall's `zones[].port` and `rules[].in_port` and
//! NAT's `inside_ports` must accept input-only ports (`generator`,
//! `pcap_in`), not only ports that can transmit.

mod common;
use common::*;

use sluice_ports::PcapWriter;

/// A one-frame pcap file next to the spec, so a `pcap_in` port loads.
fn write_pcap(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("in.pcap");
    let mut w = PcapWriter::create(&path, 65535).unwrap();
    w.write_packet(1_000_000_000, &[0u8; 60]).unwrap();
    w.flush().unwrap();
    path
}

fn validate(text: &str) -> std::process::Output {
    let (dir, path) = spec_file(text);
    write_pcap(dir.path());
    sluice()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap()
}

#[test]
fn zones_and_in_port_name_input_only_ports() {
    for kind in [
        "{ name: in, kind: generator, flows: 4 }",
        "{ name: in, kind: pcap_in, path: in.pcap }",
    ] {
        let spec = format!(
            "ports:\n  - {kind}\n  - {{ name: out, kind: sink }}\n\
             nfs:\n  - name: fw\n    type: firewall\n    config:\n      default: drop\n      \
             zones: [{{ port: in, zone: 1 }}]\n      \
             rules:\n        - {{ action: accept, in_port: in, zone: 1 }}\n\
             chains:\n  - {{ name: main, from: in, nfs: [fw], to: out }}\n"
        );
        let out = validate(&spec);
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn an_input_only_in_port_matches_its_traffic() {
    // Every packet from `in` is accepted by the `in_port` rule; with the
    // rule not matching, the default would drop them all.
    let spec = "settings: { flow_table: { capacity: 1024 } }\n\
        ports:\n  - { name: in, kind: generator, flows: 4, protocol: udp, count: 200 }\n  \
        - { name: out, kind: sink }\n\
        nfs:\n  - name: fw\n    type: firewall\n    isolation: inline\n    config:\n      \
        default: drop\n      zones: [{ port: in, zone: 3 }]\n      \
        rules: [{ action: accept, in_port: in, zone: 3 }]\n\
        chains:\n  - { name: main, from: in, nfs: [fw], to: out }\n";
    let (_d, path) = spec_file(spec);
    let (out, r) = run_json(&path, 5.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["packets_in"], 200, "{r:#}");
    assert_eq!(r["packets_out"], 200, "{r:#}");
    assert_eq!(nf(&r, "fw")["counters"]["accepted"], 200, "{r:#}");
}

#[test]
fn a_sink_is_not_an_ingress_port() {
    // Nothing comes in through a sink: naming it can only be a mistake.
    let spec =
        "ports:\n  - { name: in, kind: generator, flows: 4 }\n  - { name: out, kind: sink }\n\
        nfs:\n  - name: fw\n    type: firewall\n    config:\n      \
        rules:\n        - { action: accept, in_port: out }\n\
        chains:\n  - { name: main, from: in, nfs: [fw], to: out }\n";
    let out = validate(spec);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":9:"), "{err}");
    assert!(err.contains("rules[0].in_port"), "{err}");
    assert!(err.contains("unknown port `out`"), "{err}");
}

#[test]
fn nat_inside_ports_name_input_only_ports() {
    let spec = |extra: &str| {
        format!(
            "ports:\n  - {{ name: in, kind: generator, flows: 4 }}\n  - {{ name: out, kind: sink }}\n\
             nfs:\n  - name: nat\n    type: nat\n    \
             config: {{ pool: [192.0.2.1], inside_ports: [in]{extra} }}\n\
             chains:\n  - {{ name: main, from: in, nfs: [nat], to: out }}\n"
        )
    };
    let out = validate(&spec(", hairpin_output: next"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // By default hairpinned packets leave through their ingress port,
    // which a generator cannot do.
    let out = validate(&spec(""));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("inside_ports[0]"), "{err}");
    assert!(err.contains("port `in` cannot transmit"), "{err}");
}

/// A firewall between a generator (`in`, cannot transmit) and a sink, plus
/// a TAP port `lan` feeding it too, with `config` (indented 4 spaces);
/// the config starts on line 10.
fn fw_spec(config: &str) -> String {
    format!(
        "ports:\n  - {{ name: in, kind: generator, flows: 4 }}\n  - {{ name: lan, kind: tap, interface: slc-test0 }}\n  \
         - {{ name: out, kind: sink }}\n\
         nfs:\n  - name: fw\n    type: firewall\n    isolation: inline\n    config:\n{config}\
         chains:\n  - {{ name: a, from: in, nfs: [fw], to: out }}\n  - {{ name: b, from: lan, nfs: [fw], to: out }}\n"
    )
}

#[test]
fn a_reject_answering_through_a_port_that_cannot_transmit_is_a_spec_error() {
    // A reject answers out of the port the packet came in through; from
    // a generator that can only end as an `invalid_verdict` drop.
    for (config, line, field) in [
        (
            "      rules:\n        - { action: accept, proto: udp }\n        - { action: reject, proto: tcp }\n",
            12,
            "rules[1].action",
        ),
        ("      default: reject\n", 10, "default"),
        (
            "      zones: [{ port: in, zone: 2 }]\n      rules:\n        - { action: reject, zone: 2 }\n",
            12,
            "rules[0].action",
        ),
    ] {
        let out = validate(&fw_spec(config));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {err}");
        assert!(err.contains(&format!("spec.yaml:{line}:")), "{config}: {err}");
        assert!(err.contains(&format!("nfs[0].config.{field}")), "{err}");
        assert!(
            err.contains("answers out of the port a packet came in through, but port `in` (generator) cannot transmit"),
            "{err}"
        );
    }
}

#[test]
fn a_reject_that_never_sees_a_port_that_cannot_transmit_is_fine() {
    for config in [
        // Limited to the TAP port by port or by zone.
        "      rules:\n        - { action: reject, in_port: lan }\n",
        "      zones: [{ port: lan, zone: 1 }]\n      rules:\n        - { action: reject, zone: 1, proto: tcp }\n",
        // Everything from the generator is decided before the reject.
        "      default: reject\n      rules:\n        - { action: accept, in_port: in }\n        - { action: reject, proto: tcp }\n",
    ] {
        let out = validate(&fw_spec(config));
        assert!(
            out.status.success(),
            "{config}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
