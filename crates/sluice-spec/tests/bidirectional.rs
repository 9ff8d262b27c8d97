//! `bidirectional: true` chains: a bump in the wire written once.

use sluice_spec::{parse_str, PortRange};

const TYPES: [&str; 2] = ["acl", "monitor"];

fn spec(chain: &str) -> String {
    format!(
        "ports:\n  - {{ name: a, kind: af_packet, interface: eth0 }}\n  - {{ name: b, kind: af_packet, interface: eth1 }}\nnfs:\n  - {{ name: acl, type: acl }}\n  - {{ name: mon, type: monitor }}\nchains:\n  - {chain}\n"
    )
}

#[test]
fn the_reverse_chain_runs_the_nfs_backwards_with_the_selector_swapped() {
    let s = parse_str(
        &spec("{ name: web, from: a, match: { proto: tcp, dst: 10.0.0.0/8, dst_port: 80 }, nfs: [acl, mon], to: b, bidirectional: true }"),
        "t.yaml",
        &TYPES,
    )
    .unwrap();
    assert_eq!(s.chains.len(), 2);
    let (fwd, rev) = (&s.chains[0], &s.chains[1]);
    assert_eq!(
        (fwd.name.as_str(), fwd.from.as_str(), fwd.to.as_str()),
        ("web", "a", "b")
    );
    assert_eq!(
        (rev.name.as_str(), rev.from.as_str(), rev.to.as_str()),
        ("web-rev", "b", "a")
    );
    assert_eq!(rev.nfs, vec!["mon", "acl"]);
    let m = rev.matcher.as_ref().unwrap();
    assert_eq!(m.proto, Some(6));
    assert_eq!(m.src, Some("10.0.0.0/8".parse().unwrap()));
    assert_eq!(m.dst, None);
    assert_eq!(m.src_port, Some(PortRange::single(80)));
    assert_eq!(m.dst_port, None);
    assert_eq!(rev.location, fwd.location);
}

#[test]
fn false_or_absent_adds_nothing() {
    for extra in ["", ", bidirectional: false"] {
        let s = parse_str(
            &spec(&format!(
                "{{ name: web, from: a, nfs: [acl], to: b{extra} }}"
            )),
            "t.yaml",
            &TYPES,
        )
        .unwrap();
        assert_eq!(s.chains.len(), 1);
    }
}

#[test]
fn bad_values_and_clashing_names_are_located_errors() {
    let e = parse_str(
        &spec("{ name: web, from: a, nfs: [acl], to: b, bidirectional: yes please }"),
        "t.yaml",
        &TYPES,
    )
    .unwrap_err();
    assert_eq!(e.field, "chains[0].bidirectional");
    let long = "a".repeat(30);
    let e = parse_str(
        &spec(&format!(
            "{{ name: {long}, from: a, nfs: [acl], to: b, bidirectional: true }}"
        )),
        "t.yaml",
        &TYPES,
    )
    .unwrap_err();
    assert_eq!(e.field, "chains[0].name");
    assert!(e.message.contains("at most 28"), "{}", e.message);
}
