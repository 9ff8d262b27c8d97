//! Trust domains: NFs of different domains in one chain. Every packet
//! crosses each boundary by copy (counted per NF as `domain_copies`),
//! arrives whole, and every buffer of every domain comes back.

mod common;
use common::*;

const SPEC: &str = "\
settings:
  domains:
    - { name: red, buffers: 2048 }
    - { name: blue, buffers: 512 }
ports:
  - { name: gen, kind: generator, flows: 16, protocol: udp, size: 200, count: 20000, rate_pps: 100000 }
  - { name: out, kind: sink }
nfs:
  - { name: mine, type: forwarder, isolation: process }
  - { name: theirs, type: forwarder, isolation: process, domain: red }
  - { name: also_theirs, type: forwarder, isolation: process, domain: red }
  - { name: other, type: monitor, isolation: process, domain: blue }
  - { name: last, type: forwarder, isolation: process }
  - { name: inline, type: forwarder, isolation: inline }
chains:
  - { name: c, from: gen, nfs: [mine, theirs, also_theirs, other, last, inline], to: out }
";

/// Runs `path` for `secs` and returns its report, which must show a
/// clean exit and every buffer and packet accounted for.
fn run_accounted(path: &std::path::Path, secs: f64) -> serde_json::Value {
    let (out, r) = run_json(path, secs);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    r
}

#[test]
fn packets_cross_trust_domains_by_copy_and_arrive_whole() {
    let (_dir, path) = spec_file(SPEC);
    let r = run_accounted(&path, 1.5);
    let sent = port(&r, "gen")["rx_packets"].as_u64().unwrap();
    assert_eq!(sent, 20_000, "{r:#}");
    assert_eq!(port(&r, "out")["tx_packets"], sent, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["bytes_out"].as_u64().unwrap(), 200 * sent, "{r:#}");
    // Copies happen at each boundary and only there: into `red`, on into
    // `blue`, back into `platform`; the inline NF runs in the worker,
    // which maps every domain, and copies nothing.
    for (name, domain, copies) in [
        ("mine", "platform", 0),
        ("theirs", "red", sent),
        ("also_theirs", "red", 0),
        ("other", "blue", sent),
        ("last", "platform", sent),
        ("inline", "platform", 0),
    ] {
        let n = nf(&r, name);
        assert_eq!(n["domain"], domain, "{n:#}");
        assert_eq!(n["domain_copies"], copies, "{name}: {n:#}");
        assert!(n["last_exit"].is_null(), "{n:#}");
    }
    // Each domain's buffers are accounted on their own, all back.
    let by: Vec<(String, u64, u64)> = r["buffers"]["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let (cap, free) = (d["capacity"].as_u64().unwrap(), d["free"].as_u64().unwrap());
            (d["name"].as_str().unwrap().to_string(), cap, free)
        })
        .collect();
    let names: Vec<&str> = by.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(names, ["platform", "red", "blue"], "{r:#}");
    for ((_, cap, free), asked) in by.iter().zip([0, 2048, 512]) {
        assert!(*cap >= asked && cap == free, "{by:?}");
    }
    let total: u64 = by.iter().map(|d| d.1).sum();
    assert_eq!(r["buffers"]["capacity"], total);
}

#[test]
fn a_daemon_takes_its_domains_from_the_first_spec_and_keeps_them() {
    let d = Daemon::start();
    let spec = SPEC.replace("count: 20000, rate_pps: 100000", "rate_pps: 20000");
    d.apply(&spec);
    let (ok, nfs, err) = d.cli(&["get", "nfs", "-o", "json"]);
    assert!(ok, "{err}");
    let theirs = nfs
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "theirs")
        .unwrap();
    assert_eq!(theirs["domain"], "red", "{theirs:#}");
    // Another NF into an existing domain is a live change…
    d.apply(&spec.replace(
        "  - { name: inline,",
        "  - { name: more, type: forwarder, isolation: process, domain: blue }\n  - { name: inline,",
    ));
    // …new domains are not: nothing changes and the error says why.
    let path = d.dir.path().join("other.yaml");
    std::fs::write(&path, spec.replace("buffers: 512", "buffers: 1024")).unwrap();
    let (ok, _, err) = d.cli(&["apply", "-f", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("settings.domains") && err.contains("blue (512)"),
        "{err}"
    );
    let (_, nfs, _) = d.cli(&["get", "nfs", "-o", "json"]);
    assert!(nfs.as_array().unwrap().iter().any(|n| n["name"] == "more"));
}

/// An NF that holds more packets than its domain has buffers: packets wait
/// upstream for the domain's buffers, as for ring space, and none is
/// dropped at the boundary.
#[test]
fn packets_wait_for_a_small_domain_s_buffers_instead_of_being_dropped() {
    let (_dir, path) = spec_file(
        "\
settings:
  domains: [ { name: small, buffers: 256 } ]
ports:
  - { name: gen, kind: generator, flows: 4, protocol: udp, size: 100, count: 4000, rate_pps: 50000 }
  - { name: out, kind: sink }
nfs:
  - { name: hold, type: delay, isolation: process, domain: small, config: { delay_us: 20000 } }
chains:
  - { name: c, from: gen, nfs: [hold], to: out }
",
    );
    let r = run_accounted(&path, 4.0);
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(port(&r, "gen")["rx_packets"], 4000, "{r:#}");
    assert_eq!(port(&r, "out")["tx_packets"], 4000, "{r:#}");
    // 50,000 packets/s for 20 ms is 1,000 held at once: four times the
    // domain's buffers, so the boundary did hold packets back.
    assert_eq!(nf(&r, "hold")["domain_copies"], 4000, "{r:#}");
}

/// The most domains a spec may declare: the template receives every
/// region of the arena (two per domain) and the NF of the last domain runs.
#[test]
fn an_nf_runs_in_the_last_of_fifteen_domains() {
    let domains: Vec<String> = (1..=15)
        .map(|k| format!("{{ name: d{k}, buffers: 256 }}"))
        .collect();
    let (_dir, path) = spec_file(&format!(
        "\
settings:
  domains: [ {} ]
ports:
  - {{ name: gen, kind: generator, flows: 4, protocol: udp, size: 100, count: 2000, rate_pps: 50000 }}
  - {{ name: out, kind: sink }}
nfs:
  - {{ name: last, type: forwarder, isolation: process, domain: d15 }}
chains:
  - {{ name: c, from: gen, nfs: [last], to: out }}
",
        domains.join(", ")
    ));
    let r = run_accounted(&path, 4.0);
    assert_eq!(port(&r, "out")["tx_packets"], 2000, "{r:#}");
    let n = nf(&r, "last");
    assert_eq!(n["domain"], "d15", "{n:#}");
    assert_eq!(n["domain_copies"], 2000, "{n:#}");
    assert_eq!(r["buffers"]["domains"].as_array().unwrap().len(), 16);
}
