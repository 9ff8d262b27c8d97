//! `policer`: srTCM (RFC 2697) and trTCM (RFC 2698) colours step by step
//! with a controlled clock, colour-aware mode, actions (pass, mark, drop),
//! per-flow and per-class keys, config errors, and the RFC bound on what
//! a meter can let through (property test).

mod common;
use common::*;

use proptest::prelude::*;
use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, Verdict};
use sluice_nfs::policer::dscp;
use sluice_nfs::policer::meter::{Buckets, Color, Meter, MeterKind};
use sluice_packet::{parse, verify_checksums};

const T0: u64 = 10_000_000_000;
const MS: u64 = 1_000_000;

/// A UDP frame of exactly `len` bytes (IPv4 unless `v6`) with `dscp`.
fn sized(len: usize, src_port: u16, dscp_v: u8, v6: bool) -> Vec<u8> {
    let (s, d, hdr) = if v6 {
        ("fd00::1", "fd00::2", 14 + 40 + 8)
    } else {
        ("10.0.0.1", "10.0.0.2", 14 + 20 + 8)
    };
    let mut f = frame(
        s,
        d,
        sluice_packet::L4Spec::Udp {
            src_port,
            dst_port: 9,
        },
        &vec![0xab; len - hdr],
    );
    assert_eq!(f.len(), len);
    dscp::write(&mut f, 14, if v6 { 6 } else { 4 }, dscp_v);
    f
}

fn reason(name: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("policer", name)))
}

/// Colours (from the verdicts of a policer that marks green 10, yellow 20
/// and red 30, so every colour is visible) of `n` 100-byte frames at `t`.
fn colours(
    h: &mut Harness,
    nf: &mut dyn sluice_nf::NetworkFunction,
    t: u64,
    frames: &[Vec<u8>],
) -> String {
    h.set_now_ns(t);
    h.run(nf, frames)
        .iter()
        .map(|o| match dscp::read(&o.frame, 14, 4).unwrap() {
            10 => 'G',
            20 => 'Y',
            30 => 'R',
            d => panic!("unexpected dscp {d}"),
        })
        .collect()
}

fn marking(mut cfg: Value) -> Value {
    cfg["actions"] =
        json!({ "green": { "mark": 10 }, "yellow": { "mark": 20 }, "red": { "mark": 30 } });
    cfg
}

fn hundred(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| sized(100, 1, 0, false)).collect()
}

#[test]
fn descriptor() {
    let t = nf_type("policer");
    assert_eq!(t.drop_reasons, ["green", "yellow", "red", "unclassified"]);
    assert_eq!(t.counters[..3], ["green", "yellow", "red"]);
}

#[test]
fn srtcm_color_blind_follows_rfc2697() {
    // CIR 1000 B/s, CBS 300, EBS 200, 100-byte packets. Both buckets start
    // full (RFC 2697 §3): 3 green (Tc 300 → 0), 2 yellow (Te 200 → 0), red.
    let mut nf = build(
        "policer",
        marking(json!({ "cir": 1000, "cbs": 300, "ebs": 200 })),
    );
    let mut h = Harness::new();
    assert_eq!(colours(&mut h, nf.as_mut(), T0, &hundred(7)), "GGGYYRR");
    // 100 ms later: 100 tokens, all into Tc (it is below CBS): one green.
    assert_eq!(
        colours(&mut h, nf.as_mut(), T0 + 100 * MS, &hundred(2)),
        "GR"
    );
    // 99 ms: 99 tokens are not enough for 100 bytes; Te is still empty.
    assert_eq!(
        colours(&mut h, nf.as_mut(), T0 + 199 * MS, &hundred(1)),
        "R"
    );
    // After 10 s both buckets are full again; Tc's overflow fed Te.
    assert_eq!(
        colours(&mut h, nf.as_mut(), T0 + 10_000 * MS, &hundred(6)),
        "GGGYYR"
    );
    assert_eq!(h.counter(counter_index("policer", "green")), 7);
    assert_eq!(h.counter(counter_index("policer", "yellow")), 4);
    assert_eq!(h.counter(counter_index("policer", "red")), 5);
    assert_eq!(h.counter(counter_index("policer", "green_bytes")), 700);
    assert_eq!(h.counter(counter_index("policer", "marked")), 16);
}

#[test]
fn srtcm_color_aware_never_improves_a_colour() {
    // Yellow-marked (DSCP 12) packets can only be yellow or red, red (14)
    // only red, even with full buckets (RFC 2697 §3, colour-aware).
    let cfg = json!({
        "cir": 1000, "cbs": 300, "ebs": 200,
        "color_aware": { "yellow": [12], "red": [14] },
        "actions": { "green": { "mark": 10 }, "yellow": { "mark": 20 }, "red": { "mark": 30 } },
    });
    let mut nf = build("policer", cfg);
    let mut h = Harness::new();
    let y = sized(100, 1, 12, false);
    let r = sized(100, 1, 14, false);
    let g = sized(100, 1, 0, false);
    let input = vec![
        r.clone(),
        y.clone(),
        y.clone(),
        y.clone(),
        g.clone(),
        g.clone(),
        g.clone(),
        g,
    ];
    // red; yellow ×2 from Te (200); third yellow finds Te empty → red
    // (it may not borrow from Tc); green ×3 from Tc; fourth green → Te
    // empty → red.
    assert_eq!(colours(&mut h, nf.as_mut(), T0, &input), "RYYRGGGR");
}

