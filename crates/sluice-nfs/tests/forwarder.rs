//! `forwarder`: passes packets unchanged, or with MACs swapped.

mod common;
use common::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;

fn frames() -> Vec<Vec<u8>> {
    vec![
        udp("10.0.0.1", 1000, "10.0.0.2", 53),
        tcp("2001:db8::1", 40000, "2001:db8::2", 443),
        ping("10.0.0.1", "10.0.0.2", 7, false),
        arp(),
        // Not even an Ethernet header: forwarded untouched all the same.
        vec![0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3],
    ]
}

#[test]
fn descriptor() {
    let t = nf_type("forwarder");
    assert!(t.drop_reasons.is_empty());
    assert!(t.counters.is_empty());
}

#[test]
fn default_leaves_bytes_unchanged_and_verdict_next() {
    for config in [json!(null), json!({}), json!({ "mac_swap": false })] {
        let mut nf = build("forwarder", config.clone());
        let input = frames();
        let out = Harness::new().run(nf.as_mut(), &input);
        assert_eq!(out.len(), input.len());
        for (o, i) in out.iter().zip(&input) {
            assert_eq!(o.verdict, Verdict::Next, "{config}");
            assert_eq!(&o.frame, i, "{config}");
        }
    }
}

#[test]
fn mac_swap_swaps_exactly_the_two_macs() {
    let mut nf = build("forwarder", json!({ "mac_swap": true }));
    let input = frames();
    let out = Harness::new().run(nf.as_mut(), &input);
    for (o, i) in out.iter().zip(&input) {
        assert_eq!(o.verdict, Verdict::Next);
        assert_eq!(o.frame.len(), i.len());
        if i.len() < 12 {
            assert_eq!(&o.frame, i, "frames without two MACs are left alone");
            continue;
        }
        assert_eq!(o.frame[0..6], i[6..12], "new destination = old source");
        assert_eq!(o.frame[6..12], i[0..6], "new source = old destination");
        assert_eq!(o.frame[12..], i[12..], "nothing else changes");
    }
    // Concretely, for the UDP frame built with src MAC_A, dst MAC_B.
    assert_eq!(out[0].frame[0..6], MAC_A.0);
    assert_eq!(out[0].frame[6..12], MAC_B.0);
    // Swapping twice restores the original.
    let back = Harness::new().run(
        nf.as_mut(),
        &out.iter().map(|o| o.frame.clone()).collect::<Vec<_>>(),
    );
    for (b, i) in back.iter().zip(&input) {
        assert_eq!(&b.frame, i);
    }
}

#[test]
fn mac_swap_handles_more_than_one_batch() {
    let mut nf = build("forwarder", json!({ "mac_swap": true }));
    let input: Vec<Vec<u8>> = (0..600u16)
        .map(|i| udp("10.0.0.1", 1000 + i, "10.0.0.2", 80))
        .collect();
    let out = Harness::new().run(nf.as_mut(), &input);
    assert_eq!(out.len(), 600);
    assert!(out
        .iter()
        .all(|o| o.frame[0..6] == MAC_A.0 && o.frame[6..12] == MAC_B.0));
}

#[test]
fn config_errors() {
    let e = build_err("forwarder", json!({ "macswap": true }));
    assert!(e.message.contains("macswap"), "{e}");
    let e = build_err("forwarder", json!({ "mac_swap": "yes" }));
    assert_eq!(e.field, "mac_swap", "{e}");
    let e = build_err("forwarder", json!([1, 2]));
    assert!(!e.message.is_empty());
}
