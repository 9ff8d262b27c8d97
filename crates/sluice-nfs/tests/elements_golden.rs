//! Golden tests of the utility elements (`crates/sluice-nfs/src/elements/`):
//! for each element, `fixtures/elements/<element>_in.pcap` goes through it
//! (each record at its timestamp); the verdicts, the frames let through
//! (byte for byte, with every checksum as scapy computes it from scratch)
//! and the counters must match `<element>.json` and
//! `<element>_expected.pcap`, written by `make_elements_golden.py`. The
//! mirror's capture file must equal `mirror_expected_file.pcap` except for
//! the record timestamps (they carry the platform's monotonic → Unix
//! offset), whose spacing must be the input's. tshark, when installed,
//! must decode every output without malformed packets.

mod common;
mod golden_util;
use common::*;
use golden_util::*;

use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, NetworkFunction, NfId, PortId, Verdict};

fn verdict(ty: &str, s: &str) -> Verdict {
    match s.split_once(' ') {
        None if s == "next" => Verdict::Next,
        Some(("drop", r)) => Verdict::Drop(DropReason::nf_local(reason_index(ty, r))),
        Some(("nf", i)) => Verdict::ToNf(NfId(i.parse().unwrap())),
        Some(("port", i)) => Verdict::ToPort(PortId(i.parse().unwrap())),
        _ => panic!("bad verdict `{s}`"),
    }
}

/// Runs `fixture` (file prefix) through `nf` of type `ty` and checks
/// verdicts, output frames and counters. Returns the harness and the
/// frames let through.
fn check_with(
    ty: &str,
    fixture_name: &str,
    nf: &mut dyn NetworkFunction,
) -> (Harness, Vec<Vec<u8>>) {
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("elements", &format!("{fixture_name}.json"))).unwrap(),
    )
    .unwrap();
    let input = read_pcap_ts(&fixture("elements", &format!("{fixture_name}_in.pcap")));
    let expected = read_pcap(&fixture(
        "elements",
        &format!("{fixture_name}_expected.pcap"),
    ));
    let verdicts = spec["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), input.len(), "{fixture_name}");
    let mut h = Harness::new();
    let mut out = Vec::new();
    for (i, ((ts, frame), want)) in input.iter().zip(verdicts).enumerate() {
        h.set_now_ns(*ts);
        let o = h.run(nf, std::slice::from_ref(frame)).remove(0);
        assert_eq!(
            o.verdict,
            verdict(ty, want.as_str().unwrap()),
            "{fixture_name}: frame {i}"
        );
        if !matches!(o.verdict, Verdict::Drop(_)) {
            out.push(o.frame);
        }
    }
    assert_eq!(out.len(), expected.len(), "{fixture_name}");
    for (i, (got, want)) in out.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "{fixture_name}: output frame {i}");
    }
    for (counter, want) in spec["counters"].as_object().unwrap() {
        assert_eq!(
            h.counter(counter_index(ty, counter)),
            want.as_u64().unwrap(),
            "{fixture_name}: counter {counter}"
        );
    }
    if !out.is_empty() {
        tshark_clean(&out, fixture_name, &[]);
    }
    (h, out)
}

fn check(ty: &str, fixture_name: &str) -> (Harness, Vec<Vec<u8>>) {
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("elements", &format!("{fixture_name}.json"))).unwrap(),
    )
    .unwrap();
    let mut nf = build(ty, spec["config"].clone());
    check_with(ty, fixture_name, nf.as_mut())
}

#[test]
fn classifier_verdicts_per_frame() {
    check("classifier", "classifier");
}

#[test]
fn mac_swap_output() {
    check("mac_swap", "mac_swap");
}

#[test]
fn rewrite_output_with_valid_checksums() {
    check("rewrite", "rewrite");
}

#[test]
fn ttl_output_and_expiry() {
    check("ttl", "ttl");
}

#[test]
fn checksum_fix_output() {
    check("checksum_fix", "checksum_fix");
}

#[test]
fn sampler_deterministic_selection() {
    check("sampler", "sampler_deterministic");
}

#[test]
fn sampler_random_selection_with_its_seed() {
    let (_, out) = check("sampler", "sampler_random");
    assert_eq!(out.len(), 40, "unsampled packets pass");
}

#[test]
fn latency_probe_passes_frames_unchanged() {
    check("latency_probe", "latency_probe");
}

#[test]
fn cycle_burner_passes_frames_unchanged() {
    check("cycle_burner", "cycle_burner");
}

#[test]
fn mirror_writes_the_expected_pcap_file() {
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("elements", "mirror.json")).unwrap())
            .unwrap();
    let path = std::env::temp_dir().join(format!(
        "mirror-element-capture-{}.pcap",
        std::process::id()
    ));
    let mut config = spec["config"].clone();
    config["path"] = serde_json::Value::String(path.to_str().unwrap().to_string());
    let mut nf = build("mirror", config);
    let (mut h, _) = check_with("mirror", "mirror", nf.as_mut());
    h.stop(nf.as_mut());
    drop(nf);
    let got = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let want = std::fs::read(fixture("elements", "mirror_expected_file.pcap")).unwrap();
    assert_eq!(got.len(), want.len());
    assert_eq!(got[..24], want[..24], "file header");
    let input = read_pcap_ts(&fixture("elements", "mirror_in.pcap"));
    let (mut off, mut first) = (24, None);
    for (i, (ts_in, _)) in input.iter().enumerate() {
        let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let (sec, ns) = (
            u64::from(u32_at(&got, off)),
            u64::from(u32_at(&got, off + 4)),
        );
        assert!(ns < 1_000_000_000, "record {i}: nanoseconds field");
        let t = sec * 1_000_000_000 + ns;
        let (t0, in0) = *first.get_or_insert((t, *ts_in));
        assert_eq!(
            t - t0,
            ts_in - in0,
            "record {i}: timestamps keep the spacing"
        );
        let cap = u32_at(&want, off + 8) as usize;
        assert_eq!(
            got[off + 8..off + 16 + cap],
            want[off + 8..off + 16 + cap],
            "record {i}"
        );
        off += 16 + cap;
    }
    assert_eq!(off, got.len());
}
