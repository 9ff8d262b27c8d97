//! `nfs[].cpu_weight`: process NFs sharing a core share its CPU time in
//! proportion to their weights (`sluice_dataplane::sched` weights, the
//! kernel's cpu controller), each NF's CPU time is in the report, weights
//! change live, and a bad weight is a spec error.

mod common;
use common::*;

use std::time::{Duration, Instant};

/// Two one-NF chains, each with a generator of its own, so both NFs always
/// have packets: a light NF (2,000 cycles per packet) and a heavy one.
fn pair(weights: Option<[u32; 2]>) -> String {
    let w = |k: usize| weights.map_or(String::new(), |w| format!(", cpu_weight: {}", w[k]));
    format!(
        "ports:
  - {{ name: ga, kind: generator, flows: 16, protocol: udp, size: 64 }}
  - {{ name: gb, kind: generator, flows: 16, protocol: udp, size: 64 }}
  - {{ name: out, kind: sink }}
nfs:
  - {{ name: light, type: cycle_burner, config: {{ iterations_per_packet: 2000 }}, isolation: process{} }}
  - {{ name: heavy, type: cycle_burner, config: {{ iterations_per_packet: 6000 }}, isolation: process{} }}
chains:
  - {{ name: a, from: ga, nfs: [light], to: out }}
  - {{ name: b, from: gb, nfs: [heavy], to: out }}
",
        w(0),
        w(1)
    )
}

fn light_cpu_share(r: &serde_json::Value) -> f64 {
    let cpu = |n: &str| nf(r, n)["process_cpu_us"].as_u64().unwrap() as f64;
    let (l, h) = (cpu("light"), cpu("heavy"));
    assert!(
        l > 0.0 && h > 0.0,
        "every process NF's CPU time is reported: {r:#}"
    );
    l / (l + h)
}

/// Unweighted, the light NF yields after each of its cheaper batches and
/// gets about a fifth of the core (seed 000 §4); weighted 75/25 it gets
/// three quarters (0.75 measured here). The margins leave room for a busy
/// host, where the worker feeding the NFs may lag and leave one idle.
#[test]
fn weighted_nfs_share_their_core_by_weight_and_report_their_cpu_time() {
    let (_d, path) = spec_file(&pair(Some([75, 25])));
    let (out, r) = run_json(&path, 2.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    // This machine's kernel has the cpu controller (v1 or v2) for root.
    if is_root() {
        let how = r["cpu_weights"].as_str().unwrap();
        assert!(how.starts_with("cgroup-"), "{how}");
    }
    let share = light_cpu_share(&r);
    assert!(
        (0.5..0.95).contains(&share),
        "light NF's share {share:.3}: {r:#}"
    );
    // The CPU time is the processes' own, so it cannot exceed the run's
    // length on the one core they share.
    let total: u64 = ["light", "heavy"]
        .iter()
        .map(|n| nf(&r, n)["process_cpu_us"].as_u64().unwrap())
        .sum();
    let run_us = r["duration_s"].as_f64().unwrap() * 1e6;
    assert!(
        (total as f64) < run_us * 1.05,
        "{total} µs of CPU in {run_us} µs"
    );
}

/// The control group of `pid`'s cpu controller as a directory, if it is
/// one of a platform's (`.../sluice-<pid>/nf-<slot>`).
fn nf_group(pid: u64) -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let line = text.lines().find(|l| {
        let mut f = l.splitn(3, ':');
        let list = f.nth(1).unwrap_or("");
        (list.is_empty() || list.split(',').any(|c| c == "cpu")) && l.contains("/sluice-")
    })?;
    let rel = line.splitn(3, ':').nth(2)?.trim_start_matches('/');
    std::fs::read_dir("/sys/fs/cgroup")
        .ok()?
        .flatten()
        .map(|e| e.path().join(rel))
        .chain(std::iter::once(
            std::path::Path::new("/sys/fs/cgroup").join(rel),
        ))
        .find(|p| p.is_dir())
}

fn weight_file(group: &std::path::Path) -> String {
    let f = ["cpu.weight", "cpu.shares"]
        .iter()
        .map(|f| group.join(f))
        .find(|p| p.exists())
        .expect("a weight file");
    std::fs::read_to_string(f).unwrap().trim().to_string()
}

