//! `graph`: a custom NF declared from other NF types behaves exactly like
//! the same NFs chained, names its elements' drops, and rejects bad graphs
//! with errors that point at the element.

mod common;
use common::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;

fn acl_config() -> serde_json::Value {
    json!({ "rules": [{ "action": "drop", "proto": "udp", "dst_port": 53 }] })
}

fn frames() -> Vec<Vec<u8>> {
    vec![
        udp("10.0.0.1", 1000, "10.0.0.2", 53),
        tcp("10.0.0.1", 40000, "10.0.0.2", 443),
        udp("10.0.0.3", 1000, "10.0.0.2", 123),
        ping("10.0.0.1", "10.0.0.2", 7, false),
    ]
}

#[test]
fn a_graph_equals_its_elements_in_sequence() {
    let mut g = build(
        "graph",
        json!({ "elements": [
            { "name": "guard", "type": "acl", "config": acl_config() },
            { "name": "swap", "type": "forwarder", "config": { "mac_swap": true } },
        ]}),
    );
    let mut acl = build("acl", acl_config());
    let mut fwd = build("forwarder", json!({ "mac_swap": true }));
    let input = frames();
    let got = Harness::new().run(g.as_mut(), &input);
    let after_acl = Harness::new().run(acl.as_mut(), &input);
    let passed: Vec<Vec<u8>> = after_acl
        .iter()
        .filter(|o| o.verdict == Verdict::Next)
        .map(|o| o.frame.clone())
        .collect();
    let after_fwd = Harness::new().run(fwd.as_mut(), &passed);
    let mut expect_pass: Vec<Vec<u8>> = after_fwd.into_iter().map(|o| o.frame).collect();
    let mut got_pass: Vec<Vec<u8>> = got
        .iter()
        .filter(|o| o.verdict == Verdict::Next)
        .map(|o| o.frame.clone())
        .collect();
    expect_pass.sort();
    got_pass.sort();
    assert_eq!(got_pass, expect_pass);
    let dropped: Vec<&Verdict> = got
        .iter()
        .filter(|o| o.verdict != Verdict::Next)
        .map(|o| &o.verdict)
        .collect();
    assert_eq!(dropped.len(), 1, "the DNS packet");
    // acl's reason 0 (`denied`) keeps index 0 as the first element's.
    assert_eq!(
        *dropped[0],
        Verdict::Drop(sluice_nf::DropReason::nf_local(0))
    );
    assert_eq!(g.drop_reason_names().unwrap()[0], "guard.denied");
    assert!(g
        .counter_names()
        .unwrap()
        .iter()
        .any(|(_, n)| n == "guard.accepted"));
}

fn error_of(config: serde_json::Value) -> String {
    try_build("graph", config)
        .err()
        .expect("must be rejected")
        .to_string()
}

#[test]
fn bad_graphs_are_rejected_with_the_element_named() {
    let e = error_of(json!({ "elements": [
        { "name": "a", "type": "forwarder" }, { "name": "a", "type": "monitor" }] }));
    assert!(e.contains("duplicate element name `a`"), "{e}");
    let e = error_of(json!({ "elements": [{ "name": "a", "type": "nonesuch" }] }));
    assert!(e.contains("unknown element type `nonesuch`"), "{e}");
    let e = error_of(json!({ "elements": [{ "name": "a", "type": "graph" }] }));
    assert!(e.contains("do not nest"), "{e}");
    let e = error_of(json!({ "elements": [
        { "name": "a", "type": "forwarder" }, { "name": "b", "type": "forwarder" },
        { "name": "c", "type": "forwarder" }],
        "paths": [["a", "b"], ["a", "c"]] }));
    assert!(e.contains("one successor"), "{e}");
    let e = error_of(json!({ "elements": [{ "name": "a", "type": "forwarder" }],
        "paths": [["a", "zz"]] }));
    assert!(e.contains("no element named `zz`"), "{e}");
    let e = error_of(json!({ "elements": [] }));
    assert!(e.contains("1 to 64 elements"), "{e}");
    let e = error_of(json!({ "elements": [{ "name": "a", "type": "acl",
        "config": { "rules": [{ "action": "maybe" }] } }] }));
    assert!(
        e.contains("maybe"),
        "element config errors come through: {e}"
    );
    let e = error_of(json!({ "elements": [{ "name": "a", "type": "forwarder" }], "extra": 1 }));
    assert!(e.contains("unknown key `extra`"), "{e}");
}

/// Elements are copied per worker with their graph, so they must see the
/// graph's worker count: a `nat` element refuses per-worker copies as a
/// `nat` NF does (before, the graph told its elements 1 and a spec with
/// `settings.workers: 2` ran two NATs handing out the same pool).
#[test]
fn elements_see_the_graphs_per_worker_copies() {
    let config = json!({ "elements": [
        { "name": "n", "type": "nat",
          "config": { "inside": ["10.0.0.0/16"], "pool": ["192.0.2.1/32"] } }] });
    let e = try_build_replicated("graph", config.clone(), 2)
        .err()
        .expect("a nat element in a graph copied per worker must be refused")
        .to_string();
    assert!(e.contains("cannot run as 2 copies side by side"), "{e}");
    assert!(try_build_replicated("graph", config, 1).is_ok());
}
