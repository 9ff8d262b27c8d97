//! Every spec in `examples/` validates, every NF type appears in one, and
//! the examples for the shaper, GRE, element graphs, the Click-style
//! elements, the reflector rig and the chaos drill do what their header
//! comments say, checked from the run report's counters.
//!
//! The checks are counts and ratios: the generator sends its flows
//! round-robin (a mixed generator's flows cycle UDP/IPv4, TCP/IPv4,
//! UDP/IPv6, TCP/IPv6), so most expectations are exact functions of the
//! packets it sent; only the shaper's rate and the added latencies are
//! compared with the clock, with wide margins.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use sluice_ports::pcap::TsResolution;
use sluice_ports::PcapReader;

/// The `examples/*.yaml` files, sorted.
fn example_specs() -> Vec<PathBuf> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    specs.sort();
    specs
}

fn assert_ok(out: &Output, r: &Value) {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(r);
}

/// Runs `examples/<name>.yaml` and checks exit status and accounting.
fn run_example(name: &str, duration: f64) -> Value {
    let (out, r) = run_json(&root().join(format!("examples/{name}.yaml")), duration);
    assert_ok(&out, &r);
    r
}

/// Runs `examples/<name>.yaml` with `from` replaced by `to` (an output
/// file moved into a temporary directory).
fn run_example_with(name: &str, from: &str, to: &Path, duration: f64) -> Value {
    let text = std::fs::read_to_string(root().join(format!("examples/{name}.yaml"))).unwrap();
    assert!(
        text.contains(from),
        "examples/{name}.yaml no longer uses {from}"
    );
    let (_dir, spec) = spec_file(&text.replace(from, to.to_str().unwrap()));
    let (out, r) = run_json(&spec, duration);
    assert_ok(&out, &r);
    r
}

/// Counter `counter` of NF `name`.
fn ctr(r: &Value, name: &str, counter: &str) -> u64 {
    nf(r, name)["counters"][counter]
        .as_u64()
        .unwrap_or_else(|| panic!("NF {name} has no counter {counter}: {r:#}"))
}

fn top(r: &Value, key: &str) -> u64 {
    r[key].as_u64().unwrap_or_else(|| panic!("no {key}: {r:#}"))
}

