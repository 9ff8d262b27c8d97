//! `monitor`: per-flow packet and byte counters and their totals.

mod common;
use common::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;

fn c(h: &Harness, name: &str) -> u64 {
    h.counter(counter_index("monitor", name))
}

#[test]
fn descriptor() {
    let t = nf_type("monitor");
    assert!(t.drop_reasons.is_empty());
    assert_eq!(
        t.counters,
        [
            "packets",
            "bytes",
            "flows_active",
            "flows_ended",
            "largest_flow_packets"
        ]
    );
}

#[test]
fn counts_packets_bytes_and_active_flows() {
    let mut nf = build("monitor", json!(null));
    let mut h = Harness::new();
    let a = udp("10.0.0.1", 1000, "10.0.0.2", 80);
    let a_reply = udp("10.0.0.2", 80, "10.0.0.1", 1000);
    let b = tcp("2001:db8::1", 40000, "2001:db8::2", 443);
    let p = ping("10.0.0.1", "10.0.0.3", 9, false);
    let (la, lb, lp) = (a.len() as u64, b.len() as u64, p.len() as u64);
    assert_eq!((la, lb, lp), (50, 74, 46));

    // Flow A: 3 packets + 2 replies (same flow), flow B: 2, ping flow P: 1.
    let input = vec![
        a.clone(),
        b.clone(),
        a_reply.clone(),
        a.clone(),
        p.clone(),
        b.clone(),
        a_reply.clone(),
        a.clone(),
    ];
    let out = h.run(nf.as_mut(), &input);
    assert!(out.iter().all(|o| o.verdict == Verdict::Next));
    assert!(out.iter().zip(&input).all(|(o, i)| &o.frame == i));
    assert_eq!(c(&h, "packets"), 8);
    assert_eq!(c(&h, "bytes"), 5 * la + 2 * lb + lp);
    assert_eq!(c(&h, "flows_active"), 3);
    assert_eq!(c(&h, "flows_ended"), 0);
    assert_eq!(c(&h, "largest_flow_packets"), 0);

    // A second batch adds to the totals; known flows stay one flow each.
    h.run(nf.as_mut(), &[b.clone(), p.clone()]);
    assert_eq!(c(&h, "packets"), 10);
    assert_eq!(c(&h, "bytes"), 5 * la + 3 * lb + 2 * lp);
    assert_eq!(c(&h, "flows_active"), 3);

    let (id_a, id_b, id_p) = (
        h.flow_id_of(&a).unwrap(),
        h.flow_id_of(&b).unwrap(),
        h.flow_id_of(&p).unwrap(),
    );
    assert_eq!(h.flow_id_of(&a_reply), Some(id_a));

    // Ending flow B (3 packets): one fewer active, largest = 3.
    h.end_flow(nf.as_mut(), id_b);
    assert_eq!(c(&h, "flows_active"), 2);
    assert_eq!(c(&h, "flows_ended"), 1);
    assert_eq!(c(&h, "largest_flow_packets"), 3);

    // Ending flow A (5 packets): largest grows to 5.
    h.end_flow(nf.as_mut(), id_a);
    assert_eq!(c(&h, "flows_active"), 1);
    assert_eq!(c(&h, "flows_ended"), 2);
    assert_eq!(c(&h, "largest_flow_packets"), 5);

    // Ending flow P (2 packets): largest stays 5.
    h.end_flow(nf.as_mut(), id_p);
    assert_eq!(c(&h, "flows_active"), 0);
    assert_eq!(c(&h, "flows_ended"), 3);
    assert_eq!(c(&h, "largest_flow_packets"), 5);

    // Packet and byte totals are not affected by flow ends.
    assert_eq!(c(&h, "packets"), 10);
}