#[test]
fn trtcm_color_blind_follows_rfc2698() {
    // CIR 1000 B/s, CBS 200, PIR 2000 B/s, PBS 400.
    let cfg = json!({ "meter": "trtcm", "cir": 1000, "cbs": 200, "pir": 2000, "pbs": 400 });
    let mut nf = build("policer", marking(cfg));
    let mut h = Harness::new();
    // Green takes from both (Tc 200→0, Tp 400→200), yellow from Tp only
    // (200→0), then red.
    assert_eq!(colours(&mut h, nf.as_mut(), T0, &hundred(5)), "GGYYR");
    // 100 ms: Tc +100, Tp +200 → G (Tc 0, Tp 100), Y (Tp 0), R.
    assert_eq!(
        colours(&mut h, nf.as_mut(), T0 + 100 * MS, &hundred(3)),
        "GYR"
    );
    // A red packet takes no tokens: 50 ms later Tp holds 100 again.
    assert_eq!(
        colours(&mut h, nf.as_mut(), T0 + 150 * MS, &hundred(1)),
        "Y"
    );
}

#[test]
fn trtcm_color_aware() {
    let cfg = json!({
        "meter": "trtcm", "cir": 1000, "cbs": 200, "pir": 2000, "pbs": 300,
        "color_aware": { "yellow": [12], "red": [14] },
        "actions": { "green": { "mark": 10 }, "yellow": { "mark": 20 }, "red": { "mark": 30 } },
    });
    let mut nf = build("policer", cfg);
    let mut h = Harness::new();
    let y = sized(100, 1, 12, false);
    let r = sized(100, 1, 14, false);
    let g = sized(100, 1, 0, false);
    // red stays red (no tokens); yellow takes Tp only (300→200); green
    // takes both (Tc 100, Tp 100); green again (Tc 0, Tp 0); then red.
    let input = vec![r, y, g.clone(), g.clone(), g];
    assert_eq!(colours(&mut h, nf.as_mut(), T0, &input), "RYGGR");
}

#[test]
fn actions_pass_mark_and_drop_per_colour() {
    let cfg = json!({
        "cir": 1000, "cbs": 100, "ebs": 100,
        "actions": { "green": "pass", "yellow": { "mark": 46 }, "red": "drop" },
    });
    for v6 in [false, true] {
        let mut nf = build("policer", cfg.clone());
        let mut h = Harness::new();
        h.set_now_ns(T0);
        let input: Vec<Vec<u8>> = (0..3).map(|_| sized(100, 1, 0, v6)).collect();
        let out = h.run(nf.as_mut(), &input);
        assert_eq!(out[0].verdict, Verdict::Next);
        assert_eq!(out[0].frame, input[0]);
        assert_eq!(out[1].verdict, Verdict::Next);
        let hd = parse(&out[1].frame).unwrap();
        assert_eq!(dscp::read(&out[1].frame, 14, hd.ip_version), Some(46));
        verify_checksums(&out[1].frame, &hd).unwrap();
        // Only the DSCP changed (and, for IPv4, the header checksum).
        let diff: Vec<usize> = (0..100)
            .filter(|i| out[1].frame[*i] != input[1][*i])
            .collect();
        if v6 {
            assert_eq!(diff, [14, 15]);
        } else {
            assert_eq!(diff, [15, 24, 25]);
        }
        assert_eq!(out[2].verdict, reason("red"));
    }
}

#[test]
fn per_flow_buckets_are_independent_and_reset_at_flow_end() {
    let cfg = marking(json!({ "cir": 1000, "cbs": 100, "key": "flow" }));
    let mut nf = build("policer", cfg);
    let mut h = Harness::new();
    let a = sized(100, 1, 0, false);
    let b = sized(100, 2, 0, false);
    let input = vec![a.clone(), b.clone(), a.clone(), b.clone()];
    assert_eq!(colours(&mut h, nf.as_mut(), T0, &input), "GGRR");
    let id = h.flow_id_of(&a).unwrap();
    h.end_flow(nf.as_mut(), id);
    assert_eq!(colours(&mut h, nf.as_mut(), T0, &[a, b]), "GR");
}