/// Drops by reason, as (reason, count) pairs.
fn drops(r: &Value) -> Vec<(String, u64)> {
    r["drops"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// How many of packets 0..k a round-robin generator gave to flow kind
/// `kind` of `kinds` (kinds dividing the flow count).
fn of_kind(k: u64, kind: u64, kinds: u64) -> u64 {
    (k + kinds - 1 - kind) / kinds
}

/// The records of a pcap file: (original length, captured bytes).
fn pcap_records(path: &Path) -> (TsResolution, u32, Vec<(u32, Vec<u8>)>) {
    let mut rd = PcapReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (res, link) = (rd.header().resolution, rd.header().linktype);
    let mut recs = Vec::new();
    while let Some(p) = rd.next_packet().unwrap() {
        recs.push((p.orig_len, p.data.to_vec()));
    }
    (res, link, recs)
}

#[test]
fn every_example_validates() {
    let specs = example_specs();
    assert!(specs.len() >= 18, "examples: {specs:?}");
    for spec in &specs {
        let out = sluice().arg("validate").arg(spec).output().unwrap();
        assert!(
            out.status.success(),
            "sluice validate {}: exit {:?}\n{}",
            spec.display(),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Validating builds every NF; the mirror of `examples/elements.yaml`
/// used to create (truncate) its capture doing so, destroying the last
/// run's. Checked on a copy whose capture path is a file of known content
/// (the real `/tmp/sluice-elements.pcap` may be written by anyone).
#[test]
fn validating_the_elements_example_leaves_its_capture_alone() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("last-run.pcap");
    let content: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    std::fs::write(&capture, &content).unwrap();
    let text = std::fs::read_to_string(root().join("examples/elements.yaml")).unwrap();
    let from = "/tmp/sluice-elements.pcap";
    assert!(
        text.contains(from),
        "examples/elements.yaml no longer uses {from}"
    );
    let spec = dir.path().join("elements.yaml");
    std::fs::write(&spec, text.replace(from, capture.to_str().unwrap())).unwrap();
    let out = sluice().arg("validate").arg(&spec).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&capture).unwrap(), content);
}

/// The NF-library issue is done when every NF type runs in an example.
#[test]
fn every_nf_type_appears_in_an_example() {
    let out = sluice().arg("nf-types").output().unwrap();
    assert!(out.status.success());
    let listing = String::from_utf8(out.stdout).unwrap();
    let types: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(types.len() >= 29, "{listing}");
    let texts: Vec<String> = example_specs()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let used = |t: &str| {
        let key = format!("type: {t}");
        texts.iter().any(|text| {
            text.match_indices(&key).any(|(i, _)| {
                !text[i + key.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        })
    };
    let missing: Vec<&str> = types.iter().copied().filter(|t| !used(t)).collect();
    assert!(
        missing.is_empty(),
        "NF types without an example: {missing:?}"
    );
}

/// 2.5× the shaper's rate is offered: it sends at its rate, queues in
/// order, drops what the full queue cannot take, and the queue shows up
/// as latency after it.
#[test]
fn shaper_example_sends_at_its_rate() {
    let r = run_example("shaper", 1.5);
    let packets = nf(&r, "shape")["packets"].as_u64().unwrap();
    let (passed, queued, released) = (
        ctr(&r, "shape", "passed"),
        ctr(&r, "shape", "queued"),
        ctr(&r, "shape", "released"),
    );
    let full = r["drops"]["shape:queue_full"].as_u64().unwrap_or(0);
    assert_eq!(drops(&r).len(), usize::from(full > 0), "{r:#}");
    assert_eq!(packets, top(&r, "packets_in"), "{r:#}");
    assert_eq!(passed + queued + full, packets, "{r:#}");
    // `stop` flushes the queue: everything queued was released.
    assert_eq!(released, queued, "{r:#}");
    assert_eq!(ctr(&r, "shape", "backlog"), 0, "{r:#}");
    assert_eq!(passed + released, top(&r, "packets_out"), "{r:#}");
    assert!(full > 0, "offered 2.5x the rate, nothing dropped: {r:#}");

    // 8mbit = 1 MB/s. At most rate × t + burst, plus the queue (256 ×
    // 500 B) that `stop` flushes regardless of tokens; at least most of
    // rate × t (the NF may be descheduled on a busy machine).
    let sent = ctr(&r, "shape", "passed_bytes") + ctr(&r, "shape", "released_bytes");
    assert_eq!(sent, top(&r, "bytes_out"), "{r:#}");
    let t = r["duration_s"].as_f64().unwrap();
    let most = 1e6 * t * 1.01 + 16.0 * 1024.0 + 256.0 * 500.0;
    let least = 1e6 * t * 0.8;
    assert!(
        (least..=most).contains(&(sent as f64)),
        "{sent} bytes in {t} s, expected {least}..={most}: {r:#}"
    );
    // FIFO: no flow is reordered.
    assert_eq!(port(&r, "out")["reordered"], 0, "{r:#}");
    // A full queue holds 256 × 500 B / 1 MB/s = 128 ms of traffic.
    assert_eq!(ctr(&r, "probe", "samples"), top(&r, "packets_out"));
    let p50 = ctr(&r, "probe", "p50_ns");
    assert!(p50 >= 64_000_000, "p50 {p50} ns: {r:#}");
}

/// encap → underlay TTL hop → decap: every packet is encapsulated,
/// routed and decapsulated, and the sink gets the frames back unchanged.
#[test]
fn gre_example_round_trips_every_packet() {
    let r = run_example("gre", 1.5);
    let n = top(&r, "packets_in");
    assert!(n > 1000, "{r:#}");
    assert!(drops(&r).is_empty(), "{r:#}");
    assert_eq!(ctr(&r, "gre_a", "encapsulated"), n, "{r:#}");
    assert_eq!(ctr(&r, "underlay", "decremented"), n, "{r:#}");
    assert_eq!(ctr(&r, "underlay", "expired"), 0, "{r:#}");
    assert_eq!(ctr(&r, "gre_b", "decapsulated"), n, "{r:#}");
    assert_eq!(ctr(&r, "gre_b", "invalid"), 0, "{r:#}");
    assert_eq!(top(&r, "packets_out"), n, "{r:#}");
    // Same bytes out as in: the 46 outer bytes are gone again.
    assert_eq!(top(&r, "bytes_out"), port(&r, "gen")["rx_bytes"], "{r:#}");
    assert_eq!(port(&r, "out")["reordered"], 0, "{r:#}");
}

/// The graph's classifier splits TCP and UDP between two tunnels; the
/// UDP tunnel's outer TTL of 1 expires at the underlay hop, exactly.
#[test]
fn graph_example_expires_the_ttl_1_tunnel() {
    let r = run_example("graph", 1.5);
    let n = top(&r, "packets_in");
    assert!(n > 1000, "{r:#}");
    let h = |c: &str| ctr(&r, "headend", c);
    assert_eq!(h("split.matched"), n, "{r:#}");
    assert_eq!(h("split.defaulted"), 0, "{r:#}");
    // Flows alternate UDP, TCP, starting with UDP.
    let (tcp, udp) = (of_kind(n, 1, 2), of_kind(n, 0, 2));
    assert_eq!(h("to_b.encapsulated"), tcp, "{r:#}");
    assert_eq!(h("to_c.encapsulated"), udp, "{r:#}");
    assert_eq!(h("core.expired"), udp, "{r:#}");
    assert_eq!(h("core.decremented"), tcp, "{r:#}");
    assert_eq!(
        drops(&r),
        vec![("headend:core.expired".to_string(), udp)],
        "{r:#}"
    );
    assert_eq!(ctr(&r, "far", "decapsulated"), tcp, "{r:#}");
    assert_eq!(top(&r, "packets_out"), tcp, "{r:#}");
}

/// mirror → classifier (detours to rewrite / cycle_burner / sampler) →
/// checksum_fix → latency_probe, on a generator cycling four flow kinds.
#[test]
fn elements_example_classifies_samples_and_mirrors() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("tap.pcap");
    let r = run_example_with("elements", "/tmp/sluice-elements.pcap", &pcap, 1.5);
    let n = top(&r, "packets_in");
    assert!(n > 1000, "{r:#}");
    assert!(drops(&r).is_empty(), "{r:#}");
    // Kinds 0..4: UDP/IPv4, TCP/IPv4, UDP/IPv6, TCP/IPv6.
    let k = |kind| of_kind(n, kind, 4);
    let (tcp, udp6, udp4) = (k(1) + k(3), k(2), k(0));

    assert_eq!(ctr(&r, "cls", "matched"), n, "{r:#}");
    assert_eq!(ctr(&r, "cls", "defaulted"), 0, "{r:#}");
    let per_rule: Vec<u64> = nf(&r, "cls")["ext_counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per_rule[..3], [tcp, udp6, udp4], "{r:#}");

    assert_eq!(ctr(&r, "web", "rewritten"), tcp, "{r:#}");
    assert_eq!(ctr(&r, "dpi", "packets"), udp6, "{r:#}");
    assert_eq!(ctr(&r, "dpi", "iterations"), 2000 * udp6, "{r:#}");
    // Deterministic 1 in 10: packets 10, 20, … of the sampler's.
    let sampled = udp4 / 10;
    assert_eq!(ctr(&r, "sample", "sampled"), sampled, "{r:#}");
    assert_eq!(ctr(&r, "sample", "unsampled"), udp4 - sampled, "{r:#}");
    assert_eq!(port(&r, "analyzer")["tx_packets"], sampled, "{r:#}");
    assert_eq!(port(&r, "out")["tx_packets"], n - sampled, "{r:#}");
    // rewrite and the generator leave nothing for checksum_fix to fix.
    assert_eq!(ctr(&r, "fix", "checked"), n - sampled, "{r:#}");
    assert_eq!(ctr(&r, "fix", "fixed"), 0, "{r:#}");
    assert_eq!(ctr(&r, "probe", "samples"), n - sampled, "{r:#}");
    assert_eq!(ctr(&r, "probe", "unstamped"), 0, "{r:#}");

    // The mirror saw everything, before the classifier.
    assert_eq!(ctr(&r, "tap", "captured"), n, "{r:#}");
    assert_eq!(ctr(&r, "tap", "write_errors"), 0, "{r:#}");
    let size = std::fs::metadata(&pcap).unwrap().len();
    assert_eq!(ctr(&r, "tap", "bytes_written"), size, "{r:#}");
    let (res, link, recs) = pcap_records(&pcap);
    assert_eq!((res, link), (TsResolution::Nanos, 1));
    assert_eq!(recs.len() as u64, n);
    assert!(recs
        .iter()
        .all(|(orig, data)| *orig == 128 && data.len() == 96));
    let v6 = recs
        .iter()
        .filter(|(_, d)| d[12..14] == [0x86, 0xdd])
        .count() as u64;
    assert_eq!(v6, k(2) + k(3));
}

/// delay → mac_swap → inline tee to a pcap_out port.
#[test]
fn reflector_example_delays_swaps_and_copies() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("capture.pcap");
    let r = run_example_with("reflector", "/tmp/sluice-reflector.pcap", &pcap, 1.5);
    let n = top(&r, "packets_in");
    assert!(n > 1000, "{r:#}");
    assert!(drops(&r).is_empty(), "{r:#}");
    assert_eq!(ctr(&r, "wire", "delayed"), n, "{r:#}");
    assert_eq!(ctr(&r, "wire", "held"), 0, "{r:#}");
    assert_eq!(ctr(&r, "reflect", "swapped"), n, "{r:#}");
    assert_eq!(ctr(&r, "copy", "copies"), n, "{r:#}");
    assert_eq!(ctr(&r, "copy", "copies_missed"), 0, "{r:#}");
    assert_eq!(top(&r, "packets_originated"), n, "{r:#}");
    assert_eq!(port(&r, "out")["tx_packets"], n, "{r:#}");
    assert_eq!(port(&r, "capture")["tx_packets"], n, "{r:#}");
    // Every packet waited at least the 1 ms of the delay line.
    let p50 = r["latency_ns"]["p50"].as_u64().unwrap();
    assert!(p50 >= 950_000, "p50 {p50} ns: {r:#}");

    let (_, link, recs) = pcap_records(&pcap);
    assert_eq!(link, 1);
    assert_eq!(recs.len() as u64, n);
    let (gen_src, gen_dst) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    for (_, d) in &recs {
        assert_eq!((&d[0..6], &d[6..12]), (&gen_src[..], &gen_dst[..]));
    }
}

/// The middle NF panics every 20 000 packets; the platform restarts it
/// and traffic flows on.
#[test]
fn chaos_example_survives_repeated_panics() {
    let r = run_example("chaos", 1.5);
    let bad = nf(&r, "bad");
    assert!(bad["restarts"].as_u64().unwrap() >= 1, "{r:#}");
    assert!(
        bad["last_exit"].as_str().unwrap().contains("panicked"),
        "{r:#}"
    );
    let d = drops(&r);
    assert!(
        d.iter().all(|(k, _)| k == "nf_crashed" || k == "nf_down"),
        "{r:#}"
    );
    assert!(d.iter().any(|(k, v)| k == "nf_crashed" && *v > 0), "{r:#}");
    let out = top(&r, "packets_out");
    // More than the first instance passed: traffic resumed.
    assert!(out > 20_000, "{r:#}");
    assert_eq!(nf(&r, "pre")["packets"], r["packets_in"], "{r:#}");
    assert_eq!(ctr(&r, "mon", "packets"), out, "{r:#}");
}
