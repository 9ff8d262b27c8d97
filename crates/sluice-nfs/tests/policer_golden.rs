//! Golden test: the timed capture `fixtures/policer/in.pcap` goes through
//! `policer` one frame per batch, the harness clock at each record's
//! timestamp. For each scenario (srTCM / trTCM, mark / drop modes,
//! colour-aware, per-DSCP-class meters) the verdicts, the frames let through (byte for byte, DSCP
//! re-marked with valid checksums) and the counters must equal what
//! `make_policer_golden.py` computed with its own exact-fraction model of
//! RFC 2697 / RFC 2698 and scapy. tshark, when installed, must decode the
//! outputs without malformed packets.

mod common;
mod golden_util;
use common::*;
use golden_util::*;

use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, Verdict};

fn scenario(name: &str) {
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("policer", &format!("{name}.json"))).unwrap(),
    )
    .unwrap();
    let mut nf = build("policer", spec["config"].clone());
    let input = read_pcap_ts(&fixture("policer", "in.pcap"));
    let expected = read_pcap(&fixture("policer", &format!("{name}_expected.pcap")));
    let verdicts = spec["verdicts"].as_array().unwrap();
    assert_eq!(input.len(), 14);
    assert_eq!(verdicts.len(), input.len());

    let mut h = Harness::new();
    let mut passed = Vec::new();
    for (i, ((ts, frame), want)) in input.iter().zip(verdicts).enumerate() {
        h.set_now_ns(*ts);
        let o = h.run(nf.as_mut(), std::slice::from_ref(frame)).remove(0);
        let want = match want.as_str().unwrap().split_once(' ') {
            None => Verdict::Next,
            Some(("drop", r)) => Verdict::Drop(DropReason::nf_local(reason_index("policer", r))),
            _ => panic!("bad verdict {want}"),
        };
        assert_eq!(o.verdict, want, "{name}: frame {i}");
        if o.verdict == Verdict::Next {
            passed.push(o.frame);
        }
    }
    assert_eq!(passed.len(), expected.len(), "{name}");
    for (i, (got, want)) in passed.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "{name}: output frame {i}");
    }
    for (counter, want) in spec["counters"].as_object().unwrap() {
        assert_eq!(
            h.counter(counter_index("policer", counter)),
            want.as_u64().unwrap(),
            "{name}: counter {counter}"
        );
    }
    if let Some(text) = tshark_clean(&passed, &format!("policer-{name}"), &[]) {
        let ip = passed.iter().filter(|f| f[12..14] != [0x08, 0x06]).count();
        assert_eq!(text.matches("User Datagram Protocol").count(), ip);
    }
}

#[test]
fn srtcm_mark_mode() {
    scenario("srtcm_mark");
}

#[test]
fn srtcm_drop_mode() {
    scenario("srtcm_drop");
}

#[test]
fn trtcm_mark_mode() {
    scenario("trtcm_mark");
}

#[test]
fn trtcm_drop_mode() {
    scenario("trtcm_drop");
}

#[test]
fn srtcm_colour_aware() {
    scenario("srtcm_aware_drop");
}

#[test]
fn trtcm_colour_aware() {
    scenario("trtcm_aware_mark");
}

#[test]
fn per_dscp_class_meters_and_unclassified_drop() {
    scenario("dscp_classes");
}