#[test]
fn dscp_classes_and_unclassified() {
    let cfg = json!({
        "key": "dscp",
        "classes": [
            { "dscp": [46], "cir": 1000, "cbs": 100 },
            { "dscp": [10, 12], "cir": 1000, "cbs": 200 },
        ],
        "unclassified": "drop",
    });
    let mut nf = build("policer", cfg);
    let mut h = Harness::new();
    h.set_now_ns(T0);
    let ef = sized(100, 1, 46, false);
    let af = sized(100, 1, 10, false);
    let af2 = sized(100, 1, 12, false);
    let be = sized(100, 1, 0, false);
    let v: Vec<Verdict> = h
        .run(nf.as_mut(), &[ef.clone(), ef, af, af2.clone(), af2, be])
        .into_iter()
        .map(|o| o.verdict)
        .collect();
    assert_eq!(
        v,
        [
            Verdict::Next,
            reason("red"),
            Verdict::Next,
            Verdict::Next,
            reason("red"),
            reason("unclassified")
        ]
    );
    assert_eq!(h.counter(counter_index("policer", "unclassified")), 1);
}

#[test]
fn non_ip_frames_are_metered_and_malformed_dropped() {
    let mut nf = build("policer", json!({ "cir": 1000, "cbs": 100 }));
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &[arp(), arp(), arp(), vec![1, 2, 3]]);
    // 42-byte ARP frames: 100 tokens give two.
    assert_eq!(out[0].verdict, Verdict::Next);
    assert_eq!(out[1].verdict, Verdict::Next);
    assert_eq!(out[2].verdict, reason("red"));
    assert!(
        matches!(out[3].verdict, Verdict::Drop(r) if r.name().unwrap().starts_with("malformed:"))
    );
}

#[test]
fn config_errors_name_the_field() {
    let cases = [
        (json!(null), "cir", "required"),
        (json!({ "cir": "10mbit" }), "cbs", "required"),
        (
            json!({ "cir": "10 furlongs", "cbs": 100 }),
            "cir",
            "unknown rate unit",
        ),
        (
            json!({ "cir": 1000, "cbs": 100, "pir": 2000 }),
            "pir",
            "not a parameter",
        ),
        (
            json!({ "meter": "trtcm", "cir": 2000, "cbs": 1, "pir": 1000, "pbs": 1 }),
            "pir",
            "at least cir",
        ),
        (
            json!({ "meter": "trtcm", "cir": 1, "cbs": 1, "pir": 1, "pbs": 1, "ebs": 1 }),
            "ebs",
            "not a parameter",
        ),
        (
            json!({ "cir": 1, "cbs": 1, "actions": { "red": { "mark": 64 } } }),
            "actions.red.mark",
            "0-63",
        ),
        (
            json!({ "cir": 1, "cbs": 1, "color_aware": { "red": [99] } }),
            "color_aware.red[0]",
            "0-63",
        ),
        (json!({ "key": "dscp" }), "classes", "at least one"),
        (
            json!({ "key": "dscp", "classes": [{ "dscp": [1], "cir": 1, "cbs": 1 }, { "dscp": [1], "cir": 1, "cbs": 1 }] }),
            "classes[1].dscp",
            "already",
        ),
        (
            json!({ "cir": 1, "cbs": 1, "colour": 1 }),
            "colour",
            "unknown field",
        ),
    ];
    for (cfg, field, msg) in cases {
        let e = build_err("policer", cfg.clone()).to_string();
        assert!(e.contains(field) && e.contains(msg), "{cfg}: {e}");
    }
}

proptest! {
    /// Whatever the arrival times and sizes, what a meter passes as green
    /// plus yellow never exceeds what its buckets can hold plus what its
    /// rates add: CIR × t + CBS + EBS for srTCM, PIR × t + PBS for trTCM
    /// (green alone: CIR × t + CBS).
    #[test]
    fn meters_never_pass_more_than_the_rfc_bound(
        tr in any::<bool>(),
        cir in 1u64..100_000,
        extra in 0u64..100_000,
        cbs in 1u64..5_000,
        ebs in 1u64..5_000,
        pkts in prop::collection::vec((0u64..20_000_000, 40u64..1600, 0usize..3), 1..300),
    ) {
        let kind = if tr {
            MeterKind::TrTcm { cir, cbs, pir: cir + extra, pbs: ebs }
        } else {
            MeterKind::SrTcm { cir, cbs, ebs }
        };
        let m = Meter::new(kind).unwrap();
        let mut b = Buckets::default();
        let mut now = T0;
        let (mut green, mut passed) = (0u128, 0u128);
        for (gap, len, pre) in pkts {
            now += gap;
            let pre = [None, Some(Color::Green), Some(Color::Yellow)][pre];
            match m.color(&mut b, now, len, pre) {
                Color::Green => { green += u128::from(len); passed += u128::from(len) }
                Color::Yellow => passed += u128::from(len),
                Color::Red => {}
            }
        }
        let t = u128::from(now - T0);
        let secs = |rate: u64| (t * u128::from(rate)).div_ceil(1_000_000_000);
        prop_assert!(green <= secs(cir) + u128::from(cbs));
        let bound = if tr { secs(cir + extra) + u128::from(ebs) } else { secs(cir) + u128::from(cbs + ebs) };
        prop_assert!(passed <= bound, "passed {} > bound {}", passed, bound);
    }
}
