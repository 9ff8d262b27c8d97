//! `settings.scheduler`: process NFs sharing a core take turns in chain
//! order (`sluice_mem::turn`, `sluice_dataplane::sched`). Under turns every
//! packet still arrives, in order, and each NF counts the turns it took;
//! under hybrid polling none takes a turn. The policy changes on a running
//! daemon without restarting an NF or losing a packet.

mod common;
use common::*;

use std::time::{Duration, Instant};

const NFS: usize = 8;

fn spec(policy: &str, count: u64, rate: u64) -> String {
    let names: Vec<String> = (0..NFS).map(|i| format!("f{i}")).collect();
    let mut s = format!(
        "settings:\n  scheduler: {{ policy: {policy} }}\nports:\n  - {{ name: gen, kind: generator, flows: 64, protocol: udp, rate_pps: {rate}, count: {count} }}\n  - {{ name: out, kind: sink }}\nnfs:\n"
    );
    for n in &names {
        s += &format!("  - {{ name: {n}, type: forwarder, isolation: process }}\n");
    }
    s += &format!(
        "chains:\n  - {{ name: c, from: gen, nfs: [{}], to: out }}\n",
        names.join(", ")
    );
    s
}

/// Runs 40,000 packets through the chain at `rate` pps: the run succeeds
/// and every packet is delivered, none dropped. Returns the run's stderr
/// and report.
fn run_all(policy: &str, rate: u64) -> (String, serde_json::Value) {
    let (_d, path) = spec_file(&spec(policy, 40_000, rate));
    let (out, r) = run_json(&path, 60.0);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_accounted(&r);
    assert_eq!(r["packets_out"], 40_000, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    (stderr, r)
}

fn run(policy: &str) -> serde_json::Value {
    let (_, r) = run_all(policy, 40_000);
    assert_eq!(port(&r, "out")["reordered"], 0, "{r:#}");
    r
}

#[test]
fn a_chain_taking_turns_delivers_every_packet_in_order() {
    let r = run("turns");
    for i in 0..NFS {
        let f = nf(&r, &format!("f{i}"));
        assert_eq!(f["packets"], 40_000, "{r:#}");
        assert!(f["turns"].as_u64().unwrap() > 0, "f{i} took no turn: {r:#}");
    }
    // Hand-overs take time (a futex wake-up each), and it is reported.
    let waited: u64 = (0..NFS)
        .map(|i| nf(&r, &format!("f{i}"))["turn_wait_us"].as_u64().unwrap())
        .sum();
    assert!(waited > 0, "{r:#}");
}

#[test]
fn under_hybrid_polling_no_nf_takes_a_turn() {
    let r = run("hybrid");
    for i in 0..NFS {
        assert_eq!(nf(&r, &format!("f{i}"))["turns"], 0, "{r:#}");
        assert_eq!(nf(&r, &format!("f{i}"))["turn_wait_us"], 0, "{r:#}");
    }
}

#[test]
fn an_invalid_policy_is_a_spec_error() {
    for (scheduler, field) in [
        (
            "{ policy: fastest, slice_us: 5 }",
            "settings.scheduler.policy",
        ),
        (
            "{ policy: turns, slice_us: 0 }",
            "settings.scheduler.slice_us",
        ),
        (
            "{ policy: hybrid, yield_every: -1 }",
            "settings.scheduler.yield_every",
        ),
        (
            "{ policy: hybrid, kernel_class: fifo }",
            "settings.scheduler.kernel_class",
        ),
    ] {
        let text = spec("turns", 10, 10).replace("{ policy: turns }", scheduler);
        let (_d, path) = spec_file(&text);
        let out = sluice().args(["validate"]).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{scheduler}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field), "{scheduler}: {err}");
    }
}

