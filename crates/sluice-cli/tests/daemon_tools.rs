//! The daemon's observation tools end to end: `sluice tcpdump` writes
//! pcapng that tshark reads (with the capture filter applied), `logs`
//! shows what an NF said, `/metrics` has the per-chain latency histogram.

mod common;
use common::*;

use std::process::Stdio;

const SPEC: &str = "ports:
  - { name: gen, kind: generator, flows: 16, protocol: mixed, size: 64, rate_pps: 20000 }
  - { name: out, kind: sink }
nfs:
  - { name: acl, type: acl, isolation: process, config: { default: accept } }
chains:
  - { name: main, from: gen, nfs: [acl], to: out }
";

fn tshark_fields(file: &std::path::Path, field: &str) -> Option<Vec<String>> {
    let out = std::process::Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-T", "fields", "-e", field])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    })
}

#[test]
fn tcpdump_writes_pcapng_that_tshark_reads_with_the_filter_applied() {
    let d = Daemon::start();
    d.apply(SPEC);
    let file = d.dir.path().join("cap.pcapng");
    let out = sluice()
        .arg("--socket")
        .arg(&d.socket)
        .args(["tcpdump", "acl:out", "-c", "50", "-w"])
        .arg(&file)
        .args(["udp"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(
        &bytes[..4],
        &[0x0a, 0x0d, 0x0d, 0x0a],
        "a pcapng section header"
    );
    match tshark_fields(&file, "ip.proto") {
        Some(protos) => {
            assert_eq!(protos.len(), 50, "{protos:?}");
            assert!(protos.iter().all(|p| p == "17"), "only UDP: {protos:?}");
        }
        None => eprintln!(
            "tshark is not installed: skipping the cross-check (the file is {} bytes)",
            bytes.len()
        ),
    }
    // A port captures both its directions; an unknown target is refused.
    let (ok, _, err) = d.cli(&["tcpdump", "nosuch", "-c", "1", "-w", "/dev/null"]);
    assert!(!ok && err.contains("nosuch"), "{err}");
    let (ok, _, err) = d.cli(&[
        "tcpdump",
        "acl",
        "-c",
        "1",
        "-w",
        "/dev/null",
        "port",
        "80",
        "and",
        "(",
    ]);
    assert!(!ok && err.contains("filter"), "{err}");
}

#[test]
fn metrics_have_per_chain_latency_and_logs_show_nf_starts() {
    let d = Daemon::start();
    d.apply(SPEC);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "--unix-socket",
            d.socket.to_str().unwrap(),
            "-H",
            "Accept: application/openmetrics-text; version=1.0.0",
            "http://x/metrics",
        ])
        .output();
    if let Ok(out) = out {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("sluice_chain_latency_seconds_bucket{chain=\"main\""),
            "{text}"
        );
        assert!(
            text.contains("sluice_nf_packets_total{nf=\"acl\""),
            "{text}"
        );
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    } else {
        eprintln!("curl is not installed: skipping the metrics check");
    }
    let (ok, _, err) = d.cli(&["logs", "acl"]);
    assert!(ok, "{err}");
    let logs = sluice()
        .arg("--socket")
        .arg(&d.socket)
        .args(["logs", "acl"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(text.contains("[platform] running (pid"), "{text}");
}