#[test]
fn flow_end_of_an_unseen_or_ended_flow_changes_only_flows_ended() {
    let mut nf = build("monitor", json!({}));
    let mut h = Harness::new();
    let a = udp("10.0.0.1", 1000, "10.0.0.2", 80);
    h.run(nf.as_mut(), &[a.clone(), a.clone()]);
    let id = h.flow_id_of(&a).unwrap();
    h.end_flow(nf.as_mut(), id + 1); // never seen
    assert_eq!(c(&h, "flows_active"), 1);
    assert_eq!(c(&h, "flows_ended"), 1);
    assert_eq!(c(&h, "largest_flow_packets"), 0);
    h.end_flow(nf.as_mut(), id);
    h.end_flow(nf.as_mut(), id); // twice: the second one finds no traffic
    assert_eq!(c(&h, "flows_active"), 0);
    assert_eq!(c(&h, "flows_ended"), 3);
    assert_eq!(c(&h, "largest_flow_packets"), 2);
    h.end_flow(nf.as_mut(), u32::MAX); // out of the table: ignored but counted
    assert_eq!(c(&h, "flows_active"), 0);
    assert_eq!(c(&h, "flows_ended"), 4);
}

#[test]
fn a_flow_id_reused_after_its_end_counts_as_a_new_flow() {
    let mut nf = build("monitor", json!(null));
    let mut h = Harness::new();
    let a = udp("10.0.0.1", 1000, "10.0.0.2", 80);
    h.run(nf.as_mut(), &[a.clone(), a.clone(), a.clone()]);
    let id = h.flow_id_of(&a).unwrap();
    h.end_flow(nf.as_mut(), id);
    // The harness keeps the id for the same 5-tuple, like a new connection
    // that got the recycled flow-table entry.
    h.run(nf.as_mut(), std::slice::from_ref(&a));
    assert_eq!(c(&h, "flows_active"), 1);
    h.end_flow(nf.as_mut(), id);
    assert_eq!(c(&h, "flows_active"), 0);
    assert_eq!(c(&h, "flows_ended"), 2);
    assert_eq!(
        c(&h, "largest_flow_packets"),
        3,
        "the 1-packet reuse is smaller"
    );
}

#[test]
fn frames_without_a_flow_count_in_totals_only() {
    let mut nf = build("monitor", json!(null));
    let mut h = Harness::new();
    let junk = vec![1u8, 2, 3];
    let out = h.run(nf.as_mut(), &[arp(), junk]);
    assert!(out.iter().all(|o| o.verdict == Verdict::Next));
    assert_eq!(c(&h, "packets"), 2);
    assert_eq!(c(&h, "bytes"), 42 + 3);
    assert_eq!(c(&h, "flows_active"), 0);
}

#[test]
fn reset_forgets_flows() {
    let mut nf = build("monitor", json!(null));
    let mut h = Harness::new();
    let a = udp("10.0.0.1", 1000, "10.0.0.2", 80);
    let b = udp("10.0.0.1", 1001, "10.0.0.2", 80);
    h.run(nf.as_mut(), &[a.clone(), b]);
    assert_eq!(c(&h, "flows_active"), 2);
    nf.reset();
    h.run(nf.as_mut(), std::slice::from_ref(&a));
    assert_eq!(c(&h, "flows_active"), 1, "only the flow seen after reset");
    let id = h.flow_id_of(&a).unwrap();
    h.end_flow(nf.as_mut(), id);
    assert_eq!(c(&h, "largest_flow_packets"), 1);
}

#[test]
fn rejects_config_keys() {
    for config in [
        json!({ "interval": 5 }),
        json!({ "packets": true, "bytes": true }),
        json!(5),
        json!("on"),
        json!([]),
    ] {
        let e = build_err("monitor", config.clone());
        assert_eq!(e.message, "monitor takes no config keys", "{config}");
    }
    // Nested in a spec, the error names the NF's config.
    let node = sluice_spec::ConfigNode::from_json(json!({ "x": 1 })).with_path("nfs[2].config");
    let e = build_node("monitor", &node).err().unwrap();
    assert_eq!(e.field, "nfs[2].config");
    assert_eq!(
        e.to_string(),
        "<generated>: nfs[2].config: monitor takes no config keys"
    );
}