/// hybrid → turns → hybrid on a running daemon while 100 kpps flow: the
/// same NF processes throughout, every packet out, none dropped.
#[test]
fn the_policy_changes_live_without_restarts_or_loss() {
    const COUNT: u64 = 300_000;
    let d = Daemon::start();
    d.apply(&spec("hybrid", COUNT, 100_000));
    let wait_in = |n: u64| {
        let t = Instant::now();
        while d.stats()["packets_in"].as_u64().unwrap_or(0) < n {
            assert!(t.elapsed() < Duration::from_secs(60), "traffic stalled");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let pids = |d: &Daemon| -> Vec<serde_json::Value> {
        let mut p: Vec<_> = d.instances().iter().map(|i| i["pid"].clone()).collect();
        p.sort_by_key(|v| v.as_u64());
        p
    };
    wait_in(50_000);
    let before = pids(&d);
    assert_eq!(before.len(), NFS);
    d.apply(&spec("turns", COUNT, 100_000));
    wait_in(150_000);
    let s = d.stats();
    let turns: u64 = (0..NFS)
        .map(|i| nf(&s, &format!("f{i}"))["turns"].as_u64().unwrap())
        .sum();
    assert!(turns > 0, "the NFs take turns now: {s:#}");
    d.apply(&spec("hybrid", COUNT, 100_000));
    let s = delivered(&d, COUNT);
    assert_eq!(pids(&d), before, "no NF was restarted");
    assert_eq!(s["drops_total"], 0, "{s:#}");
    assert_eq!(s["packets_out"], COUNT, "{s:#}");
    assert_eq!(port(&s, "out")["reordered"], 0, "{s:#}");
}

/// An NF that never returns from `process` (chaos `hang`: spinning; chaos
/// `sleep`: asleep) while its core's NFs take turns: the scheduler takes
/// the turn back from it (counted), takes it out of the turns and lowers
/// its priority; the other chain on the same core delivers every packet,
/// and the run still stops.
#[test]
fn an_nf_that_never_returns_from_process_is_contained() {
    for fault in ["hang", "sleep"] {
        let spec = format!("settings:\n  scheduler: {{ policy: turns }}\nports:\n  - {{ name: gen_a, kind: generator, flows: 4, protocol: udp, rate_pps: 20000, count: 20000 }}\n  - {{ name: gen_b, kind: generator, flows: 4, protocol: udp, rate_pps: 20000, count: 20000 }}\n  - {{ name: out_a, kind: sink }}\n  - {{ name: out_b, kind: sink }}\nnfs:\n  - {{ name: hog, type: chaos, isolation: process, config: {{ fault: {fault}, after_packets: 100 }} }}\n  - {{ name: fa, type: forwarder, isolation: process }}\n  - {{ name: b0, type: forwarder, isolation: process }}\n  - {{ name: b1, type: forwarder, isolation: process }}\n  - {{ name: b2, type: forwarder, isolation: process }}\n  - {{ name: b3, type: forwarder, isolation: process }}\nchains:\n  - {{ name: a, from: gen_a, nfs: [hog, fa], to: out_a }}\n  - {{ name: b, from: gen_b, nfs: [b0, b1, b2, b3], to: out_b }}\n");
        let (_d, path) = spec_file(&spec);
        let (out, r) = run_json(&path, 6.0);
        assert!(
            out.status.success(),
            "{fault}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_accounted(&r);
        assert_eq!(port(&r, "out_b")["tx_packets"], 20_000, "{fault}: {r:#}");
        assert_eq!(port(&r, "out_b")["reordered"], 0, "{fault}: {r:#}");
        let hog = nf(&r, "hog");
        assert!(
            hog["turns_revoked"].as_u64().unwrap() >= 1,
            "{fault}: {r:#}"
        );
        for b in ["b0", "b1", "b2", "b3"] {
            assert_eq!(nf(&r, b)["packets"], 20_000, "{fault}: {r:#}");
        }
    }
}

/// Turns on a host that overcommits the NFs' core: three threads of this
/// test spin on it beside the chain, so every holder is held off its CPU
/// now and then. No NF is blamed for that (`turns_revoked` stays 0), none
/// is starved, and every packet arrives: turns never drop what hybrid
/// polling would carry (found by the elements example under CI's parallel
/// tests, where holders were judged hogs and starved at nice 19).
#[test]
fn a_busy_host_neither_blames_nor_starves_nfs_taking_turns() {
    let cpus = sluice_sys::allowed_cpus();
    let nf_cpu = *cpus.last().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let _ = sluice_sys::pin_to_cpu(nf_cpu);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    // Stop the spinners even if the run's assertions fail.
    struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let stopper = Stop(stop);
    let (stderr, r) = run_all("turns", 20_000);
    drop(stopper);
    for s in spinners {
        s.join().unwrap();
    }
    for i in 0..NFS {
        assert_eq!(
            nf(&r, &format!("f{i}"))["turns_revoked"],
            0,
            "{r:#}\n{stderr}"
        );
    }
}

/// The daemon's stats once `count` packets are out, or after a minute.
fn delivered(d: &Daemon, count: u64) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let s = d.stats();
        if s["packets_out"] == count || t.elapsed() > Duration::from_secs(60) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (at most 10 s) until every process of `pids` runs under kernel
/// policy `want`.
fn wait_policy(pids: &[u64], want: u64) {
    let t = Instant::now();
    while !pids.iter().all(|&p| kernel_policy(p) == want) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "NFs not in kernel policy {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The kernel class of process `pid` from `/proc/PID/stat` (field 41,
/// `policy`: 0 normal, 2 round robin).
fn kernel_policy(pid: u64) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    // Fields from the state (3rd) on: `policy` is the 41st field.
    after_name.split(' ').nth(41 - 3).unwrap().parse().unwrap()
}

/// `kernel_class: round_robin` and `yield_every` (the baselines of `sluice
/// bench sched`) on a running daemon: the same NF processes go into
/// SCHED_RR and back to the normal class, the report counts them, and
/// every packet arrives.
#[test]
fn the_kernel_class_changes_live_and_follows_the_nfs() {
    const COUNT: u64 = 200_000;
    let as_rr = |yield_every: u32, class: &str| {
        spec("hybrid", COUNT, 100_000).replace(
            "{ policy: hybrid }",
            &format!("{{ policy: hybrid, yield_every: {yield_every}, kernel_class: {class} }}"),
        )
    };
    let d = Daemon::start();
    d.apply(&as_rr(8, "round_robin"));
    let mut before = d.running_pids(NFS);
    before.sort_unstable();
    let root = is_root();
    let want = if root { 2 } else { 0 };
    wait_policy(&before, want);
    let s = d.stats();
    assert_eq!(
        s["realtime_nfs"],
        if root { NFS as u64 } else { 0 },
        "{s:#}"
    );
    d.apply(&as_rr(0, "normal"));
    wait_policy(&before, 0);
    let s = delivered(&d, COUNT);
    let mut after = d.running_pids(NFS);
    after.sort_unstable();
    assert_eq!(after, before, "no NF was restarted");
    assert_eq!(s["realtime_nfs"], 0, "{s:#}");
    assert_eq!(s["drops_total"], 0, "{s:#}");
    assert_eq!(s["packets_out"], COUNT, "{s:#}");
}

/// Whether this test runs as root (may put processes in real time).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}
