//! What a crash costs: a killed NF loses only the packets it held (what
//! waited in its ring goes to its next instance, and packets wait while it
//! restarts); a killed NF template is noticed at once and restarted with
//! its NFs; many process NFs start without the control channel blocking;
//! long process chains deliver every packet.

mod common;
use common::*;

use std::process::Stdio;
use std::time::Duration;

#[test]
fn repeated_kills_lose_only_what_the_killed_nf_held() {
    // Four process NFs at 200 000 packets/s; one is SIGKILLed every
    // 300 ms, in turn. Before, packets that arrived while an NF restarted
    // were dropped (`nf_down`, ~2,000 per kill) and its whole queue with it.
    let names = ["a", "b", "c", "d"];
    let nfs: String = names
        .iter()
        .map(|n| format!("  - {{ name: {n}, type: forwarder, isolation: process }}\n"))
        .collect();
    let spec = chain_spec(
        200_000,
        &nfs,
        &names.join(", "),
        "policy: always, max_restarts: 100, backoff_ms: 5",
    )
    .replace("rate_pps: 200000 }", "rate_pps: 200000, count: 800000 }");
    let (_d, path) = spec_file(&spec);
    let child = start_run(&path);
    let pid = child.id();
    for n in names {
        wait_for(pid, &format!("nf:{n}"), 1);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut kills = 0u64;
    for round in 0..6 {
        let victim = names[round % names.len()];
        let pids = descendants_named(pid, &format!("nf:{victim}"));
        if let Some(&p) = pids.first() {
            kill_9(p);
            kills += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let (out, r) = finish_json(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert!(kills >= 5, "the NFs ran long enough to be killed");
    let restarts: u64 = names
        .iter()
        .map(|n| nf(&r, n)["restarts"].as_u64().unwrap())
        .sum();
    assert_eq!(restarts, kills, "{r:#}");
    // Every restart came back, and its time counts from the exit seen, so
    // it includes the 5 ms backoff.
    for n in names {
        let t = &nf(&r, n)["restart_times"];
        assert_eq!(t["count"], nf(&r, n)["restarts"], "{n}: {r:#}");
        if t["count"].as_u64().unwrap() > 0 {
            let max = t["max_us"].as_f64().unwrap();
            let mean = t["total_us"].as_f64().unwrap() / t["count"].as_f64().unwrap();
            assert!(max >= mean && mean >= 5_000.0, "{n}: {t}");
        }
    }
    assert!(
        r["drops"].get("nf_down").is_none(),
        "nothing waited in vain: {r:#}"
    );
    // A forwarder holds at most the batch it took in (32 packets): what
    // waited in its ring went to its next instance.
    let crashed = r["drops"]["nf_crashed"].as_u64().unwrap_or(0);
    assert!(
        crashed <= kills * 32,
        "{crashed} lost in {kills} kills: {r:#}"
    );
    assert_eq!(
        r["drops_total"].as_u64().unwrap(),
        crashed,
        "crash losses are the only drops: {r:#}"
    );
    assert_eq!(r["packets_in"], 800_000, "{r:#}");
}

/// Runs a router (routes to build) and a forwarder with `shells`, kills
/// the router twice, and returns the report.
fn kill_router_twice(shells: bool) -> serde_json::Value {
    kill_router_twice_with(shells, "")
}

/// `kill_router_twice` with more keys of `settings.restart`.
fn kill_router_twice_with(shells: bool, restart: &str) -> serde_json::Value {
    let nfs = "  - name: r
    type: router
    isolation: process
    config:
      interfaces: [{ port: out, mac: \"02:00:00:00:01:01\", addresses: [192.168.1.254/24] }]
      routes: [default via 192.168.1.1 dev out]
      neighbours: [{ ip: 192.168.1.1, mac: \"02:00:00:00:00:01\", dev: out }]
  - { name: f, type: forwarder, isolation: process }
";
    let spec = chain_spec(
        100_000,
        nfs,
        "r, f",
        &format!("policy: always, backoff_ms: 0{restart}"),
    )
    .replace("rate_pps: 100000 }", "rate_pps: 100000, count: 300000 }")
    .replace("settings:\n", &format!("settings:\n  shells: {shells}\n"));
    let (_d, path) = spec_file(&spec);
    let child = start_run(&path);
    let pid = child.id();
    wait_for(pid, "nf:f", 1);
    for _ in 0..2 {
        let r = wait_for(pid, "nf:r", 1)[0];
        std::thread::sleep(Duration::from_millis(200));
        if !restart.is_empty() {
            // The router's standby waits, under its own name.
            wait_for(pid, "sb:r", 1);
        }
        kill_9(r);
        // Until the next instance runs (and is not the one just killed).
        for _ in 0..500 {
            if descendants_named(pid, "nf:r").iter().any(|&p| p != r) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let (out, r) = finish_json(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    r
}

#[test]
fn restarts_are_forks_of_the_built_nf_unless_shells_are_off() {
    // With shells (the default) the template builds each NF once and
    // every start, first or restart, is a fork of it.
    let on = kill_router_twice(true);
    assert_eq!(nf(&on, "r")["restarts"], 2, "{on:#}");
    assert_eq!(nf(&on, "r")["shell_starts"], 3, "{on:#}");
    assert_eq!(nf(&on, "f")["shell_starts"], 1, "{on:#}");
    assert_eq!(nf(&on, "r")["restart_times"]["count"], 2, "{on:#}");
    // Off: every instance builds its own NF, and the platform says so.
    let r = kill_router_twice(false);
    assert_eq!(nf(&r, "r")["restarts"], 2, "{r:#}");
    assert_eq!(nf(&r, "r")["shell_starts"], 0, "{r:#}");
    assert_eq!(nf(&r, "f")["shell_starts"], 0, "{r:#}");
    // Either way the router routed: only the crashes cost packets.
    for r in [&on, &r] {
        let crashed = r["drops"]["nf_crashed"].as_u64().unwrap_or(0);
        assert_eq!(r["drops_total"].as_u64().unwrap(), crashed, "{r:#}");
        assert_eq!(r["packets_in"], 300_000, "{r:#}");
    }
}

#[test]
fn with_standbys_each_restart_is_a_take_over() {
    let r = kill_router_twice_with(true, ", standby: true");
    let router = nf(&r, "r");
    assert_eq!(router["restarts"], 2, "{r:#}");
    // The first start forks; each restart finds the standby made after
    // the start before it.
    assert_eq!(router["standby_starts"], 2, "{r:#}");
    assert_eq!(router["shell_starts"], 3, "{r:#}");
    assert_eq!(router["restart_times"]["count"], 2, "{r:#}");
    assert_eq!(nf(&r, "f")["standby_starts"], 0, "{r:#}");
    let crashed = r["drops"]["nf_crashed"].as_u64().unwrap_or(0);
    assert_eq!(r["drops_total"].as_u64().unwrap(), crashed, "{r:#}");
    assert_eq!(r["packets_in"], 300_000, "{r:#}");
}

#[test]
fn standbys_follow_the_nfs_they_stand_by_for() {
    let d = Daemon::start();
    let spec = |standby: bool, nfs: &[&str]| {
        let block: String = nfs
            .iter()
            .map(|n| format!("  - {{ name: {n}, type: forwarder, isolation: process }}\n"))
            .collect();
        chain_spec(
            1_000,
            &block,
            &nfs.join(", "),
            &format!("policy: always, standby: {standby}"),
        )
    };
    let pid = d.child.id();
    let standbys = |n: usize| {
        let t = std::time::Instant::now();
        loop {
            let found = descendants_named(pid, "sb:a").len() + descendants_named(pid, "sb:b").len();
            if found == n {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{found} standbys, not {n}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    d.apply(&spec(true, &["a", "b"]));
    standbys(2);
    // An NF removed: its standby goes with it.
    d.apply(&spec(true, &["a"]));
    standbys(1);
    assert_eq!(descendants_named(pid, "sb:a").len(), 1);
    // Turned off: the next start of `a` finds none and makes none.
    d.apply(&spec(false, &["a"]));
    let a = d.running_pids(1)[0];
    kill_9(a as u32);
    standbys(0);
    let t = std::time::Instant::now();
    while d.running_pids(1)[0] == a {
        assert!(t.elapsed() < Duration::from_secs(20), "a did not restart");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    standbys(0);
    let stats = d.stats();
    let a = stats["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "a")
        .cloned()
        .unwrap();
    assert_eq!(a["standby_starts"], 0, "{a:#}");
    assert_eq!(a["restarts"], 1, "{a:#}");
}

#[test]
fn a_killed_template_is_restarted_with_its_nfs() {
    let nfs = "  - { name: f, type: forwarder, isolation: process }\n  - { name: m, type: monitor, isolation: process }\n";
    let spec = chain_spec(200_000, nfs, "f, m", "policy: always, backoff_ms: 5")
        .replace("rate_pps: 200000 }", "rate_pps: 200000, count: 400000 }");
    let (_d, path) = spec_file(&spec);
    let child = start_run(&path);
    let pid = child.id();
    wait_for(pid, "nf:f", 1);
    wait_for(pid, "nf:m", 1);
    let template = wait_for(pid, "sluice-template", 1)[0];
    std::thread::sleep(Duration::from_millis(300));
    kill_9(template);
    let (out, r) = finish_json(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_accounted(&r);
    assert_eq!(r["template_restarts"], 1, "{r:#}");
    for n in ["f", "m"] {
        assert_eq!(nf(&r, n)["restarts"], 1, "{n}: {r:#}");
        assert!(
            nf(&r, n)["last_exit"]
                .as_str()
                .unwrap()
                .contains("with its template"),
            "{r:#}"
        );
    }
    assert!(stderr.contains("template of worker 0 died"), "{stderr}");
    // Traffic resumed through the new template's NFs: at 200 000 packets/s
    // at most ~100 000 passed before the kill.
    assert_eq!(r["packets_in"], 400_000, "{r:#}");
    assert!(nf(&r, "m")["packets"].as_u64().unwrap() > 200_000, "{r:#}");
}

#[test]
fn seven_hundred_process_nfs_start_and_each_carries_its_chain() {
    // One generator, one chain per UDP destination port, each through its
    // own process forwarder: 680 or more once deadlocked at start (both
    // ends of the template's socket blocked on a full buffer).
    const N: usize = 700;
    let mut spec = format!(
        "settings:\n  buffers: 65536\n  ring_size: 64\nports:\n  - {{ name: gen, kind: generator, flows: {N}, protocol: udp, size: 64, rate_pps: 70000, count: 70000, dst_ports: 1000-{} }}\n  - {{ name: out, kind: sink }}\nnfs:\n",
        1000 + N - 1
    );
    for i in 0..N {
        spec += &format!("  - {{ name: f{i}, type: forwarder, isolation: process }}\n");
    }
    spec += "chains:\n";
    for i in 0..N {
        spec += &format!(
            "  - {{ name: c{i}, from: gen, match: {{ proto: udp, dst_port: {} }}, nfs: [f{i}], to: out }}\n",
            1000 + i
        );
    }
    let (_d, path) = spec_file(&spec);
    let out = sluice()
        .args(["run", path.to_str().unwrap(), "--json", "--duration", "300"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["packets_out"], 70_000, "{r:#}");
    let nfs = r["nfs"].as_array().unwrap();
    assert_eq!(nfs.len(), N);
    // The generator draws each flow's port at random from the range, so
    // not every chain gets a flow; each packet crossed exactly one NF.
    let through: u64 = nfs.iter().map(|n| n["packets"].as_u64().unwrap()).sum();
    assert_eq!(through, 70_000, "{r:#}");
    let busy = nfs
        .iter()
        .filter(|n| n["packets"].as_u64().unwrap() > 0)
        .count();
    assert!(busy > N / 2, "{busy} of {N} NFs carried traffic");
}

#[test]
fn a_chain_of_100_process_nfs_delivers_every_packet() {
    let names: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
    let nfs: String = names
        .iter()
        .map(|n| format!("  - {{ name: {n}, type: forwarder, isolation: process }}\n"))
        .collect();
    let spec = chain_spec(20_000, &nfs, &names.join(", "), "policy: always")
        .replace("rate_pps: 20000 }", "rate_pps: 20000, count: 20000 }");
    let (_d, path) = spec_file(&spec);
    let (out, r) = run_json(&path, 120.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["packets_out"], 20_000, "{r:#}");
}
