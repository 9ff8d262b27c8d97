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
    let text = logs(&d, "acl");
    assert!(text.contains("[platform] running (pid"), "{text}");
}

/// `sluice logs NF`'s text (it must succeed).
fn logs(d: &Daemon, nf: &str) -> String {
    let out = sluice()
        .arg("--socket")
        .arg(&d.socket)
        .args(["logs", nf])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sluice logs {nf}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a process NF writes reaches `sluice logs`, its last words before
/// the platform's account of its exit: here the panic message of a chaos
/// NF, written as it dies. The platform reads the NFs' output pipes itself
/// (the template hands each over as it forks the NF), and reads a pipe to
/// its end before it reports that NF's exit.
#[test]
fn logs_show_what_an_nf_wrote_before_its_exit() {
    let d = Daemon::start();
    d.apply(
        "ports:
  - { name: gen, kind: generator, flows: 16, protocol: udp, size: 64, rate_pps: 20000 }
  - { name: out, kind: sink }
nfs:
  - { name: bad, type: chaos, isolation: process, config: { fault: panic, after_packets: 2000 } }
chains:
  - { name: main, from: gen, nfs: [bad], to: out }
settings:
  restart: { policy: always, max_restarts: 100, backoff_ms: 5 }
",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let text = loop {
        let out = logs(&d, "bad");
        let exits = out.matches("[platform] NF bad (pid").count();
        if exits >= 2 || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let lines: Vec<&str> = text.lines().collect();
    let exits: Vec<usize> = (lines.iter().enumerate())
        .filter(|(_, l)| l.starts_with("[platform] NF bad (pid") && l.contains("panicked"))
        .map(|(i, _)| i)
        .collect();
    assert!(exits.len() >= 2, "two crashes and restarts in:\n{text}");
    // Each crash's panic message, from the NF's own stderr, comes before
    // the platform's line for that crash and after the one before it.
    let mut from = 0;
    for &e in &exits {
        assert!(
            lines[from..e]
                .iter()
                .any(|l| !l.starts_with("[platform]")
                    && l.contains("chaos NF: injected panic after")),
            "no panic message before line {e} in:\n{text}"
        );
        from = e + 1;
    }
}

/// The template processes of daemon `pid` (its children named so).
fn templates_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for c in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            if comm.trim() == "sluice-template" {
                out.push(c);
            }
        }
    }
    out
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The template hands each NF's output pipe to the platform: its
/// descriptor table does not grow with its NFs (each fork would copy it,
/// and each new NF close it), while what the NFs write still reaches the
/// platform.
#[test]
fn the_template_holds_no_descriptor_per_nf() {
    let d = Daemon::start();
    d.apply(SPEC);
    let tpl = templates_of(d.child.id());
    assert_eq!(tpl.len(), 1, "one worker, one template: {tpl:?}");
    let tpl = tpl[0];
    let settle = |want_below: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let n = open_fds(tpl);
            if n < want_below || std::time::Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let one = settle(usize::MAX);
    let mut nfs = String::from("nfs:\n");
    let mut chains = String::from("chains:\n");
    for i in 0..24 {
        nfs += &format!("  - {{ name: f{i}, type: forwarder, isolation: process }}\n");
        chains += &format!("  - {{ name: c{i}, from: g{i}, nfs: [f{i}], to: out }}\n");
    }
    let mut ports = String::from("ports:\n");
    for i in 0..24 {
        ports += &format!(
            "  - {{ name: g{i}, kind: generator, flows: 4, protocol: udp, size: 64, rate_pps: 100 }}\n"
        );
    }
    let path = d.dir.path().join("more.yaml");
    std::fs::write(&path, format!("{ports}{nfs}{chains}")).unwrap();
    let (ok, _, err) = d.cli(&["add", "-f", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    // Offered pipes close as soon as the platform took them.
    let many = settle(one + 3);
    assert!(
        many <= one + 2,
        "the template's descriptors grew from {one} to {many} with 24 more NFs"
    );
}