/// On a daemon: weights put each NF in a group of its own, a new weight
/// applies to the running process, removing the weights takes the NFs out
/// of the groups, and the daemon leaves no group behind.
#[test]
fn weights_change_live_and_leave_no_group_behind() {
    if !is_root() {
        eprintln!("skipped: control groups need root");
        return;
    }
    let mut d = Daemon::start();
    d.apply(&pair(Some([75, 25])));
    let before = d.running_pids(2);
    let wait_group = |pid: u64, want: bool| {
        let t = Instant::now();
        while nf_group(pid).is_some() != want {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "pid {pid} in a group: {}",
                !want
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        nf_group(pid)
    };
    let groups: Vec<_> = before
        .iter()
        .map(|&p| wait_group(p, true).unwrap())
        .collect();
    let first = weight_file(&groups[0]);
    d.apply(&pair(Some([10, 25])));
    assert_eq!(d.running_pids(2), before, "a new weight restarts no NF");
    let t = Instant::now();
    while weight_file(&groups[0]) == first {
        assert!(t.elapsed() < Duration::from_secs(10), "weight unchanged");
        std::thread::sleep(Duration::from_millis(10));
    }
    d.apply(&pair(None));
    assert_eq!(d.running_pids(2), before);
    for &p in &before {
        wait_group(p, false);
    }
    let platform = groups[0].parent().unwrap().to_path_buf();
    // A daemon that stops removes its groups.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let t = Instant::now();
    while d.child.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the daemon did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!platform.exists(), "{} left behind", platform.display());
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1).map(|u| u == "0"))
        .unwrap_or(false)
}

#[test]
fn a_bad_weight_is_a_spec_error() {
    for (bad, field) in [
        ("cpu_weight: 0", "nfs[0].cpu_weight"),
        ("cpu_weight: 10001", "nfs[0].cpu_weight"),
        ("cpu_weight: heavy", "nfs[0].cpu_weight"),
        ("cpu_weight: 50, isolation: inline", "nfs[0].cpu_weight"),
    ] {
        let text = pair(None).replacen("isolation: process", bad, 1);
        let (_d, path) = spec_file(&text);
        let out = sluice().args(["validate"]).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field), "{bad}: {err}");
    }
}

/// Three NFs of equal weight, one of them costing 100× the others per
/// packet, under hybrid polling: unweighted it takes 0.82 of the core and
/// each sibling 0.09; weighted it is held to about half (0.48-0.50) and
/// each sibling keeps a quarter. Not a third each: the kernel shares by
/// slices of milliseconds, and a cheap NF drains its 1,024-entry ring in
/// far less, then waits for packets (turns without weights measured 1/3
/// each; see the closing note of issue 16).
#[test]
fn an_nf_costing_a_hundred_times_more_keeps_only_its_weighted_share() {
    let text = pair(Some([100, 100]))
        .replace("iterations_per_packet: 6000", "iterations_per_packet: 200000")
        .replace(
            "  - { name: out, kind: sink }",
            "  - { name: gc, kind: generator, flows: 16, protocol: udp, size: 64 }\n  - { name: out, kind: sink }",
        )
        .replace(
            "chains:\n",
            "  - { name: light2, type: cycle_burner, config: { iterations_per_packet: 2000 }, isolation: process, cpu_weight: 100 }\nchains:\n  - { name: c, from: gc, nfs: [light2], to: out }\n",
        );
    let (_d, path) = spec_file(&text);
    let (out, r) = run_json(&path, 2.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    let cpu = |n: &str| nf(&r, n)["process_cpu_us"].as_u64().unwrap() as f64;
    let total = cpu("light") + cpu("light2") + cpu("heavy");
    let share = |n: &str| cpu(n) / total;
    assert!(share("heavy") < 0.65, "heavy: {:.3} {r:#}", share("heavy"));
    for n in ["light", "light2"] {
        assert!(share(n) > 0.15, "{n}: {:.3} {r:#}", share(n));
    }
    assert!(nf(&r, "light")["packets"].as_u64().unwrap() > 0);
}
